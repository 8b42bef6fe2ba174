#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "wire/byte_order.h"

namespace uroce::wire {
namespace {

static_assert(be32::of(0xA1B2C3D4).get() == 0xA1B2C3D4);
static_assert(be24::of(0xFF000001).raw == std::array<std::uint8_t, 3>{0x00, 0x00, 0x01});

TEST(ByteOrder, SizesAndAlignment) {
    EXPECT_EQ(sizeof(be16), 2u);
    EXPECT_EQ(sizeof(be24), 3u);
    EXPECT_EQ(sizeof(be32), 4u);
    EXPECT_EQ(sizeof(be64), 8u);
    EXPECT_EQ(alignof(be16), 1u);
    EXPECT_EQ(alignof(be24), 1u);
    EXPECT_EQ(alignof(be32), 1u);
    EXPECT_EQ(alignof(be64), 1u);
    EXPECT_TRUE(std::is_trivially_copyable_v<be64>);
}

TEST(ByteOrder, BytesAreNetworkOrder) {
    EXPECT_EQ(be16::of(0x0102).raw, (std::array<std::uint8_t, 2>{0x01, 0x02}));
    EXPECT_EQ(be24::of(0x010203).raw, (std::array<std::uint8_t, 3>{0x01, 0x02, 0x03}));
    EXPECT_EQ(be32::of(0x01020304).raw, (std::array<std::uint8_t, 4>{0x01, 0x02, 0x03, 0x04}));
    EXPECT_EQ(be64::of(0x0102030405060708).raw,
              (std::array<std::uint8_t, 8>{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}));
}

TEST(ByteOrder, GetReadsNetworkOrder) {
    be32 v;
    v.raw = {0xDE, 0xAD, 0xBE, 0xEF};
    EXPECT_EQ(v.get(), 0xDEADBEEFu);
    be24 q;
    q.raw = {0x80, 0x00, 0x01};
    EXPECT_EQ(q.get(), 0x800001u);
    be64 w;
    w.raw = {0xFF, 0, 0, 0, 0, 0, 0, 0x01};
    EXPECT_EQ(w.get(), 0xFF00000000000001u);
    be16 s;
    s.raw = {0x12, 0xB7};
    EXPECT_EQ(s.get(), 4791u);
}

TEST(ByteOrder, RoundTrip) {
    for (std::uint32_t x : {0u, 1u, 0x80u, 0xFFu, 0x100u, 0x7FFFu, 0x8000u, 0xFFFFu}) {
        EXPECT_EQ(be16::of(static_cast<std::uint16_t>(x)).get(), x);
    }
    for (std::uint32_t x : {0u, 1u, 0xFFu, 0x7FFFFFu, 0x800000u, 0xFFFFFFu, 0x123456u}) {
        EXPECT_EQ(be24::of(x).get(), x);
    }
    for (std::uint32_t x : {0u, 1u, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFFu, 0xCAFEBABEu}) {
        EXPECT_EQ(be32::of(x).get(), x);
    }
    for (std::uint64_t x : {0ull, 1ull, 0x8000000000000000ull, 0xFFFFFFFFFFFFFFFFull, 0x0123456789ABCDEFull}) {
        EXPECT_EQ(be64::of(x).get(), x);
    }
}

TEST(ByteOrder, SetOverwritesEveryByte) {
    be32 v;
    v.raw = {0xAA, 0xAA, 0xAA, 0xAA};
    v.set(0x00000001);
    EXPECT_EQ(v.raw, (std::array<std::uint8_t, 4>{0, 0, 0, 1}));
    be64 w;
    w.raw.fill(0xFF);
    w.set(0);
    EXPECT_EQ(w.raw, (std::array<std::uint8_t, 8>{}));
}

TEST(ByteOrder, Be24TruncatesWiderValues) {
    EXPECT_EQ(be24::of(0x12345678).get(), 0x345678u);
    EXPECT_EQ(be24::of(0x12345678).raw, (std::array<std::uint8_t, 3>{0x34, 0x56, 0x78}));
    EXPECT_EQ(be24::of(0x01000000).get(), 0u);
    EXPECT_EQ(be24::of(0xFFFFFFFF).get(), 0xFFFFFFu);
}

TEST(ByteOrder, Equality) {
    EXPECT_EQ(be32::of(7), be32::of(7));
    EXPECT_NE(be32::of(7), be32::of(0x07000000));
}

TEST(ByteOrder, UsableAtUnalignedOffsets) {
    struct Packed {
        std::uint8_t a;
        be32 b;
        std::uint8_t c;
        be64 d;
    };
    static_assert(sizeof(Packed) == 14);
    std::array<std::uint8_t, 14> bytes = {0xA0, 0x11, 0x22, 0x33, 0x44, 0xC0, 1, 2, 3, 4, 5, 6, 7, 8};
    Packed p;
    std::memcpy(&p, bytes.data(), sizeof(p));
    EXPECT_EQ(p.a, 0xA0);
    EXPECT_EQ(p.b.get(), 0x11223344u);
    EXPECT_EQ(p.c, 0xC0);
    EXPECT_EQ(p.d.get(), 0x0102030405060708u);
}

}  // namespace
}  // namespace uroce::wire
