// The work requests an application builds with the ibv_wr_* functions of an
// extended QP (ibv_wr_post(3)) between ibv_wr_start and ibv_wr_complete.
// They are kept here as ibv_send_wr records and go into the send ring in one
// step at ibv_wr_complete, through the same code (and the same checks) as
// ibv_post_send (work_queue.h), so the daemon sees the WQEs it always saw.
//
// The ibv_wr_* functions return nothing: the first mistake (an opcode the QP
// was not created for, a set_* before any opcode, too many SGEs, inline data
// beyond max_inline_data, set_ud_addr on a connected QP) is remembered and
// ibv_wr_complete returns it (EINVAL, EOPNOTSUPP for TSO, XRC and
// ATOMIC_WRITE) and posts nothing, as mlx5 and rdma_rxe do. A batch that
// the send queue refuses (state, full ring) is not posted either: all the
// WRs go in or none. Inline data and SGE lists are copied when set, so the
// application may reuse its buffers at once.
//
// ibv_wr_start takes the batch's lock and ibv_wr_complete / ibv_wr_abort
// release it, so threads building on one QP go in turn, as the man page
// promises.
//
// Only types of <infiniband/verbs.h> are used, no libibverbs function, so the
// unit tests compile this file on its own.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace uroce::provider {

class SendBatch {
public:
    // The QP's type, the IBV_QP_EX_WITH_* opcodes it was created with and
    // its send queue's limits.
    void configure(ibv_qp_type type, std::uint64_t send_ops_flags, std::uint32_t max_sge, std::uint32_t max_inline);

    // ibv_wr_start.
    void start();
    // An opcode function: begins a WR with the qp_ex's wr_id and wr_flags
    // as they are now. The WR to fill in, or null (the mistake recorded).
    ibv_send_wr* begin(ibv_wr_opcode op, std::uint64_t wr_id, unsigned int wr_flags);
    // ibv_wr_set_sge / _sge_list, ibv_wr_set_inline_data / _list and
    // ibv_wr_set_ud_addr, for the WR begun last; a later call replaces the
    // payload an earlier one set.
    void set_sges(std::size_t num_sge, const ibv_sge* sg_list);
    void set_inline(std::size_t num_buf, const ibv_data_buf* buf_list);
    void set_ud_addr(ibv_ah* ah, std::uint32_t remote_qpn, std::uint32_t remote_qkey);
    // ibv_wr_set_xrc_srqn: the remote XRC SRQ of an XRC send QP's WR begun last.
    void set_xrc_srqn(std::uint32_t remote_srqn);
    // Records a mistake (the first one is kept).
    void fail(int err);

    // ibv_wr_complete: hands the WRs, as one chain, to `post` (which
    // returns 0 or an errno and must post all or none), then forgets them
    // and releases the lock. The first recorded mistake, EINVAL without a
    // wr_start, or what `post` returned.
    template <typename Post>
    int complete(Post&& post) {
        if (phase_ != Phase::Open) {
            return EINVAL;
        }
        int err = error_;
        if (err == 0 && !pending_.empty()) {
            err = post(chain());
        }
        finish();
        return err;
    }
    // ibv_wr_abort: forgets the WRs and releases the lock.
    void abort();

    // WRs built since start (for the tests).
    [[nodiscard]] std::size_t pending() const { return pending_.size(); }

private:
    enum class Phase : std::uint8_t { Idle, Open };  // Open: between start and complete/abort
    enum class Payload : std::uint8_t { None, Sges, Inline };

    struct Pending {
        ibv_send_wr wr;
        Payload payload;
        std::size_t first;  // Sges: index into sges_; Inline: byte offset into inline_
        std::size_t count;  // Sges: how many; Inline: how many bytes
    };

    // The WR set_* applies to, or null (mistake recorded).
    Pending* current();
    // Links the pending WRs into one chain, their payloads pointing into
    // this batch's storage.
    ibv_send_wr* chain();
    void finish();

    std::mutex mutex_;
    Phase phase_ = Phase::Idle;
    int error_ = 0;
    ibv_qp_type type_ = IBV_QPT_RC;
    std::uint64_t send_ops_ = 0;
    std::uint32_t max_sge_ = 0;
    std::uint32_t max_inline_ = 0;
    std::vector<Pending> pending_;
    std::vector<ibv_sge> sges_;          // every SGE list set since start
    std::vector<std::uint8_t> inline_;   // every inline payload set since start
    std::vector<ibv_sge> inline_sges_;   // one per inline WR, made by chain()
};

}  // namespace uroce::provider
