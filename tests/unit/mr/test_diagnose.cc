// diagnose_remote: after check_remote refused a request, which condition
// it was, what the key names and by how much a range missed.
#include <gtest/gtest.h>

#include "mr_test_util.h"

namespace uroce::mr {
namespace {

using namespace test;

class Diagnose : public MrTest {
protected:
    // check_remote, then diagnose_remote with the status it answered.
    AccessDiagnosis why(std::uint32_t rkey, RemoteOp op, std::uint64_t va, std::uint64_t length,
                        std::uint32_t request_pd = 0) {
        EpochGuard guard(table.epoch());
        RemoteRequest r;
        r.rkey = MrKey{rkey};
        r.pd = PdHandle{request_pd != 0 ? request_pd : pd};
        r.qpn = Qpn{kQpn};
        r.qp_access = kQpAll;
        r.op = op;
        r.va = va;
        r.length = length;
        const Translation t = table.check_remote(guard, r);
        EXPECT_FALSE(t.ok());
        return table.diagnose_remote(guard, r, t.status);
    }
};

TEST_F(Diagnose, AnUnknownKeyIsNotFound) {
    EXPECT_EQ(why(make_key(0xABCDE, 1), RemoteOp::Write, buf, 8).check, RefusedCheck::KeyNotFound);
}

TEST_F(Diagnose, ADeregisteredKeyIsNotFoundAndAReusedIndexMakesItStale) {
    const std::uint32_t old_key = reg_ok(0, 4096, kFull);
    ASSERT_EQ(table.dereg_mr(old_key, kOwner), 0);
    EXPECT_EQ(why(old_key, RemoteOp::Write, buf, 8).check, RefusedCheck::KeyNotFound);
    const std::uint32_t new_key = reg_ok(0, 4096, kFull);
    ASSERT_EQ(key_index(new_key), key_index(old_key));
    const AccessDiagnosis d = why(old_key, RemoteOp::Write, buf, 8);
    EXPECT_EQ(d.check, RefusedCheck::KeyByteStale);
    EXPECT_FALSE(d.region_known);  // the region is someone else's registration now
}

TEST_F(Diagnose, AMissingRightIsNamedAndTheRegionDescribed) {
    const std::uint32_t key = reg_ok(0, 4096, kLW | kRR);
    const AccessDiagnosis d = why(key, RemoteOp::Write, buf, 8);
    EXPECT_EQ(d.check, RefusedCheck::NoRemoteWrite);
    ASSERT_TRUE(d.region_known);
    EXPECT_EQ(d.region_start, buf);
    EXPECT_EQ(d.region_length, 4096u);
    EXPECT_EQ(d.region_access, kLW | kRR);
    EXPECT_EQ(why(key, RemoteOp::Atomic, buf, 8).check, RefusedCheck::NoRemoteAtomic);
    const std::uint32_t no_read = reg_ok(4096, 4096, kLW | kRW);
    EXPECT_EQ(why(no_read, RemoteOp::Read, buf + 4096, 8).check, RefusedCheck::NoRemoteRead);
}

TEST_F(Diagnose, AnotherPdNamesTheRegionsPd) {
    const std::uint32_t key = reg_ok(0, 4096, kFull);
    const AccessDiagnosis d = why(key, RemoteOp::Read, buf, 8, pd + 1);
    EXPECT_EQ(d.check, RefusedCheck::PdMismatch);
    EXPECT_EQ(d.region_pd, pd);
}

TEST_F(Diagnose, OutOfRangeSaysByHowManyBytesAndWhichEnd) {
    const std::uint32_t key = reg_ok(4096, 4096, kFull);
    AccessDiagnosis d = why(key, RemoteOp::Write, buf + 4096 + 4096 - 8, 16);
    EXPECT_EQ(d.check, RefusedCheck::OutOfRange);
    EXPECT_FALSE(d.before_start);
    EXPECT_EQ(d.overrun, 8u);
    d = why(key, RemoteOp::Read, buf + 4096 - 3, 16);
    EXPECT_TRUE(d.before_start);
    EXPECT_EQ(d.overrun, 3u);
    // Wholly past the end: everything up to the request's last byte.
    d = why(key, RemoteOp::Read, buf + 4096 + 4096 + 100, 10);
    EXPECT_EQ(d.overrun, 110u);
    // A length that would wrap the address space.
    d = why(key, RemoteOp::Read, buf + 4096, ~std::uint64_t{0});
    EXPECT_EQ(d.overrun, ~std::uint64_t{0} - 4096);
}

}  // namespace
}  // namespace uroce::mr
