#include "completion_ring.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

namespace uroce::provider {

namespace {

template <typename T>
std::atomic_ref<T> shared(T& field) {
    return std::atomic_ref<T>(field);
}

}  // namespace

void cqe_to_wc(const uroce_cqe& cqe, ibv_wc& wc) {
    wc = ibv_wc{};
    wc.wr_id = cqe.wr_id;
    wc.status = static_cast<ibv_wc_status>(cqe.status);
    wc.opcode = static_cast<ibv_wc_opcode>(cqe.opcode);
    wc.vendor_err = cqe.vendor_err;
    wc.byte_len = cqe.byte_len;
    // One union in ibv_wc: immediate data (network order) or the rkey that
    // was invalidated, as the wc_flags tell.
    wc.imm_data = cqe.imm_data;
    wc.qp_num = cqe.qp_num;
    wc.src_qp = cqe.src_qp;
    wc.wc_flags = cqe.wc_flags;
    wc.pkey_index = cqe.pkey_index;
    wc.slid = cqe.slid;
    wc.sl = cqe.sl;
    wc.dlid_path_bits = cqe.dlid_path_bits;
}

int CompletionRing::attach(void* ring, std::size_t bytes) {
    auto* h = static_cast<uroce_cq_ring*>(ring);
    if (bytes < sizeof *h || h->version != UROCE_RING_VERSION || !std::has_single_bit(h->entries) ||
        sizeof *h + std::uint64_t{h->entries} * UROCE_CQE_BYTES > bytes) {
        return EPROTO;
    }
    header_ = h;
    slots_ = reinterpret_cast<uroce_cqe*>(h + 1);
    entries_ = h->entries;
    consumer_ = shared(h->consumer).load(std::memory_order_relaxed);
    return 0;
}

int CompletionRing::poll(int num_entries, ibv_wc* wc) {
    if (num_entries < 0) {
        return -1;
    }
    std::lock_guard lock(mutex_);
    const std::uint32_t producer = shared(header_->producer).load(std::memory_order_seq_cst);
    // The daemon never gets more than `entries` ahead (it reports overrun
    // instead of overwriting); a larger gap could only be a broken daemon.
    const std::uint32_t ready = std::min(producer - consumer_, entries_);
    const std::uint32_t n = std::min(ready, static_cast<std::uint32_t>(num_entries));
    for (std::uint32_t i = 0; i < n; ++i) {
        uroce_cqe cqe;
        std::memcpy(&cqe, &slots_[(consumer_ + i) & (entries_ - 1)], sizeof cqe);
        cqe_to_wc(cqe, wc[i]);
    }
    if (n != 0) {
        consumer_ += n;
        // The slots are the daemon's again once it sees this.
        shared(header_->consumer).store(consumer_, std::memory_order_release);
    }
    return static_cast<int>(n);
}

std::uint32_t CompletionRing::discard_qp(std::uint32_t qpn) {
    std::lock_guard lock(mutex_);
    const std::uint32_t producer = shared(header_->producer).load(std::memory_order_acquire);
    const std::uint32_t ready = std::min(producer - consumer_, entries_);
    // Newest first: each kept CQE moves up by the number removed after it.
    std::uint32_t removed = 0;
    for (std::uint32_t i = ready; i-- > 0;) {
        uroce_cqe& cqe = slots_[(consumer_ + i) & (entries_ - 1)];
        if (cqe.qp_num == qpn) {
            ++removed;
        } else if (removed != 0) {
            std::memcpy(&slots_[(consumer_ + i + removed) & (entries_ - 1)], &cqe, sizeof cqe);
        }
    }
    if (removed != 0) {
        consumer_ += removed;
        shared(header_->consumer).store(consumer_, std::memory_order_release);
    }
    return removed;
}

void CompletionRing::request_notify(bool solicited_only) {
    // A new sequence number each time, so the daemon tells a new request
    // from one it has served (abi/rings.h).
    const std::uint32_t sequence = notify_sequence_.fetch_add(1, std::memory_order_relaxed) + 1;
    shared(header_->notify_request).store((sequence << 1) | (solicited_only ? 1u : 0u), std::memory_order_seq_cst);
}

}  // namespace uroce::provider
