// Big-endian (network order) field types for wire headers.
//
// Each type stores raw bytes, so it has alignment 1 and can sit at any offset
// inside a frame. There is no implicit conversion to or from host integers:
// reading needs .get(), writing needs .set() or be32::of(x). Mixing a wire
// field with a host integer therefore does not compile.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace uroce::wire {

namespace detail {

template <std::size_t Bytes, typename Host>
struct BigEndian {
    static_assert(Bytes <= sizeof(Host));
    std::array<std::uint8_t, Bytes> raw{};

    [[nodiscard]] constexpr Host get() const noexcept {
        Host v = 0;
        for (std::size_t i = 0; i < Bytes; ++i) {
            v = static_cast<Host>((v << 8) | raw[i]);
        }
        return v;
    }

    // Values wider than the field are truncated to its low bytes (a be24 keeps
    // 24 bits), which is what every 24-bit IBA field (QPN, PSN, MSN) wants.
    constexpr void set(Host v) noexcept {
        for (std::size_t i = Bytes; i-- > 0;) {
            raw[i] = static_cast<std::uint8_t>(v & 0xFF);
            v = static_cast<Host>(v >> 8);
        }
    }

    [[nodiscard]] static constexpr BigEndian of(Host v) noexcept {
        BigEndian b;
        b.set(v);
        return b;
    }

    friend constexpr bool operator==(const BigEndian&, const BigEndian&) = default;
};

}  // namespace detail

using be16 = detail::BigEndian<2, std::uint16_t>;
using be24 = detail::BigEndian<3, std::uint32_t>;
using be32 = detail::BigEndian<4, std::uint32_t>;
using be64 = detail::BigEndian<8, std::uint64_t>;

static_assert(sizeof(be16) == 2 && alignof(be16) == 1);
static_assert(sizeof(be24) == 3 && alignof(be24) == 1);
static_assert(sizeof(be32) == 4 && alignof(be32) == 1);
static_assert(sizeof(be64) == 8 && alignof(be64) == 1);

}  // namespace uroce::wire
