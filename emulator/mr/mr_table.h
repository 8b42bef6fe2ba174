// The key table of one device: memory regions, memory windows and relaxed-MR
// slots, named by 32-bit keys (keys.h), with the two checks every data
// transfer passes through: a local SGE (lkey) and a remote request (rkey).
//
// Control-path calls (register, rereg, deregister, windows, pools) are
// serialised by one mutex. Data-path checks take no table lock: they read
// the published descriptor under an EpochGuard, and the descriptor (with the
// translation it carries) stays valid until that guard ends, even if the
// control path deregisters it meanwhile. The one exception is an access
// through a deregistered relaxed slot: recording that stale access takes the
// pool's stats mutex (RelaxedPool::report_stale), off the normal path.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "access_diagnosis.h"
#include "access_report.h"
#include "check_status.h"
#include "common/epoch.h"
#include "common/ids.h"
#include "descriptor.h"
#include "keys.h"
#include "pd_table.h"
#include "relaxed_pool.h"
#include "wire/headers.h"

namespace uroce::mr {

// Resource limits, reported in the device attributes and enforced here.
struct Limits {
    std::uint32_t max_mr = 1u << 22;   // entries for MRs and relaxed slots
    std::uint32_t max_mw = 1u << 20;
    // x86-64 user space is 47 bits; no registration can be larger.
    std::uint64_t max_mr_size = 1ull << 47;
    // 4 KiB, 2 MiB and 1 GiB pages (ibv_device_attr.page_size_cap is a mask).
    std::uint64_t page_size_cap = (1ull << 12) | (1ull << 21) | (1ull << 30);
};

// ibv_reg_mr / _iova / _iova2 / ibv_reg_dmabuf_mr, as the daemon receives them.
struct RegRequest {
    std::uint32_t pd = 0;
    std::uint32_t owner = 0;
    std::uint64_t addr = 0;   // process address, or dma-buf offset for DmaBuf
    std::uint64_t length = 0;
    // The address keys use for the first byte: ibv_reg_mr_iova's iova. Absent
    // for plain ibv_reg_mr (iova = addr, or 0 with ZERO_BASED).
    std::optional<std::uint64_t> iova;
    std::uint32_t access = 0;
    Backing backing = Backing::ProcessMemory;
    int dmabuf_handle = -1;
    // The owning process's mappings: registration checks the range is mapped
    // (and huge-page backed for HUGETLB); ON_DEMAND checks every access.
    std::shared_ptr<const AddressSpace> address_space;
};

struct Registered {
    int error = 0;  // 0, or the errno ibv_reg_mr reports
    std::uint32_t lkey = 0;
    std::uint32_t rkey = 0;  // equal to lkey; honoured remotely only with a remote right
};

// IBV_REREG_MR_* flags (verbs.h).
namespace rereg {
constexpr std::uint32_t kChangeTranslation = 1u << 0;
constexpr std::uint32_t kChangePd = 1u << 1;
constexpr std::uint32_t kChangeAccess = 1u << 2;
constexpr std::uint32_t kSupported = kChangeTranslation | kChangePd | kChangeAccess;
}  // namespace rereg

enum class MwType : std::uint8_t { Type1 = 1, Type2 = 2 };

struct KeyResult {
    int error = 0;
    std::uint32_t key = 0;
};

// ibv_advise_mr(3) on one SGE: where its bytes are in the owner's memory.
struct PrefetchTarget {
    int error = 0;           // 0, ENOENT (no prefetchable MR) or EFAULT (range)
    std::uint64_t host = 0;  // the client address of the SGE's first byte
};

struct BindRequest {
    std::uint32_t owner = 0;
    std::uint32_t mw_key = 0;   // type 1: the window's current rkey; type 2: the new rkey
    std::uint32_t mr_lkey = 0;
    std::uint64_t addr = 0;     // in the MR's iova space
    std::uint64_t length = 0;
    std::uint32_t access = 0;   // what the window grants
    std::uint32_t qpn = 0;      // the QP the bind is posted on
    std::uint32_t qp_pd = 0;
};

struct RemoteRequest {
    MrKey rkey;
    PdHandle pd;  // PD of the QP the request arrived on
    Qpn qpn;
    std::uint32_t qp_access = 0;  // the QP's qp_access_flags
    RemoteOp op = RemoteOp::Read;
    std::uint64_t va = 0;
    std::uint64_t length = 0;
    Peer peer;
};

// A passed check: where the bytes are. Valid while the caller's guard lives.
struct Translation {
    CheckStatus status = CheckStatus::Ok;
    std::uint64_t host_addr = 0;  // process address, or dma-buf offset
    const Descriptor* desc = nullptr;  // nullptr for a zero-length remote access

