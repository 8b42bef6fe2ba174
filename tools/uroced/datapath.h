// The daemon's data path: one port (DPDK or the embedded loopback), the
// neighbour table, and the RoCEv2 engine, run from the daemon's one loop.
// The control server tells it about objects as they are created, changed
// and destroyed (the on_* calls), and about clients coming and going; the
// engine reaches each client's memory through a dma::ClientMemory: the
// memfds the client shares, and the /proc/self/mem it handed over at HELLO.
#pragma once

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "capture_tap.h"
#include "device/device.h"
#include "device/ring_registry.h"
#include "dma/client_memory.h"
#include "engine/engine.h"
#include "event_log.h"
#include "idle_wait.h"
#include "net/group_membership.h"
#include "net/neighbours.h"
#include "net/port.h"
#include "wire/parse.h"
#include "wire/parse_status.h"
#include "ucma/neighbour_resolver.h"
#include "ucma/wire_cm.h"

namespace uroce::daemon {

struct DatapathCounters {
    std::uint64_t rx_roce = 0;
    std::uint64_t rx_other = 0;      // ARP, ND, anything else
    std::uint64_t rx_malformed = 0;  // UDP 4791 that failed to parse
    // rx_malformed by parse outcome (wire/parse_status.h).
    std::array<std::uint64_t, wire::kParseStatusCount> malformed{};

    void count_malformed(wire::ParseStatus status) {
        ++rx_malformed;
        ++malformed[static_cast<std::size_t>(status)];
    }
};

// CM MADs (QP1 frames) the datapath handed to the wire CM, and why it did not.
struct CmFrameCounters {
    std::uint64_t received = 0;         // QP1 frames given to the wire CM
    std::uint64_t no_cm = 0;            // QP1 frames dropped: no wire CM attached
    std::uint64_t tx_refused = 0;       // CM frames the port refused (full queue; the CM resends)
};

class Datapath final : public engine::FrameSink, public ucma::WireCmPort, public ucma::NeighbourResolver {
public:
    Datapath(device::Device& device, net::Port& port);
    ~Datapath() override;

    // ---- the loop ----
    // One round: received frames, engine work, neighbour timers, transmit.
    // True when anything happened.
    bool poll(engine::Clock::time_point now);
    // Before the daemon sleeps (rings.h doorbell protocol).
    void arm_doorbells() { engine_->arm_doorbells(); }
    [[nodiscard]] std::optional<engine::Clock::time_point> next_deadline() const;

    // ---- the wire CM ----
    // QP1 frames go to `cm`, its timers run from poll(), its frames leave
    // through this port (resolving the peer's MAC first).
    void attach_cm(ucma::WireConnectionManager& cm);
    [[nodiscard]] bool port_has_wire() const { return port_.has_wire(); }
    [[nodiscard]] const CmFrameCounters& cm_frame_counters() const { return cm_frames_; }
    // One log line: CM MADs received, sent, dropped per reason.
    void log_cm_summary() const;

    // ucma::WireCmPort
    [[nodiscard]] wire::MacAddr our_mac() const override { return port_.mac(); }
    void send_to(std::span<const std::uint8_t> frame, const wire::Gid& peer) override;

    // ucma::NeighbourResolver: rdma_cm address resolution asks the neighbour
    // table (a port without a wire needs no resolution).
    ucma::NeighbourState resolve(const wire::Gid& source, const wire::Gid& destination,
                                 engine::Clock::time_point now) override;
    [[nodiscard]] ucma::NeighbourState state_of(const wire::Gid& destination) const override;

