// Async-event delivery (tools/uroced/async_events.h): never blocks, keeps a
// bounded backlog while the client's pipe is full, drops and counts beyond,
// and hands the backlog over in order as the client reads.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "async_events.h"

namespace uroce::daemon {
namespace {

struct Pipe {
    int read_end = -1;
    int write_end = -1;
    Pipe() {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) == 0) {
            read_end = fds[0];
            write_end = fds[1];
        }
    }
    ~Pipe() {
        if (read_end >= 0) {
            ::close(read_end);
        }
    }
};

std::vector<AsyncRecord> drain(int fd) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    std::vector<AsyncRecord> out;
    AsyncRecord r;
    while (::read(fd, &r, sizeof r) == static_cast<ssize_t>(sizeof r)) {
        out.push_back(r);
    }
    return out;
}

TEST(AsyncEventQueue, FullPipeBacklogsThenDropsWithoutBlocking) {
    Pipe p;
    ASSERT_GE(p.read_end, 0);
    AsyncEventQueue q(p.write_end);
    std::uint64_t written = 0;
    std::uint64_t queued = 0;
    std::uint64_t dropped = 0;
    const std::uint64_t total = 4096 + AsyncEventQueue::kMaxBacklog + 10;
    for (std::uint64_t i = 0; i < total; ++i) {
        switch (q.push(AsyncRecord{i, 1, 0})) {
            case Delivery::Written:
                ++written;
                break;
            case Delivery::Queued:
                ++queued;
                break;
            case Delivery::Dropped:
                ++dropped;
                break;
        }
    }
    EXPECT_EQ(written, 4096u);  // a pipe's default 64 KiB
    EXPECT_EQ(queued, AsyncEventQueue::kMaxBacklog);
    EXPECT_EQ(dropped, 10u);
    EXPECT_EQ(q.dropped(), 10u);
    EXPECT_TRUE(q.backlogged());

    // The client reads; the backlog follows, in order.
    std::vector<AsyncRecord> got = drain(p.read_end);
    q.flush();
    EXPECT_FALSE(q.backlogged());
    const std::vector<AsyncRecord> rest = drain(p.read_end);
    got.insert(got.end(), rest.begin(), rest.end());
    ASSERT_EQ(got.size(), 4096u + AsyncEventQueue::kMaxBacklog);
    for (std::size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].element, i);
    }
}

TEST(AsyncEventQueue, AClosedReaderLosesEventsQuietly) {
    ::signal(SIGPIPE, SIG_IGN);  // as uroced does (main.cc): EPIPE instead
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    AsyncEventQueue q(fds[1]);
    ::close(fds[0]);
    EXPECT_EQ(q.push(AsyncRecord{1, 0, 0}), Delivery::Written);  // nobody to tell: as delivered
    EXPECT_FALSE(q.backlogged());
}

TEST(AsyncEventQueue, WriteEndIsNonBlocking) {
    Pipe p;
    AsyncEventQueue q(p.write_end);
    EXPECT_NE(::fcntl(q.fd(), F_GETFL) & O_NONBLOCK, 0);
}

}  // namespace
}  // namespace uroce::daemon
