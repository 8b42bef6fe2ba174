// Neighbours: two tables on a wire pair resolve each other over ARP and ND,
// frames queued meanwhile leave in order with the right MAC, requests for
// other addresses are ignored, malformed frames change nothing, the timers
// (retries, give-up, expiry, probing) run on a clock the test moves, and a
// flood of spoofed requests and replies neither evicts nor blocks a peer in
// use.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "net/loopback_port.h"
#include "net/neighbours.h"

namespace uroce::net {
namespace {

using namespace std::chrono_literals;
using Frame = std::vector<std::uint8_t>;

constexpr wire::MacAddr kMacA = {0x02, 0, 0, 0, 0, 0x0A};
constexpr wire::MacAddr kMacB = {0x02, 0, 0, 0, 0, 0x0B};
constexpr wire::MacAddr kBroadcast = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
constexpr wire::Gid kIp4A = wire::ipv4_mapped({10, 0, 0, 1});
constexpr wire::Gid kIp4B = wire::ipv4_mapped({10, 0, 0, 2});
constexpr wire::Gid kIp4Nobody = wire::ipv4_mapped({10, 0, 0, 77});
constexpr wire::Gid kIp6A = {0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};
constexpr wire::Gid kIp6B = {0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02};
constexpr wire::Gid kLinkLocalB = {0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFE, 0, 0, 0x0B};

constexpr std::size_t kSeqAt = 14 + 40 + 8;  // past the IPv6 + UDP headers (IPv4 frames use the same offset)

// A UDP frame to port 4791 from `src` to `dst` carrying `seq`; its Ethernet
// destination is left zero for Neighbours to fill.
Frame ip_frame(const wire::Gid& src, const wire::Gid& dst, std::uint8_t seq) {
    Frame f(kSeqAt + 1, 0);
    auto* eth = reinterpret_cast<wire::EthHdr*>(f.data());
    if (wire::is_ipv4_mapped(dst)) {
        eth->ether_type.set(wire::kEtherTypeIpv4);
        auto* ip = reinterpret_cast<wire::Ipv4Hdr*>(f.data() + 14);
        ip->version_ihl = 0x45;
        ip->protocol = wire::kIpProtoUdp;
        ip->src = wire::ipv4_of(src);
        ip->dst = wire::ipv4_of(dst);
    } else {
        eth->ether_type.set(wire::kEtherTypeIpv6);
        auto* ip = reinterpret_cast<wire::Ipv6Hdr*>(f.data() + 14);
        ip->vtc_flow.set(6u << 28);
        ip->next_header = wire::kIpProtoUdp;
        ip->src = src;
        ip->dst = dst;
    }
    f[kSeqAt] = seq;
    return f;
}

wire::MacAddr eth_dst(const Frame& f) { return {f[0], f[1], f[2], f[3], f[4], f[5]}; }

class NeighboursTest : public ::testing::Test {
protected:
    WirePair wire_ = make_wire_pair(LoopbackConfig{.mac = kMacA}, LoopbackConfig{.mac = kMacB});
    Neighbours a_{*wire_.a, kMacA, {kIp4A, kIp6A}};
    Neighbours b_{*wire_.b, kMacB, {kIp4B, kIp6B, kLinkLocalB}};
    std::vector<Frame> got_a_;  // frames that reached A's engine (not ARP/ND)
    std::vector<Frame> got_b_;
    const Clock::time_point t0_ = Clock::time_point{} + 1h;

    // Flushes both ports and hands every frame to the receiving table (or
    // its "engine") until nothing moves.
    void pump(Clock::time_point now) {
        for (int round = 0; round < 100; ++round) {
            wire_.a->flush();
            wire_.b->flush();
            if (deliver(*wire_.b, b_, got_b_, now) + deliver(*wire_.a, a_, got_a_, now) == 0) {
                return;
            }
        }
        FAIL() << "frames kept bouncing";
    }

    static std::size_t deliver(Port& port, Neighbours& table, std::vector<Frame>& engine, Clock::time_point now) {
        std::size_t moved = 0;
        RxFrame rx[16];
        while (const std::size_t n = port.receive(rx)) {
            for (std::size_t i = 0; i < n; ++i) {
                if (!table.handle_frame(rx[i].bytes, now)) {
                    engine.emplace_back(rx[i].bytes.begin(), rx[i].bytes.end());
                }
            }
            port.release(std::span(rx, n));
            moved += n;
        }
        return moved;
    }

