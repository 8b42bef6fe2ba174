// The range of every attribute value ibv_modify_qp checks, at its limits,
// each on a transition whose mask carries it.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string_view>

#include "qp_test_util.h"

namespace uroce::qp {
namespace {

using namespace test;

using S = QpState;
using U8 = std::initializer_list<std::uint8_t>;

constexpr std::uint32_t kRcToInit = kStateBit | kPkey | kPort | kAccess;
constexpr std::uint32_t kUdToInit = kStateBit | kPkey | kPort | kQkey;
constexpr std::uint32_t kRcToRtr = kStateBit | kAv | kMtu | kDestQpn | kRqPsn | kDestRdAtomic | kMinRnr;
constexpr std::uint32_t kUcToRtr = kStateBit | kAv | kMtu | kDestQpn | kRqPsn;
constexpr std::uint32_t kRcToRts = kStateBit | kTimeout | kRetry | kRnrRetry | kSqPsn | kRdAtomic;

// check_modify's error for `type` going from -> to with `mask`, after `edit`
// has changed one field of an otherwise valid QpAttr.
int error_with(QpType type, S from, S to, std::uint32_t mask, const std::function<void(QpAttr&)>& edit,
               const PortLimits& limits = kLimits) {
    QpAttr a = good_attr(from, to);
    edit(a);
    return check_modify(type, from, mask, a, limits).error;
}

TEST(QpValues, PortMustBeOne) {
    for (QpType type : {QpType::Rc, QpType::Uc}) {
        EXPECT_EQ(error_with(type, S::Reset, S::Init, kRcToInit, [](QpAttr& a) { a.port_num = 1; }), 0);
        for (std::uint8_t p : U8{0, 2, 255}) {
            EXPECT_EQ(error_with(type, S::Reset, S::Init, kRcToInit, [p](QpAttr& a) { a.port_num = p; }), EINVAL)
                << int{p};
        }
    }
    EXPECT_EQ(error_with(QpType::Ud, S::Reset, S::Init, kUdToInit, [](QpAttr& a) { a.port_num = 2; }), EINVAL);
    // Also where PORT is optional: INIT -> INIT and RC SQD -> SQD.
    EXPECT_EQ(error_with(QpType::Rc, S::Init, S::Init, kPort, [](QpAttr& a) { a.port_num = 0; }), EINVAL);
    EXPECT_EQ(error_with(QpType::Rc, S::Sqd, S::Sqd, kPort, [](QpAttr& a) { a.port_num = 2; }), EINVAL);
    EXPECT_EQ(error_with(QpType::Rc, S::Sqd, S::Sqd, kPort, [](QpAttr& a) { a.port_num = 1; }), 0);
}

TEST(QpValues, PkeyIndexWithinTheTable) {
    EXPECT_EQ(error_with(QpType::Rc, S::Reset, S::Init, kRcToInit, [](QpAttr& a) { a.pkey_index = 0; }), 0);
    EXPECT_EQ(error_with(QpType::Rc, S::Reset, S::Init, kRcToInit, [](QpAttr& a) { a.pkey_index = 1; }), EINVAL);
    EXPECT_EQ(error_with(QpType::Ud, S::Reset, S::Init, kUdToInit, [](QpAttr& a) { a.pkey_index = 0xFFFF; }), EINVAL);
    PortLimits four = kLimits;
    four.pkey_table_len = 4;
    EXPECT_EQ(error_with(QpType::Rc, S::Reset, S::Init, kRcToInit, [](QpAttr& a) { a.pkey_index = 3; }, four), 0);
    EXPECT_EQ(error_with(QpType::Rc, S::Reset, S::Init, kRcToInit, [](QpAttr& a) { a.pkey_index = 4; }, four),
              EINVAL);
    // Checked wherever PKEY_INDEX is optional too.
    EXPECT_EQ(error_with(QpType::Ud, S::Sqd, S::Sqd, kPkey, [](QpAttr& a) { a.pkey_index = 1; }), EINVAL);
    EXPECT_EQ(error_with(QpType::Rc, S::Init, S::Rtr, kRcToRtr | kPkey, [](QpAttr& a) { a.pkey_index = 1; }), EINVAL);
}

TEST(QpValues, AccessFlagsOnlyTheFourQpRights) {
    for (QpType type : {QpType::Rc, QpType::Uc}) {
        for (std::uint32_t f = 0; f < 16; ++f) {
            EXPECT_EQ(error_with(type, S::Reset, S::Init, kRcToInit, [f](QpAttr& a) { a.qp_access_flags = f; }), 0)
                << f;
        }
        // MW_BIND, ZERO_BASED, ON_DEMAND, HUGETLB, RELAXED_ORDERING and beyond.
        for (int i = 4; i < 32; ++i) {
            const std::uint32_t f = 0x1u | (1u << i);
            EXPECT_EQ(error_with(type, S::Reset, S::Init, kRcToInit, [f](QpAttr& a) { a.qp_access_flags = f; }),
                      EINVAL)
                << "bit " << i;
        }
    }
    EXPECT_EQ(error_with(QpType::Rc, S::Rts, S::Rts, kAccess, [](QpAttr& a) { a.qp_access_flags = 0x10; }), EINVAL);
}

TEST(QpValues, UdQkeyTakesAnyValue) {
    for (std::uint32_t q : {0u, 1u, 0x11111111u, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFFu}) {
        EXPECT_EQ(error_with(QpType::Ud, S::Reset, S::Init, kUdToInit, [q](QpAttr& a) { a.qkey = q; }), 0) << q;
        EXPECT_EQ(error_with(QpType::Ud, S::Rts, S::Rts, kQkey, [q](QpAttr& a) { a.qkey = q; }), 0) << q;
    }
}

TEST(QpValues, PathMtuIsAnIbvMtuNoAboveTheActiveMtu) {
    for (QpType type : {QpType::Rc, QpType::Uc}) {
        const std::uint32_t mask = type == QpType::Rc ? kRcToRtr : kUcToRtr;
        // kLimits: active MTU 1024.
        for (Mtu m : {Mtu::Mtu256, Mtu::Mtu512, Mtu::Mtu1024}) {
            EXPECT_EQ(error_with(type, S::Init, S::Rtr, mask, [m](QpAttr& a) { a.path_mtu = m; }), 0);
        }
        for (Mtu m : {Mtu::Mtu2048, Mtu::Mtu4096}) {
            EXPECT_EQ(error_with(type, S::Init, S::Rtr, mask, [m](QpAttr& a) { a.path_mtu = m; }), EINVAL);
        }
        for (int raw : {0, 6, 7, 255}) {
            const auto m = static_cast<Mtu>(raw);
            EXPECT_EQ(error_with(type, S::Init, S::Rtr, mask, [m](QpAttr& a) { a.path_mtu = m; }), EINVAL) << raw;
        }
        PortLimits jumbo = kLimits;
        jumbo.active_mtu = Mtu::Mtu4096;
        EXPECT_EQ(error_with(type, S::Init, S::Rtr, mask, [](QpAttr& a) { a.path_mtu = Mtu::Mtu4096; }, jumbo), 0);
        EXPECT_EQ(error_with(type, S::Init, S::Rtr, mask, [](QpAttr& a) { a.path_mtu = static_cast<Mtu>(6); }, jumbo),
                  EINVAL);
    }
}

TEST(QpValues, DestQpnWiderThan24BitsIsMaskedNotRefused) {
    // rdma_rxe stores any value and puts its low 24 bits in the BTH.
    EXPECT_EQ(error_with(QpType::Rc, S::Init, S::Rtr, kRcToRtr, [](QpAttr& a) { a.dest_qp_num = 0; }), 0);
    EXPECT_EQ(error_with(QpType::Rc, S::Init, S::Rtr, kRcToRtr, [](QpAttr& a) { a.dest_qp_num = 0xFFFFFF; }), 0);
    EXPECT_EQ(error_with(QpType::Rc, S::Init, S::Rtr, kRcToRtr, [](QpAttr& a) { a.dest_qp_num = 0x1000000; }), 0);
    EXPECT_EQ(error_with(QpType::Uc, S::Init, S::Rtr, kUcToRtr, [](QpAttr& a) { a.dest_qp_num = 0xFFFFFFFF; }), 0);
}

TEST(QpValues, PsnsWiderThan24BitsAreMaskedNotRefused) {
    EXPECT_EQ(error_with(QpType::Rc, S::Init, S::Rtr, kRcToRtr, [](QpAttr& a) { a.rq_psn = 0xFFFFFF; }), 0);
    EXPECT_EQ(error_with(QpType::Rc, S::Init, S::Rtr, kRcToRtr, [](QpAttr& a) { a.rq_psn = 0xFFFFFFFF; }), 0);
    EXPECT_EQ(error_with(QpType::Rc, S::Rtr, S::Rts, kRcToRts, [](QpAttr& a) { a.sq_psn = 0x1000000; }), 0);
    EXPECT_EQ(error_with(QpType::Ud, S::Rtr, S::Rts, kStateBit | kSqPsn, [](QpAttr& a) { a.sq_psn = 0xFFFFFFFF; }), 0);
}

TEST(QpValues, MinRnrTimerWiderThanFiveBitsIsTakenNotRefused) {
    // The kernel and rdma_rxe accept any u8; apply_modify keeps the low 5 bits.
    for (std::uint8_t v : U8{0, 31, 32, 100, 255}) {
        EXPECT_EQ(error_with(QpType::Rc, S::Init, S::Rtr, kRcToRtr, [v](QpAttr& a) { a.min_rnr_timer = v; }), 0);
        EXPECT_EQ(error_with(QpType::Rc, S::Rts, S::Rts, kMinRnr, [v](QpAttr& a) { a.min_rnr_timer = v; }), 0);
    }
}

TEST(QpValues, RdAtomicDepthsWithinTheDevice) {
    // kLimits: max_rd_atomic 8 (requester), max_dest_rd_atomic 12 (responder).
    for (std::uint8_t v : U8{0, 1, 12}) {
        EXPECT_EQ(error_with(QpType::Rc, S::Init, S::Rtr, kRcToRtr, [v](QpAttr& a) { a.max_dest_rd_atomic = v; }), 0);
    }
    EXPECT_EQ(error_with(QpType::Rc, S::Init, S::Rtr, kRcToRtr, [](QpAttr& a) { a.max_dest_rd_atomic = 13; }),
              EINVAL);
    for (std::uint8_t v : U8{0, 1, 8}) {
        EXPECT_EQ(error_with(QpType::Rc, S::Rtr, S::Rts, kRcToRts, [v](QpAttr& a) { a.max_rd_atomic = v; }), 0);
    }
    EXPECT_EQ(error_with(QpType::Rc, S::Rtr, S::Rts, kRcToRts, [](QpAttr& a) { a.max_rd_atomic = 9; }), EINVAL);
    // Each bound applies to its own attribute: 12 is fine for dest, not for initiator.
    EXPECT_EQ(error_with(QpType::Rc, S::Rtr, S::Rts, kRcToRts, [](QpAttr& a) { a.max_rd_atomic = 12; }), EINVAL);
    EXPECT_EQ(error_with(QpType::Rc, S::Sqd, S::Sqd, kRdAtomic | kDestRdAtomic,
                         [](QpAttr& a) {
                             a.max_rd_atomic = 8;
                             a.max_dest_rd_atomic = 12;
                         }),
              0);
}

TEST(QpValues, TheDeviceTakesRdAtomicDepthsOf128LikeRxe) {
    // The device's own limits (PortLimits{}), as ibv_query_device reports
    // them: perftest sets the peer's max_qp_rd_atom, 128 on rdma_rxe.
    const PortLimits device;
    EXPECT_EQ(device.max_rd_atomic, 128);
    EXPECT_EQ(device.max_dest_rd_atomic, 128);
    EXPECT_EQ(error_with(QpType::Rc, S::Init, S::Rtr, kRcToRtr, [](QpAttr& a) { a.max_dest_rd_atomic = 128; }, device),
              0);
    EXPECT_EQ(error_with(QpType::Rc, S::Rtr, S::Rts, kRcToRts, [](QpAttr& a) { a.max_rd_atomic = 128; }, device), 0);
    EXPECT_EQ(error_with(QpType::Rc, S::Rtr, S::Rts, kRcToRts, [](QpAttr& a) { a.max_rd_atomic = 129; }, device),
              EINVAL);
}

TEST(QpValues, TimeoutIsFiveBitsAndRetryCountsThree) {
    for (std::uint8_t v = 0; v <= 31; ++v) {
        EXPECT_EQ(error_with(QpType::Rc, S::Rtr, S::Rts, kRcToRts, [v](QpAttr& a) { a.timeout = v; }), 0);
    }
    EXPECT_EQ(error_with(QpType::Rc, S::Rtr, S::Rts, kRcToRts, [](QpAttr& a) { a.timeout = 32; }), EINVAL);
    EXPECT_EQ(error_with(QpType::Rc, S::Sqd, S::Sqd, kTimeout, [](QpAttr& a) { a.timeout = 255; }), EINVAL);
    // Retry counts wider than 3 bits: accepted as by the kernel and rdma_rxe,
    // apply_modify keeps the low 3 bits.
    for (std::uint8_t v : U8{0, 7, 8, 15, 255}) {
        EXPECT_EQ(error_with(QpType::Rc, S::Rtr, S::Rts, kRcToRts, [v](QpAttr& a) { a.retry_cnt = v; }), 0);
        EXPECT_EQ(error_with(QpType::Rc, S::Rtr, S::Rts, kRcToRts, [v](QpAttr& a) { a.rnr_retry = v; }), 0);
    }
}

TEST(QpValues, AddressVectorNeedsAGrhOnPortOneWithAKnownGid) {
    auto rtr = [](const std::function<void(AhAttr&)>& edit) {
        return error_with(QpType::Rc, S::Init, S::Rtr, kRcToRtr, [&edit](QpAttr& a) { edit(a.ah_attr); });
    };
    EXPECT_EQ(rtr([](AhAttr&) {}), 0);
    EXPECT_EQ(rtr([](AhAttr& ah) { ah.is_global = false; }), EINVAL);
    EXPECT_EQ(rtr([](AhAttr& ah) { ah.port_num = 0; }), EINVAL);
    EXPECT_EQ(rtr([](AhAttr& ah) { ah.port_num = 2; }), EINVAL);
    // kLimits: 4 GIDs.
    EXPECT_EQ(rtr([](AhAttr& ah) { ah.sgid_index = 3; }), 0);
    EXPECT_EQ(rtr([](AhAttr& ah) { ah.sgid_index = 4; }), EINVAL);
    // Values wider than their field are masked by apply_modify, not refused
    // (UCX sets flow_label 0xFFFFFFFF on purpose; the kernel passes it on).
    EXPECT_EQ(rtr([](AhAttr& ah) { ah.flow_label = 0xFFFFF; }), 0);
    EXPECT_EQ(rtr([](AhAttr& ah) { ah.flow_label = 0x100000; }), 0);
    EXPECT_EQ(rtr([](AhAttr& ah) { ah.flow_label = 0xFFFFFFFF; }), 0);
    EXPECT_EQ(rtr([](AhAttr& ah) { ah.sl = 15; }), 0);
    EXPECT_EQ(rtr([](AhAttr& ah) { ah.sl = 16; }), 0);
    EXPECT_EQ(rtr([](AhAttr& ah) { ah.hop_limit = 255; }), 0);
    EXPECT_EQ(rtr([](AhAttr& ah) { ah.traffic_class = 255; }), 0);
    // static_rate: neither uverbs nor rdma_rxe checks it.
    for (std::uint8_t r : U8{0, 1, 2, 24, 25, 255}) {
        EXPECT_EQ(rtr([r](AhAttr& ah) { ah.static_rate = r; }), 0) << int{r};
    }
    // The same checks where AV is optional: UC and RC SQD -> SQD.
    EXPECT_EQ(error_with(QpType::Uc, S::Sqd, S::Sqd, kAv, [](QpAttr& a) { a.ah_attr.is_global = false; }), EINVAL);
    EXPECT_EQ(error_with(QpType::Rc, S::Sqd, S::Sqd, kAv, [](QpAttr& a) { a.ah_attr.sgid_index = 200; }), EINVAL);
    EXPECT_EQ(error_with(QpType::Rc, S::Sqd, S::Sqd, kAv, [](QpAttr&) {}), 0);
}

TEST(QpValues, PathMigrationStateIsAnIbvMigState) {
    for (int v : {0, 1, 2}) {
        const auto m = static_cast<MigState>(v);
        const int e =
            error_with(QpType::Rc, S::Rtr, S::Rts, kRcToRts | kMigState, [m](QpAttr& a) { a.path_mig_state = m; });
        EXPECT_EQ(e, 0) << v;
    }
    EXPECT_EQ(error_with(QpType::Rc, S::Rtr, S::Rts, kRcToRts | kMigState,
                         [](QpAttr& a) { a.path_mig_state = static_cast<MigState>(3); }),
              EINVAL);
}

TEST(QpValues, AlternatePathIsRefusedOnRoce) {
    EXPECT_EQ(error_with(QpType::Rc, S::Init, S::Rtr, kRcToRtr | kAltPath, [](QpAttr&) {}), EINVAL);
    EXPECT_EQ(error_with(QpType::Uc, S::Rts, S::Rts, kAltPath, [](QpAttr&) {}), EINVAL);
}

TEST(QpValues, FieldsOutsideTheMaskAreNotChecked) {
    // RESET -> INIT looks at port, P_Key index and access flags only.
    const int e = error_with(QpType::Rc, S::Reset, S::Init, kRcToInit, [](QpAttr& a) {
        a.path_mtu = static_cast<Mtu>(0);
        a.timeout = 200;
        a.retry_cnt = 200;
        a.rnr_retry = 200;
        a.min_rnr_timer = 200;
        a.max_rd_atomic = 200;
        a.max_dest_rd_atomic = 200;
        a.dest_qp_num = 0xFFFFFFFF;
        a.ah_attr = AhAttr{};
        a.cur_state = static_cast<QpState>(99);
        a.path_mig_state = static_cast<MigState>(99);
    });
    EXPECT_EQ(e, 0);
}

TEST(QpValues, FailuresCarryAReasonAndTheRequestedState) {
    QpAttr a = good_attr(S::Init, S::Rtr);
    a.path_mtu = Mtu::Mtu4096;
    const ModifyCheck c = check_modify(QpType::Rc, S::Init, kRcToRtr, a, kLimits);
    EXPECT_EQ(c.error, EINVAL);
    EXPECT_EQ(c.next, S::Rtr);
    ASSERT_NE(c.reason, nullptr);
    EXPECT_NE(std::string_view(c.reason).find("path_mtu"), std::string_view::npos) << c.reason;
}

}  // namespace
}  // namespace uroce::qp
