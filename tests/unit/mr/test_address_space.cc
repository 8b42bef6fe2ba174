// parse_smaps and covered_by on hand-written text, and ProcessAddressSpace
// against this process's own mappings.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <cstdint>
#include <string>
#include <vector>

#include "mr/address_space.h"

namespace uroce::mr {
namespace {

const char* const kSmaps = R"(55d0c0a00000-55d0c0a02000 r--p 00000000 08:01 1311 /usr/bin/some program
Size:                  8 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:                   8 kB
VmFlags: rd mr mw me dw sd
55d0c0a02000-55d0c0a05000 r-xp 00002000 08:01 1311 /usr/bin/some program
Size:                 12 kB
KernelPageSize:        4 kB
VmFlags: rd ex mr mw me dw sd
55d0c0a05000-55d0c0a06000 rw-p 00005000 08:01 1311 /usr/bin/some program
KernelPageSize:        4 kB
55d0c1000000-55d0c1021000 rw-p 00000000 00:00 0                          [heap]
Size:                132 kB
KernelPageSize:        4 kB
7f0000000000-7f0000400000 rw-p 00000000 00:0f 4242 /dev/hugepages/buf (deleted)
Size:               4096 kB
KernelPageSize:     2048 kB
MMUPageSize:        2048 kB
7f0000400000-7f0000600000 rw-s 00000000 00:0f 4243 /dev/hugepages/other
KernelPageSize:     2048 kB
7f0000600000-7f0000601000 ---p 00000000 00:00 0
KernelPageSize:        4 kB
7f0040000000-7f0080000000 rw-p 00000000 00:0f 4244 /mnt/huge1g/x
KernelPageSize:  1048576 kB
7ffd12340000-7ffd12361000 rw-p 00000000 00:00 0                          [stack]
KernelPageSize:        4 kB
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
KernelPageSize:        4 kB
)";

bool readable(const Mapping& m) { return m.readable; }
bool writable(const Mapping& m) { return m.readable && m.writable; }

TEST(ParseSmaps, MappingsAndAttributes) {
    const std::vector<Mapping> maps = parse_smaps(kSmaps);
    ASSERT_EQ(maps.size(), 10u);
    EXPECT_EQ(maps[0].start, 0x55d0c0a00000u);
    EXPECT_EQ(maps[0].end, 0x55d0c0a02000u);
    EXPECT_TRUE(maps[0].readable);
    EXPECT_FALSE(maps[0].writable);
    EXPECT_EQ(maps[0].path, "/usr/bin/some program");
    EXPECT_EQ(maps[0].kernel_page_size, 4096u);
    EXPECT_TRUE(maps[2].writable);
    EXPECT_EQ(maps[3].path, "[heap]");
    EXPECT_EQ(maps[4].kernel_page_size, 2u << 20);
    EXPECT_EQ(maps[4].path, "/dev/hugepages/buf (deleted)");
    EXPECT_EQ(maps[5].kernel_page_size, 2u << 20);
    EXPECT_TRUE(maps[5].writable) << "shared mappings count too";
    EXPECT_FALSE(maps[6].readable);
    EXPECT_FALSE(maps[6].writable);
    EXPECT_EQ(maps[6].path, "");
    EXPECT_EQ(maps[7].kernel_page_size, 1ull << 30);
    EXPECT_EQ(maps[8].path, "[stack]");
    EXPECT_EQ(maps[9].start, 0xffffffffff600000u);
    EXPECT_FALSE(maps[9].readable);
}

TEST(ParseSmaps, MapsTextWithoutPageSizes) {
    const std::vector<Mapping> maps = parse_smaps(
        "00400000-00452000 r-xp 00000000 08:02 173521 /usr/bin/dbus-daemon\n"
        "00651000-00652000 rw-p 00051000 08:02 173521 /usr/bin/dbus-daemon\n"
        "e03000-e24000 rw-p 00000000 00:00 0 [heap]\n");
    ASSERT_EQ(maps.size(), 3u);
    EXPECT_EQ(maps[0].kernel_page_size, 4096u);
    EXPECT_EQ(maps[2].start, 0xe03000u);
    EXPECT_EQ(maps[2].end, 0xe24000u);
}

TEST(ParseSmaps, JunkIsSkipped) {
    EXPECT_TRUE(parse_smaps("").empty());
    EXPECT_TRUE(parse_smaps("\n\n").empty());
    EXPECT_TRUE(parse_smaps("KernelPageSize: 2048 kB\n").empty()) << "an attribute before any mapping";
    const std::vector<Mapping> maps = parse_smaps(
        "zz-yy rw-p 0 0:0 0\n"
        "1000-2000 rw-p 00000000 00:00 0\n"
        "Rss: 4 kB\n"
        "KernelPageSize: lots kB\n");
    ASSERT_EQ(maps.size(), 1u);
    EXPECT_EQ(maps[0].kernel_page_size, 4096u);
}

TEST(CoveredBy, GapsPermissionsAndEdges) {
    const std::vector<Mapping> maps = parse_smaps(kSmaps);
    const std::uint64_t text = 0x55d0c0a00000;
    // Inside one mapping, across adjacent ones, up to the exact end.
    EXPECT_TRUE(covered_by(maps, text, 0x1000, readable));
    EXPECT_TRUE(covered_by(maps, text, 0x6000, readable));
    EXPECT_TRUE(covered_by(maps, text + 0x5fff, 1, readable));
    // One byte past the end runs into the gap before the heap.
    EXPECT_FALSE(covered_by(maps, text, 0x6001, readable));
    EXPECT_FALSE(covered_by(maps, text + 0x6000, 1, readable));
    // Before the first mapping, past the last.
    EXPECT_FALSE(covered_by(maps, 0x1000, 8, readable));
    EXPECT_FALSE(covered_by(maps, 0xfffffffffff00000, 8, readable));
    // Write permission: the read-only text fails, the data page passes.
    EXPECT_FALSE(covered_by(maps, text, 0x6000, writable));
    EXPECT_TRUE(covered_by(maps, text + 0x5000, 0x1000, writable));
    // Huge mappings followed by a PROT_NONE guard page.
    EXPECT_TRUE(covered_by(maps, 0x7f0000000000, 0x600000, writable));
    EXPECT_FALSE(covered_by(maps, 0x7f0000000000, 0x600001, readable));
    EXPECT_FALSE(covered_by(maps, 0x7f0000600000, 1, readable));
    // Zero length is always covered; a wrapping range never is.
    EXPECT_TRUE(covered_by(maps, 0x1000, 0, readable));
    EXPECT_TRUE(covered_by(maps, 0, 0, readable));
    EXPECT_FALSE(covered_by(maps, text, UINT64_MAX, readable));
    EXPECT_FALSE(covered_by(maps, 0xffffffffff600000, 0xa00000, [](const Mapping&) { return true; }));
    // The predicate sees every mapping touched.
    std::vector<std::uint64_t> seen;
    EXPECT_TRUE(covered_by(maps, text + 0x1000, 0x4800, [&](const Mapping& m) {
        seen.push_back(m.start);
        return true;
    }));
    EXPECT_EQ(seen, (std::vector<std::uint64_t>{text, text + 0x2000, text + 0x5000}));
    EXPECT_TRUE(covered_by(std::vector<Mapping>{}, 0x1000, 0, readable));
    EXPECT_FALSE(covered_by(std::vector<Mapping>{}, 0x1000, 1, readable));
}

TEST(ProcessAddressSpaceTest, FollowsThisProcessesMappings) {
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    const auto base = reinterpret_cast<std::uintptr_t>(p);
    const ProcessAddressSpace self(ProcessAddressSpace::open_maps(getpid()));
    EXPECT_TRUE(self.accessible(base, 4 * page, true));
    ASSERT_EQ(mprotect(reinterpret_cast<void*>(base + page), page, PROT_READ), 0);
    EXPECT_TRUE(self.accessible(base, 4 * page, false));
    EXPECT_FALSE(self.accessible(base, 4 * page, true));
    EXPECT_TRUE(self.accessible(base + 2 * page, 2 * page, true));
    ASSERT_EQ(mprotect(reinterpret_cast<void*>(base + 3 * page), page, PROT_NONE), 0);
    EXPECT_FALSE(self.accessible(base + 3 * page, 1, false));
    ASSERT_EQ(munmap(reinterpret_cast<void*>(base + 2 * page), page), 0);
    EXPECT_FALSE(self.accessible(base, 2 * page + 1, false));
    EXPECT_TRUE(self.accessible(base, 2 * page, false));
    EXPECT_FALSE(self.huge_page_size(base, page).has_value()) << "normal pages are not huge";
    EXPECT_TRUE(self.accessible(0, 0, true));
    EXPECT_FALSE(self.accessible(0, 1, false));
    munmap(p, 4 * page);
    EXPECT_FALSE(self.accessible(base, 1, false));
}

TEST(ProcessAddressSpaceTest, NoSuchProcessHasNothingMapped) {
    // PIDs above pid_max (at most 2^22) never exist.
    const ProcessAddressSpace ghost(ProcessAddressSpace::open_maps(0x7FFFFFF0));
    int on_stack = 0;
    EXPECT_FALSE(ghost.accessible(reinterpret_cast<std::uintptr_t>(&on_stack), 4, false));
    EXPECT_FALSE(ghost.huge_page_size(reinterpret_cast<std::uintptr_t>(&on_stack), 4).has_value());
}

// HUGETLB registrations rely on the page size PROCMAP_QUERY reports.
TEST(ProcessAddressSpaceTest, HugePagesAreSeenAsHuge) {
    constexpr std::size_t kHuge = 2u << 20;
    void* p = mmap(nullptr, kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    if (p == MAP_FAILED) {
        GTEST_SKIP() << "no 2 MiB huge page to map (vm.nr_hugepages)";
    }
    const ProcessAddressSpace self(ProcessAddressSpace::open_maps(getpid()));
    const auto base = reinterpret_cast<std::uintptr_t>(p);
    const auto size = self.huge_page_size(base, kHuge);
    ASSERT_TRUE(size.has_value()) << "a kernel without PROCMAP_QUERY cannot tell";
    EXPECT_EQ(*size, kHuge);
    EXPECT_TRUE(self.accessible(base, kHuge, true));
    munmap(p, kHuge);
}

TEST(ProcessAddressSpaceTest, WithoutAFileNothingIsMapped) {
    const ProcessAddressSpace ghost{UniqueFd{}};
    int on_stack = 0;
    EXPECT_FALSE(ghost.accessible(reinterpret_cast<std::uintptr_t>(&on_stack), 4, false));
    EXPECT_TRUE(ghost.gone());
    const NoAddressSpace none;
    EXPECT_FALSE(none.accessible(reinterpret_cast<std::uintptr_t>(&on_stack), 4, false));
    EXPECT_TRUE(none.accessible(0, 0, false));
    EXPECT_FALSE(none.gone());
}

TEST(ProcessAddressSpaceTest, ALiveProcessIsNotGone) {
    const ProcessAddressSpace self(ProcessAddressSpace::open_maps(getpid()));
    EXPECT_FALSE(self.gone());
}

// The maps file binds to the address space it was opened on: after the
// process execs (same pid) it shows nothing, and the space is gone.
TEST(ProcessAddressSpaceTest, AnExecedProcessShowsNothing) {
    int exec_done[2];
    ASSERT_EQ(pipe2(exec_done, O_CLOEXEC), 0);
    int go[2];
    ASSERT_EQ(pipe2(go, O_CLOEXEC), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        close(exec_done[0]);
        close(go[1]);
        char step = 0;
        (void)read(go[0], &step, 1);
        execl("/bin/sleep", "sleep", "60", static_cast<char*>(nullptr));
        _exit(127);
    }
    close(exec_done[1]);
    close(go[0]);
    const ProcessAddressSpace before(ProcessAddressSpace::open_maps(child));
    static const int marker = 7;
    const auto at = reinterpret_cast<std::uintptr_t>(&marker);
    EXPECT_TRUE(before.accessible(at, sizeof marker, false)) << "the forked image has our mappings";
    EXPECT_FALSE(before.gone());
    ASSERT_EQ(write(go[1], "x", 1), 1);
    char none = 0;
    EXPECT_EQ(read(exec_done[0], &none, 1), 0) << "EOF once the child exec'ed";
    EXPECT_TRUE(before.gone());
    EXPECT_FALSE(before.accessible(at, sizeof marker, false));
    const ProcessAddressSpace after(ProcessAddressSpace::open_maps(child));
    EXPECT_FALSE(after.gone()) << "the same pid, a new image, a new file";
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    close(exec_done[0]);
    close(go[1]);
}

TEST(ProcessAddressSpaceTest, AnExitedProcessIsGone) {
    int go[2];
    ASSERT_EQ(pipe2(go, O_CLOEXEC), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        close(go[1]);
        char step = 0;
        (void)read(go[0], &step, 1);
        _exit(0);
    }
    close(go[0]);
    const ProcessAddressSpace space(ProcessAddressSpace::open_maps(child));
    EXPECT_FALSE(space.gone());
    close(go[1]);
    waitpid(child, nullptr, 0);
    EXPECT_TRUE(space.gone());
}

}  // namespace
}  // namespace uroce::mr
