#include "gid_table.h"

#include <arpa/inet.h>
#include <fmt/format.h>

namespace uroce::device {

std::optional<wire::Gid> parse_ip(const std::string& text) {
    std::array<std::uint8_t, 4> v4{};
    if (inet_pton(AF_INET, text.c_str(), v4.data()) == 1) {
        return wire::ipv4_mapped(v4);
    }
    wire::Gid v6{};
    if (inet_pton(AF_INET6, text.c_str(), v6.data()) == 1) {
        return v6;
    }
    return std::nullopt;
}

std::uint64_t eui64(const wire::MacAddr& m) {
    // Insert ff:fe in the middle and flip the universal/local bit.
    const std::array<std::uint8_t, 8> b = {static_cast<std::uint8_t>(m[0] ^ 0x02), m[1], m[2], 0xFF, 0xFE, m[3],
                                           m[4], m[5]};
    std::uint64_t v = 0;
    for (std::uint8_t x : b) {
        v = v << 8 | x;
    }
    return v;
}

std::optional<std::vector<GidEntry>> build_gid_table(const wire::MacAddr& mac, const std::vector<wire::Gid>& ips) {
    std::vector<GidEntry> table;
    wire::Gid link_local{};
    link_local[0] = 0xFE;
    link_local[1] = 0x80;
    const std::uint64_t id = eui64(mac);
    for (int i = 0; i < 8; ++i) {
        link_local[8 + i] = static_cast<std::uint8_t>(id >> (56 - 8 * i));
    }
    table.push_back({link_local, GidType::RoceV1});
    table.push_back({link_local, GidType::RoceV2});
    for (const auto& ip : ips) {
        if (wire::is_ipv4_mapped(ip)) {
            table.push_back({ip, GidType::RoceV2});
        }
    }
    for (const auto& ip : ips) {
        if (!wire::is_ipv4_mapped(ip)) {
            table.push_back({ip, GidType::RoceV2});
        }
    }
    if (table.size() > kGidTableLength) {
        return std::nullopt;
    }
    return table;
}

std::string sysfs_gid_text(const wire::Gid& g) {
    std::string s;
    for (int i = 0; i < 16; i += 2) {
        if (i != 0) {
            s += ':';
        }
        s += fmt::format("{:02x}{:02x}", g[i], g[i + 1]);
    }
    return s;
}

const char* sysfs_gid_type_text(GidType t) { return t == GidType::RoceV1 ? "IB/RoCE v1" : "RoCE v2"; }

}  // namespace uroce::device
