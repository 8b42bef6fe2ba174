// Which engine thread owns a QP, and where a received frame goes, when
// uroced runs more than one engine thread (`--cores N`, docs/architecture.md
// "More than one core"). A QP lives on one thread from creation to
// destruction, and every frame addressed to it (BTH DestQP, IBA 9.2) is
// steered to that thread, so one thread runs its requester, responder and
// completer in arrival order: ordering within a QP holds (IBA 10.8.6 asks
// for no more). QPNs are handed out consecutively, so taking them modulo
// the thread count spreads perftest's `-q 8` QPs evenly.
#pragma once

#include <cstdint>

#include "common/ids.h"

namespace uroce::engine {

// The most engine threads a daemon runs (uroced --cores): far above the
// cores of any machine uroced is built for, low enough for a fixed array
// of per-thread rings.
inline constexpr std::uint32_t kMaxEngineCores = 64;

// The general services interface's QP (IBA 13.4.6.1, QP1): CM MADs, served
// by the control thread's wire CM. Same value as cm::kGsiQpn.
inline constexpr std::uint32_t kGsiQpNumber = 1;
// The destination QP of every multicast packet (IBA 10.5.2.2); its copies
// go to attached QPs on any thread, so the control thread fans it out.
inline constexpr std::uint32_t kMulticastQpNumber = 0xFFFFFF;

// The engine thread that owns `qpn` among `cores` threads (cores >= 1).
[[nodiscard]] constexpr std::uint32_t core_of(Qpn qpn, std::uint32_t cores) {
    return cores <= 1 ? 0 : qpn.value() % cores;
}

// Who takes a received frame.
enum class FrameOwner : std::uint8_t {
    Engine,   // the engine thread `core` (the destination QP's owner)
    Control,  // the control thread: QP1 (CM), multicast fan-out, ARP/ND/IGMP/MLD, malformed
};

struct Steering {
    FrameOwner owner = FrameOwner::Control;
    std::uint32_t core = 0;  // meaningful for FrameOwner::Engine only

    friend constexpr bool operator==(const Steering&, const Steering&) = default;
};

// Where a RoCE frame addressed to `dest_qp` (the BTH's 24-bit DestQP) goes
// among `cores` engine threads.
[[nodiscard]] constexpr Steering steer_roce(std::uint32_t dest_qp, std::uint32_t cores) {
    if (dest_qp == kGsiQpNumber || dest_qp == kMulticastQpNumber) {
        return {FrameOwner::Control, 0};
    }
    return {FrameOwner::Engine, core_of(Qpn{dest_qp}, cores)};
}

// A frame that is not a well-formed RoCE frame (ARP, ND, IGMP, MLD, or one
// the parser refused): the control thread counts or answers it.
[[nodiscard]] constexpr Steering steer_other() { return {FrameOwner::Control, 0}; }

}  // namespace uroce::engine
