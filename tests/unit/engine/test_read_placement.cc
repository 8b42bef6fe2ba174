// Where READ response data may land (IBA 9.7.5.2: the completer places a
// response only in the WQE whose PSN range holds it, at its offset in that
// WQE): never outside the READ's own local buffer, and for a READ the
// responder refuses, not at all. Found by dataflow_veth_faults
// (docs/fault-injection.md): a READ ending one byte past the peer's MR, asked
// for in two parts after a timeout had shrunk the window, had its first
// part's 1 KiB placed before the second part was refused.
#include <algorithm>

#include "engine_fixture.h"
#include "protocol_fixture.h"

namespace uroce::engine::test {
namespace {

// RC opcodes and where they sit in a frame (IPv4, no VLAN: BTH at 42, RETH after it).
constexpr std::uint8_t kReadRequest = 0x0C;
constexpr std::uint8_t kReadResponseOnly = 0x10;
constexpr std::size_t kBth = 42;
constexpr std::size_t kRethLength = kBth + 12 + 12;

std::uint32_t reth_length(std::span<const std::uint8_t> f) {
    return (std::uint32_t{f[kRethLength]} << 24) | (std::uint32_t{f[kRethLength + 1]} << 16) |
           (std::uint32_t{f[kRethLength + 2]} << 8) | f[kRethLength + 3];
}

std::size_t bytes_changed(const std::vector<std::uint8_t>& now, const std::vector<std::uint8_t>& before) {
    std::size_t changed = 0;
    for (std::size_t i = 0; i < now.size(); ++i) {
        changed += now[i] != before[i] ? 1 : 0;
    }
    return changed;
}

// A buffer whose middle (the region) is registered and guard bytes on both
// sides are not, like byte_check's arenas; filled with a pattern so any
// write shows.
struct Arena {
    static constexpr std::size_t kGuard = 256;
    explicit Arena(std::size_t region_len, std::uint32_t seed) : bytes(region_len + 2 * kGuard) {
        fill_pattern(bytes, seed);
    }
    std::uint8_t* region() { return bytes.data() + kGuard; }
    std::size_t region_len() const { return bytes.size() - 2 * kGuard; }
    std::vector<std::uint8_t> bytes;
};

// Two engines: A reads from B's MR.
class ReadPlacement : public TwoNodes {
protected:
    static constexpr std::size_t kRemoteLen = 8 * kMtu + 7;

    void SetUp() override {
        connect(qp::QpType::Rc);
        remote_mr_ = b_.reg(remote_.region(), remote_.region_len(), kAllAccess);
        local_mr_ = a_.reg(local_.region(), local_.region_len(), kAllAccess);
        control_mr_ = a_.reg(control_.data(), control_.size(), kAllAccess);
        ASSERT_EQ(remote_mr_.error, 0);
        ASSERT_EQ(local_mr_.error, 0);
        ASSERT_EQ(control_mr_.error, 0);
        wire_.filter = [this](std::span<const std::uint8_t> f) {
            if (f[kBth] == kReadRequest) {
                asked_.push_back(reth_length(f));
            }
            if (drop_next_ != 0 && f[kBth] == drop_next_) {
                drop_next_ = 0;
                return 0;
            }
            return 1;
        };
    }

    void post_read(std::uint64_t wr_id, void* local, std::uint32_t length, std::uint32_t lkey,
                   std::uint64_t remote_offset) {
        uroce_send_wqe rd = send_wqe(WrOpcode::RdmaRead, wr_id, 1);
        rd.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(remote_.region()) + remote_offset;
        rd.u.rdma.rkey = remote_mr_.rkey;
        const uroce_sge s = sge_of(local, length, lkey);
        qa_.post_send(rd, std::span(&s, 1));
    }

    // The next completion on A.
    uroce_cqe next_completion() {
        std::vector<uroce_cqe> got;
        EXPECT_TRUE(run_until([&] {
            got = qa_.poll();
            return !got.empty();
        }));
        EXPECT_EQ(got.size(), 1u);
        return got.empty() ? uroce_cqe{} : got[0];
    }

    // 8 bytes read into the control buffer with its only response lost: the
    // requester times out; its window drops to one packet and grows back to
    // the slow-start threshold of two (docs/congestion.md), below the
    // initial window of four.
    void read_control_after_a_timeout() {
        drop_next_ = kReadResponseOnly;
        post_read(1, control_.data(), 8, control_mr_.lkey, 0);
        const uroce_cqe c = next_completion();
        ASSERT_EQ(c.status, 0u);
        ASSERT_EQ(a_.engine().counters().timeouts, 1u);
        ASSERT_EQ(a_.engine().find_qp(Qpn{0x11})->window.packets(), CongestionWindow::kMinAfterLoss);
        ASSERT_TRUE(std::equal(control_.begin(), control_.begin() + 8, remote_.region()));
        asked_.clear();
    }

