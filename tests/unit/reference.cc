#include "reference.h"

#include <stdexcept>

namespace uroce::test {

std::uint32_t crc32_ref(std::uint32_t crc, std::span<const std::uint8_t> data) {
    std::uint32_t reg = ~crc;
    for (std::uint8_t byte : data) {
        for (int bit = 0; bit < 8; ++bit) {
            const bool feedback = ((reg ^ (static_cast<std::uint32_t>(byte) >> bit)) & 1u) != 0;
            reg >>= 1;
            if (feedback) {
                reg ^= 0xEDB88320u;
            }
        }
    }
    return ~reg;
}

std::uint8_t icrc_mask_bits(bool ipv6, std::size_t i) {
    const std::size_t ip_len = ipv6 ? kIpv6Len : kIpv4Len;
    if (ipv6) {
        if (i == 0) {
            return 0x0F;  // traffic class, high nibble (the version stays)
        }
        if (i == 1 || i == 2 || i == 3 || i == 7) {
            return 0xFF;  // traffic class, flow label, hop limit
        }
    } else if (i == 1 || i == 8 || i == 10 || i == 11) {
        return 0xFF;  // TOS, TTL, header checksum
    }
    if (i == ip_len + 6 || i == ip_len + 7) {
        return 0xFF;  // UDP checksum
    }
    if (i == ip_len + kUdpLen + 4) {
        return 0xFF;  // BTH resv8a
    }
    return 0;
}

std::uint32_t icrc_ref(bool ipv6, std::span<const std::uint8_t> covered) {
    std::vector<std::uint8_t> masked(8, 0xFF);
    for (std::size_t i = 0; i < covered.size(); ++i) {
        masked.push_back(static_cast<std::uint8_t>(covered[i] | icrc_mask_bits(ipv6, i)));
    }
    return crc32_ref(0, masked);
}

std::uint16_t ones_complement_sum(std::span<const std::uint8_t> data) {
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < data.size(); i += 2) {
        const std::uint32_t hi = data[i];
        const std::uint32_t lo = i + 1 < data.size() ? data[i + 1] : 0;
        sum += hi << 8 | lo;
    }
    while (sum > 0xFFFF) {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    return static_cast<std::uint16_t>(sum);
}

std::uint16_t get16(std::span<const std::uint8_t> p, std::size_t off) {
    return static_cast<std::uint16_t>(p[off] << 8 | p[off + 1]);
}

void put16(std::span<std::uint8_t> p, std::size_t off, std::uint16_t v) {
    p[off] = static_cast<std::uint8_t>(v >> 8);
    p[off + 1] = static_cast<std::uint8_t>(v);
}

void fix_ipv4_checksum(std::vector<std::uint8_t>& frame, std::size_t l3) {
    put16(frame, l3 + 10, 0);
    put16(frame, l3 + 10, static_cast<std::uint16_t>(~ones_complement_sum(std::span(frame).subspan(l3, kIpv4Len))));
}

void fix_icrc(std::vector<std::uint8_t>& frame, bool ipv6, std::size_t l3, std::size_t l3_end) {
    const std::uint32_t icrc = icrc_ref(ipv6, std::span(frame).subspan(l3, l3_end - kIcrcLen - l3));
    for (std::size_t i = 0; i < kIcrcLen; ++i) {
        frame[l3_end - kIcrcLen + i] = static_cast<std::uint8_t>(icrc >> (8 * i));
    }
}

std::vector<std::uint8_t> bth_bytes(std::uint8_t opcode, std::uint8_t flags, std::uint16_t pkey,
                                    std::uint32_t dest_qp, bool ack_req, std::uint32_t psn) {
    return {
        opcode,
        flags,
        static_cast<std::uint8_t>(pkey >> 8),
        static_cast<std::uint8_t>(pkey),
        0,
        static_cast<std::uint8_t>(dest_qp >> 16),
        static_cast<std::uint8_t>(dest_qp >> 8),
        static_cast<std::uint8_t>(dest_qp),
        static_cast<std::uint8_t>(ack_req ? 0x80 : 0),
        static_cast<std::uint8_t>(psn >> 16),
        static_cast<std::uint8_t>(psn >> 8),
        static_cast<std::uint8_t>(psn),
    };
}

std::vector<std::uint8_t> craft_frame(const RawFrameSpec& spec) {
    const std::size_t udp_len = kUdpLen + spec.transport.size() + kIcrcLen;
    if (udp_len > 0xFFFF - kIpv4Len) {
        throw std::length_error("crafted frame too large");
    }
    std::vector<std::uint8_t> f = {0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
    const std::uint16_t l3_type = spec.ipv6 ? 0x86DD : 0x0800;
    if (spec.vlan_tci) {
        f.insert(f.end(), {0x81, 0x00, static_cast<std::uint8_t>(*spec.vlan_tci >> 8),
                           static_cast<std::uint8_t>(*spec.vlan_tci)});
    }
    f.push_back(static_cast<std::uint8_t>(l3_type >> 8));
    f.push_back(static_cast<std::uint8_t>(l3_type));
    const std::size_t l3 = f.size();
    if (spec.ipv6) {
        f.insert(f.end(), {0x60, 0x00, 0x00, 0x00, static_cast<std::uint8_t>(udp_len >> 8),
                           static_cast<std::uint8_t>(udp_len), spec.ip_protocol, 64});
        const std::uint8_t src[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        const std::uint8_t dst[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
        f.insert(f.end(), std::begin(src), std::end(src));
        f.insert(f.end(), std::begin(dst), std::end(dst));
    } else {
        const std::size_t total = kIpv4Len + udp_len;
        f.insert(f.end(), {0x45, 0x00, static_cast<std::uint8_t>(total >> 8), static_cast<std::uint8_t>(total), 0x12,
                           0x34, 0x40, 0x00, 64, spec.ip_protocol, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2});
        fix_ipv4_checksum(f, l3);
    }
    f.push_back(static_cast<std::uint8_t>(spec.udp_src_port >> 8));
    f.push_back(static_cast<std::uint8_t>(spec.udp_src_port));
    f.push_back(static_cast<std::uint8_t>(spec.udp_dst_port >> 8));
    f.push_back(static_cast<std::uint8_t>(spec.udp_dst_port));
    f.push_back(static_cast<std::uint8_t>(udp_len >> 8));
    f.push_back(static_cast<std::uint8_t>(udp_len));
    f.push_back(0);
    f.push_back(0);
    f.insert(f.end(), spec.transport.begin(), spec.transport.end());
    f.resize(f.size() + kIcrcLen);
    if (spec.transport.size() >= kBthLen) {
        fix_icrc(f, spec.ipv6, l3, f.size());
    }
    return f;
}

}  // namespace uroce::test
