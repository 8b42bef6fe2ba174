#include "cma_header.h"

#include <algorithm>

namespace uroce::cm {

namespace {

constexpr std::size_t kVersionOffset = 0;
constexpr std::size_t kIpVersionOffset = 1;  // IP version in the high nibble
constexpr std::size_t kPortOffset = 2;       // big-endian
constexpr std::size_t kSrcOffset = 4;
constexpr std::size_t kDstOffset = 20;
constexpr std::size_t kAddrSize = 16;
constexpr std::size_t kIpv4InSlot = 12;      // IPv4: last 4 bytes of the slot

void write_addr(wire::IpVersion v, const wire::Gid& g, std::span<std::uint8_t> slot) {
    std::fill(slot.begin(), slot.end(), 0);
    if (v == wire::IpVersion::V4) {
        std::copy_n(g.begin() + kIpv4InSlot, 4, slot.begin() + kIpv4InSlot);
    } else {
        std::copy_n(g.begin(), kAddrSize, slot.begin());
    }
}

wire::Gid read_addr(wire::IpVersion v, std::span<const std::uint8_t> slot) {
    if (v == wire::IpVersion::V4) {
        return wire::ipv4_mapped({slot[12], slot[13], slot[14], slot[15]});
    }
    wire::Gid g{};
    std::copy_n(slot.begin(), kAddrSize, g.begin());
    return g;
}

}  // namespace

void write_cma_header(const CmaHeader& h, std::span<std::uint8_t> out) {
    out[kVersionOffset] = kCmaVersion;
    out[kIpVersionOffset] = h.ip_version == wire::IpVersion::V4 ? 0x40 : 0x60;
    out[kPortOffset] = static_cast<std::uint8_t>(h.src_port >> 8);
    out[kPortOffset + 1] = static_cast<std::uint8_t>(h.src_port);
    write_addr(h.ip_version, h.src, out.subspan(kSrcOffset, kAddrSize));
    write_addr(h.ip_version, h.dst, out.subspan(kDstOffset, kAddrSize));
}

CmaParseResult parse_cma_header(std::span<const std::uint8_t> pd) {
    CmaParseResult r;
    if (pd.size() < kCmaHeaderSize) {
        r.status = CmaStatus::TooShort;
        return r;
    }
    if (pd[kVersionOffset] != kCmaVersion) {
        r.status = CmaStatus::BadVersion;
        return r;
    }
    const std::uint8_t ipv = pd[kIpVersionOffset] >> 4;
    if (ipv != 4 && ipv != 6) {
        r.status = CmaStatus::BadIpVersion;
        return r;
    }
    r.header.ip_version = ipv == 4 ? wire::IpVersion::V4 : wire::IpVersion::V6;
    r.header.src_port = static_cast<std::uint16_t>((pd[kPortOffset] << 8) | pd[kPortOffset + 1]);
    r.header.src = read_addr(r.header.ip_version, pd.subspan(kSrcOffset, kAddrSize));
    r.header.dst = read_addr(r.header.ip_version, pd.subspan(kDstOffset, kAddrSize));
    return r;
}

}  // namespace uroce::cm
