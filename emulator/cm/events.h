// What the connection manager hands to the layers around it:
//  - down: MADs to send (MadSender; the caller frames them for QP1, qp1.h),
//  - up: events (CmEventSink; the rdma_cm/ucma layer),
//  - time: an injected clock (CmClock), so that tests and the daemon decide
//    when time passes; the manager never sleeps and never reads a real clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "mad.h"
#include "messages.h"
#include "wire/headers.h"

namespace uroce::cm {

using CommId = std::uint32_t;  // the local comm ID: the handle of a connection
using CmTime = std::chrono::milliseconds;  // since any fixed origin

class CmClock {
public:
    virtual ~CmClock() = default;
    [[nodiscard]] virtual CmTime now() const = 0;
};

// Both ends of a CM exchange as RoCE addresses them (IPs as GIDs). For a
// received MAD, local is the frame's destination and remote its source.
struct PeerAddress {
    wire::Gid local{};
    wire::Gid remote{};

    friend bool operator==(const PeerAddress&, const PeerAddress&) = default;
};

// send_mad must not call back into the manager (a loopback peer queues the
// MAD and delivers it after the call that sent it has returned).
class MadSender {
public:
    virtual ~MadSender() = default;
    virtual void send_mad(const PeerAddress& to, const MadBytes& mad) = 0;
};

enum class CmEventType : std::uint8_t {
    ReqReceived,      // a REQ matched a listener: a new passive connection
    RepReceived,      // active: answer with confirm() (RTU) or reject()
    RtuReceived,      // passive: established
    UserEstablished,  // passive: establish() (the QP saw traffic before the RTU)
    RejReceived,      // message: the REJ (reason, ARI, private data)
    DreqReceived,     // answer with disconnect() (DREP)
    DrepReceived,     // in timewait now
    TimewaitExit,     // the connection is IDLE again; only if not destroyed
    ReqError,         // REQ retries exhausted (rdma_cm: UNREACHABLE, -ETIMEDOUT)
    RepError,         // REP retries exhausted
    DreqError,        // DREQ retries exhausted; in timewait now
    SidrReqReceived,  // a SIDR_REQ matched a listener
    SidrRepReceived,  // message: the SIDR_REP (status, QPN, Q_Key)
    SidrReqError,     // SIDR_REQ retries exhausted
};

struct CmEvent {
    CmEventType type = CmEventType::ReqReceived;
    CommId id = 0;
    PeerAddress peer;
    std::uint64_t listener_context = 0;  // ReqReceived, SidrReqReceived
    std::optional<Message> message;      // the message that caused it, if any
};

// What the layer above answers to ReqReceived and SidrReqReceived (other
// events ignore it). Drop is Linux's answer to a full backlog: no reply, the
// peer retransmits; Reject answers REJ with the reason (SIDR: SIDR_REP
// status Reject). Either way the connection is gone when the call returns.
struct Verdict {
    enum class Kind : std::uint8_t { Keep, Drop, Reject };
    Kind kind = Kind::Keep;
    RejReason reason = RejReason::ConsumerDefined;

    static Verdict keep() { return {}; }
    static Verdict drop() { return {Kind::Drop, RejReason::ConsumerDefined}; }
    static Verdict reject(RejReason r) { return {Kind::Reject, r}; }
};

class CmEventSink {
public:
    virtual ~CmEventSink() = default;
    // May call back into the manager (accept, reject, destroy...).
    virtual Verdict on_cm_event(const CmEvent& event) = 0;
};

}  // namespace uroce::cm
