// The provider's side of a work-queue ring (abi/rings.h): posting send and
// receive work requests as WQEs into the SQ, RQ or SRQ ring the daemon
// shares, and ringing the daemon's doorbell when it sleeps.
//
// What can be checked at post time is checked here, as a device's post
// verbs do (ibv_post_send(3), ibv_post_recv(3)): the opcode against the QP
// type, the SGE count, the inline size, the QP state, a full ring. The first
// refused WR fails the call with *bad_wr pointing at it; the WRs before it
// stay posted. Everything else (lkeys, lengths, the remote side) is the
// daemon's to check, which completes a bad WQE in error.
//
// Only types of <infiniband/verbs.h> are used, no libibverbs function, so the
// unit tests compile this file on its own against an in-process ring.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "abi/rings.h"

namespace uroce::provider {

class WorkQueue {
public:
    enum class Kind : std::uint8_t { Send, Receive };

    // Takes the ring the daemon made at `ring` (with `bytes` of mapping from
    // there on). 0, or EPROTO when the header does not describe a ring this
    // provider can use (version, a power-of-two size, slots too small for
    // its own limits or beyond the mapping).
    int attach(void* ring, std::size_t bytes, Kind kind);
    [[nodiscard]] bool attached() const { return header_ != nullptr; }

    [[nodiscard]] std::uint32_t entries() const { return entries_; }
    [[nodiscard]] std::uint32_t max_sge() const { return max_sge_; }
    [[nodiscard]] std::uint32_t max_inline() const { return max_inline_; }

    // ibv_post_send(3) for a QP of `type` in `state`; `doorbell_fd` is the
    // daemon's eventfd. 0 or an errno (EINVAL, ENOMEM when the ring is full).
    int post_send(ibv_qp_type type, ibv_qp_state state, int doorbell_fd, ibv_send_wr* wr, ibv_send_wr** bad_wr);
    // The same for a chain that goes in whole or not at all (ibv_wr_complete,
    // send_batch.h): every WR is checked and the free slots counted before
    // the first is written. 0, or the errno of the first refusal.
    int post_send_all(ibv_qp_type type, ibv_qp_state state, int doorbell_fd, ibv_send_wr* wr);
    // ibv_post_recv(3) / ibv_post_srq_recv(3); the caller checked the QP.
    int post_recv(int doorbell_fd, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);

    // The device is gone (docs/provider.md, "When the daemon goes"): appends
    // to `out` one IBV_WC_WR_FLUSH_ERR completion, for `qp_num`, for every
    // WQE posted and not yet retired by the daemon, oldest first; from then
    // on every post fails with EIO. Later calls append nothing.
    void flush_outstanding(std::uint32_t qp_num, std::vector<ibv_wc>& out);

private:
    // The slot the next WQE goes to, or null when the ring is full.
    std::uint8_t* next_slot();
    // How many WQEs the ring takes now.
    std::uint32_t free_slots();
    // Makes the WQEs written so far visible to the daemon, then rings the
    // doorbell if the daemon armed it.
    void publish(int doorbell_fd);
    // What post_send checks of one WR before it takes a slot; 0 or EINVAL.
    [[nodiscard]] int check_send_wr(ibv_qp_type type, const ibv_send_wr& wr) const;
    // Writes a checked WR into `slot` as a send WQE.
    void write_send_wqe(ibv_qp_type type, const ibv_send_wr& wr, std::uint8_t* slot) const;

    // The flushed completion of the WQE in `slot` (a send or receive WQE, as `kind_` says).
    [[nodiscard]] ibv_wc flushed_completion(const std::uint8_t* slot, std::uint32_t qp_num) const;

    enum class Life : std::uint8_t { Serving, Flushed };

    std::mutex mutex_;  // posts from several threads go in turn
    Kind kind_ = Kind::Send;
    Life life_ = Life::Serving;
    uroce_wq_ring* header_ = nullptr;
    std::uint8_t* slots_ = nullptr;
    std::uint32_t entries_ = 0;
    std::uint32_t stride_ = 0;
    std::uint32_t max_sge_ = 0;
    std::uint32_t max_inline_ = 0;
    std::uint32_t producer_ = 0;  // WQEs posted (published or about to be)
    std::uint32_t consumer_ = 0;  // the daemon's count, as last read
};

// Whether `op` is a send opcode a QP of `type` may post (the table of
// ibv_post_send(3)); uroce offers RC, UC and UD.
[[nodiscard]] bool opcode_allowed(ibv_qp_type type, ibv_wr_opcode op);

}  // namespace uroce::provider
