#include "work_queue.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>

namespace uroce::provider {

namespace {

template <typename T>
std::atomic_ref<T> shared(T& field) {
    return std::atomic_ref<T>(field);
}

// Opcodes that carry a payload the send may take inline (ibv_post_send(3):
// "valid only for Send and RDMA Write", with or without immediate data).
bool may_be_inline(ibv_wr_opcode op) {
    switch (op) {
        case IBV_WR_SEND:
        case IBV_WR_SEND_WITH_IMM:
        case IBV_WR_SEND_WITH_INV:
        case IBV_WR_RDMA_WRITE:
        case IBV_WR_RDMA_WRITE_WITH_IMM:
            return true;
        default:
            return false;
    }
}

std::uint64_t total_length(const ibv_sge* sg_list, int num_sge) {
    std::uint64_t total = 0;
    for (int i = 0; i < num_sge; ++i) {
        total += sg_list[i].length;
    }
    return total;
}

void write_sges(std::uint8_t* out, const ibv_sge* sg_list, int num_sge) {
    for (int i = 0; i < num_sge; ++i) {
        uroce_sge s{};
        s.addr = sg_list[i].addr;
        s.length = sg_list[i].length;
        s.lkey = sg_list[i].lkey;
        std::memcpy(out + static_cast<std::size_t>(i) * sizeof s, &s, sizeof s);
    }
}

}  // namespace

bool opcode_allowed(ibv_qp_type type, ibv_wr_opcode op) {
    // An XRC send QP's requests are RC's (IBA annex A14).
    const bool rc = type == IBV_QPT_RC || type == IBV_QPT_XRC_SEND;
    switch (op) {
        case IBV_WR_SEND:
        case IBV_WR_SEND_WITH_IMM:
            return rc || type == IBV_QPT_UC || type == IBV_QPT_UD;
        case IBV_WR_RDMA_WRITE:
        case IBV_WR_RDMA_WRITE_WITH_IMM:
        case IBV_WR_LOCAL_INV:
        case IBV_WR_BIND_MW:
        case IBV_WR_SEND_WITH_INV:
            return rc || type == IBV_QPT_UC;
        case IBV_WR_RDMA_READ:
        case IBV_WR_ATOMIC_CMP_AND_SWP:
        case IBV_WR_ATOMIC_FETCH_AND_ADD:
            return rc;
        default:
            return false;  // TSO, driver-specific opcodes
    }
}

int WorkQueue::attach(void* ring, std::size_t bytes, Kind kind) {
    auto* h = static_cast<uroce_wq_ring*>(ring);
    if (bytes < sizeof *h) {
        return EPROTO;
    }
    const std::uint32_t entries = h->entries;
    const std::uint32_t stride = h->stride;
    const std::uint32_t max_sge = h->max_sge;
    const std::uint32_t max_inline = kind == Kind::Send ? h->max_inline : 0;
    const std::uint64_t wqe = kind == Kind::Send ? sizeof(uroce_send_wqe) : sizeof(uroce_recv_wqe);
    const std::uint64_t payload = std::max<std::uint64_t>(std::uint64_t{max_sge} * sizeof(uroce_sge), max_inline);
    const bool fits = std::uint64_t{stride} >= wqe + payload && stride % 16 == 0 &&
                      sizeof *h + std::uint64_t{entries} * stride <= bytes;
    // A send WQE counts its SGEs in a byte.
    const bool sge_count_fits = kind == Kind::Receive || max_sge <= UINT8_MAX;
    if (h->version != UROCE_RING_VERSION || !std::has_single_bit(entries) || !fits || !sge_count_fits) {
        return EPROTO;
    }
    header_ = h;
    kind_ = kind;
    slots_ = reinterpret_cast<std::uint8_t*>(h + 1);
    entries_ = entries;
    stride_ = stride;
    max_sge_ = max_sge;
    max_inline_ = max_inline;
    producer_ = shared(h->producer).load(std::memory_order_relaxed);
    consumer_ = shared(h->consumer).load(std::memory_order_acquire);
    return 0;
}

std::uint8_t* WorkQueue::next_slot() {
    if (producer_ - consumer_ >= entries_) {
        // Slots below the daemon's consumer are free again (abi/rings.h).
        consumer_ = shared(header_->consumer).load(std::memory_order_acquire);
        if (producer_ - consumer_ >= entries_) {
            return nullptr;
        }
    }
    return slots_ + static_cast<std::size_t>(producer_ & (entries_ - 1)) * stride_;
}

std::uint32_t WorkQueue::free_slots() {
    consumer_ = shared(header_->consumer).load(std::memory_order_acquire);
    return entries_ - std::min(producer_ - consumer_, entries_);
}

void WorkQueue::publish(int doorbell_fd) {
    // The daemon arms the doorbell and then looks at producer once more; we
    // store producer and then look at the doorbell. All four accesses are
    // seq_cst, so at least one side sees the other's store and a WQE is
    // never left behind a sleeping daemon (abi/rings.h). (A seq_cst store
    // rather than release + fence: ThreadSanitizer does not model fences.)
    shared(header_->producer).store(producer_, std::memory_order_seq_cst);
    auto armed = shared(header_->doorbell_armed);
    if (armed.load(std::memory_order_seq_cst) != 0 && armed.exchange(0, std::memory_order_seq_cst) != 0) {
        const std::uint64_t one = 1;
        // An eventfd write fails only when the counter would overflow, in
        // which case the daemon is woken already.
        [[maybe_unused]] const ssize_t n = ::write(doorbell_fd, &one, sizeof one);
    }
}

int WorkQueue::check_send_wr(ibv_qp_type type, const ibv_send_wr& wr) const {
    if (!opcode_allowed(type, wr.opcode) || wr.num_sge < 0 || static_cast<std::uint32_t>(wr.num_sge) > max_sge_ ||
        (wr.num_sge > 0 && wr.sg_list == nullptr)) {
        return EINVAL;
    }
    if ((wr.send_flags & IBV_SEND_INLINE) != 0 &&
        (!may_be_inline(wr.opcode) || total_length(wr.sg_list, wr.num_sge) > max_inline_)) {
        return EINVAL;
    }
    if (type == IBV_QPT_UD && wr.wr.ud.ah == nullptr) {
        return EINVAL;
    }
    if (wr.opcode == IBV_WR_BIND_MW && wr.bind_mw.mw == nullptr) {
        return EINVAL;
    }
    return 0;
}

void WorkQueue::write_send_wqe(ibv_qp_type type, const ibv_send_wr& wr, std::uint8_t* slot) const {
    uroce_send_wqe w{};
    w.wr_id = wr.wr_id;
    w.opcode = static_cast<std::uint8_t>(wr.opcode);
    w.send_flags = wr.send_flags;
    // One union in ibv_send_wr: immediate data (network order) or the rkey
    // to invalidate (LOCAL_INV, SEND_WITH_INV); the WQE keeps the bits.
    w.imm_data = wr.imm_data;
    const bool is_inline = (wr.send_flags & IBV_SEND_INLINE) != 0;
    switch (wr.opcode) {
        case IBV_WR_RDMA_WRITE:
        case IBV_WR_RDMA_WRITE_WITH_IMM:
        case IBV_WR_RDMA_READ:
            w.u.rdma.remote_addr = wr.wr.rdma.remote_addr;
            w.u.rdma.rkey = wr.wr.rdma.rkey;
            break;
        case IBV_WR_ATOMIC_CMP_AND_SWP:
        case IBV_WR_ATOMIC_FETCH_AND_ADD:
            w.u.atomic.remote_addr = wr.wr.atomic.remote_addr;
            w.u.atomic.compare_add = wr.wr.atomic.compare_add;
            w.u.atomic.swap = wr.wr.atomic.swap;
            w.u.atomic.rkey = wr.wr.atomic.rkey;
            break;
        case IBV_WR_BIND_MW: {
            const ibv_mw_bind_info& b = wr.bind_mw.bind_info;
            w.u.bind.addr = b.addr;
            w.u.bind.length = b.length;
            w.u.bind.mw_rkey = wr.bind_mw.rkey;
            w.u.bind.mr_lkey = b.mr != nullptr ? b.mr->lkey : 0;
            w.u.bind.access = b.mw_access_flags;
            break;
        }
        default:
            break;
    }
    if (type == IBV_QPT_XRC_SEND) {
        w.xrc_remote_srqn = wr.qp_type.xrc.remote_srqn;  // XRCETH
    }
    if (type == IBV_QPT_UD) {
        w.u.ud.ah = wr.wr.ud.ah->handle;
        w.u.ud.remote_qpn = wr.wr.ud.remote_qpn;
        w.u.ud.remote_qkey = wr.wr.ud.remote_qkey;
    }
    std::uint8_t* payload = slot + sizeof w;
    if (is_inline) {
        // The data is copied now: the application may reuse its buffers as
        // soon as ibv_post_send returns, and the L_Keys are not checked.
        std::uint32_t at = 0;
        for (int i = 0; i < wr.num_sge; ++i) {
            const ibv_sge& s = wr.sg_list[i];
            if (s.length != 0) {
                std::memcpy(payload + at, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(s.addr)), s.length);
            }
            at += s.length;
        }
        w.inline_len = at;
        w.num_sge = 0;
    } else {
        w.num_sge = static_cast<std::uint8_t>(wr.num_sge);
        write_sges(payload, wr.sg_list, wr.num_sge);
    }
    std::memcpy(slot, &w, sizeof w);
}

