// EpochDomain: retired objects outlive every guard that could hold them;
// nesting, synchronize, reclaim.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/epoch.h"
#include "mr/mr_table.h"
#include "mr/pd_table.h"

namespace uroce {
namespace {

// A one-shot flag threads can wait on.
class Signal {
public:
    void set() {
        {
            std::lock_guard lock(m_);
            set_ = true;
        }
        cv_.notify_all();
    }
    void wait() {
        std::unique_lock lock(m_);
        cv_.wait(lock, [this] { return set_; });
    }

private:
    std::mutex m_;
    std::condition_variable cv_;
    bool set_ = false;
};

// A thread that enters a guard, reports it, and leaves when told.
class GuardHolder {
public:
    explicit GuardHolder(EpochDomain& d)
        : thread_([this, &d] {
              EpochGuard guard(d);
              inside_.set();
              leave_.wait();
          }) {
        inside_.wait();
    }
    ~GuardHolder() { release(); }
    GuardHolder(const GuardHolder&) = delete;
    GuardHolder& operator=(const GuardHolder&) = delete;

    void release() {
        if (thread_.joinable()) {
            leave_.set();
            thread_.join();
        }
    }

private:
    Signal inside_;
    Signal leave_;
    std::thread thread_;
};

TEST(Epoch, RetireWithoutReadersIsReclaimedAtOnce) {
    EpochDomain d;
    int freed = 0;
    d.retire([&] { ++freed; });
    d.retire([&] { ++freed; });
    EXPECT_EQ(d.pending(), 2u);
    EXPECT_EQ(d.reclaim(), 2u);
    EXPECT_EQ(freed, 2);
    EXPECT_EQ(d.pending(), 0u);
    EXPECT_EQ(d.reclaim(), 0u);
}

TEST(Epoch, RetiredObjectWaitsForAGuardEnteredBefore) {
    EpochDomain d;
    std::atomic<int> freed{0};
    GuardHolder reader(d);
    d.retire([&] { ++freed; });
    EXPECT_EQ(d.reclaim(), 0u);
    EXPECT_EQ(freed.load(), 0);
    EXPECT_EQ(d.pending(), 1u);
    reader.release();
    EXPECT_EQ(d.reclaim(), 1u);
    EXPECT_EQ(freed.load(), 1);
}

TEST(Epoch, AGuardEnteredAfterTheRetireDoesNotHoldIt) {
    EpochDomain d;
    int first = 0;
    int second = 0;
    d.retire([&] { ++first; });
    GuardHolder late(d);  // cannot have seen the first object
    d.retire([&] { ++second; });
    EXPECT_EQ(d.reclaim(), 1u);
    EXPECT_EQ(first, 1);
    EXPECT_EQ(second, 0) << "retired while `late` was inside";
    late.release();
    EXPECT_EQ(d.reclaim(), 1u);
    EXPECT_EQ(second, 1);
}

TEST(Epoch, NestedGuardsLeaveOnlyAtTheOutermost) {
    EpochDomain d;
    int freed = 0;
    {
        EpochGuard outer(d);
        {
            EpochGuard inner(d);
        }
        // Still inside `outer`: retire from another thread's point of view.
        std::thread([&] {
            d.retire([&] { ++freed; });
            EXPECT_EQ(d.reclaim(), 0u);
        }).join();
        EXPECT_EQ(freed, 0);
        {
            EpochGuard inner2(d);
        }
        std::thread([&] { EXPECT_EQ(d.reclaim(), 0u); }).join();
        EXPECT_EQ(freed, 0);
    }
    EXPECT_EQ(d.reclaim(), 1u);
    EXPECT_EQ(freed, 1);
}

TEST(Epoch, SynchronizeWaitsForGuardsAndThenReclaims) {
    EpochDomain d;
    auto reader = std::make_unique<GuardHolder>(d);
    std::atomic<bool> freed{false};
    std::atomic<bool> done{false};
    d.retire([&] { freed = true; });
    std::thread sync([&] {
        d.synchronize();
        done = true;
    });
    // While the reader is inside, synchronize cannot return. (A bounded look:
    // it can only miss a bug, never fail a correct implementation.)
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    while (std::chrono::steady_clock::now() < until) {
        ASSERT_FALSE(done.load());
        ASSERT_FALSE(freed.load());
        std::this_thread::yield();
    }
    reader->release();
    sync.join();
    EXPECT_TRUE(done.load());
    EXPECT_TRUE(freed.load());
    EXPECT_EQ(d.pending(), 0u);
}

TEST(Epoch, SynchronizeIsNotHeldUpByReadersThatKeepComingBack) {
    EpochDomain d;
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> entries{0};
    std::thread churn([&] {
        while (!stop.load()) {
            EpochGuard g(d);
            entries.fetch_add(1);
        }
    });
    while (entries.load() < 100) {
        std::this_thread::yield();
    }
    for (int i = 0; i < 100; ++i) {
        d.retire([] {});
        d.synchronize();
    }
    EXPECT_EQ(d.pending(), 0u);
    stop = true;
    churn.join();
}

TEST(Epoch, DestroyingTheDomainRunsWhatIsStillRetired) {
    int freed = 0;
    {
        EpochDomain d;
        EpochGuard g(d);
        d.retire([&] { ++freed; });
        EXPECT_EQ(d.reclaim(), 0u) << "this thread is inside";
    }
    EXPECT_EQ(freed, 1);
}

TEST(Epoch, AThreadCanUseManyDomainsOverItsLife) {
    // Each thread keeps a small table of domains; entries of destroyed
    // domains must be reused.
    for (int i = 0; i < 100; ++i) {
        EpochDomain d;
        EpochGuard g(d);
        EpochGuard nested(d);
    }
    // And several live at once.
    std::vector<std::unique_ptr<EpochDomain>> live;
    for (int i = 0; i < 8; ++i) {
        live.push_back(std::make_unique<EpochDomain>());
    }
    std::vector<std::unique_ptr<EpochGuard>> guards;
    for (auto& d : live) {
        guards.push_back(std::make_unique<EpochGuard>(*d));
    }
    int freed = 0;
    live[3]->retire([&] { ++freed; });
    EXPECT_EQ(live[3]->reclaim(), 0u);
    guards.clear();
    EXPECT_EQ(live[3]->reclaim(), 1u);
    EXPECT_EQ(freed, 1);
}

TEST(Epoch, ReaderSlotsAreReturnedWhenThreadsExit) {
    EpochDomain d;
    // More threads over time than there are reader slots.
    for (std::size_t i = 0; i < EpochDomain::kMaxReaders + 32; ++i) {
        std::thread([&] { EpochGuard g(d); }).join();
    }
    d.retire([] {});
    EXPECT_EQ(d.reclaim(), 1u);
}

// The key table retires through its domain: a reader that holds a guard for
// long keeps every descriptor retired meanwhile (the control path goes on,
// without rescanning the whole list each time), and they go once it leaves.
TEST(Epoch, KeyTableDescriptorsWaitForALongGuard) {
    mr::PdTable pds;
    mr::MrTable table(pds);
    const std::uint32_t pd = pds.alloc(1).pd;
    mr::RegRequest r;
    r.pd = pd;
    r.owner = 1;
    r.addr = 0x100000;
    r.length = 4096;
    auto reader = std::make_unique<GuardHolder>(table.epoch());
    const auto start = std::chrono::steady_clock::now();
    constexpr int kPairs = 200000;
    for (int i = 0; i < kPairs; ++i) {
        const mr::Registered reg = table.reg_mr(r);
        ASSERT_EQ(reg.error, 0);
        ASSERT_EQ(table.dereg_mr(reg.lkey, 1), 0);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GE(table.epoch().pending(), static_cast<std::size_t>(kPairs)) << "freed under a guard";
    // Generous: a rescan per retire made this take seconds, not milliseconds.
    EXPECT_LT(seconds, 2.0);
    reader->release();
    table.epoch().synchronize();
    EXPECT_EQ(table.epoch().pending(), 0u);
}

}  // namespace
}  // namespace uroce