    // What `from` put on the wire, taken off before the other side sees it.
    std::vector<Frame> sent_by(LoopbackPort& from, LoopbackPort& to) {
        from.flush();
        std::vector<Frame> frames;
        RxFrame rx[16];
        while (const std::size_t n = to.receive(rx)) {
            for (std::size_t i = 0; i < n; ++i) {
                frames.emplace_back(rx[i].bytes.begin(), rx[i].bytes.end());
            }
            to.release(std::span(rx, n));
        }
        return frames;
    }

    void send_a(const wire::Gid& src, const wire::Gid& dst, std::uint8_t seq, Clock::time_point now) {
        Frame f = ip_frame(src, dst, seq);
        a_.send_ip(f, dst, now);
    }

    // A resolves B's address `to`; B's engine inbox is emptied.
    void resolve(const wire::Gid& from, const wire::Gid& to, Clock::time_point now) {
        send_a(from, to, 0, now);
        pump(now);
        ASSERT_EQ(a_.lookup(to), kMacB);
        got_b_.clear();
    }
};

std::vector<int> seqs(const std::vector<Frame>& frames) {
    std::vector<int> s;
    for (const Frame& f : frames) {
        s.push_back(f[kSeqAt]);
    }
    return s;
}

TEST_F(NeighboursTest, ResolvesIpv4AndSendsQueuedFramesInOrder) {
    for (std::uint8_t seq = 1; seq <= 3; ++seq) {
        send_a(kIp4A, kIp4B, seq, t0_);
    }
    EXPECT_FALSE(a_.lookup(kIp4B).has_value());
    pump(t0_);

    EXPECT_EQ(seqs(got_b_), (std::vector<int>{1, 2, 3}));
    for (const Frame& f : got_b_) {
        EXPECT_EQ(eth_dst(f), kMacB);
    }
    EXPECT_EQ(a_.lookup(kIp4B), kMacB);
    const NeighbourCounters ca = a_.counters();
    EXPECT_EQ(ca.arp_requests_sent, 1u);
    EXPECT_EQ(ca.frames_queued, 3u);
    EXPECT_EQ(ca.frames_released, 3u);
    EXPECT_EQ(ca.resolved, 1u);
    EXPECT_EQ(b_.counters().arp_replies_sent, 1u);

    // Resolved: the next frame goes straight out, no new request.
    send_a(kIp4A, kIp4B, 4, t0_);
    EXPECT_EQ(a_.counters().frames_queued, 3u);
    pump(t0_);
    EXPECT_EQ(seqs(got_b_), (std::vector<int>{1, 2, 3, 4}));
    EXPECT_EQ(a_.counters().arp_requests_sent, 1u);
}

TEST_F(NeighboursTest, TheAskedSideLearnsTheAsker) {
    resolve(kIp4A, kIp4B, t0_);
    EXPECT_EQ(b_.lookup(kIp4A), kMacA);
    EXPECT_EQ(b_.counters().learned, 1u);
    Frame back = ip_frame(kIp4B, kIp4A, 9);
    b_.send_ip(back, kIp4A, t0_);
    pump(t0_);
    EXPECT_EQ(b_.counters().arp_requests_sent, 0u);
    ASSERT_EQ(seqs(got_a_), std::vector<int>{9});
    EXPECT_EQ(eth_dst(got_a_[0]), kMacA);
}

TEST_F(NeighboursTest, ResolvesIpv6WithSolicitationAndAdvertisement) {
    send_a(kIp6A, kIp6B, 1, t0_);
    const auto out = sent_by(*wire_.a, *wire_.b);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(eth_dst(out[0]), (wire::MacAddr{0x33, 0x33, 0xFF, 0, 0, 0x02})) << "to B's solicited-node group";
    ASSERT_TRUE(b_.handle_frame(out[0], t0_));
    send_a(kIp6A, kIp6B, 2, t0_);
    pump(t0_);
    EXPECT_EQ(seqs(got_b_), (std::vector<int>{1, 2}));
    EXPECT_EQ(a_.lookup(kIp6B), kMacB);
    EXPECT_EQ(b_.lookup(kIp6A), kMacA) << "learned from the solicitation's source link-layer option";
    EXPECT_EQ(a_.counters().ns_sent, 1u);
    EXPECT_EQ(b_.counters().na_sent, 1u);
}

TEST_F(NeighboursTest, ResolvesALinkLocalAddress) {
    send_a(kIp6A, kLinkLocalB, 1, t0_);
    pump(t0_);
    EXPECT_EQ(seqs(got_b_), std::vector<int>{1});
    EXPECT_EQ(a_.lookup(kLinkLocalB), kMacB);
}

TEST_F(NeighboursTest, RequestsForOtherAddressesAreIgnored) {
    // A asks for 10.0.0.77 and 2001:db8::77; B owns neither.
    send_a(kIp4A, kIp4Nobody, 1, t0_);
    wire::Gid ip6_nobody = kIp6B;
    ip6_nobody[15] = 0x77;
    send_a(kIp6A, ip6_nobody, 2, t0_);
    const auto requests = sent_by(*wire_.a, *wire_.b);
    ASSERT_EQ(requests.size(), 2u);
    for (const Frame& f : requests) {
        EXPECT_TRUE(b_.handle_frame(f, t0_));
    }
    EXPECT_TRUE(sent_by(*wire_.b, *wire_.a).empty()) << "B must not answer";
    EXPECT_EQ(b_.counters().ignored, 2u);
    EXPECT_EQ(b_.counters().arp_replies_sent + b_.counters().na_sent, 0u);
    EXPECT_FALSE(b_.lookup(kIp4A).has_value()) << "a request not aimed at B teaches it nothing";
    EXPECT_FALSE(b_.lookup(kIp6A).has_value());
}

TEST_F(NeighboursTest, UnicastFramesForAnotherStationAreIgnored) {
    // An ARP request for B's address, but sent to some other station's MAC
    // (seen because veth and af_packet deliver every frame).
    send_a(kIp4A, kIp4B, 1, t0_);
    auto requests = sent_by(*wire_.a, *wire_.b);
    ASSERT_EQ(requests.size(), 1u);
    Frame misdirected = requests[0];
    misdirected[0] = 0x02;  // unicast 02:ff:ff:ff:ff:ff
    EXPECT_TRUE(b_.handle_frame(misdirected, t0_));
    EXPECT_EQ(b_.counters().arp_replies_sent, 0u);
    EXPECT_EQ(b_.counters().ignored, 1u);
    EXPECT_TRUE(b_.handle_frame(requests[0], t0_));
    EXPECT_EQ(b_.counters().arp_replies_sent, 1u);
}

TEST_F(NeighboursTest, OwnFramesAndNonNeighbourFramesAreNotTakenIn) {
    send_a(kIp4A, kIp4B, 1, t0_);
    auto requests = sent_by(*wire_.a, *wire_.b);
    ASSERT_EQ(requests.size(), 1u);
    EXPECT_TRUE(a_.handle_frame(requests[0], t0_)) << "ARP is consumed even when it is our own";
    EXPECT_EQ(a_.counters().arp_replies_sent, 0u);
    EXPECT_FALSE(a_.handle_frame(ip_frame(kIp4B, kIp4A, 1), t0_)) << "a UDP frame is the engine's";
    EXPECT_FALSE(a_.handle_frame(ip_frame(kIp6B, kIp6A, 1), t0_));
    EXPECT_FALSE(a_.handle_frame(Frame(10, 0), t0_));
}

TEST_F(NeighboursTest, MalformedFramesAreConsumedAndChangeNothing) {
    send_a(kIp4A, kIp4B, 1, t0_);
    send_a(kIp6A, kIp6B, 2, t0_);
    const auto requests = sent_by(*wire_.a, *wire_.b);
    ASSERT_EQ(requests.size(), 2u);
    std::uint64_t expected_malformed = 0;
    for (const Frame& request : requests) {
        // Every truncation, in a buffer of exactly that size (ASan catches overreads).
        const std::size_t header_end = request[12] == 0x08 ? 14 : 14 + 40 + 1;
        for (std::size_t n = 0; n < request.size(); ++n) {
            const Frame cut(request.begin(), request.begin() + static_cast<std::ptrdiff_t>(n));
            const bool consumed = b_.handle_frame(cut, t0_);
            EXPECT_EQ(consumed, n >= header_end) << "length " << n;
            if (consumed) {
                ++expected_malformed;
            }
        }
    }
    // The ARP frame is padded to 60 bytes: only prefixes of 42 or more are
    // whole; one source gets one answer per answer_interval.
    EXPECT_EQ(b_.counters().arp_replies_sent, 1u);
    EXPECT_EQ(b_.counters().answers_limited, 17u);
    EXPECT_EQ(b_.counters().na_sent, 0u);
    EXPECT_EQ(b_.counters().malformed, expected_malformed - 18);
    EXPECT_FALSE(b_.lookup(kIp6A).has_value()) << "no truncated NS is whole";
}

TEST_F(NeighboursTest, RetriesThenGivesUpAndDropsTheQueue) {
    send_a(kIp4A, kIp4Nobody, 1, t0_);
    send_a(kIp4A, kIp4Nobody, 2, t0_);
    auto requests_at = [&](Clock::time_point now) {
        a_.poll(now);
        return sent_by(*wire_.a, *wire_.b).size();
    };
    EXPECT_EQ(requests_at(t0_), 1u);
    EXPECT_EQ(a_.next_deadline(), t0_ + 200ms);
    EXPECT_EQ(requests_at(t0_ + 199ms), 0u);
    EXPECT_EQ(requests_at(t0_ + 200ms), 1u);
    EXPECT_EQ(requests_at(t0_ + 400ms), 1u);
    EXPECT_EQ(requests_at(t0_ + 600ms), 1u);
    EXPECT_EQ(requests_at(t0_ + 800ms), 1u);  // the fifth
    EXPECT_EQ(a_.counters().arp_requests_sent, 5u);
    EXPECT_EQ(requests_at(t0_ + 999ms), 0u);
    EXPECT_EQ(a_.counters().entries, 1u);
    EXPECT_EQ(requests_at(t0_ + 1000ms), 0u);
    const NeighbourCounters c = a_.counters();
    EXPECT_EQ(c.entries, 0u);
    EXPECT_EQ(c.resolution_failures, 1u);
    EXPECT_EQ(c.unresolved_dropped, 2u);
    EXPECT_FALSE(a_.next_deadline().has_value());

    // A new frame starts over.
    send_a(kIp4A, kIp4Nobody, 3, t0_ + 2s);
    EXPECT_EQ(requests_at(t0_ + 2s), 1u);
}

TEST_F(NeighboursTest, AnswerAfterRetriesStillDeliversTheQueue) {
    send_a(kIp6A, kIp6B, 1, t0_);
    sent_by(*wire_.a, *wire_.b);  // the first NS is lost
    a_.poll(t0_ + 200ms);
    pump(t0_ + 200ms);
    EXPECT_EQ(seqs(got_b_), std::vector<int>{1});
    EXPECT_EQ(a_.counters().ns_sent, 2u);
}

TEST_F(NeighboursTest, QueueIsBoundedAndKeepsTheNewest) {
    for (int seq = 1; seq <= 70; ++seq) {
        send_a(kIp4A, kIp4B, static_cast<std::uint8_t>(seq), t0_);
    }
    pump(t0_);
    std::vector<int> expected;
    for (int seq = 7; seq <= 70; ++seq) {
        expected.push_back(seq);
    }
    EXPECT_EQ(seqs(got_b_), expected);
    EXPECT_EQ(a_.counters().queue_overflow, 6u);
}

TEST_F(NeighboursTest, UsedEntryIsProbedByUnicastWithoutStoppingTraffic) {
    resolve(kIp4A, kIp4B, t0_);
    const auto t1 = t0_ + 30s;
    send_a(kIp4A, kIp4B, 1, t1);  // in use
    pump(t1);
    a_.poll(t0_ + 60s - 1ms);
    EXPECT_TRUE(sent_by(*wire_.a, *wire_.b).empty());

    const auto t2 = t0_ + 60s;
    a_.poll(t2);
    send_a(kIp4A, kIp4B, 2, t2);  // still goes out, to the known MAC
    const auto out = sent_by(*wire_.a, *wire_.b);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(eth_dst(out[0]), kMacB) << "the probe is unicast";
    EXPECT_EQ(out[0][12], 0x08);
    EXPECT_EQ(out[0][13], 0x06);
    EXPECT_EQ(out[1][kSeqAt], 2);
    EXPECT_EQ(eth_dst(out[1]), kMacB);

    // B answers the probe: no more probes, confirmed until t2 + 60 s.
    ASSERT_TRUE(b_.handle_frame(out[0], t2));
    pump(t2);
    EXPECT_EQ(a_.counters().resolved, 2u);
    a_.poll(t2 + 200ms);
    EXPECT_TRUE(sent_by(*wire_.a, *wire_.b).empty());
    EXPECT_EQ(a_.next_deadline(), t2 + 60s);
}

TEST_F(NeighboursTest, ProbeWithoutAnswerForgetsTheEntry) {
    resolve(kIp6A, kIp6B, t0_);
    send_a(kIp6A, kIp6B, 1, t0_ + 1s);
    sent_by(*wire_.a, *wire_.b);
    auto t = t0_ + 60s;
    for (int probe = 0; probe < 5; ++probe, t += 200ms) {
        a_.poll(t);
        const auto out = sent_by(*wire_.a, *wire_.b);
        ASSERT_EQ(out.size(), 1u);
        EXPECT_EQ(eth_dst(out[0]), kMacB) << "unicast NS";
        EXPECT_EQ(a_.lookup(kIp6B), kMacB) << "still usable while probing";
    }
    a_.poll(t);
    EXPECT_FALSE(a_.lookup(kIp6B).has_value());
    EXPECT_EQ(a_.counters().resolution_failures, 1u);
    // The next frame resolves afresh through the multicast group.
    send_a(kIp6A, kIp6B, 2, t);
    const auto out = sent_by(*wire_.a, *wire_.b);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(eth_dst(out[0]), (wire::MacAddr{0x33, 0x33, 0xFF, 0, 0, 0x02}));
}

TEST_F(NeighboursTest, UnusedEntryExpiresSilently) {
    resolve(kIp4A, kIp4B, t0_);
    a_.poll(t0_ + 60s);
    EXPECT_TRUE(sent_by(*wire_.a, *wire_.b).empty());
    EXPECT_FALSE(a_.lookup(kIp4B).has_value());
    EXPECT_EQ(a_.counters().entries, 0u);
}

TEST_F(NeighboursTest, NewMacInAReplyReplacesTheOldOne) {
    resolve(kIp4A, kIp4B, t0_);
    // B's address moves to another NIC: a gratuitous ARP reply announces it.
    const wire::MacAddr moved = {0x02, 0, 0, 0, 0, 0x0C};
    const ArpMessage announce{
        .eth_dst = kBroadcast,
        .eth_src = moved,
        .op = ArpOp::Reply,
        .sender_mac = moved,
        .sender_ip = wire::ipv4_of(kIp4B),
        .target_mac = kBroadcast,
        .target_ip = wire::ipv4_of(kIp4B),
    };
    Frame f(kArpFrameSize);
    build_arp(f, announce);
    EXPECT_TRUE(a_.handle_frame(f, t0_ + 1s));
    EXPECT_EQ(a_.lookup(kIp4B), moved);
}

TEST_F(NeighboursTest, DuplicateAddressDetectionGetsAnAdvertisementToAllNodes) {
    const NdMessage dad{
        .type = NdType::NeighborSolicitation,
        .eth_dst = ipv6_multicast_mac(solicited_node_multicast(kIp6B)),
        .eth_src = kMacA,
        .ip_src = {},
        .ip_dst = solicited_node_multicast(kIp6B),
        .target = kIp6B,
        .link_addr = kMacA,
    };
    Frame f(kNdFrameSize);
    build_nd(f, dad);
    f.resize(kNdFrameSize - 8);  // DAD carries no source link-layer option
    f[19] = 24;                  // payload length without it
    f[56] = f[57] = 0;
    wire::Gid unspecified{};
    const std::uint16_t c = icmpv6_checksum(unspecified, dad.ip_dst, std::span(f).subspan(54));
    f[56] = static_cast<std::uint8_t>(c >> 8);
    f[57] = static_cast<std::uint8_t>(c);
    ASSERT_TRUE(b_.handle_frame(f, t0_));
    const auto out = sent_by(*wire_.b, *wire_.a);
    ASSERT_EQ(out.size(), 1u);
    const NdParseResult na = parse_nd(out[0]);
    ASSERT_EQ(na.status, NdParseStatus::Ok);
    EXPECT_EQ(na.message.ip_dst, kAllNodesMulticast);
    EXPECT_EQ(eth_dst(out[0]), (wire::MacAddr{0x33, 0x33, 0, 0, 0, 0x01}));
    EXPECT_FALSE(na.message.solicited);
    EXPECT_EQ(na.message.link_addr, kMacB);
    EXPECT_FALSE(b_.lookup(kIp6A).has_value()) << "nothing to learn from ::";
}

TEST_F(NeighboursTest, MulticastAndOwnAddressesNeedNoResolution) {
    send_a(kIp4A, wire::ipv4_mapped({239, 129, 2, 3}), 1, t0_);
    send_a(kIp6A, wire::Gid{0xFF, 0x0E, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xDE, 0xAD, 0xBE, 0xEF}, 2, t0_);
    send_a(kIp4A, kIp4A, 3, t0_);
    const auto out = sent_by(*wire_.a, *wire_.b);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(eth_dst(out[0]), (wire::MacAddr{0x01, 0x00, 0x5E, 0x01, 0x02, 0x03}));
    EXPECT_EQ(eth_dst(out[1]), (wire::MacAddr{0x33, 0x33, 0xDE, 0xAD, 0xBE, 0xEF}));
    EXPECT_EQ(eth_dst(out[2]), kMacA);
    EXPECT_EQ(a_.counters().arp_requests_sent + a_.counters().ns_sent, 0u);
}

TEST_F(NeighboursTest, NoAddressOfTheFamilyMeansNoResolution) {
    auto pair = make_wire_pair(LoopbackConfig{.mac = kMacA}, LoopbackConfig{.mac = kMacB});
    Neighbours v4_only(*pair.a, kMacA, {kIp4A});
    Frame f = ip_frame(kIp6A, kIp6B, 1);
    v4_only.send_ip(f, kIp6B, t0_);
    EXPECT_EQ(v4_only.counters().no_entry_dropped, 1u);
    EXPECT_EQ(v4_only.counters().ns_sent, 0u);
}

// ---- floods ------------------------------------------------------------------

// Spoofed source number `i`: 10.1.x.y / 2001:db8:f::x:y behind 02:f0:00:00:x:y.
wire::MacAddr spoofed_mac(unsigned i) {
    return {0x02, 0xF0, 0, 0, static_cast<std::uint8_t>(i >> 8), static_cast<std::uint8_t>(i)};
}
wire::Gid spoofed_ip4(unsigned i) {
    return wire::ipv4_mapped({10, 1, static_cast<std::uint8_t>(i >> 8), static_cast<std::uint8_t>(i)});
}
wire::Gid spoofed_ip6(unsigned i) {
    wire::Gid ip = kIp6A;
    ip[5] = 0x0F;
    ip[14] = static_cast<std::uint8_t>(i >> 8);
    ip[15] = static_cast<std::uint8_t>(i);
    return ip;
}

// An ARP request or reply from spoofed source `i` aimed at `target`.
Frame spoofed_arp(ArpOp op, unsigned i, const wire::Gid& target, const wire::MacAddr& target_mac) {
    const ArpMessage m{
        .eth_dst = op == ArpOp::Request ? kBroadcast : target_mac,
        .eth_src = spoofed_mac(i),
        .op = op,
        .sender_mac = spoofed_mac(i),
        .sender_ip = wire::ipv4_of(spoofed_ip4(i)),
        .target_mac = op == ArpOp::Request ? wire::MacAddr{} : target_mac,
        .target_ip = wire::ipv4_of(target),
    };
    Frame f(kArpFrameSize);
    build_arp(f, m);
    return f;
}

// An NS from spoofed source `i` for `target`, with its link-layer option.
Frame spoofed_ns(unsigned i, const wire::Gid& target) {
    const NdMessage m{
        .type = NdType::NeighborSolicitation,
        .eth_dst = ipv6_multicast_mac(solicited_node_multicast(target)),
        .eth_src = spoofed_mac(i),
        .ip_src = spoofed_ip6(i),
        .ip_dst = solicited_node_multicast(target),
        .target = target,
        .link_addr = spoofed_mac(i),
    };
    Frame f(kNdFrameSize);
    build_nd(f, m);
    return f;
}

TEST_F(NeighboursTest, FloodOfSpoofedRequestsNeitherEvictsNorBlocksAPeerInUse) {
    resolve(kIp4A, kIp4B, t0_);
    resolve(kIp6A, kIp6B, t0_);
    constexpr unsigned kSources = 8400;  // twice the table's 4096 entries
    const NeighbourConfig config;
    const std::uint64_t queued_before = a_.counters().frames_queued;
    std::uint8_t seq = 0;
    std::vector<int> sent;
    Clock::time_point now = t0_;
    // Twice over: re-sending the same flood must not fill the table either.
    for (int round = 0; round < 2; ++round) {
        for (unsigned i = 0; i < kSources; ++i) {
            now += 100us;
            ASSERT_TRUE(a_.handle_frame(spoofed_arp(ArpOp::Request, i, kIp4A, kMacA), now));
            ASSERT_TRUE(a_.handle_frame(spoofed_arp(ArpOp::Reply, i + kSources, kIp4A, kMacA), now));
            ASSERT_TRUE(a_.handle_frame(spoofed_ns(i, kIp6A), now));
            if (i % 64 == 0) {  // the ping-pong keeps going through the flood
                send_a(kIp4A, kIp4B, ++seq, now);
                sent.push_back(seq);
                send_a(kIp6A, kIp6B, ++seq, now);
                sent.push_back(seq);
                pump(now);  // B drops the replies to the spoofed MACs
                ASSERT_EQ(a_.lookup(kIp4B), kMacB) << "source " << i;
                ASSERT_EQ(a_.lookup(kIp6B), kMacB) << "source " << i;
            }
            ASSERT_LE(a_.counters().entries, 2 + config.max_learned);
        }
    }
    EXPECT_EQ(seqs(got_b_), sent) << "every frame to the peer in use reached it, in order";
    for (const Frame& f : got_b_) {
        EXPECT_EQ(eth_dst(f), kMacB);
    }
    EXPECT_EQ(a_.counters().no_entry_dropped, 0u);
    EXPECT_EQ(a_.counters().frames_queued, queued_before) << "the peers never needed resolving again";
    EXPECT_GE(a_.counters().evicted, 3 * 2 * kSources - config.max_learned);
    EXPECT_EQ(a_.counters().arp_replies_sent, 2 * kSources) << "each request answered once";
    EXPECT_EQ(a_.counters().na_sent, 2 * kSources);

    // A new peer is resolved in the middle of it all.
    got_b_.clear();
    send_a(kIp6A, kLinkLocalB, 1, now);
    ASSERT_TRUE(a_.handle_frame(spoofed_ns(1, kIp6A), now));
    pump(now);
    EXPECT_EQ(seqs(got_b_), std::vector<int>{1});
    EXPECT_EQ(a_.lookup(kLinkLocalB), kMacB);
}

TEST_F(NeighboursTest, RepeatedRequestsFromOneSourceGetOneAnswerPerInterval) {
    const NeighbourConfig config;
    for (int copy = 0; copy < 10; ++copy) {
        ASSERT_TRUE(a_.handle_frame(spoofed_arp(ArpOp::Request, 7, kIp4A, kMacA), t0_));
        ASSERT_TRUE(a_.handle_frame(spoofed_ns(7, kIp6A), t0_));
    }
    EXPECT_EQ(sent_by(*wire_.a, *wire_.b).size(), 2u);
    EXPECT_EQ(a_.counters().answers_limited, 18u);
    ASSERT_TRUE(a_.handle_frame(spoofed_arp(ArpOp::Request, 7, kIp4A, kMacA), t0_ + config.answer_interval));
    EXPECT_EQ(a_.counters().arp_replies_sent, 2u);
}

TEST(NeighboursFullTable, EvictsTheLeastRecentlyUsedIdleEntryOnly) {
    auto pair = make_wire_pair(LoopbackConfig{.mac = kMacA}, LoopbackConfig{.mac = kMacB});
    const NeighbourConfig config{.max_entries = 3, .max_learned = 1};
    Neighbours a(*pair.a, kMacA, {kIp4A}, config);
    const Clock::time_point t0 = Clock::time_point{} + 1h;
    // Three peers answer A's requests: 10.0.0.2 (.b), .3 and .4.
    auto answer = [&](const wire::Gid& peer, Clock::time_point now) {
        pair.a->flush();
        RxFrame rx[16];
        while (const std::size_t n = pair.b->receive(rx)) {
            pair.b->release(std::span(rx, n));
        }
        const ArpMessage reply{
            .eth_dst = kMacA,
            .eth_src = kMacB,
            .op = ArpOp::Reply,
            .sender_mac = kMacB,
            .sender_ip = wire::ipv4_of(peer),
            .target_mac = kMacA,
            .target_ip = wire::ipv4_of(kIp4A),
        };
        Frame f(kArpFrameSize);
        build_arp(f, reply);
        ASSERT_TRUE(a.handle_frame(f, now));
    };
    auto send = [&](const wire::Gid& peer, Clock::time_point now) {
        Frame f = ip_frame(kIp4A, peer, 1);
        a.send_ip(f, peer, now);
    };
    const wire::Gid peer3 = wire::ipv4_mapped({10, 0, 0, 3});
    const wire::Gid peer4 = wire::ipv4_mapped({10, 0, 0, 4});
    send(kIp4B, t0);
    answer(kIp4B, t0);
    ASSERT_TRUE(a.handle_frame(spoofed_arp(ArpOp::Request, 1, kIp4A, kMacA), t0));
    send(peer3, t0 + 1s);
    answer(peer3, t0 + 1s);
    ASSERT_EQ(a.counters().entries, 3u);
    // Full: a learned guess goes first, then the idle peer.
    send(peer4, t0 + 2s);
    EXPECT_EQ(a.counters().evicted, 1u);
    EXPECT_FALSE(a.lookup(spoofed_ip4(1)).has_value());
    answer(peer4, t0 + 2s);
    // Every entry in use: nothing goes, the newcomer waits.
    const wire::Gid peer5 = wire::ipv4_mapped({10, 0, 0, 5});
    send(peer5, t0 + 3s);
    EXPECT_EQ(a.counters().no_entry_dropped, 1u);
    EXPECT_TRUE(a.lookup(kIp4B).has_value());
    // 10.0.0.3 stays busy; 10.0.0.2 idles past idle_time and makes room.
    send(peer3, t0 + 50s);
    send(peer4, t0 + 50s);
    send(peer5, t0 + 1s + config.idle_time);
    EXPECT_EQ(a.counters().evicted, 2u);
    EXPECT_FALSE(a.lookup(kIp4B).has_value());
    EXPECT_TRUE(a.lookup(peer3).has_value());
    EXPECT_TRUE(a.lookup(peer4).has_value());
}

TEST(NeighboursLoopback, PortWithoutWireSendsEverythingToOurOwnMac) {
    LoopbackPort port(LoopbackConfig{.mac = kMacA});
    Neighbours table(port, kMacA, {kIp4A});
    Frame f = ip_frame(kIp4A, kIp4B, 5);
    table.send_ip(f, kIp4B, Clock::now());
    port.flush();
    RxFrame rx[2];
    ASSERT_EQ(port.receive(rx), 1u);
    EXPECT_EQ(rx[0].bytes[0], kMacA[0]);
    EXPECT_EQ(rx[0].bytes[5], kMacA[5]);
    EXPECT_EQ(rx[0].bytes[kSeqAt], 5);
    port.release(std::span(rx, 1));
    EXPECT_EQ(table.counters().arp_requests_sent, 0u);
}

// resolve(): what rdma_cm's RESOLVE_ADDR asks before it reports
// ADDR_RESOLVED (addr.c dst_fetch_ha), with no frame to send.
TEST_F(NeighboursTest, ResolveAsksOnceThenKnowsTheAnswer) {
    EXPECT_EQ(a_.link_state(kIp4B), LinkState::Resolving);
    EXPECT_EQ(a_.counters().entries, 0u);  // link_state creates nothing
    EXPECT_EQ(a_.resolve(kIp4B, kIp4A, t0_), LinkState::Resolving);
    EXPECT_EQ(a_.resolve(kIp4B, kIp4A, t0_), LinkState::Resolving);  // its request is out already
    EXPECT_EQ(a_.counters().arp_requests_sent, 1u);
    pump(t0_);
    EXPECT_EQ(a_.link_state(kIp4B), LinkState::Known);
    EXPECT_EQ(a_.resolve(kIp4B, kIp4A, t0_), LinkState::Known);
    EXPECT_EQ(a_.lookup(kIp4B), kMacB);
    EXPECT_EQ(a_.counters().arp_requests_sent, 1u);
    EXPECT_TRUE(got_b_.empty());  // nothing was queued for the peer
}

TEST_F(NeighboursTest, ResolveOfAnAbsentPeerRetriesThenGivesUp) {
    EXPECT_EQ(a_.resolve(kIp4Nobody, kIp4A, t0_), LinkState::Resolving);
    for (int i = 1; i <= 5; ++i) {
        a_.poll(t0_ + i * 200ms);
    }
    EXPECT_EQ(a_.counters().arp_requests_sent, 5u);
    EXPECT_EQ(a_.counters().resolution_failures, 1u);
    EXPECT_EQ(a_.counters().entries, 0u);
    EXPECT_EQ(a_.link_state(kIp4Nobody), LinkState::Resolving);
}

TEST_F(NeighboursTest, ResolveNeedsNothingForOwnAndGroupAddresses) {
    EXPECT_EQ(a_.resolve(kIp4A, kIp4A, t0_), LinkState::Known);
    EXPECT_EQ(a_.resolve(wire::ipv4_mapped({239, 1, 2, 3}), kIp4A, t0_), LinkState::Known);
    EXPECT_EQ(a_.counters().arp_requests_sent + a_.counters().ns_sent, 0u);
}

TEST_F(NeighboursTest, ResolveAsksFromTheGivenSourceOrOurFirstOfTheFamily) {
    EXPECT_EQ(a_.resolve(kIp6B, kIp6A, t0_), LinkState::Resolving);
    EXPECT_EQ(a_.counters().ns_sent, 1u);
    pump(t0_);
    EXPECT_EQ(a_.link_state(kIp6B), LinkState::Known);
    // A source that is not ours (a wildcard-bound id): our own IPv4 address asks.
    EXPECT_EQ(a_.resolve(kIp4B, wire::ipv4_mapped({10, 9, 9, 9}), t0_), LinkState::Resolving);
    pump(t0_);
    EXPECT_EQ(a_.link_state(kIp4B), LinkState::Known);
}

TEST(NeighboursLoopback, ResolveOnAPortWithoutWireIsKnownAtOnce) {
    LoopbackPort port(LoopbackConfig{.mac = kMacA});
    Neighbours table(port, kMacA, {kIp4A});
    EXPECT_EQ(table.resolve(kIp4B, kIp4A, Clock::now()), LinkState::Known);
    EXPECT_EQ(table.counters().arp_requests_sent, 0u);
}

}  // namespace
}  // namespace uroce::net
