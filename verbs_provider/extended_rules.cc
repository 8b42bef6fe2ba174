#include "extended_rules.h"

#include <cerrno>

#include "parent_domain.h"
#include "work_queue.h"

namespace uroce::provider {

namespace {

// Every opcode an ibv_qp_ex may offer through send_ops_flags.
constexpr ibv_wr_opcode kSendOpcodes[] = {
    IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND,     IBV_WR_SEND_WITH_IMM,
    IBV_WR_RDMA_READ,  IBV_WR_ATOMIC_CMP_AND_SWP,  IBV_WR_ATOMIC_FETCH_AND_ADD,
    IBV_WR_LOCAL_INV,  IBV_WR_BIND_MW,             IBV_WR_SEND_WITH_INV,
};

// comp_mask bits of ibv_qp_init_attr_ex this provider looks at; the others
// ask for XRC, TSO, RSS, WQ indirection tables or source QPs.
constexpr std::uint32_t kQpCompMaskOffered =
    IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS;

// comp_mask bits of ibv_cq_init_attr_ex: FLAGS, and PD (a parent domain,
// whose allocator the CQ's host memory comes from: parent_domain.h).
constexpr std::uint32_t kCqCompMaskOffered = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;

}  // namespace

std::uint64_t send_op_flag(ibv_wr_opcode op) {
    switch (op) {
        case IBV_WR_RDMA_WRITE:
            return IBV_QP_EX_WITH_RDMA_WRITE;
        case IBV_WR_RDMA_WRITE_WITH_IMM:
            return IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
        case IBV_WR_SEND:
            return IBV_QP_EX_WITH_SEND;
        case IBV_WR_SEND_WITH_IMM:
            return IBV_QP_EX_WITH_SEND_WITH_IMM;
        case IBV_WR_RDMA_READ:
            return IBV_QP_EX_WITH_RDMA_READ;
        case IBV_WR_ATOMIC_CMP_AND_SWP:
            return IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP;
        case IBV_WR_ATOMIC_FETCH_AND_ADD:
            return IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
        case IBV_WR_LOCAL_INV:
            return IBV_QP_EX_WITH_LOCAL_INV;
        case IBV_WR_BIND_MW:
            return IBV_QP_EX_WITH_BIND_MW;
        case IBV_WR_SEND_WITH_INV:
            return IBV_QP_EX_WITH_SEND_WITH_INV;
        default:
            return 0;  // TSO, ATOMIC_WRITE, FLUSH, driver opcodes
    }
}

std::uint64_t send_ops_offered(ibv_qp_type type) {
    std::uint64_t offered = 0;
    for (const ibv_wr_opcode op : kSendOpcodes) {
        if (opcode_allowed(type, op)) {
            offered |= send_op_flag(op);
        }
    }
    return offered;
}

int check_qp_init_attr_ex(const ibv_qp_init_attr_ex& attr) {
    // An XRC target has an XRCD and no PD, no CQs, no queues (ibv_create_qp_ex(3)).
    if (attr.qp_type == IBV_QPT_XRC_RECV) {
        if ((attr.comp_mask & IBV_QP_INIT_ATTR_XRCD) == 0 || attr.xrcd == nullptr) {
            return EINVAL;
        }
        return (attr.comp_mask & ~(kQpCompMaskOffered | IBV_QP_INIT_ATTR_XRCD)) != 0 ? EOPNOTSUPP : 0;
    }
    if ((attr.comp_mask & IBV_QP_INIT_ATTR_PD) == 0 || attr.pd == nullptr) {
        return EINVAL;  // every QP but an XRC target needs a PD
    }
    if ((attr.comp_mask & ~kQpCompMaskOffered) != 0) {
        return EOPNOTSUPP;
    }
    if ((attr.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) != 0 && attr.create_flags != 0) {
        return EOPNOTSUPP;  // scatter-FCS, CVLAN stripping, source QPN, ...
    }
    if (attr.qp_type != IBV_QPT_RC && attr.qp_type != IBV_QPT_UC && attr.qp_type != IBV_QPT_UD &&
        attr.qp_type != IBV_QPT_XRC_SEND) {
        return EOPNOTSUPP;
    }
    if ((attr.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0 &&
        (attr.send_ops_flags & ~send_ops_offered(attr.qp_type)) != 0) {
        return EOPNOTSUPP;  // an opcode the QP type lacks, TSO, ATOMIC_WRITE
    }
    return 0;
}

int check_cq_init_attr_ex(const ibv_cq_init_attr_ex& attr, int num_comp_vectors) {
    if (attr.cqe == 0 || attr.cqe > INT32_MAX ||
        attr.comp_vector >= static_cast<std::uint32_t>(num_comp_vectors)) {
        return EINVAL;
    }
    if ((attr.comp_mask & ~kCqCompMaskOffered) != 0 || (attr.wc_flags & ~kCqWcFlagsOffered) != 0) {
        return EOPNOTSUPP;
    }
    // As mlx5: the PD given must be a parent domain (of this context: the
    // caller checks that).
    if ((attr.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) != 0 && !is_parent_domain(attr.parent_domain)) {
        return EINVAL;
    }
    // SINGLE_THREADED is a hint (the CQ stays thread-safe); a CQ that
    // ignores overrun is not offered: the daemon reports it (IBV_EVENT_CQ_ERR).
    if ((attr.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) != 0 &&
        (attr.flags & ~static_cast<std::uint32_t>(IBV_CREATE_CQ_ATTR_SINGLE_THREADED)) != 0) {
        return EOPNOTSUPP;
    }
    return 0;
}

}  // namespace uroce::provider
