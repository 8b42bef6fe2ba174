// ClientMemory, both ways: the copying way on this process and on a forked
// child (and nothing once that child exits or execs), EFAULT without a byte
// outside the range, the shared way through a
// memfd mapped twice, ranges straddling shared and private memory, mapping
// references and replacement, and the counters.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "dma/client_memory.h"
#include "dma_test_util.h"

namespace uroce::dma {
namespace {

using namespace test;

TEST(CopyWay, ReadsAndWritesThisProcess) {
    std::vector<std::uint8_t> client(5000, 0);
    ClientMemory mem(open_process_memory(::getpid()));
    std::vector<std::uint8_t> src(3000);
    fill(src.data(), src.size(), 11);

    EXPECT_EQ(mem.way(addr_of(client.data()), client.size()), Way::Copy);
    ASSERT_EQ(mem.write(addr_of(client.data() + 1000), src.data(), src.size()), 0);
    EXPECT_TRUE(filled(client.data() + 1000, src.size(), 11));
    EXPECT_EQ(client[999], 0);
    EXPECT_EQ(client[4000], 0);

    std::vector<std::uint8_t> back(3000, 0);
    ASSERT_EQ(mem.read(addr_of(client.data() + 1000), back.data(), back.size()), 0);
    EXPECT_EQ(back, src);

    const DmaCounters c = mem.counters();
    EXPECT_EQ(c.copy_ops, 2u);
    EXPECT_EQ(c.copy_bytes, 6000u);
    EXPECT_EQ(c.shared_ops, 0u);
    EXPECT_EQ(c.faults, 0u);
}

TEST(CopyWay, AtomicsOnThisProcess) {
    alignas(8) std::uint64_t words[2] = {100, 7};
    ClientMemory mem(open_process_memory(::getpid()));
    std::uint64_t original = 0;

    ASSERT_EQ(mem.fetch_add(addr_of(&words[0]), 5, original), 0);
    EXPECT_EQ(original, 100u);
    EXPECT_EQ(words[0], 105u);

    ASSERT_EQ(mem.compare_swap(addr_of(&words[1]), 8, 99, original), 0);  // no match: unchanged
    EXPECT_EQ(original, 7u);
    EXPECT_EQ(words[1], 7u);
    ASSERT_EQ(mem.compare_swap(addr_of(&words[1]), 7, 99, original), 0);
    EXPECT_EQ(original, 7u);
    EXPECT_EQ(words[1], 99u);

    EXPECT_EQ(mem.fetch_add(addr_of(&words[0]) + 4, 1, original), EINVAL);
    EXPECT_EQ(words[0], 105u);

    const DmaCounters c = mem.counters();
    EXPECT_EQ(c.copy_ops, 3u);
    EXPECT_EQ(c.copy_bytes, 24u);
}

TEST(CopyWay, ZeroLengthTouchesNothing) {
    ClientMemory mem(open_process_memory(::getpid()));
    std::uint8_t byte = 1;
    EXPECT_EQ(mem.read(0, &byte, 0), 0);
    EXPECT_EQ(mem.write(0, &byte, 0), 0);
    const DmaCounters c = mem.counters();
    EXPECT_EQ(c.copy_ops + c.shared_ops + c.faults, 0u);
}

// [page 0 mapped][page 1 unmapped][page 2 mapped]
TEST(CopyWay, UnmappedRangeFailsWithEfaultAndWritesNothingOutside) {
    Pages pages(3);
    ASSERT_TRUE(pages.ok());
    const std::size_t page = page_size();
    std::memset(pages.data(), 0xAA, pages.length());
    ASSERT_EQ(::munmap(pages.page(1), page), 0);
    ClientMemory mem(open_process_memory(::getpid()));
    std::vector<std::uint8_t> src(2 * page, 0x55);

    // Starts 64 bytes before the hole: those 64 may be written (a DMA that
    // faults stops part way), nothing before them, nothing in page 2.
    EXPECT_EQ(mem.write(addr_of(pages.page(1) - 64), src.data(), 128), EFAULT);
    for (std::size_t i = 0; i < page - 64; ++i) {
        ASSERT_EQ(pages.data()[i], 0xAA) << i;
    }
    // Reaching over the hole into page 2 fails too, and leaves page 2 alone.
    EXPECT_EQ(mem.write(addr_of(pages.page(1) - 64), src.data(), page + 128), EFAULT);
    for (std::size_t i = 0; i < page; ++i) {
        ASSERT_EQ(pages.page(2)[i], 0xAA) << i;
    }
    std::uint8_t byte = 0;
    EXPECT_EQ(mem.read(addr_of(pages.page(1)), &byte, 1), EFAULT);
    std::uint64_t original = 0;
    EXPECT_EQ(mem.fetch_add(addr_of(pages.page(1)), 1, original), EFAULT);
    // Page 2 itself is fine.
    EXPECT_EQ(mem.write(addr_of(pages.page(2)), src.data(), 16), 0);
    EXPECT_EQ(pages.page(2)[0], 0x55);

    const DmaCounters c = mem.counters();
    EXPECT_EQ(c.faults, 4u);
    EXPECT_EQ(c.copy_ops, 1u);
}

// The kernel writes through /proc/PID/mem with FOLL_FORCE, as a debugger
// would: read-only private memory is written (copy-on-write), read-only
// shared memory is not. What keeps RDMA writes to memory that was writable
// is the MR table (a write MR needs a writable range: docs/security.md).
TEST(CopyWay, ReadOnlySharedMemoryIsNotWritten) {
    const int fd = make_memfd(page_size());
    ASSERT_GE(fd, 0);
    std::uint8_t* shared = map_shared(fd, page_size());
    ASSERT_NE(shared, nullptr);
    std::memset(shared, 0x11, page_size());
    ASSERT_EQ(::mprotect(shared, page_size(), PROT_READ), 0);
    ClientMemory mem(open_process_memory(::getpid()));
    const std::uint8_t src[8] = {};
    EXPECT_EQ(mem.write(addr_of(shared), src, sizeof src), EFAULT);
    EXPECT_EQ(shared[0], 0x11);
    std::uint8_t back[8] = {};
    EXPECT_EQ(mem.read(addr_of(shared), back, sizeof back), 0);
    EXPECT_EQ(back[7], 0x11);
    ::munmap(shared, page_size());
    ::close(fd);
}

TEST(CopyWay, ReadOnlyPrivateMemoryIsWrittenAsByADebugger) {
    Pages pages(1);
    ASSERT_TRUE(pages.ok());
    std::memset(pages.data(), 0x11, pages.length());
    ASSERT_EQ(::mprotect(pages.data(), pages.length(), PROT_READ), 0);
    ClientMemory mem(open_process_memory(::getpid()));
    const std::uint8_t src[8] = {};
    EXPECT_EQ(mem.write(addr_of(pages.data()), src, sizeof src), 0);
    EXPECT_EQ(static_cast<volatile std::uint8_t*>(pages.data())[0], 0);
    EXPECT_EQ(static_cast<volatile std::uint8_t*>(pages.data())[8], 0x11) << "nothing past the range";
}

// Child exit codes: which check failed.
enum ChildFailure : int {
    kChildOk = 0,
    kChildPipe = 10,
    kChildData = 11,
    kChildAddWord = 12,
    kChildSwapWord = 13,
    kChildBeyondRange = 14,
};

// A child process is the client: the test reads what it wrote, writes and
// runs atomics on its memory, and the child checks the result in its own
// address space (the parent's copy of these private pages stays as it was).
TEST(CopyWay, ForkedChildIsTheClient) {
    const std::size_t page = page_size();
    Pages pages(3);
    ASSERT_TRUE(pages.ok());
    std::memset(pages.data(), 0, pages.length());
    std::uint8_t* buffer = pages.data();
    auto* words = static_cast<std::uint64_t*>(static_cast<void*>(pages.page(1)));
    Pipe to_child;
    Pipe to_parent;

    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        to_child.close_write();
        to_parent.close_read();
        fill(buffer, page, 3);
        words[0] = 1000;
        words[1] = 50;
        ::munmap(pages.page(2), page);
        char step = 'r';
        if (!to_parent.send(step) || !to_child.receive(step)) {
            ::_exit(kChildPipe);
        }
        if (!filled(buffer + 100, 500, 77) || buffer[99] != static_cast<std::uint8_t>(3 + 99 * 7) ||
            buffer[600] != static_cast<std::uint8_t>(3 + 600 * 7)) {
            ::_exit(kChildData);
        }
        if (words[0] != 1234) {
            ::_exit(kChildAddWord);
        }
        if (words[1] != 51) {
            ::_exit(kChildSwapWord);
        }
        // The failed write reaching into the unmapped page 2 wrote nothing
        // before the last 8 bytes of page 1.
        if (pages.page(1)[page - 9] != 0) {
            ::_exit(kChildBeyondRange);
        }
        ::_exit(kChildOk);
    }
    to_child.close_read();
    to_parent.close_write();
    char step = 0;
    ASSERT_TRUE(to_parent.receive(step));

