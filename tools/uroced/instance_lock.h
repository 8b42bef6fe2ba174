// One uroced per device name and state directory: <state-dir>/<name>.lock,
// flock(2)ed for the daemon's whole life and holding its pid. A second
// daemon on the same state directory and name fails to take it and names the
// pid that holds it, instead of stealing the control socket. A lock file a
// crashed (or SIGKILLed) daemon left is not locked (the kernel drops flock
// locks with the last descriptor), so the next start takes it over and knows
// the state it finds is stale.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "common/unique_fd.h"

namespace uroce::daemon {

class InstanceLock {
public:
    enum class Outcome : std::uint8_t {
        Acquired,     // nobody held it
        HeldByOther,  // another live uroced holds it: holder_pid() says who
        Failed,       // cannot create or lock the file: problem() says why
    };

    InstanceLock(const std::filesystem::path& state_dir, const std::string& name);
    // Removes the lock file (while still holding the lock), then releases it.
    ~InstanceLock();
    InstanceLock(const InstanceLock&) = delete;
    InstanceLock& operator=(const InstanceLock&) = delete;

    [[nodiscard]] Outcome outcome() const { return outcome_; }
    // The pid the holder wrote (HeldByOther; empty when it did not write one yet).
    [[nodiscard]] std::optional<pid_t> holder_pid() const { return holder_; }
    [[nodiscard]] const std::string& problem() const { return problem_; }
    // Whether the file was there (unlocked) before we took it: the last
    // daemon of this name did not stop cleanly.
    [[nodiscard]] bool found_stale() const { return found_stale_; }
    [[nodiscard]] const std::filesystem::path& path() const { return path_; }

private:
    // One attempt; false when the file we locked was unlinked or replaced
    // meanwhile (a holder stopping), so the caller tries again.
    bool try_once();

    std::filesystem::path path_;
    UniqueFd fd_;
    Outcome outcome_ = Outcome::Failed;
    std::optional<pid_t> holder_;
    std::string problem_;
    bool found_stale_ = false;
};

}  // namespace uroce::daemon
