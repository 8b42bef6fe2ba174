// The attributes of one QP, as ibv_modify_qp(3) sets them and ibv_query_qp(3)
// returns them: the fields of struct ibv_qp_attr the engine keeps, in engine
// types. The provider copies field by field; enum values are verbs.h's
// (qp_types.h). Not kept: the alternate path (alt_ah_attr, alt_pkey_index,
// alt_port_num, alt_timeout), because RoCE has no automatic path migration
// and ALT_PATH is refused (qp_state_machine.h).
#pragma once

#include <array>
#include <cstdint>

#include "qp_types.h"

namespace uroce::qp {

// struct ibv_qp_cap: queue sizes, fixed at create time (IBV_QP_CAP is never a
// legal modify bit), reported back by query.
struct QpCap {
    std::uint32_t max_send_wr = 0;
    std::uint32_t max_recv_wr = 0;
    std::uint32_t max_send_sge = 0;
    std::uint32_t max_recv_sge = 0;
    std::uint32_t max_inline_data = 0;

    friend bool operator==(const QpCap&, const QpCap&) = default;
};

// struct ibv_ah_attr with its struct ibv_global_route flattened in: the
// primary path of a connected QP (IBV_QP_AV). On RoCE the GRH carries the
// addressing, so is_global must be set; dlid and src_path_bits are kept for
// query but mean nothing on Ethernet.
struct AhAttr {
    std::array<std::uint8_t, 16> dgid{};  // network byte order, as in union ibv_gid
    std::uint32_t flow_label = 0;         // 20 bits
    std::uint8_t sgid_index = 0;          // index into the port's GID table
    std::uint8_t hop_limit = 0;
    std::uint8_t traffic_class = 0;
    bool is_global = false;
    std::uint16_t dlid = 0;
    std::uint8_t sl = 0;
    std::uint8_t src_path_bits = 0;
    std::uint8_t static_rate = 0;  // enum ibv_rate
    std::uint8_t port_num = 0;

    friend bool operator==(const AhAttr&, const AhAttr&) = default;
};

struct QpAttr {
    QpState state = QpState::Reset;      // qp_state
    QpState cur_state = QpState::Reset;  // cur_qp_state
    Mtu path_mtu = Mtu::Mtu1024;
    MigState path_mig_state = MigState::Migrated;
    std::uint32_t qkey = 0;
    std::uint32_t rq_psn = 0;
    std::uint32_t sq_psn = 0;
    std::uint32_t dest_qp_num = 0;
    std::uint32_t qp_access_flags = 0;  // QpAccess bits
    QpCap cap;
    AhAttr ah_attr;
    std::uint16_t pkey_index = 0;
    bool en_sqd_async_notify = false;
    bool sq_draining = false;  // output only: in SQD and the send queue not yet drained
    std::uint8_t max_rd_atomic = 0;       // RDMA reads/atomics outstanding as requester
    std::uint8_t max_dest_rd_atomic = 0;  // ... accepted as responder
    std::uint8_t min_rnr_timer = 0;       // 5-bit RNR NAK timer code
    std::uint8_t port_num = 0;
    std::uint8_t timeout = 0;  // local ACK timeout, 4.096 us * 2^timeout, 0 = infinite
    std::uint8_t retry_cnt = 0;
    std::uint8_t rnr_retry = 0;  // 7 = retry forever
    std::uint32_t rate_limit = 0;  // kbps; only RAW_PACKET QPs may set it, so stays 0

    friend bool operator==(const QpAttr&, const QpAttr&) = default;
};

}  // namespace uroce::qp
