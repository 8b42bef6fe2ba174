// Queue-pair enumerations: transport type, state, path MTU, path-migration
// state and the ibv_modify_qp(3) attribute mask. The numbers are those of
// rdma-core's verbs.h (enum ibv_qp_type, ibv_qp_state, ibv_mtu, ibv_mig_state,
// ibv_qp_attr_mask) so they travel from the provider unchanged; the engine
// itself does not include rdma-core headers.
#pragma once

#include <cstdint>

namespace uroce::qp {

// enum ibv_qp_type. The IBA transports a RoCE device offers to user space,
// XRC's two halves included; RAW_PACKET and the special QPs 0/1 are not
// modelled.
enum class QpType : std::uint8_t {
    Rc = 2,      // Reliable Connected
    Uc = 3,      // Unreliable Connected
    Ud = 4,      // Unreliable Datagram
    XrcIni = 9,  // XRC initiator (IBV_QPT_XRC_SEND): an RC send queue, no receive side
    XrcTgt = 10, // XRC target (IBV_QPT_XRC_RECV): an RC responder delivering into XRC SRQs
};

// enum ibv_qp_state, the QP states of IBA 10.3.1.
enum class QpState : std::uint8_t {
    Reset = 0,
    Init = 1,
    Rtr = 2,  // Ready To Receive
    Rts = 3,  // Ready To Send
    Sqd = 4,  // Send Queue Drain(ed)
    Sqe = 5,  // Send Queue Error: UC and UD only, entered by the device
    Err = 6,
};
inline constexpr unsigned kQpStateCount = 7;

[[nodiscard]] constexpr bool is_valid(QpState s) { return static_cast<unsigned>(s) < kQpStateCount; }
[[nodiscard]] constexpr bool is_valid(QpType t) {
    return t == QpType::Rc || t == QpType::Uc || t == QpType::Ud || t == QpType::XrcIni || t == QpType::XrcTgt;
}
[[nodiscard]] constexpr bool is_xrc(QpType t) { return t == QpType::XrcIni || t == QpType::XrcTgt; }

// enum ibv_mtu: the path MTU as a code, 256 << (code - 1) bytes.
enum class Mtu : std::uint8_t {
    Mtu256 = 1,
    Mtu512 = 2,
    Mtu1024 = 3,
    Mtu2048 = 4,
    Mtu4096 = 5,
};

[[nodiscard]] constexpr bool is_valid(Mtu m) {
    return static_cast<unsigned>(m) >= static_cast<unsigned>(Mtu::Mtu256) &&
           static_cast<unsigned>(m) <= static_cast<unsigned>(Mtu::Mtu4096);
}
// Bytes of payload per packet, or 0 for a code that is not an ibv_mtu.
[[nodiscard]] constexpr std::uint32_t mtu_bytes(Mtu m) {
    return is_valid(m) ? 128u << static_cast<unsigned>(m) : 0u;
}

// enum ibv_mig_state: the state of automatic path migration (APM).
enum class MigState : std::uint8_t {
    Migrated = 0,
    Rearm = 1,
    Armed = 2,
};

// enum ibv_qp_attr_mask: which fields of an ibv_qp_attr a modify carries.
// A struct rather than a namespace so it reads as AttrMask::kState.
struct AttrMask {
    static constexpr std::uint32_t kState = 1u << 0;
    static constexpr std::uint32_t kCurState = 1u << 1;
    static constexpr std::uint32_t kEnSqdAsyncNotify = 1u << 2;
    static constexpr std::uint32_t kAccessFlags = 1u << 3;
    static constexpr std::uint32_t kPkeyIndex = 1u << 4;
    static constexpr std::uint32_t kPort = 1u << 5;
    static constexpr std::uint32_t kQkey = 1u << 6;
    static constexpr std::uint32_t kAv = 1u << 7;
    static constexpr std::uint32_t kPathMtu = 1u << 8;
    static constexpr std::uint32_t kTimeout = 1u << 9;
    static constexpr std::uint32_t kRetryCnt = 1u << 10;
    static constexpr std::uint32_t kRnrRetry = 1u << 11;
    static constexpr std::uint32_t kRqPsn = 1u << 12;
    static constexpr std::uint32_t kMaxQpRdAtomic = 1u << 13;
    static constexpr std::uint32_t kAltPath = 1u << 14;
    static constexpr std::uint32_t kMinRnrTimer = 1u << 15;
    static constexpr std::uint32_t kSqPsn = 1u << 16;
    static constexpr std::uint32_t kMaxDestRdAtomic = 1u << 17;
    static constexpr std::uint32_t kPathMigState = 1u << 18;
    static constexpr std::uint32_t kCap = 1u << 19;
    static constexpr std::uint32_t kDestQpn = 1u << 20;
    // Bits 21-24 are verbs.h's _IBV_QP_SMAC, _ALT_SMAC, _VID and _ALT_VID:
    // kernel-internal, never valid from user space, so not named here.
    static constexpr std::uint32_t kRateLimit = 1u << 25;

    // Every bit this header names; anything else in a mask is EINVAL.
    static constexpr std::uint32_t kKnown = ((1u << 21) - 1) | kRateLimit;
};

// The rights a QP grants to incoming requests (ibv_qp_attr.qp_access_flags):
// the remote subset of enum ibv_access_flags, plus LOCAL_WRITE, which
// ibv_modify_qp(3) accepts and ignores for a QP.
struct QpAccess {
    static constexpr std::uint32_t kLocalWrite = 1u << 0;
    static constexpr std::uint32_t kRemoteWrite = 1u << 1;
    static constexpr std::uint32_t kRemoteRead = 1u << 2;
    static constexpr std::uint32_t kRemoteAtomic = 1u << 3;
    static constexpr std::uint32_t kAllowed = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;
};

// The device has one port; a channel adapter numbers its ports from 1.
inline constexpr std::uint8_t kPortNum = 1;
// QPNs and PSNs are 24-bit fields of the BTH (IBA 9.2).
inline constexpr std::uint32_t kQpnMask = 0xFFFFFF;
inline constexpr std::uint32_t kPsnMask = 0xFFFFFF;
// The GRH flow label is 20 bits (IBA 8.3, as in the IPv6 header of RFC 8200).
inline constexpr std::uint32_t kFlowLabelMask = 0xFFFFF;
// The local ACK timeout is a 5-bit code; rdma_rxe (rxe_qp_chk_attr) and
// hardware refuse a larger one. The minimum RNR NAK timer is a 5-bit code and
// the retry and RNR retry counts 3-bit ones (7 = infinite RNR retry), as
// ibv_modify_qp(3) says; the kernel passes wider values through and rdma_rxe
// accepts them, so uroce keeps their low bits as hardware does (mlx5 writes
// them into fields of these widths) instead of refusing them.
inline constexpr std::uint8_t kMaxTimeout = 31;
inline constexpr std::uint8_t kMinRnrTimerMask = 0x1F;
inline constexpr std::uint8_t kRetryCountMask = 0x7;

// ibv_ah_attr.static_rate (enum ibv_rate) is not checked: neither the
// kernel's uverbs layer nor rdma_rxe checks it, and uroce does not pace by
// it, so any value is accepted and kept for query.

}  // namespace uroce::qp
