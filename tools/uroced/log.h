// Daemon logging: one line per event on stderr, with a level and the time,
// so a foreground uroced reads well in a terminal and in CI logs.
#pragma once

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>

namespace uroce::daemon {

// True: nothing is written (the control-socket fuzz target runs the server
// millions of times in one process). The daemon never sets it.
inline bool& log_quiet() {
    static bool quiet = false;
    return quiet;
}
inline void set_log_quiet(bool quiet) { log_quiet() = quiet; }

template <typename... Args>
void log_line(const char* level, fmt::format_string<Args...> f, Args&&... args) {
    if (log_quiet()) {
        return;
    }
    const auto now = std::chrono::system_clock::now();
    fmt::print(stderr, "{:%H:%M:%S} uroced {}: {}\n", fmt::localtime(std::chrono::system_clock::to_time_t(now)), level,
               fmt::format(f, std::forward<Args>(args)...));
}

template <typename... Args>
void log_info(fmt::format_string<Args...> f, Args&&... args) {
    log_line("info", f, std::forward<Args>(args)...);
}

template <typename... Args>
void log_warn(fmt::format_string<Args...> f, Args&&... args) {
    log_line("warning", f, std::forward<Args>(args)...);
}

template <typename... Args>
void log_error(fmt::format_string<Args...> f, Args&&... args) {
    log_line("error", f, std::forward<Args>(args)...);
}

}  // namespace uroce::daemon
