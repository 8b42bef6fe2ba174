// The provider's half of the shared way (verbs_provider/memory_sharing.h):
// private anonymous memory remapped onto a memfd keeps its addresses and
// bytes, the memfd and the application's pointer show the same memory both
// ways, nested registrations reuse a range, what must not be remapped is
// not, and a daemon (ClientMemory) reaches a client's registered buffer
// through the memfd, in this process and across fork.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "abi/fd_passing.h"
#include "dma/client_memory.h"
#include "dma_test_util.h"
#include "memory_sharing.h"

namespace uroce::provider {
namespace {

using namespace dma::test;

bool remapped(const void* p) { return maps_line(p).find("/memfd:uroce-mr") != std::string::npos; }

ino_t inode_of(int fd) {
    struct stat st {};
    return ::fstat(fd, &st) == 0 ? st.st_ino : 0;
}

// The range `r` covers [p, p + n), page-aligned.
void expect_covers(const SharedMemory& r, const void* p, std::size_t n) {
    EXPECT_EQ(r.addr % page_size(), 0u);
    EXPECT_EQ(r.length % page_size(), 0u);
    EXPECT_LE(r.addr, addr_of(p));
    EXPECT_GE(r.addr + r.length, addr_of(p) + n);
}

// Reads and writes through the memfd and through `p` see each other.
void expect_same_memory(const SharedMemory& r, std::uint8_t* p, std::size_t n, std::uint8_t seed) {
    std::uint8_t* view = map_shared(r.fd, r.length, r.offset);
    ASSERT_NE(view, nullptr);
    std::uint8_t* mirror = view + (addr_of(p) - r.addr);
    EXPECT_TRUE(filled(mirror, n, seed));
    fill(p, n, static_cast<std::uint8_t>(seed + 1));
    EXPECT_TRUE(filled(mirror, n, static_cast<std::uint8_t>(seed + 1)));
    fill(mirror, n, static_cast<std::uint8_t>(seed + 2));
    EXPECT_TRUE(filled(p, n, static_cast<std::uint8_t>(seed + 2)));
    ::munmap(view, r.length);
}

TEST(MemorySharing, MallocBufferKeepsItsAddressAndBytes) {
    MemorySharing sharing(true);
    constexpr std::size_t kBytes = 10000;
    auto* p = static_cast<std::uint8_t*>(std::malloc(kBytes));
    ASSERT_NE(p, nullptr);
    fill(p, kBytes, 1);

    const SharedMemory r = sharing.share(p, kBytes);
    ASSERT_TRUE(r.shared()) << maps_line(p);
    expect_covers(r, p, kBytes);
    EXPECT_EQ(r.offset, 0u);
    EXPECT_NE(r.token, 0u);
    EXPECT_TRUE(filled(p, kBytes, 1));
    EXPECT_TRUE(remapped(p)) << maps_line(p);
    // Sealed: the daemon refuses files that could shrink under its mapping.
    EXPECT_NE(::fcntl(r.fd, F_GET_SEALS) & F_SEAL_SHRINK, 0);
    expect_same_memory(r, p, kBytes, 1);

    // The heap around it still works.
    std::vector<void*> more;
    for (std::size_t i = 1; i < 200; ++i) {
        more.push_back(std::malloc(i * 97));
        ASSERT_NE(more.back(), nullptr);
        std::memset(more.back(), static_cast<int>(i), i * 97);
    }
    for (void* m : more) {
        std::free(m);
    }
    sharing.release(r.token);
    EXPECT_TRUE(filled(p, kBytes, 3));  // what expect_same_memory wrote last
    std::free(p);
}

TEST(MemorySharing, AnonymousMmapIsRemappedPageRounded) {
    MemorySharing sharing(true);
    const std::size_t page = page_size();
    Pages pages(5);
    ASSERT_TRUE(pages.ok());
    fill(pages.data(), pages.length(), 20);
    std::uint8_t* p = pages.data() + 100;
    const std::size_t n = 3 * page;

    const SharedMemory r = sharing.share(p, n);
    ASSERT_TRUE(r.shared());
    EXPECT_EQ(r.addr, addr_of(pages.data()));
    EXPECT_EQ(r.length, 4 * page);
    EXPECT_TRUE(filled(pages.data(), pages.length(), 20));  // also the bytes around the MR
    EXPECT_TRUE(remapped(pages.page(0)));
    EXPECT_TRUE(remapped(pages.page(3)));
    EXPECT_FALSE(remapped(pages.page(4)));
    expect_same_memory(r, pages.data(), 4 * page, 20);
    sharing.release(r.token);
}

TEST(MemorySharing, UntouchedPagesCostNoMemfdMemory) {
    MemorySharing sharing(true);
    constexpr std::size_t kPages = 256;
    Pages pages(kPages);
    ASSERT_TRUE(pages.ok());
    pages.page(7)[3] = 1;  // one page with data
    const SharedMemory r = sharing.share(pages.data(), pages.length());
    ASSERT_TRUE(r.shared());
    struct stat st {};
    ASSERT_EQ(::fstat(r.fd, &st), 0);
    EXPECT_EQ(st.st_size, static_cast<off_t>(pages.length()));
    EXPECT_LE(st.st_blocks * 512, static_cast<blkcnt_t>(4 * page_size()));  // about the one page
    EXPECT_EQ(pages.page(7)[3], 1);
    EXPECT_EQ(pages.page(8)[0], 0);
    sharing.release(r.token);
}

TEST(MemorySharing, RegistrationInsideARemappedRangeReusesIt) {
    MemorySharing sharing(true);
    const std::size_t page = page_size();
    Pages pages(4);
    ASSERT_TRUE(pages.ok());
    fill(pages.data(), pages.length(), 30);

    const SharedMemory whole = sharing.share(pages.data(), pages.length());
    ASSERT_TRUE(whole.shared());
    const SharedMemory inner = sharing.share(pages.page(1) + 10, page);
    ASSERT_TRUE(inner.shared());
    EXPECT_EQ(inner.fd, whole.fd);
    EXPECT_EQ(inner.addr, whole.addr);
    EXPECT_EQ(inner.length, whole.length);
    EXPECT_EQ(inner.offset, 0u);
    EXPECT_EQ(inner.token, whole.token);
    EXPECT_EQ(sharing.ranges_held(), 1u);

    // The last MR going leaves the memory as it is, and a new registration
    // of it is shared again with the same memfd.
    sharing.release(whole.token);
    sharing.release(inner.token);
    EXPECT_TRUE(filled(pages.data(), pages.length(), 30));
    EXPECT_TRUE(remapped(pages.data()));
    EXPECT_EQ(sharing.ranges_held(), 1u);
    const SharedMemory again = sharing.share(pages.page(2), page);
    ASSERT_TRUE(again.shared());
    EXPECT_EQ(inode_of(again.fd), inode_of(whole.fd));
    expect_same_memory(again, pages.page(2), page, 30);
    sharing.release(again.token);
}

TEST(MemorySharing, PartialOverlapWithARemappedRangeCopies) {
    MemorySharing sharing(true);
    const std::size_t page = page_size();
    Pages pages(4);
    ASSERT_TRUE(pages.ok());
    const SharedMemory middle = sharing.share(pages.page(1), 2 * page);
    ASSERT_TRUE(middle.shared());
    EXPECT_FALSE(sharing.share(pages.page(0), 2 * page).shared());
    EXPECT_FALSE(sharing.share(pages.page(2), 2 * page).shared());
    EXPECT_FALSE(sharing.share(pages.data(), pages.length()).shared());
    EXPECT_FALSE(remapped(pages.page(0)));
    EXPECT_FALSE(remapped(pages.page(3)));
    EXPECT_EQ(sharing.ranges_held(), 1u);
    sharing.release(middle.token);
}

TEST(MemorySharing, FileBackedMemoryIsLeftAlone) {
    MemorySharing sharing(true);
    const std::size_t page = page_size();
    char path[] = "/tmp/uroce-dma-test-XXXXXX";
    const int file = ::mkstemp(path);
    ASSERT_GE(file, 0);
    ::unlink(path);
    ASSERT_EQ(::ftruncate(file, static_cast<off_t>(2 * page)), 0);
    auto* priv = static_cast<std::uint8_t*>(
        ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE, file, 0));
    ASSERT_NE(priv, MAP_FAILED);
    priv[0] = 9;
    const std::string before = maps_line(priv);
    EXPECT_FALSE(sharing.share(priv, 2 * page).shared());
    EXPECT_EQ(maps_line(priv), before);
    EXPECT_EQ(priv[0], 9);
    ::munmap(priv, 2 * page);
    ::close(file);

