// CaptureTap (tools/uroced/capture_tap.h): what a capture session's reader
// receives, the QP filter, lost records with a reader that does not read,
// and a reader that went away.
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "../random_packet.h"
#include "abi/control.h"
#include "capture_tap.h"
#include "log.h"

namespace uroce::daemon {
namespace {

std::vector<std::uint8_t> roce_frame(std::uint32_t dest_qp) {
    test::Rng rng(dest_qp);
    std::vector<std::uint8_t> payload;
    wire::PacketFields f = test::random_fields(rng, {}, payload);
    f.bth.dest_qp = dest_qp;
    std::vector<std::uint8_t> frame(wire::frame_length(f));
    EXPECT_EQ(wire::build_frame(f, frame).status, wire::BuildStatus::Ok);
    return frame;
}

struct Reader {
    UniqueFd ours;
    UniqueFd theirs;
    Reader() {
        int pair[2];
        EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
        ours.reset(pair[0]);
        theirs.reset(pair[1]);
    }
    // The next record: header, note, frame; nullopt when none is queued.
    std::optional<std::tuple<uroce_capture_record, std::string, std::vector<std::uint8_t>>> next() {
        std::vector<std::uint8_t> buf(1 << 16);
        const ssize_t n = ::recv(ours.get(), buf.data(), buf.size(), MSG_DONTWAIT);
        if (n <= 0) {
            return std::nullopt;
        }
        uroce_capture_record h{};
        std::memcpy(&h, buf.data(), sizeof(h));
        EXPECT_EQ(sizeof(h) + h.note_length + h.frame_length, static_cast<std::size_t>(n));
        std::string note(reinterpret_cast<const char*>(buf.data() + sizeof(h)), h.note_length);
        std::vector<std::uint8_t> frame(buf.begin() + static_cast<std::ptrdiff_t>(sizeof(h) + h.note_length),
                                        buf.begin() + n);
        return std::tuple{h, note, frame};
    }
};

class CaptureTapTest : public ::testing::Test {
protected:
    void SetUp() override { set_log_quiet(true); }
    void TearDown() override { set_log_quiet(false); }
    CaptureTap tap;
};

TEST_F(CaptureTapTest, InactiveUntilASessionStarts) {
    EXPECT_FALSE(tap.active());
    Reader r;
    std::uint32_t id = 0;
    ASSERT_EQ(tap.start(std::move(r.theirs), 7, std::nullopt, id), 0);
    EXPECT_TRUE(tap.active());
    EXPECT_FALSE(tap.stop(id, 8).has_value()) << "another connection's session";
    ASSERT_TRUE(tap.stop(id, 7).has_value());
    EXPECT_FALSE(tap.active());
}

TEST_F(CaptureTapTest, RefusesAStreamSocket) {
    int pair[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    UniqueFd keep(pair[0]);
    std::uint32_t id = 0;
    EXPECT_EQ(tap.start(UniqueFd(pair[1]), 1, std::nullopt, id), EINVAL);
    EXPECT_FALSE(tap.active());
}

TEST_F(CaptureTapTest, RecordsRoceFramesWithDirectionAndDropReason) {
    Reader r;
    std::uint32_t id = 0;
    ASSERT_EQ(tap.start(std::move(r.theirs), 1, std::nullopt, id), 0);
    const auto sent = roce_frame(0x11);
    const auto dropped = roce_frame(0x12);
    tap.record(CaptureDirection::Sent, sent);
    const std::vector<std::uint8_t> arp(60, 0xAB);
    tap.record(CaptureDirection::Sent, arp);  // not RoCE: left out
    tap.record_dropped(CaptureDirection::Received, dropped, "injected: drop rule 1");
    auto a = r.next();
    ASSERT_TRUE(a);
    EXPECT_EQ(std::get<0>(*a).direction, UROCE_CAPTURE_SENT);
    EXPECT_EQ(std::get<0>(*a).verdict, UROCE_CAPTURE_PASSED);
    EXPECT_EQ(std::get<1>(*a), "");
    EXPECT_EQ(std::get<2>(*a), sent);
    auto b = r.next();
    ASSERT_TRUE(b);
    EXPECT_EQ(std::get<0>(*b).direction, UROCE_CAPTURE_RECEIVED);
    EXPECT_EQ(std::get<0>(*b).verdict, UROCE_CAPTURE_DROPPED);
    EXPECT_EQ(std::get<1>(*b), "injected: drop rule 1");
    EXPECT_EQ(std::get<2>(*b), dropped);
    EXPECT_FALSE(r.next());
    const auto totals = tap.stop(id, 1);
    ASSERT_TRUE(totals);
    EXPECT_EQ(totals->frames_sent, 2u);
    EXPECT_EQ(totals->frames_lost, 0u);
}

TEST_F(CaptureTapTest, AReceivedFrameComesBeforeWhatItsHandlingSent) {
    Reader r;
    std::uint32_t id = 0;
    ASSERT_EQ(tap.start(std::move(r.theirs), 1, std::nullopt, id), 0);
    const auto request = roce_frame(0x21);
    const auto ack = roce_frame(0x22);
    tap.hold();
    tap.record(CaptureDirection::Sent, ack);
    tap.received(request, "");
    EXPECT_EQ(std::get<2>(*r.next()), request);
    EXPECT_EQ(std::get<2>(*r.next()), ack);
}

TEST_F(CaptureTapTest, QpFilterKeepsTheQpAndItsPeer) {
    Reader r;
    std::uint32_t id = 0;
    tap.set_peer_qp_lookup([](std::uint32_t qpn) -> std::optional<std::uint32_t> {
        return qpn == 0x40 ? std::optional<std::uint32_t>(0x99) : std::nullopt;
    });
    ASSERT_EQ(tap.start(std::move(r.theirs), 1, 0x40, id), 0);
    for (std::uint32_t qp : {0x40u, 0x41u, 0x99u, 0x42u}) {
        tap.record(CaptureDirection::Received, roce_frame(qp));
    }
    EXPECT_EQ(std::get<2>(*r.next()), roce_frame(0x40));
    EXPECT_EQ(std::get<2>(*r.next()), roce_frame(0x99));
    EXPECT_FALSE(r.next());
}

TEST_F(CaptureTapTest, AReaderThatDoesNotReadLosesRecordsAndNothingWaits) {
    Reader r;
    std::uint32_t id = 0;
    ASSERT_EQ(tap.start(std::move(r.theirs), 1, std::nullopt, id), 0);
    const auto frame = roce_frame(0x30);
    constexpr int kRecords = 200000;  // far more than the socket buffer holds
    for (int i = 0; i < kRecords; ++i) {
        tap.record(CaptureDirection::Sent, frame);
    }
    const auto totals = tap.stop(id, 1);
    ASSERT_TRUE(totals);
    EXPECT_GT(totals->frames_lost, 0u);
    EXPECT_GT(totals->frames_sent, 0u);
    EXPECT_EQ(totals->frames_sent + totals->frames_lost, static_cast<std::uint64_t>(kRecords));
}

TEST_F(CaptureTapTest, AReaderThatWentAwayEndsItsSession) {
    Reader r;
    std::uint32_t id = 0;
    ASSERT_EQ(tap.start(std::move(r.theirs), 1, std::nullopt, id), 0);
    r.ours.reset();  // the CLI was killed
    tap.record(CaptureDirection::Sent, roce_frame(0x50));  // EPIPE, never SIGPIPE (the test would die)
    EXPECT_FALSE(tap.active());
    const auto totals = tap.stop(id, 1);
    ASSERT_TRUE(totals) << "the totals stay until CAPTURE_STOP or the connection ends";
    EXPECT_EQ(totals->frames_sent, 0u);
}

}  // namespace
}  // namespace uroce::daemon
