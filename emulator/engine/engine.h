// The RoCEv2 engine of one device: every QP's requester, responder and
// completer, fed frames by the port and work by the shared rings. It knows
// nothing of DPDK (frames go out through FrameSink) and nothing of the
// control protocol (the daemon registers objects with add_* and mirrors
// every accepted ibv_modify_qp with modify_qp). Single-threaded: the daemon
// calls it from its one loop, so no state here needs a lock.
//
// One concern per file: engine.cc (objects, polling, timers, frame output),
// requester.cc (send queue to packets), completer.cc (ACKs, NAKs, READ
// responses, atomic ACKs), responder.cc (requests: checks, receives,
// writes, READ/atomic execution and replay, ACK/NAK), completions.cc (CQEs
// and completion events).
#pragma once

#include <array>
#include <chrono>
#include <deque>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/ids.h"
#include "device/gid_table.h"
#include "dma/client_memory.h"
#include "engine/drop_reason.h"
#include "engine/failure_event.h"
#include "engine/multicast_groups.h"
#include "engine/queue_pair.h"
#include "engine/rings.h"
#include "mr/mr_table.h"
#include "wire/build.h"
#include "wire/packet.h"

namespace uroce::engine {

// Whether a CQ's CQEs carry the time they were written (two clock reads
// each; only CQs made for ibv_create_cq_ex timestamps ask for it).
enum class CompletionStamp : std::uint8_t { None, Times };

// How the requester asks for an RDMA READ (docs/congestion.md).
enum class ReadAsking : std::uint8_t {
    Whole,    // every request of the READ runs to its last byte
    InParts,  // longer than the initial window: parts of what the window has room for
};

// An XRC SRQ's domain and CQ (add_srq); domain 0: an ordinary SRQ.
struct XrcSrq {
    std::uint32_t domain = 0;
    CqHandle cq;
};

// Where built frames go: the port through neighbour resolution, or a test.
class FrameSink {
public:
    virtual ~FrameSink() = default;
    // `frame` has its Ethernet destination still to fill for `dst`. False
    // when the port could not take it now (its transmit queue is full): the
    // engine keeps the frame, offers it again next poll and sends nothing
    // new until it has gone (transmit backpressure, docs/congestion.md).
    // A frame that can never go (too long for the port) must not return
    // false: it would hold everything behind it.
    virtual bool send_ip(std::span<std::uint8_t> frame, const wire::Gid& dst, Clock::time_point now) = 0;
    // Where the engine may build its next frame so the port need not copy it
    // (net::Port::tx_room: the port's own transmit buffer); empty when the
    // sink has none, and then the engine builds in a buffer of its own.
    [[nodiscard]] virtual std::span<std::uint8_t> tx_room() { return {}; }
    // Whether a frame built in tx_room() and sent at once may go without
    // its ICRC (net::Port::icrc_unread: nothing will read it).
    [[nodiscard]] virtual bool icrc_unread() const { return false; }
};

struct EngineCounters {
    std::uint64_t rx_packets = 0;
    std::uint64_t tx_packets = 0;
    std::uint64_t rx_dropped = 0;     // silently dropped requests/responses (see docs/wire.md)
    std::uint64_t retransmits = 0;    // times the requester went back to resend (timeout, NAK, lost response)
    std::uint64_t retransmitted_packets = 0;  // request packets sent again (PSNs sent before)
    std::uint64_t timeouts = 0;
    std::uint64_t rnr_naks_sent = 0;
    std::uint64_t rnr_naks_received = 0;
    std::uint64_t seq_naks_sent = 0;
    std::uint64_t seq_naks_received = 0;
    std::uint64_t duplicates = 0;
    std::uint64_t bad_wqes = 0;
    std::uint64_t cq_overruns = 0;
    std::uint64_t dma_faults = 0;
    std::uint64_t tx_deferred = 0;    // frames the port refused, kept and offered again
    // rx_dropped by reason (engine/drop_reason.h), and the NAKs (RNR NAKs
    // included) sent and received by kind.
    std::array<std::uint64_t, kDropReasonCount> dropped{};
    std::array<std::uint64_t, kNakReasonCount> naks_sent{};
    std::array<std::uint64_t, kNakReasonCount> naks_received{};
};

static_assert(static_cast<std::uint8_t>(NakReason::PsnSequenceError) ==
              static_cast<std::uint8_t>(wire::NakCode::PsnSequenceError));
static_assert(static_cast<std::uint8_t>(NakReason::InvalidRdRequest) ==
              static_cast<std::uint8_t>(wire::NakCode::InvalidRdRequest));

// The NAK kind an AETH syndrome carries; nullopt for an ACK (or the reserved kind).
[[nodiscard]] inline std::optional<NakReason> nak_reason(std::uint8_t syndrome) {
    switch (wire::ack_kind(syndrome)) {
        case wire::AckKind::RnrNak:
            return NakReason::ReceiverNotReady;
        case wire::AckKind::Nak:
            if (wire::syndrome_value(syndrome) < static_cast<std::uint8_t>(NakReason::ReceiverNotReady)) {
                return static_cast<NakReason>(wire::syndrome_value(syndrome));  // same values (IBA table 43)
            }
            return std::nullopt;
        default:
            return std::nullopt;
    }
}

struct EngineConfig {
    wire::MacAddr mac{};
    std::vector<device::GidEntry> gids;
    // Packets a QP may have unacknowledged before it waits for an ACK: the
    // most its congestion window grows to (docs/congestion.md).
    std::uint32_t send_window = 128;
    // The congestion window a QP starts with.
    std::uint32_t initial_window = 4;
    // The requester asks for an ACK at least this often (and on every last packet).
    std::uint32_t ack_request_every = 16;
    // Packets one QP sends per poll before the next QP gets its turn.
    std::uint32_t packets_per_poll = 32;
    // Frames the engine holds for a port that refused them; beyond this a
    // frame is dropped (counted in rx_dropped), which only a port that stays
    // full while requests keep arriving can cause.
    std::size_t max_held_frames = 4096;
    // Packets all RC QPs together may have unacknowledged (requests, and the
    // READ responses asked for), shared out evenly: each QP's window is at
    // most engine_window over the QPs with work (at least one packet). Each
    // window alone let 256 QPs have 1024 packets and more in flight, beyond
    // what the peer's receive ring holds (an af_packet ring: 512 frames),
    // so many QPs lost far more than few (docs/congestion.md).
    std::uint32_t engine_window = 256;
};

class Engine {
public:
    // `memory_of(owner)` finds a client's memory (nullptr: client gone).
    // `async_event(owner, cookie, event)` delivers an affiliated async event.
    Engine(EngineConfig config, mr::MrTable& mrs, FrameSink& sink,
           std::function<dma::ClientMemory*(std::uint32_t owner)> memory_of,
           std::function<void(std::uint32_t owner, std::uint64_t cookie, AsyncEvent event)> async_event);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // ---- objects (control path, same thread) ----
    // `channel_fd` (owned by the engine from now on, -1 for none) receives
    // `cookie` for each completion event.
    // `stamp`: whether its CQEs carry the time they were written
    // (abi/control.h UROCE_CQ_TIMESTAMPS).
    void add_cq(CqHandle handle, ClientId owner, CqRing ring, int channel_fd, std::uint64_t cookie,
                CompletionStamp stamp = CompletionStamp::None);
    void remove_cq(CqHandle handle);
    // ibv_resize_cq: CQ `handle` continues in `ring`, with the completions
    // not yet polled from the old one. 0, or EINVAL (unknown CQ, or the
    // unpolled completions do not fit).
    int resize_cq(CqHandle handle, CqRing ring);
    void add_srq(SrqHandle handle, ClientId owner, PdHandle pd, WorkRing ring, std::uint64_t cookie,
                 std::uint32_t limit, XrcSrq xrc = {});
    // IBV_SRQ_LIMIT: arms the limit event (0 disarms).
    void set_srq_limit(SrqHandle handle, std::uint32_t limit);
    void remove_srq(SrqHandle handle);
    void add_ah(std::uint32_t handle, const qp::AhAttr& attr);
    void remove_ah(std::uint32_t handle);
    void add_qp(const QpSetup& setup);
    // After QueueObjects accepted ibv_modify_qp: `attr` is the QP's whole
    // new attribute set, `mask` what changed.
    void modify_qp(Qpn qpn, const qp::QpAttr& attr, std::uint32_t mask);
    // Current attributes the engine moved on its own (state to ERR, SQE).
    [[nodiscard]] std::optional<qp::QpState> qp_state(Qpn qpn) const;
    void remove_qp(Qpn qpn);
    // ibv_attach_mcast / ibv_detach_mcast (multicast_groups.h): the caller
    // checked that the QP is UD and the GID a group; remove_qp detaches.
    [[nodiscard]] MulticastGroups& multicast() { return multicast_; }
    [[nodiscard]] const MulticastGroups& multicast() const { return multicast_; }

