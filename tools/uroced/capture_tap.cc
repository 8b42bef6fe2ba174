#include "capture_tap.h"

#include <sys/socket.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "abi/control.h"
#include "log.h"
#include "wire/parse.h"

namespace uroce::daemon {

namespace {

std::uint64_t realtime_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

// The frame's BTH destination QP, when it parses as RoCE.
std::optional<std::uint32_t> dest_qp_of(std::span<const std::uint8_t> frame) {
    const wire::ParseResult r = wire::parse_frame(frame);
    if (!r.ok()) {
        return std::nullopt;
    }
    return r.packet.dest_qp();
}

bool is_roce(std::span<const std::uint8_t> frame) {
    const wire::ParseResult r = wire::parse_frame(frame);
    return r.ok() || wire::reached_roce(r.status);
}

bool is_seqpacket(int fd) {
    int type = 0;
    socklen_t len = sizeof(type);
    return ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_SEQPACKET;
}

}  // namespace

int CaptureTap::start(UniqueFd socket, std::uint32_t owner, std::optional<std::uint32_t> qpn,
                      std::uint32_t& session) {
    if (!socket.valid() || !is_seqpacket(socket.get())) {
        return EINVAL;
    }
    if (open_sessions_ >= kMaxSessions) {
        return EBUSY;
    }
    const int flags = ::fcntl(socket.get(), F_GETFL);
    if (flags < 0 || ::fcntl(socket.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
        return errno;
    }
    // SO_SNDBUFFORCE lets a daemon running as root go past wmem_max; else
    // the kernel's cap applies (and the reader loses frames sooner).
    const int want = kSocketBuffer;
    if (::setsockopt(socket.get(), SOL_SOCKET, SO_SNDBUFFORCE, &want, sizeof(want)) != 0) {
        (void)::setsockopt(socket.get(), SOL_SOCKET, SO_SNDBUF, &want, sizeof(want));
    }
    std::erase_if(sessions_, [owner](const Session& s) { return s.owner == owner && s.state != SessionState::Open; });
    Session s;
    s.id = next_id_++;
    s.owner = owner;
    s.qpn = qpn;
    s.socket = std::move(socket);
    session = s.id;
    sessions_.push_back(std::move(s));
    recount();
    log_info("capture session {} started by client {} ({})", session, owner,
             qpn ? fmt::format("QP {}", *qpn) : std::string("every QP"));
    return 0;
}

std::optional<CaptureTotals> CaptureTap::stop(std::uint32_t session, std::uint32_t owner) {
    const auto it = std::find_if(sessions_.begin(), sessions_.end(),
                                 [&](const Session& s) { return s.id == session && s.owner == owner; });
    if (it == sessions_.end()) {
        return std::nullopt;
    }
    const CaptureTotals totals = it->totals;
    log_info("capture session {} ended: {} frames recorded, {} lost", it->id, totals.frames_sent, totals.frames_lost);
    sessions_.erase(it);
    recount();
    return totals;
}

void CaptureTap::stop_all_of(std::uint32_t owner) {
    std::erase_if(sessions_, [owner](const Session& s) {
        if (s.owner == owner) {
            log_info("capture session {} ended with its connection: {} frames recorded, {} lost", s.id,
                     s.totals.frames_sent, s.totals.frames_lost);
        }
        return s.owner == owner;
    });
    recount();
}

void CaptureTap::recount() {
    open_sessions_ = static_cast<std::size_t>(
        std::count_if(sessions_.begin(), sessions_.end(), [](const Session& s) { return s.state == SessionState::Open; }));
    if (open_sessions_ == 0) {
        held_ = false;
        held_records_.clear();
    }
}

void CaptureTap::record(CaptureDirection direction, std::span<const std::uint8_t> frame) {
    if (!is_roce(frame)) {
        return;  // ARP, ND, other UDP: not the device's traffic
    }
    write(direction, UROCE_CAPTURE_PASSED, realtime_ns(), frame, {});
}

void CaptureTap::record_dropped(CaptureDirection direction, std::span<const std::uint8_t> frame, std::string_view why) {
    write(direction, UROCE_CAPTURE_DROPPED, realtime_ns(), frame, why);
}

void CaptureTap::write(CaptureDirection direction, std::uint8_t verdict, std::uint64_t time_ns,
                       std::span<const std::uint8_t> frame, std::string_view note) {
    if (held_) {
        held_records_.push_back(HeldRecord{direction, verdict, time_ns, std::string(note),
                                           std::vector<std::uint8_t>(frame.begin(), frame.end())});
        return;
    }
    const bool any_filter = std::any_of(sessions_.begin(), sessions_.end(), [](const Session& s) { return s.qpn; });
    const std::optional<std::uint32_t> dest_qp = any_filter ? dest_qp_of(frame) : std::nullopt;
    bool gone = false;
    for (Session& s : sessions_) {
        if (s.state == SessionState::Open && wanted(s, dest_qp)) {
            deliver(s, direction, verdict, time_ns, frame, note);
            gone |= s.state != SessionState::Open;
        }
    }
    if (gone) {
        recount();
    }
}

void CaptureTap::hold() {
    held_ = true;
    held_since_ns_ = realtime_ns();
}

void CaptureTap::received(std::span<const std::uint8_t> frame, std::string_view why_dropped) {
    held_ = false;
    write(CaptureDirection::Received, why_dropped.empty() ? UROCE_CAPTURE_PASSED : UROCE_CAPTURE_DROPPED,
          held_since_ns_, frame, why_dropped);
    std::vector<HeldRecord> records;
    records.swap(held_records_);
    for (const HeldRecord& r : records) {
        write(r.direction, r.verdict, r.time_ns, r.frame, r.note);
    }
}

bool CaptureTap::wanted(const Session& s, std::optional<std::uint32_t> dest_qp) const {
    if (!s.qpn) {
        return true;
    }
    if (!dest_qp) {
        return false;  // its QP cannot be read (a malformed frame)
    }
    if (*dest_qp == *s.qpn) {
        return true;  // to the QP
    }
    const std::optional<std::uint32_t> peer = peer_qp_ ? peer_qp_(*s.qpn) : std::nullopt;
    return peer && *dest_qp == *peer;  // from the QP, to its connected peer
}

void CaptureTap::deliver(Session& s, CaptureDirection direction, std::uint8_t verdict, std::uint64_t time_ns,
                         std::span<const std::uint8_t> frame, std::string_view note) {
    note = note.substr(0, std::numeric_limits<std::uint16_t>::max());
    uroce_capture_record header{};
    header.time_ns = time_ns;
    header.frame_length = static_cast<std::uint32_t>(frame.size());
    header.note_length = static_cast<std::uint16_t>(note.size());
    header.direction = static_cast<std::uint8_t>(direction);
    header.verdict = verdict;
    iovec parts[3] = {
        {&header, sizeof(header)},
        {const_cast<char*>(note.data()), note.size()},
        {const_cast<std::uint8_t*>(frame.data()), frame.size()},
    };
    msghdr msg{};
    msg.msg_iov = parts;
    msg.msg_iovlen = 3;
    if (::sendmsg(s.socket.get(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0) {
        ++s.totals.frames_sent;
        return;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS || errno == EINTR) {
        ++s.totals.frames_lost;  // a slow reader: never wait for it
        return;
    }
    // EPIPE, ECONNRESET: the reader went away (killed, or closed its end).
    log_info("capture session {}: reader gone ({}); {} frames recorded, {} lost", s.id, std::strerror(errno),
             s.totals.frames_sent, s.totals.frames_lost);
    s.state = SessionState::ReaderGone;
    s.socket.reset();
}

}  // namespace uroce::daemon