    ClientMemory mem(open_process_memory(child));
    std::vector<std::uint8_t> seen(page);
    ASSERT_EQ(mem.read(addr_of(buffer), seen.data(), seen.size()), 0);
    EXPECT_TRUE(filled(seen.data(), seen.size(), 3));
    EXPECT_EQ(buffer[5], 0);  // ours was never written: that was the child's

    std::vector<std::uint8_t> src(500);
    fill(src.data(), src.size(), 77);
    EXPECT_EQ(mem.write(addr_of(buffer + 100), src.data(), src.size()), 0);
    std::uint64_t original = 0;
    EXPECT_EQ(mem.fetch_add(addr_of(&words[0]), 234, original), 0);
    EXPECT_EQ(original, 1000u);
    EXPECT_EQ(mem.compare_swap(addr_of(&words[1]), 50, 51, original), 0);
    EXPECT_EQ(original, 50u);
    EXPECT_EQ(mem.write(addr_of(pages.page(2) - 8), src.data(), 16), EFAULT);
    EXPECT_EQ(words[0], 0u);  // still ours untouched

    ASSERT_TRUE(to_child.send(step));
    EXPECT_EQ(wait_exit_code(child), kChildOk);
    EXPECT_EQ(mem.counters().faults, 1u);
}

// The mem file was opened while the child lived: after it exits (and
// whatever process gets its pid next) it reaches nothing.
TEST(CopyWay, ExitedClientReachesNothing) {
    Pipe go;
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        go.close_write();
        char step = 0;
        (void)go.receive(step);
        ::_exit(0);
    }
    go.close_read();
    ClientMemory mem(open_process_memory(child));
    std::uint64_t word = 42;
    ASSERT_EQ(mem.read(addr_of(&word), &word, sizeof word), 0) << "the child's copy of the word, while it lives";
    ASSERT_TRUE(go.send('x'));
    ASSERT_EQ(wait_exit_code(child), 0);
    EXPECT_EQ(mem.read(addr_of(&word), &word, sizeof word), ESRCH);
    EXPECT_EQ(mem.write(addr_of(&word), &word, sizeof word), ESRCH);
    EXPECT_EQ(mem.counters().faults, 2u);
}