    // ---- data path ----
    // One round: new WQEs, packets to send, pending responses, timers.
    // True when it did anything.
    bool poll(Clock::time_point now);
    // One received RoCEv2 frame (the caller parsed it; ICRC is checked here).
    void receive(const wire::Packet& packet, Clock::time_point now);
    // Before the daemon sleeps: ask every ring's producer to ring the doorbell.
    void arm_doorbells();
    // The earliest timer, if any.
    [[nodiscard]] std::optional<Clock::time_point> next_deadline() const;

    [[nodiscard]] const EngineCounters& counters() const { return counters_; }
    // Explained failures (failure_event.h): `observer` gets a record for
    // every refused request and every error completion, built on those
    // failure paths only (failure_report.cc). Set before the first poll.
    void set_failure_observer(std::function<void(const uroce_explain_record&)> observer) {
        failure_observer_ = std::move(observer);
    }
    [[nodiscard]] std::size_t qp_count() const { return qps_.size(); }
    // The engine's state of one QP, for stats and tests (nullptr: no such QP).
    [[nodiscard]] const QueuePair* find_qp(Qpn qpn) const {
        auto it = qps_.find(qpn.value());
        return it == qps_.end() ? nullptr : it->second.get();
    }

private:
    struct CompletionQueue {
        std::uint32_t owner = 0;
        CqRing ring;
        int channel_fd = -1;
        std::uint64_t cookie = 0;
        std::uint32_t notify_seen = 0;  // last notify_request answered
        bool overrun_reported = false;
        CompletionStamp stamp = CompletionStamp::None;
    };
    struct SharedReceiveQueue {
        std::uint32_t owner = 0;
        std::uint32_t pd = 0;
        WorkRing ring;
        std::uint64_t cookie = 0;
        std::uint32_t limit = 0;
        std::uint32_t consumed = 0;
        std::vector<std::uint8_t> scratch;
        XrcSrq xrc;
    };

