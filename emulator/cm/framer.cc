#include "framer.h"

namespace uroce::cm {

namespace {

// An IPv6 frame is the longest a MAD needs (with an 802.1Q tag).
constexpr std::size_t kMaxCmFrame = 14 + 4 + 40 + 8 + 12 + 8 + kMadSize + wire::kIcrcSize;

}  // namespace

CmFramer::CmFramer(FramePort& port, std::uint16_t udp_src_port)
    : port_(port), udp_src_port_(udp_src_port), buffer_(kMaxCmFrame) {}

CmParseStatus CmFramer::receive_frame(std::span<const std::uint8_t> frame) {
    const CmFrameResult r = parse_cm_frame(frame);
    ++counters_.rx_status[static_cast<std::size_t>(r.status)];
    if (r.ok() && cm_ != nullptr) {
        // Seen from here: the frame's destination is local, its source remote.
        cm_->receive(PeerAddress{r.packet.dst_gid(), r.packet.src_gid()}, r.packet.payload());
    }
    return r.status;
}

void CmFramer::send_mad(const PeerAddress& to, const MadBytes& mad) {
    const auto eth = port_.ethernet_to(to.remote);
    if (!eth) {
        ++counters_.no_neighbour;
        return;
    }
    CmFrameAddress a;
    a.eth = *eth;
    a.ip.version = wire::is_ipv4_mapped(to.remote) ? wire::IpVersion::V4 : wire::IpVersion::V6;
    a.ip.src = to.local;
    a.ip.dst = to.remote;
    a.udp_src_port = udp_src_port_;
    a.psn = psn_;
    psn_ = (psn_ + 1) & 0xFFFFFF;
    const wire::BuildResult r = build_cm_frame(a, mad, buffer_);
    if (r.status != wire::BuildStatus::Ok) {
        return;  // cannot happen: the buffer fits the longest CM frame
    }
    ++counters_.frames_sent;
    port_.send_frame(std::span(buffer_.data(), r.length));
}

}  // namespace uroce::cm
