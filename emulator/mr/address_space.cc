#include "address_space.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>

namespace uroce::mr {

namespace {

// PROCMAP_QUERY (include/uapi/linux/fs.h, Linux 6.11): the mapping covering
// an address, asked of an open /proc/PID/maps. Spelled out here because the
// distribution's kernel headers may predate it; the layout is kernel ABI.
struct ProcmapQuery {
    std::uint64_t size;           // sizeof(ProcmapQuery), for extension
    std::uint64_t query_flags;    // in: 0 = the mapping covering query_addr
    std::uint64_t query_addr;     // in
    std::uint64_t vma_start;      // out
    std::uint64_t vma_end;        // out
    std::uint64_t vma_flags;      // out: kVma* below
    std::uint64_t vma_page_size;  // out: the kernel's page size for it
    std::uint64_t vma_offset;     // out
    std::uint64_t inode;          // out
    std::uint32_t dev_major;      // out
    std::uint32_t dev_minor;      // out
    std::uint32_t vma_name_size;  // in/out: 0, no name wanted
    std::uint32_t build_id_size;  // in/out: 0, no build id wanted
    std::uint64_t vma_name_addr;  // in
    std::uint64_t build_id_addr;  // in
};
static_assert(sizeof(ProcmapQuery) == 104);
constexpr std::uint64_t kVmaReadable = 0x01;  // PROCMAP_QUERY_VMA_READABLE
constexpr std::uint64_t kVmaWritable = 0x02;  // PROCMAP_QUERY_VMA_WRITABLE
constexpr std::uint64_t kCoveringOrNext = 0x10;  // PROCMAP_QUERY_COVERING_OR_NEXT_VMA
// _IOWR('f', 17, struct procmap_query)
constexpr unsigned long kProcmapQuery = _IOWR('f', 17, ProcmapQuery);

constexpr std::uint64_t kBasePage = 4096;
// /proc/PID/maps is read in chunks of this size on kernels without the query.
constexpr std::size_t kReadChunk = 64 * 1024;

}  // namespace

std::vector<Mapping> parse_smaps(const std::string& text) {
    std::vector<Mapping> maps;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        // Mapping lines: "start-end perms offset dev inode [path]"; attribute
        // lines: "Name:   value kB".
        const auto dash = line.find('-');
        const auto space = line.find(' ');
        if (dash != std::string::npos && space != std::string::npos && dash < space &&
            line.find(':') > space) {
            Mapping m;
            try {
                m.start = std::stoull(line.substr(0, dash), nullptr, 16);
                m.end = std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
            } catch (const std::exception&) {
                continue;
            }
            if (space + 2 < line.size()) {
                m.readable = line[space + 1] == 'r';
                m.writable = line[space + 2] == 'w';
            }
            std::istringstream fields(line.substr(space + 1));
            std::string perms, offset, dev, inode;
            fields >> perms >> offset >> dev >> inode;
            std::getline(fields >> std::ws, m.path);
            maps.push_back(m);
        } else if (!maps.empty() && line.rfind("KernelPageSize:", 0) == 0) {
            std::istringstream v(line.substr(15));
            std::uint64_t kb = 0;
            if (v >> kb) {
                maps.back().kernel_page_size = kb * 1024;
            }
        }
    }
    return maps;
}

UniqueFd ProcessAddressSpace::open_maps(pid_t pid) {
    const std::string path = "/proc/" + std::to_string(pid) + "/maps";
    return UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
}

ProcessAddressSpace::Query ProcessAddressSpace::query(std::uint64_t addr, Mapping& out) const {
    ProcmapQuery q{};
    q.size = sizeof q;
    q.query_addr = addr;
    if (::ioctl(maps_.get(), kProcmapQuery, &q) != 0) {
        switch (errno) {
            case ENOENT:
                return Query::NoMapping;
            case ESRCH:
                return Query::Gone;  // the address space ended (exit, exec)
            case ENOTTY:
            case EINVAL:
            case EOPNOTSUPP:
                return Query::Unsupported;
            default:
                return Query::NoMapping;
        }
    }
    out.start = q.vma_start;
    out.end = q.vma_end;
    out.readable = (q.vma_flags & kVmaReadable) != 0;
    out.writable = (q.vma_flags & kVmaWritable) != 0;
    out.kernel_page_size = q.vma_page_size != 0 ? q.vma_page_size : kBasePage;
    return Query::Found;
}

std::vector<Mapping> ProcessAddressSpace::read_all() const {
    std::string text;
    std::string chunk(kReadChunk, '\0');
    for (off_t at = 0;;) {
        const ssize_t got = ::pread(maps_.get(), chunk.data(), chunk.size(), at);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got <= 0) {
            break;
        }
        text.append(chunk.data(), static_cast<std::size_t>(got));
        at += got;
    }
    return parse_smaps(text);
}

template <typename Pred>
bool ProcessAddressSpace::walk(std::uint64_t addr, std::uint64_t len, Pred ok) const {
    if (len == 0) {
        return true;
    }
    if (addr + len < addr || !maps_.valid()) {
        return false;
    }
    const std::uint64_t end = addr + len;
    for (std::uint64_t cur = addr; cur < end;) {
        Mapping m;
        switch (query(cur, m)) {
            case Query::Found:
                // Mappings are contiguous only if the next one starts where
                // this ends: the next query (at m.end) finds a gap otherwise.
                if (m.start > cur || m.end <= cur || !ok(m)) {
                    return false;
                }
                cur = m.end;
                break;
            case Query::Unsupported:
                return covered_by(read_all(), cur, end - cur, ok);
            case Query::NoMapping:
            case Query::Gone:
                return false;
        }
    }
    return true;
}

bool ProcessAddressSpace::accessible(std::uint64_t addr, std::uint64_t len, bool write) const {
    return walk(addr, len, [write](const Mapping& m) { return m.readable && (!write || m.writable); });
}

std::optional<std::uint64_t> ProcessAddressSpace::huge_page_size(std::uint64_t addr, std::uint64_t len) const {
    std::uint64_t size = 0;
    const bool huge = walk(addr, len, [&size](const Mapping& m) {
        if (m.kernel_page_size <= kBasePage || (size != 0 && m.kernel_page_size != size)) {
            return false;
        }
        size = m.kernel_page_size;
        return true;
    });
    if (!huge || size == 0) {
        return std::nullopt;
    }
    return size;
}

// A live process always has a mapping (its stack at least), so a maps file
// that shows none belongs to an address space that has ended.
bool ProcessAddressSpace::gone() const {
    if (!maps_.valid()) {
        return true;
    }
    ProcmapQuery q{};
    q.size = sizeof q;
    q.query_flags = kCoveringOrNext;  // from address 0: the first mapping
    if (::ioctl(maps_.get(), kProcmapQuery, &q) == 0) {
        return false;
    }
    if (errno == ESRCH) {
        return true;
    }
    if (errno != ENOTTY && errno != EINVAL && errno != EOPNOTSUPP) {
        return false;  // ENOENT cannot be for a live process; be conservative
    }
    char byte = 0;
    ssize_t got = 0;
    do {
        got = ::pread(maps_.get(), &byte, 1, 0);
    } while (got < 0 && errno == EINTR);
    return got == 0;
}

}  // namespace uroce::mr
