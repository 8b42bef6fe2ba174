// Async events (ibv_get_async_event) on their way to one client: the write
// end of the client's async-event pipe, made non-blocking, and a bounded
// backlog for when the pipe is full. Delivery never blocks the daemon: a
// client that never reads its async fd costs the daemon at most
// kMaxBacklog records, and events beyond that are dropped and counted.
//
// The kernel's uverbs does the equivalent (drivers/infiniband/core/
// uverbs_main.c, ib_uverbs_async_handler): each event is a kmalloc'ed entry
// on the async file's list; when that allocation fails the event is dropped
// without telling anyone. Here the bound is explicit and the drop is logged
// once per client and counted (docs/daemon.md, "Async events").
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

#include "common/unique_fd.h"

namespace uroce::daemon {

// What ibv_get_async_event reads (struct ib_uverbs_async_event_desc):
// {element (the object's user pointer), event_type, reserved}.
struct AsyncRecord {
    std::uint64_t element = 0;
    std::uint32_t event_type = 0;
    std::uint32_t reserved = 0;
};
static_assert(sizeof(AsyncRecord) == 16, "ib_uverbs_async_event_desc layout");

enum class Delivery {
    Written,   // in the pipe
    Queued,    // in the backlog: the pipe was full
    Dropped,   // backlog full too: lost (counted)
};

class AsyncEventQueue {
public:
    // Records kept while the pipe is full (on top of the pipe's own 64 KiB,
    // 4096 records): bounds the daemon's memory per client.
    static constexpr std::size_t kMaxBacklog = 1024;

    // Takes `write_fd` (the pipe's write end, which only the daemon holds)
    // and makes it non-blocking; -1 for none. The process must ignore
    // SIGPIPE (uroced does): a client that closed its end gives EPIPE.
    explicit AsyncEventQueue(int write_fd = -1);
    ~AsyncEventQueue();
    AsyncEventQueue(AsyncEventQueue&& other) noexcept;
    AsyncEventQueue& operator=(AsyncEventQueue&& other) noexcept;
    AsyncEventQueue(const AsyncEventQueue&) = delete;
    AsyncEventQueue& operator=(const AsyncEventQueue&) = delete;

    [[nodiscard]] int fd() const { return fd_.get(); }
    Delivery push(const AsyncRecord& record);
    // Moves what the pipe takes from the backlog into it.
    void flush();
    // True while records wait for room in the pipe (the caller watches
    // fd() for EPOLLOUT then).
    [[nodiscard]] bool backlogged() const { return !backlog_.empty(); }
    [[nodiscard]] std::uint64_t dropped() const { return dropped_; }

private:
    // True when the whole record went in; false when the pipe is full (or
    // gone: the client closed its end, and the record is discarded).
    bool write_one(const AsyncRecord& record);

    UniqueFd fd_;
    bool broken_ = false;  // the reader is gone: nothing will be read again
    std::deque<AsyncRecord> backlog_;
    std::uint64_t dropped_ = 0;
};

}  // namespace uroce::daemon
