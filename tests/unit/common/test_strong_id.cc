// The strong identifiers (common/ids.h): the compile-time checks that one kind
// does not convert to another nor from a raw integer, and what the types do
// at run time (compare, hash, format).
#include <gtest/gtest.h>

#include <cstdint>
#include <type_traits>
#include <unordered_set>

#include "common/id_format.h"
#include "common/ids.h"

namespace uroce {
namespace {

// A QPN is not a key and a key is not a QPN.
static_assert(!std::is_convertible_v<Qpn, MrKey>);
static_assert(!std::is_convertible_v<MrKey, Qpn>);
static_assert(!std::is_constructible_v<MrKey, Qpn>);
static_assert(!std::is_constructible_v<Qpn, MrKey>);
static_assert(!std::is_assignable_v<MrKey&, Qpn>);
// Handles of different objects do not mix either.
static_assert(!std::is_convertible_v<PdHandle, CqHandle>);
static_assert(!std::is_convertible_v<CqHandle, SrqHandle>);
static_assert(!std::is_convertible_v<ClientId, PdHandle>);
// A raw integer becomes an id only when asked (explicit), and an id gives
// its number only through value().
static_assert(!std::is_convertible_v<std::uint32_t, Qpn>);
static_assert(!std::is_convertible_v<std::uint32_t, MrKey>);
static_assert(!std::is_convertible_v<int, CqHandle>);
static_assert(!std::is_convertible_v<std::uint32_t, ClientId>);
static_assert(!std::is_convertible_v<Qpn, std::uint32_t>);
static_assert(!std::is_convertible_v<MrKey, std::uint32_t>);
static_assert(std::is_constructible_v<Qpn, std::uint32_t>);
// Zero cost: the size of the number, copied as the number is.
static_assert(sizeof(Qpn) == sizeof(std::uint32_t));
static_assert(std::is_trivially_copyable_v<MrKey>);
static_assert(Qpn{7}.value() == 7);

TEST(StrongId, ComparesByValue) {
    EXPECT_EQ(Qpn{0x11}, Qpn{0x11});
    EXPECT_NE(Qpn{0x11}, Qpn{0x12});
    EXPECT_LT(MrKey{0x100}, MrKey{0x200});
    EXPECT_EQ(Qpn{}.value(), 0u);
}

TEST(StrongId, HashesAsAKey) {
    std::unordered_set<CqHandle> cqs{CqHandle{1}, CqHandle{2}, CqHandle{1}};
    EXPECT_EQ(cqs.size(), 2u);
    EXPECT_TRUE(cqs.contains(CqHandle{2}));
    EXPECT_FALSE(cqs.contains(CqHandle{3}));
}

TEST(StrongId, FormatsAsItsNumber) {
    EXPECT_EQ(fmt::format("{}", Qpn{17}), "17");
    EXPECT_EQ(fmt::format("{:#x}", MrKey{0x1234}), "0x1234");
}

}  // namespace
}  // namespace uroce