    // engine.cc
    // A frame the port refused, kept until it takes it.
    struct HeldFrame {
        std::vector<std::uint8_t> bytes;
        wire::Gid dst{};
        // The QP whose request this is (its ACK timer starts when the frame
        // leaves, requester.cc); none for ACKs and READ responses.
        std::optional<std::uint32_t> request_of;
    };
    // What became of a frame handed to the port.
    enum class TxOutcome : std::uint8_t {
        Sent,     // the port took it
        Held,     // the port refused it: kept in held_, sent later
        Dropped,  // not built, or held_ was full
    };
    // Offers the held frames again, oldest first. True when any went.
    bool send_held(Clock::time_point now);
    // Whether the port refused a frame the engine still holds: then nothing
    // new is generated this poll.
    [[nodiscard]] bool tx_blocked() const { return !held_.empty(); }
    // Counts the RC QPs with work and sets their share of the engine's
    // window (the start of every poll).
    void share_engine_window();
    // The packets `qp` may have unacknowledged: its congestion window, at
    // most its share of the engine's window.
    [[nodiscard]] std::uint32_t usable_window(const QueuePair& qp) const {
        return std::min(qp.window.packets(), window_share_);
    }
    void rebuild_order();
    // A packet (or a frame the engine made) dropped, counted by reason.
    void drop(DropReason reason) {
        ++counters_.rx_dropped;
        ++counters_.dropped[static_cast<std::size_t>(reason)];
    }
    TxOutcome send_frame(QueuePair& qp, wire::PacketFields& f, std::span<const std::uint8_t> payload_in_place,
                         Clock::time_point now);
    // The buffer the frame for `f` with `payload_length` bytes of payload is
    // built in: the sink's tx_room() when it is large enough (the payload is
    // then read from client memory straight into the port's buffer), else
    // tx_buffer_. Remembered in room_ for send_frame.
    std::span<std::uint8_t> frame_room(const wire::PacketFields& f, std::size_t payload_length);
    bool fill_path(const QueuePair& qp, const qp::AhAttr& path, wire::PacketFields& f) const;
    void move_to_error(QueuePair& qp, Clock::time_point now);
    dma::ClientMemory* memory(std::uint32_t owner) const;
    // Scatter `data` into `sges` at `offset` (device writes). 0 or an error status.
    WcStatus scatter(const QueuePair& qp, std::span<const Sge> sges, std::uint64_t offset,
                     std::span<const std::uint8_t> data);
    // Gather `len` bytes at `offset` of a send WQE's data into `out`.
    WcStatus gather(const QueuePair& qp, const SendWqe& w, std::uint64_t offset, std::span<std::uint8_t> out);
    // Both: checks each SGE piece of [offset, offset + length) with its lkey
    // and lets `move(memory, host_addr, position, bytes)` carry the bytes.
    template <typename Move>
    WcStatus walk_sges(const QueuePair& qp, std::span<const Sge> sges, std::uint64_t offset, std::size_t length,
                       bool device_writes, Move move);

