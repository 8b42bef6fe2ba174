// Shared helpers of the QP state-machine tests: short mask names, the port
// limits the tests run under, a QpAttr whose every field is valid for any
// transition, and the lists of types and states to iterate over. Expected
// outcomes come from the tests' own tables, never from the code under test.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <ostream>

#include "qp/qp_attr.h"
#include "qp/qp_describe.h"
#include "qp/qp_state_machine.h"
#include "qp/qp_types.h"

namespace uroce::qp {

// gtest prints the enums by name.
inline void PrintTo(QpState s, std::ostream* os) { *os << describe(s) << '(' << static_cast<int>(s) << ')'; }
inline void PrintTo(QpType t, std::ostream* os) { *os << describe(t) << '(' << static_cast<int>(t) << ')'; }

namespace test {

// IBV_QP_* bits, named as the IBA attribute table reads.
constexpr std::uint32_t kStateBit = 1u << 0;
constexpr std::uint32_t kCur = 1u << 1;
constexpr std::uint32_t kSqdNotify = 1u << 2;
constexpr std::uint32_t kAccess = 1u << 3;
constexpr std::uint32_t kPkey = 1u << 4;
constexpr std::uint32_t kPort = 1u << 5;
constexpr std::uint32_t kQkey = 1u << 6;
constexpr std::uint32_t kAv = 1u << 7;
constexpr std::uint32_t kMtu = 1u << 8;
constexpr std::uint32_t kTimeout = 1u << 9;
constexpr std::uint32_t kRetry = 1u << 10;
constexpr std::uint32_t kRnrRetry = 1u << 11;
constexpr std::uint32_t kRqPsn = 1u << 12;
constexpr std::uint32_t kRdAtomic = 1u << 13;
constexpr std::uint32_t kAltPath = 1u << 14;
constexpr std::uint32_t kMinRnr = 1u << 15;
constexpr std::uint32_t kSqPsn = 1u << 16;
constexpr std::uint32_t kDestRdAtomic = 1u << 17;
constexpr std::uint32_t kMigState = 1u << 18;
constexpr std::uint32_t kCap = 1u << 19;
constexpr std::uint32_t kDestQpn = 1u << 20;
constexpr std::uint32_t kRateLimit = 1u << 25;

constexpr std::array<QpType, 3> kTypes = {QpType::Rc, QpType::Uc, QpType::Ud};
constexpr std::array<QpState, 7> kStates = {QpState::Reset, QpState::Init, QpState::Rtr, QpState::Rts,
                                            QpState::Sqd,   QpState::Sqe,  QpState::Err};

// A port like a 1500-byte Ethernet port's: active MTU 1024.
constexpr PortLimits kLimits{
    .active_mtu = Mtu::Mtu1024,
    .max_rd_atomic = 8,
    .max_dest_rd_atomic = 12,
    .pkey_table_len = 1,
    .gid_table_len = 4,
};

inline AhAttr good_ah() {
    AhAttr ah;
    ah.dgid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 7, 2};
    ah.flow_label = 0x12345;
    ah.sgid_index = 1;
    ah.hop_limit = 64;
    ah.traffic_class = 0x60;
    ah.is_global = true;
    ah.dlid = 0;
    ah.sl = 3;
    ah.src_path_bits = 0;
    ah.static_rate = 0;
    ah.port_num = 1;
    return ah;
}

// Every field in range under kLimits, so only the mask decides the outcome.
inline QpAttr good_attr(QpState from, QpState to) {
    QpAttr a;
    a.state = to;
    a.cur_state = from;
    a.path_mtu = Mtu::Mtu1024;
    a.path_mig_state = MigState::Migrated;
    a.qkey = 0x11111111;
    a.rq_psn = 0x123456;
    a.sq_psn = 0xabcdef;
    a.dest_qp_num = 0x000123;
    a.qp_access_flags = 0xF;
    a.ah_attr = good_ah();
    a.pkey_index = 0;
    a.en_sqd_async_notify = true;
    a.max_rd_atomic = 4;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 12;
    a.port_num = 1;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.rate_limit = 0;
    return a;
}

}  // namespace test
}  // namespace uroce::qp
