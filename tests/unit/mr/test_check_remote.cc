// check_remote: every failure reason, the translation, and the one
// completion status and NAK each reason maps to.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>

#include "mr_test_util.h"

namespace uroce::mr {
namespace {

using namespace test;

constexpr std::uint8_t kNakInvalidRequest = 0x61;       // NAK, code 1 (IBA table 43)
constexpr std::uint8_t kNakRemoteAccessError = 0x62;    // NAK, code 2

struct Expected {
    CheckStatus status;
    const char* name;
    WcStatus wc;
    std::optional<std::uint8_t> syndrome;
};

TEST(CheckStatusTable, EveryStatusMapsToOneCompletionAndNak) {
    const Expected table[] = {
        {CheckStatus::Ok, "ok", WcStatus::Success, std::nullopt},
        {CheckStatus::LkeyInvalid, "lkey_invalid", WcStatus::LocProtErr, std::nullopt},
        {CheckStatus::LocalPdMismatch, "local_pd_mismatch", WcStatus::LocProtErr, std::nullopt},
        {CheckStatus::LocalWriteNotGranted, "local_write_not_granted", WcStatus::LocProtErr, std::nullopt},
        {CheckStatus::LocalOutOfRange, "local_out_of_range", WcStatus::LocProtErr, std::nullopt},
        {CheckStatus::LocalOdpFault, "local_odp_fault", WcStatus::LocProtErr, std::nullopt},
        {CheckStatus::QpAccessNotEnabled, "qp_access_not_enabled", WcStatus::RemInvReqErr, kNakInvalidRequest},
        {CheckStatus::RkeyInvalid, "rkey_invalid", WcStatus::RemAccessErr, kNakRemoteAccessError},
        {CheckStatus::RemotePdMismatch, "remote_pd_mismatch", WcStatus::RemAccessErr, kNakRemoteAccessError},
        {CheckStatus::RemoteAccessNotGranted, "remote_access_not_granted", WcStatus::RemAccessErr,
         kNakRemoteAccessError},
        {CheckStatus::RemoteOutOfRange, "remote_out_of_range", WcStatus::RemAccessErr, kNakRemoteAccessError},
        {CheckStatus::AtomicMisaligned, "atomic_misaligned", WcStatus::RemInvReqErr, kNakInvalidRequest},
        {CheckStatus::WindowWrongQp, "window_wrong_qp", WcStatus::RemAccessErr, kNakRemoteAccessError},
        {CheckStatus::RemoteOdpFault, "remote_odp_fault", WcStatus::RemAccessErr, kNakRemoteAccessError},
    };
    ASSERT_EQ(std::size(table), kCheckStatusCount) << "a new CheckStatus needs a row here";
    std::set<std::string> names;
    for (std::size_t i = 0; i < std::size(table); ++i) {
        const Expected& e = table[i];
        SCOPED_TRACE(e.name);
        ASSERT_EQ(static_cast<std::size_t>(e.status), i);
        EXPECT_EQ(info(e.status).name, e.name);
        EXPECT_EQ(info(e.status).wc_status, e.wc);
        EXPECT_EQ(nak_syndrome(e.status), e.syndrome);
        EXPECT_EQ(info(e.status).nak.has_value(), e.syndrome.has_value());
        if (e.syndrome) {
            EXPECT_EQ(wire::ack_kind(*e.syndrome), wire::AckKind::Nak);
            EXPECT_EQ(static_cast<std::uint8_t>(*info(e.status).nak), wire::syndrome_value(*e.syndrome));
        }
        EXPECT_TRUE(names.insert(std::string(e.name)).second);
    }
}

class CheckRemote : public MrTest {};

TEST_F(CheckRemote, OkTranslatesAndCarriesTheDescriptor) {
    const std::uint32_t key = reg_ok(0, 8192, kFull);
    EpochGuard guard(table.epoch());
    RemoteRequest r;
    r.rkey = MrKey{key};
    r.pd = PdHandle{pd};
    r.qpn = Qpn{kQpn};
    r.qp_access = kQpAll;
    r.op = RemoteOp::Write;
    r.va = buf + 4000;
    r.length = 1000;
    const Translation t = table.check_remote(guard, r);
    ASSERT_EQ(t.status, CheckStatus::Ok);
    EXPECT_EQ(t.host_addr, buf + 4000);
    ASSERT_NE(t.desc, nullptr);
    EXPECT_EQ(t.desc->key(), key);
    EXPECT_EQ(t.desc->kind, ObjectKind::Mr);
}

TEST_F(CheckRemote, QpAccessNotEnabledComesFirst) {
    const std::uint32_t key = reg_ok(0, 4096, kFull);
    struct Case {
        RemoteOp op;
        std::uint32_t qp_access;
    };
    for (const Case& c : {Case{RemoteOp::Read, kRW | kRA}, Case{RemoteOp::Write, kRR | kRA},
                          Case{RemoteOp::Atomic, kRR | kRW}, Case{RemoteOp::Read, 0}}) {
        // Whatever else is wrong with the request.
        for (std::uint32_t rkey : {key, 0u, other_byte(key)}) {
            for (std::uint64_t len : {std::uint64_t{0}, std::uint64_t{8}, std::uint64_t{1} << 40}) {
                const Checked r = remote(table, rkey, pd, c.op, buf, len, kQpn, c.qp_access);
                EXPECT_EQ(r.status, CheckStatus::QpAccessNotEnabled);
            }
        }
    }
    EXPECT_EQ(info(CheckStatus::QpAccessNotEnabled).wc_status, WcStatus::RemInvReqErr);
    EXPECT_EQ(nak_syndrome(CheckStatus::QpAccessNotEnabled), kNakInvalidRequest);
}

TEST_F(CheckRemote, ZeroLengthReadOrWriteNeedsNoKey) {
    for (RemoteOp op : {RemoteOp::Read, RemoteOp::Write}) {
        for (std::uint32_t rkey : {0u, 0xDEADBEEFu, make_key(77, 3)}) {
            const Checked c = remote(table, rkey, pd + 100, op, 0xFFFFFFFFFFFFFFFFull, 0);
            EXPECT_EQ(c.status, CheckStatus::Ok);
            EXPECT_FALSE(c.has_desc);
            EXPECT_EQ(c.host_addr, 0u);
        }
    }
    // A zero-length atomic is not a zero-length transfer: the key is checked.
    EXPECT_EQ(remote(table, 0xDEADBEEFu, pd, RemoteOp::Atomic, buf, 0).status, CheckStatus::RkeyInvalid);
    const std::uint32_t key = reg_ok(0, 4096, kFull);
    EXPECT_EQ(atomic(key, buf, 0).status, CheckStatus::AtomicMisaligned);
}

TEST_F(CheckRemote, RkeyInvalid) {
    const std::uint32_t key = reg_ok(0, 4096, kFull);
    EXPECT_EQ(rd(0, buf, 8).status, CheckStatus::RkeyInvalid);
    EXPECT_EQ(rd(make_key(9999, 1), buf, 8).status, CheckStatus::RkeyInvalid);
    EXPECT_EQ(rd(0xFFFFFFFFu, buf, 8).status, CheckStatus::RkeyInvalid);
    for (std::uint8_t delta = 1; delta != 0; ++delta) {
        ASSERT_EQ(rd(other_byte(key, delta), buf, 8).status, CheckStatus::RkeyInvalid);
    }
    // An allocated but unbound window.
    const KeyResult mw = table.alloc_mw(pd, kOwner, MwType::Type1);
    ASSERT_EQ(mw.error, 0);
    EXPECT_EQ(rd(mw.key, buf, 8).status, CheckStatus::RkeyInvalid);
    // Deregistered.
    ASSERT_EQ(table.dereg_mr(key, kOwner), 0);
    EXPECT_EQ(rd(key, buf, 8).status, CheckStatus::RkeyInvalid);
    EXPECT_EQ(wr(key, buf, 8).status, CheckStatus::RkeyInvalid);
    EXPECT_EQ(atomic(key, buf).status, CheckStatus::RkeyInvalid);
}

TEST_F(CheckRemote, RemotePdMismatch) {
    const std::uint32_t key = reg_ok(0, 4096, kFull);
    const std::uint32_t pd2 = pds.alloc(kOwner).pd;
    for (RemoteOp op : {RemoteOp::Read, RemoteOp::Write, RemoteOp::Atomic}) {
        EXPECT_EQ(remote(table, key, pd2, op, buf, 8).status, CheckStatus::RemotePdMismatch);
    }
}

TEST_F(CheckRemote, RemoteAccessNotGranted) {
    const std::uint32_t local_only = reg_ok(0, 4096, kLW);
    EXPECT_EQ(rd(local_only, buf, 8).status, CheckStatus::RemoteAccessNotGranted);
    EXPECT_EQ(wr(local_only, buf, 8).status, CheckStatus::RemoteAccessNotGranted);
    EXPECT_EQ(atomic(local_only, buf).status, CheckStatus::RemoteAccessNotGranted);
    const std::uint32_t read_write = reg_ok(4096, 4096, kLW | kRR | kRW);
    EXPECT_EQ(atomic(read_write, buf + 4096).status, CheckStatus::RemoteAccessNotGranted);
    // Granting is checked before alignment.
    EXPECT_EQ(atomic(read_write, buf + 4097, 3).status, CheckStatus::RemoteAccessNotGranted);
}

TEST_F(CheckRemote, RemoteOutOfRange) {
    const std::uint64_t base = buf + 4096;
    const std::uint32_t key = reg_ok(4096, 4096, kFull);
    EXPECT_EQ(rd(key, base, 4096).status, CheckStatus::Ok);
    EXPECT_EQ(rd(key, base + 4095, 1).status, CheckStatus::Ok);
    EXPECT_EQ(rd(key, base - 1, 1).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(rd(key, base - 1, 8).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(rd(key, base, 4097).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(wr(key, base + 4095, 2).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(wr(key, base + 4096, 1).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(atomic(key, base + 4096).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(atomic(key, base - 8).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(rd(key, 0, 8).status, CheckStatus::RemoteOutOfRange);
}

TEST_F(CheckRemote, RangesNeverOverflowAtTheTopOfTheAddressSpace) {
    const std::uint32_t key = reg_ok(0, 4096, kFull);
    // va + length wraps to an address inside the MR.
    EXPECT_EQ(rd(key, buf + 8, UINT64_MAX - 4).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(rd(key, buf + 8, UINT64_MAX).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(wr(key, buf + 8, 0ull - buf).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(rd(key, UINT64_MAX - 3, 8).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(rd(key, UINT64_MAX, 1).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(atomic(key, UINT64_MAX - 7).status, CheckStatus::RemoteOutOfRange);

    // An MR addressed just below 2^64.
    RegRequest r = make_req(pd, buf, 4096, kFull);
    const std::uint64_t top = UINT64_MAX - 8191;
    r.iova = top;
    const Registered high = table.reg_mr(r);
    ASSERT_EQ(high.error, 0);
    const Checked ok = wr(high.rkey, top + 4088, 8);
    ASSERT_EQ(ok.status, CheckStatus::Ok);
    EXPECT_EQ(ok.host_addr, buf + 4088);
    EXPECT_EQ(atomic(high.rkey, top + 4088).status, CheckStatus::Ok);
    EXPECT_EQ(wr(high.rkey, top + 4090, 8).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(rd(high.rkey, top + 1, UINT64_MAX).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(rd(high.rkey, top + 4096, 4096).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(rd(high.rkey, UINT64_MAX - 4095, 4096).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(atomic(high.rkey, UINT64_MAX - 7).status, CheckStatus::RemoteOutOfRange);
}

TEST_F(CheckRemote, ZeroBasedMrAddressesFromZero) {
    const std::uint32_t key = reg_ok(8192, 4096, kFull | Access::kZeroBased);
    const Checked c = rd(key, 100, 50);
    ASSERT_EQ(c.status, CheckStatus::Ok);
    EXPECT_EQ(c.host_addr, buf + 8192 + 100);
    EXPECT_EQ(atomic(key, 4088).host_addr, buf + 8192 + 4088);
    EXPECT_EQ(rd(key, 0, 4096).status, CheckStatus::Ok);
    EXPECT_EQ(rd(key, 4096, 1).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(rd(key, 1, 4096).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(rd(key, buf + 8192, 8).status, CheckStatus::RemoteOutOfRange);  // the process address
    EXPECT_EQ(rd(key, 8, UINT64_MAX - 4).status, CheckStatus::RemoteOutOfRange);
}

TEST_F(CheckRemote, IovaMrAddressesFromTheIova) {
    RegRequest r = make_req(pd, buf + 4096, 8192, kFull);
    const std::uint64_t iova = 0x1234'5678'0000;
    r.iova = iova;
    const Registered reg = table.reg_mr(r);
    ASSERT_EQ(reg.error, 0);
    EXPECT_EQ(rd(reg.rkey, iova, 8).host_addr, buf + 4096);
    EXPECT_EQ(wr(reg.rkey, iova + 5000, 100).host_addr, buf + 4096 + 5000);
    EXPECT_EQ(rd(reg.rkey, iova + 8191, 1).host_addr, buf + 4096 + 8191);
    EXPECT_EQ(rd(reg.rkey, iova - 1, 1).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(rd(reg.rkey, iova + 8192, 1).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(rd(reg.rkey, buf + 4096, 8).status, CheckStatus::RemoteOutOfRange);
}

TEST_F(CheckRemote, AtomicMustBeEightBytesEightAligned) {
    const std::uint32_t key = reg_ok(0, 4096, kFull);
    EXPECT_EQ(atomic(key, buf + 16).status, CheckStatus::Ok);
    EXPECT_EQ(atomic(key, buf + 16).host_addr, buf + 16);
    for (std::uint64_t off : {1, 2, 4, 7, 12}) {
        EXPECT_EQ(atomic(key, buf + off).status, CheckStatus::AtomicMisaligned) << "offset " << off;
    }
    for (std::uint64_t len : {1, 4, 7, 9, 16}) {
        EXPECT_EQ(atomic(key, buf + 16, len).status, CheckStatus::AtomicMisaligned) << "length " << len;
    }
    EXPECT_EQ(info(CheckStatus::AtomicMisaligned).wc_status, WcStatus::RemInvReqErr);
    EXPECT_EQ(nak_syndrome(CheckStatus::AtomicMisaligned), kNakInvalidRequest);
    // Reads and writes may be unaligned and of any length.
    EXPECT_EQ(rd(key, buf + 3, 5).status, CheckStatus::Ok);
    EXPECT_EQ(wr(key, buf + 3, 5).status, CheckStatus::Ok);
}

TEST_F(CheckRemote, WindowWrongQpForTypeTwo) {
    const std::uint32_t mr = reg_ok(0, 8192, kFull | Access::kMwBind);
    const KeyResult mw = table.alloc_mw(pd, kOwner, MwType::Type2);
    ASSERT_EQ(mw.error, 0);
    BindRequest b;
    b.owner = kOwner;
    b.mw_key = make_key(key_index(mw.key), 0x33);
    b.mr_lkey = mr;
    b.addr = buf;
    b.length = 4096;
    b.access = kRR | kRW;
    b.qpn = 0x20;
    b.qp_pd = pd;
    ASSERT_EQ(table.bind_mw_type2(b), 0);
    EXPECT_EQ(remote(table, b.mw_key, pd, RemoteOp::Read, buf, 8, 0x20).status, CheckStatus::Ok);
    EXPECT_EQ(remote(table, b.mw_key, pd, RemoteOp::Read, buf, 8, 0x21).status, CheckStatus::WindowWrongQp);
    EXPECT_EQ(remote(table, b.mw_key, pd, RemoteOp::Write, buf, 8, 0).status, CheckStatus::WindowWrongQp);
    EXPECT_EQ(info(CheckStatus::WindowWrongQp).wc_status, WcStatus::RemAccessErr);
}

}  // namespace
}  // namespace uroce::mr
