#include "qp_state_machine.h"

#include <cerrno>

#include "address_values.h"

namespace uroce::qp {

namespace {

using M = AttrMask;

// One legal transition other than "-> RESET" and "-> ERR", with its rule for
// each QP type. Transcribed from IBA 11.2.5.2 (Modify QP attribute table) as
// Linux's qp_state_table states it, for RC, UC and UD. Notes:
//  - SQE -> RTS is listed for RC with nothing optional although an RC QP
//    never enters SQE (its send errors take it to ERR, IBA 10.3.1).
//  - IBV_QP_CUR_STATE is optional only where IBA gives "current QP state" as
//    an input: the transitions into RTS from RTR, RTS, SQD and SQE.
//  - RATE_LIMIT and CAP appear in no rule: only RAW_PACKET QPs may set a rate
//    limit, and queue sizes are fixed at create time.
struct Entry {
    QpState from;
    QpState to;
    TransitionRule rc;
    TransitionRule uc;
    TransitionRule ud;
};

constexpr Entry kTable[] = {
    {QpState::Reset, QpState::Init,
     {M::kPkeyIndex | M::kPort | M::kAccessFlags, 0},
     {M::kPkeyIndex | M::kPort | M::kAccessFlags, 0},
     {M::kPkeyIndex | M::kPort | M::kQkey, 0}},
    {QpState::Init, QpState::Init,
     {0, M::kPkeyIndex | M::kPort | M::kAccessFlags},
     {0, M::kPkeyIndex | M::kPort | M::kAccessFlags},
     {0, M::kPkeyIndex | M::kPort | M::kQkey}},
    {QpState::Init, QpState::Rtr,
     {M::kAv | M::kPathMtu | M::kDestQpn | M::kRqPsn | M::kMaxDestRdAtomic | M::kMinRnrTimer,
      M::kAltPath | M::kAccessFlags | M::kPkeyIndex},
     {M::kAv | M::kPathMtu | M::kDestQpn | M::kRqPsn, M::kAltPath | M::kAccessFlags | M::kPkeyIndex},
     {0, M::kPkeyIndex | M::kQkey}},
    {QpState::Rtr, QpState::Rts,
     {M::kTimeout | M::kRetryCnt | M::kRnrRetry | M::kSqPsn | M::kMaxQpRdAtomic,
      M::kCurState | M::kAltPath | M::kAccessFlags | M::kMinRnrTimer | M::kPathMigState},
     {M::kSqPsn, M::kCurState | M::kAltPath | M::kAccessFlags | M::kPathMigState},
     {M::kSqPsn, M::kCurState | M::kQkey}},
    {QpState::Rts, QpState::Rts,
     {0, M::kCurState | M::kAccessFlags | M::kAltPath | M::kPathMigState | M::kMinRnrTimer},
     {0, M::kCurState | M::kAccessFlags | M::kAltPath | M::kPathMigState},
     {0, M::kCurState | M::kQkey}},
    {QpState::Rts, QpState::Sqd,
     {0, M::kEnSqdAsyncNotify},
     {0, M::kEnSqdAsyncNotify},
     {0, M::kEnSqdAsyncNotify}},
    {QpState::Sqd, QpState::Rts,
     {0, M::kCurState | M::kAltPath | M::kAccessFlags | M::kMinRnrTimer | M::kPathMigState},
     {0, M::kCurState | M::kAltPath | M::kAccessFlags | M::kPathMigState},
     {0, M::kCurState | M::kQkey}},
    // In SQD (once drained) a connected QP may change its path and limits.
    {QpState::Sqd, QpState::Sqd,
     {0, M::kPort | M::kAv | M::kTimeout | M::kRetryCnt | M::kRnrRetry | M::kMaxQpRdAtomic | M::kMaxDestRdAtomic |
             M::kAltPath | M::kAccessFlags | M::kPkeyIndex | M::kMinRnrTimer | M::kPathMigState},
     {0, M::kAv | M::kAltPath | M::kAccessFlags | M::kPkeyIndex | M::kPathMigState},
     {0, M::kPkeyIndex | M::kQkey}},
    {QpState::Sqe, QpState::Rts,
     {0, 0},
     {0, M::kCurState | M::kAccessFlags},
     {0, M::kCurState | M::kQkey}},
};

// XRC (IBA annex A14; Linux's qp_state_table lists XRC_INI and XRC_TGT):
// each half takes RC's rule without the other half's attributes. An
// initiator has no responder (no MAX_DEST_RD_ATOMIC, MIN_RNR_TIMER), a
// target no requester (no RETRY_CNT, RNR_RETRY, MAX_QP_RD_ATOMIC).
constexpr std::uint32_t kResponderOnly = M::kMaxDestRdAtomic | M::kMinRnrTimer;
constexpr std::uint32_t kRequesterOnly = M::kRetryCnt | M::kRnrRetry | M::kMaxQpRdAtomic;

}  // namespace

std::uint32_t mask_as_kernel_takes(QpType type, std::uint32_t attr_mask) {
    switch (type) {
    case QpType::XrcIni:
        return attr_mask & ~kResponderOnly;
    case QpType::XrcTgt:
        return attr_mask & ~kRequesterOnly;
    default:
        return attr_mask;
    }
}

namespace {

TransitionRule without(const TransitionRule& r, std::uint32_t bits) {
    return {r.required & ~bits, r.optional & ~bits};
}

TransitionRule rule_for(const Entry& e, QpType type) {
    switch (type) {
    case QpType::Rc:
        return e.rc;
    case QpType::Uc:
        return e.uc;
    case QpType::XrcIni:
        return without(e.rc, kResponderOnly);
    case QpType::XrcTgt:
        return without(e.rc, kRequesterOnly);
    case QpType::Ud:
        break;
    }
    return e.ud;
}

ModifyCheck refuse(QpState next, const char* reason) { return {EINVAL, next, reason}; }

// The AV of a connected QP (IBV_QP_AV): RoCE addresses by GID, so the GRH is
// mandatory (the kernel's rdma_check_ah_attr), on the one port.
const char* check_av(const AhAttr& ah, const PortLimits& limits) {
    if (!ah.is_global) {
        return "ah_attr.is_global is 0: RoCE needs a GRH";
    }
    if (ah.port_num != kPortNum) {
        return "ah_attr.port_num is not 1";
    }
    if (ah.sgid_index >= limits.gid_table_len) {
        return "ah_attr.grh.sgid_index beyond the GID table";
    }
    // flow_label, sl: masked by apply_modify (address_values.h); hop_limit,
    // traffic_class: any value; static_rate: not checked by the kernel or
    // rdma_rxe either (qp_types.h).
    return nullptr;
}

// The value of every attribute in `mask`, which has already passed the rule.
const char* check_values(std::uint32_t mask, const QpAttr& attr, const PortLimits& limits) {
    if ((mask & M::kPort) != 0 && attr.port_num != kPortNum) {
        return "port_num is not 1";
    }
    if ((mask & M::kPkeyIndex) != 0 && attr.pkey_index >= limits.pkey_table_len) {
        return "pkey_index beyond the P_Key table";
    }
    if ((mask & M::kAccessFlags) != 0 && (attr.qp_access_flags & ~QpAccess::kAllowed) != 0) {
        return "qp_access_flags has bits other than LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC";
    }
    if ((mask & M::kAv) != 0) {
        if (const char* why = check_av(attr.ah_attr, limits)) {
            return why;
        }
    }
    if ((mask & M::kPathMtu) != 0) {
        if (!is_valid(attr.path_mtu)) {
            return "path_mtu is not an ibv_mtu (1..5)";
        }
        if (static_cast<unsigned>(attr.path_mtu) > static_cast<unsigned>(limits.active_mtu)) {
            return "path_mtu above the port's active MTU";
        }
    }
    if ((mask & M::kTimeout) != 0 && attr.timeout > kMaxTimeout) {
        return "timeout above 31";
    }
    if ((mask & M::kMaxQpRdAtomic) != 0 && attr.max_rd_atomic > limits.max_rd_atomic) {
        return "max_rd_atomic above the device's max_qp_init_rd_atom";
    }
    if ((mask & M::kMaxDestRdAtomic) != 0 && attr.max_dest_rd_atomic > limits.max_dest_rd_atomic) {
        return "max_dest_rd_atomic above the device's max_qp_rd_atom";
    }
    if ((mask & M::kPathMigState) != 0 && static_cast<unsigned>(attr.path_mig_state) >
                                                  static_cast<unsigned>(MigState::Armed)) {
        return "path_mig_state is not an ibv_mig_state";
    }
    // The kernel refuses alternate paths on RoCE ports (_ib_modify_qp): APM
    // is an InfiniBand feature.
    if ((mask & M::kAltPath) != 0) {
        return "alternate path (APM) is not supported on RoCE";
    }
    // QKEY, EN_SQD_ASYNC_NOTIFY: any value. RQ_PSN, SQ_PSN, DEST_QPN (24
    // bits), RETRY_CNT, RNR_RETRY (3 bits), MIN_RNR_TIMER (5 bits): masked
    // by apply_modify, as the kernel and hardware take them (qp_types.h).
    return nullptr;
}

}  // namespace

std::optional<TransitionRule> transition_rule(QpType type, QpState from, QpState to) {
    if (!is_valid(type) || !is_valid(from) || !is_valid(to)) {
        return std::nullopt;
    }
    // Any state -> RESET and any state -> ERR (IBA 10.3.1), with no attribute
    // but the state, except RESET -> ERR: Linux's table (and so every
    // hardware and rdma_rxe device an application meets) refuses it, and uroce
    // answers as they do.
    if (to == QpState::Reset || (to == QpState::Err && from != QpState::Reset)) {
        return TransitionRule{};
    }
    for (const Entry& e : kTable) {
        if (e.from == from && e.to == to) {
            return rule_for(e, type);
        }
    }
    return std::nullopt;
}

ModifyCheck check_modify(QpType type, QpState current, std::uint32_t attr_mask, const QpAttr& attr,
                         const PortLimits& limits) {
    if (!is_valid(type)) {
        return refuse(current, "QP type is not RC, UC or UD");
    }
    if (!is_valid(current)) {
        return refuse(current, "current state is not a QP state");
    }
    if ((attr_mask & ~M::kKnown) != 0) {
        return refuse(current, "attr_mask has bits that are not ibv_qp_attr_mask values");
    }
    const QpState next = (attr_mask & M::kState) != 0 ? attr.state : current;
    if (!is_valid(next)) {
        return refuse(current, "qp_state is not a QP state");
    }
    const std::optional<TransitionRule> rule = transition_rule(type, current, next);
    if (!rule) {
        return refuse(next, "illegal state transition");
    }
    if ((attr_mask & rule->required) != rule->required) {
        return refuse(next, "attr_mask lacks an attribute this transition requires");
    }
    if ((attr_mask & ~(rule->required | rule->optional | M::kState)) != 0) {
        return refuse(next, "attr_mask has an attribute this transition does not take");
    }
    // IBA 11.2.5.2: a current state given by the consumer must be the QP's.
    if ((attr_mask & M::kCurState) != 0 && attr.cur_state != current) {
        return refuse(next, "cur_qp_state is not the QP's current state");
    }
    if (const char* why = check_values(attr_mask, attr, limits)) {
        return refuse(next, why);
    }
    return {0, next, nullptr};
}

ModifyCheck check_modify(QpType type, const QpAttr& stored, std::uint32_t attr_mask, const QpAttr& attr,
                         const PortLimits& limits) {
    const ModifyCheck c = check_modify(type, stored.state, attr_mask, attr, limits);
    if (c.error != 0) {
        return c;
    }
    if (stored.state == QpState::Sqd && stored.sq_draining && c.next != QpState::Reset &&
        c.next != QpState::Err) {
        return refuse(c.next, "send queue still draining: only RESET or ERR until drained");
    }
    return c;
}

void apply_modify(QpAttr& stored, std::uint32_t mask, const QpAttr& attr, QpState next) {
    if (next == QpState::Sqd) {
        if (stored.state == QpState::Rts) {
            stored.sq_draining = true;
        }
    } else {
        stored.sq_draining = false;
    }
    stored.state = next;
    stored.cur_state = next;

    if ((mask & M::kEnSqdAsyncNotify) != 0) {
        stored.en_sqd_async_notify = attr.en_sqd_async_notify;
    }
    if ((mask & M::kAccessFlags) != 0) {
        stored.qp_access_flags = attr.qp_access_flags;
    }
    if ((mask & M::kPkeyIndex) != 0) {
        stored.pkey_index = attr.pkey_index;
    }
    if ((mask & M::kPort) != 0) {
        stored.port_num = attr.port_num;
    }
    if ((mask & M::kQkey) != 0) {
        stored.qkey = attr.qkey;
    }
    if ((mask & M::kAv) != 0) {
        stored.ah_attr = as_kernel_takes(attr.ah_attr);
    }
    if ((mask & M::kPathMtu) != 0) {
        stored.path_mtu = attr.path_mtu;
    }
    if ((mask & M::kTimeout) != 0) {
        stored.timeout = attr.timeout;
    }
    if ((mask & M::kRetryCnt) != 0) {
        stored.retry_cnt = attr.retry_cnt & kRetryCountMask;
    }
    if ((mask & M::kRnrRetry) != 0) {
        stored.rnr_retry = attr.rnr_retry & kRetryCountMask;
    }
    if ((mask & M::kRqPsn) != 0) {
        stored.rq_psn = attr.rq_psn & kPsnMask;
    }
    if ((mask & M::kMaxQpRdAtomic) != 0) {
        stored.max_rd_atomic = attr.max_rd_atomic;
    }
    if ((mask & M::kMinRnrTimer) != 0) {
        stored.min_rnr_timer = attr.min_rnr_timer & kMinRnrTimerMask;
    }
    if ((mask & M::kSqPsn) != 0) {
        stored.sq_psn = attr.sq_psn & kPsnMask;
    }
    if ((mask & M::kMaxDestRdAtomic) != 0) {
        stored.max_dest_rd_atomic = attr.max_dest_rd_atomic;
    }
    if ((mask & M::kPathMigState) != 0) {
        stored.path_mig_state = attr.path_mig_state;
    }
    if ((mask & M::kDestQpn) != 0) {
        stored.dest_qp_num = attr.dest_qp_num & kQpnMask;
    }
    if ((mask & M::kRateLimit) != 0) {
        stored.rate_limit = attr.rate_limit;
    }
    // CAP: sizes are set at create; ALT_PATH: refused, nothing to keep.
}

}  // namespace uroce::qp
