// Costs of the memory-registration engine.
//
// - rkey lookup and check (MrTable::check_remote, Ok path): with an
//   EpochGuard made per check, with one guard held across the whole run, and
//   with one guard per batch of 64; each also with another thread
//   registering and deregistering in the same table (the ":churn" variants).
//   Target: <= 20 ns per check, churn or not.
// - register + deregister pairs per second: ordinary MRs (reg_mr + dereg_mr)
//   and relaxed MRs (RelaxedClient reg + dereg, with the daemon's poll, and
//   so the batched invalidation, amortised in). Target: relaxed >= 1M/s and
//   >= 5x ordinary.
// - memory per MR entry: RSS growth over 2^20 registrations, and the sizes
//   of the pieces.
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <thread>
#include <unordered_set>
#include <vector>

#include "common/epoch.h"
#include "mr/access_flags.h"
#include "mr/address_space.h"
#include "mr/descriptor.h"
#include "mr/keys.h"
#include "mr/mr_table.h"
#include "mr/pd_table.h"
#include "mr/relaxed_client.h"
#include "mr/relaxed_pool.h"

namespace {

using namespace uroce;
using namespace uroce::mr;

constexpr std::uint32_t kFull =
    Access::kLocalWrite | Access::kRemoteRead | Access::kRemoteWrite | Access::kRemoteAtomic;
constexpr std::uint32_t kOwner = 1;
constexpr std::uint32_t kChurnOwner = 2;
constexpr std::uint32_t kKeys = 4096;  // MRs the checks pick from
constexpr std::uint64_t kBase = 0x10'0000'0000;

RegRequest request(std::uint32_t pd, std::uint32_t owner, std::uint64_t addr, std::uint64_t length) {
    RegRequest r;
    r.pd = pd;
    r.owner = owner;
    r.addr = addr;
    r.length = length;
    r.access = kFull;
    return r;
}

// One table with kKeys MRs, shared by the check benchmarks.
struct CheckEnv {
    PdTable pds;
    MrTable table{pds};
    std::uint32_t pd = 0;
    std::uint32_t churn_pd = 0;
    std::vector<RemoteRequest> requests;

    CheckEnv() {
        pd = pds.alloc(kOwner).pd;
        churn_pd = pds.alloc(kChurnOwner).pd;
        for (std::uint32_t i = 0; i < kKeys; ++i) {
            const Registered r = table.reg_mr(request(pd, kOwner, kBase + std::uint64_t{i} * 65536, 65536));
            RemoteRequest rq;
            rq.rkey = MrKey{r.rkey};
            rq.pd = PdHandle{pd};
            rq.qpn = Qpn{0x11};
            rq.qp_access = kFull;
            rq.op = static_cast<RemoteOp>(i % 3);
            rq.va = kBase + std::uint64_t{i} * 65536 + 1024;
            rq.length = rq.op == RemoteOp::Atomic ? 8 : 512;
            requests.push_back(rq);
        }
    }
    static CheckEnv& get() {
        static CheckEnv env;
        return env;
    }
};

// What else runs while the checks are measured (the benchmark argument):
// 0 nothing; 1 another thread registering and deregistering in the same
// table (16 MRs in flight, so the free list and the epoch keep moving); 2 a
// control: a thread as busy, allocating and freeing, that never touches the
// table, to tell contention on the table from contention for the machine.
class Churn {
public:
    Churn(CheckEnv& env, std::int64_t mode) : env_(env) {
        if (mode == 1) {
            thread_ = std::thread([this] { run(); });
        } else if (mode == 2) {
            thread_ = std::thread([this] { busy(); });
        }
        if (mode != 0) {
            while (ops_.load(std::memory_order_relaxed) < 100) {
                std::this_thread::yield();
            }
        }
    }
    ~Churn() {
        stop_.store(true);
        if (thread_.joinable()) {
            thread_.join();
        }
    }
    Churn(const Churn&) = delete;
    Churn& operator=(const Churn&) = delete;
    [[nodiscard]] std::uint64_t ops() const { return ops_.load(std::memory_order_relaxed); }

private:
    void busy() {
        std::uint64_t n = 0;
        std::vector<std::unique_ptr<Descriptor>> held(16);
        while (!stop_.load(std::memory_order_relaxed)) {
            held[n % 16] = std::make_unique<Descriptor>();
            held[n % 16]->index = static_cast<std::uint32_t>(n);
            benchmark::DoNotOptimize(held[n % 16].get());
            ops_.store(++n, std::memory_order_relaxed);
        }
    }

    void run() {
        std::uint32_t keys[16] = {};
        std::uint64_t n = 0;
        while (!stop_.load(std::memory_order_relaxed)) {
            std::uint32_t& k = keys[n % 16];
            if (k != 0) {
                env_.table.dereg_mr(k, kChurnOwner);
            }
            k = env_.table.reg_mr(request(env_.churn_pd, kChurnOwner, kBase, 4096)).lkey;
            ops_.store(++n, std::memory_order_relaxed);
        }
        for (std::uint32_t k : keys) {
            if (k != 0) {
                env_.table.dereg_mr(k, kChurnOwner);
            }
        }
    }

