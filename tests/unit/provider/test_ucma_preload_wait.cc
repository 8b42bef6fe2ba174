// The preload's rdma_cm GET_EVENT (verbs_provider/ucma_preload.c) against a
// fake uroced: a wait that another thread's close() of the channel fd
// overtakes stays a wait, as on the kernel's device, where the blocked
// write() holds the file and ucma.c ucma_get_event keeps waiting for an event
// (one purged by DESTROY_ID does not end it). rping's client destroys its id
// and event channel while its cm thread still waits; a wait that woke for a
// purged event and then failed with EBADF made rping print
// "rdma_get_cm_event: Bad file descriptor" and exit 255 after its data had
// moved.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <rdma/rdma_user_cm.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include "abi/control.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::uint32_t kChannelHandle = 7;
// RDMA_CM_EVENT_DISCONNECTED (enum rdma_cm_event_type; the uapi header does
// not carry the event numbers).
constexpr std::uint32_t kDisconnectedEvent = 10;
// Bounds the polls for a thread's state: far longer than any scheduling delay.
constexpr auto kDeadline = std::chrono::seconds(10);

// A control socket answering CM_OPEN_CHANNEL and CM_GET_EVENT as uroced
// does, GET_EVENT from a script (ENOENT: the event was purged), and the
// channel's doorbell end to ring by hand. Found through a SYSFS_PATH tree
// as `uroce exec` sets it.
class FakeDaemon {
public:
    FakeDaemon() {
        char tmpl[] = "/tmp/uroce-ucma-wait-XXXXXX";
        dir_ = ::mkdtemp(tmpl);
        const fs::path device = dir_ / "sys/class/infiniband/uroce0";
        fs::create_directories(device);
        const std::string socket_path = (dir_ / "ctl.sock").string();
        std::ofstream(device / "uroce_control_socket") << socket_path << "\n";
        listener_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
        bound_ = ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                 ::listen(listener_, 1) == 0;
        ::setenv("SYSFS_PATH", (dir_ / "sys").c_str(), 1);
        server_ = std::thread([this] { serve(); });
    }

    ~FakeDaemon() {
        ::shutdown(listener_, SHUT_RDWR);
        {
            std::lock_guard lock(mu_);
            stopping_ = true;
            if (connection_ >= 0) {
                ::shutdown(connection_, SHUT_RDWR);
            }
        }
        answers_ready_.notify_all();
        server_.join();
        for (int fd : {listener_, connection_, doorbell_}) {
            if (fd >= 0) {
                ::close(fd);
            }
        }
        ::unsetenv("SYSFS_PATH");
        fs::remove_all(dir_);
    }

    bool bound() const { return bound_; }

    // The next CM_GET_EVENT's answer: `status` (0 or ENOENT) and, with 0,
    // an event of type `event`.
    void script_get_event(std::int32_t status, std::uint32_t event = 0) {
        std::lock_guard lock(mu_);
        answers_.push_back({status, event});
        answers_ready_.notify_all();
    }

    // One doorbell byte, as uroced writes one per event queued.
    bool ring() {
        std::lock_guard lock(mu_);
        const std::uint8_t bell = 1;
        return doorbell_ >= 0 && ::send(doorbell_, &bell, 1, MSG_NOSIGNAL) == 1;
    }

private:
    struct Answer {
        std::int32_t status;
        std::uint32_t event;
    };

    void serve() {
        const int c = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        {
            std::lock_guard lock(mu_);
            connection_ = c;
            if (c < 0 || stopping_) {
                return;
            }
        }
        for (;;) {
            uroce_ctrl_cm_command request{};  // the largest request the preload sends
            alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
            iovec iov{&request, sizeof request};
            msghdr mh{};
            mh.msg_iov = &iov;
            mh.msg_iovlen = 1;
            mh.msg_control = control;
            mh.msg_controllen = sizeof control;
            if (::recvmsg(c, &mh, MSG_CMSG_CLOEXEC) < static_cast<ssize_t>(sizeof(uroce_ctrl_hdr))) {
                return;
            }
            if (request.hdr.op == UROCE_CTRL_CM_OPEN_CHANNEL) {
                open_channel(c, request.hdr, mh);
            } else if (request.hdr.op == UROCE_CTRL_CM_GET_EVENT) {
                if (!get_event(c, request.hdr)) {
                    return;
                }
            } else {
                reply_status(c, request.hdr, ENOSYS);
            }
        }
    }

