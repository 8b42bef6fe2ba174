// Protection domains: handles owned by one client each, with a count of the
// objects (MRs, windows, relaxed pools) that reference them, so a PD in use
// cannot be deallocated (EBUSY, as ibv_dealloc_pd(3) says).
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace uroce::mr {

class PdTable {
public:
    explicit PdTable(std::uint32_t max_pd = 1u << 20) : max_pd_(max_pd) {}

    // 0 and the new handle, or ENOMEM.
    struct Alloc {
        int error;
        std::uint32_t pd;
    };
    Alloc alloc(std::uint32_t owner);
    // EINVAL: no such PD of this owner; EBUSY: objects still use it.
    int dealloc(std::uint32_t pd, std::uint32_t owner);
    [[nodiscard]] bool owned_by(std::uint32_t pd, std::uint32_t owner) const;

    // Object references, taken and released by the tables that hold objects.
    void ref(std::uint32_t pd);
    void unref(std::uint32_t pd);

    // Deallocates every PD of `owner`, in use or not (the owner has gone and
    // its objects were destroyed first). Returns how many.
    std::size_t destroy_owner(std::uint32_t owner);

    [[nodiscard]] std::size_t count() const;
    [[nodiscard]] std::uint32_t max_pd() const { return max_pd_; }

private:
    struct Pd {
        std::uint32_t owner;
        std::uint32_t refs;
    };
    mutable std::mutex mutex_;
    std::unordered_map<std::uint32_t, Pd> pds_;
    std::uint32_t next_ = 1;
    std::uint32_t max_pd_;
};

}  // namespace uroce::mr
