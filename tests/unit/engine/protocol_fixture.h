// The protocol fixture (eRPC style): one engine under test, a wire that
// records every frame it sends, and packets built with wire::build_frame
// and fed to it as past, in-order or future PSNs. Tests assert on the exact
// frames sent back (opcode, PSN, syndrome, MSN) and on the completions.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "engine_harness.h"
#include "wire/build.h"
#include "wire/opcode.h"

namespace uroce::engine::test {

// The opcode for a packet, looked up in the generated table (IBA table 38).
inline std::uint8_t opcode_for(wire::Transport t, wire::Operation op, wire::Segment seg, bool imm = false) {
    const std::optional<std::uint8_t> opcode = wire::find_opcode({t, op, seg, imm, false});
    EXPECT_TRUE(opcode.has_value());
    return opcode.value_or(0);
}

// One frame the engine sent, as the peer sees it.
struct SentFrame {
    wire::Operation operation = wire::Operation::None;
    wire::Segment segment = wire::Segment::None;
    std::uint32_t psn = 0;
    std::optional<wire::AckKind> ack;   // AETH: its kind
    std::uint8_t syndrome_value = 0;    // AETH: NAK code, credits or RNR timer
    std::uint32_t msn = 0;
    std::optional<std::uint64_t> atomic_original;
    bool ack_req = false;
    std::uint64_t read_va = 0;          // READ request: RETH
    std::uint32_t read_length = 0;
    std::vector<std::uint8_t> payload;
};

class Protocol : public ::testing::Test {
protected:
    static constexpr std::uint32_t kQpn = 0x22;      // the engine's QP
    static constexpr std::uint32_t kPeerQpn = 0x11;  // the peer's (ours, played by the test)
    static constexpr std::uint32_t kStartPsn = 0x100;
    static constexpr std::uint32_t kMtu = 1024;

    Protocol() : dut_(wire_, 1, 0) {}

    // The engine's QP in RTS towards the test's address; `tweak` edits its
    // attributes first.
    template <typename Tweak>
    void open(qp::QpType type, Tweak tweak) {
        type_ = type;
        q_.qpn = kQpn;
        q_.sq_mem = make_wq(q_.sq_entries, q_.sq_stride, 4, 128);
        q_.rq_mem = make_wq(q_.rq_entries, q_.rq_stride, 4, 0);
        q_.cq_mem = make_cq(q_.cq_entries);
        dut_.engine().add_cq(CqHandle{1}, ClientId{kOwner}, CqRing(q_.cq(), q_.cq_entries), -1, 0);
        QpSetup s;
        s.qpn = kQpn;
        s.owner = kOwner;
        s.pd = dut_.pd;
        s.type = type;
        s.send_cq = 1;
        s.recv_cq = 1;
        s.sq = WorkRing(q_.sq(), q_.sq_entries, q_.sq_stride, 4, 128);
        s.rq = WorkRing(q_.rq(), q_.rq_entries, q_.rq_stride, 4, 0);
        dut_.engine().add_qp(s);
        qp::QpAttr a;
        a.state = qp::QpState::Rts;
        a.path_mtu = qp::Mtu::Mtu1024;
        a.dest_qp_num = kPeerQpn;
        a.rq_psn = kStartPsn;
        a.sq_psn = kStartPsn;
        a.qp_access_flags = qp::QpAccess::kRemoteWrite | qp::QpAccess::kRemoteRead | qp::QpAccess::kRemoteAtomic;
        a.timeout = 14;  // 67 ms
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.min_rnr_timer = 1;  // 10 us
        a.max_rd_atomic = 4;
        a.max_dest_rd_atomic = 4;
        const wire::Gid peer = peer_gid();
        std::copy(peer.begin(), peer.end(), a.ah_attr.dgid.begin());
        a.ah_attr.is_global = true;
        a.ah_attr.hop_limit = 64;
        tweak(a);
        constexpr std::uint32_t all = qp::AttrMask::kState | qp::AttrMask::kAv | qp::AttrMask::kPathMtu |
                                      qp::AttrMask::kDestQpn | qp::AttrMask::kRqPsn | qp::AttrMask::kSqPsn |
                                      qp::AttrMask::kAccessFlags | qp::AttrMask::kTimeout |
                                      qp::AttrMask::kRetryCnt | qp::AttrMask::kRnrRetry |
                                      qp::AttrMask::kMinRnrTimer | qp::AttrMask::kMaxQpRdAtomic |
                                      qp::AttrMask::kMaxDestRdAtomic | qp::AttrMask::kQkey;
        dut_.engine().modify_qp(Qpn{kQpn}, a, all);
    }
    void open(qp::QpType type) {
        open(type, [](qp::QpAttr&) {});
    }

