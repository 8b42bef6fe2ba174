// Waking threads blocked in ibv_get_cq_event when uroced dies.
//
// A thread blocked in ibv_get_cq_event sleeps in read(2) on its completion
// channel's pipe and calls no provider function, so the checks of
// device_loss.cc never run for it. A stopping daemon writes one event on
// every channel; a killed one (SIGKILL, a crash) writes nothing, and the
// pipe's write end is held by the program itself (comp_channel_preload.c), so
// the reader never sees end-of-file either. So each context that has a CQ
// with a channel gets one thread that sleeps in poll(2) on its control
// socket and, when the daemon hangs up, marks the connection gone (the
// device-loss path: poll_cq then hands out the flushed completions) and
// writes one event on the channel of every such CQ, as a device in fatal
// error calls every CQ's completion handler. The program wakes, polls, sees
// IBV_WC_WR_FLUSH_ERR and ends.
//
// Why a thread, and not a pipe whose only writer is the daemon: CREATE_CQ
// passes the channel's write end with each CQ, and the provider writes the
// event itself when a CQ is armed after the loss (verbs_cq.cc); giving the
// daemon the only copy would need a channel object in the control protocol
// and would lose that self-wakeup. The thread costs nothing on the data
// path (poll_cq, the post verbs never touch it), only exists for programs
// that use channels, and sleeps until the daemon goes or the context closes.
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

#include "provider.h"

namespace uroce::provider {

namespace {

// Writes one event (the CQ pointer ibv_get_cq_event reads) unless the pipe
// is full: a full pipe already wakes the reader, and a blocking write here
// could keep ibv_close_device waiting for a program that never reads.
void write_event(int notify_fd, const ibv_cq* cq) {
    pollfd p{notify_fd, POLLOUT, 0};
    if (::poll(&p, 1, 0) != 1 || (p.revents & POLLOUT) == 0) {
        return;
    }
    const std::uint64_t cookie = reinterpret_cast<std::uintptr_t>(cq);
    [[maybe_unused]] const ssize_t w = ::write(notify_fd, &cookie, sizeof cookie);
}

}  // namespace

LossWatcher::~LossWatcher() { stop(); }

int LossWatcher::watch(DaemonLink& link, Cq* cq) {
    std::lock_guard lock(mutex_);
    if (state_ == State::Idle) {
        if (const int err = start(link); err != 0) {
            return err;
        }
    }
    cqs_.push_back(cq);
    return 0;
}

void LossWatcher::unwatch(Cq* cq) {
    std::lock_guard lock(mutex_);
    if (auto it = std::find(cqs_.begin(), cqs_.end(), cq); it != cqs_.end()) {
        cqs_.erase(it);
    }
}

int LossWatcher::start(DaemonLink& link) {
    // A copy of the socket: the link closes its own when a request finds
    // the connection broken, and the number could then be reused.
    socket_fd_.reset(link.dup_socket());
    if (!socket_fd_.valid()) {
        return errno;
    }
    stop_fd_.reset(::eventfd(0, EFD_CLOEXEC));
    if (!stop_fd_.valid()) {
        const int err = errno;
        close_fds();
        return err;
    }
    // The thread takes no signals: they stay the program's own threads' to
    // handle, as if the provider had no thread.
    sigset_t all;
    sigset_t old;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &old);
    try {
        thread_ = std::thread([this, watched = &link] { run(*watched); });
    } catch (const std::system_error& e) {
        ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
        close_fds();
        return e.code().value();
    }
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    state_ = State::Running;
    return 0;
}

void LossWatcher::run(DaemonLink& link) {
    // The socket's POLLHUP/POLLRDHUP/POLLERR (a SEQPACKET peer that exited
    // or was killed) or the stop eventfd; POLLIN is not asked for, so replies
    // to the program's own requests do not wake the thread.
    pollfd fds[2] = {{socket_fd_.get(), POLLRDHUP, 0}, {stop_fd_.get(), POLLIN, 0}};
    for (;;) {
        const int n = ::poll(fds, 2, -1);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 || fds[1].revents != 0) {
            return;  // closing (or poll itself broken: nothing to watch)
        }
        if ((fds[0].revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) != 0) {
            break;
        }
    }
    link.mark_gone();
    std::lock_guard lock(mutex_);
    for (const Cq* cq : cqs_) {
        write_event(cq->channel_notify_fd, &cq->vcq.cq);
    }
}

void LossWatcher::stop() {
    std::unique_lock lock(mutex_);
    if (state_ != State::Running) {
        return;
    }
    state_ = State::Stopped;
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t w = ::write(stop_fd_.get(), &one, sizeof one);
    lock.unlock();  // the thread takes the mutex to write its events
    thread_.join();
    close_fds();
}

void LossWatcher::close_fds() {
    socket_fd_.reset();
    stop_fd_.reset();
}

}  // namespace uroce::provider
