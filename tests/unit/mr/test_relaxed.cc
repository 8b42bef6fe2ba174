// Relaxed (FMR-style) MRs: page rounding, deregistration that only marks,
// batched invalidation (watermark, timer, flush), stale-access reports,
// EAGAIN / ENOMEM, and a client that writes garbage into the shared pool.
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "mr/relaxed_client.h"
#include "mr/relaxed_pool.h"
#include "mr_test_util.h"

namespace uroce::mr {
namespace {

using namespace test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A fixed point far from the clock's epoch, so "since the last sweep" is
// measured only from the times the tests pass.
const Clock::time_point kT0 = Clock::time_point{} + std::chrono::hours(1000);

class Relaxed : public MrTest {
protected:
    void make_pool(std::uint32_t capacity, std::uint32_t watermark = 1000,
                   std::chrono::nanoseconds after = 10ms, std::size_t max_reports = 64) {
        mem = std::make_unique<PoolMemory>(capacity);
        RelaxedPoolConfig cfg;
        cfg.capacity = capacity;
        cfg.dirty_watermark = watermark;
        cfg.invalidate_after = after;
        cfg.max_reports = max_reports;
        int err = -1;
        pool = table.create_relaxed_pool(pd, kOwner, cfg, mem->header, err);
        ASSERT_EQ(err, 0);
        ASSERT_NE(pool, nullptr);
        client = std::make_unique<RelaxedClient>(mem->header);
        // The first poll sweeps (nothing) and starts the timer at kT0.
        ASSERT_EQ(pool->poll(kT0), 0u);
    }
    RelaxedRegistration reg_relaxed(std::uint64_t addr, std::uint64_t length, std::uint32_t access = kFull) {
        return client->reg(addr, length, access, ++now_ns);
    }
    std::uint32_t slot_of(std::uint32_t key) const { return key_index(key) - pool->base_index(); }

