// When uroced stops or dies under a program: the provider notices by itself
// (the control socket hangs up; SIGKILL gives no IBV_EVENT_DEVICE_FATAL) and
// does what a kernel driver does for a device in fatal error (Linux mlx5's
// "internal error" state): every work request posted and not completed
// completes with IBV_WC_WR_FLUSH_ERR on its CQ, after the completions the
// daemon wrote, and later posts fail with EIO. So a program polling its CQs
// sees errors and ends instead of spinning on empty CQs. docs/provider.md.
#include <time.h>

#include <algorithm>

#include "provider.h"

namespace uroce::provider {

namespace {

// How often an empty CQ looks at the socket: a poll(2) costs about what the
// sched_yield of every empty poll_cq does; a few ms is nothing next to the
// seconds a program may take to notice.
constexpr std::int64_t kCheckIntervalNs = 2'000'000;

// CLOCK_MONOTONIC_COARSE: a vDSO read of the last tick, no system call.
std::int64_t coarse_now_ns() {
    timespec t{};
    ::clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
    return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

template <typename T>
void erase_one(std::vector<T*>& v, T* item) {
    if (auto it = std::find(v.begin(), v.end(), item); it != v.end()) {
        v.erase(it);
    }
}

}  // namespace

void DeviceLoss::add(Qp* qp) {
    std::lock_guard lock(mutex_);
    qps_.push_back(qp);
}

void DeviceLoss::remove(Qp* qp) {
    std::lock_guard lock(mutex_);
    erase_one(qps_, qp);
}

void DeviceLoss::add(Srq* srq) {
    std::lock_guard lock(mutex_);
    srqs_.push_back(srq);
}

void DeviceLoss::remove(Srq* srq) {
    std::lock_guard lock(mutex_);
    erase_one(srqs_, srq);
}

bool DeviceLoss::device_gone(DaemonLink& link) {
    if (link.gone()) {
        return true;
    }
    const std::int64_t now = coarse_now_ns();
    std::int64_t due = next_check_ns_.load(std::memory_order_relaxed);
    // One poller looks; the others go on until the next interval.
    if (now < due || !next_check_ns_.compare_exchange_strong(due, now + kCheckIntervalNs)) {
        return false;
    }
    return link.hung_up();
}

void DeviceLoss::collect_flushes(const ibv_cq* cq, std::vector<ibv_wc>& out) {
    std::lock_guard lock(mutex_);
    for (Qp* qp : qps_) {
        const ibv_qp& q = qp->vqp.qp;
        if (q.send_cq == cq) {
            qp->sq.flush_outstanding(q.qp_num, out);
        }
        if (q.recv_cq == cq && q.srq == nullptr) {
            qp->rq.flush_outstanding(q.qp_num, out);
        }
    }
    // An SRQ's WQEs belong to no QP until one takes them: they complete on
    // the receive CQ of the first QP (in creation order) attached to it.
    for (Srq* srq : srqs_) {
        const auto first = std::find_if(qps_.begin(), qps_.end(),
                                        [srq](const Qp* qp) { return qp->vqp.qp.srq == &srq->srq; });
        if (first != qps_.end() && (*first)->vqp.qp.recv_cq == cq) {
            srq->rq.flush_outstanding((*first)->vqp.qp.qp_num, out);
        }
    }
}

int FlushedCompletions::poll(DeviceLoss& loss, const ibv_cq* cq, int num_entries, ibv_wc* wc) {
    std::lock_guard lock(mutex_);
    if (stage_ == Stage::NotCollected) {
        loss.collect_flushes(cq, pending_);
        stage_ = Stage::Collected;
    }
    const std::size_t n = std::min(pending_.size() - next_, static_cast<std::size_t>(std::max(num_entries, 0)));
    std::copy_n(pending_.begin() + static_cast<std::ptrdiff_t>(next_), n, wc);
    next_ += n;
    return static_cast<int>(n);
}

bool FlushedCompletions::pending() {
    std::lock_guard lock(mutex_);
    return stage_ == Stage::NotCollected || next_ < pending_.size();
}

}  // namespace uroce::provider
