// One table with a million MRs (default limits): keys beyond 2^20 entries,
// sampled checks, and a full teardown.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "mr_test_util.h"

namespace uroce::mr {
namespace {

using namespace test;

TEST(MrScale, OneMillionMrsRegisterCheckDeregister) {
    constexpr std::uint32_t kCount = 1u << 20;
    const auto start = std::chrono::steady_clock::now();
    PdTable pds;
    MrTable table(pds);
    const std::uint32_t pd = pds.alloc(kOwner).pd;
    // Address spaces are not consulted (none given), so the MRs can describe
    // distinct ranges without backing memory.
    constexpr std::uint64_t kBase = 0x10'0000'0000;
    auto addr_of_mr = [](std::uint32_t i) { return kBase + std::uint64_t{i} * 8192; };

    std::vector<std::uint32_t> keys(kCount);
    for (std::uint32_t i = 0; i < kCount; ++i) {
        const Registered r = table.reg_mr(make_req(pd, addr_of_mr(i), 4096, kLW | kRR));
        ASSERT_EQ(r.error, 0) << "MR " << i;
        keys[i] = r.lkey;
    }
    EXPECT_EQ(table.counts().mrs, kCount);
    EXPECT_EQ(key_index(keys.back()), kCount) << "indices run 1..2^20";

    {
        EpochGuard guard(table.epoch());
        for (std::uint32_t i = 0; i < kCount; i += 997) {
            RemoteRequest r;
            r.rkey = MrKey{keys[i]};
            r.pd = PdHandle{pd};
            r.qp_access = kQpAll;
            r.op = RemoteOp::Read;
            r.va = addr_of_mr(i) + 100;
            r.length = 8;
            const Translation t = table.check_remote(guard, r);
            ASSERT_EQ(t.status, CheckStatus::Ok) << "MR " << i;
            ASSERT_EQ(t.host_addr, addr_of_mr(i) + 100);
            ASSERT_EQ(t.desc->key(), keys[i]);
            // The neighbour's range is not this key's.
            r.va = addr_of_mr(i) + 8192;
            ASSERT_EQ(table.check_remote(guard, r).status, CheckStatus::RemoteOutOfRange);
        }
    }

    for (std::uint32_t i = 0; i < kCount; ++i) {
        ASSERT_EQ(table.dereg_mr(keys[i], kOwner), 0) << "MR " << i;
    }
    EXPECT_EQ(table.counts().mrs, 0u);
    for (std::uint32_t i = 0; i < kCount; i += 4099) {
        EXPECT_EQ(remote(table, keys[i], pd, RemoteOp::Read, addr_of_mr(i), 8).status, CheckStatus::RkeyInvalid);
    }
    EXPECT_EQ(pds.dealloc(pd, kOwner), 0);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    RecordProperty("seconds", std::to_string(seconds));
    std::printf("1M MRs registered, sampled and deregistered in %.2f s\n", seconds);
}

}  // namespace
}  // namespace uroce::mr