    static wire::Gid peer_gid() { return ipv4_gid(1); }
    wire::Transport transport() const {
        return type_ == qp::QpType::Uc ? wire::Transport::UC : wire::Transport::RC;
    }

    // A packet from the peer to the engine's QP, headers left to fill.
    wire::PacketFields packet(wire::Operation op, wire::Segment seg, std::uint32_t psn, bool ack_req = false,
                              bool imm = false) {
        wire::PacketFields f;
        f.eth.dst = {0x02, 0, 0, 0, 0, 2};
        f.eth.src = {0x02, 0, 0, 0, 0, 1};
        f.ip.version = wire::IpVersion::V4;
        f.ip.src = peer_gid();
        f.ip.dst = dut_.gid();
        f.bth.opcode = opcode_for(transport(), op, seg, imm);
        f.bth.dest_qp = kQpn;
        f.bth.psn = wire::Psn(psn);
        f.bth.ack_req = ack_req;
        f.ext.aeth.syndrome = wire::make_syndrome(wire::AckKind::Ack, 0x1F);
        return f;
    }

    // Builds the frame, parses it as the port would and hands it to the engine.
    void feed(const wire::PacketFields& f) {
        std::vector<std::uint8_t> frame(wire::frame_length(f));
        ASSERT_EQ(wire::build_frame(f, frame).status, wire::BuildStatus::Ok);
        const wire::ParseResult r = wire::parse_frame(frame);
        ASSERT_TRUE(r.ok());
        dut_.engine().receive(r.packet, now_);
    }

    // A SEND from the peer: `seg` of a message, `payload` bytes of `fill`.
    void feed_send(wire::Segment seg, std::uint32_t psn, bool ack_req, std::size_t bytes = 16,
                   std::uint8_t fill = 0x5A) {
        std::vector<std::uint8_t> data(bytes, fill);
        wire::PacketFields f = packet(wire::Operation::Send, seg, psn, ack_req);
        f.payload = data;
        feed(f);
    }

    void feed_read(std::uint32_t psn, std::uint64_t va, std::uint32_t rkey, std::uint32_t length) {
        wire::PacketFields f = packet(wire::Operation::RdmaReadRequest, wire::Segment::Only, psn);
        f.ext.reth = {va, rkey, length};
        feed(f);
    }

    void feed_fetch_add(std::uint32_t psn, std::uint64_t va, std::uint32_t rkey, std::uint64_t add) {
        wire::PacketFields f = packet(wire::Operation::FetchAdd, wire::Segment::Only, psn);
        f.ext.atomic_eth = {va, rkey, add, 0};
        feed(f);
    }

    // An ACK, NAK or RNR NAK from the peer for the engine's requests.
    void feed_ack(std::uint32_t psn, wire::AckKind kind, std::uint8_t value, std::uint32_t msn = 0) {
        wire::PacketFields f = packet(wire::Operation::Acknowledge, wire::Segment::Only, psn);
        f.ext.aeth = {wire::make_syndrome(kind, value), msn};
        feed(f);
    }

    void feed_read_response(wire::Segment seg, std::uint32_t psn, std::span<const std::uint8_t> data) {
        wire::PacketFields f = packet(wire::Operation::RdmaReadResponse, seg, psn);
        f.payload = data;
        feed(f);
    }

    void poll() { dut_.engine().poll(now_); }
    void advance(Clock::duration d) { now_ += d; }

