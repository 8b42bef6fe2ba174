// Wire header layouts for RoCEv2: Ethernet (+802.1Q), IPv4, IPv6, UDP and
// the InfiniBand transport headers (IBA vol. 1, ch. 9.2-9.5; RoCEv2 is
// Annex A17). Every struct is made of byte-sized or big-endian fields only,
// so it has alignment 1, no padding, and the exact size asserted below.
// Byte order is handled only inside the accessors.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

#include "byte_order.h"

namespace uroce::wire {

using MacAddr = std::array<std::uint8_t, 6>;

// A 16-byte address in GID form. IPv4 addresses are held IPv4-mapped
// (::ffff:a.b.c.d), the form RoCEv2 GIDs use for IPv4 (IBA A17.4.5.1).
using Gid = std::array<std::uint8_t, 16>;

// Gid equality as two 8-byte compares. std::array's operator== calls
// memcmp, which the receive path's checks (our GID, the QP's peer) paid
// three times a packet: 6% of the daemon's instructions per 64 B WRITE.
inline bool same_gid(const Gid& a, const Gid& b) {
    std::uint64_t a0, a1, b0, b1;
    std::memcpy(&a0, a.data(), 8);
    std::memcpy(&a1, a.data() + 8, 8);
    std::memcpy(&b0, b.data(), 8);
    std::memcpy(&b1, b.data() + 8, 8);
    return ((a0 ^ b0) | (a1 ^ b1)) == 0;
}

constexpr std::uint16_t kEtherTypeIpv4 = 0x0800;
constexpr std::uint16_t kEtherTypeIpv6 = 0x86DD;
constexpr std::uint16_t kEtherTypeVlan = 0x8100;  // IEEE 802.1Q C-tag
constexpr std::uint8_t kIpProtoUdp = 17;
// IANA-assigned UDP destination port for RoCEv2 (IBA A17.4.3).
constexpr std::uint16_t kRoceV2Port = 4791;
// The ICRC trails every RoCE packet (IBA 7.8.1).
constexpr std::size_t kIcrcSize = 4;

struct EthHdr {
    MacAddr dst;
    MacAddr src;
    be16 ether_type;
};

// The 4 bytes an 802.1Q tag inserts between the source MAC and the EtherType.
struct VlanTag {
    be16 tci;  // PCP(3) DEI(1) VID(12)
    be16 ether_type;
};

struct Ipv4Hdr {
    std::uint8_t version_ihl;
    std::uint8_t tos;  // DSCP(6) ECN(2)
    be16 total_length;
    be16 id;
    be16 flags_frag;  // reserved(1) DF(1) MF(1) fragment offset(13)
    std::uint8_t ttl;
    std::uint8_t protocol;
    be16 checksum;
    std::array<std::uint8_t, 4> src;
    std::array<std::uint8_t, 4> dst;

    static constexpr std::uint16_t kDontFragment = 0x4000;
    static constexpr std::uint16_t kMoreFragments = 0x2000;
    static constexpr std::uint16_t kFragOffsetMask = 0x1FFF;

    [[nodiscard]] constexpr unsigned version() const { return version_ihl >> 4; }
    [[nodiscard]] constexpr unsigned header_length() const { return (version_ihl & 0x0Fu) * 4; }
};

struct Ipv6Hdr {
    be32 vtc_flow;  // version(4) traffic class(8) flow label(20)
    be16 payload_length;
    std::uint8_t next_header;
    std::uint8_t hop_limit;
    Gid src;
    Gid dst;

    [[nodiscard]] constexpr unsigned version() const { return vtc_flow.get() >> 28; }
    [[nodiscard]] constexpr std::uint8_t traffic_class() const {
        return static_cast<std::uint8_t>(vtc_flow.get() >> 20);
    }
    [[nodiscard]] constexpr std::uint32_t flow_label() const { return vtc_flow.get() & 0xFFFFF; }
};

struct UdpHdr {
    be16 src_port;
    be16 dst_port;
    be16 length;
    be16 checksum;
};

// Base Transport Header, IBA 9.2.
struct Bth {
    std::uint8_t opcode;
    std::uint8_t flags;  // SE(1) MigReq(1) PadCnt(2) TVer(4)
    be16 pkey;
    std::uint8_t resv8a;  // reserved in IBA; RoCEv2 carries FECN/BECN here
    be24 dest_qp;
    std::uint8_t ack_req_resv7;  // AckReq(1) reserved(7)
    be24 psn;

    static constexpr std::uint8_t kSolicitedBit = 0x80;
    static constexpr std::uint8_t kMigReqBit = 0x40;
    static constexpr std::uint8_t kPadShift = 4;
    static constexpr std::uint8_t kPadMask = 0x30;
    static constexpr std::uint8_t kTverMask = 0x0F;
    static constexpr std::uint8_t kAckReqBit = 0x80;

