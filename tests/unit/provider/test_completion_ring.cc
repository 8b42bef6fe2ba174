// Reading completions (verbs_provider/completion_ring.h) from a CQ ring made
// the way uroced makes it, with the test playing the daemon: CQEs written
// into slots and published with producer, consumed in order, converted to
// ibv_wc field by field, slots handed back, notification requests.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <atomic>
#include <cerrno>
#include <thread>
#include <vector>

#include "completion_ring.h"
#include "ring_fixture.h"

namespace uroce::provider_test {
namespace {

using provider::CompletionRing;

class PollCq : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_EQ(device::make_cq_rings(8, rings_), 0);
        ASSERT_EQ(cq_.attach(rings_->header, rings_->memory.size()), 0);
    }

    // What the daemon does: write the slot, then publish producer.
    void produce(const uroce_cqe& cqe) {
        std::memcpy(&rings_->slots()[produced_ & 7], &cqe, sizeof cqe);
        ++produced_;
        std::atomic_ref<std::uint32_t>(rings_->header->producer).store(produced_, std::memory_order_release);
    }
    void produce_id(std::uint64_t id) {
        uroce_cqe c{};
        c.wr_id = id;
        produce(c);
    }

    std::shared_ptr<device::CqRings> rings_;
    CompletionRing cq_;
    std::uint32_t produced_ = 0;
};

TEST_F(PollCq, EmptyRingHasNothing) {
    ibv_wc wc[4];
    EXPECT_EQ(cq_.poll(4, wc), 0);
    EXPECT_EQ(cq_.poll(0, wc), 0);
    EXPECT_EQ(cq_.poll(-1, wc), -1);
    EXPECT_EQ(rings_->header->consumer, 0u);
}

TEST_F(PollCq, EveryFieldOfTheCqeReachesTheWc) {
    uroce_cqe c{};
    c.wr_id = 0x1122334455667788;
    c.status = IBV_WC_REM_ACCESS_ERR;
    c.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
    c.vendor_err = 0x77;
    c.byte_len = 4096;
    c.imm_data = htonl(0xFEEDF00D);
    c.qp_num = 0x11;
    c.src_qp = 0x22;
    c.wc_flags = IBV_WC_WITH_IMM | IBV_WC_GRH;
    c.pkey_index = 3;
    c.slid = 0x1234;
    c.sl = 5;
    c.dlid_path_bits = 6;
    produce(c);
    ibv_wc wc;
    std::memset(&wc, 0xFF, sizeof wc);
    ASSERT_EQ(cq_.poll(1, &wc), 1);
    EXPECT_EQ(wc.wr_id, 0x1122334455667788u);
    EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
    EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_EQ(wc.vendor_err, 0x77u);
    EXPECT_EQ(wc.byte_len, 4096u);
    EXPECT_EQ(wc.imm_data, htonl(0xFEEDF00D));
    EXPECT_EQ(wc.qp_num, 0x11u);
    EXPECT_EQ(wc.src_qp, 0x22u);
    EXPECT_EQ(wc.wc_flags, static_cast<unsigned>(IBV_WC_WITH_IMM | IBV_WC_GRH));
    EXPECT_EQ(wc.pkey_index, 3u);
    EXPECT_EQ(wc.slid, 0x1234u);
    EXPECT_EQ(wc.sl, 5u);
    EXPECT_EQ(wc.dlid_path_bits, 6u);
}

TEST_F(PollCq, OldestFirstAndSlotsHandedBack) {
    for (std::uint64_t id = 1; id <= 3; ++id) {
        produce_id(id);
    }
    ibv_wc wc[4];
    ASSERT_EQ(cq_.poll(2, wc), 2);
    EXPECT_EQ(wc[0].wr_id, 1u);
    EXPECT_EQ(wc[1].wr_id, 2u);
    EXPECT_EQ(rings_->header->consumer, 2u);
    ASSERT_EQ(cq_.poll(4, wc), 1);
    EXPECT_EQ(wc[0].wr_id, 3u);
    EXPECT_EQ(rings_->header->consumer, 3u);
    EXPECT_EQ(cq_.poll(4, wc), 0);
}

TEST_F(PollCq, WrapsAroundTheRing) {
    ibv_wc wc[8];
    std::uint64_t next_expected = 0;
    for (std::uint64_t id = 0; id < 100; ++id) {
        produce_id(id);
        if (id % 5 == 4) {
            const int n = cq_.poll(8, wc);
            ASSERT_EQ(n, 5);
            for (int i = 0; i < n; ++i) {
                EXPECT_EQ(wc[i].wr_id, next_expected++);
            }
        }
    }
    EXPECT_EQ(rings_->header->consumer, 100u);
}

