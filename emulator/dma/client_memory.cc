#include "client_memory.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>

namespace uroce::dma {

namespace {

constexpr std::uint64_t kAtomicBytes = 8;  // IBTA atomics operate on 64 bits

std::uint64_t page_size() {
    static const auto size = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
    return size;
}

// Single writer: a relaxed load and store, which is a plain add on x86,
// while readers on other threads still see whole values.
void bump(std::atomic<std::uint64_t>& counter, std::uint64_t by) {
    counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

std::uint64_t& word_at(std::uint8_t* p) {
    return *static_cast<std::uint64_t*>(static_cast<void*>(p));
}

// What a file handed to add_shared is, as far as mapping it safely goes.
enum class SharedFile : std::uint8_t {
    Sealed,    // a regular file sealed against shrinking (the provider's memfds)
    DmaBuf,    // a dma-buf: its size is fixed for its life (dma_buf_export)
    Unsealed,  // a regular file its owner could truncate under our mapping
    Other,     // anything else (a socket, a pipe, a device)
};

SharedFile kind_of(int fd, const struct stat& st) {
    struct statfs fs {};
    // Every dma-buf lives on the kernel's dma-buf file system.
    if (::fstatfs(fd, &fs) == 0 && fs.f_type == DMA_BUF_MAGIC) {
        return SharedFile::DmaBuf;
    }
    if (!S_ISREG(st.st_mode)) {
        return SharedFile::Other;
    }
    // Without F_SEAL_SHRINK the client could truncate the file under our
    // mapping, and our next access would raise SIGBUS in the daemon.
    const int seals = ::fcntl(fd, F_GET_SEALS);
    return seals >= 0 && (seals & F_SEAL_SHRINK) != 0 ? SharedFile::Sealed : SharedFile::Unsealed;
}

}  // namespace

UniqueFd open_process_memory(pid_t pid) {
    const std::string path = "/proc/" + std::to_string(pid) + "/mem";
    return UniqueFd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
}

ClientMemory::ClientMemory(UniqueFd process_memory) : process_memory_(std::move(process_memory)) {}

bool ClientMemory::attach(UniqueFd process_memory) {
    if (process_memory_.valid() || !process_memory.valid()) {
        return false;
    }
    process_memory_ = std::move(process_memory);
    return true;
}

ClientMemory::~ClientMemory() {
    for (const Mapping& m : mappings_) {
        ::munmap(m.base, m.length);
    }
}

int ClientMemory::add_shared(std::uint64_t addr, std::uint64_t length, int fd, std::uint64_t offset) {
    const std::uint64_t page = page_size();
    if (length == 0 || addr % page != 0 || length % page != 0 || offset % page != 0 || addr + length < addr ||
        offset + length < offset) {
        return EINVAL;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        return errno;
    }
    switch (kind_of(fd, st)) {
        case SharedFile::Sealed:
        case SharedFile::DmaBuf:
            break;
        case SharedFile::Unsealed:
            return EPERM;
        case SharedFile::Other:
            return EINVAL;
    }
    if (st.st_size < 0 || static_cast<std::uint64_t>(st.st_size) < offset + length) {
        return EINVAL;
    }

    // A second MR inside memory whose file we map already: one more reference.
    auto after = live_.upper_bound(addr);
    if (after != live_.begin()) {
        Mapping& m = *std::prev(after)->second;
        if (m.dev == st.st_dev && m.ino == st.st_ino && addr - m.start < m.length &&
            length <= m.length - (addr - m.start) && offset == m.file_offset + (addr - m.start)) {
            m.refs.emplace_back(addr, length);
            return 0;
        }
    }

    void* view = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(offset));
    if (view == MAP_FAILED) {
        return errno;
    }
    // Mappings the new one overlaps describe what the client had there
    // before: lookups stop finding them.
    std::vector<Mapping*> overlapped;
    auto it = live_.lower_bound(addr);
    if (it != live_.begin() && std::prev(it)->second->start + std::prev(it)->second->length > addr) {
        overlapped.push_back(std::prev(it)->second);
    }
    for (; it != live_.end() && it->first < addr + length; ++it) {
        overlapped.push_back(it->second);
    }
    for (Mapping* m : overlapped) {
        retire(*m);
    }

