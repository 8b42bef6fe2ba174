// The states of one CM connection (IBA vol. 1, 12.9.6 figure 160 "CM state
// diagram", without LAP/APR which RoCE does not use; names as Linux's
// ib_cm_state). SIDR exchanges are one request and one reply (12.11).
#pragma once

#include <cstdint>
#include <string_view>

namespace uroce::cm {

enum class CmState : std::uint8_t {
    Idle,          // no exchange, or one that ended without timewait
    ReqSent,       // active: REQ out, waiting for REP (REQ resent on timeout)
    ReqRcvd,       // passive: REQ delivered upwards, no answer yet
    MraReqSent,    // passive: as ReqRcvd, and a duplicate REQ is answered with MRA
    MraReqRcvd,    // active: the peer's MRA stretched the REP wait
    RepSent,       // passive: REP out, waiting for RTU (REP resent on timeout)
    RepRcvd,       // active: REP delivered upwards, RTU not sent yet
    MraRepSent,    // active: as RepRcvd, and a duplicate REP is answered with MRA
    MraRepRcvd,    // passive: the peer's MRA stretched the RTU wait
    Established,
    DreqSent,      // DREQ out, waiting for DREP (DREQ resent on timeout)
    DreqRcvd,      // DREQ delivered upwards, DREP not sent yet
    Timewait,      // the QP may still see old packets: comm IDs and QPNs held
    SidrReqSent,   // SIDR_REQ out, waiting for SIDR_REP
    SidrReqRcvd,   // SIDR_REQ delivered upwards, SIDR_REP not sent yet
};

[[nodiscard]] constexpr std::string_view state_name(CmState s) {
    switch (s) {
    case CmState::Idle: return "IDLE";
    case CmState::ReqSent: return "REQ_SENT";
    case CmState::ReqRcvd: return "REQ_RCVD";
    case CmState::MraReqSent: return "MRA_REQ_SENT";
    case CmState::MraReqRcvd: return "MRA_REQ_RCVD";
    case CmState::RepSent: return "REP_SENT";
    case CmState::RepRcvd: return "REP_RCVD";
    case CmState::MraRepSent: return "MRA_REP_SENT";
    case CmState::MraRepRcvd: return "MRA_REP_RCVD";
    case CmState::Established: return "ESTABLISHED";
    case CmState::DreqSent: return "DREQ_SENT";
    case CmState::DreqRcvd: return "DREQ_RCVD";
    case CmState::Timewait: return "TIMEWAIT";
    case CmState::SidrReqSent: return "SIDR_REQ_SENT";
    case CmState::SidrReqRcvd: return "SIDR_REQ_RCVD";
    }
    return "?";
}

}  // namespace uroce::cm
