#include "icrc.h"

#include <isa-l/crc.h>

#include <array>
#include <cstddef>

#include "headers.h"

namespace uroce::wire {

namespace {

// CRC-32 of the 8 0xFF bytes that replace the LRH (zlib convention). rdma_rxe
// keeps the same value as its raw register, 0xdebb20e3 == ~0x2144df1c.
constexpr std::uint32_t kLrhPlaceholderCrc = 0x2144DF1C;
constexpr std::uint32_t kPoly = 0xEDB88320u;  // CRC-32 (IEEE), reflected

// One byte through the raw CRC register (no pre- or post-inversion).
constexpr std::uint32_t raw_bitwise(std::uint32_t s, std::uint8_t b) {
    s ^= b;
    for (int i = 0; i < 8; ++i) {
        s = (s >> 1) ^ (kPoly & (0u - (s & 1u)));
    }
    return s;
}

using Table = std::array<std::uint32_t, 256>;

constexpr Table make_byte_table() {
    Table t{};
    for (unsigned v = 0; v < 256; ++v) {
        t[v] = raw_bitwise(0, static_cast<std::uint8_t>(v));
    }
    return t;
}
constexpr Table kByteTable = make_byte_table();

constexpr std::uint32_t raw_byte(std::uint32_t s, std::uint8_t b) { return (s >> 8) ^ kByteTable[(s ^ b) & 0xFF]; }

constexpr std::uint32_t crc_of_lrh_placeholder() {
    std::uint32_t s = ~0u;
    for (int i = 0; i < 8; ++i) {
        s = raw_byte(s, 0xFF);
    }
    return ~s;
}
static_assert(crc_of_lrh_placeholder() == kLrhPlaceholderCrc);

// The header bytes a router may change (IBA A17.4.1), as offsets from the IP
// header: IPv4 TOS, TTL, header checksum; IPv6 traffic class and flow label
// (bytes 0-3 below the version nibble), hop limit; then the UDP checksum and
// BTH resv8a. The ICRC treats them as all ones.
constexpr std::size_t kPrefix4 = sizeof(Ipv4Hdr) + sizeof(UdpHdr) + sizeof(Bth);  // 40
constexpr std::size_t kPrefix6 = sizeof(Ipv6Hdr) + sizeof(UdpHdr) + sizeof(Bth);  // 60
constexpr std::array<std::size_t, 7> kVariant4 = {1, 8, 10, 11, 26, 27, 32};
constexpr std::array<std::size_t, 8> kVariant6 = {0, 1, 2, 3, 7, 46, 47, 52};

// CRC-32 is linear: crc(masked) == crc(original) ^ raw(masked ^ original).
// masked ^ original is zero outside the variant bytes, so its raw CRC over
// the fixed-length prefix is the XOR of one table entry per variant byte:
// entry [j][d] is the raw CRC of a prefix holding d at offset j, zeros elsewhere.
template <std::size_t N>
constexpr std::array<Table, N> make_variant_tables(const std::array<std::size_t, N>& offsets, std::size_t prefix) {
    std::array<Table, N> tables{};
    for (std::size_t i = 0; i < N; ++i) {
        for (unsigned d = 0; d < 256; ++d) {
            std::uint32_t s = kByteTable[d];
            for (std::size_t k = offsets[i] + 1; k < prefix; ++k) {
                s = raw_byte(s, 0);
            }
            tables[i][d] = s;
        }
    }
    return tables;
}
constexpr std::array<Table, kVariant4.size()> kVariantTables4 = make_variant_tables(kVariant4, kPrefix4);
constexpr std::array<Table, kVariant6.size()> kVariantTables6 = make_variant_tables(kVariant6, kPrefix6);

// ISA-L's path for buffers under 16 bytes costs more than a whole 64-byte
// buffer; a byte-wise table is faster for ACK-sized tails.
std::uint32_t crc32_short(std::uint32_t crc, const std::uint8_t* p, std::size_t n) {
    std::uint32_t s = ~crc;
    for (std::size_t i = 0; i < n; ++i) {
        s = raw_byte(s, p[i]);
    }
    return ~s;
}

}  // namespace

std::uint32_t crc32_ieee(std::uint32_t crc, std::span<const std::uint8_t> data) {
    return crc32_gzip_refl(crc, data.data(), data.size());
}

std::uint32_t icrc_compute(IpVersion ip, std::span<const std::uint8_t> covered) {
    // The packet is read in place, never copied: copying the headers and
    // masking them with byte stores made ISA-L's vector loads wait on
    // store-to-load forwarding, which cost more than the CRC of a small packet.
    const std::uint8_t* p = covered.data();
    std::size_t n = 0;
    std::uint32_t crc = 0;
    if (ip == IpVersion::V4) {
        n = kPrefix4;
        crc = crc32_gzip_refl(kLrhPlaceholderCrc, p, n);
        for (std::size_t i = 0; i < kVariant4.size(); ++i) {
            crc ^= kVariantTables4[i][p[kVariant4[i]] ^ 0xFF];
        }
    } else {
        n = kPrefix6;
        crc = crc32_gzip_refl(kLrhPlaceholderCrc, p, n);
        crc ^= kVariantTables6[0][~p[0] & 0x0F];  // the version nibble is covered as it is
        for (std::size_t i = 1; i < kVariant6.size(); ++i) {
            crc ^= kVariantTables6[i][p[kVariant6[i]] ^ 0xFF];
        }
    }
    const std::size_t rest = covered.size() - n;
    return rest >= 16 ? crc32_gzip_refl(crc, p + n, rest) : crc32_short(crc, p + n, rest);
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
