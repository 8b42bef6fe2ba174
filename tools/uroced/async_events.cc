#include "async_events.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace uroce::daemon {

AsyncEventQueue::AsyncEventQueue(int write_fd) : fd_(write_fd) {
    if (fd_.valid()) {
        const int flags = ::fcntl(fd_.get(), F_GETFL);
        if (flags >= 0) {
            ::fcntl(fd_.get(), F_SETFL, flags | O_NONBLOCK);
        }
    }
}

AsyncEventQueue::~AsyncEventQueue() = default;
AsyncEventQueue::AsyncEventQueue(AsyncEventQueue&& other) noexcept = default;
AsyncEventQueue& AsyncEventQueue::operator=(AsyncEventQueue&& other) noexcept = default;

bool AsyncEventQueue::write_one(const AsyncRecord& record) {
    if (!fd_.valid() || broken_) {
        return true;  // nobody to tell: as delivered
    }
    for (;;) {
        // 16 bytes < PIPE_BUF: the write is atomic, all or nothing (pipe(7)).
        const ssize_t n = ::write(fd_.get(), &record, sizeof record);
        if (n == static_cast<ssize_t>(sizeof record)) {
            return true;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno == EAGAIN) {
            return false;
        }
        broken_ = true;  // EPIPE: the client closed its end
        backlog_.clear();
        return true;
    }
}

Delivery AsyncEventQueue::push(const AsyncRecord& record) {
    if (backlog_.empty() && write_one(record)) {
        return Delivery::Written;
    }
    if (backlog_.size() >= kMaxBacklog) {
        ++dropped_;
        return Delivery::Dropped;
    }
    backlog_.push_back(record);
    return Delivery::Queued;
}

void AsyncEventQueue::flush() {
    while (!backlog_.empty() && write_one(backlog_.front())) {
        if (!backlog_.empty()) {
            backlog_.pop_front();
        }
    }
}

}  // namespace uroce::daemon
