// The verbs enumerations the engine reads from WQEs and writes into CQEs and
// async events. The numbers are rdma-core's verbs.h (enum ibv_wr_opcode,
// ibv_send_flags, ibv_wc_opcode, ibv_wc_flags, ibv_event_type) so they travel
// through the rings unchanged; the engine does not include rdma-core.
#pragma once

#include <cstdint>

namespace uroce::engine {

// enum ibv_wr_opcode
enum class WrOpcode : std::uint8_t {
    RdmaWrite = 0,
    RdmaWriteWithImm = 1,
    Send = 2,
    SendWithImm = 3,
    RdmaRead = 4,
    AtomicCmpAndSwp = 5,
    AtomicFetchAndAdd = 6,
    LocalInv = 7,
    BindMw = 8,
    SendWithInv = 9,
};
inline constexpr std::uint8_t kWrOpcodeLimit = 10;

// enum ibv_send_flags
struct SendFlag {
    static constexpr std::uint32_t kFence = 1u << 0;
    static constexpr std::uint32_t kSignaled = 1u << 1;
    static constexpr std::uint32_t kSolicited = 1u << 2;
    static constexpr std::uint32_t kInline = 1u << 3;
};

// enum ibv_wc_opcode
enum class WcOpcode : std::uint32_t {
    Send = 0,
    RdmaWrite = 1,
    RdmaRead = 2,
    CompSwap = 3,
    FetchAdd = 4,
    BindMw = 5,
    LocalInv = 6,
    Recv = 128,
    RecvRdmaWithImm = 129,
};

// enum ibv_wc_flags
struct WcFlag {
    static constexpr std::uint32_t kGrh = 1u << 0;
    static constexpr std::uint32_t kWithImm = 1u << 1;
    static constexpr std::uint32_t kWithInv = 1u << 3;
};

// ibv_wc.sl of a UD receive on a RoCE port, as mlx5 reports it (its CQE's
// 4-bit sl field, which for a UD responder on RoCE carries the packet type
// instead of a service level): bit 3 set when the frame had a UDP header
// (RoCE v2), bits 2:0 the L3 header type, 0 GRH (RoCE v1), 1 IPv6, 2 IPv4.
// UCX's ud transports read it to find where the DGID sits in the 40 bytes
// of GRH space (an IPv4 header fills its last 20) and drop the packet when
// the DGID is not one of theirs, so 0 makes them drop every IPv4 packet.
struct RoceWcSl {
    static constexpr std::uint8_t kUdpHeader = 1u << 3;
    static constexpr std::uint8_t kIpv6 = 1;
    static constexpr std::uint8_t kIpv4 = 2;
    static constexpr std::uint8_t kRoceV2Ipv6 = kUdpHeader | kIpv6;
    static constexpr std::uint8_t kRoceV2Ipv4 = kUdpHeader | kIpv4;
};

// enum ibv_event_type
enum class AsyncEvent : std::uint32_t {
    CqErr = 0,
    QpFatal = 1,
    QpReqErr = 2,
    QpAccessErr = 3,
    CommEst = 4,
    SqDrained = 5,
    SrqLimitReached = 15,
    QpLastWqeReached = 16,
};

}  // namespace uroce::engine
