// MrTable::for_each_mr, the control-path listing behind `uroce stats`: every
// live MR once, in key-index order, with what it registered; windows and
// relaxed-pool slots left out; paging by key index; early stop.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "mr_test_util.h"

namespace uroce::mr {
namespace {

using namespace test;

struct Seen {
    std::uint32_t key = 0;
    std::uint32_t pd = 0;
    std::uint32_t owner = 0;
    std::uint32_t access = 0;
    std::uint64_t host_base = 0;
    std::uint64_t length = 0;
};

class ForEachMr : public MrTest {
protected:
    std::vector<Seen> list(std::uint32_t first_index = 0) const {
        std::vector<Seen> out;
        table.for_each_mr(
            [&out](const Descriptor& d) {
                out.push_back({d.key(), d.pd, d.owner, d.access, d.host_base, d.length});
                return true;
            },
            first_index);
        return out;
    }
};

TEST_F(ForEachMr, EmptyTableVisitsNothing) { EXPECT_TRUE(list().empty()); }

TEST_F(ForEachMr, ListsEveryMrInKeyIndexOrderWithItsRegistration) {
    const std::uint32_t a = reg_ok(0, 4096, kLW);
    const std::uint32_t b = reg_ok(4096, 8192, kFull);
    const std::uint32_t pd2 = pds.alloc(kOtherOwner).pd;
    const Registered c = table.reg_mr(make_req(pd2, buf + 3 * 4096, 100, kRR | kLW, kOtherOwner));
    ASSERT_EQ(c.error, 0);

    const std::vector<Seen> seen = list();
    ASSERT_EQ(seen.size(), 3u);
    EXPECT_EQ(seen[0].key, a);
    EXPECT_EQ(seen[1].key, b);
    EXPECT_EQ(seen[2].key, c.lkey);
    for (std::size_t i = 1; i < seen.size(); ++i) {
        EXPECT_LT(key_index(seen[i - 1].key), key_index(seen[i].key));
    }
    EXPECT_EQ(seen[1].pd, pd);
    EXPECT_EQ(seen[1].owner, kOwner);
    EXPECT_EQ(seen[1].access, kFull);
    EXPECT_EQ(seen[1].host_base, buf + 4096);
    EXPECT_EQ(seen[1].length, 8192u);
    EXPECT_EQ(seen[2].pd, pd2);
    EXPECT_EQ(seen[2].owner, kOtherOwner);
    EXPECT_EQ(seen[2].host_base, buf + 3 * 4096);
    EXPECT_EQ(seen[2].length, 100u);
}

TEST_F(ForEachMr, LeavesOutWindowsAndRelaxedSlots) {
    const std::uint32_t mr = reg_ok(0, 4096, kFull | Access::kMwBind);
    ASSERT_EQ(table.alloc_mw(pd, kOwner, MwType::Type1).error, 0);
    ASSERT_EQ(table.alloc_mw(pd, kOwner, MwType::Type2).error, 0);
    PoolMemory m(4);
    RelaxedPoolConfig cfg;
    cfg.capacity = 4;
    int err = 0;
    ASSERT_NE(table.create_relaxed_pool(pd, kOwner, cfg, m.header, err), nullptr);

    const std::vector<Seen> seen = list();
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].key, mr);
}

TEST_F(ForEachMr, ShowsDeregistrationAndRereg) {
    const std::uint32_t a = reg_ok(0, 4096, kLW);
    const std::uint32_t b = reg_ok(4096, 4096, kLW);
    ASSERT_EQ(table.dereg_mr(a, kOwner), 0);
    RegRequest r = make_req(pd, buf + 8 * 4096, 2 * 4096, kLW);
    ASSERT_EQ(table.rereg_mr(b, rereg::kChangeTranslation, r), 0);

    const std::vector<Seen> seen = list();
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].key, b);
    EXPECT_EQ(seen[0].host_base, buf + 8 * 4096);
    EXPECT_EQ(seen[0].length, 2u * 4096);
}

TEST_F(ForEachMr, StartsAtAKeyIndexSoPagesFollowOneAnother) {
    std::vector<std::uint32_t> keys;
    for (int i = 0; i < 5; ++i) {
        keys.push_back(reg_ok(static_cast<std::uint64_t>(i) * 4096, 4096, kLW));
    }
    // The page after the second MR starts one index past it.
    const std::vector<Seen> rest = list(key_index(keys[1]) + 1);
    ASSERT_EQ(rest.size(), 3u);
    EXPECT_EQ(rest[0].key, keys[2]);
    EXPECT_EQ(rest[2].key, keys[4]);
    EXPECT_TRUE(list(key_index(keys[4]) + 1).empty());
}

TEST_F(ForEachMr, StopsWhenTheVisitorSaysSo) {
    for (int i = 0; i < 4; ++i) {
        reg_ok(static_cast<std::uint64_t>(i) * 4096, 4096, kLW);
    }
    int visits = 0;
    table.for_each_mr([&visits](const Descriptor&) { return ++visits < 2; });
    EXPECT_EQ(visits, 2);
}

}  // namespace
}  // namespace uroce::mr
