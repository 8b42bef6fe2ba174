// The port's GID table, as uroced publishes it (sysfs gids/N and
// gid_attrs/types/N) and as the engine matches destination GIDs against it.
//
// Layout (stable, documented in docs/daemon.md):
//   0  fe80::/64 link-local from the MAC (modified EUI-64)   RoCE v1
//   1  the same link-local address                           RoCE v2
//   2  the first IPv4 address, IPv4-mapped (::ffff:a.b.c.d)  RoCE v2
//   3+ further IPv4 then IPv6 addresses, in command-line order, RoCE v2
// Entries past the last are all zeros (empty) up to kGidTableLength.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "wire/headers.h"

namespace uroce::device {

enum class GidType : std::uint8_t { RoceV1, RoceV2 };

struct GidEntry {
    wire::Gid gid{};
    GidType type = GidType::RoceV2;
};

constexpr std::size_t kGidTableLength = 16;
constexpr std::size_t kFirstIpv4GidIndex = 2;

// Parses an IPv4 or IPv6 address into GID form; nothing when it is neither.
[[nodiscard]] std::optional<wire::Gid> parse_ip(const std::string& text);

// Modified EUI-64 interface identifier of a MAC (RFC 4291 appendix A).
[[nodiscard]] std::uint64_t eui64(const wire::MacAddr& mac);

// The table for a port with `mac` and `ips` (already parsed). Fails (nothing)
// when there are more addresses than the table holds.
[[nodiscard]] std::optional<std::vector<GidEntry>> build_gid_table(const wire::MacAddr& mac,
                                                                   const std::vector<wire::Gid>& ips);

// "fe80:0000:0000:0000:0000:00ff:fe00:0001": eight groups of four hex digits,
// the only form libibverbs parses from sysfs.
[[nodiscard]] std::string sysfs_gid_text(const wire::Gid& gid);
[[nodiscard]] const char* sysfs_gid_type_text(GidType t);

}  // namespace uroce::device
