// The QP state machine of IBA 10.3.1 and the attribute rules of the Modify
// QP verb (IBA 11.2.5.2, ibv_modify_qp(3)): which state changes a consumer
// may request, which attributes each change requires or permits for each QP
// type, and the range of every value. The per-transition masks are those of
// Linux's ib_modify_qp_is_ok() (drivers/infiniband/core/verbs.c), which
// hardware drivers and rdma_rxe all apply, so an application sees the same
// EINVALs here as on a kernel RDMA device.
//
// The device-initiated changes (RTS -> SQE on a UC/UD send error, any state
// -> ERR on a fatal error, the SQ drained event in SQD) are not requests and
// do not pass through here; the engine makes them directly.
#pragma once

#include <cstdint>
#include <optional>

#include "qp_attr.h"
#include "qp_types.h"

namespace uroce::qp {

// What the port and device allow, as ibv_query_port / ibv_query_device report it.
struct PortLimits {
    Mtu active_mtu = Mtu::Mtu1024;  // ibv_port_attr.active_mtu: 1024 fits a 1500-byte Ethernet MTU
    // ibv_device_attr.max_qp_init_rd_atom: bound on ibv_qp_attr.max_rd_atomic.
    // 128 as rdma_rxe (RXE_MAX_QP_RD_ATOM): perftest asks the peer's value,
    // so a smaller bound fails its setup against rxe. The engine tracks that
    // many: the requester counts READ/atomic WQEs in flight against
    // max_rd_atomic, the responder keeps max_dest_rd_atomic resources.
    std::uint8_t max_rd_atomic = 128;
    // ibv_device_attr.max_qp_rd_atom: bound on ibv_qp_attr.max_dest_rd_atomic.
    std::uint8_t max_dest_rd_atomic = 128;
    std::uint16_t pkey_table_len = 1;  // RoCE: the default P_Key 0xFFFF only
    std::uint16_t gid_table_len = 16;
};

// The attribute bits one (type, from, to) transition requires and permits,
// besides IBV_QP_STATE.
struct TransitionRule {
    std::uint32_t required = 0;
    std::uint32_t optional = 0;
};

// The rule for a requested transition, or nullopt if it is not a legal one.
// Any state may go to RESET or to ERR, with no other attribute (IBA 10.3.1:
// "any state -> Reset / Error"; Linux refuses RESET -> ERR, see the .cc).
[[nodiscard]] std::optional<TransitionRule> transition_rule(QpType type, QpState from, QpState to);

struct ModifyCheck {
    int error = 0;                  // 0 or EINVAL
    QpState next = QpState::Reset;  // the state after the modify (= current without IBV_QP_STATE)
    const char* reason = nullptr;   // why not, for logs; a static string; nullptr when error == 0
};

// ibv_modify_qp(qp, attr, attr_mask) on a QP of `type` now in `current`:
//  - the target is attr.state when IBV_QP_STATE is set, else `current`;
//  - the (current, target) pair must be a legal transition, with every
//    required bit and no bit outside required | optional | STATE;
//  - IBV_QP_CUR_STATE, where the transition permits it, must name `current`;
//  - each attribute in the mask must be in range where the kernel or
//    rdma_rxe checks it (port 1, P_Key index and GID index in the tables,
//    path MTU 256..4096 and at most the active MTU, timeout <= 31,
//    rd_atomic depths within the device's, access flags among LOCAL_WRITE /
//    REMOTE_WRITE / REMOTE_READ / REMOTE_ATOMIC, a GRH on the AV).
//    Values wider than their field are masked by apply_modify, as the
//    kernel and hardware take them, not refused: PSNs and the destination
//    QPN (24 bits), retry counts (3), min RNR timer (5), and the AV's flow
//    label and SL (address_values.h); static_rate is not checked.
//    ALT_PATH is refused: RoCE has no automatic path migration.
[[nodiscard]] ModifyCheck check_modify(QpType type, QpState current, std::uint32_t attr_mask, const QpAttr& attr,
                                       const PortLimits& limits);

// The attribute mask as the kernel takes it for `type` (uverbs' modify_qp):
// an XRC send QP ignores the responder attributes (MAX_DEST_RD_ATOMIC,
// MIN_RNR_TIMER) and an XRC target the requester ones (MAX_QP_RD_ATOMIC,
// RETRY_CNT, RNR_RETRY) an application passes, rather than refusing them
// (perftest -c XRC passes both halves' to both). Other types: unchanged.
[[nodiscard]] std::uint32_t mask_as_kernel_takes(QpType type, std::uint32_t attr_mask);

// The same, for a QP whose stored attributes are `stored`, adding the one
// rule that depends on more than the state: while a QP in SQD is still
// draining its send queue (stored.sq_draining), it may only be moved to
// RESET or ERR, not modified or resumed (IBA 10.3.1, SQD; rdma_rxe likewise).
[[nodiscard]] ModifyCheck check_modify(QpType type, const QpAttr& stored, std::uint32_t attr_mask, const QpAttr& attr,
                                       const PortLimits& limits);

// Records an accepted modify: state and cur_state become `next`, and every
// attribute named in `mask` is copied from `attr` (wide values masked, the
// AV as the kernel takes it: as_kernel_takes in address_values.h),
// so ibv_query_qp returns what was set. Entering SQD from RTS sets
// sq_draining; the engine clears it when the send queue has drained. Leaving
// SQD clears it. Call only after check_modify accepted the same arguments.
void apply_modify(QpAttr& stored, std::uint32_t mask, const QpAttr& attr, QpState next);

}  // namespace uroce::qp
