// Names of states, types, MTUs, transitions and attribute masks.
#include <gtest/gtest.h>

#include <string>

#include "qp/qp_describe.h"

namespace uroce::qp {
namespace {

TEST(QpDescribe, States) {
    EXPECT_EQ(describe(QpState::Reset), "RESET");
    EXPECT_EQ(describe(QpState::Init), "INIT");
    EXPECT_EQ(describe(QpState::Rtr), "RTR");
    EXPECT_EQ(describe(QpState::Rts), "RTS");
    EXPECT_EQ(describe(QpState::Sqd), "SQD");
    EXPECT_EQ(describe(QpState::Sqe), "SQE");
    EXPECT_EQ(describe(QpState::Err), "ERR");
    EXPECT_EQ(describe(static_cast<QpState>(7)), "UNKNOWN");
    EXPECT_EQ(describe(static_cast<QpState>(255)), "UNKNOWN");
}

TEST(QpDescribe, TypesAndMtus) {
    EXPECT_EQ(describe(QpType::Rc), "RC");
    EXPECT_EQ(describe(QpType::Uc), "UC");
    EXPECT_EQ(describe(QpType::Ud), "UD");
    EXPECT_EQ(describe(static_cast<QpType>(8)), "UNKNOWN");
    EXPECT_EQ(describe(Mtu::Mtu256), "256");
    EXPECT_EQ(describe(Mtu::Mtu4096), "4096");
    EXPECT_EQ(describe(static_cast<Mtu>(0)), "UNKNOWN");
    EXPECT_EQ(describe(static_cast<Mtu>(6)), "UNKNOWN");
}

TEST(QpDescribe, Transitions) {
    EXPECT_EQ(transition_name(QpState::Reset, QpState::Init), "RESET->INIT");
    EXPECT_EQ(transition_name(QpState::Sqe, QpState::Rts), "SQE->RTS");
    EXPECT_EQ(transition_name(QpState::Err, static_cast<QpState>(9)), "ERR->UNKNOWN");
}

TEST(QpDescribe, MaskBits) {
    EXPECT_EQ(attr_mask_bit_name(AttrMask::kState), "STATE");
    EXPECT_EQ(attr_mask_bit_name(AttrMask::kMaxDestRdAtomic), "MAX_DEST_RD_ATOMIC");
    EXPECT_EQ(attr_mask_bit_name(AttrMask::kDestQpn), "DEST_QPN");
    EXPECT_EQ(attr_mask_bit_name(AttrMask::kRateLimit), "RATE_LIMIT");
    EXPECT_EQ(attr_mask_bit_name(1u << 21), "");
    EXPECT_EQ(attr_mask_bit_name(1u << 31), "");
    EXPECT_EQ(attr_mask_bit_name(0), "");
    EXPECT_EQ(attr_mask_bit_name(AttrMask::kState | AttrMask::kPort), "");
}

TEST(QpDescribe, Masks) {
    EXPECT_EQ(describe_attr_mask(0), "0");
    EXPECT_EQ(describe_attr_mask(AttrMask::kState | AttrMask::kPkeyIndex | AttrMask::kPort | AttrMask::kAccessFlags),
              "STATE|ACCESS_FLAGS|PKEY_INDEX|PORT");
    EXPECT_EQ(describe_attr_mask(AttrMask::kState | (1u << 21) | (1u << 30)), "STATE|0x40200000");
    EXPECT_EQ(describe_attr_mask(1u << 24), "0x1000000");
}

}  // namespace
}  // namespace uroce::qp