    Arena remote_{kRemoteLen, 7};
    Arena local_{kRemoteLen, 9};
    std::vector<std::uint8_t> control_ = std::vector<std::uint8_t>(64, 0);
    mr::Registered remote_mr_, local_mr_, control_mr_;
    std::vector<std::uint32_t> asked_;  // the DMA length of every READ request A sent
    std::uint8_t drop_next_ = 0;        // drop the next frame with this opcode (0: none)
};

// byte_check's "RDMA READ of MTU + 1 B ending one byte past the MR's end"
// whose request is lost: after the timeout the window is one packet, and
// the READ is asked for again whole (not its first packet alone, which the
// responder would have answered): refused with REMOTE_ACCESS_ERR, and not a
// byte changed anywhere.
TEST_F(ReadPlacement, AReadEndingPastThePeersMrAskedAgainChangesNoByte) {
    const std::vector<std::uint8_t> local_before = local_.bytes, remote_before = remote_.bytes;
    drop_next_ = kReadRequest;
    post_read(2, local_.region(), kMtu + 1, local_mr_.lkey, kRemoteLen - kMtu);
    const uroce_cqe c = next_completion();
    EXPECT_EQ(c.wr_id, 2u);
    EXPECT_EQ(c.status, static_cast<std::uint32_t>(WcStatus::RemAccessErr));
    EXPECT_EQ(bytes_changed(local_.bytes, local_before), 0u);
    EXPECT_EQ(bytes_changed(remote_.bytes, remote_before), 0u);
    EXPECT_EQ(a_.engine().counters().timeouts, 1u);
    ASSERT_EQ(asked_.size(), 2u);
    EXPECT_EQ(asked_[0], kMtu + 1);
    EXPECT_EQ(asked_[1], kMtu + 1);  // asked again from the start, to the end
}

// A READ of the initial window (4 packets) ending one byte past the peer's
// MR, on a QP whose window an earlier timeout left at two packets: one
// request for the whole READ, refused, and not a byte changed anywhere.
TEST_F(ReadPlacement, AReadEndingPastThePeersMrOnAShrunkWindowChangesNoByte) {
    read_control_after_a_timeout();
    const std::vector<std::uint8_t> local_before = local_.bytes, remote_before = remote_.bytes;
    constexpr std::uint32_t kLength = 3 * kMtu + 1;
    post_read(2, local_.region(), kLength, local_mr_.lkey, kRemoteLen - kLength + 1);
    const uroce_cqe c = next_completion();
    EXPECT_EQ(c.status, static_cast<std::uint32_t>(WcStatus::RemAccessErr));
    EXPECT_EQ(bytes_changed(local_.bytes, local_before), 0u);
    EXPECT_EQ(bytes_changed(remote_.bytes, remote_before), 0u);
    ASSERT_EQ(asked_.size(), 1u);
    EXPECT_EQ(asked_[0], kLength);  // the whole READ, though the window is two packets
}

// A READ longer than the initial window goes in parts (docs/congestion.md);
// the part reaching past the peer's MR is refused after earlier parts were
// placed (IBA leaves the local buffer of a WQE completed in error
// undefined). Their data lands where this READ asked for it and nowhere
// else: every byte outside its local buffer is unchanged, every byte inside
// is either unchanged or the peer's byte for that offset.
TEST_F(ReadPlacement, APartlyPlacedRefusedReadStaysInItsOwnBuffer) {
    read_control_after_a_timeout();
    const std::vector<std::uint8_t> local_before = local_.bytes;
    constexpr std::uint32_t kLength = 6 * kMtu + 1;
    constexpr std::size_t kAt = 100;  // the READ's local buffer in the region
    post_read(2, local_.region() + kAt, kLength, local_mr_.lkey, kRemoteLen - kLength + 1);
    const uroce_cqe c = next_completion();
    EXPECT_EQ(c.status, static_cast<std::uint32_t>(WcStatus::RemAccessErr));
    ASSERT_GT(asked_.size(), 1u);
    EXPECT_LT(asked_[0], kLength);  // in parts
    const std::size_t first = Arena::kGuard + kAt;
    for (std::size_t i = 0; i < local_.bytes.size(); ++i) {
        if (i < first || i >= first + kLength) {
            ASSERT_EQ(local_.bytes[i], local_before[i]) << "byte " << i << " outside the READ's buffer";
        } else {
            const std::uint8_t peer = remote_.region()[kRemoteLen - kLength + 1 + (i - first)];
            ASSERT_TRUE(local_.bytes[i] == local_before[i] || local_.bytes[i] == peer) << "byte " << i;
        }
    }
}

// The completer against responses that are not the next one expected, one
// packet at a time.
class StaleResponses : public Protocol {
protected:
    void SetUp() override { open(qp::QpType::Rc); }