    Mapping& m = mappings_.emplace_back();
    m.start = addr;
    m.length = length;
    m.base = static_cast<std::uint8_t*>(view);
    m.dev = st.st_dev;
    m.ino = st.st_ino;
    m.file_offset = offset;
    m.refs.emplace_back(addr, length);
    live_.emplace(addr, &m);
    return 0;
}

void ClientMemory::retire(Mapping& m) {
    if (m.live) {
        live_.erase(m.start);
        m.live = false;
    }
}

void ClientMemory::unmap(std::list<Mapping>::iterator it) {
    retire(*it);
    ::munmap(it->base, it->length);
    mappings_.erase(it);
}

void ClientMemory::remove_shared(std::uint64_t addr, std::uint64_t length) {
    const std::pair<std::uint64_t, std::uint64_t> ref{addr, length};
    // Live mappings first: a replaced one holding the same range can only
    // be an MR the client remapped memory under, and either choice leaves
    // every transfer correct (an address no live mapping covers copies).
    for (const bool want_live : {true, false}) {
        for (auto it = mappings_.begin(); it != mappings_.end(); ++it) {
            if (it->live != want_live) {
                continue;
            }
            for (auto r = it->refs.begin(); r != it->refs.end(); ++r) {
                if (*r == ref) {
                    it->refs.erase(r);
                    if (it->refs.empty()) {
                        unmap(it);
                    }
                    return;
                }
            }
        }
    }
}

std::uint8_t* ClientMemory::shared_view(std::uint64_t addr, std::uint64_t len) const {
    auto after = live_.upper_bound(addr);
    if (after == live_.begin()) {
        return nullptr;
    }
    const Mapping& m = *std::prev(after)->second;
    const std::uint64_t offset = addr - m.start;  // addr >= m.start here
    if (offset >= m.length || len > m.length - offset) {
        return nullptr;
    }
    return m.base + offset;
}

Way ClientMemory::way(std::uint64_t addr, std::uint64_t len) const {
    return shared_view(addr, len) != nullptr ? Way::Shared : Way::Copy;
}

int ClientMemory::count(Way w, std::size_t bytes, int err) {
    if (err != 0) {
        bump(counters_.faults, 1);
    } else if (w == Way::Shared) {
        bump(counters_.shared_ops, 1);
        bump(counters_.shared_bytes, bytes);
    } else {
        bump(counters_.copy_ops, 1);
        bump(counters_.copy_bytes, bytes);
    }
    return err;
}

// /proc/PID/mem (fs/proc/base.c mem_rw) moves at most a page per step and
// stops at the first page of the range that is not mapped: a short count,
// so loop on the rest. A step that moves nothing reports -EIO (the page is
// not there: EFAULT); a read or write of 0 bytes means the address space is
// gone (the process exited or exec'ed: ESRCH). File offsets are signed:
// addresses from 2^63 up are no user's memory.
int ClientMemory::copy(std::uint64_t addr, void* local, std::size_t len, bool to_client) {
    constexpr auto kMaxOffset = static_cast<std::uint64_t>(std::numeric_limits<off_t>::max());
    if (addr + len < addr || addr + len > kMaxOffset) {
        return EFAULT;
    }
    if (!process_memory_.valid()) {
        return EFAULT;  // the client handed no memory over
    }
    auto* cursor = static_cast<std::uint8_t*>(local);
    std::size_t done = 0;
    while (done < len) {
        const auto at = static_cast<off_t>(addr + done);
        const ssize_t moved = to_client ? ::pwrite(process_memory_.get(), cursor + done, len - done, at)
                                        : ::pread(process_memory_.get(), cursor + done, len - done, at);
        if (moved < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno == EIO ? EFAULT : errno;
        }
        if (moved == 0) {
            return ESRCH;
        }
        done += static_cast<std::size_t>(moved);
    }
    return 0;
}

int ClientMemory::read(std::uint64_t addr, void* dst, std::size_t len) {
    if (len == 0) {
        return 0;
    }
    if (const std::uint8_t* view = shared_view(addr, len); view != nullptr) {
        std::memcpy(dst, view, len);
        return count(Way::Shared, len, 0);
    }
    return count(Way::Copy, len, copy(addr, dst, len, false));
}

int ClientMemory::write(std::uint64_t addr, const void* src, std::size_t len) {
    if (len == 0) {
        return 0;
    }
    if (std::uint8_t* view = shared_view(addr, len); view != nullptr) {
        std::memcpy(view, src, len);
        return count(Way::Shared, len, 0);
    }
    // pwrite only reads the local buffer.
    return count(Way::Copy, len, copy(addr, const_cast<void*>(src), len, true));
}

// The copying way reads the word, computes, and writes it back. That is
// atomic for the device because one thread of the daemon runs every atomic
// (the engine is single-threaded); the client's own CPU stores to the word in
// between are not excluded, which verbs allow (IBV_ATOMIC_HCA).
int ClientMemory::fetch_add(std::uint64_t addr, std::uint64_t add, std::uint64_t& original) {
    if (addr % kAtomicBytes != 0) {
        return EINVAL;
    }
    if (std::uint8_t* view = shared_view(addr, kAtomicBytes); view != nullptr) {
        original = std::atomic_ref<std::uint64_t>(word_at(view)).fetch_add(add, std::memory_order_seq_cst);
        return count(Way::Shared, kAtomicBytes, 0);
    }
    std::uint64_t value = 0;
    int err = copy(addr, &value, kAtomicBytes, false);
    if (err == 0) {
        original = value;
        value += add;
        err = copy(addr, &value, kAtomicBytes, true);
    }
    return count(Way::Copy, kAtomicBytes, err);
}

int ClientMemory::compare_swap(std::uint64_t addr, std::uint64_t compare, std::uint64_t swap,
                               std::uint64_t& original) {
    if (addr % kAtomicBytes != 0) {
        return EINVAL;
    }
    if (std::uint8_t* view = shared_view(addr, kAtomicBytes); view != nullptr) {
        std::uint64_t expected = compare;
        std::atomic_ref<std::uint64_t>(word_at(view)).compare_exchange_strong(expected, swap,
                                                                              std::memory_order_seq_cst);
        original = expected;  // the old value whether or not it matched
        return count(Way::Shared, kAtomicBytes, 0);
    }
    std::uint64_t value = 0;
    int err = copy(addr, &value, kAtomicBytes, false);
    if (err == 0) {
        original = value;
        if (value == compare) {
            err = copy(addr, &swap, kAtomicBytes, true);
        }
    }
    return count(Way::Copy, kAtomicBytes, err);
}

DmaCounters ClientMemory::counters() const {
    constexpr auto relaxed = std::memory_order_relaxed;
    DmaCounters c;
    c.shared_ops = counters_.shared_ops.load(relaxed);
    c.shared_bytes = counters_.shared_bytes.load(relaxed);
    c.copy_ops = counters_.copy_ops.load(relaxed);
    c.copy_bytes = counters_.copy_bytes.load(relaxed);
    c.faults = counters_.faults.load(relaxed);
    return c;
}

}  // namespace uroce::dma
