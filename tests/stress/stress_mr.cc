// Concurrency stress of the key table: control threads register, rereg and
// deregister MRs and relaxed MRs (and recreate relaxed pools) while reader
// threads check keys with no lock and read through what the checks return.
//
// Every buffer an MR points at is freed only through the table's epoch
// domain after the MR stopped pointing at it, after being poisoned; a reader
// that could still reach a freed descriptor or buffer sees the poison, a
// sanitizer report (ASan: use after free; TSan: a race with the poisoning),
// or a translation inconsistent with its descriptor.
//
// Bounded by iterations and by time: UROCE_STRESS_SECONDS (default 10) and
// UROCE_STRESS_ITERATIONS (default 200000 per control thread).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/epoch.h"
#include "mr/access_flags.h"
#include "mr/keys.h"
#include "mr/mr_table.h"
#include "mr/pd_table.h"
#include "mr/relaxed_client.h"
#include "mr/relaxed_pool.h"

namespace uroce::mr {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kControlThreads = 2;
constexpr int kReaderThreads = 3;
constexpr std::uint32_t kMrSlots = 32;       // MR records per control thread
constexpr std::uint32_t kRelaxedSlots = 32;  // relaxed records per control thread
constexpr std::uint32_t kRecords = kMrSlots + kRelaxedSlots;
constexpr std::uint32_t kPoolCapacity = 16;
constexpr std::size_t kPage = 4096;
constexpr std::size_t kBufBytes = 4 * kPage;
constexpr std::size_t kArenaPages = 128;
constexpr std::uint64_t kIova = 0x5000'0000'0000;
constexpr std::uint64_t kLive = 0x11FE11FE11FE11FEull;
constexpr std::uint8_t kPoison = 0xDD;
constexpr std::uint32_t kFull =
    Access::kLocalWrite | Access::kRemoteRead | Access::kRemoteWrite | Access::kRemoteAtomic;
constexpr std::uint32_t kReadOnly = Access::kLocalWrite | Access::kRemoteRead;

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

std::uint8_t pattern(std::uint32_t id, std::size_t offset) { return static_cast<std::uint8_t>(id * 131 + offset * 7); }

// The start of every MR buffer.
struct BufHeader {
    std::uint64_t magic;
    std::uint32_t key;  // written once the key is known (atomically: readers may race with it)
    std::uint32_t id;
};

struct Buffer {
    static std::byte* make(std::uint32_t id) {
        auto* p = static_cast<std::byte*>(std::aligned_alloc(kPage, kBufBytes));
        for (std::size_t i = sizeof(BufHeader); i < kBufBytes; ++i) {
            p[i] = static_cast<std::byte>(pattern(id, i));
        }
        auto* h = reinterpret_cast<BufHeader*>(p);
        h->magic = kLive;
        h->key = 0;
        h->id = id;
        return p;
    }
    static void set_key(std::byte* p, std::uint32_t key) {
        std::atomic_ref<std::uint32_t>(reinterpret_cast<BufHeader*>(p)->key).store(key, std::memory_order_relaxed);
    }
    // After every reader that might still translate into `p` has left.
    static void retire(EpochDomain& epoch, std::byte* p) {
        epoch.retire([p] {
            std::memset(p, kPoison, kBufBytes);
            std::free(p);
        });
    }
};

// A record readers pick keys from: key | mode << 32 | first page << 40 | pages << 56.
enum Mode : std::uint64_t { kEmpty = 0, kZeroBased = 1, kIovaMode = 2, kRelaxedMode = 3 };

std::uint64_t encode(std::uint32_t key, Mode mode, std::uint64_t page = 0, std::uint64_t pages = 0) {
    return key | static_cast<std::uint64_t>(mode) << 32 | page << 40 | pages << 56;
}

class Failures {
public:
    void add(const std::string& what) {
        if (count_.fetch_add(1) < 20) {
            std::lock_guard lock(m_);
            messages_ += what + "\n";
        }
    }
    [[nodiscard]] int count() const { return count_.load(); }
    [[nodiscard]] std::string messages() const {
        std::lock_guard lock(m_);
        return messages_;
    }

private:
    std::atomic<int> count_{0};
    mutable std::mutex m_;
    std::string messages_;
};

// Records a failure without stopping the thread (gtest assertions belong
// on the main thread); the test fails at the end with the first messages.
#define STRESS_CHECK(cond, msg)                                                                          \
    do {                                                                                                 \
        if (!(cond)) {                                                                                   \
            s_.failures.add(std::string(__FILE__ ":") + std::to_string(__LINE__) + ": " #cond " " + (msg)); \
        }                                                                                                \
    } while (0)

struct Shared {
    PdTable pds;
    MrTable table{pds};
    std::array<std::uint32_t, kControlThreads> pd{};
    std::array<std::array<std::atomic<std::uint64_t>, kRecords>, kControlThreads> records{};
    std::vector<std::byte> arena_storage = std::vector<std::byte>(kArenaPages * kPage + kPage);
    std::uint64_t arena = 0;  // page aligned; filled once, then only read
    std::atomic<bool> stop{false};
    Failures failures;
    std::atomic<std::uint64_t> ok_checks{0};
    std::atomic<std::uint64_t> failed_checks{0};
    std::atomic<std::uint64_t> stale_relaxed_ok{0};
    std::atomic<std::uint64_t> aliased{0};
    std::atomic<std::uint64_t> control_ops{0};
    std::atomic<std::uint64_t> pool_recreations{0};

    Shared() {
        const auto raw = reinterpret_cast<std::uintptr_t>(arena_storage.data());
        arena = (raw + kPage - 1) & ~std::uint64_t{kPage - 1};
        auto* a = reinterpret_cast<std::uint8_t*>(arena);
        for (std::size_t i = 0; i < kArenaPages * kPage; ++i) {
            a[i] = pattern(0xA5, i);
        }
        for (auto& per_thread : records) {
            for (auto& r : per_thread) {
                r.store(0, std::memory_order_relaxed);
            }
        }
    }
};

// One control thread: its own owner, PD, MRs and relaxed pool.
class Control {
public:
    Control(Shared& s, int t, std::uint64_t iterations, Clock::time_point deadline)
        : s_(s), t_(t), owner_(static_cast<std::uint32_t>(t) + 1), iterations_(iterations), deadline_(deadline),
          rng_(0x5EED0000u + static_cast<unsigned>(t)) {}

    void run() {
        make_pool();
        for (std::uint64_t i = 0; i < iterations_; ++i) {
            if ((i & 255) == 0 && Clock::now() >= deadline_) {
                break;
            }
            step(i);
            s_.control_ops.fetch_add(1, std::memory_order_relaxed);
        }
        teardown();
    }

private:
    struct MrSlot {
        bool live = false;
        std::uint32_t key = 0;
        std::byte* buf = nullptr;
        Mode mode = kEmpty;
        bool full = true;
    };
    struct RelaxedSlot {
        bool live = false;
        std::uint32_t key = 0;
    };

    std::uint32_t pd() const { return s_.pd[static_cast<std::size_t>(t_)]; }
    std::atomic<std::uint64_t>& record(std::uint32_t i) {
        return s_.records[static_cast<std::size_t>(t_)][i];
    }
    std::uint64_t rnd(std::uint64_t n) { return rng_() % n; }

    RegRequest request(std::byte* buf, Mode mode, bool full) const {
        RegRequest r;
        r.pd = pd();
        r.owner = owner_;
        r.addr = reinterpret_cast<std::uintptr_t>(buf);
        r.length = kBufBytes;
        r.access = (full ? kFull : kReadOnly) | (mode == kZeroBased ? Access::kZeroBased : 0u);
        if (mode == kIovaMode) {
            r.iova = kIova;
        }
        return r;
    }

    void step(std::uint64_t i) {
        const std::uint64_t what = rnd(100);
        if (what < 45) {
            mr_step(static_cast<std::uint32_t>(rnd(kMrSlots)));
        } else if (what < 85) {
            relaxed_step(static_cast<std::uint32_t>(rnd(kRelaxedSlots)));
        } else if (what < 95) {
            fake_now_ += std::chrono::microseconds(200);
            pool_->poll(fake_now_);
        } else if (what < 97) {
            flush_and_verify();
        } else if (what < 98) {
            (void)s_.table.counts();
            (void)s_.table.pd_stats(pd());
        }
        if (i % 2000 == 1999) {
            recreate_pool();
        }
    }

    void mr_step(std::uint32_t slot) {
        MrSlot& m = mrs_[slot];
        if (!m.live) {
            m.mode = rnd(2) == 0 ? kZeroBased : kIovaMode;
            m.full = rnd(4) != 0;
            m.buf = Buffer::make(next_id_++);
            const Registered r = s_.table.reg_mr(request(m.buf, m.mode, m.full));
            STRESS_CHECK(r.error == 0, "reg_mr error " + std::to_string(r.error));
            if (r.error != 0) {
                std::free(m.buf);
                return;
            }
            Buffer::set_key(m.buf, r.lkey);
            m.key = r.lkey;
            m.live = true;
            record(slot).store(encode(m.key, m.mode), std::memory_order_release);
            return;
        }
        const std::uint64_t what = rnd(10);
        if (what < 4) {
            // Deregister; the record keeps the now stale key on purpose.
            const int err = s_.table.dereg_mr(m.key, owner_);
            STRESS_CHECK(err == 0, "dereg_mr error " + std::to_string(err));
            Buffer::retire(s_.table.epoch(), m.buf);
            m.live = false;
            m.buf = nullptr;
        } else if (what < 8) {
            // Move to a new buffer, sometimes changing the access too.
            std::byte* nb = Buffer::make(next_id_++);
            Buffer::set_key(nb, m.key);
            std::uint32_t flags = rereg::kChangeTranslation;
            if (rnd(2) == 0) {
                flags |= rereg::kChangeAccess;
                m.full = !m.full;
            }
            const int err = s_.table.rereg_mr(m.key, flags, request(nb, m.mode, m.full));
            STRESS_CHECK(err == 0, "rereg_mr error " + std::to_string(err));
            if (err != 0) {
                std::free(nb);
                return;
            }
            Buffer::retire(s_.table.epoch(), m.buf);
            m.buf = nb;
        } else {
            m.full = !m.full;
            const int err = s_.table.rereg_mr(m.key, rereg::kChangeAccess, request(m.buf, m.mode, m.full));
            STRESS_CHECK(err == 0, "rereg_mr (access) error " + std::to_string(err));
        }
    }

    void relaxed_step(std::uint32_t slot) {
        RelaxedSlot& r = relaxed_[slot];
        if (r.live) {
            const int err = client_->dereg(r.key, ++now_ns_);
            STRESS_CHECK(err == 0, "relaxed dereg error " + std::to_string(err));
            r.live = false;
            pending_.push_back(r.key);
            return;
        }
        const std::uint64_t pages = 1 + rnd(4);
        const std::uint64_t page = rnd(kArenaPages - pages);
        // Unaligned inside the pages, so the rounding is exercised.
        const std::uint64_t addr = s_.arena + page * kPage + rnd(kPage / 2);
        const std::uint64_t length = pages * kPage - (addr - s_.arena - page * kPage) - rnd(kPage / 2);
        const std::uint32_t access = rnd(3) == 0 ? kReadOnly : kFull;
        const RelaxedRegistration reg = client_->reg(addr, length, access, ++now_ns_);
        if (reg.error == EAGAIN) {
            flush_and_verify();
            return;
        }
        STRESS_CHECK(reg.error == 0 || reg.error == ENOMEM, "relaxed reg error " + std::to_string(reg.error));
        if (reg.error != 0) {
            return;
        }
        STRESS_CHECK(reg.addr == s_.arena + page * kPage && reg.length == pages * kPage, "relaxed rounding");
        r.live = true;
        r.key = reg.key;
        record(kMrSlots + slot).store(encode(reg.key, kRelaxedMode, page, pages), std::memory_order_release);
    }

    // After flush() returns, no key deregistered before it may still work.
    void flush_and_verify() {
        pool_->flush();
        EpochGuard guard(s_.table.epoch());
        for (std::uint32_t key : pending_) {
            RemoteRequest rq;
            rq.rkey = MrKey{key};
            rq.pd = PdHandle{pd()};
            rq.qp_access = kFull;
            rq.op = RemoteOp::Read;
            rq.va = s_.arena;
            rq.length = kArenaPages * kPage;
            const Translation tr = s_.table.check_remote(guard, rq);
            STRESS_CHECK(tr.status == CheckStatus::RkeyInvalid,
                         "key " + std::to_string(key) + " after flush: " + std::string(info(tr.status).name));
        }
        pending_.clear();
    }

    void make_pool() {
        pool_mem_ = std::make_unique<std::vector<std::uint64_t>>(relaxed_pool_bytes(kPoolCapacity) / 8 + 8);
        auto* header = reinterpret_cast<uroce_relaxed_pool_header*>(pool_mem_->data());
        RelaxedPoolConfig cfg;
        cfg.capacity = kPoolCapacity;
        cfg.dirty_watermark = 4;
        cfg.invalidate_after = std::chrono::milliseconds(1);
        int err = 0;
        pool_ = s_.table.create_relaxed_pool(pd(), owner_, cfg, header, err);
        STRESS_CHECK(pool_ != nullptr && err == 0, "create_relaxed_pool error " + std::to_string(err));
        client_ = std::make_unique<RelaxedClient>(header);
        relaxed_.fill(RelaxedSlot{});
        pending_.clear();
    }

    // Destroys the pool while readers still use its keys, frees its shared
    // memory as soon as destroy returns, and starts a new one.
    void recreate_pool() {
        const int err = s_.table.destroy_relaxed_pool(pool_, owner_);
        STRESS_CHECK(err == 0, "destroy_relaxed_pool error " + std::to_string(err));
        pool_mem_.reset();
        client_.reset();
        make_pool();
        s_.pool_recreations.fetch_add(1, std::memory_order_relaxed);
    }

    void teardown() {
        for (MrSlot& m : mrs_) {
            if (m.live) {
                STRESS_CHECK(s_.table.dereg_mr(m.key, owner_) == 0, "final dereg");
                Buffer::retire(s_.table.epoch(), m.buf);
                m.live = false;
            }
        }
        STRESS_CHECK(s_.table.destroy_relaxed_pool(pool_, owner_) == 0, "final pool destroy");
        pool_mem_.reset();
    }

    Shared& s_;
    const int t_;
    const std::uint32_t owner_;
    const std::uint64_t iterations_;
    const Clock::time_point deadline_;
    std::mt19937_64 rng_;
    std::array<MrSlot, kMrSlots> mrs_{};
    std::array<RelaxedSlot, kRelaxedSlots> relaxed_{};
    std::vector<std::uint32_t> pending_;  // relaxed keys deregistered since the last flush
    std::unique_ptr<std::vector<std::uint64_t>> pool_mem_;
    RelaxedPool* pool_ = nullptr;
    std::unique_ptr<RelaxedClient> client_;
    Clock::time_point fake_now_ = Clock::time_point{} + std::chrono::hours(1);
    std::uint64_t now_ns_ = 0;
    std::uint32_t next_id_ = 1;
};

class Reader {
public:
    Reader(Shared& s, int n) : s_(s), rng_(0xBEEF0000u + static_cast<unsigned>(n)) {}

    void run() {
        std::uint64_t ok = 0;
        std::uint64_t refused = 0;
        while (!s_.stop.load(std::memory_order_acquire)) {
            for (int batch = 0; batch < 64; ++batch) {
                check_one(ok, refused);
            }
            // Outside any guard: on a small machine the control threads, which
            // wait for readers in synchronize(), get a turn.
            std::this_thread::yield();
        }
        s_.ok_checks.fetch_add(ok);
        s_.failed_checks.fetch_add(refused);
    }

private:
    std::uint64_t rnd(std::uint64_t n) { return rng_() % n; }

    void check_one(std::uint64_t& ok, std::uint64_t& refused) {
        const auto t = static_cast<std::size_t>(rnd(kControlThreads));
        const auto i = static_cast<std::size_t>(rnd(kRecords));
        const std::uint64_t rec = s_.records[t][i].load(std::memory_order_acquire);
        const auto mode = static_cast<Mode>((rec >> 32) & 3);
        if (mode == kEmpty) {
            return;
        }
        std::uint32_t key = static_cast<std::uint32_t>(rec);
        if (rnd(64) == 0) {
            key = static_cast<std::uint32_t>(rng_());  // a random key now and then
        }
        const std::uint32_t pd = s_.pd[t];
        const RemoteOp op = static_cast<RemoteOp>(rnd(3));
        std::uint64_t len = op == RemoteOp::Atomic ? 8 : 1 + rnd(256);
        std::uint64_t va = 0;
        if (mode == kRelaxedMode) {
            const std::uint64_t page = (rec >> 40) & 0xFFFF;
            const std::uint64_t pages = rec >> 56;
            va = s_.arena + page * kPage + rnd(pages * kPage - len + 1);
        } else {
            va = (mode == kIovaMode ? kIova : 0) + rnd(kBufBytes - len + 1);
        }
        if (op == RemoteOp::Atomic) {
            va &= ~std::uint64_t{7};
        }

        EpochGuard guard(s_.table.epoch());
        RemoteRequest rq;
        rq.rkey = MrKey{key};
        rq.pd = PdHandle{pd};
        rq.qpn = Qpn{0x100};
        rq.qp_access = kFull;
        rq.op = op;
        rq.va = va;
        rq.length = len;
        const Translation tr = s_.table.check_remote(guard, rq);
        if (tr.ok()) {
            ++ok;
            verify(tr, key, pd, mode, va, len);
        } else {
            ++refused;
        }
        if (rnd(2) == 0) {
            const Translation lt = s_.table.check_local(guard, MrKey{key}, PdHandle{pd}, va, len, rnd(2) == 0, Qpn{0x100});
            if (lt.ok()) {
                ++ok;
                verify(lt, key, pd, mode, va, len);
            }
        }
    }

    void verify(const Translation& tr, std::uint32_t key, std::uint32_t pd, Mode mode, std::uint64_t va,
                std::uint64_t len) {
        const Descriptor* d = tr.desc;
        STRESS_CHECK(d != nullptr, "Ok without a descriptor");
        if (d == nullptr) {
            return;
        }
        STRESS_CHECK(key_index(key) == d->index, "descriptor of another entry");
        STRESS_CHECK(d->pd == pd, "descriptor of another PD");
        if (d->kind == ObjectKind::Relaxed) {
            STRESS_CHECK(mode == kRelaxedMode, "an MR key reached a relaxed slot");
            STRESS_CHECK(tr.host_addr == va, "relaxed translation is not the identity");
            const bool in_arena = va >= s_.arena && va - s_.arena + len <= kArenaPages * kPage;
            STRESS_CHECK(in_arena, "relaxed access outside the arena");
            if (in_arena) {
                const auto* a = reinterpret_cast<const std::uint8_t*>(tr.host_addr);
                const std::size_t off = va - s_.arena;
                STRESS_CHECK(a[0] == pattern(0xA5, off) && a[len - 1] == pattern(0xA5, off + len - 1), "arena bytes");
            }
            return;
        }
        STRESS_CHECK(d->kind == ObjectKind::Mr, "not an MR");
        STRESS_CHECK(d->key() == key, "key byte mismatch");
        if (mode == kRelaxedMode) {
            // A relaxed key whose pool was destroyed, after the entry went to
            // an MR and its byte came round again: legitimate, and rare.
            s_.aliased.fetch_add(1, std::memory_order_relaxed);
        }
        STRESS_CHECK(va >= d->iova && va - d->iova <= d->length && len <= d->length - (va - d->iova), "range");
        STRESS_CHECK(tr.host_addr == d->host_base + (va - d->iova), "translation");
        STRESS_CHECK(d->length == kBufBytes, "length");
        const auto* base = reinterpret_cast<const std::byte*>(d->host_base);
        const auto* h = reinterpret_cast<const BufHeader*>(base);
        STRESS_CHECK(h->magic == kLive, "buffer freed under a reader (magic " + std::to_string(h->magic) + ")");
        const std::uint32_t hk =
            std::atomic_ref<std::uint32_t>(const_cast<std::uint32_t&>(h->key)).load(std::memory_order_relaxed);
        STRESS_CHECK(hk == 0 || hk == key, "translation into a buffer registered under another key");
        const std::size_t off = tr.host_addr - d->host_base;
        for (std::size_t k = std::max(off, sizeof(BufHeader)); k < off + len; k += 13) {
            if (static_cast<std::uint8_t>(base[k]) != pattern(h->id, k)) {
                s_.failures.add("buffer bytes differ at " + std::to_string(k));
                break;
            }
        }
    }

    Shared& s_;
    std::mt19937_64 rng_;
};

TEST(MrStress, ConcurrentRegistrationAndLocklessChecks) {
    const std::uint64_t seconds = env_or("UROCE_STRESS_SECONDS", 10);
    const std::uint64_t iterations = env_or("UROCE_STRESS_ITERATIONS", 200000);
    auto shared = std::make_unique<Shared>();
    for (int t = 0; t < kControlThreads; ++t) {
        const PdTable::Alloc a = shared->pds.alloc(static_cast<std::uint32_t>(t) + 1);
        ASSERT_EQ(a.error, 0);
        shared->pd[static_cast<std::size_t>(t)] = a.pd;
    }
    const Clock::time_point start = Clock::now();
    const Clock::time_point deadline = start + std::chrono::seconds(seconds);

    std::vector<std::thread> readers;
    for (int n = 0; n < kReaderThreads; ++n) {
        readers.emplace_back([&shared, n] { Reader(*shared, n).run(); });
    }
    std::vector<std::thread> controls;
    for (int t = 0; t < kControlThreads; ++t) {
        controls.emplace_back([&shared, t, iterations, deadline] {
            Control(*shared, t, iterations, deadline).run();
        });
    }
    for (auto& c : controls) {
        c.join();
    }
    shared->stop.store(true, std::memory_order_release);
    for (auto& r : readers) {
        r.join();
    }
    shared->table.epoch().synchronize();

    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("%.1f s: %llu control operations, %llu pool recreations, %llu Ok checks, %llu refused, "
                "%llu aliased\n",
                elapsed, static_cast<unsigned long long>(shared->control_ops.load()),
                static_cast<unsigned long long>(shared->pool_recreations.load()),
                static_cast<unsigned long long>(shared->ok_checks.load()),
                static_cast<unsigned long long>(shared->failed_checks.load()),
                static_cast<unsigned long long>(shared->aliased.load()));
    EXPECT_EQ(shared->failures.count(), 0) << shared->failures.messages();
    EXPECT_GT(shared->ok_checks.load(), 0u);
    EXPECT_GT(shared->failed_checks.load(), 0u) << "stale keys were tried and refused";
    const TableCounts c = shared->table.counts();
    EXPECT_EQ(c.mrs, 0u);
    EXPECT_EQ(c.relaxed_pools, 0u);
    EXPECT_EQ(shared->table.epoch().pending(), 0u);
}

}  // namespace
}  // namespace uroce::mr
