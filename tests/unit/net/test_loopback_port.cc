// LoopbackPort and wire pairs: frames come back (or cross) only at flush, in
// order, intact; queues and the buffer pool are bounded and count their
// drops; injected faults drop, duplicate and reorder exactly the frames asked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "net/loopback_port.h"

namespace uroce::net {
namespace {

constexpr wire::MacAddr kMacA = {0x02, 0, 0, 0, 0, 0x0A};
constexpr wire::MacAddr kMacB = {0x02, 0, 0, 0, 0, 0x0B};

// A 64-byte frame whose byte 14 (after the Ethernet header) is `tag`.
std::vector<std::uint8_t> frame_tagged(std::uint8_t tag, std::size_t size = 64) {
    std::vector<std::uint8_t> f(size, 0xEE);
    f[14] = tag;
    return f;
}

// Receives everything pending and returns the tags, releasing each frame.
std::vector<int> drain_tags(Port& port) {
    std::vector<int> tags;
    RxFrame rx[8];
    for (;;) {
        const std::size_t n = port.receive(rx);
        if (n == 0) {
            return tags;
        }
        for (std::size_t i = 0; i < n; ++i) {
            tags.push_back(rx[i].bytes[14]);
        }
        port.release(std::span(rx, n));
    }
}

std::vector<int> send_tags(Port& port, int first, int last) {
    std::vector<int> sent;
    for (int t = first; t <= last; ++t) {
        EXPECT_TRUE(port.send(frame_tagged(static_cast<std::uint8_t>(t))));
        sent.push_back(t);
    }
    return sent;
}

TEST(LoopbackPort, FramesComeBackAfterFlushInOrder) {
    LoopbackPort port(LoopbackConfig{.mac = kMacA});
    EXPECT_FALSE(port.has_wire());
    EXPECT_EQ(port.mac(), kMacA);
    EXPECT_EQ(port.max_frame(), kStandardMaxFrame);
    EXPECT_EQ(port.rx_wait_fd(), -1);

    const auto sent = send_tags(port, 1, 5);
    EXPECT_TRUE(drain_tags(port).empty()) << "nothing is on the wire before flush()";
    port.flush();
    EXPECT_EQ(drain_tags(port), sent);

    const PortCounters c = port.counters();
    EXPECT_EQ(c.tx_frames, 5u);
    EXPECT_EQ(c.tx_bytes, 5u * 64);
    EXPECT_EQ(c.rx_frames, 5u);
    EXPECT_EQ(c.rx_bytes, 5u * 64);
    EXPECT_EQ(c.tx_dropped, 0u);
}

TEST(LoopbackPort, ReceivedBytesAreACopyAndStayValidUntilRelease) {
    LoopbackPort port(LoopbackConfig{.mac = kMacA});
    auto original = frame_tagged(7, 100);
    original[99] = 0x42;
    ASSERT_TRUE(port.send(original));
    original.assign(original.size(), 0);  // the port copied it at send()
    port.flush();

    RxFrame first[1];
    ASSERT_EQ(port.receive(first), 1u);
    // More traffic while the first frame is held must not overwrite it.
    for (int round = 0; round < 50; ++round) {
        send_tags(port, 100, 120);
        port.flush();
        drain_tags(port);
    }
    ASSERT_EQ(first[0].bytes.size(), 100u);
    EXPECT_EQ(first[0].bytes[14], 7);
    EXPECT_EQ(first[0].bytes[99], 0x42);
    port.release(first);
    EXPECT_EQ(first[0].handle, nullptr);
}

TEST(LoopbackPort, RefusesOversizedAndRuntFrames) {
    LoopbackPort port(LoopbackConfig{.mac = kMacA, .max_frame = 128});
    EXPECT_TRUE(port.send(frame_tagged(1, 128)));
    EXPECT_FALSE(port.send(frame_tagged(2, 129)));
    EXPECT_FALSE(port.send(std::vector<std::uint8_t>(13, 0)));
    EXPECT_EQ(port.counters().tx_dropped, 2u);
    port.flush();
    EXPECT_EQ(drain_tags(port), std::vector<int>{1});
}

TEST(LoopbackPort, FullTransmitQueueDropsAndCounts) {
    LoopbackPort port(LoopbackConfig{.mac = kMacA, .tx_queue_frames = 3});
    send_tags(port, 1, 3);
    EXPECT_FALSE(port.send(frame_tagged(4)));
    EXPECT_EQ(port.counters().tx_dropped, 1u);
    port.flush();
    EXPECT_EQ(drain_tags(port), (std::vector<int>{1, 2, 3}));
}

TEST(LoopbackPort, FullReceiveQueueDropsNewestAndCounts) {
    LoopbackPort port(LoopbackConfig{.mac = kMacA, .rx_queue_frames = 4});
    send_tags(port, 1, 6);
    port.flush();
    EXPECT_EQ(port.rx_pending(), 4u);
    EXPECT_EQ(port.wire_counters().rx_dropped, 2u);
    EXPECT_EQ(port.wire_counters().delivered, 4u);
    EXPECT_EQ(drain_tags(port), (std::vector<int>{1, 2, 3, 4}));
}

TEST(LoopbackPort, HeldFramesExhaustThePoolThenSendFails) {
    // Pool: twice the queues (2 * (2 + 2) = 8 buffers). A receiver that never
    // releases eventually starves the sender, as with a leaked mbuf.
    LoopbackPort port(LoopbackConfig{.mac = kMacA, .rx_queue_frames = 2, .tx_queue_frames = 2});
    std::vector<RxFrame> held;
    int sent = 0;
    for (int i = 0; i < 20; ++i) {
        if (port.send(frame_tagged(1))) {
            ++sent;
        }
        port.flush();
        RxFrame rx[2];
        const std::size_t n = port.receive(rx);
        held.insert(held.end(), rx, rx + n);
    }
    EXPECT_EQ(sent, 8);
    EXPECT_EQ(port.counters().tx_dropped, 12u);
    port.release(held);
    EXPECT_TRUE(port.send(frame_tagged(2)));
}

TEST(LoopbackPort, OnlyTheLonePortLeavesTheIcrcUnread) {
    LoopbackPort lone(LoopbackConfig{.mac = kMacA});
    EXPECT_TRUE(lone.icrc_unread()) << "its frames never leave the process";
    const WirePair pair = make_wire_pair(LoopbackConfig{.mac = kMacA}, LoopbackConfig{.mac = kMacB});
    EXPECT_FALSE(pair.a->icrc_unread()) << "a wire pair joins two engines, as a wire does";
}

TEST(LoopbackPort, AFrameBuiltInTheRoomIsQueuedWithoutACopy) {
    LoopbackPort port(LoopbackConfig{.mac = kMacA});
    const std::span<std::uint8_t> room = port.tx_room();
    ASSERT_EQ(room.size(), port.max_frame());
    EXPECT_EQ(port.tx_room().data(), room.data()) << "the same room until a send() takes it";
    const auto built = frame_tagged(7, 300);
    std::copy(built.begin(), built.end(), room.begin());
    // A frame sent from elsewhere is copied; the room stays lent.
    EXPECT_TRUE(port.send(frame_tagged(6)));
    EXPECT_EQ(port.tx_room().data(), room.data());
    EXPECT_TRUE(port.send(room.first(built.size())));
    EXPECT_NE(port.tx_room().data(), room.data()) << "a new room once the old one is queued";
    port.flush();
    RxFrame rx[4];
    ASSERT_EQ(port.receive(rx), 2u);
    EXPECT_EQ(rx[0].bytes[14], 6);
    EXPECT_FALSE(rx[0].icrc_vouched) << "a copied frame may be anyone's bytes: its ICRC is checked";
    EXPECT_EQ(rx[1].bytes.data(), room.data()) << "the room itself arrived: no copy";
    EXPECT_TRUE(rx[1].icrc_vouched) << "built in the room and untouched since";
    EXPECT_TRUE(std::equal(built.begin(), built.end(), rx[1].bytes.begin(), rx[1].bytes.end()));
    port.release(std::span(rx, 2));
    EXPECT_EQ(port.counters().tx_frames, 2u);
    EXPECT_EQ(port.counters().tx_dropped, 0u);
}

TEST(LoopbackPort, TheLentRoomComesFromThePoolAndGoesBackWithThePort) {
    // Pool of 8 (see above): a lent room is one of them, so a receiver that
    // never releases starves the sender one frame earlier.
    LoopbackPort port(LoopbackConfig{.mac = kMacA, .rx_queue_frames = 2, .tx_queue_frames = 2});
    ASSERT_FALSE(port.tx_room().empty());
    std::vector<RxFrame> held;
    int sent = 0;
    for (int i = 0; i < 20; ++i) {
        sent += port.send(frame_tagged(1)) ? 1 : 0;
        port.flush();
        RxFrame rx[2];
        const std::size_t n = port.receive(rx);
        held.insert(held.end(), rx, rx + n);
    }
    EXPECT_EQ(sent, 7);
    port.release(held);
    // Sent from the room when the pool has nothing else.
    const std::span<std::uint8_t> room = port.tx_room();
    const auto f = frame_tagged(3);
    std::copy(f.begin(), f.end(), room.begin());
    EXPECT_TRUE(port.send(room.first(f.size())));
}

TEST(WirePair, AFrameBuiltInTheRoomCrosses) {
    auto pair = make_wire_pair(LoopbackConfig{.mac = kMacA}, LoopbackConfig{.mac = kMacB});
    const std::span<std::uint8_t> room = pair.a->tx_room();
    const auto f = frame_tagged(9, 1000);
    std::copy(f.begin(), f.end(), room.begin());
    EXPECT_TRUE(pair.a->send(room.first(f.size())));
    pair.a->flush();
    RxFrame rx[2];
    ASSERT_EQ(pair.b->receive(rx), 1u);
    EXPECT_TRUE(std::equal(f.begin(), f.end(), rx[0].bytes.begin(), rx[0].bytes.end()));
    pair.b->release(std::span(rx, 1));
    // The room b lends comes from the shared pool too.
    EXPECT_FALSE(pair.b->tx_room().empty());
}

TEST(WirePair, FramesCrossInBothDirections) {
    auto [a, b] = make_wire_pair(LoopbackConfig{.mac = kMacA}, LoopbackConfig{.mac = kMacB});
    EXPECT_TRUE(a->has_wire());
    EXPECT_TRUE(b->has_wire());
    const auto to_b = send_tags(*a, 1, 3);
    const auto to_a = send_tags(*b, 10, 12);
    a->flush();
    b->flush();
    EXPECT_EQ(drain_tags(*b), to_b);
    EXPECT_EQ(drain_tags(*a), to_a);
    EXPECT_EQ(a->wire_counters().delivered, 3u);
    EXPECT_EQ(b->counters().rx_frames, 3u);
}

TEST(WirePair, DropEveryNth) {
    auto [a, b] = make_wire_pair(LoopbackConfig{.mac = kMacA}, LoopbackConfig{.mac = kMacB});
    a->set_faults(WireFaults{.drop_every = 3});
    send_tags(*a, 1, 10);
    a->flush();
    EXPECT_EQ(drain_tags(*b), (std::vector<int>{1, 2, 4, 5, 7, 8, 10}));
    EXPECT_EQ(a->wire_counters().fault_dropped, 3u);
}

TEST(WirePair, DropWithProbabilityIsReproducibleFromTheSeed) {
    auto run = [](std::uint64_t seed) {
        auto [a, b] = make_wire_pair(LoopbackConfig{.mac = kMacA}, LoopbackConfig{.mac = kMacB});
        a->set_faults(WireFaults{.drop_probability = 0.25, .seed = seed});
        std::vector<int> got;
        for (int round = 0; round < 40; ++round) {
            send_tags(*a, 0, 99);
            a->flush();
            const auto tags = drain_tags(*b);
            got.insert(got.end(), tags.begin(), tags.end());
        }
        return got;
    };
    const auto first = run(7);
    EXPECT_EQ(first, run(7));
    EXPECT_NE(first, run(8));
    // 4000 frames at p = 0.25: 1000 expected, sigma ~27; +-150 is > 5 sigma.
    const auto dropped = static_cast<int>(4000 - first.size());
    EXPECT_GT(dropped, 850);
    EXPECT_LT(dropped, 1150);
}

TEST(WirePair, DuplicateEveryNth) {
    auto [a, b] = make_wire_pair(LoopbackConfig{.mac = kMacA}, LoopbackConfig{.mac = kMacB});
    a->set_faults(WireFaults{.duplicate_every = 2});
    send_tags(*a, 1, 4);
    a->flush();
    EXPECT_EQ(drain_tags(*b), (std::vector<int>{1, 2, 2, 3, 4, 4}));
    EXPECT_EQ(a->wire_counters().duplicated, 2u);
}

TEST(WirePair, ReorderHoldsAFrameUntilAfterTheNext) {
    auto [a, b] = make_wire_pair(LoopbackConfig{.mac = kMacA}, LoopbackConfig{.mac = kMacB});
    a->set_faults(WireFaults{.reorder_every = 2});
    send_tags(*a, 1, 4);
    a->flush();
    // 2 waits for 3; 4 has no successor in this flush and is held.
    EXPECT_EQ(drain_tags(*b), (std::vector<int>{1, 3, 2}));
    a->flush();
    EXPECT_EQ(drain_tags(*b), std::vector<int>{4}) << "a held frame leaves at the next flush";
    EXPECT_EQ(a->wire_counters().reordered, 2u);
}

TEST(WirePair, DropIfTargetsChosenFrames) {
    auto [a, b] = make_wire_pair(LoopbackConfig{.mac = kMacA}, LoopbackConfig{.mac = kMacB});
    a->set_faults(WireFaults{.drop_if = [](std::span<const std::uint8_t> f) { return f[14] % 2 == 0; }});
    send_tags(*a, 1, 6);
    a->flush();
    EXPECT_EQ(drain_tags(*b), (std::vector<int>{1, 3, 5}));
    a->set_faults({});
    send_tags(*a, 1, 2);
    a->flush();
    EXPECT_EQ(drain_tags(*b), (std::vector<int>{1, 2}));
}

TEST(WirePair, SendingToADestroyedPeerDropsAndCounts) {
    auto pair = make_wire_pair(LoopbackConfig{.mac = kMacA}, LoopbackConfig{.mac = kMacB});
    send_tags(*pair.b, 1, 2);
    pair.b->flush();  // two frames wait in a's receive queue
    pair.b.reset();
    send_tags(*pair.a, 1, 3);
    pair.a->flush();
    EXPECT_EQ(pair.a->wire_counters().rx_dropped, 3u);
    EXPECT_EQ(drain_tags(*pair.a), (std::vector<int>{1, 2}));
}

}  // namespace
}  // namespace uroce::net
