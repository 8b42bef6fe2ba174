// The CM connection state machine for one port (IBA vol. 1, 12.9 and 12.11;
// timers, duplicate and stale handling as Linux's cm.c behaves).
//
// Inputs: calls from the layer above (connect, accept, confirm, reject,
// disconnect, establish, destroy, SIDR request/reply), received MADs
// (receive), and the passing of time (on_timer, at clock.now()). Outputs:
// MADs through MadSender and events through CmEventSink (events.h). Nothing
// blocks and nothing reads a real clock; next_deadline() says when on_timer
// wants to run next. Not thread-safe: one owner thread calls everything.
//
// A connection is named by its local comm ID. It lives from connect() /
// ReqReceived until destroy(); an ID that went through timewait stays
// reserved until timewait ends even after destroy(), so neither comm IDs nor
// (remote QPN, CA GUID) pairs are reused too soon (IBA 12.9.8.3).
#pragma once

#include <array>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <unordered_map>
#include <utility>

#include "codec.h"
#include "comm_id.h"
#include "events.h"
#include "format.h"
#include "state.h"
#include "timers.h"

namespace uroce::cm {

struct CmConfig {
    // This device's node GUID: the manager puts it in every REQ and REP
    // (ConnectParams/AcceptParams::local_ca_guid are overridden) and in the
    // ARI of a REJ "timeout".
    std::uint64_t ca_guid = 0;
    std::uint32_t tid_high = 2;       // high half of the TIDs this side starts
    std::uint32_t random_seed = 1;    // comm ID allocation
    // rdma_cm arms an MRA on every REQ/REP it hands to user space but sends
    // it only in answer to a duplicate (cma.c, "lazy MRA"): service timeout
    // 24 (~67 s). nullopt: never send MRA.
    std::optional<std::uint8_t> lazy_mra_service_timeout = 24;
    std::uint8_t packet_life_time = 18;  // for MRA waits on the active side
    Millis sidr_timeout{4096};
    std::uint8_t sidr_max_retries = kMaxCmRetries;
};

enum class CallStatus : std::uint8_t { Ok, NoSuchId, WrongState };

struct SidrRequestParams {
    std::uint64_t service_id = 0;
    std::uint16_t partition_key = 0xFFFF;
    PrivateData<kSidrReqPrivateData> private_data{};  // CMA header first
};

struct SidrReplyParams {
    SidrStatus status = SidrStatus::Success;
    std::uint32_t qpn = 0;
    std::uint32_t qkey = 0;
    PrivateData<kSidrRepPrivateData> private_data{};
};

// A read-only look at one connection.
struct ConnectionView {
    CmState state = CmState::Idle;
    CommId remote_id = 0;
    std::uint64_t remote_ca_guid = 0;
    std::uint32_t remote_qpn = 0;
    std::uint32_t local_qpn = 0;
    std::uint64_t service_id = 0;
    PeerAddress peer;
};

struct CmCounters {
    std::array<std::uint64_t, kCmParseStatusCount> rx_status{};  // received MADs by outcome
    std::uint64_t sent = 0;
    std::uint64_t retransmits = 0;
    std::uint64_t duplicates = 0;     // a REQ/REP/DREQ/MRA/RTU seen again (answered or dropped)
    std::uint64_t unmatched = 0;      // no connection in a state that takes it
    std::uint64_t stale = 0;          // REJ 10 sent for a stale connection
    std::uint64_t no_listener = 0;    // REJ 8 / SIDR_REP unsupported sent
    std::uint64_t timeouts = 0;       // retries exhausted
};

class ConnectionManager {
public:
    ConnectionManager(const CmConfig& config, const CmClock& clock, MadSender& sender, CmEventSink& sink);

    // Listeners are found by exact service ID (rdma_cm's IP service IDs
    // name port space and port, service_id.h). False: already listened on.
    bool listen(std::uint64_t service_id, std::uint64_t listener_context);
    void stop_listening(std::uint64_t service_id);
    // Every REQ and SIDR_REQ no exact listener takes goes up with `context`
    // (the layer above knows its listeners and refuses with REJ 8 itself:
    // the rdma_cm device, whose listeners may bind wildcard addresses).
    void listen_to_every_service(std::uint64_t context) { any_service_ = context; }

    // Active side: sends REQ, REQ_SENT. The peer's REP comes as RepReceived.
    [[nodiscard]] std::optional<CommId> connect(const PeerAddress& peer, const ConnectParams& params);
    // Active side, after RepReceived: sends RTU, ESTABLISHED.
    CallStatus confirm(CommId id, const PrivateData<kRtuPrivateData>& private_data = {});
    // Passive side, after ReqReceived: sends REP, REP_SENT.
    CallStatus accept(CommId id, const AcceptParams& params);
    // Passive side: the QP is in use before the RTU came (COMM_EST).
    CallStatus establish(CommId id);
    // Before ESTABLISHED: sends REJ. Timewait after a REP was sent.
    CallStatus reject(CommId id, RejReason reason, std::span<const std::uint8_t> ari = {},
                      std::span<const std::uint8_t> private_data = {});
    // ESTABLISHED: sends DREQ (DREQ_SENT); DREQ_RCVD: sends DREP (timewait).
    CallStatus disconnect(CommId id, std::span<const std::uint8_t> private_data = {});
    // The layer above is done with the connection: whatever the state needs
    // is sent (REJ, DREQ or DREP, SIDR_REP reject) and the ID is forgotten,
    // after timewait if there is one. No further event names it.
    void destroy(CommId id);

    [[nodiscard]] std::optional<CommId> sidr_request(const PeerAddress& peer, const SidrRequestParams& params);
    CallStatus sidr_reply(CommId id, const SidrReplyParams& params);

