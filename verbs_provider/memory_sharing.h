// Making registered memory reachable by uroced (the provider's half of the
// DMA layer, emulator/dma/client_memory.h).
//
// Shared mappings (the fast path). At ibv_reg_mr the provider turns the
// registered range into memory the daemon can map, FreeFlow-style, keeping
// the application's addresses and contents: when the page-rounded range is
// private anonymous read-write memory (malloc'd, [heap], anonymous mmap), it
// creates a memfd of that size, copies the current bytes into it and maps it
// MAP_SHARED|MAP_FIXED over the range, which replaces the private pages in
// one step. The memfd travels with the REG_MR request (UROCE_REG_SHARED) and
// the daemon maps it too. Everything else (files, shared memory the
// application made, stacks, read-only memory, partial overlaps with a range
// remapped before) is left alone and goes the copying way, which always
// works.
//
// Caveats, as with FreeFlow:
//  - a thread writing into the range while it is being registered may lose
//    that write (it lands in the private page after the copy was taken);
//  - a fork child would share the pages with its parent, and its writes
//    (its malloc's, in a remapped part of the heap) would land in the
//    parent's memory. So a pthread_atfork handler maps every remapped range
//    privately again in the child: MAP_PRIVATE of the memfd (or a private
//    copy when the memfd is no longer open). The child's writes stay its
//    own; pages it has not written show what the parent writes later, where
//    fork alone would have shown the bytes at fork time. With ibv_fork_init
//    the ranges are kept out of children altogether, as before (see
//    keep_from_fork). A child made by raw clone() without the atfork
//    handlers does share them;
//  - pages another RDMA device pinned before (the same buffer registered
//    with a kernel device too) are no longer the application's pages;
//  - mlock and madvise settings of the old pages do not carry over.
// UROCE_SHARE_MEMORY=0 in the environment turns sharing off (every MR then
// copies), for tests and for applications that cannot live with the above.
//
// Remapped ranges are kept in a process-wide registry (start, length, memfd,
// references). A registration wholly inside a remapped range reuses it (the
// same memfd; the daemon then counts a reference to the mapping it has). When
// the last MR of a range goes, the mapping stays as it is (the application's
// memory keeps its data) and the memfd is kept for a while among a few idle
// ranges, so that registering the same buffer again stays on the fast path.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "common/unique_fd.h"

namespace uroce::provider {

// What a REG_MR request carries with UROCE_REG_SHARED (control.h).
struct SharedMemory {
    int fd = -1;                // -1: not shared. Owned by the registry: send it, never close it.
    std::uint64_t addr = 0;     // shared_addr: page-aligned, covers the registration
    std::uint64_t length = 0;   // shared_length
    std::uint64_t offset = 0;   // shared_offset into fd
    std::uint64_t token = 0;    // for release(); 0 when not shared

    [[nodiscard]] bool shared() const { return fd >= 0; }
};

class MemorySharing {
public:
    struct Limits {
        std::size_t max_ranges = 128;  // remapped ranges holding a memfd (one fd each)
        std::size_t idle_kept = 16;    // of which without any MR
    };
    // Limits derived from RLIMIT_NOFILE: the memfds are the application's
    // file descriptors, so the registry takes at most an eighth of them.
    static Limits default_limits();

    explicit MemorySharing(bool enabled, Limits limits = default_limits());
    // Closes the memfds; the mappings stay (they are the application's memory).
    ~MemorySharing();
    MemorySharing(const MemorySharing&) = delete;
    MemorySharing& operator=(const MemorySharing&) = delete;

    // Makes [addr, addr + length) shareable with the daemon, or says it is
    // not (fd -1). `keep_from_fork`: the range was madvise(MADV_DONTFORK)ed
    // (ibv_fork_init), which a new mapping would lose, so it is applied again.
    // A shared result holds a reference until release(token).
    SharedMemory share(const void* addr, std::size_t length, bool keep_from_fork = false);
    void release(std::uint64_t token);

    // Remapped ranges whose memfd is open (used by MRs or idle).
    [[nodiscard]] std::size_t ranges_held() const;

private:
    struct Range {
        std::uint64_t start = 0;
        std::uint64_t length = 0;
        UniqueFd fd;               // the memfd (invalid: none, or not ours any more)
        dev_t dev = 0;             // the memfd's identity, to recognise it
        ino_t ino = 0;             //   in /proc/self/maps
        std::uint32_t refs = 0;
        bool live = true;          // false: the memory there is no longer ours
        std::uint64_t idle_since = 0;  // release stamp when refs == 0
    };
    using Ranges = std::map<std::uint64_t, Range>;  // by token

    SharedMemory reuse(Ranges::iterator it);
    SharedMemory remap(std::uint64_t start, std::uint64_t length, bool keep_from_fork);
    void forget(Ranges::iterator it);  // the memory is not ours any more
    void drop(Ranges::iterator it);    // closes the fd, erases
    bool make_room();

    // fork: every instance is locked around it (pthread_atfork), and the
    // child maps the remapped ranges privately, then forgets them all.
    static void lock_all();
    static void unlock_all();
    static void privatise_in_child();
    [[nodiscard]] int fd_of(dev_t dev, ino_t ino) const;

    const bool enabled_;
    const Limits limits_;
    mutable std::mutex mutex_;
    Ranges ranges_;
    std::uint64_t next_token_ = 1;
    std::uint64_t release_clock_ = 0;
    // The list of instances, for the fork handlers (guarded by a global mutex).
    MemorySharing* older_ = nullptr;
    MemorySharing* newer_ = nullptr;
};

// The registry every context of this process uses; enabled unless
// UROCE_SHARE_MEMORY says no.
MemorySharing& process_memory_sharing();
// How UROCE_SHARE_MEMORY reads: unset, empty or anything else means yes;
// "0", "no", "off", "false" mean no.
bool share_memory_setting(const char* value);

// The files through which the daemon reaches this process's memory where it
// is not shared (the copying way, emulator/dma/client_memory.h), sent with
// HELLO: /proc/self/mem opened read-write and /proc/self/maps. Opened by this
// process itself, they carry no more right than it has, and the kernel binds
// them to this address space: after an exec or an exit they reach nothing
// (docs/security.md). No ptrace permission is involved. 0 or an errno; on
// success the caller owns both fds.
int open_process_files(int& mem_fd, int& maps_fd);

}  // namespace uroce::provider
