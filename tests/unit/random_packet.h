// Random builder inputs: every field the opcode carries gets a random value,
// fields it does not carry keep their defaults (as fields_of returns them).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "wire/build.h"

namespace uroce::test {

using Rng = std::mt19937_64;

struct RandomPacketOptions {
    std::uint8_t opcode = 0x04;
    wire::IpVersion ip = wire::IpVersion::V4;
    bool vlan = false;
    std::size_t max_payload = 64;
};

// `payload` owns the bytes the returned fields point at.
[[nodiscard]] wire::PacketFields random_fields(Rng& rng, const RandomPacketOptions& opt,
                                               std::vector<std::uint8_t>& payload);

// Every opcode build_frame accepts.
[[nodiscard]] std::vector<std::uint8_t> buildable_opcodes();

}  // namespace uroce::test
