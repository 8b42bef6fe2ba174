// The RDMA sanitizer's bookkeeping (verbs_provider/sanitizer_tracker.h):
// each finding is reported for the bug it names, and not for what correct
// programs do (the pingpong and scratch-buffer idioms, device writes).
#include "sanitizer_tracker.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace uroce::provider::sanitizer {
namespace {

class TrackerTest : public ::testing::Test {
protected:
    TrackerTest()
        : tracker_([this](Finding f, const std::string& text) { reports_.push_back({f, text}); },
                   [this](std::uint64_t addr, std::span<std::uint8_t> out) {
                       if (unmapped_) {
                           return false;
                       }
                       std::memcpy(out.data(), reinterpret_cast<const void*>(addr), out.size());
                       return true;
                   }) {}

    ibv_sge sge(std::size_t offset, std::uint32_t length, std::uint32_t lkey = 0x100) {
        return ibv_sge{reinterpret_cast<std::uint64_t>(memory_.data() + offset), length, lkey};
    }
    PostedWork send(std::uint64_t wr_id, ibv_sge s, bool signaled = true) {
        PostedWork w;
        w.queue = QueueKey{QueueKey::Kind::Send, 7};
        w.qp_num = 7;
        w.wr_id = wr_id;
        w.verb = "SEND";
        w.use = DeviceUse::Reads;
        w.cq = signaled ? CqSlot{0xC0, 16} : CqSlot{};
        w.sges = {s};
        return w;
    }
    PostedWork read(std::uint64_t wr_id, ibv_sge s) {
        PostedWork w = send(wr_id, s);
        w.verb = "RDMA_READ";
        w.use = DeviceUse::Writes;
        w.is_read_or_atomic = true;
        return w;
    }
    PostedWork recv(std::uint64_t wr_id, ibv_sge s, std::uint32_t cq_capacity = 16) {
        PostedWork w;
        w.queue = QueueKey{QueueKey::Kind::Receive, 7};
        w.qp_num = 7;
        w.wr_id = wr_id;
        w.verb = "RECV";
        w.use = DeviceUse::Writes;
        w.cq = CqSlot{0xC1, cq_capacity};
        w.sges = {s};
        return w;
    }
    static ibv_wc completion(std::uint64_t wr_id, ibv_wc_opcode opcode, std::uint32_t byte_len = 0) {
        ibv_wc wc{};
        wc.wr_id = wr_id;
        wc.status = IBV_WC_SUCCESS;
        wc.opcode = opcode;
        wc.qp_num = 7;
        wc.byte_len = byte_len;
        return wc;
    }
    [[nodiscard]] std::vector<Finding> findings() const {
        std::vector<Finding> out;
        for (const auto& r : reports_) {
            out.push_back(r.first);
        }
        return out;
    }

