// epoll_ctl(2) with its result checked: adding a descriptor says whether it
// worked and logs why not; removing one logs a failure (a descriptor the set
// no longer holds, ENOENT, is not one: removal is idempotent for callers).
#pragma once

#include <sys/epoll.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "log.h"

namespace uroce::daemon {

// `what` names the descriptor in the log ("client socket", "pidfd").
[[nodiscard]] inline bool epoll_watch(int epoll_fd, int fd, std::uint32_t events, const char* what) {
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        log_warn("cannot watch {} (fd {}): epoll_ctl: {}", what, fd, std::strerror(errno));
        return false;
    }
    return true;
}

inline void epoll_unwatch(int epoll_fd, int fd, const char* what) {
    if (::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr) != 0 && errno != ENOENT) {
        log_warn("cannot stop watching {} (fd {}): epoll_ctl: {}", what, fd, std::strerror(errno));
    }
}

}  // namespace uroce::daemon