int WorkQueue::post_send(ibv_qp_type type, ibv_qp_state state, int doorbell_fd, ibv_send_wr* wr,
                         ibv_send_wr** bad_wr) {
    *bad_wr = nullptr;
    // The send queue takes work from RTS on (RTS, SQD, SQE, ERR: in the
    // error states it completes flushed); before that the QP cannot send
    // (IBA 10.3.1; rdma_rxe refuses with EINVAL too).
    if (state < IBV_QPS_RTS) {
        *bad_wr = wr;
        return EINVAL;
    }
    std::lock_guard lock(mutex_);
    if (life_ == Life::Flushed) {
        *bad_wr = wr;
        return EIO;  // the device is gone
    }
    const std::uint32_t first = producer_;
    int err = 0;
    for (ibv_send_wr* w = wr; w != nullptr; w = w->next) {
        err = check_send_wr(type, *w);
        std::uint8_t* slot = err == 0 ? next_slot() : nullptr;
        if (err == 0 && slot == nullptr) {
            err = ENOMEM;  // ibv_post_send(3): the send queue is full
        }
        if (err != 0) {
            *bad_wr = w;
            break;
        }
        write_send_wqe(type, *w, slot);
        ++producer_;
    }
    if (producer_ != first) {
        publish(doorbell_fd);
    }
    return err;
}

