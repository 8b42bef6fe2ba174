// Frames built in the port's room (FrameSink::tx_room, net::Port::tx_room):
// the payload is read from client memory straight into the buffer the port
// sends, so the port need not copy the frame. SEND, WRITE, READ responses and
// atomics still arrive byte for byte when every room is scribbled over once
// its frame has gone, when the port refuses frames (the engine keeps its own
// copy, which needs neither the MR nor its pages any more), with loss and
// duplication, and when the room is too small for a full packet (the engine
// falls back to its own buffer).
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include "engine_fixture.h"

namespace uroce::engine::test {
namespace {

// A standard port's room: 1500-byte MTU, Ethernet header and one VLAN tag.
constexpr std::size_t kPortRoom = 1500 + 14 + 4;

class TxRoom : public TwoNodes {
protected:
    void SetUp() override {
        wire_.tx_room_bytes = kPortRoom;
        connect(qp::QpType::Rc);
    }

    // Posts a SEND, a WRITE and a READ of `size` bytes on A (B's buffer the
    // target, read back into `back`) and runs until all complete.
    void send_write_read(std::uint32_t size, std::uint32_t seed) {
        std::vector<std::uint8_t> src(size), sent(size, 0), dst(size, 0), back(size, 0);
        fill_pattern(src, seed);
        const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
        const auto backmr = a_.reg(back.data(), back.size(), kAllAccess);
        const auto sentmr = b_.reg(sent.data(), sent.size(), kAllAccess);
        const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
        const uroce_sge r = sge_of(sent.data(), size, sentmr.lkey);
        qb_.post_recv(100, std::span(&r, 1));
        const uroce_sge s = sge_of(src.data(), size, smr.lkey);
        qa_.post_send(send_wqe(WrOpcode::Send, 1, 1), std::span(&s, 1));
        uroce_send_wqe wr = send_wqe(WrOpcode::RdmaWrite, 2, 1);
        wr.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data());
        wr.u.rdma.rkey = dmr.rkey;
        qa_.post_send(wr, std::span(&s, 1));
        uroce_send_wqe rd = send_wqe(WrOpcode::RdmaRead, 3, 1);
        rd.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data());
        rd.u.rdma.rkey = dmr.rkey;
        const uroce_sge bs = sge_of(back.data(), size, backmr.lkey);
        qa_.post_send(rd, std::span(&bs, 1));
        std::vector<uroce_cqe> a, b;
        ASSERT_TRUE(run_until([&] {
            for (auto& e : qa_.poll()) a.push_back(e);
            for (auto& e : qb_.poll()) b.push_back(e);
            return a.size() == 3 && b.size() == 1;
        }));
        for (std::size_t i = 0; i < a.size(); ++i) {
            EXPECT_EQ(a[i].status, 0u) << i;
        }
        EXPECT_EQ(b[0].status, 0u);
        EXPECT_EQ(b[0].byte_len, size);
        EXPECT_EQ(sent, src) << "SEND";
        EXPECT_EQ(dst, src) << "WRITE";
        EXPECT_EQ(back, src) << "READ response";
    }
};

TEST_F(TxRoom, SendWriteAndReadAreBuiltInTheRoomAndArriveIntact) {
    for (std::uint32_t size : {1u, kMtu - 1, kMtu, 5 * kMtu + 3, 65536u}) {
        SCOPED_TRACE(size);
        const std::uint64_t before = wire_.built_in_room;
        send_write_read(size, size);
        // Every frame went from the room: the requests, the READ responses
        // (B's) and the ACKs.
        const std::uint64_t packets = (size + kMtu - 1) / kMtu;
        EXPECT_GE(wire_.built_in_room - before, 3 * packets);
    }
    EXPECT_EQ(wire_.built_in_room, a_.engine().counters().tx_packets + b_.engine().counters().tx_packets);
}

TEST_F(TxRoom, AtomicsUseTheRoom) {
    alignas(8) std::uint64_t target = 40;
    alignas(8) std::uint64_t original = 0;
    const auto tmr = b_.reg(&target, sizeof target, kAllAccess);
    const auto omr = a_.reg(&original, sizeof original, kAllAccess);
    uroce_send_wqe w = send_wqe(WrOpcode::AtomicFetchAndAdd, 9, 1);
    w.u.atomic.remote_addr = reinterpret_cast<std::uintptr_t>(&target);
    w.u.atomic.rkey = tmr.rkey;
    w.u.atomic.compare_add = 2;
    const uroce_sge s = sge_of(&original, sizeof original, omr.lkey);
    qa_.post_send(w, std::span(&s, 1));
    std::vector<uroce_cqe> a;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        return !a.empty();
    }));
    EXPECT_EQ(a[0].status, 0u);
    EXPECT_EQ(original, 40u);
    EXPECT_EQ(target, 42u);
    EXPECT_GE(wire_.built_in_room, 2u);  // the request and its response
}