    // A READ into the middle of `a` (the region is registered, the guards not).
    void post_read(std::uint64_t wr_id, Arena& a, std::uint64_t remote_va) {
        const auto mr = dut_.reg(a.region(), a.region_len(), mr::Access::kLocalWrite);
        ASSERT_EQ(mr.error, 0);
        uroce_send_wqe w{};
        w.wr_id = wr_id;
        w.opcode = static_cast<std::uint8_t>(WrOpcode::RdmaRead);
        w.num_sge = 1;
        w.send_flags = SendFlag::kSignaled;
        w.u.rdma.remote_addr = remote_va;
        w.u.rdma.rkey = 0x1234;
        const uroce_sge s{reinterpret_cast<std::uintptr_t>(a.region()), static_cast<std::uint32_t>(a.region_len()),
                          mr.lkey};
        q_.post_send(w, std::span(&s, 1));
    }

    static std::vector<std::uint8_t> data(std::size_t n, std::uint8_t fill) { return std::vector<std::uint8_t>(n, fill); }
};

// Two READs outstanding; duplicates of the first one's responses (a
// duplicated or reordered frame, or the answer to a repeated request) come
// while the second waits, and after it: dropped, each READ's buffer gets
// only its own responses (IBA 9.7.5.2: a response PSN is placed only in the
// WQE it belongs to, once).
TEST_F(StaleResponses, DuplicatesOfAnEarlierReadLandNowhere) {
    Arena first(2 * kMtu, 1), second(kMtu, 2);
    const std::vector<std::uint8_t> first_before = first.bytes, second_before = second.bytes;
    post_read(1, first, 0x10000);
    post_read(2, second, 0x20000);
    const auto out = poll_sent();
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[1].psn, kStartPsn + 2);
    feed_read_response(wire::Segment::First, kStartPsn, data(kMtu, 0x11));
    feed_read_response(wire::Segment::Last, kStartPsn + 1, data(kMtu, 0x12));
    // Stale copies of the first READ's responses with other bytes.
    feed_read_response(wire::Segment::First, kStartPsn, data(kMtu, 0xE1));
    feed_read_response(wire::Segment::Last, kStartPsn + 1, data(kMtu, 0xE2));
    feed_read_response(wire::Segment::Only, kStartPsn + 2, data(kMtu, 0x21));
    feed_read_response(wire::Segment::Only, kStartPsn + 2, data(kMtu, 0xE3));
    feed_read_response(wire::Segment::Last, kStartPsn + 1, data(kMtu, 0xE4));
    poll();
    const auto cqes = q_.poll();
    ASSERT_EQ(cqes.size(), 2u);
    EXPECT_EQ(cqes[0].wr_id, 1u);
    EXPECT_EQ(cqes[0].status, 0u);
    EXPECT_EQ(cqes[1].wr_id, 2u);
    EXPECT_EQ(cqes[1].status, 0u);
    std::vector<std::uint8_t> first_want = first_before, second_want = second_before;
    std::fill_n(first_want.begin() + Arena::kGuard, kMtu, 0x11);
    std::fill_n(first_want.begin() + Arena::kGuard + kMtu, kMtu, 0x12);
    std::fill_n(second_want.begin() + Arena::kGuard, kMtu, 0x21);
    EXPECT_TRUE(first.bytes == first_want);
    EXPECT_TRUE(second.bytes == second_want);
}

// A READ refused with a NAK (remote access error) completes in error and
// takes the QP to the error state: responses arriving after it, for its own
// PSNs or a later READ's, change nothing, and the later READ is flushed.
TEST_F(StaleResponses, NothingLandsAfterAReadIsRefused) {
    Arena first(2 * kMtu, 3), second(kMtu, 4);
    const std::vector<std::uint8_t> first_before = first.bytes, second_before = second.bytes;
    post_read(1, first, 0x10000);
    post_read(2, second, 0x20000);
    ASSERT_EQ(poll_sent().size(), 2u);
    feed_ack(kStartPsn, wire::AckKind::Nak, static_cast<std::uint8_t>(wire::NakCode::RemoteAccessError));
    feed_read_response(wire::Segment::First, kStartPsn, data(kMtu, 0xE1));
    feed_read_response(wire::Segment::Only, kStartPsn + 2, data(kMtu, 0xE2));
    poll();
    const auto cqes = q_.poll();
    ASSERT_EQ(cqes.size(), 2u);
    EXPECT_EQ(cqes[0].wr_id, 1u);
    EXPECT_EQ(cqes[0].status, static_cast<std::uint32_t>(WcStatus::RemAccessErr));
    EXPECT_EQ(cqes[1].wr_id, 2u);
    EXPECT_EQ(cqes[1].status, static_cast<std::uint32_t>(WcStatus::WrFlushErr));
    EXPECT_TRUE(first.bytes == first_before);
    EXPECT_TRUE(second.bytes == second_before);
}

}  // namespace
}  // namespace uroce::engine::test