    CheckEnv& env_;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    std::atomic<std::uint64_t> ops_{0};
};

void report_churn(benchmark::State& state, const Churn& churn, double seconds) {
    if (state.range(0) != 0 && seconds > 0) {
        state.counters["churn_ops_per_s"] = static_cast<double>(churn.ops()) / seconds;
    }
}

// rkey check with a guard made for each check.
void BM_CheckRemote_GuardPerCheck(benchmark::State& state) {
    CheckEnv& env = CheckEnv::get();
    const auto start = std::chrono::steady_clock::now();
    Churn churn(env, state.range(0));
    std::uint32_t i = 0;
    std::uint64_t bad = 0;
    for (auto _ : state) {
        EpochGuard guard(env.table.epoch());
        const Translation t = env.table.check_remote(guard, env.requests[i++ & (kKeys - 1)]);
        bad += t.ok() ? 0 : 1;
        benchmark::DoNotOptimize(t.host_addr);
    }
    if (bad != 0) {
        state.SkipWithError("a check failed");
    }
    state.SetItemsProcessed(state.iterations());
    report_churn(state, churn, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}
BENCHMARK(BM_CheckRemote_GuardPerCheck)->ArgName("churn")->Arg(0)->Arg(1)->Arg(2)->UseRealTime();

// rkey check under one guard held for the whole run (a burst of packets).
void BM_CheckRemote_GuardHeld(benchmark::State& state) {
    CheckEnv& env = CheckEnv::get();
    const auto start = std::chrono::steady_clock::now();
    Churn churn(env, state.range(0));
    std::uint32_t i = 0;
    std::uint64_t bad = 0;
    {
        EpochGuard guard(env.table.epoch());
        for (auto _ : state) {
            const Translation t = env.table.check_remote(guard, env.requests[i++ & (kKeys - 1)]);
            bad += t.ok() ? 0 : 1;
            benchmark::DoNotOptimize(t.host_addr);
        }
    }
    if (bad != 0) {
        state.SkipWithError("a check failed");
    }
    state.SetItemsProcessed(state.iterations());
    report_churn(state, churn, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}
BENCHMARK(BM_CheckRemote_GuardHeld)->ArgName("churn")->Arg(0)->Arg(1)->Arg(2)->UseRealTime();

// One guard per batch of 64 checks (a poll loop's burst); time is per check.
void BM_CheckRemote_GuardPer64(benchmark::State& state) {
    CheckEnv& env = CheckEnv::get();
    const auto start = std::chrono::steady_clock::now();
    Churn churn(env, state.range(0));
    std::uint32_t i = 0;
    std::uint64_t bad = 0;
    for (auto _ : state) {
        EpochGuard guard(env.table.epoch());
        for (int k = 0; k < 64; ++k) {
            const Translation t = env.table.check_remote(guard, env.requests[i++ & (kKeys - 1)]);
            bad += t.ok() ? 0 : 1;
            benchmark::DoNotOptimize(t.host_addr);
        }
    }
    if (bad != 0) {
        state.SkipWithError("a check failed");
    }
    state.SetItemsProcessed(state.iterations() * 64);
    state.counters["ns_per_check"] = benchmark::Counter(static_cast<double>(state.iterations() * 64),
                                                        benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    report_churn(state, churn, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}
BENCHMARK(BM_CheckRemote_GuardPer64)->ArgName("churn")->Arg(0)->Arg(1)->Arg(2)->UseRealTime();

// ibv_reg_mr + ibv_dereg_mr, one pair per iteration: the table's own work
// (address_space:0, the figure the relaxed target compares with), and with
// the check that the range is mapped in the process, as the daemon makes it
// for real memory (address_space:1: one PROCMAP_QUERY per mapping touched).
void BM_RegDereg_Mr(benchmark::State& state) {
    PdTable pds;
    MrTable table(pds);
    const std::uint32_t pd = pds.alloc(kOwner).pd;
    // Some MRs already in place, as in a running device.
    for (std::uint32_t i = 0; i < 1024; ++i) {
        (void)table.reg_mr(request(pd, kOwner, kBase + std::uint64_t{i} * 4096, 4096));
    }
    std::vector<std::uint64_t> memory(1024);
    RegRequest req = request(pd, kOwner, kBase, 8192);
    if (state.range(0) != 0) {
        req.addr = reinterpret_cast<std::uintptr_t>(memory.data());
        req.address_space = std::make_shared<ProcessAddressSpace>(ProcessAddressSpace::open_maps(getpid()));
    }
    std::uint64_t bad = 0;
    for (auto _ : state) {
        const Registered r = table.reg_mr(req);
        bad += table.dereg_mr(r.lkey, kOwner) != 0 ? 1 : 0;
    }
    if (bad != 0) {
        state.SkipWithError("reg/dereg failed");
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RegDereg_Mr)->ArgName("address_space")->Arg(0)->Arg(1);

// Relaxed reg + dereg (client side, shared memory only) with the daemon's
// poll after every `poll_every` pairs (1: after each; 64: a daemon tick per
// 64 operations); the poll sweeps every `watermark` deregistrations. Sweep
// and grace-period costs are thus amortised into the per-pair figure.
void BM_RegDereg_Relaxed(benchmark::State& state) {
    PdTable pds;
    MrTable table(pds);
    const std::uint32_t pd = pds.alloc(kOwner).pd;
    const auto capacity = static_cast<std::uint32_t>(state.range(0));
    std::vector<std::uint64_t> shared(relaxed_pool_bytes(capacity) / 8 + 8);
    auto* header = reinterpret_cast<uroce_relaxed_pool_header*>(shared.data());
    RelaxedPoolConfig cfg;
    cfg.capacity = capacity;
    cfg.dirty_watermark = static_cast<std::uint32_t>(state.range(1));
    cfg.invalidate_after = std::chrono::hours(1);
    int err = 0;
    RelaxedPool* pool = table.create_relaxed_pool(pd, kOwner, cfg, header, err);
    if (pool == nullptr) {
        state.SkipWithError("create_relaxed_pool failed");
        return;
    }
    RelaxedClient client(header);
    const auto now = std::chrono::steady_clock::now();
    pool->poll(now);  // starts the timer
    const auto poll_every = static_cast<std::uint64_t>(state.range(2));
    std::uint64_t t_ns = 0;
    std::uint64_t bad = 0;
    std::uint64_t n = 0;
    for (auto _ : state) {
        const RelaxedRegistration r = client.reg(kBase + 100, 10000, kFull, ++t_ns);
        bad += r.error != 0 ? 1 : 0;
        bad += client.dereg(r.key, ++t_ns) != 0 ? 1 : 0;
        if (++n % poll_every == 0) {
            pool->poll(now);
        }
    }
    if (bad != 0) {
        state.SkipWithError("relaxed reg/dereg failed");
    }
    state.SetItemsProcessed(state.iterations());
    const PdStats s = table.pd_stats(pd);
    state.counters["sweeps"] = static_cast<double>(s.invalidation_batches);
    state.counters["eagain"] = static_cast<double>(s.eagain);
}
BENCHMARK(BM_RegDereg_Relaxed)
    ->ArgNames({"capacity", "watermark", "poll_every"})
    ->Args({1024, 64, 1})
    ->Args({1024, 64, 64})
    ->Args({4096, 256, 1})
    ->Args({4096, 256, 64})
    ->Args({65536, 64, 64});  // a big pool swept at a low watermark

std::uint64_t rss_bytes() {
    std::FILE* f = std::fopen("/proc/self/statm", "r");
    unsigned long long size = 0;
    unsigned long long resident = 0;
    if (f != nullptr) {
        if (std::fscanf(f, "%llu %llu", &size, &resident) != 2) {
            resident = 0;
        }
        std::fclose(f);
    }
    return resident * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

// Memory per registered MR: RSS growth over 2^20 registrations in a fresh
// table (segments, descriptors, owner bookkeeping), the malloc'd bytes alone,
// and the sizes of the pieces.
void BM_MemoryPerMr(benchmark::State& state) {
    constexpr std::uint32_t kCount = 1u << 20;
    double per_mr = 0;
    double heap_per_mr = 0;
    for (auto _ : state) {
        auto pds = std::make_unique<PdTable>();
        auto table = std::make_unique<MrTable>(*pds);
        const std::uint32_t pd = pds->alloc(kOwner).pd;
        std::vector<std::uint32_t> keys(kCount);  // allocated before the first sample
        malloc_trim(0);  // give back what earlier runs freed, so RSS grows again
        const std::uint64_t before = rss_bytes();
        const std::size_t heap_before = mallinfo2().uordblks;
        for (std::uint32_t i = 0; i < kCount; ++i) {
            keys[i] = table->reg_mr(request(pd, kOwner, kBase + std::uint64_t{i} * 4096, 4096)).lkey;
        }
        const std::uint64_t after = rss_bytes();
        const std::size_t heap_after = mallinfo2().uordblks;
        per_mr = static_cast<double>(after - before) / kCount;
        heap_per_mr = static_cast<double>(heap_after - heap_before) / kCount;
        state.PauseTiming();
        for (std::uint32_t k : keys) {
            (void)table->dereg_mr(k, kOwner);
        }
        table.reset();
        state.ResumeTiming();
    }
    // MrTable::Entry is private; this mirrors its layout.
    struct EntryMirror {
        std::atomic<const Descriptor*> desc;
        std::uint8_t last_key_byte;
        std::uint32_t bound_windows;
    };
    state.counters["rss_bytes_per_mr"] = per_mr;
    state.counters["heap_bytes_per_mr"] = heap_per_mr;  // malloc'd bytes in use (mallinfo2, main arena)
    state.counters["sizeof_descriptor"] = sizeof(Descriptor);
    state.counters["sizeof_entry"] = sizeof(EntryMirror);
    state.counters["sizeof_owner_set_node"] =
        sizeof(std::uint32_t) + sizeof(void*) + sizeof(std::size_t);  // unordered_set node: value, next, hash
    state.SetItemsProcessed(state.iterations() * kCount);
}
BENCHMARK(BM_MemoryPerMr)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
