// Ring geometry (device/ring_memory.h): entry counts, slot strides and ring
// sizes, the numbers the daemon and the provider must agree on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "device/ring_memory.h"

namespace uroce::device {
namespace {

TEST(RingEntries, PowerOfTwoAtLeastAskedAndOne) {
    EXPECT_EQ(ring_entries(0), 1u);
    EXPECT_EQ(ring_entries(1), 1u);
    EXPECT_EQ(ring_entries(2), 2u);
    EXPECT_EQ(ring_entries(3), 4u);
    EXPECT_EQ(ring_entries(100), 128u);
    EXPECT_EQ(ring_entries(128), 128u);
    EXPECT_EQ(ring_entries(129), 256u);
    EXPECT_EQ(ring_entries(kMaxRingEntries), kMaxRingEntries);
}

TEST(RingEntries, BeyondTheLargestRingIsZero) {
    EXPECT_EQ(ring_entries(kMaxRingEntries + 1), 0u);
    EXPECT_EQ(ring_entries(0xFFFFFFFFu), 0u);
}

TEST(SqStride, HeaderPlusTheLargerOfSgesAndInlineInCacheLines) {
    // No SGE, no inline: the 64-byte WQE header alone.
    EXPECT_EQ(sq_stride(0, 0), 64u);
    // 1 SGE: 64 + 16 = 80, rounded up to 128.
    EXPECT_EQ(sq_stride(1, 0), 128u);
    // 4 SGEs fill exactly one more line.
    EXPECT_EQ(sq_stride(4, 0), 128u);
    EXPECT_EQ(sq_stride(5, 0), 192u);
    // Inline rounds to 16 first: 1 byte takes 16, 64 + 16 -> 128.
    EXPECT_EQ(sq_stride(0, 1), 128u);
    EXPECT_EQ(sq_stride(0, 64), 128u);
    EXPECT_EQ(sq_stride(0, 65), 192u);
    // The larger of the two decides.
    EXPECT_EQ(sq_stride(2, 256), 320u);
    EXPECT_EQ(sq_stride(32, 256), 64u + 512u);
}

TEST(RqStride, HeaderPlusAtLeastOneSge) {
    EXPECT_EQ(rq_stride(0), 32u);
    EXPECT_EQ(rq_stride(1), 32u);
    EXPECT_EQ(rq_stride(2), 48u);
    EXPECT_EQ(rq_stride(32), 16u + 512u);
}

TEST(Geometry, SqAndRqCarryTheirLimits) {
    const WqGeometry sq = sq_geometry(100, 3, 40);
    EXPECT_EQ(sq.entries, 128u);
    EXPECT_EQ(sq.stride, 128u);  // 64 + max(48, 48)
    EXPECT_EQ(sq.max_sge, 3u);
    EXPECT_EQ(sq.max_inline, 40u);
    EXPECT_EQ(sq.bytes(), 192u + 128u * 128u);  // three-line header

    const WqGeometry rq = rq_geometry(0, 0);
    EXPECT_EQ(rq.entries, 1u);
    EXPECT_EQ(rq.stride, 32u);
    EXPECT_EQ(rq.max_sge, 0u);
    EXPECT_EQ(rq.max_inline, 0u);
    EXPECT_EQ(rq.bytes(), 192u + 32u);
}

TEST(Geometry, EveryStrideHoldsItsLargestWqe) {
    for (std::uint32_t sge = 0; sge <= 32; ++sge) {
        for (std::uint32_t inl : {0u, 1u, 15u, 16u, 17u, 100u, 256u}) {
            const std::uint32_t s = sq_stride(sge, inl);
            EXPECT_EQ(s % 64, 0u);
            EXPECT_GE(s, sizeof(uroce_send_wqe) + sge * sizeof(uroce_sge));
            EXPECT_GE(s, sizeof(uroce_send_wqe) + inl);
        }
        const std::uint32_t r = rq_stride(sge);
        EXPECT_EQ(r % 16, 0u);
        EXPECT_GE(r, sizeof(uroce_recv_wqe) + std::max(sge, 1u) * sizeof(uroce_sge));
    }
}

TEST(Geometry, CqRingAndRingOffsets) {
    EXPECT_EQ(cq_ring_bytes(1), 192u + 64u);
    EXPECT_EQ(cq_ring_bytes(1024), 192u + 1024u * 64u);
    EXPECT_EQ(next_ring_offset(0), 0u);
    EXPECT_EQ(next_ring_offset(1), 64u);
    EXPECT_EQ(next_ring_offset(96), 128u);
    EXPECT_EQ(next_ring_offset(128), 128u);
}

TEST(InitRings, HeadersDescribeTheRing) {
    uroce_wq_ring wq;
    std::memset(&wq, 0xA5, sizeof wq);
    init_wq_ring(wq, sq_geometry(8, 2, 64));
    EXPECT_EQ(wq.version, UROCE_RING_VERSION);
    EXPECT_EQ(wq.entries, 8u);
    EXPECT_EQ(wq.stride, 128u);
    EXPECT_EQ(wq.max_sge, 2u);
    EXPECT_EQ(wq.max_inline, 64u);
    EXPECT_EQ(wq.producer, 0u);
    EXPECT_EQ(wq.consumer, 0u);
    EXPECT_EQ(wq.doorbell_armed, 0u);
    EXPECT_EQ(wq.error, 0u);

    uroce_cq_ring cq;
    std::memset(&cq, 0xA5, sizeof cq);
    init_cq_ring(cq, 16);
    EXPECT_EQ(cq.version, UROCE_RING_VERSION);
    EXPECT_EQ(cq.entries, 16u);
    EXPECT_EQ(cq.producer, 0u);
    EXPECT_EQ(cq.consumer, 0u);
    EXPECT_EQ(cq.notify_request, 0u);
    EXPECT_EQ(cq.overrun, 0u);
}

}  // namespace
}  // namespace uroce::device