    // ---- objects, from the control server ----
    // A new connection: its memory is unreachable until on_client_memory.
    void on_client(std::uint32_t client);
    // The client's HELLO handed over its /proc/self/mem. False when the
    // client is unknown or has one already.
    bool on_client_memory(std::uint32_t client, UniqueFd process_memory);
    void on_client_gone(std::uint32_t client);
    void on_cq(std::shared_ptr<const device::CqRings> cq);
    void on_qp(std::shared_ptr<const device::QpRings> qp);
    void on_srq(std::shared_ptr<const device::SrqRings> srq, std::uint32_t limit);
    void on_srq_limit(std::uint32_t srq, std::uint32_t limit) { engine_->set_srq_limit(SrqHandle{srq}, limit); }
    void on_ah(std::uint32_t ah, const qp::AhAttr& attr) { engine_->add_ah(ah, attr); }
    void on_modify_qp(std::uint32_t qpn, const qp::QpAttr& attr, std::uint32_t mask) {
        engine_->modify_qp(Qpn{qpn}, attr, mask);
        if ((mask & qp::AttrMask::kDestQpn) != 0) {
            peer_qps_[qpn] = attr.dest_qp_num;  // for capture's QP filter
        }
    }
    void on_destroy_cq(std::uint32_t cq);
    // ibv_resize_cq: the CQ continues in `cq`'s new ring (Engine::resize_cq);
    // 0 or EINVAL.
    int on_resize_cq(std::shared_ptr<const device::CqRings> cq);
    void on_destroy_qp(std::uint32_t qpn);
    void on_destroy_srq(std::uint32_t srq);
    void on_destroy_ah(std::uint32_t ah) { engine_->remove_ah(ah); }
    // How the engine reaches `client`'s memory (for its MRs' shared
    // mappings, mr_registrations.h); nullptr for no client.
    [[nodiscard]] dma::ClientMemory* client_memory(std::uint32_t client) { return memory_of(client); }
    // The QP state the engine holds (it moves QPs to ERR on its own).
    [[nodiscard]] std::optional<qp::QpState> qp_state(std::uint32_t qpn) const { return engine_->qp_state(Qpn{qpn}); }

    // Where async events go: (client, cookie, event type).
    void set_async_sink(std::function<void(std::uint32_t, std::uint64_t, engine::AsyncEvent)> sink) {
        async_sink_ = std::move(sink);
    }

    [[nodiscard]] const engine::Engine& engine() const { return *engine_; }
    // The device's multicast groups (ATTACH_MCAST, DETACH_MCAST).
    [[nodiscard]] engine::MulticastGroups& multicast() { return engine_->multicast(); }
    // The explained-failure records of the engine and the key table
    // (event_log.h, docs/explain.md).
    [[nodiscard]] EventLog& events() { return events_; }
    [[nodiscard]] const EventLog& events() const { return events_; }
    [[nodiscard]] const net::Neighbours& neighbours() const { return neighbours_; }
    [[nodiscard]] const net::GroupMembership& membership() const { return membership_; }
    [[nodiscard]] const DatapathCounters& counters() const { return counters_; }
    [[nodiscard]] net::PortCounters port_counters() const { return port_.counters(); }
    // DMA counters of every client since the daemon started, summed (those
    // of departed clients are kept).
    [[nodiscard]] dma::DmaCounters dma_counters() const;
    // Shared mappings of client memory held now, over every client.
    [[nodiscard]] std::size_t shared_mappings() const;
    // Which way a transfer of a client's [addr, addr + length) would take;
    // nullopt when the client has no memory here (gone, or not a client).
    [[nodiscard]] std::optional<dma::Way> way_of(std::uint32_t client, std::uint64_t addr,
                                                 std::uint64_t length) const;

    // The counters of the loop's IdleWait (main.cc run_loop), for stats;
    // nullptr while no loop runs. They must outlive the pointer's use.
    void set_idle_counters(const IdleCounters* counters) { idle_counters_ = counters; }
    [[nodiscard]] IdleCounters idle_counters() const {
        return idle_counters_ != nullptr ? *idle_counters_ : IdleCounters{};
    }

    // ---- packet capture (capture_tap.h) ----
    // Received RoCE frames, with the receive check that dropped them, go to
    // `tap` while it is active; sent frames reach it through the port
    // (capturing_port.h), and frames sent to ourselves from here.
    void set_capture(CaptureTap& tap);
    [[nodiscard]] CaptureTap* capture() { return capture_; }