    // requester.cc
    bool requester_poll(QueuePair& qp, Clock::time_point now);
    void fetch_new_wqes(QueuePair& qp, Clock::time_point now);
    bool start_wqe(QueuePair& qp, SendWqe& w, Clock::time_point now);
    bool send_packet(QueuePair& qp, SendWqe& w, Clock::time_point now);
    // Whether the congestion window lets the next packet of `w` go.
    bool window_allows(const QueuePair& qp, const SendWqe& w) const;
    // Response packets the next READ request of `w` asks for: the rest of
    // the READ, or what the window has room for (at least one packet).
    std::uint32_t read_part(const QueuePair& qp, const SendWqe& w) const;
    // Whether every request of READ `w` asks to its end, or it goes in parts.
    [[nodiscard]] ReadAsking read_asking(const SendWqe& w) const;
    // Whether a READ before `w` in the send queue still waits for responses.
    bool older_read_outstanding(const QueuePair& qp, const SendWqe& w) const;
    // Starts the local ACK timer for a request frame handed to the port.
    void start_ack_timer(QueuePair& qp, TxOutcome outcome, Clock::time_point now);
    // Counts a packet sent again (retransmitted_packets) or moves sent_high.
    void note_sent(QueuePair& qp, const SendWqe& w, wire::Psn psn);
    void retire_done(QueuePair& qp);
    void rewind_to(QueuePair& qp, wire::Psn psn);
    void requester_timers(QueuePair& qp, Clock::time_point now);
    // Starts a stopped ACK timer once the port no longer holds `qp` back.
    void keep_ack_timer(QueuePair& qp, Clock::time_point now);
    // A request frame of QP `qpn` the port had refused has now left.
    void held_request_left(std::uint32_t qpn, Clock::time_point now);
    void flush_send_queue(QueuePair& qp);

    // completer.cc
    void on_response(QueuePair& qp, const wire::Packet& p, Clock::time_point now);
    void acknowledge_through(QueuePair& qp, wire::Psn psn, Clock::time_point now);
    void complete_wqe_error(QueuePair& qp, SendWqe& w, WcStatus status, Clock::time_point now);

    // responder.cc
    // The silent drops of a received packet: the reason, or nullopt and
    // `qp_out` the QP it goes to.
    std::optional<DropReason> check_silent_drops(const wire::Packet& p, QueuePair*& qp_out);
    // An XRC target's request (xrc_target.cc): points the QP at the XRC SRQ
    // its XRCETH names (the SRQ's client, PD and CQ serve the request), or
    // the failure when no SRQ of the QP's domain has that number.
    RequestFailure select_xrc_srq(QueuePair& qp, const wire::Packet& p);
    // An RC or UC request: the checks in IBA order (9.7.5.1), each with a
    // named result, then the operation.
    void on_request(QueuePair& qp, const wire::Packet& p, Clock::time_point now);
    PsnCheck check_psn(QueuePair& qp, const wire::Packet& p, Clock::time_point now);
    // A duplicate request: re-ACKed (coalesced), or answered from the saved resources.
    void answer_duplicate(QueuePair& qp, const wire::Packet& p, Clock::time_point now);
    RequestFailure check_opcode_sequence(QueuePair& qp, const wire::OpcodeInfo& info);
    [[nodiscard]] RequestFailure check_qp_access(const QueuePair& qp, const wire::OpcodeInfo& info) const;
    [[nodiscard]] RequestFailure check_lengths(const QueuePair& qp, const wire::Packet& p) const;
    // One use of a remote key: what, where, and from which peer (nullptr: not checked against a peer).
    struct RemoteKeyUse {
        mr::RemoteOp op;
        std::uint32_t rkey;
        std::uint64_t va;
        std::uint64_t length;
        const wire::Gid* peer;
    };
    // Builds the remote key request of `qp` for `use` and checks it
    // (mr_check.cc); `out` is the translation when it passes.
    RequestFailure check_remote_key(const QueuePair& qp, EpochGuard& guard, const RemoteKeyUse& use,
                                    mr::Translation& out);
    // NAKs (RC, the QP goes to error) or drops (UC, the message is lost) a request.
    void fail_request(QueuePair& qp, wire::Psn psn, RequestFailure failure, Clock::time_point now);
    // SEND and WRITE packets: false when the request stopped (failed, RNR).
    bool receive_send(QueuePair& qp, const wire::Packet& p, Clock::time_point now);
    bool receive_write(QueuePair& qp, const wire::Packet& p, Clock::time_point now);
    void execute_read(QueuePair& qp, const wire::Packet& p, Clock::time_point now);
    void execute_atomic(QueuePair& qp, const wire::Packet& p, Clock::time_point now);
    // The next READ/atomic resource slot, emptied (the oldest is reused).
    std::size_t take_resource(QueuePair& qp);
    void on_ud_request(QueuePair& qp, const wire::Packet& p, Clock::time_point now);
    // multicast.cc: a packet to QP 0xFFFFFF, a copy to each attached QP.
    void receive_multicast(const wire::Packet& p, Clock::time_point now);
    bool take_recv(QueuePair& qp, RecvWqe& out, Clock::time_point now);
    // Takes a receive WQE for the message at `psn`, or answers RNR (RC) /
    // drops the message (UC). True when the QP holds one now.
    bool claim_recv(QueuePair& qp, wire::Psn psn, Clock::time_point now);
    void send_atomic_ack(QueuePair& qp, wire::Psn psn, std::uint64_t original, Clock::time_point now);
    // Flushes an errored QP's receive queue, sends the coalesced ACK.
    void responder_poll(QueuePair& qp, Clock::time_point now);
    void send_ack(QueuePair& qp, std::uint8_t syndrome, wire::Psn psn, Clock::time_point now);
    // A duplicate READ request: queue the responses it asks for, from the
    // saved resources (docs/congestion.md).
    void replay_read(QueuePair& qp, const wire::Packet& p);
    void send_read_responses(QueuePair& qp, Clock::time_point now);
    void finish_recv(QueuePair& qp, std::uint32_t byte_len, const wire::Packet& p, Clock::time_point now);
    void flush_receive_queue(QueuePair& qp);