TEST_F(PollCq, ABrokenProducerNeverYieldsMoreThanTheRing) {
    std::atomic_ref<std::uint32_t>(rings_->header->producer).store(1000, std::memory_order_release);
    std::vector<ibv_wc> wc(64);
    EXPECT_EQ(cq_.poll(64, wc.data()), 8);
}

TEST_F(PollCq, ConcurrentPollersTakeEachCompletionOnce) {
    constexpr int kTotal = 20000;
    std::atomic<int> taken{0};
    std::atomic<std::uint64_t> sum{0};
    std::atomic<bool> done{false};
    std::vector<std::thread> pollers;
    for (int t = 0; t < 3; ++t) {
        pollers.emplace_back([&] {
            ibv_wc wc[4];
            while (!done.load() || taken.load() < kTotal) {
                const int n = cq_.poll(4, wc);
                for (int i = 0; i < n; ++i) {
                    sum += wc[i].wr_id;
                }
                taken += n;
                if (taken.load() >= kTotal) {
                    break;
                }
            }
        });
    }
    for (int id = 1; id <= kTotal; ++id) {
        // The daemon never overwrites: it waits while the ring is full.
        while (produced_ - std::atomic_ref<std::uint32_t>(rings_->header->consumer).load(std::memory_order_acquire) >=
               8) {
            std::this_thread::yield();
        }
        produce_id(static_cast<std::uint64_t>(id));
    }
    done = true;
    for (auto& th : pollers) {
        th.join();
    }
    EXPECT_EQ(taken.load(), kTotal);
    EXPECT_EQ(sum.load(), std::uint64_t{kTotal} * (kTotal + 1) / 2);
}

TEST_F(PollCq, NotifyRequestsCarryANewSequenceAndTheSolicitedBit) {
    cq_.request_notify(false);
    EXPECT_EQ(rings_->header->notify_request, (1u << 1) | 0u);
    cq_.request_notify(true);
    EXPECT_EQ(rings_->header->notify_request, (2u << 1) | 1u);
    cq_.request_notify(false);
    EXPECT_EQ(rings_->header->notify_request, (3u << 1) | 0u);
}

TEST(AttachCompletionRing, RefusesRingsItCannotUse) {
    std::shared_ptr<device::CqRings> rings;
    ASSERT_EQ(device::make_cq_rings(4, rings), 0);
    uroce_cq_ring& h = *rings->header;
    CompletionRing cq;
    EXPECT_EQ(cq.attach(&h, rings->memory.size() - 1), EPROTO);
    h.entries = 6;
    EXPECT_EQ(cq.attach(&h, rings->memory.size()), EPROTO);
    h.entries = 4;
    h.version = 0;
    EXPECT_EQ(cq.attach(&h, rings->memory.size()), EPROTO);
    h.version = UROCE_RING_VERSION;
    EXPECT_EQ(cq.attach(&h, rings->memory.size()), 0);
    EXPECT_EQ(cq.entries(), 4u);
}

TEST_F(PollCq, ResetQpLeavesNoCompletionOfItsOwnAndKeepsTheOthersInOrder) {
    // Wrap the ring first so the kept CQEs cross its end.
    for (std::uint64_t i = 0; i < 6; ++i) {
        produce_id(i);
    }
    ibv_wc wc[8];
    ASSERT_EQ(cq_.poll(6, wc), 6);
    // QP 0x11 (reset) interleaved with QP 0x22 (kept).
    const std::uint32_t qpns[] = {0x11, 0x22, 0x11, 0x11, 0x22, 0x22, 0x11};
    for (std::uint64_t i = 0; i < 7; ++i) {
        uroce_cqe c{};
        c.wr_id = 100 + i;
        c.qp_num = qpns[i];
        produce(c);
    }
    EXPECT_EQ(cq_.discard_qp(0x11), 4u);
    EXPECT_EQ(cq_.discard_qp(0x11), 0u);
    ASSERT_EQ(cq_.poll(8, wc), 3);
    EXPECT_EQ(wc[0].wr_id, 101u);
    EXPECT_EQ(wc[1].wr_id, 104u);
    EXPECT_EQ(wc[2].wr_id, 105u);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(wc[i].qp_num, 0x22u);
    }
    // Every slot is the daemon's again.
    EXPECT_EQ(rings_->header->consumer, produced_);
    produce_id(200);
    ASSERT_EQ(cq_.poll(8, wc), 1);
    EXPECT_EQ(wc[0].wr_id, 200u);
}

}  // namespace
}  // namespace uroce::provider_test