    // engine::FrameSink
    bool send_ip(std::span<std::uint8_t> frame, const wire::Gid& dst, engine::Clock::time_point now) override;
    [[nodiscard]] std::span<std::uint8_t> tx_room() override { return port_.tx_room(); }
    [[nodiscard]] bool icrc_unread() const override { return port_.icrc_unread(); }

private:
    dma::ClientMemory* memory_of(std::uint32_t client);
    // One burst of received frames to the engine or the neighbour table: how many.
    std::size_t receive_burst(engine::Clock::time_point now);
    // When a fault rule or a capture started since the last round, the
    // frames the port holds get their ICRC (net::Port::seal_icrcs).
    void seal_icrcs_once_watched();
    // A parsed RoCE frame: QP1 to the wire CM, the rest to the engine.
    void deliver(std::span<const std::uint8_t> frame, const wire::Packet& packet, engine::Clock::time_point now);
    // One received frame, parsed as `r`, to where it goes.
    void handle_received(std::span<const std::uint8_t> frame, const wire::ParseResult& r,
                         engine::Clock::time_point now);
    // The same while a capture is active: the frame is recorded, with the
    // check that dropped it, if one did.
    void capture_received(std::span<const std::uint8_t> frame, const wire::ParseResult& r,
                          engine::Clock::time_point now);
    // A multicast frame some of our own QPs are attached to: on a port with a
    // wire they get their copy from here (a NIC does not receive what it
    // sends), as rdma_rxe's attached QPs get theirs through the IP stack's
    // multicast loopback.
    void keep_multicast_copy(std::span<const std::uint8_t> frame);
    // Gives the engine the frames it sent to our own addresses; true if any.
    bool receive_own_frames(engine::Clock::time_point now);

    net::Port& port_;
    mr::MrTable& mrs_;
    EventLog events_;
    net::Neighbours neighbours_;
    net::GroupMembership membership_;  // IGMP / MLD for the groups QPs attach to
    std::unique_ptr<engine::Engine> engine_;
    std::unordered_map<std::uint32_t, std::unique_ptr<dma::ClientMemory>> memories_;
    // The last memory_of() answer: the engine asks for the same client's
    // memory for every packet it gathers or places, and the map's find (a
    // division by its bucket count) was 3% of the daemon's cycles at 64 B.
    // Forgotten wherever memories_ changes.
    std::uint32_t last_client_ = 0;
    dma::ClientMemory* last_memory_ = nullptr;
    dma::DmaCounters departed_dma_;  // of clients gone, so stats keep them
    const IdleCounters* idle_counters_ = nullptr;
    // Keep each object's ring mapping alive while the engine points into it.
    std::unordered_map<std::uint32_t, std::shared_ptr<const device::CqRings>> cqs_;
    std::unordered_map<std::uint32_t, std::shared_ptr<const device::QpRings>> qps_;
    std::unordered_map<std::uint32_t, std::shared_ptr<const device::SrqRings>> srqs_;
    std::function<void(std::uint32_t, std::uint64_t, engine::AsyncEvent)> async_sink_;
    std::vector<net::RxFrame> rx_;
    // Frames the engine sent to one of our own addresses on a port with a
    // wire (two QPs of this device connected to each other): a NIC does not
    // receive what it transmits, so they are received from here, on the next
    // poll, as the loopback port brings its frames back.
    std::vector<std::vector<std::uint8_t>> to_self_;
    DatapathCounters counters_;
    ucma::WireConnectionManager* cm_ = nullptr;
    CmFrameCounters cm_frames_;
    std::array<bool, cm::kCmParseStatusCount> cm_drop_logged_{};  // first drop per reason is logged
    CaptureTap* capture_ = nullptr;
    bool icrc_was_unread_ = false;  // port_.icrc_unread() at the last round's start
    std::unordered_map<std::uint32_t, std::uint32_t> peer_qps_;  // destination QP by QP (MODIFY_QP)
};

}  // namespace uroce::daemon
