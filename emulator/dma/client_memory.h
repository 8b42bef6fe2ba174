// How the daemon reaches one client process's memory: the DMA interface of
// the device. Two ways behind it (docs/architecture.md, docs/security.md):
//  - shared mappings (the fast path): ranges of the client's address space
//    that are backed by a memfd the daemon also maps (the provider remaps
//    private anonymous memory onto one at registration, FreeFlow-style:
//    verbs_provider/memory_sharing.h). Access is a memcpy.
//  - copying (the fallback, any memory): pread / pwrite on the client's own
//    /proc/self/mem, which the client opened and handed over at HELLO. The
//    daemon never names the client by pid: the kernel bound that file to the
//    client's address space when the client opened it (proc(5), mem), so the
//    daemon reaches exactly what the client itself can, and once the client
//    execs (a setuid program included) or exits the file reaches nothing,
//    whatever process later has that pid.
// A transfer whose whole range lies inside one shared mapping takes the fast
// path; anything else copies. Every call reports which way it went in the
// counters.
//
// Atomics (8 bytes, 8-byte aligned) are serialised by the device: the daemon
// runs them from one thread, and on shared mappings they are real atomic
// instructions, so they are also atomic against other devices' atomics
// (IBV_ATOMIC_HCA). On the copying path they are a read and a write: atomic
// against everything the daemon does, not against the client's own CPU
// accesses (as with a NIC without IBV_ATOMIC_GLOB).
//
// Never writes outside [addr, addr + len) of the client; a range the client
// has not mapped fails with EFAULT (checked by the kernel on the copying
// path, by the mapping bounds on the shared path). A write that fails may
// have written a prefix of its range, as a NIC's DMA would. The kernel
// writes through /proc/PID/mem with FOLL_FORCE: a private mapping the client
// made read-only after registering it is still written, as a NIC writes a
// page pinned for write; the MR table only lets writes reach MRs whose range
// was writable when registered (mr_table.cc make_mr).
//
// Threads: transfers, add_shared and remove_shared must not run concurrently
// (the daemon's engine thread owns an instance); counters() may be read from
// any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <vector>

#include "common/unique_fd.h"

namespace uroce::dma {

struct DmaCounters {
    std::uint64_t shared_ops = 0;
    std::uint64_t shared_bytes = 0;
    std::uint64_t copy_ops = 0;
    std::uint64_t copy_bytes = 0;
    std::uint64_t faults = 0;  // operations that failed (EFAULT and other errors)
};

enum class Way : std::uint8_t { Shared, Copy };

// Opens /proc/PID/mem for reading and writing: what a client does with
// "self" before handing it over, and what tests do for a child they may
// ptrace. Empty (errno set) when it cannot.
UniqueFd open_process_memory(pid_t pid);

class ClientMemory {
public:
    // `process_memory`: an open /proc/PID/mem of the client (read-write), or
    // an empty UniqueFd for a client that handed none: then only shared
    // mappings are reachable and every copy fails with EFAULT.
    explicit ClientMemory(UniqueFd process_memory);
    ~ClientMemory();
    ClientMemory(const ClientMemory&) = delete;
    ClientMemory& operator=(const ClientMemory&) = delete;

    // Gives a client made without its mem file that file (at its HELLO).
    // False, and nothing changes, when it has one already.
    bool attach(UniqueFd process_memory);

