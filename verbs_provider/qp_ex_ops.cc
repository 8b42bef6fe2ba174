#include "qp_ex_ops.h"

#include <cerrno>

namespace uroce::provider {

namespace {

ibv_send_wr* begin(ibv_qp_ex* qp, ibv_wr_opcode op) { return batch_of(qp).begin(op, qp->wr_id, qp->wr_flags); }

void rdma(ibv_qp_ex* qp, ibv_wr_opcode op, std::uint32_t rkey, std::uint64_t remote_addr, __be32 imm) {
    if (ibv_send_wr* wr = begin(qp, op); wr != nullptr) {
        wr->wr.rdma.rkey = rkey;
        wr->wr.rdma.remote_addr = remote_addr;
        wr->imm_data = imm;
    }
}

void atomic(ibv_qp_ex* qp, ibv_wr_opcode op, std::uint32_t rkey, std::uint64_t remote_addr,
            std::uint64_t compare_add, std::uint64_t swap) {
    if (ibv_send_wr* wr = begin(qp, op); wr != nullptr) {
        wr->wr.atomic.rkey = rkey;
        wr->wr.atomic.remote_addr = remote_addr;
        wr->wr.atomic.compare_add = compare_add;
        wr->wr.atomic.swap = swap;
    }
}

void wr_atomic_cmp_swp(ibv_qp_ex* qp, std::uint32_t rkey, std::uint64_t remote_addr, std::uint64_t compare,
                       std::uint64_t swap) {
    atomic(qp, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, remote_addr, compare, swap);
}

void wr_atomic_fetch_add(ibv_qp_ex* qp, std::uint32_t rkey, std::uint64_t remote_addr, std::uint64_t add) {
    atomic(qp, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, remote_addr, add, 0);
}

void wr_bind_mw(ibv_qp_ex* qp, ibv_mw* mw, std::uint32_t rkey, const ibv_mw_bind_info* bind_info) {
    if (mw == nullptr || bind_info == nullptr) {
        batch_of(qp).fail(EINVAL);
        return;
    }
    if (ibv_send_wr* wr = begin(qp, IBV_WR_BIND_MW); wr != nullptr) {
        wr->bind_mw.mw = mw;
        wr->bind_mw.rkey = rkey;
        wr->bind_mw.bind_info = *bind_info;
    }
}

void wr_local_inv(ibv_qp_ex* qp, std::uint32_t invalidate_rkey) {
    if (ibv_send_wr* wr = begin(qp, IBV_WR_LOCAL_INV); wr != nullptr) {
        wr->invalidate_rkey = invalidate_rkey;
    }
}

void wr_rdma_read(ibv_qp_ex* qp, std::uint32_t rkey, std::uint64_t remote_addr) {
    rdma(qp, IBV_WR_RDMA_READ, rkey, remote_addr, 0);
}

void wr_rdma_write(ibv_qp_ex* qp, std::uint32_t rkey, std::uint64_t remote_addr) {
    rdma(qp, IBV_WR_RDMA_WRITE, rkey, remote_addr, 0);
}

void wr_rdma_write_imm(ibv_qp_ex* qp, std::uint32_t rkey, std::uint64_t remote_addr, __be32 imm_data) {
    rdma(qp, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, remote_addr, imm_data);
}

void wr_send(ibv_qp_ex* qp) { begin(qp, IBV_WR_SEND); }

void wr_send_imm(ibv_qp_ex* qp, __be32 imm_data) {
    if (ibv_send_wr* wr = begin(qp, IBV_WR_SEND_WITH_IMM); wr != nullptr) {
        wr->imm_data = imm_data;
    }
}

void wr_send_inv(ibv_qp_ex* qp, std::uint32_t invalidate_rkey) {
    if (ibv_send_wr* wr = begin(qp, IBV_WR_SEND_WITH_INV); wr != nullptr) {
        wr->invalidate_rkey = invalidate_rkey;
    }
}

// XRC send QPs: the remote XRC SRQ of the WR (send_batch.h).
void wr_set_xrc_srqn(ibv_qp_ex* qp, std::uint32_t remote_srqn) { batch_of(qp).set_xrc_srqn(remote_srqn); }

// Not offered (create_qp_ex refuses their send_ops_flags with EOPNOTSUPP);
// the entries exist so that a call fails at ibv_wr_complete instead of
// jumping to null.
void wr_send_tso(ibv_qp_ex* qp, void* /*hdr*/, std::uint16_t /*hdr_sz*/, std::uint16_t /*mss*/) {
    batch_of(qp).fail(EOPNOTSUPP);
}
void wr_atomic_write(ibv_qp_ex* qp, std::uint32_t /*rkey*/, std::uint64_t /*remote_addr*/,
                     const void* /*atomic_wr*/) {
    batch_of(qp).fail(EOPNOTSUPP);
}

void wr_set_ud_addr(ibv_qp_ex* qp, ibv_ah* ah, std::uint32_t remote_qpn, std::uint32_t remote_qkey) {
    batch_of(qp).set_ud_addr(ah, remote_qpn, remote_qkey);
}

void wr_set_inline_data(ibv_qp_ex* qp, void* addr, std::size_t length) {
    const ibv_data_buf buf{addr, length};
    batch_of(qp).set_inline(1, &buf);
}

void wr_set_inline_data_list(ibv_qp_ex* qp, std::size_t num_buf, const ibv_data_buf* buf_list) {
    batch_of(qp).set_inline(num_buf, buf_list);
}

void wr_set_sge(ibv_qp_ex* qp, std::uint32_t lkey, std::uint64_t addr, std::uint32_t length) {
    const ibv_sge sge{addr, length, lkey};
    batch_of(qp).set_sges(1, &sge);
}

void wr_set_sge_list(ibv_qp_ex* qp, std::size_t num_sge, const ibv_sge* sg_list) {
    batch_of(qp).set_sges(num_sge, sg_list);
}

void wr_start(ibv_qp_ex* qp) { batch_of(qp).start(); }

int wr_complete(ibv_qp_ex* qp) {
    return batch_of(qp).complete([qp](ibv_send_wr* wr) { return post_batch(qp, wr); });
}

void wr_abort(ibv_qp_ex* qp) { batch_of(qp).abort(); }

}  // namespace

void install_send_ops(ibv_qp_ex& qp) {
    qp.comp_mask = 0;
    qp.wr_id = 0;
    qp.wr_flags = 0;
    qp.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
    qp.wr_atomic_fetch_add = wr_atomic_fetch_add;
    qp.wr_bind_mw = wr_bind_mw;
    qp.wr_local_inv = wr_local_inv;
    qp.wr_rdma_read = wr_rdma_read;
    qp.wr_rdma_write = wr_rdma_write;
    qp.wr_rdma_write_imm = wr_rdma_write_imm;
    qp.wr_send = wr_send;
    qp.wr_send_imm = wr_send_imm;
    qp.wr_send_inv = wr_send_inv;
    qp.wr_send_tso = wr_send_tso;
    qp.wr_set_ud_addr = wr_set_ud_addr;
    qp.wr_set_xrc_srqn = wr_set_xrc_srqn;
    qp.wr_set_inline_data = wr_set_inline_data;
    qp.wr_set_inline_data_list = wr_set_inline_data_list;
    qp.wr_set_sge = wr_set_sge;
    qp.wr_set_sge_list = wr_set_sge_list;
    qp.wr_start = wr_start;
    qp.wr_complete = wr_complete;
    qp.wr_abort = wr_abort;
    qp.wr_atomic_write = wr_atomic_write;
}

}  // namespace uroce::provider