int WorkQueue::post_send_all(ibv_qp_type type, ibv_qp_state state, int doorbell_fd, ibv_send_wr* wr) {
    if (state < IBV_QPS_RTS) {
        return EINVAL;  // as post_send
    }
    std::lock_guard lock(mutex_);
    if (life_ == Life::Flushed) {
        return EIO;
    }
    std::uint32_t count = 0;
    for (const ibv_send_wr* w = wr; w != nullptr; w = w->next) {
        if (const int err = check_send_wr(type, *w); err != 0) {
            return err;
        }
        ++count;
    }
    if (count > free_slots()) {
        return ENOMEM;
    }
    for (const ibv_send_wr* w = wr; w != nullptr; w = w->next) {
        write_send_wqe(type, *w, next_slot());
        ++producer_;
    }
    if (count != 0) {
        publish(doorbell_fd);
    }
    return 0;
}

int WorkQueue::post_recv(int doorbell_fd, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
    *bad_wr = nullptr;
    std::lock_guard lock(mutex_);
    if (life_ == Life::Flushed) {
        *bad_wr = wr;
        return EIO;  // the device is gone
    }
    const std::uint32_t first = producer_;
    int err = 0;
    for (ibv_recv_wr* w = wr; w != nullptr; w = w->next) {
        const bool valid = w->num_sge >= 0 && static_cast<std::uint32_t>(w->num_sge) <= max_sge_ &&
                           (w->num_sge == 0 || w->sg_list != nullptr);
        std::uint8_t* slot = valid ? next_slot() : nullptr;
        if (slot == nullptr) {
            err = valid ? ENOMEM : EINVAL;
            *bad_wr = w;
            break;
        }
        uroce_recv_wqe r{};
        r.wr_id = w->wr_id;
        r.num_sge = static_cast<std::uint32_t>(w->num_sge);
        std::memcpy(slot, &r, sizeof r);
        write_sges(slot + sizeof r, w->sg_list, w->num_sge);
        ++producer_;
    }
    if (producer_ != first) {
        publish(doorbell_fd);
    }
    return err;
}

