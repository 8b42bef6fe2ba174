// The one owner of each memory region's memory path in the daemon: its
// entry in the key table (mr::MrTable, which keeps mr_check.cc's checks),
// the reference its shared range holds on a mapping of the client's memory
// (dma::ClientMemory::add_shared, the zero-copy way), and its quota charge
// (client_quota.h). REG_MR, REREG_MR and DEREG_MR change all three here in
// one step, and a departed client's references go here too, so the key
// table, the mappings and the quota cannot drift apart.
//
// The MR table entries of a departed client go with Device::close_client
// (MrTable::destroy_owner, which also unbinds its windows in order);
// forget_client() must run before its dma::ClientMemory is destroyed.
// One thread: the daemon's loop (the control server and the data path).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>

#include "client_quota.h"
#include "dma/client_memory.h"
#include "mr/mr_table.h"

namespace uroce::daemon {

// What a registration with UROCE_REG_SHARED carries: client addresses
// [addr, addr + length) show the bytes of `fd` from `offset` on.
struct SharedMemory {
    std::uint64_t addr = 0;
    std::uint64_t length = 0;
    std::uint64_t offset = 0;
    int fd = -1;  // the request's fd: the mapping is the daemon's own, the caller closes it
};

class MrRegistrations {
public:
    // Where a client's memory is reached (the data path's), or nullptr.
    using MemoryOf = std::function<dma::ClientMemory*(std::uint32_t client)>;

    MrRegistrations(mr::MrTable& mrs, ClientQuota& quota) : mrs_(mrs), quota_(quota) {}
    MrRegistrations(const MrRegistrations&) = delete;
    MrRegistrations& operator=(const MrRegistrations&) = delete;

    // Without it (no data path) no MR is shared: every one takes the copying way.
    void set_memory(MemoryOf memory_of) { memory_of_ = std::move(memory_of); }

    // ibv_reg_mr: the table entry, then its shared mapping when `shared`
    // names memory that covers the MR and can be mapped within the client's
    // quota; otherwise the MR works through the copying way.
    mr::Registered reg(const mr::RegRequest& r, const std::optional<SharedMemory>& shared);
    // ibv_reg_dmabuf_mr (r.backing DmaBuf, r.addr the offset into `fd`):
    // maps the dma-buf's pages covering the MR, MAP_SHARED, into the owner's
    // memory at a window of its own (kDmaBufWindowBase and up, where no user
    // address lies), and makes the MR translate to that window, so the data
    // path serves it the shared way like any shared MR. A dma-buf that
    // cannot be mapped fails the registration (docs/memory-registration.md):
    // EINVAL when `fd` is no dma-buf (nor a sealed memfd standing in for
    // one) or is shorter than offset + length, EBADF, ENOMEM, or the
    // exporter's mmap error. Without a data path the MR is only recorded.
    mr::Registered reg_dmabuf(mr::RegRequest r, int fd);
    // Whether `lkey` is a dma-buf MR this class mapped.
    [[nodiscard]] bool is_mapped_dmabuf(std::uint32_t lkey) const;
    // ibv_rereg_mr(3) of `lkey` (flags: mr::rereg); with a new translation
    // the MR's shared reference follows it (kept, replaced or dropped).
    int rereg(std::uint32_t lkey, std::uint32_t flags, const mr::RegRequest& r,
              const std::optional<SharedMemory>& shared);
    // ibv_dereg_mr: the table entry, the shared reference and the charge.
    int dereg(std::uint32_t lkey, std::uint32_t owner);
    // A departed client: drops its MRs' shared references and records.
    void forget_client(std::uint32_t client);

    // MRs that hold a shared reference now.
    [[nodiscard]] std::size_t shared_count() const { return shared_by_lkey_.size(); }

    // dma-buf windows: 2^63 is past every user address (the copying way
    // refuses it), and each MR gets 2^36 bytes (64 GiB, the largest dma-buf
    // MR taken) of the 2^63 above it: 2^27 windows, reused round-robin.
    static constexpr std::uint64_t kDmaBufWindowBase = std::uint64_t{1} << 63;
    static constexpr unsigned kDmaBufWindowShift = 36;
    static constexpr std::uint64_t kDmaBufWindows = std::uint64_t{1} << (63 - kDmaBufWindowShift);

private:
    // The range an MR holds a reference on (ClientMemory::add_shared).
    struct SharedRange {
        std::uint32_t client = 0;
        std::uint64_t addr = 0;
        std::uint64_t length = 0;
    };

    // Gives MR `lkey` (of `r.owner`, covering r.addr/r.length) its memory
    // after a new translation: shared or not. Returns its quota charge.
    Charge attach_memory(std::uint32_t lkey, const mr::RegRequest& r, const std::optional<SharedMemory>& shared);
    // Maps `shared` for `lkey`; the new reference is taken before the old
    // one goes, so a rereg within the same memory keeps its mapping. 0 or an errno.
    int share(std::uint32_t lkey, std::uint32_t client, const SharedMemory& shared);
    void unshare(std::uint32_t lkey);

    mr::MrTable& mrs_;
    ClientQuota& quota_;
    MemoryOf memory_of_;
    std::unordered_map<std::uint32_t, SharedRange> shared_by_lkey_;
    std::uint64_t next_dmabuf_window_ = 0;
};

}  // namespace uroce::daemon