    void open_channel(int c, const uroce_ctrl_hdr& request, msghdr& mh) {
        const cmsghdr* cm = CMSG_FIRSTHDR(&mh);
        int doorbell = -1;
        if (cm != nullptr && cm->cmsg_type == SCM_RIGHTS) {
            std::memcpy(&doorbell, CMSG_DATA(cm), sizeof doorbell);
        }
        {
            std::lock_guard lock(mu_);
            doorbell_ = doorbell;
        }
        uroce_ctrl_handle reply{};
        reply.hdr = answer_header(request, doorbell >= 0 ? 0 : EINVAL, sizeof reply);
        reply.handle = kChannelHandle;
        ::send(c, &reply, sizeof reply, MSG_NOSIGNAL);
    }

    bool get_event(int c, const uroce_ctrl_hdr& request) {
        std::unique_lock lock(mu_);
        answers_ready_.wait(lock, [this] { return stopping_ || !answers_.empty(); });
        if (stopping_) {
            return false;
        }
        const Answer a = answers_.front();
        answers_.pop_front();
        lock.unlock();
        uroce_ctrl_cm_event reply{};
        reply.hdr = answer_header(request, a.status, sizeof reply);
        rdma_ucm_event_resp event{};
        event.event = a.event;
        std::memcpy(reply.event, &event, std::min(sizeof event, sizeof reply.event));
        ::send(c, &reply, sizeof reply, MSG_NOSIGNAL);
        return true;
    }

    static void reply_status(int c, const uroce_ctrl_hdr& request, std::int32_t status) {
        const uroce_ctrl_hdr reply = answer_header(request, status, sizeof reply);
        ::send(c, &reply, sizeof reply, MSG_NOSIGNAL);
    }

    static uroce_ctrl_hdr answer_header(const uroce_ctrl_hdr& request, std::int32_t status, std::size_t length) {
        uroce_ctrl_hdr h = request;
        h.length = static_cast<std::uint32_t>(length);
        h.status = status;
        return h;
    }

    fs::path dir_;
    int listener_ = -1;
    bool bound_ = false;
    std::thread server_;
    std::mutex mu_;
    std::condition_variable answers_ready_;
    std::deque<Answer> answers_;
    bool stopping_ = false;
    int connection_ = -1;
    int doorbell_ = -1;
};

// What a GET_EVENT write() returned on another thread.
struct WaitResult {
    ssize_t returned = 0;
    int error = 0;
    std::uint32_t event = 0;
};

// The system call thread `tid` is blocked in (/proc/<pid>/task/<tid>/syscall's
// first field), or -1 while it runs.
long blocked_in(pid_t tid) {
    std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/syscall");
    long nr = -1;
    return (f >> nr) ? nr : -1;
}

TEST(UcmaPreloadGetEvent, AWaitOvertakenByCloseOutlivesAPurgedEventLikeTheKernels) {
    FakeDaemon daemon;
    ASSERT_TRUE(daemon.bound());
    const int fd = ::open("/dev/infiniband/rdma_cm", O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    struct stat st{};
    ASSERT_EQ(::fstat(fd, &st), 0);
    ASSERT_TRUE(S_ISCHR(st.st_mode)) << "the preload library is not interposing";

    std::atomic<pid_t> waiter_tid{0};
    std::atomic<bool> done{false};
    WaitResult result;
    std::thread waiter([&] {
        waiter_tid = static_cast<pid_t>(::syscall(SYS_gettid));
        rdma_ucm_event_resp resp{};
        struct {
            rdma_ucm_cmd_hdr hdr;
            rdma_ucm_get_event body;
        } cmd{};
        cmd.hdr.cmd = RDMA_USER_CM_CMD_GET_EVENT;
        cmd.hdr.in = sizeof cmd.body;
        cmd.hdr.out = sizeof resp;
        cmd.body.response = reinterpret_cast<std::uintptr_t>(&resp);
        result.returned = ::write(fd, &cmd, sizeof cmd);
        result.error = errno;
        result.event = resp.event;
        done = true;
    });

    // The waiter reads its doorbell (recvfrom) before the fd goes.
    const auto deadline = Clock::now() + kDeadline;
    while ((waiter_tid == 0 || blocked_in(waiter_tid) != SYS_recvfrom) && !done && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_FALSE(done) << "GET_EVENT returned before any event: " << std::strerror(result.error);
    ASSERT_EQ(blocked_in(waiter_tid), SYS_recvfrom);

    // rping's main: the channel goes (rdma_destroy_event_channel) while the
    // cm thread waits; then the id's event, already rung, is purged.
    ASSERT_EQ(::close(fd), 0);
    daemon.script_get_event(ENOENT);
    daemon.script_get_event(0, kDisconnectedEvent);
    ASSERT_TRUE(daemon.ring());
    ASSERT_TRUE(daemon.ring());
    waiter.join();

    EXPECT_EQ(result.returned, static_cast<ssize_t>(sizeof(rdma_ucm_cmd_hdr) + sizeof(rdma_ucm_get_event)))
        << std::strerror(result.error);
    EXPECT_EQ(result.event, kDisconnectedEvent);
}

}  // namespace