ibv_wc WorkQueue::flushed_completion(const std::uint8_t* slot, std::uint32_t qp_num) const {
    ibv_wc wc{};
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.qp_num = qp_num;
    if (kind_ == Kind::Receive) {
        uroce_recv_wqe r;
        std::memcpy(&r, slot, sizeof r);
        wc.wr_id = r.wr_id;
        wc.opcode = IBV_WC_RECV;
        return wc;
    }
    uroce_send_wqe w;
    std::memcpy(&w, slot, sizeof w);
    wc.wr_id = w.wr_id;
    // ibv_poll_cq(3) leaves the opcode of an error completion undefined;
    // the one of the work request is the most useful value to give.
    switch (static_cast<ibv_wr_opcode>(w.opcode)) {
        case IBV_WR_RDMA_WRITE:
        case IBV_WR_RDMA_WRITE_WITH_IMM:
            wc.opcode = IBV_WC_RDMA_WRITE;
            break;
        case IBV_WR_RDMA_READ:
            wc.opcode = IBV_WC_RDMA_READ;
            break;
        case IBV_WR_ATOMIC_CMP_AND_SWP:
            wc.opcode = IBV_WC_COMP_SWAP;
            break;
        case IBV_WR_ATOMIC_FETCH_AND_ADD:
            wc.opcode = IBV_WC_FETCH_ADD;
            break;
        case IBV_WR_BIND_MW:
            wc.opcode = IBV_WC_BIND_MW;
            break;
        case IBV_WR_LOCAL_INV:
            wc.opcode = IBV_WC_LOCAL_INV;
            break;
        default:
            wc.opcode = IBV_WC_SEND;
            break;
    }
    return wc;
}

void WorkQueue::flush_outstanding(std::uint32_t qp_num, std::vector<ibv_wc>& out) {
    std::lock_guard lock(mutex_);
    if (life_ == Life::Flushed || header_ == nullptr) {
        life_ = Life::Flushed;
        return;
    }
    life_ = Life::Flushed;
    // Slots from the daemon's consumer on were posted and not retired; a
    // consumer further back than a ring's worth could only be a broken
    // daemon's, and those slots hold newer WQEs.
    const std::uint32_t retired = shared(header_->consumer).load(std::memory_order_acquire);
    const std::uint32_t outstanding = std::min(producer_ - retired, entries_);
    for (std::uint32_t i = producer_ - outstanding; i != producer_; ++i) {
        out.push_back(flushed_completion(slots_ + static_cast<std::size_t>(i & (entries_ - 1)) * stride_, qp_num));
    }
}

}  // namespace uroce::provider