    // A MAD from the wire (the 256 bytes a QP1 frame carried), and who sent
    // it. Malformed MADs are counted and dropped.
    CmParseStatus receive(const PeerAddress& from, std::span<const std::uint8_t> mad);

    // Fires every timer due at clock.now(): retransmissions, their
    // exhaustion, timewait ends.
    void on_timer();
    [[nodiscard]] std::optional<CmTime> next_deadline() const;

    [[nodiscard]] std::optional<ConnectionView> view(CommId id) const;
    [[nodiscard]] std::optional<CmState> state(CommId id) const;
    [[nodiscard]] std::size_t connection_count() const { return conns_.size(); }
    [[nodiscard]] const CmCounters& counters() const { return counters_; }

private:
    // A MAD sent and resent until answered or out of retries.
    struct Outstanding {
        MadBytes mad{};
        Millis interval{};
        std::uint8_t retries_left = 0;
    };

    struct Connection {
        CommId local_id = 0;
        CmState state = CmState::Idle;
        bool destroyed = false;
        PeerAddress peer;
        std::uint64_t listener_context = 0;
        std::uint64_t service_id = 0;
        CommId remote_id = 0;
        std::uint64_t remote_ca_guid = 0;
        std::uint32_t remote_qpn = 0;
        std::uint32_t local_qpn = 0;
        std::uint64_t tid = 0;           // of the exchange this side answers or started
        Millis response_timeout{};       // how long to wait for an answer to our REQ/REP/DREQ
        std::uint8_t max_cm_retries = kMaxCmRetries;
        std::uint8_t packet_life_time = 18;
        // The path's timeout (cm.c av.timeout, 4.096 us * 2^n), which timewait
        // lasts: the packet lifetime plus one, on the active side raised by the
        // REP's target ACK delay (cm_rep_handler), on the passive side the
        // REQ's local ACK timeout.
        std::uint8_t path_timeout = 19;
        std::optional<Outstanding> outstanding;
        std::optional<MadBytes> last_answer;  // RTU or DREP, resent on a duplicate REP/DREQ
        std::optional<CmTime> deadline;
        bool remote_keys_held = false;
        std::optional<std::pair<std::uint32_t, wire::Gid>> sidr_key;
    };

    using RemoteKey = std::pair<std::uint32_t, std::uint64_t>;  // (comm ID or QPN, CA GUID)
    using SidrKey = std::pair<std::uint32_t, wire::Gid>;         // (request ID, sender)

    // Receive, one per message.
    void on_req(const PeerAddress& from, const MadHeader& h, const ReqMsg& m);
    void on_rep(const MadHeader& h, const RepMsg& m);
    void on_rtu(const RtuMsg& m);
    void on_dreq(const PeerAddress& from, const MadHeader& h, const DreqMsg& m);
    void on_drep(const DrepMsg& m);
    void on_rej(const RejMsg& m);
    void on_mra(const MraMsg& m);
    void on_sidr_req(const PeerAddress& from, const MadHeader& h, const SidrReqMsg& m);
    void on_sidr_rep(const SidrRepMsg& m);

    void on_duplicate_req(Connection& c, const MadHeader& h);
    void on_duplicate_rep(Connection& c);
    void after_request_upcall(CommId id, const Verdict& v, bool sidr);

    // Sending.
    void send(const PeerAddress& to, const Mad& mad);
    void send_with_retries(Connection& c, const Mad& mad, Millis interval, std::uint8_t retries);
    void send_rej(Connection& c, RejReason reason, MsgRef which, std::span<const std::uint8_t> ari,
                  std::span<const std::uint8_t> private_data);
    void send_mra(Connection& c, MsgRef which);
    void send_dreq_once(Connection& c);
    void send_drep(Connection& c, std::span<const std::uint8_t> private_data);
    // Answers to a MAD no connection takes (cm.c's cm_issue_rej / cm_issue_drep).
    void issue_rej(const PeerAddress& from, const MadHeader& h, CommId their_id, RejReason reason, MsgRef which);
    void issue_drep(const PeerAddress& from, const MadHeader& h, const DreqMsg& m);

    // State changes.
    void cancel_outstanding(Connection& c);
    void enter_timewait(Connection& c);
    void reset_to_idle(Connection& c);
    void hold_remote_keys(Connection& c);
    void release_remote_keys(Connection& c);
    void forget(CommId id);
    void set_deadline(Connection& c, std::optional<CmTime> when);
    void on_deadline(Connection& c);
    void retries_exhausted(Connection& c);

    [[nodiscard]] std::optional<std::uint64_t> listener_for(std::uint64_t service_id) const;
    Verdict deliver(CmEventType type, const Connection& c, std::optional<Message> message);
    Connection* find(CommId id);
    const Connection* find(CommId id) const;
    // A connection the message names: our comm ID, and theirs when known.
    Connection* match(CommId ours, CommId theirs);
    Connection* rejected(const RejMsg& m);
    Connection& create(CommId id);

    CmConfig config_;
    const CmClock& clock_;
    MadSender& sender_;
    CmEventSink& sink_;
    CommIdAllocator ids_;
    std::unordered_map<CommId, Connection> conns_;
    std::map<std::uint64_t, std::uint64_t> listeners_;  // service ID -> context
    std::optional<std::uint64_t> any_service_;          // listen_to_every_service
    std::map<RemoteKey, CommId> remote_ids_;    // duplicate REQ/REP detection
    std::map<RemoteKey, CommId> remote_qpns_;   // stale connection detection
    std::map<SidrKey, CommId> remote_sidr_;     // duplicate SIDR_REQ detection
    std::set<std::pair<CmTime, CommId>> timers_;
    CmCounters counters_;
};

}  // namespace uroce::cm
