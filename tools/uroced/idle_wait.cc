#include "idle_wait.h"

#include <sys/epoll.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "log.h"

namespace uroce::daemon {

namespace {

// The finest timer slack the kernel takes is 1 ns; 1 us keeps naps within a
// microsecond of their deadline while still letting the kernel merge
// wake-ups that close together.
constexpr unsigned long kTimerSlackNs = 1000;

}  // namespace

IdlePolicy::Decision IdlePolicy::after_poll(bool did_work, IdleClock::time_point now,
                                            std::optional<IdleClock::time_point> next_timer, bool have_rx_fd) {
    if (did_work || !last_work_) {
        last_work_ = now;
        return {};
    }
    const auto idle = now - *last_work_;
    if (idle < config_.spin) {
        return {};
    }
    std::chrono::nanoseconds timeout =
        have_rx_fd ? config_.max_sleep_with_rx_fd
                   : std::clamp(std::chrono::duration_cast<std::chrono::nanoseconds>(idle) / config_.nap_divisor,
                                config_.first_nap, config_.max_nap);
    if (next_timer) {
        if (*next_timer <= now) {
            return {};
        }
        timeout = std::min(timeout, std::chrono::duration_cast<std::chrono::nanoseconds>(*next_timer - now));
    }
    return {.sleep = true, .timeout = timeout};
}

IdleWait::IdleWait(IdlePolicyConfig config) : policy_(config) {
    epoll_fd_.reset(epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_fd_.valid()) {
        throw std::system_error(errno, std::generic_category(), "epoll_create1");
    }
    // Best effort: without it naps are merely up to 50 us longer.
    prctl(PR_SET_TIMERSLACK, kTimerSlackNs, 0, 0, 0);
}

IdleWait::~IdleWait() = default;

bool IdleWait::watch(int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
        log_warn("idle wait: cannot watch fd {}: {}", fd, std::strerror(errno));
        return false;
    }
    return true;
}

bool IdleWait::watch_rx(int fd) {
    if (!watch(fd)) {
        return false;
    }
    have_rx_fd_ = true;
    rx_fd_ = fd;
    return true;
}

void IdleWait::unwatch(int fd) {
    // A descriptor closed before it was unwatched has left the set already.
    if (epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, fd, nullptr) != 0 && errno != EBADF && errno != ENOENT) {
        log_warn("idle wait: cannot unwatch fd {}: {}", fd, std::strerror(errno));
    }
    if (fd == rx_fd_) {
        have_rx_fd_ = false;
        rx_fd_ = -1;
    }
}

void IdleWait::after_poll(bool did_work, std::optional<IdleClock::time_point> next_timer) {
    const IdlePolicy::Decision d = policy_.after_poll(did_work, IdleClock::now(), next_timer, have_rx_fd_);
    if (d.sleep) {
        wait(d.timeout);
    }
}

bool IdleWait::wait(std::chrono::nanoseconds timeout) {
    const auto start = IdleClock::now();
    std::array<epoll_event, kMaxReported> events{};
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(timeout);
    const timespec ts{.tv_sec = static_cast<time_t>(seconds.count()),
                      .tv_nsec = static_cast<long>((timeout - seconds).count())};
    int n = epoll_pwait2(epoll_fd_.get(), events.data(), static_cast<int>(events.size()), &ts, nullptr);
    if (n < 0 && errno == ENOSYS) {
        // Kernels before 5.11: millisecond timeouts, rounded up.
        const auto ms = std::chrono::ceil<std::chrono::milliseconds>(timeout);
        n = epoll_wait(epoll_fd_.get(), events.data(), static_cast<int>(events.size()), static_cast<int>(ms.count()));
    }
    counters_.sleeps += 1;
    counters_.slept_ns += static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(IdleClock::now() - start).count());
    after_timeout_ = n == 0;
    fired_count_ = std::max(n, 0);
    for (int i = 0; i < fired_count_; ++i) {
        fired_[static_cast<std::size_t>(i)] = events[static_cast<std::size_t>(i)].data.fd;
    }
    if (n > 0) {
        counters_.woken_by_fd += 1;
        return true;
    }
    return false;  // timeout, or EINTR (a signal: the loop checks its stop flag)
}

bool IdleWait::fired(int fd) const {
    return std::find(fired_.begin(), fired_.begin() + fired_count_, fd) != fired_.begin() + fired_count_;
}

void IdleWait::round_done(bool worked) {
    if (after_timeout_ && worked) {
        counters_.timeouts_then_work += 1;
    }
    after_timeout_ = false;
}

}  // namespace uroce::daemon