    // Records that client addresses [addr, addr + length) show the bytes of
    // `fd` from `offset` on (what a REG_MR with UROCE_REG_SHARED carries),
    // taking one reference. Page-aligned addr, length and offset.
    //
    // When an existing mapping of the same file already covers the range at
    // the same offsets (a second MR in memory the provider remapped once),
    // this only counts a reference. Otherwise the file is mapped (MAP_SHARED,
    // read and write) and replaces, for lookups, any mapping it overlaps
    // (the client must have remapped those addresses); a replaced mapping
    // stays mapped until its references are removed.
    //
    // Only files sealed against shrinking (F_SEAL_SHRINK, as the provider's
    // memfds are) or dma-bufs (whose size never changes), at least offset +
    // length long, are mapped: a client truncating a mapped file would
    // otherwise kill the daemon with SIGBUS.
    // 0, or an errno (EINVAL: misaligned or empty range, short file, not a
    // file; EPERM: not sealed; EBADF; ENOMEM; what the dma-buf's exporter
    // answers mmap); then the range simply goes the copying way.
    // `addr` need not be a user address: dma-buf MRs are given a window at
    // 2^63 and up, which only this mapping serves (mr_registrations.h).
    // The daemon keeps its own mapping: `fd` may be closed after the call.
    int add_shared(std::uint64_t addr, std::uint64_t length, int fd, std::uint64_t offset);
    // Drops the reference add_shared(addr, length, ...) took (the same addr
    // and length); the last reference of a mapping unmaps it. Unknown ranges
    // are ignored.
    void remove_shared(std::uint64_t addr, std::uint64_t length);

    // Which way a transfer of [addr, addr + len) would go.
    [[nodiscard]] Way way(std::uint64_t addr, std::uint64_t len) const;
    // Mappings currently held (live or replaced but still referenced).
    [[nodiscard]] std::size_t shared_mappings() const { return mappings_.size(); }

    // 0 or an errno: EFAULT (not mapped, or outside user addresses), ESRCH
    // (the address space is gone: the client exited or exec'ed), EBADF (the
    // file was not opened for that direction), ENOMEM.
    // A zero-length transfer succeeds without touching anything.
    int read(std::uint64_t addr, void* dst, std::size_t len);
    int write(std::uint64_t addr, const void* src, std::size_t len);
    // `original` receives the value before the operation. EINVAL when addr is
    // not 8-byte aligned (the engine NAKs those before reaching here).
    int fetch_add(std::uint64_t addr, std::uint64_t add, std::uint64_t& original);
    int compare_swap(std::uint64_t addr, std::uint64_t compare, std::uint64_t swap, std::uint64_t& original);

    [[nodiscard]] DmaCounters counters() const;

private:
    struct Mapping {
        std::uint64_t start = 0;   // client address
        std::uint64_t length = 0;
        std::uint8_t* base = nullptr;  // the daemon's view
        dev_t dev = 0;             // the file, to recognise a second add of it
        ino_t ino = 0;
        std::uint64_t file_offset = 0;
        bool live = true;          // found by lookups (not replaced)
        // (addr, length) of each add_shared that holds a reference.
        std::vector<std::pair<std::uint64_t, std::uint64_t>> refs;
    };
    // Counters written by the owning thread only, read by any thread: a
    // relaxed load and store each (no locked instruction on the data path).
    struct AtomicCounters {
        std::atomic<std::uint64_t> shared_ops{0};
        std::atomic<std::uint64_t> shared_bytes{0};
        std::atomic<std::uint64_t> copy_ops{0};
        std::atomic<std::uint64_t> copy_bytes{0};
        std::atomic<std::uint64_t> faults{0};
    };

    // A pointer to the daemon's view of [addr, addr + len), or nullptr.
    [[nodiscard]] std::uint8_t* shared_view(std::uint64_t addr, std::uint64_t len) const;
    void retire(Mapping& m);
    void unmap(std::list<Mapping>::iterator it);
    // The copying way: one pread/pwrite loop on the client's mem file.
    int copy(std::uint64_t addr, void* local, std::size_t len, bool to_client);
    int count(Way way, std::size_t bytes, int err);

    UniqueFd process_memory_;
    std::list<Mapping> mappings_;               // stable addresses for live_
    std::map<std::uint64_t, Mapping*> live_;    // by client start, never overlapping
    AtomicCounters counters_;
};

}  // namespace uroce::dma