// The attack of docs/security.md: the same pid, a new program. The mem file
// opened before the exec reaches nothing of the new image, though a file
// opened now does reach it.
TEST(CopyWay, ExecedClientReachesNothing) {
    Pipe go;
    Pipe exec_done;  // close-on-exec: its write end closes at the exec
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        go.close_write();
        exec_done.close_read();
        char step = 0;
        (void)go.receive(step);
        ::execl("/bin/sleep", "sleep", "60", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    go.close_read();
    exec_done.close_write();
    ClientMemory before(open_process_memory(child));
    static std::uint64_t marker = 0x5EC0DE;
    std::uint64_t seen = 0;
    ASSERT_EQ(before.read(addr_of(&marker), &seen, sizeof seen), 0);
    EXPECT_EQ(seen, marker) << "the forked image";
    ASSERT_TRUE(go.send('x'));
    char none = 0;
    EXPECT_FALSE(exec_done.receive(none)) << "EOF once the child exec'ed";
    EXPECT_EQ(before.read(addr_of(&marker), &seen, sizeof seen), ESRCH);
    std::uint64_t evil = 1;
    EXPECT_EQ(before.write(addr_of(&marker), &evil, sizeof evil), ESRCH);
    // The same pid, now sleep(1): a file opened now reaches that image.
    ClientMemory after(open_process_memory(child));
    EXPECT_NE(after.read(addr_of(&marker), &seen, sizeof seen), ESRCH);
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    ::waitpid(child, nullptr, 0);
}

TEST(CopyWay, WithoutAMemFileNothingIsReachable) {
    ClientMemory mem{UniqueFd{}};
    std::uint64_t word = 1;
    EXPECT_EQ(mem.read(addr_of(&word), &word, sizeof word), EFAULT);
    EXPECT_EQ(mem.write(addr_of(&word), &word, sizeof word), EFAULT);
    EXPECT_FALSE(mem.attach(UniqueFd{}));
    EXPECT_TRUE(mem.attach(open_process_memory(::getpid())));
    EXPECT_FALSE(mem.attach(open_process_memory(::getpid()))) << "the first file stays";
    EXPECT_EQ(mem.read(addr_of(&word), &word, sizeof word), 0);
}

TEST(CopyWay, AddressesBeyondUserSpaceFault) {
    ClientMemory mem(open_process_memory(::getpid()));
    std::uint64_t word = 0;
    EXPECT_EQ(mem.read(0xFFFF'FFFF'FFFF'F000ull, &word, sizeof word), EFAULT);
    EXPECT_EQ(mem.read(0x8000'0000'0000'0000ull, &word, sizeof word), EFAULT);
    EXPECT_EQ(mem.read(0x10, &word, sizeof word), EFAULT) << "page 0 is never mapped";
}

// The client's memory is a memfd mapping (here in this process); the daemon
// maps the same memfd and reaches it without a system call.
class SharedWay : public ::testing::Test {
protected:
    void SetUp() override {
        fd = make_memfd(kPages * page_size());
        ASSERT_GE(fd, 0);
        client = map_shared(fd, kPages * page_size());
        ASSERT_NE(client, nullptr);
    }
    void TearDown() override {
        if (client != nullptr) {
            ::munmap(client, kPages * page_size());
        }
        ::close(fd);
    }

    static constexpr std::size_t kPages = 4;
    int fd = -1;
    std::uint8_t* client = nullptr;
    ClientMemory mem{open_process_memory(::getpid())};
};

TEST_F(SharedWay, WritesAndReadsBothWays) {
    const std::size_t length = kPages * page_size();
    ASSERT_EQ(mem.add_shared(addr_of(client), length, fd, 0), 0);
    EXPECT_EQ(mem.way(addr_of(client), length), Way::Shared);
    EXPECT_EQ(mem.way(addr_of(client) + 10, 100), Way::Shared);
    EXPECT_EQ(mem.way(addr_of(client), length + 1), Way::Copy);
    EXPECT_EQ(mem.way(addr_of(client) - 1, 2), Way::Copy);

    std::vector<std::uint8_t> src(10000);
    fill(src.data(), src.size(), 9);
    ASSERT_EQ(mem.write(addr_of(client + 123), src.data(), src.size()), 0);
    EXPECT_TRUE(filled(client + 123, src.size(), 9));

    fill(client + 4000, 3000, 41);  // the client writes
    std::vector<std::uint8_t> back(3000);
    ASSERT_EQ(mem.read(addr_of(client + 4000), back.data(), back.size()), 0);
    EXPECT_TRUE(filled(back.data(), back.size(), 41));

    auto* word = static_cast<std::uint64_t*>(static_cast<void*>(client + 64));
    *word = 40;
    std::uint64_t original = 0;
    ASSERT_EQ(mem.fetch_add(addr_of(word), 2, original), 0);
    EXPECT_EQ(original, 40u);
    EXPECT_EQ(*word, 42u);
    ASSERT_EQ(mem.compare_swap(addr_of(word), 42, 7, original), 0);
    EXPECT_EQ(original, 42u);
    EXPECT_EQ(*word, 7u);
    ASSERT_EQ(mem.compare_swap(addr_of(word), 42, 9, original), 0);
    EXPECT_EQ(original, 7u);
    EXPECT_EQ(*word, 7u);

    const DmaCounters c = mem.counters();
    EXPECT_EQ(c.shared_ops, 5u);
    EXPECT_EQ(c.shared_bytes, 10000u + 3000u + 24u);
    EXPECT_EQ(c.copy_ops, 0u);
}

// What the daemon's mapping of the file shows, not what a copy through the mem file would
// read at that address: give it a client range whose address holds other
// memory, and the reads tell which way went.
TEST_F(SharedWay, SharedReadsGoThroughTheDaemonsMapping) {
    Pages elsewhere(kPages);
    ASSERT_TRUE(elsewhere.ok());
    std::memset(elsewhere.data(), 0x22, elsewhere.length());
    std::memset(client, 0x33, kPages * page_size());
    ASSERT_EQ(mem.add_shared(addr_of(elsewhere.data()), page_size(), fd, page_size()), 0);
    std::uint8_t byte = 0;
    ASSERT_EQ(mem.read(addr_of(elsewhere.data()) + 5, &byte, 1), 0);
    EXPECT_EQ(byte, 0x33);
    ASSERT_EQ(mem.read(addr_of(elsewhere.page(1)) + 5, &byte, 1), 0);  // outside: copies
    EXPECT_EQ(byte, 0x22);
}

// Private pages right after shared ones: a range over both copies, and is
// still right.
TEST(StraddlingRange, GoesTheCopyWayAndIsCorrect) {
    const std::size_t page = page_size();
    Pages pages(3);
    ASSERT_TRUE(pages.ok());
    const int fd = make_memfd(2 * page);
    ASSERT_GE(fd, 0);
    ASSERT_NE(::mmap(pages.data(), 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0), MAP_FAILED);
    ClientMemory mem(open_process_memory(::getpid()));
    ASSERT_EQ(mem.add_shared(addr_of(pages.data()), 2 * page, fd, 0), 0);
    ::close(fd);  // the daemon keeps its own mapping

    const std::uint64_t across = addr_of(pages.page(2)) - 100;
    EXPECT_EQ(mem.way(across, 200), Way::Copy);
    EXPECT_EQ(mem.way(across, 100), Way::Shared);
    std::vector<std::uint8_t> src(200);
    fill(src.data(), src.size(), 5);
    ASSERT_EQ(mem.write(across, src.data(), src.size()), 0);
    EXPECT_TRUE(filled(pages.page(2) - 100, 200, 5));
    std::vector<std::uint8_t> back(200);
    ASSERT_EQ(mem.read(across, back.data(), back.size()), 0);
    EXPECT_EQ(back, src);

    const DmaCounters c = mem.counters();
    EXPECT_EQ(c.copy_ops, 2u);
    EXPECT_EQ(c.shared_ops, 0u);
}

TEST_F(SharedWay, AddSharedRefusesWhatItCannotMapSafely) {
    const std::size_t page = page_size();
    EXPECT_EQ(mem.add_shared(addr_of(client) + 8, page, fd, 0), EINVAL);
    EXPECT_EQ(mem.add_shared(addr_of(client), page + 8, fd, 0), EINVAL);
    EXPECT_EQ(mem.add_shared(addr_of(client), page, fd, 8), EINVAL);
    EXPECT_EQ(mem.add_shared(addr_of(client), 0, fd, 0), EINVAL);
    EXPECT_EQ(mem.add_shared(addr_of(client), page, fd, kPages * page), EINVAL);  // past the end of the file
    EXPECT_EQ(mem.add_shared(addr_of(client), page, -1, 0), EBADF);

    const int unsealed = make_memfd(page, false);
    ASSERT_GE(unsealed, 0);
    EXPECT_EQ(mem.add_shared(addr_of(client), page, unsealed, 0), EPERM);
    ::close(unsealed);

    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    EXPECT_EQ(mem.add_shared(addr_of(client), page, fds[0], 0), EINVAL);
    ::close(fds[0]);
    ::close(fds[1]);

    EXPECT_EQ(mem.shared_mappings(), 0u);
    EXPECT_EQ(mem.way(addr_of(client), 1), Way::Copy);
}

// A dma-buf MR's window (tools/uroced/mr_registrations.h): addresses from
// 2^63 up, which no process has, served by the mapping alone; the copying
// way refuses them, so nothing outside the mapping is ever reached.
TEST_F(SharedWay, AWindowPastUserAddressesIsServedByItsMappingOnly) {
    const std::size_t page = page_size();
    const std::uint64_t window = std::uint64_t{1} << 63;
    ASSERT_EQ(mem.add_shared(window, 2 * page, fd, page), 0);  // the memfd's pages 1 and 2
    EXPECT_EQ(mem.way(window, 2 * page), Way::Shared);
    std::vector<std::uint8_t> src(3000);
    fill(src.data(), src.size(), 17);
    ASSERT_EQ(mem.write(window + 100, src.data(), src.size()), 0);
    EXPECT_TRUE(filled(client + page + 100, src.size(), 17));  // landed in the file, one page in
    std::uint8_t byte = 0;
    EXPECT_EQ(mem.read(window + 2 * page, &byte, 1), EFAULT);  // past the window
    EXPECT_EQ(mem.write(window + 2 * page - 1, src.data(), 2), EFAULT);
    EXPECT_EQ(mem.counters().copy_ops, 0u);
    mem.remove_shared(window, 2 * page);
    EXPECT_EQ(mem.shared_mappings(), 0u);
    EXPECT_EQ(mem.read(window, &byte, 1), EFAULT);
}

// Several MRs in one remapped range: one mapping, one reference each.
TEST_F(SharedWay, NestedRangesOfTheSameFileShareOneMapping) {
    const std::size_t page = page_size();
    const std::uint64_t base = addr_of(client);
    ASSERT_EQ(mem.add_shared(base, kPages * page, fd, 0), 0);
    ASSERT_EQ(mem.add_shared(base, kPages * page, fd, 0), 0);
    ASSERT_EQ(mem.add_shared(base + page, page, fd, page), 0);
    EXPECT_EQ(mem.shared_mappings(), 1u);

    mem.remove_shared(base, kPages * page);
    mem.remove_shared(base + page, page);
    EXPECT_EQ(mem.way(base, kPages * page), Way::Shared);
    mem.remove_shared(base + 2 * page, page);  // never added: ignored
    EXPECT_EQ(mem.shared_mappings(), 1u);
    mem.remove_shared(base, kPages * page);
    EXPECT_EQ(mem.shared_mappings(), 0u);
    EXPECT_EQ(mem.way(base, 1), Way::Copy);
}

// A range inside an existing mapping but at other file offsets is other
// memory: it gets its own mapping, and lookups find that one.
TEST_F(SharedWay, OverlappingOtherMemoryReplacesForLookups) {
    const std::size_t page = page_size();
    const std::uint64_t base = addr_of(client);
    const int other = make_memfd(2 * page);
    ASSERT_GE(other, 0);
    std::uint8_t* other_view = map_shared(other, 2 * page);
    ASSERT_NE(other_view, nullptr);
    std::memset(client, 0x44, kPages * page);
    std::memset(other_view, 0x66, 2 * page);

    ASSERT_EQ(mem.add_shared(base, 2 * page, fd, 0), 0);
    ASSERT_EQ(mem.add_shared(base + page, 2 * page, other, 0), 0);
    EXPECT_EQ(mem.shared_mappings(), 2u);
    std::uint8_t byte = 0;
    ASSERT_EQ(mem.read(base + page, &byte, 1), 0);
    EXPECT_EQ(byte, 0x66);
    EXPECT_EQ(mem.way(base, 1), Way::Copy);  // the replaced mapping is not looked up

    mem.remove_shared(base, 2 * page);  // the replaced one goes
    EXPECT_EQ(mem.shared_mappings(), 1u);
    EXPECT_EQ(mem.way(base + page, 2 * page), Way::Shared);
    mem.remove_shared(base + page, 2 * page);
    EXPECT_EQ(mem.shared_mappings(), 0u);
    ::munmap(other_view, 2 * page);
    ::close(other);
}

// The status request reads counters on another thread than the engine's:
// the counts it sees only grow (ThreadSanitizer checks the rest in the tsan
// build).
TEST_F(SharedWay, CountersCanBeReadWhileTheOwnerWorks) {
    ASSERT_EQ(mem.add_shared(addr_of(client), page_size(), fd, 0), 0);
    constexpr std::uint64_t kOps = 20000;
    std::atomic<bool> done{false};
    std::uint64_t went_backwards = 0;
    std::thread reader([&] {
        std::uint64_t last = 0;
        while (!done.load(std::memory_order_acquire)) {
            const std::uint64_t now = mem.counters().shared_ops;
            went_backwards += now < last ? 1 : 0;
            last = now;
        }
    });
    int failures = 0;
    std::uint64_t word = 0;
    for (std::uint64_t i = 0; i < kOps; ++i) {
        failures += mem.read(addr_of(client), &word, sizeof word) != 0 ? 1 : 0;
    }
    done.store(true, std::memory_order_release);
    reader.join();
    EXPECT_EQ(failures, 0);
    EXPECT_EQ(went_backwards, 0u);
    const DmaCounters& c = mem.counters();  // a snapshot, bound to a const reference
    EXPECT_EQ(c.shared_ops, kOps);
    EXPECT_EQ(c.shared_bytes, kOps * 8);
}

}  // namespace
}  // namespace uroce::dma
