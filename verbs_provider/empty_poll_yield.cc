#include "empty_poll_yield.h"

#include <sched.h>
#include <time.h>

namespace uroce::provider {

std::int64_t monotonic_ns() noexcept {
    timespec t{};
    ::clock_gettime(CLOCK_MONOTONIC, &t);
    return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

void after_empty_poll(EmptyPollYield& yield) noexcept {
    const std::int64_t now = monotonic_ns();
    if (yield.empty_should_yield(now)) {
        ::sched_yield();
        yield.yielded(now, monotonic_ns());
    }
}

}  // namespace uroce::provider