    [[nodiscard]] bool ok() const { return status == CheckStatus::Ok; }
};

struct TableCounts {
    std::size_t mrs = 0;
    std::size_t mws = 0;
    std::size_t relaxed_pools = 0;
    std::size_t relaxed_slots = 0;
};

class MrTable {
public:
    explicit MrTable(PdTable& pds, Limits limits = {});
    ~MrTable();
    MrTable(const MrTable&) = delete;
    MrTable& operator=(const MrTable&) = delete;

    [[nodiscard]] const Limits& limits() const { return limits_; }
    [[nodiscard]] EpochDomain& epoch() const { return epoch_; }

    // ---- control path ----
    Registered reg_mr(const RegRequest& r);
    // ibv_rereg_mr(3): `flags` says which of r's pd / translation / access
    // apply. Keys stay the same. EBUSY while windows are bound to the MR.
    int rereg_mr(std::uint32_t lkey, std::uint32_t flags, const RegRequest& r);
    // EBUSY while a memory window is bound to the MR (ibv_dereg_mr(3) notes).
    int dereg_mr(std::uint32_t lkey, std::uint32_t owner);

    KeyResult alloc_mw(std::uint32_t pd, std::uint32_t owner, MwType type);
    int dealloc_mw(std::uint32_t rkey, std::uint32_t owner);
    // Type 1 (ibv_bind_mw): returns the window's new rkey; length 0 unbinds.
    KeyResult bind_mw_type1(const BindRequest& r);
    // Type 2 (IBV_WR_BIND_MW): the window must be free; r.mw_key carries the
    // key byte the consumer chose. Remote access then only from r.qpn.
    int bind_mw_type2(const BindRequest& r);
    // IBV_WR_BIND_MW from a send queue, for either type: a type 1 window
    // (ibv_bind_mw(3), which posts the bind) takes r.mw_key's key byte as
    // its new rkey and may be bound already; a type 2 one as bind_mw_type2.
    int bind_mw_posted(const BindRequest& r);
    // IBV_WR_LOCAL_INV (qpn absent) or a received SEND_WITH_INV (qpn of the
    // receiving QP, which must be the one the window is bound to). Only type 2
    // windows can be invalidated by a work request.
    int invalidate(std::uint32_t rkey, std::uint32_t pd, std::optional<std::uint32_t> receiving_qpn);

    // ibv_advise_mr(3) prefetch of [addr, addr + length) through `lkey`
    // (mr_prefetch.cc). As mlx5: ENOENT unless the lkey names an on-demand
    // MR of `pd` owned by `owner`, writable when `write` (PREFETCH_WRITE);
    // EFAULT when the range is not inside it.
    [[nodiscard]] PrefetchTarget prefetch_target(std::uint32_t owner, std::uint32_t pd, std::uint32_t lkey,
                                                 std::uint64_t addr, std::uint64_t length, bool write) const;

    // Relaxed-MR pools (relaxed_pool.h). The shared pool memory must outlive
    // the pool. Returns nullptr and sets `error` on failure.
    RelaxedPool* create_relaxed_pool(std::uint32_t pd, std::uint32_t owner, const RelaxedPoolConfig& config,
                                     uroce_relaxed_pool_header* shared, int& error);
    int destroy_relaxed_pool(RelaxedPool* pool, std::uint32_t owner);

    // Destroys everything `owner` registered (a client that exited).
    // Returns how many objects were destroyed.
    std::size_t destroy_owner(std::uint32_t owner);

    [[nodiscard]] TableCounts counts() const;
    [[nodiscard]] PdStats pd_stats(std::uint32_t pd) const;

