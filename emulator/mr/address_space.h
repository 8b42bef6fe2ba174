// What is mapped in a client process, as the memory-registration checks need
// to know it: registrations check that their range is mapped (and writable
// when the MR may be written), implicit on-demand MRs check every access
// against the real mappings when it happens, and HUGETLB registrations check
// that the range is backed by huge pages.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/unique_fd.h"

namespace uroce::mr {

class AddressSpace {
public:
    virtual ~AddressSpace() = default;
    // True when all of [addr, addr+len) is mapped readable (and writable if
    // `write`). A zero-length range is accessible.
    [[nodiscard]] virtual bool accessible(std::uint64_t addr, std::uint64_t len, bool write) const = 0;
    // The page size backing all of [addr, addr+len) when every page of it is a
    // huge page (hugetlbfs or anonymous MAP_HUGETLB), else nothing.
    [[nodiscard]] virtual std::optional<std::uint64_t> huge_page_size(std::uint64_t addr, std::uint64_t len) const = 0;
    // True once the address space has ended (its process exited or exec'ed):
    // nothing is mapped there any more, and nothing ever will be.
    [[nodiscard]] virtual bool gone() const { return false; }
};

// A client that handed no address space over (before its HELLO): nothing is
// mapped, so no registration of process memory passes.
class NoAddressSpace final : public AddressSpace {
public:
    [[nodiscard]] bool accessible(std::uint64_t, std::uint64_t len, bool) const override { return len == 0; }
    [[nodiscard]] std::optional<std::uint64_t> huge_page_size(std::uint64_t, std::uint64_t) const override {
        return std::nullopt;
    }
};

// One mapping, as /proc/PID/maps (or smaps, or PROCMAP_QUERY) describes it.
struct Mapping {
    std::uint64_t start = 0;
    std::uint64_t end = 0;
    bool readable = false;
    bool writable = false;
    std::uint64_t kernel_page_size = 4096;
    std::string path;
};

// Parses the text of /proc/PID/smaps (or maps, which lacks page sizes).
[[nodiscard]] std::vector<Mapping> parse_smaps(const std::string& text);

// A live process, asked through its /proc/PID/maps opened by the process
// itself (handed over at HELLO): the kernel bound that file to the process's
// address space at open, so after an exec or exit it shows nothing, whatever
// process has the pid by then. Every question is answered from the mappings
// of that moment: with the PROCMAP_QUERY ioctl (Linux 6.11), one query per
// mapping the range touches, so the cost does not grow with the number of
// mappings the process has; on older kernels by reading the whole text
// (which has no page sizes: huge_page_size then never finds huge pages).
class ProcessAddressSpace final : public AddressSpace {
public:
    explicit ProcessAddressSpace(UniqueFd maps) : maps_(std::move(maps)) {}
    // Opens /proc/PID/maps (tests; the daemon gets the file from the client).
    // Empty (errno set) when it cannot.
    static UniqueFd open_maps(pid_t pid);

    [[nodiscard]] bool accessible(std::uint64_t addr, std::uint64_t len, bool write) const override;
    [[nodiscard]] std::optional<std::uint64_t> huge_page_size(std::uint64_t addr, std::uint64_t len) const override;
    [[nodiscard]] bool gone() const override;

private:
    enum class Query : std::uint8_t { Found, NoMapping, Gone, Unsupported };
    // The mapping covering `addr`, by PROCMAP_QUERY.
    [[nodiscard]] Query query(std::uint64_t addr, Mapping& out) const;
    // Walks the mappings over [addr, addr + len) as covered_by does, by
    // query when the kernel has it, else over the whole text.
    template <typename Pred>
    [[nodiscard]] bool walk(std::uint64_t addr, std::uint64_t len, Pred ok) const;
    [[nodiscard]] std::vector<Mapping> read_all() const;

    UniqueFd maps_;
};

// Walks `maps` (sorted, as the kernel lists them) over [addr, addr+len); calls
// `ok` on each mapping touched; false when a gap or a refused mapping is met.
template <typename Pred>
[[nodiscard]] bool covered_by(const std::vector<Mapping>& maps, std::uint64_t addr, std::uint64_t len, Pred ok) {
    if (len == 0) {
        return true;
    }
    if (addr + len < addr) {
        return false;  // wraps the address space
    }
    std::uint64_t cur = addr;
    const std::uint64_t end = addr + len;
    for (const auto& m : maps) {
        if (m.end <= cur) {
            continue;
        }
        if (m.start > cur || !ok(m)) {
            return false;
        }
        cur = m.end;
        if (cur >= end) {
            return true;
        }
    }
    return false;
}

}  // namespace uroce::mr
