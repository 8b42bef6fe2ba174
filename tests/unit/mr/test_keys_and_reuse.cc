// Keys: index << 8 | key byte; the byte changes on every reuse of an entry,
// so a key from an earlier registration never names a later one.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <set>
#include <vector>

#include "mr/keys.h"
#include "mr/relaxed_client.h"
#include "mr_test_util.h"

namespace uroce::mr {
namespace {

using namespace test;

TEST(Keys, Layout) {
    EXPECT_EQ(make_key(0x123456, 0x78), 0x12345678u);
    EXPECT_EQ(key_index(0x12345678), 0x123456u);
    EXPECT_EQ(key_byte(0x12345678), 0x78u);
    EXPECT_EQ(make_key(kMaxIndex, 0xFF), 0xFFFFFFFFu);
    EXPECT_EQ(kMaxIndex, 0xFFFFFFu);
    for (std::uint32_t k : {0u, 1u, 0xFFu, 0x100u, 0xDEADBEEFu, 0xFFFFFFFFu}) {
        EXPECT_EQ(make_key(key_index(k), key_byte(k)), k);
    }
}

class KeysTest : public MrTest {};

TEST_F(KeysTest, LkeyEqualsRkeyAndKeysAreDistinct) {
    std::set<std::uint32_t> keys;
    std::set<std::uint32_t> indices;
    for (int i = 0; i < 64; ++i) {
        const Registered r = reg(buf, 4096, kLW | kRR);
        ASSERT_EQ(r.error, 0);
        EXPECT_EQ(r.lkey, r.rkey);
        EXPECT_NE(key_index(r.lkey), 0u) << "index 0 is never used";
        EXPECT_TRUE(keys.insert(r.lkey).second);
        EXPECT_TRUE(indices.insert(key_index(r.lkey)).second);
    }
}

TEST_F(KeysTest, ReuseOfAnEntryChangesTheKeyByte) {
    const std::uint32_t k1 = reg_ok(0, 4096, kLW | kRR);
    ASSERT_EQ(table.dereg_mr(k1, kOwner), 0);
    const std::uint32_t k2 = reg_ok(0, 4096, kLW | kRR);
    ASSERT_EQ(key_index(k2), key_index(k1)) << "the freed entry is reused";
    EXPECT_NE(key_byte(k2), key_byte(k1));
    EXPECT_NE(k2, k1);

    // The old key names nothing, locally or remotely; the new one works.
    EXPECT_EQ(local(table, k1, pd, buf, 8, false).status, CheckStatus::LkeyInvalid);
    EXPECT_EQ(rd(k1, buf, 8).status, CheckStatus::RkeyInvalid);
    EXPECT_EQ(local(table, k2, pd, buf, 8, false).status, CheckStatus::Ok);
    EXPECT_EQ(rd(k2, buf, 8).status, CheckStatus::Ok);
    // Nor can the old key deregister the new registration.
    EXPECT_EQ(table.dereg_mr(k1, kOwner), EINVAL);
    EXPECT_EQ(table.counts().mrs, 1u);
}

TEST_F(KeysTest, KeyByteChangesOnEveryReuseAcrossTheWrap) {
    std::uint32_t prev = reg_ok(0, 4096, kLW | kRR);
    std::vector<std::uint32_t> seen{prev};
    for (int i = 0; i < 600; ++i) {
        ASSERT_EQ(table.dereg_mr(prev, kOwner), 0);
        const std::uint32_t next = reg_ok(0, 4096, kLW | kRR);
        ASSERT_EQ(key_index(next), key_index(prev));
        ASSERT_NE(key_byte(next), key_byte(prev)) << "reuse " << i;
        ASSERT_EQ(rd(prev, buf, 8).status, CheckStatus::RkeyInvalid) << "reuse " << i;
        seen.push_back(next);
        prev = next;
    }
    // Within 255 reuses no byte repeats: every earlier key of the entry fails.
    const std::set<std::uint32_t> first(seen.begin(), seen.begin() + 256);
    EXPECT_EQ(first.size(), 256u);
}

TEST_F(KeysTest, WindowsAndMrsShareTheIndexSpaceWithFreshBytes) {
    const KeyResult mw = table.alloc_mw(pd, kOwner, MwType::Type1);
    ASSERT_EQ(mw.error, 0);
    ASSERT_EQ(table.dealloc_mw(mw.key, kOwner), 0);
    const std::uint32_t mr = reg_ok(0, 4096, kLW | kRR);
    EXPECT_EQ(key_index(mr), key_index(mw.key));
    EXPECT_NE(mr, mw.key);
    EXPECT_EQ(rd(mw.key, buf, 8).status, CheckStatus::RkeyInvalid);
    EXPECT_EQ(rd(mr, buf, 8).status, CheckStatus::Ok);
}

TEST_F(KeysTest, RkeyWithoutRemoteRightIsRefusedRemotelyButWorksLocally) {
    const std::uint32_t key = reg_ok(0, 4096, kLW);
    EXPECT_EQ(local(table, key, pd, buf, 4096, true).status, CheckStatus::Ok);
    EXPECT_EQ(rd(key, buf, 8).status, CheckStatus::RemoteAccessNotGranted);
    EXPECT_EQ(wr(key, buf, 8).status, CheckStatus::RemoteAccessNotGranted);
    EXPECT_EQ(atomic(key, buf).status, CheckStatus::RemoteAccessNotGranted);
}

// A relaxed pool's entries go back to the free list when the pool is
// destroyed; an MR that reuses one must not answer to a key the pool handed
// out for the slot (whose key byte the pool, not the entry, kept).
TEST_F(KeysTest, MrReusingADestroyedPoolsEntryGetsAKeyNoSlotHadEver) {
    PoolMemory mem(1);
    RelaxedPoolConfig cfg;
    cfg.capacity = 1;
    int err = 0;
    RelaxedPool* pool = table.create_relaxed_pool(pd, kOwner, cfg, mem.header, err);
    ASSERT_EQ(err, 0);
    ASSERT_NE(pool, nullptr);
    RelaxedClient client(mem.header);

    // Cycle the slot a few times so its key byte moves away from the start.
    std::vector<std::uint32_t> slot_keys;
    for (int i = 0; i < 4; ++i) {
        const RelaxedRegistration r = client.reg(buf, 4096, kLW | kRR, 1);
        ASSERT_EQ(r.error, 0);
        slot_keys.push_back(r.key);
        ASSERT_EQ(client.dereg(r.key, 2), 0);
        ASSERT_EQ(pool->flush(), 1u);
    }
    const RelaxedRegistration last = client.reg(buf, 4096, kLW | kRR, 3);
    ASSERT_EQ(last.error, 0);
    slot_keys.push_back(last.key);
    ASSERT_EQ(rd(last.key, buf, 8).status, CheckStatus::Ok);

    ASSERT_EQ(table.destroy_relaxed_pool(pool, kOwner), 0);
    for (std::uint32_t k : slot_keys) {
        EXPECT_EQ(rd(k, buf, 8).status, CheckStatus::RkeyInvalid);
    }

    // Another owner registers into the freed entry: none of the pool's keys
    // may reach the new MR.
    const std::uint32_t other_pd = pds.alloc(kOtherOwner).pd;
    const Registered r = table.reg_mr(make_req(other_pd, buf + 4096, 4096, kLW | kRR | kRW, kOtherOwner));
    ASSERT_EQ(r.error, 0);
    ASSERT_EQ(key_index(r.lkey), key_index(last.key)) << "the pool's entry is reused";
    for (std::uint32_t k : slot_keys) {
        EXPECT_NE(r.lkey, k) << "a stale relaxed key names the new MR";
        EXPECT_EQ(remote(table, k, other_pd, RemoteOp::Read, buf + 4096, 8).status, CheckStatus::RkeyInvalid);
    }
}

}  // namespace
}  // namespace uroce::mr
