// Packet capture (docs/capture.md): the RoCE frames the device sends and
// receives, handed to each `uroce capture` session through the socket the
// session's CAPTURE_START carried (abi/control.h), one message per frame.
//
// The data path asks active() first: while no session is open that is the
// only cost, one predictable branch. The tap never waits for a reader: a
// record its socket cannot take at once is lost for that session and
// counted, and a reader that went away ends its session (EPIPE, no SIGPIPE:
// MSG_NOSIGNAL).
//
// Frames a receive check dropped are recorded with the reason
// (record_dropped). A received frame is recorded after the data path has
// handled it (only then is it known whether a check dropped it): frames
// recorded meanwhile (hold()) wait, and received() writes the received
// frame's record first, then theirs, so the ACK comes after the request it
// acknowledges.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/unique_fd.h"

namespace uroce::daemon {

enum class CaptureDirection : std::uint8_t {
    Received = 1,  // UROCE_CAPTURE_RECEIVED
    Sent = 2,      // UROCE_CAPTURE_SENT
};

struct CaptureTotals {
    std::uint64_t frames_sent = 0;  // records the reader's socket took
    std::uint64_t frames_lost = 0;  // records it could not take at once
};

class CaptureTap {
public:
    // At most this many sessions at once: each costs a copy per frame.
    static constexpr std::size_t kMaxSessions = 4;
    // The daemon's end of each session's socket asks for this much send
    // buffer: about 4,000 full 1518-byte frames, 40 ms of a busy 1 Gbit/s
    // port, before a slow reader starts losing frames.
    static constexpr int kSocketBuffer = 8 << 20;
    // Where QP `qpn` sends to (its destination QP), for the QP filter.
    using PeerQpLookup = std::function<std::optional<std::uint32_t>(std::uint32_t qpn)>;

    CaptureTap() = default;
    CaptureTap(const CaptureTap&) = delete;
    CaptureTap& operator=(const CaptureTap&) = delete;

    // The one branch the data path pays while nobody captures.
    [[nodiscard]] bool active() const { return open_sessions_ != 0; }

    // A new session writing into `socket` for connection `owner`, of every
    // frame or only QP `qpn`'s. 0 and its id, or an errno (EBUSY: too many
    // sessions; EINVAL: not a SOCK_SEQPACKET socket).
    int start(UniqueFd socket, std::uint32_t owner, std::optional<std::uint32_t> qpn, std::uint32_t& session);
    // Ends session `session` of `owner`: its totals, or nullopt when it has none such.
    std::optional<CaptureTotals> stop(std::uint32_t session, std::uint32_t owner);
    // Ends every session of `owner` (its connection closed).
    void stop_all_of(std::uint32_t owner);

    void set_peer_qp_lookup(PeerQpLookup lookup) { peer_qp_ = std::move(lookup); }

    // A RoCE frame (UDP port 4791) that passed, sent or received. Frames of
    // other protocols are left out.
    void record(CaptureDirection direction, std::span<const std::uint8_t> frame);
    // A frame that was dropped, and why in words (a receive check, or fault
    // injection: the port decorator's drop observer connects here).
    void record_dropped(CaptureDirection direction, std::span<const std::uint8_t> frame, std::string_view why);

    // Before the data path handles a received RoCE frame.
    void hold();
    // After: the frame, dropped when `why_dropped` is not empty, then what
    // was recorded since hold().
    void received(std::span<const std::uint8_t> frame, std::string_view why_dropped);

private:
    enum class SessionState : std::uint8_t { Open, ReaderGone };
    struct Session {
        std::uint32_t id = 0;
        std::uint32_t owner = 0;
        std::optional<std::uint32_t> qpn;
        UniqueFd socket;
        SessionState state = SessionState::Open;
        CaptureTotals totals;
    };
    struct HeldRecord {
        CaptureDirection direction{};
        std::uint8_t verdict = 0;
        std::uint64_t time_ns = 0;
        std::string note;
        std::vector<std::uint8_t> frame;
    };

    void write(CaptureDirection direction, std::uint8_t verdict, std::uint64_t time_ns,
               std::span<const std::uint8_t> frame, std::string_view note);
    void deliver(Session& s, CaptureDirection direction, std::uint8_t verdict, std::uint64_t time_ns,
                 std::span<const std::uint8_t> frame, std::string_view note);
    [[nodiscard]] bool wanted(const Session& s, std::optional<std::uint32_t> dest_qp) const;
    void recount();

    std::vector<Session> sessions_;
    std::size_t open_sessions_ = 0;
    std::uint32_t next_id_ = 1;
    PeerQpLookup peer_qp_;
    bool held_ = false;
    std::uint64_t held_since_ns_ = 0;  // when the held received frame was taken
    std::vector<HeldRecord> held_records_;
};

}  // namespace uroce::daemon
