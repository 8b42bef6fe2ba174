// Per-client quotas: how many objects, daemon mappings, bytes of shared
// memory and daemon file descriptors one client may hold, and the device-wide
// budgets of mappings (vm.max_map_count) and descriptors (RLIMIT_NOFILE)
// every client draws from. A client at its quota gets EDQUOT; when the
// device's budget is spent, ENOMEM (what a kernel driver answers when it is
// out of resources). Either way only the asking client is refused: nobody
// else's objects are touched.
//
// What each object costs the daemon:
//  - every object: one entry (objects); a relaxed-MR pool one per slot (each
//    slot is an MR key of the device's);
//  - a CQ, QP, SRQ or relaxed-MR pool: its ring/pool memfd mapped in the
//    daemon (mappings, bytes); a CQ with a completion channel also keeps the
//    channel's fd (fds);
//  - a shared MR (UROCE_REG_SHARED): its mapping of the client's memory;
//  - an rdma_cm event channel: its doorbell socket (fds).
#pragma once

#include <cstdint>
#include <limits>
#include <unordered_map>

namespace uroce::daemon {

inline constexpr std::uint64_t kUnlimited = std::numeric_limits<std::uint64_t>::max();

// Per client, or (usage()) what a client holds.
struct QuotaLimits {
    std::uint64_t objects = kUnlimited;
    std::uint64_t mappings = kUnlimited;
    std::uint64_t bytes = kUnlimited;
    std::uint64_t fds = kUnlimited;
};

struct DeviceBudget {
    std::uint64_t mappings = kUnlimited;  // vm.max_map_count less what the daemon needs itself
    std::uint64_t fds = kUnlimited;       // RLIMIT_NOFILE less what the daemon needs itself
};

// What one object costs.
struct Charge {
    std::uint32_t objects = 1;
    std::uint32_t mappings = 0;
    std::uint64_t bytes = 0;
    std::uint32_t fds = 0;
};

enum class ObjectKind : std::uint8_t { Pd, Mr, Mw, Cq, Qp, Srq, Ah, RelaxedPool, CmChannel };

// Reads vm.max_map_count and the daemon's own mappings, raises the soft
// RLIMIT_NOFILE to the hard limit, and leaves room for the daemon itself.
[[nodiscard]] DeviceBudget measure_device_budget();
// The defaults: a quarter of the device's budgets per client (so that one
// client can never take everything), a quarter of the machine's memory, and
// a quarter of the device's MR keys as objects.
[[nodiscard]] QuotaLimits default_quota(const DeviceBudget& budget);

class ClientQuota {
public:
    ClientQuota() = default;
    ClientQuota(QuotaLimits per_client, DeviceBudget device) : limits_(per_client), device_(device) {}

    [[nodiscard]] const QuotaLimits& limits() const { return limits_; }
    [[nodiscard]] const DeviceBudget& device_budget() const { return device_; }

    // 0 when `client` may take `charge` now; EDQUOT past its quota, ENOMEM
    // past the device's budget.
    [[nodiscard]] int admit(std::uint32_t client, const Charge& charge) const;
    // Records an object that was made (after admit()).
    void add(ObjectKind kind, std::uint32_t handle, std::uint32_t client, const Charge& charge);
    // Forgets an object (no-op when unknown).
    void remove(ObjectKind kind, std::uint32_t handle);
    // Forgets everything of a departed client.
    void remove_client(std::uint32_t client);
    [[nodiscard]] QuotaLimits usage(std::uint32_t client) const;

private:
    static std::uint64_t key(ObjectKind kind, std::uint32_t handle) {
        return (std::uint64_t{static_cast<std::uint8_t>(kind)} << 32) | handle;
    }
    struct Held {
        std::uint32_t client = 0;
        Charge charge;
    };

    QuotaLimits limits_;
    DeviceBudget device_;
    std::unordered_map<std::uint64_t, Held> held_;
    std::unordered_map<std::uint32_t, QuotaLimits> used_;  // per client (from zero)
    std::uint64_t device_mappings_ = 0;                    // of every client
    std::uint64_t device_fds_ = 0;
};

}  // namespace uroce::daemon