    // failure_report.cc: records of failures, for the failure observer.
    // A remote key check failed: keep its diagnosis for note_refusal.
    void note_key_refusal(const QueuePair& qp, const EpochGuard& guard, const mr::RemoteRequest& request,
                          mr::CheckStatus status);
    // fail_request: the responder refused the request at `psn`.
    void note_refusal(const QueuePair& qp, wire::Psn psn, RequestFailure failure);
    // An error CQE; `w` is the send WQE it completes (nullptr: a receive).
    void note_error_completion(const uroce_cqe& cqe, const SendWqe* w);

    // completions.cc
    void complete(std::uint32_t cq, const uroce_cqe& cqe, bool solicited);
    void complete_send(QueuePair& qp, const SendWqe& w);

    EngineConfig config_;
    mr::MrTable& mrs_;
    FrameSink& sink_;
    std::function<dma::ClientMemory*(std::uint32_t)> memory_of_;
    std::function<void(std::uint32_t, std::uint64_t, AsyncEvent)> async_event_;
    std::unordered_map<std::uint32_t, CompletionQueue> cqs_;
    std::unordered_map<std::uint32_t, SharedReceiveQueue> srqs_;
    std::unordered_map<std::uint32_t, qp::AhAttr> ahs_;
    std::unordered_map<std::uint32_t, std::unique_ptr<QueuePair>> qps_;
    MulticastGroups multicast_;
    // Every QP in QPN order, for the round-robin turn of poll().
    std::vector<QueuePair*> order_;
    std::size_t next_turn_ = 0;  // index in order_ of the QP that goes first next poll
    std::deque<HeldFrame> held_;
    std::uint32_t window_share_ = 1;  // EngineConfig::engine_window over the RC QPs with work
    std::vector<std::uint8_t> tx_buffer_;
    std::span<std::uint8_t> room_;  // of the frame being built (frame_room)
    bool room_is_ports_ = false;     // room_ is the port's lent tx_room(), not tx_buffer_
    EngineCounters counters_;
    // Explained failures (failure_report.cc).
    struct KeyRefusal {
        mr::RemoteRequest request;
        mr::AccessDiagnosis diagnosis;
    };
    std::function<void(const uroce_explain_record&)> failure_observer_;
    const wire::Packet* current_request_ = nullptr;  // during on_request
    std::optional<KeyRefusal> key_refusal_;          // the failed key check fail_request reports
    const SendWqe* completing_send_ = nullptr;       // during complete_send
};

}  // namespace uroce::engine
