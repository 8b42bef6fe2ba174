#include "async_events.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace uroce::daemon {

AsyncEventQueue::AsyncEventQueue(int write_fd) : fd_(write_fd) {
    if (fd_ >= 0) {
        const int flags = ::fcntl(fd_, F_GETFL);
        if (flags >= 0) {
            ::fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
        }
    }
}

AsyncEventQueue::~AsyncEventQueue() { close_fd(); }

AsyncEventQueue::AsyncEventQueue(AsyncEventQueue&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      broken_(other.broken_),
      backlog_(std::move(other.backlog_)),
      dropped_(other.dropped_) {}

AsyncEventQueue& AsyncEventQueue::operator=(AsyncEventQueue&& other) noexcept {
    if (this != &other) {
        close_fd();
        fd_ = std::exchange(other.fd_, -1);
        broken_ = other.broken_;
        backlog_ = std::move(other.backlog_);
        dropped_ = other.dropped_;
    }
    return *this;
}

void AsyncEventQueue::close_fd() {
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
}

bool AsyncEventQueue::write_one(const AsyncRecord& record) {
    if (fd_ < 0 || broken_) {
        return true;  // nobody to tell: as delivered
    }
    for (;;) {
        // 16 bytes < PIPE_BUF: the write is atomic, all or nothing (pipe(7)).
        const ssize_t n = ::write(fd_, &record, sizeof record);
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
