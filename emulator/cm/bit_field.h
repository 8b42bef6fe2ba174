// Fields of a CM MAD as the IBA lays them out: a byte offset from the start
// of the MAD, a bit offset counted from that byte's most significant bit,
// and a width (IBA vol. 1, 12.6: "byte[bit]" positions; fields never cross
// more than 8 bytes). Values are big-endian on the wire.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "mad.h"

namespace uroce::cm {

struct BitField {
    std::uint16_t byte;  // from the start of the MAD (the 24-byte header included)
    std::uint8_t bit;    // 0 = the most significant bit of `byte`
    std::uint8_t width;  // 1..64

    [[nodiscard]] constexpr std::size_t span_bytes() const { return (bit + width + 7u) / 8u; }
    [[nodiscard]] constexpr std::size_t end() const { return byte + span_bytes(); }
    [[nodiscard]] constexpr std::uint64_t mask() const {
        return width >= 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << width) - 1);
    }
};

// A field that starts on a byte boundary and fills whole bytes.
[[nodiscard]] constexpr BitField bytes_field(std::uint16_t byte, std::uint8_t bytes) {
    return BitField{byte, 0, static_cast<std::uint8_t>(bytes * 8)};
}

[[nodiscard]] constexpr std::uint64_t get_field(std::span<const std::uint8_t, kMadSize> mad, BitField f) {
    std::uint64_t v = 0;
    const std::size_t n = f.span_bytes();
    for (std::size_t i = 0; i < n; ++i) {
        v = (v << 8) | mad[f.byte + i];
    }
    const std::size_t shift = n * 8 - f.bit - f.width;
    return (v >> shift) & f.mask();
}

constexpr void put_field(std::span<std::uint8_t, kMadSize> mad, BitField f, std::uint64_t value) {
    const std::size_t n = f.span_bytes();
    const std::size_t shift = n * 8 - f.bit - f.width;
    std::uint64_t word = 0;
    for (std::size_t i = 0; i < n; ++i) {
        word = (word << 8) | mad[f.byte + i];
    }
    const std::uint64_t m = f.mask() << shift;
    word = (word & ~m) | ((value << shift) & m);
    for (std::size_t i = n; i-- > 0;) {
        mad[f.byte + i] = static_cast<std::uint8_t>(word & 0xFF);
        word >>= 8;
    }
}

}  // namespace uroce::cm
