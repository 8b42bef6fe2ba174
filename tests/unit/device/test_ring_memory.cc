// RingMemory (device/ring_memory.h): a memfd mapped shared in the daemon
// whose descriptor another mapping (the client's) sees the same bytes
// through.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "device/ring_memory.h"

namespace uroce::device {
namespace {

bool fd_open(int fd) { return ::fcntl(fd, F_GETFD) >= 0; }

std::size_t open_fds() {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        ++n;
    }
    return n;
}

TEST(RingMemory, TheClientCannotResizeIt) {
    // A shrunk ring would turn the daemon's next read of it into SIGBUS
    // (found by fuzz_control).
    RingMemory m;
    ASSERT_EQ(RingMemory::create("uroce-test", 8192, m), 0);
    const int fd = m.dup_fd();
    ASSERT_GE(fd, 0);
    EXPECT_EQ(::ftruncate(fd, 0), -1);
    EXPECT_EQ(errno, EPERM);
    EXPECT_EQ(::ftruncate(fd, 1 << 20), -1);
    EXPECT_EQ(::fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), -1) << "and the seals are final";
    struct stat st {};
    ASSERT_EQ(::fstat(fd, &st), 0);
    EXPECT_EQ(st.st_size, 8192);
    m.data()[8191] = 1;  // still there to touch
    ::close(fd);
}

TEST(RingMemory, ZeroedSharedMemoryThatAnotherMappingSees) {
    RingMemory m;
    ASSERT_EQ(RingMemory::create("uroce-test", 8192, m), 0);
    ASSERT_TRUE(m.valid());
    EXPECT_EQ(m.size(), 8192u);
    for (std::size_t i = 0; i < m.size(); ++i) {
        ASSERT_EQ(m.data()[i], 0) << i;
    }
    const int fd = m.dup_fd();
    ASSERT_GE(fd, 0);
    EXPECT_EQ(::fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    struct stat st {};
    ASSERT_EQ(::fstat(fd, &st), 0);
    EXPECT_EQ(st.st_size, 8192);
    auto* other = static_cast<std::uint8_t*>(::mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    ASSERT_NE(other, MAP_FAILED);
    ::close(fd);
    m.data()[100] = 0x5A;
    EXPECT_EQ(other[100], 0x5A);
    other[8000] = 0x33;
    EXPECT_EQ(m.data()[8000], 0x33);
    ::munmap(other, 8192);
}

TEST(RingMemory, ReleasedFdBelongsToTheCallerAndTheMappingStays) {
    RingMemory m;
    ASSERT_EQ(RingMemory::create("uroce-test", 4096, m), 0);
    const int fd = m.release_fd();
    ASSERT_GE(fd, 0);
    EXPECT_EQ(m.release_fd(), -1);  // only once
    EXPECT_EQ(m.dup_fd(), -1);
    EXPECT_EQ(errno, EBADF);
    m.data()[0] = 7;
    // The memfd still shows the mapping's bytes, and survives the object.
    std::uint8_t b = 0;
    ASSERT_EQ(::pread(fd, &b, 1, 0), 1);
    EXPECT_EQ(b, 7);
    m = RingMemory{};
    EXPECT_TRUE(fd_open(fd));
    ::close(fd);
}

TEST(RingMemory, HoldsOneDescriptorUntilReleasedOrDestroyed) {
    const std::size_t before = open_fds();
    {
        RingMemory m;
        ASSERT_EQ(RingMemory::create("uroce-test", 4096, m), 0);
        EXPECT_EQ(open_fds(), before + 1);
    }
    EXPECT_EQ(open_fds(), before);
    RingMemory m;
    ASSERT_EQ(RingMemory::create("uroce-test", 4096, m), 0);
    ::close(m.release_fd());
    EXPECT_EQ(open_fds(), before);  // the mapping alone holds no descriptor
    EXPECT_TRUE(m.valid());
}

TEST(RingMemory, MoveTransfersTheMapping) {
    RingMemory a;
    ASSERT_EQ(RingMemory::create("uroce-test", 4096, a), 0);
    std::uint8_t* data = a.data();
    data[1] = 9;
    RingMemory b(std::move(a));
    EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    EXPECT_EQ(b.data(), data);
    EXPECT_EQ(b.data()[1], 9);
    RingMemory c;
    c = std::move(b);
    EXPECT_EQ(c.data(), data);
    EXPECT_EQ(c.size(), 4096u);
}

TEST(RingMemory, ZeroBytesIsRefused) {
    RingMemory m;
    EXPECT_EQ(RingMemory::create("uroce-test", 0, m), EINVAL);
    EXPECT_FALSE(m.valid());
}

// The client gets the memfd: it is sealed so that no ftruncate can take the
// pages from under the daemon's mapping (a SIGBUS in the daemon).
TEST(RingMemory, SizeIsSealedForGood) {
    RingMemory m;
    ASSERT_EQ(RingMemory::create("uroce-test", 8192, m), 0);
    const int fd = m.release_fd();
    ASSERT_GE(fd, 0);
    const int seals = ::fcntl(fd, F_GET_SEALS);
    EXPECT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
    EXPECT_EQ(::ftruncate(fd, 0), -1);
    EXPECT_EQ(errno, EPERM);
    EXPECT_EQ(::ftruncate(fd, 16384), -1);
    EXPECT_EQ(::fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), -1);  // F_SEAL_SEAL: no more seals, none lifted
    m.data()[8191] = 1;                                      // still mapped, still writable
    ::close(fd);
}

}  // namespace
}  // namespace uroce::device
