// The two-node fixture of the engine tests: one QP on each node, connected
// (RC, UC) or addressed through AHs (UD), and a loop that carries frames
// and advances a fake clock until a condition holds.
#pragma once

#include <gtest/gtest.h>

#include <iterator>

#include "engine_harness.h"
#include "mr/access_flags.h"

namespace uroce::engine::test {

constexpr std::uint32_t kMtu = 1024;
constexpr std::uint32_t kAllAccess =
    mr::Access::kLocalWrite | mr::Access::kRemoteWrite | mr::Access::kRemoteRead | mr::Access::kRemoteAtomic;

class TwoNodes : public ::testing::Test {
protected:
    explicit TwoNodes(bool ipv6 = false) : a_(wire_, 0, 1, ipv6), b_(wire_, 1, 0, ipv6) {}

    void make_qp(Node& n, TestQp& q, std::uint32_t qpn, qp::QpType type, std::uint32_t cq_handle) {
        q.qpn = qpn;
        q.sq_mem = make_wq(q.sq_entries, q.sq_stride, 4, 128);
        q.rq_mem = make_wq(q.rq_entries, q.rq_stride, 4, 0);
        q.cq_mem = make_cq(q.cq_entries);
        n.engine().add_cq(CqHandle{cq_handle}, ClientId{kOwner}, CqRing(q.cq(), q.cq_entries), -1, 0xC0FFEE);
        QpSetup s;
        s.qpn = qpn;
        s.owner = kOwner;
        s.pd = n.pd;
        s.type = type;
        s.send_cq = cq_handle;
        s.recv_cq = cq_handle;
        s.sq = WorkRing(q.sq(), q.sq_entries, q.sq_stride, 4, 128);
        s.rq = WorkRing(q.rq(), q.rq_entries, q.rq_stride, 4, 0);
        n.engine().add_qp(s);
    }

    qp::QpAttr rts_attr(const Node& peer, std::uint32_t peer_qpn) {
        qp::QpAttr a;
        a.state = qp::QpState::Rts;
        a.path_mtu = qp::Mtu::Mtu1024;
        a.dest_qp_num = peer_qpn;
        a.rq_psn = 0x100;
        a.sq_psn = 0x100;
        a.qp_access_flags = qp::QpAccess::kRemoteWrite | qp::QpAccess::kRemoteRead | qp::QpAccess::kRemoteAtomic;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.min_rnr_timer = 1;
        a.max_rd_atomic = 4;
        a.max_dest_rd_atomic = 4;
        a.qkey = 0x11111111;
        const auto& g = peer.gid();
        std::copy(g.begin(), g.end(), a.ah_attr.dgid.begin());
        a.ah_attr.is_global = true;
        a.ah_attr.hop_limit = 64;
        return a;
    }

    void connect(qp::QpType type = qp::QpType::Rc) {
        make_qp(a_, qa_, 0x11, type, 1);
        make_qp(b_, qb_, 0x22, type, 1);
        constexpr std::uint32_t all = qp::AttrMask::kState | qp::AttrMask::kAv | qp::AttrMask::kPathMtu |
                                      qp::AttrMask::kDestQpn | qp::AttrMask::kRqPsn | qp::AttrMask::kSqPsn |
                                      qp::AttrMask::kAccessFlags | qp::AttrMask::kTimeout |
                                      qp::AttrMask::kRetryCnt | qp::AttrMask::kRnrRetry |
                                      qp::AttrMask::kMinRnrTimer | qp::AttrMask::kMaxQpRdAtomic |
                                      qp::AttrMask::kMaxDestRdAtomic | qp::AttrMask::kQkey;
        a_.engine().modify_qp(Qpn{0x11}, rts_attr(b_, 0x22), all);
        b_.engine().modify_qp(Qpn{0x22}, rts_attr(a_, 0x11), all);
    }

    // Carries frames and polls both engines, 10 us of fake time per round,
    // until `done` holds; false if it never does within `rounds`.
    template <typename Pred>
    bool run_until(Pred done, int rounds = 200000) {
        for (int i = 0; i < rounds; ++i) {
            if (done()) {
                return true;
            }
            now_ += std::chrono::microseconds(10);
            step();
        }
        return done();
    }

    void step() {
        std::deque<std::pair<int, std::vector<std::uint8_t>>> batch;
        if (wire_.in_flight.size() <= wire_.deliver_per_step) {
            batch = std::move(wire_.in_flight);
            wire_.in_flight.clear();
        } else {
            const auto end = wire_.in_flight.begin() + static_cast<std::ptrdiff_t>(wire_.deliver_per_step);
            std::move(wire_.in_flight.begin(), end, std::back_inserter(batch));
            wire_.in_flight.erase(wire_.in_flight.begin(), end);
        }
        for (auto& [dest, frame] : batch) {
            const wire::ParseResult r = wire::parse_frame(frame);
            if (r.ok()) {
                (dest == 0 ? a_ : b_).engine().receive(r.packet, now_);
                ++wire_.delivered;
            }
        }
        a_.engine().poll(now_);
        b_.engine().poll(now_);
    }

    Wire wire_;
    Node a_;
    Node b_;
    TestQp qa_;
    TestQp qb_;
    Clock::time_point now_ = Clock::now();
};

inline uroce_sge sge_of(const void* p, std::uint32_t len, std::uint32_t lkey) {
    return uroce_sge{reinterpret_cast<std::uintptr_t>(p), len, lkey};
}

inline uroce_send_wqe send_wqe(WrOpcode op, std::uint64_t wr_id, std::uint32_t num_sge,
                               std::uint32_t flags = SendFlag::kSignaled) {
    uroce_send_wqe w{};
    w.wr_id = wr_id;
    w.opcode = static_cast<std::uint8_t>(op);
    w.num_sge = static_cast<std::uint8_t>(num_sge);
    w.send_flags = flags;
    return w;
}

inline void fill_pattern(std::vector<std::uint8_t>& v, std::uint32_t seed) {
    for (std::size_t i = 0; i < v.size(); ++i) {
        v[i] = static_cast<std::uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xFF);
    }
}

}  // namespace uroce::engine::test
