// The CM through frames: two managers, each behind a CmFramer, exchanging
// real QP1 frames; a hostile frame is counted and goes no further.
#include <gtest/gtest.h>

#include <deque>

#include "cm/framer.h"
#include "cm_pair.h"
#include "wire/parse.h"

namespace uroce::cm {
namespace {

using namespace test;

struct Wire : FramePort {
    wire::MacAddr mac{};
    wire::MacAddr peer_mac{};
    bool resolved = true;
    std::deque<std::vector<std::uint8_t>> frames;
    std::optional<wire::EthFields> ethernet_to(const wire::Gid&) override {
        if (!resolved) {
            return std::nullopt;
        }
        wire::EthFields e;
        e.src = mac;
        e.dst = peer_mac;
        return e;
    }
    void send_frame(std::span<const std::uint8_t> f) override { frames.emplace_back(f.begin(), f.end()); }
};

struct FramedPair {
    FakeClock clock;
    Wire wa, wb;
    CmFramer fa{wa, 0xC001}, fb{wb, 0xC002};
    Recorder ea, eb;
    ConnectionManager a{config(kGuidA, 1), clock, fa, ea};
    ConnectionManager b{config(kGuidB, 2), clock, fb, eb};
    FramedPair() {
        wa.mac = {2, 0, 0, 0, 0, 1};
        wa.peer_mac = {2, 0, 0, 0, 0, 2};
        wb.mac = wa.peer_mac;
        wb.peer_mac = wa.mac;
        fa.attach(a);
        fb.attach(b);
    }
    void pump() {
        while (!wa.frames.empty() || !wb.frames.empty()) {
            if (!wa.frames.empty()) {
                const auto f = wa.frames.front();
                wa.frames.pop_front();
                fb.receive_frame(f);
            }
            if (!wb.frames.empty()) {
                const auto f = wb.frames.front();
                wb.frames.pop_front();
                fa.receive_frame(f);
            }
        }
    }
};

TEST(CmFramer, ConnectAndDisconnectOverFrames) {
    FramedPair p;
    p.b.listen(kSid, 1);
    CmPair shape;
    const auto ida = p.a.connect(PeerAddress{kIpA, kIpB}, shape.connect_params());
    ASSERT_TRUE(ida);
    ASSERT_EQ(p.wa.frames.size(), 1u);
    const wire::ParseResult first = wire::parse_and_verify(p.wa.frames.front());
    ASSERT_TRUE(first.ok());
    EXPECT_EQ(first.packet.src_gid(), kIpA);
    EXPECT_EQ(first.packet.dst_gid(), kIpB);
    EXPECT_EQ(first.packet.udp().src_port.get(), 0xC001);
    EXPECT_EQ(first.packet.eth().dst, p.wa.peer_mac);
    p.pump();
    const CmEvent* req = p.eb.last(CmEventType::ReqReceived);
    ASSERT_NE(req, nullptr);
    EXPECT_EQ(req->peer.local, kIpB);
    EXPECT_EQ(req->peer.remote, kIpA);
    const CommId idb = req->id;  // later events may move the recorder's vector
    ASSERT_EQ(p.b.accept(idb, CmPair::accept_params()), CallStatus::Ok);
    p.pump();
    ASSERT_EQ(p.a.confirm(*ida), CallStatus::Ok);
    p.pump();
    EXPECT_EQ(p.b.state(idb), CmState::Established);
    ASSERT_EQ(p.a.disconnect(*ida), CallStatus::Ok);
    p.pump();
    ASSERT_EQ(p.b.disconnect(idb), CallStatus::Ok);
    p.pump();
    EXPECT_EQ(p.a.state(*ida), CmState::Timewait);
    EXPECT_EQ(p.fa.counters().frames_sent, 3u);  // REQ, RTU, DREQ
    EXPECT_EQ(p.fb.counters().rx_status[0], 3u);
}

TEST(CmFramer, QpOnesPsnCountsPerMad) {
    FramedPair p;
    CmPair shape;
    (void)p.a.connect(PeerAddress{kIpA, kIpB}, shape.connect_params());
    (void)p.a.connect(PeerAddress{kIpA, kIpB}, shape.connect_params(0x22));
    ASSERT_EQ(p.wa.frames.size(), 2u);
    EXPECT_EQ(wire::parse_frame(p.wa.frames[0]).packet.psn().value(), 0u);
    EXPECT_EQ(wire::parse_frame(p.wa.frames[1]).packet.psn().value(), 1u);
}

TEST(CmFramer, UnresolvedNeighbourDropsTheMadAndTheCmRetries) {
    FramedPair p;
    p.b.listen(kSid, 1);
    p.wa.resolved = false;
    CmPair shape;
    (void)p.a.connect(PeerAddress{kIpA, kIpB}, shape.connect_params());
    EXPECT_TRUE(p.wa.frames.empty());
    EXPECT_EQ(p.fa.counters().no_neighbour, 1u);
    p.wa.resolved = true;
    p.clock.t += Millis(6144);
    p.a.on_timer();
    p.pump();
    EXPECT_EQ(p.eb.count(CmEventType::ReqReceived), 1u);
}

TEST(CmFramer, HostileFramesAreCountedAndGoNoFurther) {
    FramedPair p;
    p.b.listen(kSid, 1);
    CmPair shape;
    (void)p.a.connect(PeerAddress{kIpA, kIpB}, shape.connect_params());
    auto f = p.wa.frames.front();
    f[f.size() - 1] ^= 0xFF;  // ICRC
    EXPECT_EQ(p.fb.receive_frame(f), CmParseStatus::FrameMalformed);
    EXPECT_EQ(p.fb.receive_frame(std::span(f).first(20)), CmParseStatus::FrameMalformed);
    EXPECT_EQ(p.fb.counters().rx_status[static_cast<std::size_t>(CmParseStatus::FrameMalformed)], 2u);
    EXPECT_EQ(p.eb.events.size(), 0u);
    EXPECT_EQ(p.b.connection_count(), 0u);
}

}  // namespace
}  // namespace uroce::cm
