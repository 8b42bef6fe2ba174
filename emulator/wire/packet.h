// A read-only view of one parsed RoCEv2 frame. It only exists for frames the
// parser accepted, so every offset in it lies inside the frame; extension
// header accessors return nullptr when the opcode does not carry the header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "headers.h"
#include "icrc.h"
#include "opcode.h"
#include "psn.h"

namespace uroce::wire {

class Packet {
public:
    Packet() = default;

    [[nodiscard]] std::span<const std::uint8_t> frame() const { return frame_; }
    [[nodiscard]] const EthHdr& eth() const { return *at<EthHdr>(0); }
    [[nodiscard]] std::optional<std::uint16_t> vlan_tci() const { return vlan_tci_; }
    [[nodiscard]] IpVersion ip_version() const { return ip_version_; }
    [[nodiscard]] const Ipv4Hdr* ipv4() const { return ip_version_ == IpVersion::V4 ? at<Ipv4Hdr>(l3_) : nullptr; }
    [[nodiscard]] const Ipv6Hdr* ipv6() const { return ip_version_ == IpVersion::V6 ? at<Ipv6Hdr>(l3_) : nullptr; }
    [[nodiscard]] const UdpHdr& udp() const { return *at<UdpHdr>(l4_); }
    [[nodiscard]] const Bth& bth() const { return *at<Bth>(bth_); }
    [[nodiscard]] const OpcodeInfo& info() const { return *info_; }

    // Source and destination addresses in GID form (IPv4 is IPv4-mapped).
    [[nodiscard]] Gid src_gid() const;
    [[nodiscard]] Gid dst_gid() const;

    [[nodiscard]] std::uint8_t opcode() const { return bth().opcode; }
    [[nodiscard]] std::uint32_t dest_qp() const { return bth().dest_qp.get(); }
    [[nodiscard]] Psn psn() const { return Psn(bth().psn.get()); }

    template <typename H>
    [[nodiscard]] const H* ext(Ext e) const {
        const std::uint8_t off = info_->offset[static_cast<std::size_t>(e)];
        return off == kAbsent ? nullptr : at<H>(bth_ + off);
    }
    [[nodiscard]] const Rdeth* rdeth() const { return ext<Rdeth>(Ext::Rdeth); }
    [[nodiscard]] const Deth* deth() const { return ext<Deth>(Ext::Deth); }
    [[nodiscard]] const XrcEth* xrceth() const { return ext<XrcEth>(Ext::XrcEth); }
    [[nodiscard]] const Reth* reth() const { return ext<Reth>(Ext::Reth); }
    [[nodiscard]] const AtomicEth* atomic_eth() const { return ext<AtomicEth>(Ext::AtomicEth); }
    [[nodiscard]] const Aeth* aeth() const { return ext<Aeth>(Ext::Aeth); }
    [[nodiscard]] const AtomicAckEth* atomic_ack_eth() const { return ext<AtomicAckEth>(Ext::AtomicAckEth); }
    [[nodiscard]] const ImmDt* immdt() const { return ext<ImmDt>(Ext::ImmDt); }
    [[nodiscard]] const Ieth* ieth() const { return ext<Ieth>(Ext::Ieth); }

    [[nodiscard]] std::span<const std::uint8_t> payload() const { return frame_.subspan(payload_, payload_len_); }
    [[nodiscard]] std::size_t pad() const { return bth().pad_count(); }
    // Bytes on the wire after the IP packet ends (Ethernet minimum-size padding).
    [[nodiscard]] std::size_t trailer_length() const { return frame_.size() - l3_end_; }

    // The ICRC carried in the frame and the one its contents give.
    [[nodiscard]] std::uint32_t icrc_carried() const { return icrc_load(frame_.data() + icrc_); }
    [[nodiscard]] std::uint32_t icrc_expected() const;
    // True without computing anything for a frame whose port vouched for it
    // (vouch_icrc()): the CRC pass over every payload byte is the largest
    // single cost of a loopback message (docs/architecture.md).
    [[nodiscard]] bool icrc_ok() const { return icrc_vouched_ || icrc_carried() == icrc_expected(); }
    // The port that delivered the frame vouches that it is a frame this
    // daemon built and nobody changed (net::RxFrame::icrc_vouched).
    void vouch_icrc() { icrc_vouched_ = true; }

    // Offsets into frame(), for tools that show where things are.
    [[nodiscard]] std::size_t l3_offset() const { return l3_; }
    [[nodiscard]] std::size_t bth_offset() const { return bth_; }
    [[nodiscard]] std::size_t payload_offset() const { return payload_; }
    [[nodiscard]] std::size_t icrc_offset() const { return icrc_; }

private:
    friend struct PacketParser;

    template <typename H>
    const H* at(std::size_t off) const {
        return reinterpret_cast<const H*>(frame_.data() + off);
    }

    std::span<const std::uint8_t> frame_;
    const OpcodeInfo* info_ = nullptr;
    std::optional<std::uint16_t> vlan_tci_;
    IpVersion ip_version_ = IpVersion::V4;
    std::uint32_t l3_ = 0;
    std::uint32_t l4_ = 0;
    std::uint32_t bth_ = 0;
    std::uint32_t payload_ = 0;
    std::uint32_t payload_len_ = 0;
    std::uint32_t icrc_ = 0;
    std::uint32_t l3_end_ = 0;
    bool icrc_vouched_ = false;
};

}  // namespace uroce::wire
