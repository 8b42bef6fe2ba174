// The control protocol's ops (abi/control.h): one entry each, with the size
// its request must have and the handler that serves it. dispatch()
// (control_server.cc) checks a request against its entry before the handler
// runs, so a handler reads its request struct without checking its length.
// Adding an op is adding its line here (and its handler); ops of one group
// may share a handler that tells them apart by h.op.
#include <type_traits>

#include "control_server.h"

namespace uroce::daemon {

template <auto Fn>
std::size_t ControlServer::serve(Request& r) {
    using F = decltype(Fn);
    using Hdr = const uroce_ctrl_hdr&;
    using Msg = const std::uint8_t*;
    using Out = std::uint8_t*;
    if constexpr (std::is_invocable_v<F, ControlServer&, Connection&, Hdr, Msg, Out, int&, int>) {
        return (this->*Fn)(r.c, r.h, r.msg, r.out, r.reply_fd, r.received_fd);
    } else if constexpr (std::is_invocable_v<F, ControlServer&, Connection&, Hdr, Msg, Out, int&&>) {
        return (this->*Fn)(r.c, r.h, r.msg, r.out, r.received_fd);  // takes an int: the received fd
    } else if constexpr (std::is_invocable_v<F, ControlServer&, Connection&, Hdr, Msg, Out, int&>) {
        return (this->*Fn)(r.c, r.h, r.msg, r.out, r.reply_fd);  // takes an int&: the reply fd
    } else {
        return (this->*Fn)(r.c, r.h, r.msg, r.out);
    }
}

namespace {

// Whether every op appears once (two branches adding the same number show here).
template <typename Op, std::size_t N>
constexpr bool unique_ops(const Op (&ops)[N]) {
    for (std::size_t i = 0; i < N; ++i) {
        for (std::size_t j = i + 1; j < N; ++j) {
            if (ops[i].op == ops[j].op) {
                return false;
            }
        }
    }
    return true;
}

// Whether every request fits in a message (handle() reads at most that).
template <typename Op, std::size_t N>
constexpr bool sizes_fit(const Op (&ops)[N]) {
    for (const Op& entry : ops) {
        if (entry.size < sizeof(uroce_ctrl_hdr) || entry.size > UROCE_CTRL_MAX_MESSAGE) {
            return false;
        }
    }
    return true;
}

}  // namespace

const ControlServer::ControlOp* ControlServer::find_op(std::uint16_t op) {
    using S = ControlServer;
    static constexpr ControlOp kOps[] = {
        exact<&S::hello>(UROCE_CTRL_HELLO, sizeof(uroce_ctrl_hello)),
        exact<&S::query_device>(UROCE_CTRL_QUERY_DEVICE, sizeof(uroce_ctrl_hdr)),
        exact<&S::query_port>(UROCE_CTRL_QUERY_PORT, sizeof(uroce_ctrl_hdr)),
        exact<&S::alloc_pd>(UROCE_CTRL_ALLOC_PD, sizeof(uroce_ctrl_hdr)),
        exact<&S::dealloc_pd>(UROCE_CTRL_DEALLOC_PD, sizeof(uroce_ctrl_handle)),
        exact<&S::reg_mr>(UROCE_CTRL_REG_MR, sizeof(uroce_ctrl_reg_mr)),
        exact<&S::reg_mr>(UROCE_CTRL_REREG_MR, sizeof(uroce_ctrl_reg_mr)),
        exact<&S::dereg_mr>(UROCE_CTRL_DEREG_MR, sizeof(uroce_ctrl_handle)),
        exact<&S::alloc_mw>(UROCE_CTRL_ALLOC_MW, sizeof(uroce_ctrl_alloc_mw)),
        exact<&S::dealloc_mw>(UROCE_CTRL_DEALLOC_MW, sizeof(uroce_ctrl_handle)),
        exact<&S::bind_mw>(UROCE_CTRL_BIND_MW, sizeof(uroce_ctrl_bind_mw)),
        exact<&S::create_relaxed_pool>(UROCE_CTRL_CREATE_RELAXED_POOL, sizeof(uroce_ctrl_relaxed_pool)),
        exact<&S::flush_relaxed>(UROCE_CTRL_FLUSH_RELAXED, sizeof(uroce_ctrl_handle)),
        exact<&S::status>(UROCE_CTRL_STATUS, sizeof(uroce_ctrl_hdr)),
        exact<&S::create_cq>(UROCE_CTRL_CREATE_CQ, sizeof(uroce_ctrl_create_cq)),
        exact<&S::dispatch_queues>(UROCE_CTRL_DESTROY_CQ, sizeof(uroce_ctrl_handle)),
        exact<&S::create_qp>(UROCE_CTRL_CREATE_QP, sizeof(uroce_ctrl_create_qp)),
        exact<&S::handle_qp>(UROCE_CTRL_MODIFY_QP, sizeof(uroce_ctrl_modify_qp)),
        exact<&S::handle_qp>(UROCE_CTRL_QUERY_QP, sizeof(uroce_ctrl_handle)),
        exact<&S::handle_qp>(UROCE_CTRL_DESTROY_QP, sizeof(uroce_ctrl_handle)),
        exact<&S::create_srq>(UROCE_CTRL_CREATE_SRQ, sizeof(uroce_ctrl_srq)),
        exact<&S::dispatch_queues>(UROCE_CTRL_MODIFY_SRQ, sizeof(uroce_ctrl_srq)),
        exact<&S::dispatch_queues>(UROCE_CTRL_QUERY_SRQ, sizeof(uroce_ctrl_handle)),
        exact<&S::dispatch_queues>(UROCE_CTRL_DESTROY_SRQ, sizeof(uroce_ctrl_handle)),
        exact<&S::dispatch_queues>(UROCE_CTRL_CREATE_AH, sizeof(uroce_ctrl_create_ah)),
        exact<&S::dispatch_queues>(UROCE_CTRL_DESTROY_AH, sizeof(uroce_ctrl_handle)),
        exact<&S::dispatch_queues>(UROCE_CTRL_DOORBELL, sizeof(uroce_ctrl_hdr)),
        exact<&S::stats>(UROCE_CTRL_STATS, sizeof(uroce_ctrl_hdr)),
        exact<&S::list_mrs>(UROCE_CTRL_LIST_MRS, sizeof(uroce_ctrl_list_mrs)),
        exact<&S::dispatch_cm>(UROCE_CTRL_CM_OPEN_CHANNEL, sizeof(uroce_ctrl_hdr)),
        exact<&S::dispatch_cm>(UROCE_CTRL_CM_COMMAND, sizeof(uroce_ctrl_cm_command)),
        exact<&S::dispatch_cm>(UROCE_CTRL_CM_GET_EVENT, sizeof(uroce_ctrl_handle)),
        exact<&S::resize_cq>(UROCE_CTRL_RESIZE_CQ, sizeof(uroce_ctrl_resize_cq)),
        exact<&S::stats_reasons>(UROCE_CTRL_STATS_REASONS, sizeof(uroce_ctrl_hdr)),
        exact<&S::query_loop_stalls>(UROCE_CTRL_LOOP_STALLS, sizeof(uroce_ctrl_hdr)),
        exact<&S::list_cm_ids>(UROCE_CTRL_CM_LIST_IDS, sizeof(uroce_ctrl_cm_list_ids)),
        exact<&S::query_membership>(UROCE_CTRL_MEMBERSHIP, sizeof(uroce_ctrl_hdr)),
        exact<&S::dispatch_fault>(UROCE_CTRL_FAULT_ADD, sizeof(uroce_ctrl_fault_add)),
        exact<&S::dispatch_fault>(UROCE_CTRL_FAULT_LIST, sizeof(uroce_ctrl_fault_list)),
        exact<&S::dispatch_fault>(UROCE_CTRL_FAULT_CLEAR, sizeof(uroce_ctrl_fault_clear)),
        exact<&S::dispatch_fault>(UROCE_CTRL_FAULT_SEED, sizeof(uroce_ctrl_fault_seed)),
        exact<&S::dispatch_fault>(UROCE_CTRL_FAULT_TOTALS, sizeof(uroce_ctrl_hdr)),
        exact<&S::dispatch_capture>(UROCE_CTRL_CAPTURE_START, sizeof(uroce_ctrl_capture_start)),
        exact<&S::dispatch_capture>(UROCE_CTRL_CAPTURE_STOP, sizeof(uroce_ctrl_handle)),
        exact<&S::explain_fetch>(UROCE_CTRL_EXPLAIN_FETCH, sizeof(uroce_ctrl_explain_fetch)),
        exact<&S::dispatch_verbs_ext>(UROCE_CTRL_ADVISE_MR, sizeof(uroce_ctrl_advise_mr)),
        exact<&S::open_xrcd>(UROCE_CTRL_OPEN_XRCD, sizeof(uroce_ctrl_open_xrcd)),
        exact<&S::close_xrcd>(UROCE_CTRL_CLOSE_XRCD, sizeof(uroce_ctrl_handle)),
        exact<&S::create_xrc_srq>(UROCE_CTRL_CREATE_XRC_SRQ, sizeof(uroce_ctrl_create_xrc_srq)),
        exact<&S::create_xrc_tgt>(UROCE_CTRL_CREATE_XRC_TGT, sizeof(uroce_ctrl_create_xrc_tgt)),
        exact<&S::open_xrc_tgt>(UROCE_CTRL_OPEN_XRC_TGT, sizeof(uroce_ctrl_open_xrc_tgt)),
        exact<&S::close_xrc_tgt>(UROCE_CTRL_CLOSE_XRC_TGT, sizeof(uroce_ctrl_close_xrc_tgt)),
        exact<&S::attach_multicast>(UROCE_CTRL_ATTACH_MCAST, sizeof(uroce_ctrl_mcast)),
        exact<&S::detach_multicast>(UROCE_CTRL_DETACH_MCAST, sizeof(uroce_ctrl_mcast)),
    };
    static_assert(unique_ops(kOps), "an op number appears twice in the table");
    static_assert(sizes_fit(kOps), "a request is shorter than its header or longer than UROCE_CTRL_MAX_MESSAGE");
    for (const ControlOp& entry : kOps) {
        if (entry.op == op) {
            return &entry;
        }
    }
    return nullptr;
}

}  // namespace uroce::daemon
