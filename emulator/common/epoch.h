// Epoch-based reclamation: lets data-path threads read shared objects with no
// lock while the control path replaces and frees them.
//
// A reader brackets its work with an EpochGuard. A writer first unlinks an
// object (so no new reader can find it), then retire()s it; the object is
// destroyed only once every reader that was inside a guard when it was
// retired has left. Readers never wait; writers wait only in synchronize().
//
// Written here rather than taken from liburcu because the stress tests run
// under ThreadSanitizer, which must see the synchronisation: this uses only
// std::atomic operations, while liburcu's barriers are invisible to it.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

namespace uroce {

class EpochDomain {
public:
    // Threads that may hold a guard at the same time. A thread takes a slot
    // on its first guard and gives it back when it exits.
    static constexpr std::size_t kMaxReaders = 128;

    EpochDomain();
    ~EpochDomain();  // destroys everything still retired
    EpochDomain(const EpochDomain&) = delete;
    EpochDomain& operator=(const EpochDomain&) = delete;

    // Schedules `deleter` to run once no reader can still hold the object.
    void retire(std::function<void()> deleter);
    // Runs every deleter whose grace period has passed; returns how many ran.
    std::size_t reclaim();
    // Waits until every reader now inside a guard has left, then reclaims all
    // retired objects. Must not be called from inside a guard.
    void synchronize();

    [[nodiscard]] std::size_t pending() const;

    // Per-thread bookkeeping, public only so epoch.cc's thread-local table can
    // name it.
    struct alignas(64) ReaderSlot {
        // 0 when the reader is outside a guard, else the epoch it entered in.
        std::atomic<std::uint64_t> epoch{0};
        std::atomic<bool> owned{false};
    };
    struct Held;

private:
    friend class EpochGuard;

    struct Retired {
        std::uint64_t epoch;
        std::function<void()> deleter;
    };

    Held& held_by_this_thread();
    [[nodiscard]] std::uint64_t oldest_active_epoch() const;

    std::atomic<std::uint64_t> global_epoch_{1};
    std::array<ReaderSlot, kMaxReaders> readers_{};
    std::atomic<std::size_t> readers_used_{0};  // slots [0, used) have ever been taken
    mutable std::mutex retired_mutex_;
    std::vector<Retired> retired_;
    const std::uint64_t domain_id_;
};

// A read-side critical section. Nesting on one thread is allowed; only the
// outermost guard enters and leaves the epoch.
class EpochGuard {
public:
    explicit EpochGuard(EpochDomain& domain);
    ~EpochGuard();
    EpochGuard(const EpochGuard&) = delete;
    EpochGuard& operator=(const EpochGuard&) = delete;

private:
    EpochDomain::ReaderSlot* slot_;
    unsigned* depth_;
};

}  // namespace uroce