    // Every memory region (not windows, not relaxed-pool slots) whose key
    // index is at least `first_index`, in ascending key-index order, until
    // `visit` returns false: for stats, so a listing can be read in pages
    // that stay in order while MRs come and go. Runs under the control
    // mutex: `visit` must not call back into the table, and the descriptor
    // it sees is only valid during the call.
    void for_each_mr(const std::function<bool(const Descriptor&)>& visit, std::uint32_t first_index = 0) const;

    // ---- data path: no table lock (stale relaxed accesses excepted, see top); hold an EpochGuard on epoch() ----
    // `qpn` (the QP that posted the work request) only feeds stale-access reports.
    [[nodiscard]] Translation check_local(const EpochGuard& guard, MrKey lkey, PdHandle pd, std::uint64_t addr,
                                          std::uint64_t length, bool device_writes, Qpn qpn = Qpn{}) const;
    [[nodiscard]] Translation check_remote(const EpochGuard& guard, const RemoteRequest& r) const;
    // After check_remote answered `status` (not Ok) for `r`: which condition
    // failed and what the key names (mr_diagnose.cc). Failure paths only.
    [[nodiscard]] AccessDiagnosis diagnose_remote(const EpochGuard& guard, const RemoteRequest& r,
                                                  CheckStatus status) const;
    // Called with every stale relaxed-MR access report (report_stale), on the
    // data path's thread, after the pool recorded it. Set before serving.
    void set_stale_observer(std::function<void(const StaleAccessReport&)> observer) {
        stale_observer_ = std::move(observer);
    }

private:
    struct Entry {
        std::atomic<const Descriptor*> desc{nullptr};
        std::uint8_t last_key_byte = 0;    // control path only
        std::uint32_t bound_windows = 0;   // control path only
    };
    static constexpr std::uint32_t kSegmentBits = 12;
    static constexpr std::uint32_t kSegmentSize = 1u << kSegmentBits;
    static constexpr std::uint32_t kSegments = (kMaxIndex + 1) >> kSegmentBits;

    [[nodiscard]] Entry* entry(std::uint32_t index) const;
    Entry& entry_for_write(std::uint32_t index);
    [[nodiscard]] const Descriptor* lookup(MrKey key) const;
    [[nodiscard]] const Descriptor* owned(MrKey key, std::uint32_t owner) const;

    int allocate_index(std::uint32_t& index);
    int allocate_block(std::uint32_t count, std::uint32_t& base);
    void free_index(std::uint32_t index);
    void publish(std::uint32_t index, const Descriptor* d);
    void retire(const Descriptor* d);
    void notify_stale(const StaleAccessReport& report) const {
        if (stale_observer_) {
            stale_observer_(report);
        }
    }

    // Builds the descriptor reg_mr / rereg_mr would publish, or an errno.
    int make_mr(const RegRequest& r, Descriptor& d) const;
    int dereg_locked(const Descriptor* d);
    // Unpublishes an MR or window and frees its entry; `count` is mr_count_ or mw_count_.
    void remove_locked(const Descriptor* d, std::size_t& count);
    int dealloc_mw_locked(const Descriptor* d);
    void unbind_locked(const Descriptor* mw);
    // Binds (or, length 0, unbinds) a type 1 window and gives it the rkey
    // with `new_key_byte`.
    int bind_type1_locked(const Descriptor* mw, const BindRequest& r, std::uint8_t new_key_byte);

    PdTable& pds_;
    Limits limits_;
    mutable EpochDomain epoch_;
    std::unique_ptr<std::atomic<Entry*>[]> segments_;

    mutable std::mutex mutex_;  // the control path
    std::vector<std::uint32_t> free_indices_;
    std::uint32_t high_water_ = 1;  // index 0 is never used: key 0 names nothing
    std::size_t mr_count_ = 0;
    std::size_t mw_count_ = 0;
    std::size_t reclaim_at_ = 1024;  // retire() reclaims when more than this are pending
    std::unordered_map<std::uint32_t, std::unordered_set<std::uint32_t>> by_owner_;  // owner -> indices
    std::vector<std::unique_ptr<RelaxedPool>> pools_;
    std::function<void(const StaleAccessReport&)> stale_observer_;
};

}  // namespace uroce::mr
