// Concurrency stress of EpochDomain alone: readers dereference objects that
// a writer keeps replacing and retiring, while another thread reclaims (and
// synchronizes) concurrently with the retirements. A retired object freed
// under a reader shows as a dead magic value, an ASan use-after-free, or a
// TSan race between the deleter's writes and the reader's reads.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

#include "common/epoch.h"

namespace uroce {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kLive = 0x0B1EC7A11FE00000ull;
constexpr std::uint64_t kDead = 0xDEADDEADDEADDEADull;

struct Obj {
    std::uint64_t magic;
    std::uint64_t value;
};

std::uint64_t seconds_budget() {
    const char* v = std::getenv("UROCE_STRESS_SECONDS");
    const std::uint64_t total = v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : 10;
    return total / 2 > 0 ? total / 2 : 1;
}

TEST(EpochStress, ReclaimRacesWithRetireFromAnotherThread) {
    constexpr int kReaders = 2;
    constexpr std::size_t kSlots = 4;
    constexpr std::uint64_t kMaxRetires = 2'000'000;
    EpochDomain domain;
    std::array<std::atomic<Obj*>, kSlots> slots{};
    for (auto& s : slots) {
        s.store(new Obj{kLive, 0});
    }
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> bad{0};
    std::atomic<std::uint64_t> reads{0};
    const Clock::time_point deadline = Clock::now() + std::chrono::seconds(seconds_budget());

    std::vector<std::thread> threads;
    for (int r = 0; r < kReaders; ++r) {
        threads.emplace_back([&, r] {
            std::uint64_t n = 0;
            std::uint64_t local_bad = 0;
            std::size_t i = static_cast<std::size_t>(r);
            while (!stop.load(std::memory_order_relaxed)) {
                EpochGuard guard(domain);
                const Obj* o = slots[i++ % kSlots].load(std::memory_order_seq_cst);
                // Plain reads: the deleter's plain writes race with them
                // unless the domain orders the two.
                if (o->magic != kLive || o->value > kMaxRetires) {
                    ++local_bad;
                }
                ++n;
            }
            reads.fetch_add(n);
            bad.fetch_add(local_bad);
        });
    }
    // The reclaimer: reclaim() mostly, synchronize() now and then.
    threads.emplace_back([&] {
        std::uint64_t n = 0;
        while (!stop.load(std::memory_order_relaxed)) {
            if (++n % 64 == 0) {
                domain.synchronize();
            } else {
                domain.reclaim();
            }
        }
    });
    // The writer, on this thread.
    std::uint64_t retired = 0;
    while (retired < kMaxRetires && ((retired & 1023) != 0 || Clock::now() < deadline)) {
        Obj* fresh = new Obj{kLive, retired + 1};
        Obj* old = slots[retired % kSlots].exchange(fresh, std::memory_order_seq_cst);
        domain.retire([old] {
            old->magic = kDead;
            delete old;
        });
        ++retired;
    }
    stop.store(true);
    for (auto& t : threads) {
        t.join();
    }
    domain.synchronize();
    EXPECT_EQ(domain.pending(), 0u);
    for (auto& s : slots) {
        delete s.load();
    }
    std::printf("%llu retirements, %llu reads\n", static_cast<unsigned long long>(retired),
                static_cast<unsigned long long>(reads.load()));
    EXPECT_EQ(bad.load(), 0u) << "a reader saw a freed object";
    EXPECT_GT(reads.load(), 0u);
}

}  // namespace
}  // namespace uroce
