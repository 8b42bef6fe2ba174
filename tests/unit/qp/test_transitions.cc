// Every (type, current state, requested state) triple and every attribute
// mask bit against the tests' own table of the IBA Modify QP rules.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qp_test_util.h"

namespace uroce::qp {
namespace {

using namespace test;

using T = QpType;
using S = QpState;

// The Modify QP attribute table, IBA 11.2.5.2 (as Linux's qp_state_table
// encodes it), for RC, UC and UD. "required" and "optional" exclude
// IBV_QP_STATE, which every transition takes. Two rows are implicit and
// added by expected_rule(): any state -> RESET and any state -> ERR, with
// nothing required and nothing optional (including RESET -> ERR, which IBA
// allows and Linux's table does not).
struct Row {
    QpType type;
    QpState from;
    QpState to;
    std::uint32_t required;
    std::uint32_t optional;
};

const std::vector<Row> kIbaTable = {
    // type from      to       required                                               optional
    {T::Rc, S::Reset, S::Init, kPkey | kPort | kAccess,                                0},
    {T::Rc, S::Init,  S::Init, 0,                                                      kPkey | kPort | kAccess},
    {T::Rc, S::Init,  S::Rtr,  kAv | kMtu | kDestQpn | kRqPsn | kDestRdAtomic | kMinRnr, kAltPath | kAccess | kPkey},
    {T::Rc, S::Rtr,   S::Rts,  kTimeout | kRetry | kRnrRetry | kSqPsn | kRdAtomic,
                                                kCur | kAltPath | kAccess | kMinRnr | kMigState},
    {T::Rc, S::Rts,   S::Rts,  0,               kCur | kAccess | kAltPath | kMigState | kMinRnr},
    {T::Rc, S::Rts,   S::Sqd,  0,               kSqdNotify},
    {T::Rc, S::Sqd,   S::Rts,  0,               kCur | kAltPath | kAccess | kMinRnr | kMigState},
    {T::Rc, S::Sqd,   S::Sqd,  0,               kPort | kAv | kTimeout | kRetry | kRnrRetry | kRdAtomic |
                                                kDestRdAtomic | kAltPath | kAccess | kPkey | kMinRnr | kMigState},
    {T::Rc, S::Sqe,   S::Rts,  0,               0},

    {T::Uc, S::Reset, S::Init, kPkey | kPort | kAccess,          0},
    {T::Uc, S::Init,  S::Init, 0,                                kPkey | kPort | kAccess},
    {T::Uc, S::Init,  S::Rtr,  kAv | kMtu | kDestQpn | kRqPsn,   kAltPath | kAccess | kPkey},
    {T::Uc, S::Rtr,   S::Rts,  kSqPsn,                           kCur | kAltPath | kAccess | kMigState},
    {T::Uc, S::Rts,   S::Rts,  0,                                kCur | kAccess | kAltPath | kMigState},
    {T::Uc, S::Rts,   S::Sqd,  0,                                kSqdNotify},
    {T::Uc, S::Sqd,   S::Rts,  0,                                kCur | kAltPath | kAccess | kMigState},
    {T::Uc, S::Sqd,   S::Sqd,  0,                                kAv | kAltPath | kAccess | kPkey | kMigState},
    {T::Uc, S::Sqe,   S::Rts,  0,                                kCur | kAccess},

    {T::Ud, S::Reset, S::Init, kPkey | kPort | kQkey, 0},
    {T::Ud, S::Init,  S::Init, 0,                     kPkey | kPort | kQkey},
    {T::Ud, S::Init,  S::Rtr,  0,                     kPkey | kQkey},
    {T::Ud, S::Rtr,   S::Rts,  kSqPsn,                kCur | kQkey},
    {T::Ud, S::Rts,   S::Rts,  0,                     kCur | kQkey},
    {T::Ud, S::Rts,   S::Sqd,  0,                     kSqdNotify},
    {T::Ud, S::Sqd,   S::Rts,  0,                     kCur | kQkey},
    {T::Ud, S::Sqd,   S::Sqd,  0,                     kPkey | kQkey},
    {T::Ud, S::Sqe,   S::Rts,  0,                     kCur | kQkey},
};

struct Expected {
    std::uint32_t required;
    std::uint32_t optional;
};

std::optional<Expected> expected_rule(QpType type, QpState from, QpState to) {
    // RESET -> ERR is refused, as Linux's table (hardware, rdma_rxe) does.
    if (to == S::Reset || (to == S::Err && from != S::Reset)) {
        return Expected{0, 0};
    }
    for (const Row& r : kIbaTable) {
        if (r.type == type && r.from == from && r.to == to) {
            return Expected{r.required, r.optional};
        }
    }
    return std::nullopt;
}

std::string where(QpType type, QpState from, QpState to, std::uint32_t mask) {
    return std::string(describe(type)) + " " + transition_name(from, to) + " mask " + describe_attr_mask(mask);
}

ModifyCheck run(QpType type, QpState from, QpState to, std::uint32_t mask) {
    return check_modify(type, from, mask, good_attr(from, to), kLimits);
}

// ALT_PATH is in the table but every value of it is refused on RoCE.
bool accepted_on_roce(std::uint32_t bit) { return bit != kAltPath; }

TEST(QpTransitions, TableHasTheLegalPairsOfIba) {
    // 9 rows per type beyond "-> RESET" and "-> ERR".
    for (QpType type : kTypes) {
        int rows = 0;
        for (const Row& r : kIbaTable) {
            rows += r.type == type ? 1 : 0;
        }
        EXPECT_EQ(rows, 9) << describe(type);
    }
}

TEST(QpTransitions, EngineRuleMatchesTheTableForEveryTriple) {
    for (QpType type : kTypes) {
        for (QpState from : kStates) {
            for (QpState to : kStates) {
                SCOPED_TRACE(where(type, from, to, 0));
                const std::optional<Expected> want = expected_rule(type, from, to);
                const std::optional<TransitionRule> got = transition_rule(type, from, to);
                ASSERT_EQ(got.has_value(), want.has_value());
                if (want) {
                    EXPECT_EQ(describe_attr_mask(got->required), describe_attr_mask(want->required));
                    EXPECT_EQ(describe_attr_mask(got->optional), describe_attr_mask(want->optional));
                }
            }
        }
    }
}

TEST(QpTransitions, EveryLegalTransitionSucceedsWithExactlyItsRequiredMask) {
    int legal = 0;
    for (QpType type : kTypes) {
        for (QpState from : kStates) {
            for (QpState to : kStates) {
                const std::optional<Expected> want = expected_rule(type, from, to);
                if (!want) {
                    continue;
                }
                ++legal;
                const std::uint32_t mask = kStateBit | want->required;
                const ModifyCheck c = run(type, from, to, mask);
                EXPECT_EQ(c.error, 0) << where(type, from, to, mask) << ": " << (c.reason ? c.reason : "");
                EXPECT_EQ(c.next, to) << where(type, from, to, mask);
                EXPECT_EQ(c.reason, nullptr);
            }
        }
    }
    // Per type: 9 table rows, 7 "-> RESET", 6 "-> ERR" (not from RESET).
    EXPECT_EQ(legal, 3 * (9 + 7 + 6));
}

TEST(QpTransitions, RequiredPlusEachOptionalBitSucceeds) {
    for (QpType type : kTypes) {
        for (QpState from : kStates) {
            for (QpState to : kStates) {
                const std::optional<Expected> want = expected_rule(type, from, to);
                if (!want) {
                    continue;
                }
                for (int i = 0; i < 32; ++i) {
                    const std::uint32_t bit = 1u << i;
                    if ((want->optional & bit) == 0) {
                        continue;
                    }
                    const std::uint32_t mask = kStateBit | want->required | bit;
                    const ModifyCheck c = run(type, from, to, mask);
                    if (accepted_on_roce(bit)) {
                        EXPECT_EQ(c.error, 0) << where(type, from, to, mask) << ": " << (c.reason ? c.reason : "");
                        EXPECT_EQ(c.next, to);
                    } else {
                        EXPECT_EQ(c.error, EINVAL) << where(type, from, to, mask);
                        ASSERT_NE(c.reason, nullptr);
                        EXPECT_NE(std::string(c.reason).find("alternate path"), std::string::npos) << c.reason;
                    }
                }
            }
        }
    }
}

TEST(QpTransitions, RequiredPlusAllOptionalBitsSucceeds) {
    for (QpType type : kTypes) {
        for (QpState from : kStates) {
            for (QpState to : kStates) {
                const std::optional<Expected> want = expected_rule(type, from, to);
                if (!want) {
                    continue;
                }
                const std::uint32_t mask = kStateBit | want->required | (want->optional & ~kAltPath);
                const ModifyCheck c = run(type, from, to, mask);
                EXPECT_EQ(c.error, 0) << where(type, from, to, mask) << ": " << (c.reason ? c.reason : "");
            }
        }
    }
}

TEST(QpTransitions, DroppingAnyRequiredBitFails) {
    int cases = 0;
    for (QpType type : kTypes) {
        for (QpState from : kStates) {
            for (QpState to : kStates) {
                const std::optional<Expected> want = expected_rule(type, from, to);
                if (!want) {
                    continue;
                }
                const std::uint32_t full = kStateBit | want->required | (want->optional & ~kAltPath);
                for (int i = 0; i < 32; ++i) {
                    const std::uint32_t bit = 1u << i;
                    if ((want->required & bit) == 0) {
                        continue;
                    }
                    ++cases;
                    for (std::uint32_t mask : {(kStateBit | want->required) & ~bit, full & ~bit}) {
                        const ModifyCheck c = run(type, from, to, mask);
                        EXPECT_EQ(c.error, EINVAL) << where(type, from, to, mask) << " (without "
                                                   << attr_mask_bit_name(bit) << ")";
                    }
                }
            }
        }
    }
    // RC: 3 + 6 + 5; UC: 3 + 4 + 1; UD: 3 + 1.
    EXPECT_EQ(cases, 14 + 8 + 4);
}

TEST(QpTransitions, AddingAnyBitNotAllowedFails) {
    for (QpType type : kTypes) {
        for (QpState from : kStates) {
            for (QpState to : kStates) {
                const std::optional<Expected> want = expected_rule(type, from, to);
                if (!want) {
                    continue;
                }
                const std::uint32_t allowed = kStateBit | want->required | want->optional;
                for (int i = 0; i < 32; ++i) {
                    const std::uint32_t bit = 1u << i;
                    if ((allowed & bit) != 0) {
                        continue;
                    }
                    const std::uint32_t mask = kStateBit | want->required | bit;
                    const ModifyCheck c = run(type, from, to, mask);
                    EXPECT_EQ(c.error, EINVAL) << where(type, from, to, mask) << " (bit " << i << ")";
                }
            }
        }
    }
}

TEST(QpTransitions, EveryIllegalPairFails) {
    int illegal = 0;
    for (QpType type : kTypes) {
        for (QpState from : kStates) {
            for (QpState to : kStates) {
                if (expected_rule(type, from, to)) {
                    continue;
                }
                ++illegal;
                // Bare, with every named bit, and with the bits some other
                // transition to the same state would require.
                std::uint32_t borrowed = 0;
                for (const Row& r : kIbaTable) {
                    if (r.type == type && r.to == to) {
                        borrowed |= r.required;
                    }
                }
                for (std::uint32_t mask : {kStateBit, kStateBit | borrowed, kStateBit | AttrMask::kKnown}) {
                    const ModifyCheck c = run(type, from, to, mask);
                    EXPECT_EQ(c.error, EINVAL) << where(type, from, to, mask);
                    EXPECT_NE(c.reason, nullptr);
                }
            }
        }
    }
    EXPECT_EQ(illegal, 3 * (49 - 22));
}

TEST(QpTransitions, NoStateBitMeansStayInTheCurrentState) {
    for (QpType type : kTypes) {
        for (QpState s : kStates) {
            const std::optional<Expected> self = expected_rule(type, s, s);
            // attr.state names another state but is not in the mask: ignored.
            QpAttr attr = good_attr(s, s == S::Rts ? S::Err : S::Rts);
            const ModifyCheck c = check_modify(type, s, 0, attr, kLimits);
            EXPECT_EQ(c.error, self ? 0 : EINVAL) << describe(type) << " " << describe(s);
            EXPECT_EQ(c.next, s);
            if (self && self->optional != 0) {
                const std::uint32_t bit = self->optional & ~(self->optional - 1);
                if (accepted_on_roce(bit)) {
                    EXPECT_EQ(check_modify(type, s, bit, attr, kLimits).error, 0)
                        << describe(type) << " " << describe(s) << " " << attr_mask_bit_name(bit);
                }
            }
        }
    }
}

TEST(QpTransitions, ResetToErrorIsRefusedAsOnLinux) {
    for (QpType type : kTypes) {
        const ModifyCheck c = run(type, S::Reset, S::Err, kStateBit);
        EXPECT_EQ(c.error, EINVAL) << describe(type);
    }
}

TEST(QpTransitions, CurStateMustNameTheCurrentState) {
    int checked = 0;
    for (QpType type : kTypes) {
        for (QpState from : kStates) {
            for (QpState to : kStates) {
                const std::optional<Expected> want = expected_rule(type, from, to);
                if (!want || (want->optional & kCur) == 0) {
                    continue;
                }
                ++checked;
                const std::uint32_t mask = kStateBit | want->required | kCur;
                for (QpState claimed : kStates) {
                    QpAttr attr = good_attr(from, to);
                    attr.cur_state = claimed;
                    const ModifyCheck c = check_modify(type, from, mask, attr, kLimits);
                    EXPECT_EQ(c.error, claimed == from ? 0 : EINVAL)
                        << where(type, from, to, mask) << " claiming " << describe(claimed);
                }
                QpAttr attr = good_attr(from, to);
                attr.cur_state = static_cast<QpState>(7);
                EXPECT_EQ(check_modify(type, from, mask, attr, kLimits).error, EINVAL);
            }
        }
    }
    // RC: RTR, RTS, SQD -> RTS; UC and UD: also SQE -> RTS.
    EXPECT_EQ(checked, 3 + 4 + 4);
}

TEST(QpTransitions, CurStateOutsideTheTransitionsIntoRtsFails) {
    // e.g. RESET -> INIT with CUR_STATE = RESET: IBA takes no current state there.
    for (QpType type : kTypes) {
        const std::uint32_t init_req = type == T::Ud ? (kPkey | kPort | kQkey) : (kPkey | kPort | kAccess);
        EXPECT_EQ(run(type, S::Reset, S::Init, kStateBit | init_req | kCur).error, EINVAL);
        EXPECT_EQ(run(type, S::Rts, S::Sqd, kStateBit | kCur).error, EINVAL);
        EXPECT_EQ(run(type, S::Rts, S::Err, kStateBit | kCur).error, EINVAL);
        EXPECT_EQ(run(type, S::Init, S::Reset, kStateBit | kCur).error, EINVAL);
    }
}

TEST(QpTransitions, UnnamedMaskBitsAlwaysFail) {
    for (QpType type : kTypes) {
        for (int i : {21, 22, 23, 24, 26, 27, 28, 29, 30, 31}) {
            const std::uint32_t bit = 1u << i;
            EXPECT_EQ(run(type, S::Rts, S::Err, kStateBit | bit).error, EINVAL) << i;
            EXPECT_EQ(run(type, S::Init, S::Init, bit).error, EINVAL) << i;
        }
        // CAP and RATE_LIMIT are named but never legal for RC, UC or UD.
        const std::uint32_t rc_to_rts = kStateBit | kSqPsn | kTimeout | kRetry | kRnrRetry | kRdAtomic;
        EXPECT_EQ(run(type, S::Rtr, S::Rts, rc_to_rts | kCap).error, EINVAL);
        EXPECT_EQ(run(type, S::Rts, S::Rts, kStateBit | kRateLimit).error, EINVAL);
    }
}

TEST(QpTransitions, ValuesOutsideTheEnumsFail) {
    const QpAttr attr = good_attr(S::Reset, S::Err);
    for (int bad : {7, 8, 100, 255}) {
        const auto s = static_cast<QpState>(bad);
        for (QpType type : kTypes) {
            QpAttr to_bad = attr;
            to_bad.state = s;
            EXPECT_EQ(check_modify(type, S::Rts, kStateBit, to_bad, kLimits).error, EINVAL) << bad;
            EXPECT_EQ(check_modify(type, s, kStateBit, attr, kLimits).error, EINVAL) << bad;
            EXPECT_FALSE(transition_rule(type, s, S::Err).has_value());
            EXPECT_FALSE(transition_rule(type, S::Rts, s).has_value());
        }
    }
    // RAW_PACKET (8), 0, 1, 5 and 0xff are not types this device takes.
    for (int bad : {0, 1, 5, 8, 0xff}) {
        const auto type = static_cast<QpType>(bad);
        EXPECT_EQ(check_modify(type, S::Rts, kStateBit, attr, kLimits).error, EINVAL) << bad;
        EXPECT_FALSE(transition_rule(type, S::Rts, S::Err).has_value()) << bad;
    }
}

// XRC (Linux's qp_state_table, uverbs' modify_qp): each half takes RC's
// rule without the other half's attributes, and the kernel drops those
// attributes from the mask instead of refusing them.
TEST(Transitions, XrcHalvesTakeTheirPartOfRc) {
    const auto ini = transition_rule(QpType::XrcIni, QpState::Init, QpState::Rtr);
    const auto tgt = transition_rule(QpType::XrcTgt, QpState::Init, QpState::Rtr);
    ASSERT_TRUE(ini && tgt);
    const std::uint32_t base = AttrMask::kAv | AttrMask::kPathMtu | AttrMask::kDestQpn | AttrMask::kRqPsn;
    EXPECT_EQ(ini->required, base);
    EXPECT_EQ(tgt->required, base | AttrMask::kMaxDestRdAtomic | AttrMask::kMinRnrTimer);
    const auto ini_rts = transition_rule(QpType::XrcIni, QpState::Rtr, QpState::Rts);
    const auto tgt_rts = transition_rule(QpType::XrcTgt, QpState::Rtr, QpState::Rts);
    ASSERT_TRUE(ini_rts && tgt_rts);
    EXPECT_EQ(tgt_rts->required, AttrMask::kTimeout | AttrMask::kSqPsn);
    EXPECT_EQ(ini_rts->required, AttrMask::kTimeout | AttrMask::kRetryCnt | AttrMask::kRnrRetry | AttrMask::kSqPsn |
                                     AttrMask::kMaxQpRdAtomic);
    const std::uint32_t both = base | AttrMask::kMaxDestRdAtomic | AttrMask::kMinRnrTimer | AttrMask::kRetryCnt;
    EXPECT_EQ(mask_as_kernel_takes(QpType::XrcIni, both), base | AttrMask::kRetryCnt);
    EXPECT_EQ(mask_as_kernel_takes(QpType::XrcTgt, both), base | AttrMask::kMaxDestRdAtomic | AttrMask::kMinRnrTimer);
    EXPECT_EQ(mask_as_kernel_takes(QpType::Rc, both), both);
}

}  // namespace
}  // namespace uroce::qp
