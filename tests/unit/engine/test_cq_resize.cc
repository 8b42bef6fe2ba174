// ibv_resize_cq on the daemon's side (engine/rings.h CqRing::move_unread_to):
// the CQEs the consumer has not taken go to the new ring oldest first, with
// a pending notify request; a new ring too small for them takes nothing.
#include <gtest/gtest.h>

#include <vector>

#include "engine/rings.h"

namespace uroce::engine::test {
namespace {

struct Ring {
    explicit Ring(std::uint32_t entries) : memory(sizeof(uroce_cq_ring) + entries * sizeof(uroce_cqe)) {
        header()->entries = entries;
        ring = CqRing(header(), entries);
    }
    uroce_cq_ring* header() { return reinterpret_cast<uroce_cq_ring*>(memory.data()); }
    uroce_cqe slot(std::uint32_t i) { return reinterpret_cast<uroce_cqe*>(header() + 1)[i & (header()->entries - 1)]; }

    alignas(64) std::vector<std::uint8_t> memory;
    CqRing ring;
};

uroce_cqe cqe(std::uint64_t id) {
    uroce_cqe c{};
    c.wr_id = id;
    return c;
}

TEST(CqResize, UnreadCqesMoveInOrderWithTheNotifyRequest) {
    Ring old(4);
    for (std::uint64_t id = 1; id <= 6; ++id) {
        if (id > 2) {
            old.header()->consumer = static_cast<std::uint32_t>(id - 3);  // the client polls behind
        }
        ASSERT_TRUE(old.ring.push(cqe(id)));
    }
    // Produced 6 (wrapping the 4-entry ring), consumed 3: 4, 5, 6 unread.
    old.header()->notify_request = (7u << 1) | 1u;
    Ring small(2);
    EXPECT_FALSE(old.ring.move_unread_to(small.ring));
    EXPECT_EQ(small.header()->producer, 0u);
    Ring next(8);
    ASSERT_TRUE(old.ring.move_unread_to(next.ring));
    EXPECT_EQ(next.header()->producer, 3u);
    EXPECT_EQ(next.slot(0).wr_id, 4u);
    EXPECT_EQ(next.slot(1).wr_id, 5u);
    EXPECT_EQ(next.slot(2).wr_id, 6u);
    EXPECT_EQ(next.header()->notify_request, (7u << 1) | 1u);
    // The new ring goes on from there.
    ASSERT_TRUE(next.ring.push(cqe(7)));
    EXPECT_EQ(next.slot(3).wr_id, 7u);
}

}  // namespace
}  // namespace uroce::engine::test
