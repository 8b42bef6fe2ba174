// The seam between the connection manager and a port: MADs the manager
// sends become QP1 frames (qp1.h) handed to the owner, and QP1 frames the
// owner received become ConnectionManager::receive calls. The owner (the
// daemon's receive path, later) supplies only what the CM cannot know:
// the Ethernet addresses towards a peer, and where frames go.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "manager.h"
#include "qp1.h"

namespace uroce::cm {

class FramePort {
public:
    virtual ~FramePort() = default;
    // Source and destination MACs (and VLAN) for a frame to `peer`;
    // nullopt when the neighbour is not resolved (the MAD is dropped and
    // counted; the CM's retransmission tries again).
    [[nodiscard]] virtual std::optional<wire::EthFields> ethernet_to(const wire::Gid& peer) = 0;
    // Must not call back into the manager (queue frames to own addresses).
    virtual void send_frame(std::span<const std::uint8_t> frame) = 0;
};

struct FramerCounters {
    std::uint64_t frames_sent = 0;
    std::uint64_t no_neighbour = 0;  // MADs dropped: no MAC for the peer
    std::array<std::uint64_t, kCmParseStatusCount> rx_status{};  // received frames by outcome
};

class CmFramer final : public MadSender {
public:
    // `udp_src_port`: rdma_rxe uses one fixed value per device for QP1.
    explicit CmFramer(FramePort& port, std::uint16_t udp_src_port = 0xC000);

    // Where received MADs go; must be set before receive_frame.
    void attach(ConnectionManager& cm) { cm_ = &cm; }

    // A frame from the wire (already known to be UD to QP1, or anything:
    // everything is checked). Ok frames are handed to the manager.
    CmParseStatus receive_frame(std::span<const std::uint8_t> frame);

    // MadSender: one QP1 frame per MAD, QP1's PSN counted per MAD.
    void send_mad(const PeerAddress& to, const MadBytes& mad) override;

    [[nodiscard]] const FramerCounters& counters() const { return counters_; }

private:
    FramePort& port_;
    ConnectionManager* cm_ = nullptr;
    std::uint16_t udp_src_port_;
    std::uint32_t psn_ = 0;
    std::vector<std::uint8_t> buffer_;
    FramerCounters counters_;
};

}  // namespace uroce::cm