    [[nodiscard]] constexpr bool solicited() const { return (flags & kSolicitedBit) != 0; }
    [[nodiscard]] constexpr bool mig_req() const { return (flags & kMigReqBit) != 0; }
    [[nodiscard]] constexpr unsigned pad_count() const { return (flags & kPadMask) >> kPadShift; }
    [[nodiscard]] constexpr unsigned tver() const { return flags & kTverMask; }
    [[nodiscard]] constexpr bool ack_req() const { return (ack_req_resv7 & kAckReqBit) != 0; }
    [[nodiscard]] constexpr unsigned resv7() const { return ack_req_resv7 & 0x7Fu; }
};

// Reliable Datagram Extended Transport Header, IBA 9.3.1 (RD is unsupported,
// but the layout is known so such packets are recognised).
struct Rdeth {
    std::uint8_t reserved;
    be24 ee_context;
};

// Datagram Extended Transport Header, IBA 9.3.2.
struct Deth {
    be32 qkey;
    std::uint8_t reserved;
    be24 src_qp;
};

// XRC Extended Transport Header, IBA 9.3.6: the XRC SRQ a request is for.
struct XrcEth {
    std::uint8_t reserved;
    be24 xrc_srq;
};

// RDMA Extended Transport Header, IBA 9.3.3.
struct Reth {
    be64 va;
    be32 rkey;
    be32 dma_length;
};

// Atomic Extended Transport Header, IBA 9.3.4.
struct AtomicEth {
    be64 va;
    be32 rkey;
    be64 swap_add;
    be64 compare;
};

// ACK Extended Transport Header, IBA 9.3.5. The syndrome's top bit is
// reserved, bits 6:5 give the kind, bits 4:0 the credit count, RNR timer or
// NAK code (IBA table 43).
struct Aeth {
    std::uint8_t syndrome;
    be24 msn;
};

// Atomic Acknowledge Extended Transport Header, IBA 9.5.3.
struct AtomicAckEth {
    be64 original;
};

// Immediate data, IBA 9.3.7.
struct ImmDt {
    be32 data;
};

// Invalidate Extended Transport Header, IBA 9.3.8.
struct Ieth {
    be32 rkey;
};

// A RoCEv2 Congestion Notification Packet carries 16 reserved bytes after the
// BTH (IBA A17.9.3).
struct CnpReserved {
    std::array<std::uint8_t, 16> reserved;
};

static_assert(sizeof(EthHdr) == 14);
static_assert(sizeof(VlanTag) == 4);
static_assert(sizeof(Ipv4Hdr) == 20);
static_assert(sizeof(Ipv6Hdr) == 40);
static_assert(sizeof(UdpHdr) == 8);
static_assert(sizeof(Bth) == 12);
static_assert(sizeof(Rdeth) == 4);
static_assert(sizeof(Deth) == 8);
static_assert(sizeof(XrcEth) == 4);
static_assert(sizeof(Reth) == 16);
static_assert(sizeof(AtomicEth) == 28);
static_assert(sizeof(Aeth) == 4);
static_assert(sizeof(AtomicAckEth) == 8);
static_assert(sizeof(ImmDt) == 4);
static_assert(sizeof(Ieth) == 4);
static_assert(sizeof(CnpReserved) == 16);

// AETH syndrome kinds (IBA 9.7.5.2.1, table 43).
enum class AckKind : std::uint8_t { Ack = 0, RnrNak = 1, Reserved = 2, Nak = 3 };

// NAK codes carried in the low 5 bits of a NAK syndrome (IBA table 43).
enum class NakCode : std::uint8_t {
    PsnSequenceError = 0,
    InvalidRequest = 1,
    RemoteAccessError = 2,
    RemoteOperationalError = 3,
    InvalidRdRequest = 4,
};

[[nodiscard]] constexpr AckKind ack_kind(std::uint8_t syndrome) {
    return static_cast<AckKind>((syndrome >> 5) & 0x3);
}
[[nodiscard]] constexpr std::uint8_t syndrome_value(std::uint8_t syndrome) { return syndrome & 0x1F; }
[[nodiscard]] constexpr std::uint8_t make_syndrome(AckKind kind, std::uint8_t value) {
    return static_cast<std::uint8_t>((static_cast<unsigned>(kind) << 5) | (value & 0x1F));
}

// IPv4-mapped GID helpers (::ffff:a.b.c.d).
[[nodiscard]] constexpr bool is_ipv4_mapped(const Gid& g) {
    for (int i = 0; i < 10; ++i) {
        if (g[i] != 0) {
            return false;
        }
    }
    return g[10] == 0xFF && g[11] == 0xFF;
}
[[nodiscard]] constexpr Gid ipv4_mapped(const std::array<std::uint8_t, 4>& a) {
    Gid g{};
    g[10] = 0xFF;
    g[11] = 0xFF;
    g[12] = a[0];
    g[13] = a[1];
    g[14] = a[2];
    g[15] = a[3];
    return g;
}
[[nodiscard]] constexpr std::array<std::uint8_t, 4> ipv4_of(const Gid& g) { return {g[12], g[13], g[14], g[15]}; }

}  // namespace uroce::wire
