// The header rdma_cm puts at the start of REQ and SIDR_REQ private data for
// IP port spaces (Linux cma.c; IBA annex A11.6 "IP addressing CM private
// data"): 36 bytes of version, IP version, the active side's port and both
// IP addresses. The passive side takes the addresses from here and its
// listening port from the service ID. REP, REJ and the rest carry none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "wire/headers.h"
#include "wire/icrc.h"

namespace uroce::cm {

constexpr std::size_t kCmaHeaderSize = 36;
constexpr std::uint8_t kCmaVersion = 0x00;

struct CmaHeader {
    wire::IpVersion ip_version = wire::IpVersion::V4;
    std::uint16_t src_port = 0;  // the active side's port
    wire::Gid src{};             // IPv4 held IPv4-mapped, as everywhere in uroce
    wire::Gid dst{};

    friend bool operator==(const CmaHeader&, const CmaHeader&) = default;
};

// Why private data does not carry a usable CMA header. Linux's passive side
// rejects such a REQ (REJ 28) rather than dropping it.
enum class CmaStatus : std::uint8_t { Ok, TooShort, BadVersion, BadIpVersion };

struct CmaParseResult {
    CmaStatus status = CmaStatus::Ok;
    CmaHeader header;
};

// Writes the 36-byte header at the start of `out` (at least 36 bytes).
// IPv4 addresses go in the last 4 bytes of each 16-byte slot, zeros before.
void write_cma_header(const CmaHeader& h, std::span<std::uint8_t> out);

[[nodiscard]] CmaParseResult parse_cma_header(std::span<const std::uint8_t> private_data);

// Bytes left to the program after the header (REQ: 92 - 36 = 56, SIDR_REQ:
// 216 - 36 = 180): what rdma_cm reports as the event's private data length.
[[nodiscard]] constexpr std::size_t user_private_data_size(std::size_t wire_size) {
    return wire_size >= kCmaHeaderSize ? wire_size - kCmaHeaderSize : 0;
}

}  // namespace uroce::cm