    // Every frame the engine sent since the last call, in order.
    std::vector<SentFrame> sent() {
        std::vector<SentFrame> out;
        for (auto& [dest, frame] : wire_.in_flight) {
            const wire::ParseResult r = wire::parse_frame(frame);
            EXPECT_TRUE(r.ok());
            if (!r.ok()) {
                continue;
            }
            const wire::Packet& p = r.packet;
            EXPECT_TRUE(p.icrc_ok());
            EXPECT_EQ(p.dest_qp(), kPeerQpn);
            SentFrame s;
            s.operation = p.info().operation;
            s.segment = p.info().segment;
            s.psn = p.psn().value();
            s.ack_req = p.bth().ack_req();
            if (const wire::Aeth* a = p.aeth()) {
                s.ack = wire::ack_kind(a->syndrome);
                s.syndrome_value = wire::syndrome_value(a->syndrome);
                s.msn = a->msn.get();
            }
            if (const wire::AtomicAckEth* a = p.atomic_ack_eth()) {
                s.atomic_original = a->original.get();
            }
            if (const wire::Reth* reth = p.reth()) {
                s.read_va = reth->va.get();
                s.read_length = reth->dma_length.get();
            }
            s.payload.assign(p.payload().begin(), p.payload().end());
            out.push_back(std::move(s));
        }
        wire_.in_flight.clear();
        return out;
    }

    // Polls once and returns what went out.
    std::vector<SentFrame> poll_sent() {
        poll();
        return sent();
    }

    void post_recv(std::uint64_t wr_id, std::vector<std::uint8_t>& buffer) {
        const auto mr = dut_.reg(buffer.data(), buffer.size(), mr::Access::kLocalWrite);
        ASSERT_EQ(mr.error, 0);
        const uroce_sge s{reinterpret_cast<std::uintptr_t>(buffer.data()), static_cast<std::uint32_t>(buffer.size()),
                          mr.lkey};
        q_.post_recv(wr_id, std::span(&s, 1));
    }

    void post_send(WrOpcode op, std::uint64_t wr_id, std::vector<std::uint8_t>& buffer, std::uint64_t remote_va = 0,
                   std::uint32_t rkey = 0) {
        const auto mr = dut_.reg(buffer.data(), buffer.size(), mr::Access::kLocalWrite);
        ASSERT_EQ(mr.error, 0);
        uroce_send_wqe w{};
        w.wr_id = wr_id;
        w.opcode = static_cast<std::uint8_t>(op);
        w.num_sge = 1;
        w.send_flags = SendFlag::kSignaled;
        w.u.rdma.remote_addr = remote_va;
        w.u.rdma.rkey = rkey;
        const uroce_sge s{reinterpret_cast<std::uintptr_t>(buffer.data()), static_cast<std::uint32_t>(buffer.size()),
                          mr.lkey};
        q_.post_send(w, std::span(&s, 1));
    }

    const QueuePair& qp() { return *dut_.engine().find_qp(Qpn{kQpn}); }
    const EngineCounters& counters() { return dut_.engine().counters(); }

    Wire wire_;
    Node dut_;
    TestQp q_;
    qp::QpType type_ = qp::QpType::Rc;
    Clock::time_point now_ = Clock::now();
};

// Gtest-readable checks of one sent frame.
inline void expect_ack(const SentFrame& s, std::uint32_t psn, std::uint32_t msn) {
    EXPECT_EQ(s.operation, wire::Operation::Acknowledge);
    EXPECT_EQ(s.psn, psn);
    ASSERT_TRUE(s.ack.has_value());
    EXPECT_EQ(*s.ack, wire::AckKind::Ack);
    EXPECT_EQ(s.msn, msn);
}

inline void expect_nak(const SentFrame& s, std::uint32_t psn, wire::AckKind kind, std::uint8_t value) {
    EXPECT_EQ(s.operation, wire::Operation::Acknowledge);
    EXPECT_EQ(s.psn, psn);
    ASSERT_TRUE(s.ack.has_value());
    EXPECT_EQ(*s.ack, kind);
    EXPECT_EQ(s.syndrome_value, value);
}

}  // namespace uroce::engine::test
