// Registration variants: iova, ZERO_BASED, dma-buf, on-demand (explicit and
// implicit), HUGETLB, unmapped ranges, rereg, and the resource limits.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>

#include "mr/address_space.h"
#include "mr_test_util.h"

namespace uroce::mr {
namespace {

using namespace test;

// Pages mapped with mmap, unmapped on destruction (what is left of them).
class Mapped {
public:
    explicit Mapped(std::size_t pages, int prot = PROT_READ | PROT_WRITE, int extra_flags = 0)
        : bytes_(pages * page()) {
        void* p = mmap(nullptr, bytes_, prot, MAP_PRIVATE | MAP_ANONYMOUS | extra_flags, -1, 0);
        addr_ = p == MAP_FAILED ? nullptr : p;
    }
    ~Mapped() {
        if (addr_ != nullptr) {
            munmap(addr_, bytes_);  // unmapping an already unmapped part is fine
        }
    }
    Mapped(const Mapped&) = delete;
    Mapped& operator=(const Mapped&) = delete;

    [[nodiscard]] bool ok() const { return addr_ != nullptr; }
    [[nodiscard]] std::uint64_t at(std::size_t page_no) const { return addr_of(addr_) + page_no * page(); }
    [[nodiscard]] std::size_t bytes() const { return bytes_; }
    static std::size_t page() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

private:
    void* addr_ = nullptr;
    std::size_t bytes_;
};

void unmap(std::uint64_t addr, std::size_t bytes) {
    ASSERT_EQ(munmap(reinterpret_cast<void*>(addr), bytes), 0) << std::strerror(errno);
}

// An address space that answers from a fixed list, for HUGETLB decisions
// this machine cannot produce.
class FakeAddressSpace final : public AddressSpace {
public:
    explicit FakeAddressSpace(std::vector<Mapping> maps) : maps_(std::move(maps)) {}
    [[nodiscard]] bool accessible(std::uint64_t addr, std::uint64_t len, bool write) const override {
        return covered_by(maps_, addr, len, [write](const Mapping& m) { return m.readable && (!write || m.writable); });
    }
    [[nodiscard]] std::optional<std::uint64_t> huge_page_size(std::uint64_t addr, std::uint64_t len) const override {
        std::optional<std::uint64_t> size;
        const bool huge = covered_by(maps_, addr, len, [&size](const Mapping& m) {
            if (m.kernel_page_size <= 4096 || (size && *size != m.kernel_page_size)) {
                return false;
            }
            size = m.kernel_page_size;
            return true;
        });
        return huge ? size : std::nullopt;
    }

private:
    std::vector<Mapping> maps_;
};

class RegVariants : public MrTest {
protected:
    std::shared_ptr<const AddressSpace> self = std::make_shared<ProcessAddressSpace>(ProcessAddressSpace::open_maps(getpid()));
};

// ---- iova and ZERO_BASED ----

TEST_F(RegVariants, IovaNamesTheFirstByte) {
    RegRequest r = make_req(pd, buf, 4096, kFull);
    r.iova = 0xABC000;
    const Registered reg = table.reg_mr(r);
    ASSERT_EQ(reg.error, 0);
    EXPECT_EQ(rd(reg.rkey, 0xABC000 + 10, 10).host_addr, buf + 10);
    EXPECT_EQ(local(table, reg.lkey, pd, 0xABC000 + 4095, 1, true).host_addr, buf + 4095);
    EXPECT_EQ(rd(reg.rkey, buf, 10).status, CheckStatus::RemoteOutOfRange);
}

TEST_F(RegVariants, IovaZeroBehavesAsZeroBased) {
    RegRequest r = make_req(pd, buf + 4096, 4096, kFull);
    r.iova = 0;
    const Registered reg = table.reg_mr(r);
    ASSERT_EQ(reg.error, 0);
    const std::uint32_t zb = reg_ok(4096, 4096, kFull | Access::kZeroBased);
    for (std::uint32_t key : {reg.rkey, zb}) {
        EXPECT_EQ(rd(key, 0, 8).host_addr, buf + 4096);
        EXPECT_EQ(wr(key, 4000, 96).host_addr, buf + 4096 + 4000);
        EXPECT_EQ(rd(key, 4096, 1).status, CheckStatus::RemoteOutOfRange);
        EXPECT_EQ(rd(key, buf + 4096, 1).status, CheckStatus::RemoteOutOfRange);
    }
}

TEST_F(RegVariants, ZeroBasedWinsOverAGivenIova) {
    RegRequest r = make_req(pd, buf, 4096, kFull | Access::kZeroBased);
    r.iova = 0x5000'0000;
    const Registered reg = table.reg_mr(r);
    ASSERT_EQ(reg.error, 0);
    EXPECT_EQ(rd(reg.rkey, 8, 8).host_addr, buf + 8);
}

TEST_F(RegVariants, IovaRangeMustNotWrap) {
    RegRequest r = make_req(pd, buf, 8192, kFull);
    r.iova = UINT64_MAX - 4095;
    EXPECT_EQ(table.reg_mr(r).error, EINVAL);
    EXPECT_EQ(reg(UINT64_MAX - 4095, 8192, kLW).error, EINVAL);
    EXPECT_EQ(reg(buf, 0, kLW).error, EINVAL);
    EXPECT_EQ(table.counts().mrs, 0u);
}

// ---- dma-buf ----

TEST_F(RegVariants, DmaBufTranslatesToOffsets) {
    RegRequest r = make_req(pd, 0x10000, 1 << 20, kFull);
    r.backing = Backing::DmaBuf;
    r.dmabuf_handle = 7;
    r.iova = 0x4000'0000;
    r.address_space = self;  // not consulted: the bytes are not process memory
    const Registered reg = table.reg_mr(r);
    ASSERT_EQ(reg.error, 0);
    EpochGuard guard(table.epoch());
    RemoteRequest rq;
    rq.rkey = MrKey{reg.rkey};
    rq.pd = PdHandle{pd};
    rq.qp_access = kQpAll;
    rq.op = RemoteOp::Write;
    rq.va = 0x4000'0000 + 0x2345;
    rq.length = 64;
    const Translation t = table.check_remote(guard, rq);
    ASSERT_EQ(t.status, CheckStatus::Ok);
    EXPECT_EQ(t.host_addr, 0x10000u + 0x2345u);
    EXPECT_EQ(t.desc->backing, Backing::DmaBuf);
    EXPECT_EQ(t.desc->dmabuf_handle, 7);
    const Translation l = table.check_local(guard, MrKey{reg.lkey}, PdHandle{pd}, 0x4000'0000, 1 << 20, true);
    EXPECT_EQ(l.status, CheckStatus::Ok);
    EXPECT_EQ(l.host_addr, 0x10000u);
}

TEST_F(RegVariants, DmaBufRefusals) {
    RegRequest r = make_req(pd, 0, 4096, kFull);
    r.backing = Backing::DmaBuf;
    r.dmabuf_handle = -1;
    EXPECT_EQ(table.reg_mr(r).error, EINVAL);
    r.dmabuf_handle = 3;
    r.access = kFull | Access::kOnDemand;
    EXPECT_EQ(table.reg_mr(r).error, EINVAL);
    r.access = kFull | Access::kHugetlb;
    EXPECT_EQ(table.reg_mr(r).error, EINVAL);
    r.access = kFull;
    EXPECT_EQ(table.reg_mr(r).error, 0);
    // A zero-based dma-buf MR at offset 0.
    r.access = kFull | Access::kZeroBased;
    r.addr = 8192;
    const Registered zb = table.reg_mr(r);
    ASSERT_EQ(zb.error, 0);
    EXPECT_EQ(rd(zb.rkey, 16, 16).host_addr, 8192u + 16u);
}

// ---- on-demand paging ----

TEST_F(RegVariants, ImplicitOdpChecksTheRealMappingsOnEveryAccess) {
    RegRequest r = make_req(pd, 0, UINT64_MAX, kFull | Access::kOnDemand);
    r.address_space = self;
    const Registered odp = table.reg_mr(r);
    ASSERT_EQ(odp.error, 0);

    Mapped m(4);
    ASSERT_TRUE(m.ok());
    const std::uint64_t p0 = m.at(0);
    // Mapped: the va is the process address.
    Checked c = rd(odp.rkey, p0 + 100, 200);
    ASSERT_EQ(c.status, CheckStatus::Ok);
    EXPECT_EQ(c.host_addr, p0 + 100);
    EXPECT_EQ(wr(odp.rkey, p0, m.bytes()).status, CheckStatus::Ok);
    EXPECT_EQ(atomic(odp.rkey, p0 + 8).status, CheckStatus::Ok);
    EXPECT_EQ(local(table, odp.lkey, pd, p0, 4096, true).status, CheckStatus::Ok);

    // Unmap the third page: accesses touching it fault, the rest still work.
    unmap(m.at(2), Mapped::page());
    EXPECT_EQ(rd(odp.rkey, m.at(2), 8).status, CheckStatus::RemoteOdpFault);
    EXPECT_EQ(wr(odp.rkey, m.at(1) + 4000, 200).status, CheckStatus::RemoteOdpFault);
    EXPECT_EQ(atomic(odp.rkey, m.at(2) + 64).status, CheckStatus::RemoteOdpFault);
    EXPECT_EQ(local(table, odp.lkey, pd, m.at(2), 16, false).status, CheckStatus::LocalOdpFault);
    EXPECT_EQ(local(table, odp.lkey, pd, p0, m.bytes(), true).status, CheckStatus::LocalOdpFault);
    EXPECT_EQ(rd(odp.rkey, m.at(1), 4096).status, CheckStatus::Ok);
    EXPECT_EQ(rd(odp.rkey, m.at(3), 4096).status, CheckStatus::Ok);

    // A read-only page: reads work, writes fault.
    ASSERT_EQ(mprotect(reinterpret_cast<void*>(m.at(3)), Mapped::page(), PROT_READ), 0);
    EXPECT_EQ(rd(odp.rkey, m.at(3), 8).status, CheckStatus::Ok);
    EXPECT_EQ(wr(odp.rkey, m.at(3), 8).status, CheckStatus::RemoteOdpFault);
    EXPECT_EQ(atomic(odp.rkey, m.at(3)).status, CheckStatus::RemoteOdpFault);
    EXPECT_EQ(local(table, odp.lkey, pd, m.at(3), 8, false).status, CheckStatus::Ok);
    EXPECT_EQ(local(table, odp.lkey, pd, m.at(3), 8, true).status, CheckStatus::LocalOdpFault);

    // The range check still applies first; nothing wraps at the top.
    EXPECT_EQ(rd(odp.rkey, UINT64_MAX - 3, 8).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(rd(odp.rkey, 0, 8).status, CheckStatus::RemoteOdpFault);  // page 0 is never mapped
}

// An MR that may be written pins for write: read-only memory is EFAULT for
// it (the copying way would write it with FOLL_FORCE: docs/security.md), and
// still fine for a read-only MR.
TEST_F(RegVariants, WritableMrsNeedWritableMemory) {
    Mapped m(2);
    ASSERT_TRUE(m.ok());
    ASSERT_EQ(mprotect(reinterpret_cast<void*>(m.at(1)), Mapped::page(), PROT_READ), 0);
    for (const std::uint32_t writes : {Access::kLocalWrite, Access::kLocalWrite | Access::kRemoteWrite,
                                       Access::kLocalWrite | Access::kRemoteAtomic}) {
        RegRequest r = make_req(pd, m.at(0), m.bytes(), writes);
        r.address_space = self;
        EXPECT_EQ(table.reg_mr(r).error, EFAULT) << "access 0x" << std::hex << writes;
        r.length = Mapped::page();
        EXPECT_EQ(table.reg_mr(r).error, 0) << "the writable page alone";
    }
    RegRequest ro = make_req(pd, m.at(0), m.bytes(), Access::kRemoteRead);
    ro.address_space = self;
    EXPECT_EQ(table.reg_mr(ro).error, 0);
}

TEST_F(RegVariants, ImplicitOdpRefusals) {
    RegRequest r = make_req(pd, 0, UINT64_MAX, kFull | Access::kOnDemand);
    EXPECT_EQ(table.reg_mr(r).error, EINVAL) << "no address space to check accesses against";
    r.address_space = self;
    r.access = kFull | Access::kOnDemand | Access::kZeroBased;
    EXPECT_EQ(table.reg_mr(r).error, EINVAL);
    r.access = kFull | Access::kOnDemand | Access::kHugetlb;
    EXPECT_EQ(table.reg_mr(r).error, EINVAL);
    r.access = kFull | Access::kOnDemand;
    r.iova = 0x1000;
    EXPECT_EQ(table.reg_mr(r).error, EINVAL);
    // Without ON_DEMAND, addr 0 / length SIZE_MAX is just too long.
    RegRequest plain = make_req(pd, 0, UINT64_MAX, kFull);
    plain.address_space = self;
    EXPECT_EQ(table.reg_mr(plain).error, EINVAL);
    EXPECT_EQ(table.counts().mrs, 0u);
}

TEST_F(RegVariants, ExplicitOdpIsCheckedAtAccessNotAtRegistration) {
    Mapped m(3);
    ASSERT_TRUE(m.ok());
    unmap(m.at(1), Mapped::page());
    RegRequest r = make_req(pd, m.at(0), m.bytes(), kFull | Access::kOnDemand);
    r.address_space = self;
    const Registered odp = table.reg_mr(r);
    ASSERT_EQ(odp.error, 0) << "an on-demand MR may cover unmapped memory";
    EXPECT_EQ(rd(odp.rkey, m.at(0), 4096).status, CheckStatus::Ok);
    EXPECT_EQ(rd(odp.rkey, m.at(1), 8).status, CheckStatus::RemoteOdpFault);
    EXPECT_EQ(wr(odp.rkey, m.at(2), 8).status, CheckStatus::Ok);
    EXPECT_EQ(local(table, odp.lkey, pd, m.at(0), m.bytes(), false).status, CheckStatus::LocalOdpFault);
    EXPECT_EQ(rd(odp.rkey, m.at(3), 8).status, CheckStatus::RemoteOutOfRange);
}

TEST_F(RegVariants, UnmappedRangeIsEfault) {
    Mapped m(3);
    ASSERT_TRUE(m.ok());
    RegRequest r = make_req(pd, m.at(0), m.bytes(), kFull);
    r.address_space = self;
    ASSERT_EQ(table.reg_mr(r).error, 0);  // all mapped
    unmap(m.at(1), Mapped::page());
    EXPECT_EQ(table.reg_mr(r).error, EFAULT);
    r.length = Mapped::page();
    EXPECT_EQ(table.reg_mr(r).error, 0) << "the first page alone is mapped";
    r.addr = m.at(1) + 100;
    r.length = 8;
    EXPECT_EQ(table.reg_mr(r).error, EFAULT);

    Mapped none(1, PROT_NONE);
    ASSERT_TRUE(none.ok());
    r.addr = none.at(0);
    r.length = 64;
    EXPECT_EQ(table.reg_mr(r).error, EFAULT) << "a PROT_NONE mapping cannot be pinned";
    EXPECT_EQ(table.counts().mrs, 2u);
}

// ---- HUGETLB ----

TEST_F(RegVariants, HugetlbIsRefusedForNormalPages) {
    Mapped m(4);
    ASSERT_TRUE(m.ok());
    RegRequest r = make_req(pd, m.at(0), m.bytes(), kFull | Access::kHugetlb);
    r.address_space = self;
    EXPECT_EQ(table.reg_mr(r).error, EINVAL);
    std::vector<std::byte> heap(1 << 16);
    r.addr = addr_of(heap.data());
    r.length = heap.size();
    EXPECT_EQ(table.reg_mr(r).error, EINVAL);
    r.address_space = nullptr;
    EXPECT_EQ(table.reg_mr(r).error, EINVAL) << "HUGETLB cannot be checked without the address space";
    EXPECT_EQ(table.counts().mrs, 0u);
}

TEST_F(RegVariants, HugetlbIsAcceptedForHugePages) {
    constexpr std::size_t kHuge = 2u << 20;
    void* p = mmap(nullptr, kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    if (p == MAP_FAILED) {
        GTEST_SKIP() << "mmap(MAP_HUGETLB) failed (" << std::strerror(errno)
                     << "): no huge pages reserved on this machine (vm.nr_hugepages)";
    }
    std::memset(p, 1, kHuge);  // fault the huge page in
    RegRequest r = make_req(pd, addr_of(p), kHuge, kFull | Access::kHugetlb);
    r.address_space = self;
    const Registered reg = table.reg_mr(r);
    EXPECT_EQ(reg.error, 0);
    EXPECT_EQ(rd(reg.rkey, addr_of(p) + 4096, 8).status, CheckStatus::Ok);
    munmap(p, kHuge);
}

TEST_F(RegVariants, HugetlbDecisionFollowsTheAddressSpace) {
    // The same decision with mappings described by hand.
    std::vector<Mapping> maps(3);
    maps[0] = {0x200000, 0x600000, true, true, 2u << 20, "/dev/hugepages/a"};
    maps[1] = {0x600000, 0x800000, true, true, 4096, ""};
    maps[2] = {0x40000000, 0x80000000, true, true, 1u << 30, "/dev/hugepages/b"};
    auto fake = std::make_shared<FakeAddressSpace>(maps);
    RegRequest r = make_req(pd, 0x200000, 0x400000, kFull | Access::kHugetlb);
    r.address_space = fake;
    EXPECT_EQ(table.reg_mr(r).error, 0);
    r.length = 0x400001;  // one byte into the 4 KiB mapping
    EXPECT_EQ(table.reg_mr(r).error, EINVAL);
    r.addr = 0x40000000;
    r.length = 1u << 30;
    EXPECT_EQ(table.reg_mr(r).error, 0);
    r.addr = 0x10000000;  // not mapped at all: not huge either
    r.length = 4096;
    EXPECT_EQ(table.reg_mr(r).error, EINVAL);
    EXPECT_EQ(table.counts().mrs, 2u);
}

// ---- rereg ----

class Rereg : public MrTest {};

TEST_F(Rereg, UnknownFlagsAndBadKeysAreEinval) {
    const std::uint32_t key = reg_ok(0, 4096, kFull);
    const RegRequest r = make_req(pd, buf, 4096, kFull);
    EXPECT_EQ(table.rereg_mr(key, 1u << 3, r), EINVAL);
    EXPECT_EQ(table.rereg_mr(key, rereg::kChangeAccess | (1u << 31), r), EINVAL);
    EXPECT_EQ(table.rereg_mr(other_byte(key), rereg::kChangeAccess, r), EINVAL);
    EXPECT_EQ(table.rereg_mr(make_key(4000, 1), rereg::kChangeAccess, r), EINVAL);
    const KeyResult mw = table.alloc_mw(pd, kOwner, MwType::Type1);
    EXPECT_EQ(table.rereg_mr(mw.key, rereg::kChangeAccess, r), EINVAL) << "a window is not an MR";
    EXPECT_EQ(table.rereg_mr(key, 0, r), 0) << "no flags: nothing to change";
    EXPECT_EQ(rd(key, buf, 8).status, CheckStatus::Ok);
}

TEST_F(Rereg, ChangeTranslationKeepsTheKeys) {
    const std::uint32_t key = reg_ok(0, 4096, kFull);
    RegRequest r = make_req(pd, buf + 8192, 8192, 0);
    ASSERT_EQ(table.rereg_mr(key, rereg::kChangeTranslation, r), 0);
    EXPECT_EQ(rd(key, buf + 8192 + 5000, 8).host_addr, buf + 8192 + 5000);
    EXPECT_EQ(wr(key, buf + 8192, 8192).status, CheckStatus::Ok) << "access unchanged";
    EXPECT_EQ(rd(key, buf, 8).status, CheckStatus::RemoteOutOfRange);
    // To an iova.
    r.iova = 0x9000'0000;
    ASSERT_EQ(table.rereg_mr(key, rereg::kChangeTranslation, r), 0);
    EXPECT_EQ(rd(key, 0x9000'0000 + 16, 8).host_addr, buf + 8192 + 16);
    // A refused translation leaves the MR as it was.
    r.length = 0;
    EXPECT_EQ(table.rereg_mr(key, rereg::kChangeTranslation, r), EINVAL);
    EXPECT_EQ(rd(key, 0x9000'0000 + 16, 8).host_addr, buf + 8192 + 16);
    EXPECT_EQ(table.counts().mrs, 1u);
}

TEST_F(Rereg, ChangeTranslationToUnmappedMemoryIsEfault) {
    Mapped m(2);
    ASSERT_TRUE(m.ok());
    RegRequest r = make_req(pd, m.at(0), m.bytes(), kFull);
    r.address_space = std::make_shared<ProcessAddressSpace>(ProcessAddressSpace::open_maps(getpid()));
    const Registered reg = table.reg_mr(r);
    ASSERT_EQ(reg.error, 0);
    unmap(m.at(1), Mapped::page());
    RegRequest moved = make_req(pd, m.at(1), 4096, 0);  // the address space stays the registration's
    EXPECT_EQ(table.rereg_mr(reg.lkey, rereg::kChangeTranslation, moved), EFAULT);
    EXPECT_EQ(rd(reg.rkey, m.at(0), 8).status, CheckStatus::Ok);
}

TEST_F(Rereg, ChangeAccess) {
    const std::uint32_t key = reg_ok(0, 4096, kLW | kRR);
    EXPECT_EQ(wr(key, buf, 8).status, CheckStatus::RemoteAccessNotGranted);
    RegRequest r = make_req(pd, 0, 0, kLW | kRR | kRW);  // translation fields ignored
    ASSERT_EQ(table.rereg_mr(key, rereg::kChangeAccess, r), 0);
    EXPECT_EQ(wr(key, buf, 8).status, CheckStatus::Ok);
    EXPECT_EQ(rd(key, buf, 8).host_addr, buf);
    r.access = kRW;  // REMOTE_WRITE without LOCAL_WRITE
    EXPECT_EQ(table.rereg_mr(key, rereg::kChangeAccess, r), EINVAL);
    EXPECT_EQ(wr(key, buf, 8).status, CheckStatus::Ok);
    r.access = 0;
    ASSERT_EQ(table.rereg_mr(key, rereg::kChangeAccess, r), 0);
    EXPECT_EQ(rd(key, buf, 8).status, CheckStatus::RemoteAccessNotGranted);
    EXPECT_EQ(local(table, key, pd, buf, 8, true).status, CheckStatus::LocalWriteNotGranted);
}

TEST_F(Rereg, ChangePdMovesTheReference) {
    const std::uint32_t key = reg_ok(0, 4096, kFull);
    const std::uint32_t pd2 = pds.alloc(kOwner).pd;
    EXPECT_EQ(pds.dealloc(pd, kOwner), EBUSY);
    RegRequest r = make_req(pd2, 0, 0, 0);
    ASSERT_EQ(table.rereg_mr(key, rereg::kChangePd, r), 0);
    EXPECT_EQ(rd(key, buf, 8).status, CheckStatus::RemotePdMismatch);
    EXPECT_EQ(remote(table, key, pd2, RemoteOp::Write, buf, 8).status, CheckStatus::Ok);
    EXPECT_EQ(pds.dealloc(pd2, kOwner), EBUSY);
    EXPECT_EQ(pds.dealloc(pd, kOwner), 0) << "the old PD is no longer used";
    // Not to a PD of another owner.
    const std::uint32_t foreign = pds.alloc(kOtherOwner).pd;
    r.pd = foreign;
    EXPECT_EQ(table.rereg_mr(key, rereg::kChangePd, r), EINVAL);
    EXPECT_EQ(remote(table, key, pd2, RemoteOp::Read, buf, 8).status, CheckStatus::Ok);
}

TEST_F(Rereg, AllThreeAtOnce) {
    const std::uint32_t key = reg_ok(0, 4096, kLW);
    const std::uint32_t pd2 = pds.alloc(kOwner).pd;
    RegRequest r = make_req(pd2, buf + 4096, 4096, kLW | kRR | Access::kZeroBased);
    ASSERT_EQ(table.rereg_mr(key, rereg::kSupported, r), 0);
    const Checked c = remote(table, key, pd2, RemoteOp::Read, 100, 8);
    EXPECT_EQ(c.status, CheckStatus::Ok);
    EXPECT_EQ(c.host_addr, buf + 4096 + 100);
}

TEST_F(Rereg, BusyWhileAWindowIsBound) {
    const std::uint32_t key = reg_ok(0, 8192, kFull | Access::kMwBind);
    const KeyResult mw = table.alloc_mw(pd, kOwner, MwType::Type1);
    BindRequest b;
    b.owner = kOwner;
    b.mw_key = mw.key;
    b.mr_lkey = key;
    b.addr = buf;
    b.length = 4096;
    b.access = kRR;
    b.qp_pd = pd;
    const KeyResult bound = table.bind_mw_type1(b);
    ASSERT_EQ(bound.error, 0);
    const RegRequest r = make_req(pd, buf, 4096, kFull | Access::kMwBind);
    EXPECT_EQ(table.rereg_mr(key, rereg::kChangeAccess, r), EBUSY);
    EXPECT_EQ(table.rereg_mr(key, rereg::kChangeTranslation, r), EBUSY);
    EXPECT_EQ(table.dereg_mr(key, kOwner), EBUSY);
    b.mw_key = bound.key;
    b.length = 0;
    ASSERT_EQ(table.bind_mw_type1(b).error, 0);  // unbind
    EXPECT_EQ(table.rereg_mr(key, rereg::kChangeAccess, r), 0);
    EXPECT_EQ(table.dereg_mr(key, kOwner), 0);
}

// ---- limits ----

TEST(RegLimits, MaxMr) {
    PdTable pds;
    MrTable table(pds, Limits{.max_mr = 4});
    const std::uint32_t pd = pds.alloc(kOwner).pd;
    std::vector<std::uint32_t> keys;
    for (int i = 0; i < 4; ++i) {
        const Registered r = table.reg_mr(make_req(pd, 0x10000, 4096, kLW));
        ASSERT_EQ(r.error, 0);
        keys.push_back(r.lkey);
    }
    EXPECT_EQ(table.reg_mr(make_req(pd, 0x10000, 4096, kLW)).error, ENOMEM);
    EXPECT_EQ(table.counts().mrs, 4u);
    ASSERT_EQ(table.dereg_mr(keys[1], kOwner), 0);
    EXPECT_EQ(table.reg_mr(make_req(pd, 0x10000, 4096, kLW)).error, 0);
    EXPECT_EQ(table.reg_mr(make_req(pd, 0x10000, 4096, kLW)).error, ENOMEM);

    // Relaxed slots count against the same limit.
    PoolMemory mem(2);
    RelaxedPoolConfig cfg;
    cfg.capacity = 2;
    int err = 0;
    EXPECT_EQ(table.create_relaxed_pool(pd, kOwner, cfg, mem.header, err), nullptr);
    EXPECT_EQ(err, ENOMEM);
}

TEST(RegLimits, MaxMrSize) {
    PdTable pds;
    MrTable table(pds, Limits{.max_mr_size = 1u << 20});
    const std::uint32_t pd = pds.alloc(kOwner).pd;
    EXPECT_EQ(table.reg_mr(make_req(pd, 0x10000, 1u << 20, kLW)).error, 0);
    EXPECT_EQ(table.reg_mr(make_req(pd, 0x10000, (1u << 20) + 1, kLW)).error, EINVAL);
    RegRequest dmabuf = make_req(pd, 0, 2u << 20, kLW);
    dmabuf.backing = Backing::DmaBuf;
    dmabuf.dmabuf_handle = 1;
    EXPECT_EQ(table.reg_mr(dmabuf).error, EINVAL);

    PdTable pds2;
    MrTable defaults(pds2);
    const std::uint32_t pd2 = pds2.alloc(kOwner).pd;
    EXPECT_EQ(defaults.limits().max_mr_size, 1ull << 47);
    EXPECT_EQ(defaults.reg_mr(make_req(pd2, 0x10000, 1ull << 47, kLW)).error, 0);
    EXPECT_EQ(defaults.reg_mr(make_req(pd2, 0x10000, (1ull << 47) + 1, kLW)).error, EINVAL);
}

TEST(RegLimits, MaxMw) {
    PdTable pds;
    MrTable table(pds, Limits{.max_mw = 2});
    const std::uint32_t pd = pds.alloc(kOwner).pd;
    const KeyResult a = table.alloc_mw(pd, kOwner, MwType::Type1);
    const KeyResult b = table.alloc_mw(pd, kOwner, MwType::Type2);
    ASSERT_EQ(a.error, 0);
    ASSERT_EQ(b.error, 0);
    EXPECT_EQ(table.alloc_mw(pd, kOwner, MwType::Type1).error, ENOMEM);
    EXPECT_EQ(table.counts().mws, 2u);
    ASSERT_EQ(table.dealloc_mw(a.key, kOwner), 0);
    EXPECT_EQ(table.alloc_mw(pd, kOwner, MwType::Type2).error, 0);
    // Windows do not use up MRs.
    EXPECT_EQ(table.reg_mr(make_req(pd, 0x10000, 4096, kLW)).error, 0);
}

TEST(RegLimits, PdMustBelongToTheOwner) {
    PdTable pds;
    MrTable table(pds);
    const std::uint32_t pd = pds.alloc(kOwner).pd;
    EXPECT_EQ(table.reg_mr(make_req(pd, 0x10000, 4096, kLW, kOtherOwner)).error, EINVAL);
    EXPECT_EQ(table.reg_mr(make_req(pd + 1000, 0x10000, 4096, kLW)).error, EINVAL);
    EXPECT_EQ(table.alloc_mw(pd, kOtherOwner, MwType::Type1).error, EINVAL);
}

}  // namespace
}  // namespace uroce::mr