    // Shared memory the application made: not remapped either (copies).
    const int fd = make_memfd(page);
    std::uint8_t* app_shared = map_shared(fd, page);
    ASSERT_NE(app_shared, nullptr);
    EXPECT_FALSE(sharing.share(app_shared, page).shared());
    ::munmap(app_shared, page);
    ::close(fd);
    EXPECT_EQ(sharing.ranges_held(), 0u);
}

TEST(MemorySharing, ReadOnlyAndStackMemoryAreLeftAlone) {
    MemorySharing sharing(true);
    Pages read_only(1, PROT_READ);
    ASSERT_TRUE(read_only.ok());
    EXPECT_FALSE(sharing.share(read_only.data(), 64).shared());

    std::uint8_t on_stack[256];
    fill(on_stack, sizeof on_stack, 50);
    const std::string before = maps_line(on_stack);
    EXPECT_FALSE(sharing.share(on_stack, sizeof on_stack).shared());
    EXPECT_EQ(maps_line(on_stack), before);
    EXPECT_TRUE(filled(on_stack, sizeof on_stack, 50));
    EXPECT_EQ(sharing.ranges_held(), 0u);
}

// Another thread's stack: that thread may be running on those pages.
TEST(MemorySharing, AnotherThreadsStackIsLeftAlone) {
    MemorySharing sharing(true);
    std::promise<std::uint8_t*> buffer;
    std::promise<void> finish;
    std::thread owner([&] {
        std::uint8_t local[512];
        fill(local, sizeof local, 60);
        buffer.set_value(local);
        finish.get_future().wait();
        EXPECT_TRUE(filled(local, sizeof local, 60));
    });
    std::uint8_t* p = buffer.get_future().get();
    const std::string before = maps_line(p);
    EXPECT_FALSE(sharing.share(p, 512).shared());
    EXPECT_EQ(maps_line(p), before);
    finish.set_value();
    owner.join();
}

TEST(MemorySharing, DisabledSharesNothing) {
    MemorySharing sharing(false);
    Pages pages(2);
    ASSERT_TRUE(pages.ok());
    EXPECT_FALSE(sharing.share(pages.data(), pages.length()).shared());
    EXPECT_FALSE(remapped(pages.data()));
    EXPECT_TRUE(share_memory_setting(nullptr));
    EXPECT_TRUE(share_memory_setting("1"));
    EXPECT_TRUE(share_memory_setting(""));
    EXPECT_FALSE(share_memory_setting("0"));
    EXPECT_FALSE(share_memory_setting("off"));
    EXPECT_FALSE(share_memory_setting("no"));
    EXPECT_FALSE(share_memory_setting("false"));
}

// The application unmapped a remapped range and mapped new memory at the
// same addresses: the old memfd is not that memory.
TEST(MemorySharing, ReusedAddressesGetANewMemfd) {
    MemorySharing sharing(true);
    const std::size_t page = page_size();
    Pages pages(2);
    ASSERT_TRUE(pages.ok());
    const SharedMemory first = sharing.share(pages.data(), pages.length());
    ASSERT_TRUE(first.shared());
    const ino_t first_inode = inode_of(first.fd);
    sharing.release(first.token);

    ASSERT_NE(::mmap(pages.data(), 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
              MAP_FAILED);
    fill(pages.data(), pages.length(), 70);
    const SharedMemory second = sharing.share(pages.data(), pages.length());
    ASSERT_TRUE(second.shared());
    EXPECT_NE(inode_of(second.fd), first_inode);
    EXPECT_EQ(sharing.ranges_held(), 1u);
    expect_same_memory(second, pages.data(), pages.length(), 70);
    sharing.release(second.token);
}

TEST(MemorySharing, KeepsAtMostItsLimitOfMemfds) {
    MemorySharing sharing(true, MemorySharing::Limits{2, 1});
    Pages a(1);
    Pages b(1);
    Pages c(1);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    const SharedMemory ra = sharing.share(a.data(), 8);
    const SharedMemory rb = sharing.share(b.data(), 8);
    ASSERT_TRUE(ra.shared() && rb.shared());
    EXPECT_FALSE(sharing.share(c.data(), 8).shared());  // two in use: full
    sharing.release(ra.token);                          // a idle
    const SharedMemory rc = sharing.share(c.data(), 8);  // evicts a's memfd
    EXPECT_TRUE(rc.shared());
    EXPECT_EQ(sharing.ranges_held(), 2u);
    EXPECT_FALSE(sharing.share(a.data(), 8).shared());  // a's memfd is gone: copies from now on
    EXPECT_TRUE(remapped(a.data()));                    // and the memory stays as it is
    sharing.release(rb.token);
    sharing.release(rc.token);
    EXPECT_EQ(sharing.ranges_held(), 1u);  // one idle kept
    sharing.release(rc.token);             // released twice: ignored
    sharing.release(12345);                // unknown: ignored
}

TEST(MemorySharing, ForkProtectionIsAppliedAgain) {
    MemorySharing sharing(true);
    Pages pages(2);
    ASSERT_TRUE(pages.ok());
    ASSERT_EQ(::madvise(pages.data(), pages.length(), MADV_DONTFORK), 0);  // as ibv_dontfork_range does
    ASSERT_NE(vm_flags(pages.data()).find(" dc"), std::string::npos);
    const SharedMemory r = sharing.share(pages.data(), pages.length(), true);
    ASSERT_TRUE(r.shared());
    EXPECT_NE(vm_flags(pages.data()).find(" dc"), std::string::npos) << vm_flags(pages.data());
    sharing.release(r.token);
}

// A fork child gets the remapped ranges privately: its writes, and its
// malloc's writes into a remapped part of the heap, stay out of the parent,
// both for a range whose memfd is open and for one whose memfd was closed.
TEST(MemorySharing, ForkChildWritesStayInTheChild) {
    MemorySharing sharing(true);
    MemorySharing forgetful(true, MemorySharing::Limits{1, 0});  // closes memfds at once
    constexpr std::size_t kBytes = 10000;
    // Heap memory not remapped by an earlier test (whose remapped heap pages
    // stay memfd pages after their buffers are freed).
    std::vector<void*> skipped;
    std::uint8_t* heap = nullptr;
    SharedMemory kept;
    while (!kept.shared() && skipped.size() < 64) {
        heap = static_cast<std::uint8_t*>(std::malloc(kBytes));
        ASSERT_NE(heap, nullptr);
        fill(heap, kBytes, 100);
        kept = sharing.share(heap, kBytes);
        skipped.push_back(heap);
    }
    skipped.pop_back();
    for (void* m : skipped) {
        std::free(m);
    }
    ASSERT_TRUE(kept.shared());
    ASSERT_NE(maps_line(heap).find("memfd"), std::string::npos);
    Pages pages(2);
    ASSERT_TRUE(pages.ok());
    fill(pages.data(), pages.length(), 110);
    const SharedMemory closed = forgetful.share(pages.data(), pages.length());
    ASSERT_TRUE(closed.shared());
    forgetful.release(closed.token);
    ASSERT_EQ(forgetful.ranges_held(), 0u);
    ASSERT_TRUE(remapped(pages.data()));

    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        if (!filled(heap, kBytes, 100) || !filled(pages.data(), pages.length(), 110)) {
            ::_exit(30);  // the child must see the bytes as they were at fork
        }
        fill(heap, kBytes, 101);
        fill(pages.data(), pages.length(), 111);
        for (std::size_t i = 1; i < 500; ++i) {
            void* m = std::malloc(i * 31);
            std::memset(m, 0x5A, i * 31);
            std::free(m);
        }
        ::_exit(filled(heap, kBytes, 101) && filled(pages.data(), pages.length(), 111) ? 0 : 31);
    }
    EXPECT_EQ(wait_exit_code(child), 0);
    EXPECT_TRUE(filled(heap, kBytes, 100));
    EXPECT_TRUE(filled(pages.data(), pages.length(), 110));
    // Still shared in the parent.
    EXPECT_TRUE(remapped(heap));
    expect_same_memory(kept, heap, kBytes, 100);
    sharing.release(kept.token);
    std::free(heap);
}

// The daemon side: ClientMemory maps the memfd the provider made.
TEST(MemorySharing, DaemonReachesTheBufferThroughTheMemfd) {
    MemorySharing sharing(true);
    Pages pages(3);
    ASSERT_TRUE(pages.ok());
    std::uint8_t* p = pages.data() + 40;
    constexpr std::size_t kBytes = 5000;
    fill(p, kBytes, 80);
    const SharedMemory r = sharing.share(p, kBytes);
    ASSERT_TRUE(r.shared());

    dma::ClientMemory mem(dma::open_process_memory(::getpid()));
    ASSERT_EQ(mem.add_shared(r.addr, r.length, r.fd, r.offset), 0);
    EXPECT_EQ(mem.way(addr_of(p), kBytes), dma::Way::Shared);
    std::vector<std::uint8_t> back(kBytes);
    ASSERT_EQ(mem.read(addr_of(p), back.data(), back.size()), 0);
    EXPECT_TRUE(filled(back.data(), back.size(), 80));
    fill(back.data(), back.size(), 81);
    ASSERT_EQ(mem.write(addr_of(p), back.data(), back.size()), 0);
    EXPECT_TRUE(filled(p, kBytes, 81));
    EXPECT_EQ(mem.counters().copy_ops, 0u);
    mem.remove_shared(r.addr, r.length);
    sharing.release(r.token);
}

// What the child sends the parent (the daemon) with the memfd attached.
struct Registration {
    std::uint64_t buffer;
    std::uint64_t addr;
    std::uint64_t length;
    std::uint64_t offset;
};

int receive_with_fd(int sock, Registration& reg) {
    iovec data{&reg, sizeof reg};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &data;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    if (::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != static_cast<ssize_t>(sizeof reg)) {
        return -1;
    }
    const cmsghdr* c = CMSG_FIRSTHDR(&msg);
    if (c == nullptr || c->cmsg_type != SCM_RIGHTS) {
        return -1;
    }
    int fd = -1;
    std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

// A client process registers a buffer and passes the memfd, as REG_MR does;
// the test, as the daemon, reads and writes it without a system call.
TEST(MemorySharing, ForkedClientsBufferThroughTheSharedWay) {
    int socks[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, socks), 0);
    constexpr std::size_t kBytes = 3 * 4096 + 17;
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::close(socks[0]);
        MemorySharing client_sharing(true);
        void* mem = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        auto* buffer = static_cast<std::uint8_t*>(mem);
        fill(buffer, kBytes, 90);
        const SharedMemory r = client_sharing.share(buffer, kBytes);
        if (!r.shared()) {
            ::_exit(20);
        }
        const Registration reg{addr_of(buffer), r.addr, r.length, r.offset};
        if (abi::send_with_fd(socks[1], &reg, sizeof reg, r.fd, 0) != static_cast<ssize_t>(sizeof reg)) {
            ::_exit(21);
        }
        char done = 0;
        if (::read(socks[1], &done, 1) != 1) {
            ::_exit(22);
        }
        ::_exit(filled(buffer, kBytes, 91) ? 0 : 23);
    }
    ::close(socks[1]);
    Registration reg{};
    const int fd = receive_with_fd(socks[0], reg);
    ASSERT_GE(fd, 0);
    dma::ClientMemory mem(dma::open_process_memory(child));
    ASSERT_EQ(mem.add_shared(reg.addr, reg.length, fd, reg.offset), 0);
    ::close(fd);
    ASSERT_EQ(mem.way(reg.buffer, kBytes), dma::Way::Shared);
    std::vector<std::uint8_t> bytes(kBytes);
    ASSERT_EQ(mem.read(reg.buffer, bytes.data(), bytes.size()), 0);
    EXPECT_TRUE(filled(bytes.data(), bytes.size(), 90));
    fill(bytes.data(), bytes.size(), 91);
    ASSERT_EQ(mem.write(reg.buffer, bytes.data(), bytes.size()), 0);
    EXPECT_EQ(mem.counters().copy_ops, 0u);
    const char done = 1;
    ASSERT_EQ(::write(socks[0], &done, 1), 1);
    EXPECT_EQ(wait_exit_code(child), 0);
    ::close(socks[0]);
}

TEST(DaemonAccess, ProcessFilesAreThisProcesssMemAndMaps) {
    int mem_fd = -1;
    int maps_fd = -1;
    ASSERT_EQ(open_process_files(mem_fd, maps_fd), 0);
    EXPECT_EQ(::fcntl(mem_fd, F_GETFL) & O_ACCMODE, O_RDWR);
    EXPECT_NE(::fcntl(mem_fd, F_GETFD) & FD_CLOEXEC, 0);
    // Through the mem file: this process's own bytes.
    std::uint64_t word = 0x1122334455667788ull;
    std::uint64_t seen = 0;
    ASSERT_EQ(::pread(mem_fd, &seen, sizeof seen, static_cast<off_t>(reinterpret_cast<std::uintptr_t>(&word))),
              static_cast<ssize_t>(sizeof seen));
    EXPECT_EQ(seen, word);
    char line[64] = {};
    EXPECT_GT(::pread(maps_fd, line, sizeof line - 1, 0), 0) << "the maps file lists this process's mappings";
    ::close(mem_fd);
    ::close(maps_fd);
}

}  // namespace
}  // namespace uroce::provider
