// Packet sequence numbers: 24-bit counters that wrap (IBA 9.7.1). Two PSNs
// are compared by their signed distance modulo 2^24, so a PSN up to 2^23 - 1
// ahead counts as "after" even across the wrap. The type keeps PSNs from
// being mixed with plain integers.
#pragma once

#include <cstdint>

namespace uroce::wire {

class Psn {
public:
    static constexpr std::uint32_t kMask = 0xFFFFFF;
    static constexpr std::uint32_t kModulus = 0x1000000;

    constexpr Psn() = default;
    constexpr explicit Psn(std::uint32_t v) : value_(v & kMask) {}

    [[nodiscard]] constexpr std::uint32_t value() const { return value_; }

    // Signed distance a - b, in [-2^23, 2^23).
    [[nodiscard]] friend constexpr std::int32_t distance(Psn a, Psn b) {
        // Shift the 24-bit difference into the top of a 32-bit word and back,
        // so the arithmetic shift sign-extends bit 23.
        return static_cast<std::int32_t>((a.value_ - b.value_) << 8) >> 8;
    }

    friend constexpr Psn operator+(Psn a, std::uint32_t n) { return Psn(a.value_ + n); }
    friend constexpr Psn operator-(Psn a, std::uint32_t n) { return Psn(a.value_ - n); }
    constexpr Psn& operator++() {
        value_ = (value_ + 1) & kMask;
        return *this;
    }
    constexpr Psn& operator+=(std::uint32_t n) {
        value_ = (value_ + n) & kMask;
        return *this;
    }

    friend constexpr bool operator==(Psn a, Psn b) = default;
    friend constexpr bool operator<(Psn a, Psn b) { return distance(a, b) < 0; }
    friend constexpr bool operator>(Psn a, Psn b) { return distance(a, b) > 0; }
    friend constexpr bool operator<=(Psn a, Psn b) { return distance(a, b) <= 0; }
    friend constexpr bool operator>=(Psn a, Psn b) { return distance(a, b) >= 0; }

private:
    std::uint32_t value_ = 0;
};

static_assert(Psn(0) > Psn(Psn::kMask));
static_assert(Psn(Psn::kMask) + 1 == Psn(0));
static_assert(distance(Psn(2), Psn(Psn::kMask - 1)) == 4);

}  // namespace uroce::wire
