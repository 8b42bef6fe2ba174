// Memory keys (lkey, rkey): a 24-bit table index in the upper bits and an
// 8-bit key byte in the lower bits (IBA 10.6.3.1 calls the byte the "key"
// portion, owned by the consumer for type 2 windows). The byte changes every
// time a table entry is reused, so a key from an earlier registration fails.
#pragma once

#include <cstdint>

#include "common/ids.h"

namespace uroce::mr {

constexpr std::uint32_t kIndexBits = 24;
constexpr std::uint32_t kMaxIndex = (1u << kIndexBits) - 1;

[[nodiscard]] constexpr std::uint32_t make_key(std::uint32_t index, std::uint8_t key_byte) {
    return index << 8 | key_byte;
}
[[nodiscard]] constexpr std::uint32_t key_index(std::uint32_t key) { return key >> 8; }
[[nodiscard]] constexpr std::uint8_t key_byte(std::uint32_t key) { return static_cast<std::uint8_t>(key & 0xFF); }
[[nodiscard]] constexpr std::uint32_t key_index(MrKey key) { return key_index(key.value()); }
[[nodiscard]] constexpr std::uint8_t key_byte(MrKey key) { return key_byte(key.value()); }

}  // namespace uroce::mr
