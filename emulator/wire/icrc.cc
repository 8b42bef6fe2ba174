#include "icrc.h"

#include <isa-l/crc.h>

#include <array>
#include <cstring>

#include "headers.h"

namespace uroce::wire {

namespace {

// CRC-32 of the 8 0xFF bytes that replace the LRH (zlib convention). rdma_rxe
// keeps the same value as its raw register, 0xdebb20e3 == ~0x2144df1c.
constexpr std::uint32_t kLrhPlaceholderCrc = 0x2144DF1C;

constexpr std::uint32_t crc32_bitwise(std::uint32_t crc, const std::uint8_t* p, std::size_t n) {
    crc = ~crc;
    for (std::size_t i = 0; i < n; ++i) {
        crc ^= p[i];
        for (int b = 0; b < 8; ++b) {
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
        }
    }
    return ~crc;
}

constexpr std::array<std::uint8_t, 8> kOnes8 = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
static_assert(crc32_bitwise(0, kOnes8.data(), kOnes8.size()) == kLrhPlaceholderCrc);

constexpr std::size_t kMaxMaskedPrefix = sizeof(Ipv6Hdr) + sizeof(UdpHdr) + sizeof(Bth);

}  // namespace

std::uint32_t crc32_ieee(std::uint32_t crc, std::span<const std::uint8_t> data) {
    return crc32_gzip_refl(crc, data.data(), data.size());
}

std::uint32_t icrc_compute(IpVersion ip, std::span<const std::uint8_t> covered) {
    // Copy the IP, UDP and BT headers (at most 60 bytes), mask the variant
    // fields in the copy, and run the CRC over it and then over the rest of
    // the packet in place.
    std::array<std::uint8_t, kMaxMaskedPrefix> prefix;
    const std::size_t ip_len = ip == IpVersion::V4 ? sizeof(Ipv4Hdr) : sizeof(Ipv6Hdr);
    const std::size_t n = ip_len + sizeof(UdpHdr) + sizeof(Bth);
    std::memcpy(prefix.data(), covered.data(), n);

    if (ip == IpVersion::V4) {
        auto* h = reinterpret_cast<Ipv4Hdr*>(prefix.data());
        h->tos = 0xFF;
        h->ttl = 0xFF;
        h->checksum.set(0xFFFF);
    } else {
        auto* h = reinterpret_cast<Ipv6Hdr*>(prefix.data());
        h->vtc_flow.set(h->vtc_flow.get() | 0x0FFFFFFFu);  // keep the version nibble
        h->hop_limit = 0xFF;
    }
    auto* udp = reinterpret_cast<UdpHdr*>(prefix.data() + ip_len);
    udp->checksum.set(0xFFFF);
    auto* bth = reinterpret_cast<Bth*>(prefix.data() + ip_len + sizeof(UdpHdr));
    bth->resv8a = 0xFF;

    std::uint32_t crc = crc32_gzip_refl(kLrhPlaceholderCrc, prefix.data(), n);
    return crc32_gzip_refl(crc, covered.data() + n, covered.size() - n);
}

std::uint32_t icrc_load(const std::uint8_t* p) {
    return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
           static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

void icrc_store(std::uint8_t* p, std::uint32_t icrc) {
    p[0] = static_cast<std::uint8_t>(icrc);
    p[1] = static_cast<std::uint8_t>(icrc >> 8);
    p[2] = static_cast<std::uint8_t>(icrc >> 16);
    p[3] = static_cast<std::uint8_t>(icrc >> 24);
}

}  // namespace uroce::wire
