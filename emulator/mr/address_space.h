// What is mapped in a client process, as the memory-registration checks need
// to know it: implicit on-demand MRs check every access against the real
// mappings when it happens, and HUGETLB registrations check that the range
// is backed by huge pages.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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
};

// One mapping, as /proc/PID/smaps describes it.
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

// A live process, read from /proc/PID/smaps on every question, so the answer
// is what is mapped at that moment.
class ProcessAddressSpace final : public AddressSpace {
public:
    explicit ProcessAddressSpace(pid_t pid) : pid_(pid) {}
    [[nodiscard]] bool accessible(std::uint64_t addr, std::uint64_t len, bool write) const override;
    [[nodiscard]] std::optional<std::uint64_t> huge_page_size(std::uint64_t addr, std::uint64_t len) const override;

private:
    [[nodiscard]] std::vector<Mapping> mappings() const;
    pid_t pid_;
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
