// The ring registry (device/ring_registry.h): the rings made for CQs, QPs
// and SRQs, found by handle, kept alive by whoever holds them, released
// with their object or their client.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <memory>

#include "device/ring_registry.h"

namespace uroce::device {
namespace {

std::shared_ptr<CqRings> cq_of(std::uint32_t owner, std::uint32_t handle, std::uint32_t entries = 4) {
    std::shared_ptr<CqRings> cq;
    EXPECT_EQ(make_cq_rings(entries, cq), 0);
    cq->owner = owner;
    cq->handle = handle;
    return cq;
}

std::shared_ptr<QpRings> qp_of(std::uint32_t owner, std::uint32_t qpn, bool with_rq = true) {
    const WqGeometry sq = sq_geometry(8, 2, 32);
    const WqGeometry rq = rq_geometry(4, 3);
    std::shared_ptr<QpRings> qp;
    EXPECT_EQ(make_qp_rings(sq, with_rq ? &rq : nullptr, qp), 0);
    qp->owner = owner;
    qp->qpn = qpn;
    return qp;
}

TEST(MakeRings, CqRingHeaderAndSlots) {
    auto cq = cq_of(1, 5, 16);
    EXPECT_EQ(cq->entries, 16u);
    EXPECT_EQ(cq->memory.size(), cq_ring_bytes(16));
    EXPECT_EQ(static_cast<void*>(cq->header), cq->memory.data());
    EXPECT_EQ(cq->header->version, UROCE_RING_VERSION);
    EXPECT_EQ(cq->header->entries, 16u);
    EXPECT_EQ(reinterpret_cast<std::uint8_t*>(cq->slots()), cq->memory.data() + sizeof(uroce_cq_ring));
    EXPECT_EQ(cq->channel_fd, -1);
}

TEST(MakeRings, QpHoldsSqThenRqOnACacheLine) {
    auto qp = qp_of(1, 0x11);
    const WqGeometry sq = sq_geometry(8, 2, 32);
    const WqGeometry rq = rq_geometry(4, 3);
    EXPECT_EQ(static_cast<void*>(qp->sq.header), qp->memory.data());
    EXPECT_EQ(qp->rq_offset, next_ring_offset(sq.bytes()));
    EXPECT_EQ(qp->rq_offset % 64, 0u);
    EXPECT_EQ(static_cast<void*>(qp->rq.header), qp->memory.data() + qp->rq_offset);
    EXPECT_EQ(qp->memory.size(), qp->rq_offset + rq.bytes());
    EXPECT_EQ(qp->sq.header->entries, 8u);
    EXPECT_EQ(qp->sq.header->stride, sq.stride);
    EXPECT_EQ(qp->sq.header->max_sge, 2u);
    EXPECT_EQ(qp->sq.header->max_inline, 32u);
    EXPECT_EQ(qp->rq.header->entries, 4u);
    EXPECT_EQ(qp->rq.header->stride, rq.stride);
    EXPECT_EQ(qp->rq.header->max_sge, 3u);
    EXPECT_EQ(qp->sq.slots(), qp->memory.data() + sizeof(uroce_wq_ring));
    // The last RQ slot ends exactly at the end of the mapping.
    EXPECT_EQ(qp->rq.slots() + std::size_t{rq.entries} * rq.stride, qp->memory.data() + qp->memory.size());
}

TEST(MakeRings, QpWithAnSrqHasNoRq) {
    auto qp = qp_of(1, 0x12, false);
    EXPECT_FALSE(qp->rq.present());
    EXPECT_EQ(qp->rq_offset, 0u);
    EXPECT_EQ(qp->memory.size(), sq_geometry(8, 2, 32).bytes());
}

TEST(MakeRings, SrqRing) {
    std::shared_ptr<SrqRings> srq;
    ASSERT_EQ(make_srq_rings(rq_geometry(100, 2), srq), 0);
    EXPECT_EQ(srq->ring.header->entries, 128u);
    EXPECT_EQ(srq->ring.header->max_sge, 2u);
    EXPECT_EQ(srq->memory.size(), rq_geometry(100, 2).bytes());
}

TEST(RingRegistry, FindsWhatWasAddedByKind) {
    RingRegistry r;
    r.add(std::shared_ptr<const CqRings>(cq_of(1, 5)));
    r.add(std::shared_ptr<const QpRings>(qp_of(1, 5)));  // QPNs and handles are separate spaces
    EXPECT_NE(r.cq(5), nullptr);
    EXPECT_NE(r.qp(5), nullptr);
    EXPECT_EQ(r.srq(5), nullptr);
    EXPECT_EQ(r.cq(6), nullptr);
    EXPECT_EQ(r.counts().cqs, 1u);
    EXPECT_EQ(r.counts().qps, 1u);
    EXPECT_EQ(r.all_qps().size(), 1u);
}

TEST(RingRegistry, GenerationChangesWithEveryAddAndRemove) {
    RingRegistry r;
    const auto g0 = r.generation();
    r.add(std::shared_ptr<const CqRings>(cq_of(1, 5)));
    const auto g1 = r.generation();
    EXPECT_NE(g1, g0);
    EXPECT_TRUE(r.remove_cq(5));
    EXPECT_NE(r.generation(), g1);
    EXPECT_FALSE(r.remove_cq(5));
}

TEST(RingRegistry, AHolderKeepsTheRingsAfterRemoval) {
    RingRegistry r;
    r.add(std::shared_ptr<const QpRings>(qp_of(1, 0x11)));
    std::shared_ptr<const QpRings> held = r.qp(0x11);
    ASSERT_NE(held, nullptr);
    EXPECT_TRUE(r.remove_qp(0x11));
    EXPECT_EQ(r.qp(0x11), nullptr);
    // Still mapped: writing the header is fine for as long as it is held.
    held->sq.header->doorbell_armed = 1;
    EXPECT_EQ(held->sq.header->doorbell_armed, 1u);
}

TEST(RingRegistry, RemoveOwnerTakesOnlyThatClientsRings) {
    RingRegistry r;
    r.add(std::shared_ptr<const CqRings>(cq_of(1, 1)));
    r.add(std::shared_ptr<const CqRings>(cq_of(2, 2)));
    r.add(std::shared_ptr<const QpRings>(qp_of(1, 0x11)));
    r.add(std::shared_ptr<const QpRings>(qp_of(2, 0x12)));
    std::shared_ptr<SrqRings> srq;
    ASSERT_EQ(make_srq_rings(rq_geometry(4, 1), srq), 0);
    srq->owner = 1;
    srq->handle = 3;
    r.add(std::shared_ptr<const SrqRings>(srq));
    srq.reset();
    EXPECT_EQ(r.remove_owner(1), 3u);
    EXPECT_EQ(r.cq(1), nullptr);
    EXPECT_EQ(r.qp(0x11), nullptr);
    EXPECT_EQ(r.srq(3), nullptr);
    EXPECT_NE(r.cq(2), nullptr);
    EXPECT_NE(r.qp(0x12), nullptr);
}

TEST(RingRegistry, ACqsChannelFdIsClosedWithItsLastHolder) {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    RingRegistry r;
    {
        auto cq = cq_of(1, 7);
        cq->channel_fd = p[1];
        r.add(std::shared_ptr<const CqRings>(cq));
    }
    auto held = r.cq(7);
    r.remove_owner(1);
    EXPECT_GE(::fcntl(p[1], F_GETFD), 0);  // still held here
    held.reset();
    EXPECT_EQ(::fcntl(p[1], F_GETFD), -1);
    // The read end sees the writer gone.
    char c;
    EXPECT_EQ(::read(p[0], &c, 1), 0);
    ::close(p[0]);
}

}  // namespace
}  // namespace uroce::device
