// INIT_QP_ATTR: the QP attributes and mask rdma_cm hands the program for
// each state (cma.c rdma_init_qp_attr, cma_ib_init_qp_attr; cm.c
// cm_init_qp_init_attr, cm_init_qp_rtr_attr, cm_init_qp_rts_attr).
// librdmacm applies them with ibv_modify_qp unchanged.
#include <cerrno>
#include <cstring>

#include "ucma/ucma_device.h"

namespace uroce::ucma {

namespace {

// enum ib_qp_state / ibv_qp_state.
constexpr std::uint32_t kQpsInit = 1;
constexpr std::uint32_t kQpsRtr = 2;
constexpr std::uint32_t kQpsRts = 3;
constexpr std::uint32_t kQpsErr = 6;
// enum ibv_qp_attr_mask.
constexpr std::uint32_t kState = 1u << 0;
constexpr std::uint32_t kAccessFlags = 1u << 3;
constexpr std::uint32_t kPkeyIndex = 1u << 4;
constexpr std::uint32_t kPort = 1u << 5;
constexpr std::uint32_t kQkey = 1u << 6;
constexpr std::uint32_t kAv = 1u << 7;
constexpr std::uint32_t kPathMtu = 1u << 8;
constexpr std::uint32_t kTimeout = 1u << 9;
constexpr std::uint32_t kRetryCnt = 1u << 10;
constexpr std::uint32_t kRnrRetry = 1u << 11;
constexpr std::uint32_t kRqPsn = 1u << 12;
constexpr std::uint32_t kMaxQpRdAtomic = 1u << 13;
constexpr std::uint32_t kMinRnrTimer = 1u << 15;
constexpr std::uint32_t kSqPsn = 1u << 16;
constexpr std::uint32_t kMaxDestRdAtomic = 1u << 17;
constexpr std::uint32_t kDestQpn = 1u << 20;
// enum ibv_access_flags.
constexpr std::uint32_t kRemoteWrite = 1u << 1;
constexpr std::uint32_t kRemoteRead = 1u << 2;
constexpr std::uint32_t kRemoteAtomic = 1u << 3;
// RDMA_UDP_QKEY: the Q_Key of rdma_cm's UDP and IB port spaces.
constexpr std::uint32_t kUdpQkey = 0x01234567;
constexpr std::uint8_t kQpTypeUd = 4;
// The local ACK timeout the CM gives the QP: packet lifetime + 1
// (cm.c cm_init_av_by_path), 19 for a RoCE path.
constexpr std::uint8_t kPortNum = 1;

bool cm_exchanged(CmPhase p) { return p != CmPhase::None; }

// States in which cm.c answers RTR and RTS (the REQ or REP is in hand and
// the connection is not being torn down).
bool connection_known(CmPhase p) {
    return p == CmPhase::ReqReceived || p == CmPhase::RepReceived || p == CmPhase::RepSent ||
           p == CmPhase::Established;
}

}  // namespace

int UcmaDevice::init_qp_attr(ChannelId ch, const std::uint8_t* body, std::uint16_t out, CommandResult& r) {
    rdma_ucm_init_qp_attr cmd{};
    std::memcpy(&cmd, body, sizeof(cmd));
    if (out < sizeof(ib_uverbs_qp_attr)) {
        return ENOSPC;
    }
    if (cmd.qp_state > kQpsErr) {
        return EINVAL;
    }
    int err = 0;
    CmId* id = find(ch, cmd.id, err);
    if (id == nullptr) {
        return err;
    }
    if (!id->bound_to_device) {
        return EINVAL;  // no device yet: nothing to describe
    }
    ib_uverbs_qp_attr a{};
    a.qp_state = cmd.qp_state;
    const ConnectionState& c = id->conn;
    if (cmd.qp_state == kQpsInit) {
        a.qp_attr_mask = kState | kPkeyIndex | kPort;
        a.pkey_index = 0;  // 0xffff is entry 0 of the one-entry P_Key table
        a.port_num = kPortNum;
        if (id->qp_type == kQpTypeUd) {
            a.qkey = kUdpQkey;
            a.qp_attr_mask |= kQkey;
        } else {
            a.qp_attr_mask |= kAccessFlags;
            if (cm_exchanged(id->phase)) {
                a.qp_access_flags = kRemoteWrite;
                if (c.responder_resources != 0) {
                    a.qp_access_flags |= kRemoteRead | kRemoteAtomic;
                }
            }
        }
    } else if ((cmd.qp_state == kQpsRtr || cmd.qp_state == kQpsRts) && id->qp_type != kQpTypeUd &&
               connection_known(id->phase)) {
        if (cmd.qp_state == kQpsRtr) {
            a.qp_attr_mask = kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer;
            a.path_mtu = c.path.mtu;
            a.dest_qp_num = c.remote_qpn;
            a.rq_psn = c.own_psn;
            a.max_dest_rd_atomic = c.responder_resources;
            a.min_rnr_timer = 0;
            fill_ah_attr(*id, a.ah_attr);
        } else {
            a.qp_attr_mask = kState | kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxQpRdAtomic;
            a.sq_psn = c.peer_psn;
            a.timeout = static_cast<std::uint8_t>(c.path.packet_life_time + 1);
            a.retry_cnt = c.retry_count;
            a.rnr_retry = c.rnr_retry_count;
            a.max_rd_atomic = c.initiator_depth;
        }
    } else {
        return EINVAL;
    }
    r.length = sizeof(a);
    std::memcpy(r.bytes.data(), &a, sizeof(a));
    return 0;
}

}  // namespace uroce::ucma