    std::unique_ptr<PoolMemory> mem;
    RelaxedPool* pool = nullptr;
    std::unique_ptr<RelaxedClient> client;
    std::uint64_t now_ns = 1000;
};

TEST_F(Relaxed, PoolCreationFillsTheSharedHeader) {
    make_pool(8);
    const uroce_relaxed_pool_header* h = mem->header;
    EXPECT_EQ(h->version, UROCE_RELAXED_ABI_VERSION);
    EXPECT_EQ(h->capacity, 8u);
    EXPECT_EQ(h->page_size, 4096u);
    EXPECT_EQ(h->base_index, pool->base_index());
    for (std::uint32_t i = 0; i < 8; ++i) {
        EXPECT_EQ(UROCE_RELAXED_STATE(mem->slots()[i].ctrl), UROCE_RELAXED_FREE);
        EXPECT_EQ(key_index(mem->slots()[i].key), pool->base_index() + i);
    }
    const TableCounts c = table.counts();
    EXPECT_EQ(c.relaxed_pools, 1u);
    EXPECT_EQ(c.relaxed_slots, 8u);
    EXPECT_EQ(c.mrs, 0u);
    EXPECT_EQ(pds.dealloc(pd, kOwner), EBUSY);
    EXPECT_EQ(sizeof(uroce_relaxed_slot), 64u);
    EXPECT_EQ(relaxed_pool_bytes(8), 64u * 9);
}

TEST_F(Relaxed, PoolCreationRefusals) {
    PoolMemory m(4);
    RelaxedPoolConfig cfg;
    cfg.capacity = 4;
    int err = 0;
    auto bad = [&](RelaxedPoolConfig c, std::uint32_t p, std::uint32_t owner, uroce_relaxed_pool_header* h) {
        err = 0;
        EXPECT_EQ(table.create_relaxed_pool(p, owner, c, h, err), nullptr);
        return err;
    };
    EXPECT_EQ(bad(cfg, pd, kOwner, nullptr), EINVAL);
    EXPECT_EQ(bad(cfg, pd, kOtherOwner, m.header), EINVAL);
    EXPECT_EQ(bad(cfg, pd + 77, kOwner, m.header), EINVAL);
    RelaxedPoolConfig c = cfg;
    c.capacity = 0;
    EXPECT_EQ(bad(c, pd, kOwner, m.header), EINVAL);
    c = cfg;
    c.page_size = 2048;
    EXPECT_EQ(bad(c, pd, kOwner, m.header), EINVAL);
    c.page_size = 12288;
    EXPECT_EQ(bad(c, pd, kOwner, m.header), EINVAL);
    c = cfg;
    c.dirty_watermark = 0;
    EXPECT_EQ(bad(c, pd, kOwner, m.header), EINVAL);
    EXPECT_EQ(table.counts().relaxed_pools, 0u);
}

TEST_F(Relaxed, RegistrationRoundsOutToPages) {
    make_pool(4);
    const std::uint64_t user = buf + 4096 + 100;
    const RelaxedRegistration r = reg_relaxed(user, 5000);  // ends at offset 5100 from page 1
    ASSERT_EQ(r.error, 0);
    EXPECT_EQ(r.addr, buf + 4096);
    EXPECT_EQ(r.length, 8192u);
    const std::uint32_t slot = slot_of(r.key);
    EXPECT_EQ(mem->slots()[slot].user_addr, user);
    EXPECT_EQ(mem->slots()[slot].user_length, 5000u);
    EXPECT_EQ(mem->slots()[slot].addr, buf + 4096);
    EXPECT_EQ(mem->slots()[slot].length, 8192u);
    EXPECT_EQ(UROCE_RELAXED_STATE(mem->slots()[slot].ctrl), UROCE_RELAXED_REGISTERED);

    // The rest of the first and last pages is reachable, nothing beyond.
    const Checked first = rd(r.key, buf + 4096, 100);
    ASSERT_EQ(first.status, CheckStatus::Ok);
    EXPECT_EQ(first.host_addr, buf + 4096);
    EXPECT_EQ(wr(r.key, buf + 4096 + 5100, 8192 - 5100).status, CheckStatus::Ok);
    EXPECT_EQ(rd(r.key, buf + 4096, 8192).status, CheckStatus::Ok);
    EXPECT_EQ(atomic(r.key, buf + 4096 + 8184).status, CheckStatus::Ok);
    EXPECT_EQ(rd(r.key, buf + 4095, 1).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(rd(r.key, buf + 4096 + 8191, 2).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(rd(r.key, buf + 3 * 4096, 1).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(rd(r.key, buf + 4096 + 8, UINT64_MAX - 4).status, CheckStatus::RemoteOutOfRange);
    // Locally too.
    EXPECT_EQ(local(table, r.key, pd, buf + 4096, 8192, true).status, CheckStatus::Ok);
    EXPECT_EQ(local(table, r.key, pd, buf + 4096 + 8192, 1, false).status, CheckStatus::LocalOutOfRange);

    // An already aligned registration is not grown.
    const RelaxedRegistration exact = reg_relaxed(buf + 8 * 4096, 4096);
    ASSERT_EQ(exact.error, 0);
    EXPECT_EQ(exact.addr, buf + 8 * 4096);
    EXPECT_EQ(exact.length, 4096u);
    const RelaxedRegistration one_byte = reg_relaxed(buf + 10 * 4096 + 4095, 1);
    ASSERT_EQ(one_byte.error, 0);
    EXPECT_EQ(one_byte.addr, buf + 10 * 4096);
    EXPECT_EQ(one_byte.length, 4096u);
    const RelaxedRegistration straddle = reg_relaxed(buf + 12 * 4096 + 4095, 2);
    ASSERT_EQ(straddle.error, 0);
    EXPECT_EQ(straddle.length, 8192u);
}

TEST_F(Relaxed, RegistrationRefusals) {
    make_pool(4);
    EXPECT_EQ(reg_relaxed(buf, 0).error, EINVAL);
    EXPECT_EQ(reg_relaxed(buf, 4096, kRW).error, EINVAL) << "REMOTE_WRITE without LOCAL_WRITE";
    EXPECT_EQ(reg_relaxed(buf, 4096, kLW | Access::kZeroBased).error, EINVAL);
    EXPECT_EQ(reg_relaxed(buf, 4096, kLW | Access::kMwBind).error, EINVAL);
    EXPECT_EQ(reg_relaxed(buf, 4096, kLW | Access::kOnDemand).error, EINVAL);
    EXPECT_EQ(reg_relaxed(buf, 4096, kLW | Access::kHugetlb).error, EINVAL);
    EXPECT_EQ(reg_relaxed(buf, 4096, kLW | (1u << 9)).error, EINVAL);
    EXPECT_EQ(reg_relaxed(UINT64_MAX - 100, 200).error, EINVAL);
    EXPECT_EQ(reg_relaxed(UINT64_MAX - 100, 50).error, EINVAL) << "rounding up wraps past the top";
    // Unknown optional bits are dropped, as for ibv_reg_mr.
    const RelaxedRegistration r = reg_relaxed(buf, 4096, kLW | kRR | (1u << 26));
    ASSERT_EQ(r.error, 0);
    EXPECT_EQ(mem->slots()[slot_of(r.key)].access, kLW | kRR);
}

TEST_F(Relaxed, ChecksApplyToRelaxedKeys) {
    make_pool(4);
    const RelaxedRegistration ro = reg_relaxed(buf, 4096, kRR);
    ASSERT_EQ(ro.error, 0);
    EXPECT_EQ(wr(ro.key, buf, 8).status, CheckStatus::RemoteAccessNotGranted);
    EXPECT_EQ(atomic(ro.key, buf).status, CheckStatus::RemoteAccessNotGranted);
    EXPECT_EQ(local(table, ro.key, pd, buf, 8, true).status, CheckStatus::LocalWriteNotGranted);
    EXPECT_EQ(local(table, ro.key, pd, buf, 8, false).status, CheckStatus::Ok);
    const std::uint32_t pd2 = pds.alloc(kOwner).pd;
    EXPECT_EQ(remote(table, ro.key, pd2, RemoteOp::Read, buf, 8).status, CheckStatus::RemotePdMismatch);
    EXPECT_EQ(local(table, ro.key, pd2, buf, 8, false).status, CheckStatus::LocalPdMismatch);
    EXPECT_EQ(rd(other_byte(ro.key), buf, 8).status, CheckStatus::RkeyInvalid);
    EXPECT_EQ(local(table, other_byte(ro.key), pd, buf, 8, false).status, CheckStatus::LkeyInvalid);
    const RelaxedRegistration full = reg_relaxed(buf + 4096, 4096);
    EXPECT_EQ(atomic(full.key, buf + 4097).status, CheckStatus::AtomicMisaligned);
    // A free slot's key names nothing.
    const std::uint32_t free_key = mem->slots()[3].key;
    ASSERT_EQ(UROCE_RELAXED_STATE(mem->slots()[3].ctrl), UROCE_RELAXED_FREE);
    EXPECT_EQ(rd(free_key, buf, 8).status, CheckStatus::RkeyInvalid);
    // The control path does not treat relaxed keys as MRs or windows.
    const RegRequest rr = make_req(pd, buf, 4096, kFull);
    EXPECT_EQ(table.dereg_mr(ro.key, kOwner), EINVAL);
    EXPECT_EQ(table.rereg_mr(ro.key, rereg::kChangeAccess, rr), EINVAL);
    EXPECT_EQ(table.dealloc_mw(ro.key, kOwner), EINVAL);
    EXPECT_EQ(table.invalidate(ro.key, pd, std::nullopt), EINVAL);
    BindRequest b;
    b.owner = kOwner;
    b.mw_key = ro.key;
    b.mr_lkey = ro.key;
    b.addr = buf;
    b.length = 4096;
    b.access = kRR;
    b.qp_pd = pd;
    EXPECT_EQ(table.bind_mw_type1(b).error, EINVAL);
    EXPECT_EQ(table.bind_mw_type2(b), EINVAL);
    EXPECT_EQ(rd(ro.key, buf, 8).status, CheckStatus::Ok);
}

TEST_F(Relaxed, DeregistrationOnlyMarksAndStaleAccessesAreReported) {
    make_pool(4);
    const std::uint64_t user = buf + 4096 + 10;
    const RelaxedRegistration r = reg_relaxed(user, 100, kFull);
    ASSERT_EQ(r.error, 0);
    const std::uint64_t registered_ns = now_ns;
    EXPECT_EQ(rd(r.key, user, 8).status, CheckStatus::Ok);
    EXPECT_EQ(table.pd_stats(pd).stale_accesses, 0u) << "a live registration is not stale";

    ASSERT_EQ(client->dereg(r.key, 5555), 0);
    EXPECT_EQ(mem->header->dirty, 1u);
    EXPECT_EQ(UROCE_RELAXED_STATE(mem->slots()[slot_of(r.key)].ctrl), UROCE_RELAXED_DEREGISTERED);
    EXPECT_EQ(client->dereg(r.key, 5556), EINVAL) << "already deregistered";

    // Still usable until invalidated, but every use is counted and reported
    // (also to the observer: the daemon's explained-failure records).
    std::vector<StaleAccessReport> observed;
    table.set_stale_observer([&observed](const StaleAccessReport& report) { observed.push_back(report); });
    Peer peer;
    peer.gid[15] = 9;
    peer.qpn = 0x99;
    {
        EpochGuard guard(table.epoch());
        RemoteRequest rq;
        rq.rkey = MrKey{r.key};
        rq.pd = PdHandle{pd};
        rq.qpn = Qpn{0x12};
        rq.qp_access = kQpAll;
        rq.op = RemoteOp::Write;
        rq.va = buf + 4096 + 2000;
        rq.length = 64;
        rq.peer = peer;
        const Translation t = table.check_remote(guard, rq);
        ASSERT_EQ(t.status, CheckStatus::Ok);
        EXPECT_EQ(t.host_addr, buf + 4096 + 2000);
    }
    EXPECT_EQ(local(table, r.key, pd, buf + 4096, 16, false, 0x34).status, CheckStatus::Ok);
    // A refused access is not a stale access.
    EXPECT_EQ(rd(r.key, buf, 8).status, CheckStatus::RemoteOutOfRange);

    const PdStats s = table.pd_stats(pd);
    EXPECT_EQ(s.stale_accesses, 2u);
    ASSERT_EQ(s.recent_stale.size(), 2u);
    ASSERT_EQ(observed.size(), 2u);
    EXPECT_EQ(observed[0].key, r.key);
    EXPECT_EQ(observed[0].qpn, 0x12u);
    EXPECT_EQ(observed[0].owner, kOwner);
    EXPECT_EQ(observed[1].op, RemoteOp::Local);
    table.set_stale_observer(nullptr);
    const StaleAccessReport& w = s.recent_stale[0];
    EXPECT_EQ(w.pd, pd);
    EXPECT_EQ(w.key, r.key);
    EXPECT_EQ(w.user_addr, user);
    EXPECT_EQ(w.user_length, 100u);
    EXPECT_EQ(w.granted_addr, buf + 4096);
    EXPECT_EQ(w.granted_length, 4096u);
    EXPECT_EQ(w.access_flags, kFull);
    EXPECT_EQ(w.registered_ns, registered_ns);
    EXPECT_EQ(w.deregistered_ns, 5555u);
    EXPECT_EQ(w.op, RemoteOp::Write);
    EXPECT_EQ(w.qpn, 0x12u);
    EXPECT_EQ(w.peer.gid, peer.gid);
    EXPECT_EQ(w.peer.qpn, 0x99u);
    EXPECT_EQ(w.va, buf + 4096 + 2000);
    EXPECT_EQ(w.length, 64u);
    EXPECT_GT(w.seen_ns, 0u);
    const StaleAccessReport& l = s.recent_stale[1];
    EXPECT_EQ(l.op, RemoteOp::Local);
    EXPECT_EQ(l.qpn, 0x34u);
    EXPECT_EQ(l.va, buf + 4096);
    EXPECT_EQ(l.length, 16u);
    const std::string text = describe(w);
    char key_hex[16];
    std::snprintf(key_hex, sizeof key_hex, "0x%08x", r.key);
    EXPECT_NE(text.find(key_hex), std::string::npos) << text;
    EXPECT_NE(text.find("RDMA WRITE"), std::string::npos) << text;
    EXPECT_EQ(s.invalidations, 0u);
}

TEST_F(Relaxed, ReportsAreBoundedNewestLast) {
    make_pool(2, 1000, 10ms, 3);
    const RelaxedRegistration r = reg_relaxed(buf, 4096);
    ASSERT_EQ(client->dereg(r.key, 1), 0);
    for (std::uint64_t i = 0; i < 5; ++i) {
        ASSERT_EQ(rd(r.key, buf + i, 1).status, CheckStatus::Ok);
    }
    const PdStats s = table.pd_stats(pd);
    EXPECT_EQ(s.stale_accesses, 5u);
    ASSERT_EQ(s.recent_stale.size(), 3u);
    EXPECT_EQ(s.recent_stale[0].va, buf + 2);
    EXPECT_EQ(s.recent_stale[2].va, buf + 4);
}

TEST_F(Relaxed, InvalidationAfterTheTimeLimit) {
    make_pool(4, 1000, 10ms);
    const RelaxedRegistration r = reg_relaxed(buf, 4096);
    ASSERT_EQ(client->dereg(r.key, 1), 0);
    EXPECT_EQ(pool->poll(kT0 + 5ms), 0u);
    EXPECT_EQ(pool->poll(kT0 + 9999us), 0u);
    EXPECT_EQ(rd(r.key, buf, 8).status, CheckStatus::Ok) << "not invalidated yet";
    EXPECT_EQ(pool->poll(kT0 + 10ms), 1u);
    EXPECT_EQ(rd(r.key, buf, 8).status, CheckStatus::RkeyInvalid);
    EXPECT_EQ(local(table, r.key, pd, buf, 8, false).status, CheckStatus::LkeyInvalid);
    EXPECT_EQ(UROCE_RELAXED_STATE(mem->slots()[slot_of(r.key)].ctrl), UROCE_RELAXED_FREE);
    EXPECT_NE(mem->slots()[slot_of(r.key)].key, r.key) << "the slot shows its next key";
    EXPECT_EQ(mem->header->dirty, 0u);
    PdStats s = table.pd_stats(pd);
    EXPECT_EQ(s.invalidations, 1u);
    EXPECT_EQ(s.invalidation_batches, 1u);

    // The timer restarts at the sweep.
    const RelaxedRegistration r2 = reg_relaxed(buf, 4096);
    ASSERT_EQ(client->dereg(r2.key, 2), 0);
    EXPECT_EQ(pool->poll(kT0 + 19ms), 0u);
    EXPECT_EQ(pool->poll(kT0 + 20ms), 1u);
    s = table.pd_stats(pd);
    EXPECT_EQ(s.invalidations, 2u);
    EXPECT_EQ(s.invalidation_batches, 2u);
}

TEST_F(Relaxed, InvalidationAtTheDirtyWatermark) {
    make_pool(8, 4, std::chrono::hours(1));
    std::vector<std::uint32_t> keys;
    for (int i = 0; i < 6; ++i) {
        const RelaxedRegistration r = reg_relaxed(buf + static_cast<std::uint64_t>(i) * 4096, 4096);
        ASSERT_EQ(r.error, 0);
        keys.push_back(r.key);
    }
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(client->dereg(keys[i], 1), 0);
    }
    EXPECT_EQ(pool->poll(kT0 + 1ns), 0u) << "3 pending, watermark 4";
    ASSERT_EQ(client->dereg(keys[3], 1), 0);
    EXPECT_EQ(pool->poll(kT0 + 2ns), 4u);
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(rd(keys[i], buf + static_cast<std::uint64_t>(i) * 4096, 8).status, CheckStatus::RkeyInvalid);
    }
    for (int i = 4; i < 6; ++i) {
        EXPECT_EQ(rd(keys[i], buf + static_cast<std::uint64_t>(i) * 4096, 8).status, CheckStatus::Ok);
    }
    EXPECT_EQ(table.pd_stats(pd).invalidation_batches, 1u);
}

TEST_F(Relaxed, WatermarkSweepFindsSlotsWhereverTheyAre) {
    make_pool(8, 3, 10ms);
    std::vector<RelaxedRegistration> regs;
    for (std::uint64_t i = 0; i < 8; ++i) {
        regs.push_back(reg_relaxed(buf + i * 4096, 4096));
        ASSERT_EQ(regs.back().error, 0);
    }
    for (int i : {6, 1, 5}) {
        ASSERT_EQ(client->dereg(regs[static_cast<std::size_t>(i)].key, 1), 0);
    }
    EXPECT_EQ(pool->poll(kT0 + 1ms), 3u);
    for (int i : {1, 5, 6}) {
        EXPECT_EQ(rd(regs[static_cast<std::size_t>(i)].key, buf + static_cast<std::uint64_t>(i) * 4096, 8).status,
                  CheckStatus::RkeyInvalid);
    }
    // Slots on both sides of where that sweep stopped.
    for (int i : {7, 0, 2}) {
        ASSERT_EQ(client->dereg(regs[static_cast<std::size_t>(i)].key, 1), 0);
    }
    EXPECT_EQ(pool->poll(kT0 + 2ms), 3u);
    EXPECT_EQ(mem->header->dirty, 0u);
    for (int i : {0, 2, 7}) {
        EXPECT_EQ(rd(regs[static_cast<std::size_t>(i)].key, buf + static_cast<std::uint64_t>(i) * 4096, 8).status,
                  CheckStatus::RkeyInvalid);
    }
    EXPECT_EQ(rd(regs[3].key, buf + 3 * 4096, 8).status, CheckStatus::Ok);
}

TEST_F(Relaxed, AnUnderstatedDirtyCountOnlyDelaysInvalidation) {
    make_pool(8, 1, 10ms);
    std::vector<RelaxedRegistration> regs;
    for (std::uint64_t i = 0; i < 4; ++i) {
        regs.push_back(reg_relaxed(buf + i * 4096, 4096));
    }
    ASSERT_EQ(client->dereg(regs[1].key, 1), 0);
    ASSERT_EQ(client->dereg(regs[3].key, 1), 0);
    mem->header->dirty = 1;  // the client says one, there are two
    EXPECT_EQ(pool->poll(kT0 + 1ms), 1u);
    EXPECT_EQ(pool->poll(kT0 + 2ms), 0u) << "dirty 0, timer not due";
    EXPECT_EQ(rd(regs[3].key, buf + 3 * 4096, 8).status, CheckStatus::Ok);
    // The timer sweep looks at every slot.
    EXPECT_EQ(pool->poll(kT0 + 11ms), 1u);
    EXPECT_EQ(rd(regs[1].key, buf + 4096, 8).status, CheckStatus::RkeyInvalid);
    EXPECT_EQ(rd(regs[3].key, buf + 3 * 4096, 8).status, CheckStatus::RkeyInvalid);
}

TEST_F(Relaxed, FlushInvalidatesEverythingPending) {
    make_pool(4, 1000, std::chrono::hours(1));
    const RelaxedRegistration a = reg_relaxed(buf, 4096);
    const RelaxedRegistration b = reg_relaxed(buf + 4096, 4096);
    ASSERT_EQ(client->dereg(a.key, 1), 0);
    ASSERT_EQ(client->dereg(b.key, 1), 0);
    EXPECT_EQ(pool->poll(kT0 + 1ms), 0u);
    EXPECT_EQ(pool->flush(), 2u);
    EXPECT_EQ(rd(a.key, buf, 8).status, CheckStatus::RkeyInvalid);
    EXPECT_EQ(rd(b.key, buf + 4096, 8).status, CheckStatus::RkeyInvalid);
    EXPECT_EQ(pool->flush(), 0u);
    const PdStats s = table.pd_stats(pd);
    EXPECT_EQ(s.flushes, 2u);
    EXPECT_EQ(s.invalidations, 2u);
    EXPECT_EQ(s.invalidation_batches, 1u);
}

TEST_F(Relaxed, ReusedSlotGetsANewKeyByte) {
    make_pool(1);
    std::vector<std::uint32_t> keys;
    for (int i = 0; i < 255; ++i) {
        const RelaxedRegistration r = reg_relaxed(buf, 4096);
        ASSERT_EQ(r.error, 0) << "cycle " << i;
        if (!keys.empty()) {
            ASSERT_EQ(key_index(r.key), key_index(keys.back()));
            ASSERT_EQ(rd(keys.back(), buf, 8).status, CheckStatus::RkeyInvalid) << "cycle " << i;
        }
        keys.push_back(r.key);
        ASSERT_EQ(client->dereg(r.key, 1), 0);
        ASSERT_EQ(pool->flush(), 1u);
    }
    EXPECT_EQ(std::set<std::uint32_t>(keys.begin(), keys.end()).size(), keys.size());
    // No earlier key matches the current registration.
    const RelaxedRegistration now = reg_relaxed(buf, 4096);
    ASSERT_EQ(now.error, 0);
    for (std::uint32_t k : keys) {
        ASSERT_NE(k, now.key);
        ASSERT_EQ(rd(k, buf, 8).status, CheckStatus::RkeyInvalid);
    }
    EXPECT_EQ(rd(now.key, buf, 8).status, CheckStatus::Ok);
}

TEST_F(Relaxed, ExhaustedPoolIsEagainWithPendingInvalidationsElseEnomem) {
    make_pool(2, 1000, std::chrono::hours(1));
    const RelaxedRegistration a = reg_relaxed(buf, 4096);
    const RelaxedRegistration b = reg_relaxed(buf + 4096, 4096);
    ASSERT_EQ(a.error, 0);
    ASSERT_EQ(b.error, 0);
    EXPECT_EQ(reg_relaxed(buf, 4096).error, ENOMEM) << "nothing pending: the pool is full";
    EXPECT_EQ(table.pd_stats(pd).eagain, 0u);

    ASSERT_EQ(client->dereg(a.key, 1), 0);
    EXPECT_EQ(reg_relaxed(buf, 4096).error, EAGAIN);
    EXPECT_EQ(reg_relaxed(buf, 4096).error, EAGAIN);
    EXPECT_EQ(table.pd_stats(pd).eagain, 2u);

    EXPECT_EQ(pool->poll(kT0 + 1ms), 0u);
    ASSERT_EQ(pool->flush(), 1u);
    const RelaxedRegistration c = reg_relaxed(buf, 4096);
    ASSERT_EQ(c.error, 0);
    EXPECT_EQ(key_index(c.key), key_index(a.key));
    EXPECT_NE(c.key, a.key);
    EXPECT_EQ(reg_relaxed(buf, 4096).error, ENOMEM);
    EXPECT_EQ(table.pd_stats(pd).eagain, 2u);
}

TEST_F(Relaxed, DestroyPool) {
    make_pool(4);
    const RelaxedRegistration r = reg_relaxed(buf, 4096);
    ASSERT_EQ(r.error, 0);
    EXPECT_EQ(table.destroy_relaxed_pool(pool, kOtherOwner), EINVAL);
    EXPECT_EQ(rd(r.key, buf, 8).status, CheckStatus::Ok);
    ASSERT_EQ(table.destroy_relaxed_pool(pool, kOwner), 0);
    EXPECT_EQ(rd(r.key, buf, 8).status, CheckStatus::RkeyInvalid);
    EXPECT_EQ(table.destroy_relaxed_pool(pool, kOwner), EINVAL) << "already destroyed";
    const TableCounts c = table.counts();
    EXPECT_EQ(c.relaxed_pools, 0u);
    EXPECT_EQ(c.relaxed_slots, 0u);
    EXPECT_EQ(pds.dealloc(pd, kOwner), 0);
}

TEST_F(Relaxed, PoolsArePerPdAndStatsToo) {
    make_pool(2);
    const std::uint32_t pd2 = pds.alloc(kOwner).pd;
    PoolMemory mem2(2);
    RelaxedPoolConfig cfg;
    cfg.capacity = 2;
    int err = 0;
    RelaxedPool* pool2 = table.create_relaxed_pool(pd2, kOwner, cfg, mem2.header, err);
    ASSERT_NE(pool2, nullptr);
    RelaxedClient client2(mem2.header);
    const RelaxedRegistration r2 = client2.reg(buf, 4096, kFull, 1);
    ASSERT_EQ(r2.error, 0);
    EXPECT_NE(key_index(r2.key), key_index(mem->slots()[0].key));
    EXPECT_EQ(remote(table, r2.key, pd2, RemoteOp::Read, buf, 8).status, CheckStatus::Ok);
    EXPECT_EQ(rd(r2.key, buf, 8).status, CheckStatus::RemotePdMismatch);
    ASSERT_EQ(client2.dereg(r2.key, 2), 0);
    EXPECT_EQ(remote(table, r2.key, pd2, RemoteOp::Read, buf, 8).status, CheckStatus::Ok);
    EXPECT_EQ(table.pd_stats(pd2).stale_accesses, 1u);
    EXPECT_EQ(table.pd_stats(pd).stale_accesses, 0u);
    EXPECT_EQ(table.pd_stats(9999).stale_accesses, 0u);
    EXPECT_EQ(table.counts().relaxed_slots, 4u);
}

// ---- a hostile client ----

// What a slot may grant when the daemon reads it: REGISTERED or
// DEREGISTERED, page-aligned, non-empty, no wrap, ordinary rights only.
struct SaneSlot {
    bool usable = false;
    std::uint64_t addr = 0;
    std::uint64_t length = 0;
    std::uint32_t access = 0;
};

SaneSlot judge(const uroce_relaxed_slot& s, std::uint64_t max_mr_size) {
    SaneSlot j;
    const std::uint32_t state = UROCE_RELAXED_STATE(s.ctrl);
    if (state != UROCE_RELAXED_REGISTERED && state != UROCE_RELAXED_DEREGISTERED) {
        return j;
    }
    constexpr std::uint32_t allowed = kFull | Access::kRelaxedOrdering;
    const bool sane = (s.addr & 4095) == 0 && (s.length & 4095) == 0 && s.length != 0 &&
                      s.length <= max_mr_size && s.addr + s.length > s.addr && (s.access & ~allowed) == 0 &&
                      ((s.access & (kRW | kRA)) == 0 || (s.access & kLW) != 0);
    if (sane) {
        j = SaneSlot{true, s.addr, s.length, s.access};
    }
    return j;
}

std::uint32_t right_of(RemoteOp op) {
    return op == RemoteOp::Read ? kRR : op == RemoteOp::Write ? kRW : kRA;
}

TEST_F(Relaxed, CorruptSlotsAreRefusedAndCounted) {
    make_pool(4);
    const RelaxedRegistration r = reg_relaxed(buf, 4096);
    ASSERT_EQ(r.error, 0);
    uroce_relaxed_slot& s = mem->slots()[slot_of(r.key)];
    const uroce_relaxed_slot good = s;
    std::uint64_t corrupt = 0;
    auto expect_refused = [&](const char* what) {
        EXPECT_EQ(rd(r.key, buf, 8).status, CheckStatus::RkeyInvalid) << what;
        EXPECT_EQ(local(table, r.key, pd, buf, 8, false).status, CheckStatus::LkeyInvalid) << what;
        corrupt += 2;
        EXPECT_EQ(table.pd_stats(pd).corrupt_slots, corrupt) << what;
        s = good;
    };
    s.addr = buf + 1;
    expect_refused("unaligned addr");
    s.length = 4095;
    expect_refused("unaligned length");
    s.length = 0;
    expect_refused("zero length");
    s.length = (1ull << 47) + 4096;
    expect_refused("longer than max_mr_size");
    s.addr = 0xFFFFFFFFFFFFF000ull;
    s.length = 8192;
    expect_refused("wraps the address space");
    s.access = kRW;
    expect_refused("REMOTE_WRITE without LOCAL_WRITE");
    s.access = kFull | Access::kZeroBased;
    expect_refused("ZERO_BASED");
    s.access = kFull | Access::kMwBind;
    expect_refused("MW_BIND");
    s.access = kFull | (1u << 13);
    expect_refused("unknown bit");
    // Bad states are refused without counting as corrupt.
    for (std::uint32_t state : {0u, 1u, 4u, 5u, 0x7Fu, 0xFFu}) {
        s.ctrl = UROCE_RELAXED_CTRL(UROCE_RELAXED_GEN(good.ctrl), state);
        EXPECT_EQ(rd(r.key, buf, 8).status, CheckStatus::RkeyInvalid) << "state " << state;
        s = good;
    }
    EXPECT_EQ(table.pd_stats(pd).corrupt_slots, corrupt);
    // The daemon's key byte, not the slot's key field, decides.
    s.key = other_byte(r.key);
    EXPECT_EQ(rd(r.key, buf, 8).status, CheckStatus::Ok);
    EXPECT_EQ(rd(other_byte(r.key), buf, 8).status, CheckStatus::RkeyInvalid);
    s = good;
    EXPECT_EQ(rd(r.key, buf, 8).status, CheckStatus::Ok);
}

TEST_F(Relaxed, GarbageInTheWholePoolNeverGrantsMoreThanASaneSlotSays) {
    constexpr std::uint32_t kCap = 64;
    make_pool(kCap, 8, 1ms);
    std::vector<std::uint32_t> keys;
    for (std::uint32_t i = 0; i < kCap; ++i) {
        const RelaxedRegistration r = reg_relaxed(buf + (i % 16) * 4096, 4096);
        ASSERT_EQ(r.error, 0);
        keys.push_back(r.key);
    }
    // The keys the daemon will honour: every slot's current key byte and a
    // few others, so stale and future bytes are tried too.
    std::vector<std::uint32_t> probe_keys;
    for (std::uint32_t k : keys) {
        for (int d : {0, 1, 2, 255}) {
            probe_keys.push_back(other_byte(k, static_cast<std::uint8_t>(d)));
        }
    }
    const std::uint64_t max_size = table.limits().max_mr_size;
    std::mt19937_64 rng(20240611);
    std::uint64_t ok_count = 0;
    auto* bytes = reinterpret_cast<std::uint8_t*>(mem->header);
    const std::size_t pool_bytes = relaxed_pool_bytes(kCap);
    Clock::time_point now = kT0;
    // REGISTERED or DEREGISTERED, any generation.
    auto usable_ctrl = [&rng] {
        return UROCE_RELAXED_CTRL(static_cast<std::uint32_t>(rng()), static_cast<std::uint32_t>(2 + rng() % 2));
    };
    for (int round = 0; round < 200; ++round) {
        // Fill the whole pool, header included, with random bytes, then steer
        // some slots into plausible-looking states so the checks go deep.
        for (std::size_t i = 0; i < pool_bytes; ++i) {
            bytes[i] = static_cast<std::uint8_t>(rng());
        }
        for (std::uint32_t i = 0; i < kCap; ++i) {
            uroce_relaxed_slot& s = mem->slots()[i];
            switch (rng() % 4) {
                case 0:
                    break;  // pure garbage
                case 1:
                    s.ctrl = usable_ctrl();
                    break;
                case 2:
                    s.ctrl = usable_ctrl();
                    s.addr = (rng() % 2) != 0 ? buf + (rng() % 16) * 4096 : rng() & ~std::uint64_t{4095};
                    s.length = 4096 * (1 + rng() % 8);
                    s.access = static_cast<std::uint32_t>(rng() % 16);
                    break;
                case 3:
                    s.ctrl = usable_ctrl();
                    s.addr = rng() & ~std::uint64_t{4095};
                    s.length = rng() & ~std::uint64_t{4095};
                    s.access = static_cast<std::uint32_t>(rng() % 16);
                    break;
            }
        }
        std::vector<SaneSlot> sane(kCap);
        for (std::uint32_t i = 0; i < kCap; ++i) {
            sane[i] = judge(mem->slots()[i], max_size);
        }
        for (int probe = 0; probe < 200; ++probe) {
            const std::uint32_t key = probe_keys[rng() % probe_keys.size()];
            const std::uint32_t slot = key_index(key) - pool->base_index();
            const RemoteOp op = static_cast<RemoteOp>(rng() % 3);
            const SaneSlot& j = sane[slot];
            std::uint64_t va = 0;
            std::uint64_t len = op == RemoteOp::Atomic ? 8 : 1 + rng() % 8192;
            switch (rng() % 3) {
                case 0:
                    va = j.addr + rng() % (j.length + 1);  // near or inside the slot's range
                    break;
                case 1:
                    va = rng();
                    break;
                case 2:
                    va = j.addr + j.length - (rng() % 16);
                    len = rng();
                    break;
            }
            if (op == RemoteOp::Atomic) {
                va &= ~std::uint64_t{7};
            }
            const Checked c = remote(table, key, pd, op, va, len);
            if (c.ok()) {
                ++ok_count;
                ASSERT_TRUE(j.usable) << "Ok through an unusable slot " << slot;
                ASSERT_NE(j.access & right_of(op), 0u);
                ASSERT_GE(va, j.addr);
                ASSERT_LE(va - j.addr, j.length);
                ASSERT_LE(len, j.length - (va - j.addr));
                ASSERT_EQ(c.host_addr, va);
            }
            const Checked l = local(table, key, pd, va, len, (rng() % 2) != 0);
            if (l.ok()) {
                ASSERT_TRUE(j.usable);
                ASSERT_GE(va, j.addr);
                ASSERT_LE(len, j.length - (va - j.addr));
            }
        }
        // The daemon's tick and flush run over the garbage too.
        now += 2ms;
        pool->poll(now);
        if (round % 50 == 49) {
            pool->flush();
        }
    }
    EXPECT_GT(ok_count, 0u) << "the probes should sometimes hit a sane slot";
    const PdStats s = table.pd_stats(pd);
    EXPECT_GT(s.corrupt_slots, 0u);
    // The daemon's own view of the pool is intact: a fresh pool state works.
    std::memset(static_cast<void*>(mem->header), 0, pool_bytes);
    ASSERT_EQ(table.destroy_relaxed_pool(pool, kOwner), 0);
    EXPECT_EQ(table.counts().relaxed_slots, 0u);
}

}  // namespace
}  // namespace uroce::mr