    std::vector<std::uint8_t> memory_ = std::vector<std::uint8_t>(4096, 0x5A);
    bool unmapped_ = false;
    std::vector<std::pair<Finding, std::string>> reports_;
    Tracker tracker_;
};

TEST_F(TrackerTest, SendSourceChangedBeforeCompletionIsReportedWithTheOffset) {
    tracker_.posted(send(1, sge(0, 64)));
    memory_[10] = 0x11;
    tracker_.completed(completion(1, IBV_WC_SEND), 0xC0);
    ASSERT_EQ(findings(), std::vector{Finding::SendBufferChanged});
    EXPECT_NE(reports_[0].second.find("byte 10 was 0x5a, is 0x11"), std::string::npos) << reports_[0].second;
}

TEST_F(TrackerTest, SendSourceUnchangedOrChangedAfterCompletionIsClean) {
    tracker_.posted(send(1, sge(0, 64)));
    tracker_.completed(completion(1, IBV_WC_SEND), 0xC0);
    memory_[10] = 0x11;  // after its completion: the application's to change
    tracker_.posted(send(2, sge(0, 64)));
    tracker_.completed(completion(2, IBV_WC_SEND), 0xC0);
    EXPECT_TRUE(findings().empty());
}

TEST_F(TrackerTest, SignalledCompletionRetiresTheUnsignalledBeforeIt) {
    tracker_.posted(send(1, sge(0, 64), false));
    tracker_.posted(send(2, sge(64, 64), true));
    memory_[5] = 0x22;  // in WR 1's source, changed before WR 2 completed
    tracker_.completed(completion(2, IBV_WC_SEND), 0xC0);
    EXPECT_EQ(findings(), std::vector{Finding::SendBufferChanged});
}

TEST_F(TrackerTest, PingpongIdiomReceiveIntoTheSendSourceIsClean) {
    // ibv_rc_pingpong: receives and sends share one buffer; the reply lands
    // before the send's own completion is polled.
    tracker_.posted(recv(10, sge(0, 64)));
    tracker_.posted(recv(11, sge(0, 64)));
    tracker_.posted(send(1, sge(0, 64)));
    memory_[0] = 0x33;  // the device wrote the reply
    tracker_.completed(completion(1, IBV_WC_SEND), 0xC0);
    tracker_.completed(completion(10, IBV_WC_RECV, 64), 0xC1);
    EXPECT_TRUE(findings().empty());
}

TEST_F(TrackerTest, ReceiveBufferWrittenBeyondTheReceivedBytesIsReported) {
    tracker_.posted(recv(10, sge(0, 64)));
    memory_[40] = 0x44;  // the application, not the 16 bytes that arrived
    tracker_.completed(completion(10, IBV_WC_RECV, 16), 0xC1);
    ASSERT_EQ(findings(), std::vector{Finding::ReceiveBufferWritten});
    EXPECT_NE(reports_[0].second.find("byte 40"), std::string::npos) << reports_[0].second;
}

TEST_F(TrackerTest, PartiallyOverlappingReceivesAreReportedIdenticalOnesAreNot) {
    tracker_.posted(recv(10, sge(0, 64)));
    tracker_.posted(recv(11, sge(0, 64)));  // the scratch-buffer idiom
    EXPECT_TRUE(findings().empty());
    tracker_.posted(recv(12, sge(32, 64)));
    EXPECT_EQ(findings(), std::vector{Finding::OverlappingReceives});
}

TEST_F(TrackerTest, ReadTargetOverlappingASendSourceIsReported) {
    tracker_.posted(send(1, sge(0, 64)));
    tracker_.posted(read(2, sge(0, 64)));
    EXPECT_EQ(findings(), std::vector{Finding::DeviceWriteOverlap});
}

TEST_F(TrackerTest, DeregisteringAnMrInFlightIsReportedAfterCompletionItIsNot) {
    tracker_.posted(send(1, sge(0, 64, 0x200)));
    tracker_.deregistering(0x300);
    EXPECT_TRUE(findings().empty());
    tracker_.deregistering(0x200);
    EXPECT_EQ(findings(), std::vector{Finding::InFlightDeregistered});
    tracker_.completed(completion(1, IBV_WC_SEND), 0xC0);
    tracker_.deregistering(0x200);
    EXPECT_EQ(findings().size(), 1U);
}

TEST_F(TrackerTest, UnmappedSourceIsReported) {
    tracker_.posted(send(1, sge(0, 64)));
    unmapped_ = true;
    tracker_.completed(completion(1, IBV_WC_SEND), 0xC0);
    EXPECT_EQ(findings(), std::vector{Finding::BufferUnmapped});
}

TEST_F(TrackerTest, MoreWorkThanTheCqHoldsIsReportedOnce) {
    for (std::uint64_t i = 0; i < 4; ++i) {
        tracker_.posted(recv(i, sge(0, 64), 3));
    }
    tracker_.posted(recv(9, sge(0, 64), 3));
    EXPECT_EQ(findings(), std::vector{Finding::CqMayOverrun});
}

TEST_F(TrackerTest, PollingKeepsTheCqWithinItsSize) {
    for (std::uint64_t i = 0; i < 10; ++i) {
        tracker_.posted(recv(i, sge(0, 64), 3));
        tracker_.completed(completion(i, IBV_WC_RECV, 64), 0xC1);
    }
    EXPECT_TRUE(findings().empty());
}

TEST_F(TrackerTest, DestroyedQueueForgetsItsWork) {
    tracker_.posted(send(1, sge(0, 64, 0x200)));
    tracker_.queue_destroyed(QueueKey{QueueKey::Kind::Send, 7});
    tracker_.deregistering(0x200);
    EXPECT_TRUE(findings().empty());
}

}  // namespace
}  // namespace uroce::provider::sanitizer
