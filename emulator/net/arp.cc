#include "arp.h"

#include <algorithm>

namespace uroce::net {

namespace {

constexpr std::uint8_t kMacLength = 6;
constexpr std::uint8_t kIpv4Length = 4;

}  // namespace

std::optional<ArpMessage> parse_arp(std::span<const std::uint8_t> frame) {
    if (frame.size() < sizeof(wire::EthHdr) + sizeof(ArpHdr)) {
        return std::nullopt;
    }
    const auto* eth = reinterpret_cast<const wire::EthHdr*>(frame.data());
    if (eth->ether_type.get() != kEtherTypeArp) {
        return std::nullopt;
    }
    const auto* arp = reinterpret_cast<const ArpHdr*>(frame.data() + sizeof(wire::EthHdr));
    if (arp->hardware_type.get() != ArpHdr::kHardwareEthernet || arp->protocol_type.get() != wire::kEtherTypeIpv4 ||
        arp->hardware_length != kMacLength || arp->protocol_length != kIpv4Length) {
        return std::nullopt;
    }
    const std::uint16_t op = arp->operation.get();
    if (op != static_cast<std::uint16_t>(ArpOp::Request) && op != static_cast<std::uint16_t>(ArpOp::Reply)) {
        return std::nullopt;
    }
    return ArpMessage{
        .eth_dst = eth->dst,
        .eth_src = eth->src,
        .op = static_cast<ArpOp>(op),
        .sender_mac = arp->sender_mac,
        .sender_ip = arp->sender_ip,
        .target_mac = arp->target_mac,
        .target_ip = arp->target_ip,
    };
}

std::size_t build_arp(std::span<std::uint8_t> out, const ArpMessage& m) {
    std::fill_n(out.begin(), kArpFrameSize, std::uint8_t{0});
    auto* eth = reinterpret_cast<wire::EthHdr*>(out.data());
    eth->dst = m.eth_dst;
    eth->src = m.eth_src;
    eth->ether_type.set(kEtherTypeArp);
    auto* arp = reinterpret_cast<ArpHdr*>(out.data() + sizeof(wire::EthHdr));
    arp->hardware_type.set(ArpHdr::kHardwareEthernet);
    arp->protocol_type.set(wire::kEtherTypeIpv4);
    arp->hardware_length = kMacLength;
    arp->protocol_length = kIpv4Length;
    arp->operation.set(static_cast<std::uint16_t>(m.op));
    arp->sender_mac = m.sender_mac;
    arp->sender_ip = m.sender_ip;
    arp->target_mac = m.target_mac;
    arp->target_ip = m.target_ip;
    return kArpFrameSize;
}

}  // namespace uroce::net