TEST_F(TxRoom, RefusedFramesAreKeptAsCopiesAndStillArrive) {
    // The port refuses every third frame: the engine holds a copy of a frame
    // built in the room, and the room (still lent) is used for the next one.
    std::uint64_t offered = 0;
    wire_.refuse = [&offered](int, std::span<const std::uint8_t>) { return ++offered % 3 == 0; };
    send_write_read(20 * kMtu + 5, 7);
    EXPECT_GT(wire_.refused, 0u);
    EXPECT_GT(a_.engine().counters().tx_deferred, 0u);
    EXPECT_GT(wire_.built_in_room, 0u);
}

// With nothing to read it (the lone loopback port), a frame built in the
// room goes without its ICRC; one the port refused is kept as a copy, which
// is checked when it goes later, so it gets its ICRC first.
TEST_F(TxRoom, WithTheIcrcUnreadRoomFramesGoWithoutOneAndKeptCopiesWithOne) {
    wire_.icrc_unread = true;
    int offered = 0;
    wire_.refuse = [&offered](int, std::span<const std::uint8_t>) { return ++offered % 3 == 0; };
    send_write_read(20000, 11);
    EXPECT_GT(wire_.refused, 0u);
    EXPECT_GT(wire_.room_frames_without_icrc, 0u);
    EXPECT_EQ(wire_.copies_with_bad_icrc, 0u);
}

TEST_F(TxRoom, AFrameWaitingToGoNeedsNeitherTheMrNorItsMemory) {
    // A WRITE is built in the room while the port is full; the engine keeps
    // its copy. The source MR is deregistered and its pages unmapped before
    // the port takes the frame: what arrives is what was there at the post,
    // and nothing reads the unmapped pages (the WRITE completes).
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    void* mapped = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mapped, MAP_FAILED);
    auto* src = static_cast<std::uint8_t*>(mapped);
    constexpr std::uint32_t kSize = 600;  // one packet
    std::vector<std::uint8_t> expected(kSize), dst(kSize, 0);
    fill_pattern(expected, 11);
    std::copy(expected.begin(), expected.end(), src);
    const auto smr = a_.reg(src, kSize, kAllAccess);
    const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
    bool port_full = true;
    wire_.refuse = [&port_full](int sender, std::span<const std::uint8_t>) { return port_full && sender == 0; };
    uroce_send_wqe wr = send_wqe(WrOpcode::RdmaWrite, 5, 1);
    wr.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data());
    wr.u.rdma.rkey = dmr.rkey;
    const uroce_sge s = sge_of(src, kSize, smr.lkey);
    qa_.post_send(wr, std::span(&s, 1));
    ASSERT_TRUE(run_until([&] { return wire_.refused > 0; }));
    EXPECT_EQ(wire_.built_in_room, 0u) << "the refused frame was not sent from the room";
    EXPECT_EQ(a_.mrs().dereg_mr(smr.lkey, kOwner), 0);
    ASSERT_EQ(::munmap(mapped, page), 0);
    port_full = false;
    std::vector<uroce_cqe> a;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        return !a.empty();
    }));
    EXPECT_EQ(a[0].status, 0u);
    EXPECT_EQ(dst, expected);
    EXPECT_EQ(a_.engine().counters().dma_faults, 0u);
}

TEST_F(TxRoom, LossAndDuplicationStillDeliverEveryByte) {
    std::mt19937 rng(2024);
    wire_.filter = [&rng](std::span<const std::uint8_t>) {
        const auto r = rng() % 100;
        return r < 5 ? 0 : r < 8 ? 2 : 1;  // 5% lost, 3% duplicated
    };
    send_write_read(64 * kMtu + 11, 3);
    EXPECT_GT(a_.engine().counters().retransmits, 0u);
}

TEST_F(TxRoom, ARoomTooSmallForAPacketIsNotUsedForIt) {
    // Room for headers and 100 bytes: full packets are built in the engine's
    // own buffer, the short ones (ACKs, the last packet) in the room.
    wire_.tx_room_bytes = 14 + 20 + 8 + 12 + 16 + 100 + 7;
    const std::uint64_t before_a = a_.engine().counters().tx_packets;
    send_write_read(3 * kMtu + 50, 5);
    const std::uint64_t sent_a = a_.engine().counters().tx_packets - before_a;
    EXPECT_GT(wire_.built_in_room, 0u);
    EXPECT_LT(wire_.built_in_room, sent_a + b_.engine().counters().tx_packets);
}

}  // namespace
}  // namespace uroce::engine::test
