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
