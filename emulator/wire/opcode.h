// The BTH opcode table (IBA vol. 1, 9.2 table 38 and 9.3 table 39): for each
// of the 256 opcodes, which extension headers follow the BTH and at which
// offset, whether a payload may follow, and a printable name.
//
// The table is generated at compile time from one list of operations (the
// low five opcode bits) and the rule each transport class applies on top of
// it, so there is no second hand-kept table to drift. Every other part of
// uroce reads packet layout from here.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "headers.h"

namespace uroce::wire {

// Transport class: the top three opcode bits (IBA 9.2 table 38). CNP (0x81)
// is the RoCEv2 congestion notification packet.
enum class Transport : std::uint8_t { RC, UC, RD, UD, XRC, CNP, None };

// What the packet does, independent of transport.
enum class Operation : std::uint8_t {
    None,
    Send,
    RdmaWrite,
    RdmaReadRequest,
    RdmaReadResponse,
    Acknowledge,
    AtomicAcknowledge,
    CompareSwap,
    FetchAdd,
    Cnp,
};

// Where a packet sits in its message.
enum class Segment : std::uint8_t { None, First, Middle, Last, Only };

// Extension headers, in the order they follow the BTH (IBA 9.2 figure 98:
// RDETH, DETH, XRCETH, RETH or AtomicETH, AETH, AtomicAckETH, ImmDt or IETH).
enum class Ext : std::uint8_t {
    Rdeth,
    Deth,
    XrcEth,
    Reth,
    AtomicEth,
    Aeth,
    AtomicAckEth,
    ImmDt,
    Ieth,
    CnpReserved,
    Count,
};
constexpr std::size_t kExtCount = static_cast<std::size_t>(Ext::Count);

constexpr std::array<std::uint8_t, kExtCount> kExtSize = {
    sizeof(Rdeth), sizeof(Deth), sizeof(XrcEth),       sizeof(Reth),  sizeof(AtomicEth),
    sizeof(Aeth),  sizeof(AtomicAckEth), sizeof(ImmDt), sizeof(Ieth), sizeof(CnpReserved),
};

constexpr std::array<std::string_view, kExtCount> kExtName = {
    "RDETH", "DETH", "XRCETH", "RETH", "AtomicETH", "AETH", "AtomicAckETH", "ImmDt", "IETH", "CNP",
};

constexpr std::uint16_t ext_bit(Ext e) { return static_cast<std::uint16_t>(1u << static_cast<unsigned>(e)); }

// An offset of kAbsent means the header is not carried by the opcode.
constexpr std::uint8_t kAbsent = 0xFF;

struct OpcodeInfo {
    bool valid = false;      // an opcode the IBA defines
    bool supported = false;  // uroce processes it (RC, UC, UD, XRC, CNP)
    Transport transport = Transport::None;
    Operation operation = Operation::None;
    Segment segment = Segment::None;
    bool is_request = false;
    bool has_immediate = false;
    bool has_invalidate = false;
    bool payload_allowed = false;
    std::uint16_t ext_mask = 0;
    std::array<std::uint8_t, kExtCount> offset{};  // from the start of the BTH
    std::uint8_t header_length = 0;                // BTH plus extension headers
    std::array<char, 48> name{};                   // e.g. "RC_RDMA_WRITE_FIRST"

    [[nodiscard]] constexpr bool has(Ext e) const { return (ext_mask & ext_bit(e)) != 0; }
    [[nodiscard]] constexpr std::string_view name_view() const { return std::string_view(name.data()); }
};

namespace detail {

// One operation, as the low five opcode bits (IBA 9.2 table 38).
struct OperationRow {
    std::uint8_t code;
    std::string_view name;
    Operation operation;
    Segment segment;
    std::uint16_t ext_mask;
    bool payload;
    bool request;
};

constexpr std::uint16_t kReth = ext_bit(Ext::Reth);
constexpr std::uint16_t kImm = ext_bit(Ext::ImmDt);
constexpr std::uint16_t kAeth = ext_bit(Ext::Aeth);

constexpr std::array<OperationRow, 24> kOperations = {{
    {0x00, "SEND_FIRST", Operation::Send, Segment::First, 0, true, true},
    {0x01, "SEND_MIDDLE", Operation::Send, Segment::Middle, 0, true, true},
    {0x02, "SEND_LAST", Operation::Send, Segment::Last, 0, true, true},
    {0x03, "SEND_LAST_WITH_IMMEDIATE", Operation::Send, Segment::Last, kImm, true, true},
    {0x04, "SEND_ONLY", Operation::Send, Segment::Only, 0, true, true},
    {0x05, "SEND_ONLY_WITH_IMMEDIATE", Operation::Send, Segment::Only, kImm, true, true},
    {0x06, "RDMA_WRITE_FIRST", Operation::RdmaWrite, Segment::First, kReth, true, true},
    {0x07, "RDMA_WRITE_MIDDLE", Operation::RdmaWrite, Segment::Middle, 0, true, true},
    {0x08, "RDMA_WRITE_LAST", Operation::RdmaWrite, Segment::Last, 0, true, true},
    {0x09, "RDMA_WRITE_LAST_WITH_IMMEDIATE", Operation::RdmaWrite, Segment::Last, kImm, true, true},
    {0x0A, "RDMA_WRITE_ONLY", Operation::RdmaWrite, Segment::Only, kReth, true, true},
    {0x0B, "RDMA_WRITE_ONLY_WITH_IMMEDIATE", Operation::RdmaWrite, Segment::Only, kReth | kImm, true, true},
    {0x0C, "RDMA_READ_REQUEST", Operation::RdmaReadRequest, Segment::Only, kReth, false, true},
    {0x0D, "RDMA_READ_RESPONSE_FIRST", Operation::RdmaReadResponse, Segment::First, kAeth, true, false},
    {0x0E, "RDMA_READ_RESPONSE_MIDDLE", Operation::RdmaReadResponse, Segment::Middle, 0, true, false},
    {0x0F, "RDMA_READ_RESPONSE_LAST", Operation::RdmaReadResponse, Segment::Last, kAeth, true, false},
    {0x10, "RDMA_READ_RESPONSE_ONLY", Operation::RdmaReadResponse, Segment::Only, kAeth, true, false},
    {0x11, "ACKNOWLEDGE", Operation::Acknowledge, Segment::Only, kAeth, false, false},
    {0x12, "ATOMIC_ACKNOWLEDGE", Operation::AtomicAcknowledge, Segment::Only, kAeth | ext_bit(Ext::AtomicAckEth),
     false, false},
    {0x13, "COMPARE_SWAP", Operation::CompareSwap, Segment::Only, ext_bit(Ext::AtomicEth), false, true},
    {0x14, "FETCH_ADD", Operation::FetchAdd, Segment::Only, ext_bit(Ext::AtomicEth), false, true},
    {0x15, "RESYNC", Operation::None, Segment::Only, 0, false, true},  // RD only
    {0x16, "SEND_LAST_WITH_INVALIDATE", Operation::Send, Segment::Last, ext_bit(Ext::Ieth), true, true},
    {0x17, "SEND_ONLY_WITH_INVALIDATE", Operation::Send, Segment::Only, ext_bit(Ext::Ieth), true, true},
}};

// Which operations each transport class defines (IBA 9.2 table 38), and
// which extra headers it adds.
struct TransportRule {
    Transport transport;
    std::uint8_t class_bits;
    std::string_view prefix;
    bool supported;
};

constexpr std::array<TransportRule, 5> kTransports = {{
    {Transport::RC, 0x00, "RC_", true},
    {Transport::UC, 0x20, "UC_", true},
    {Transport::RD, 0x40, "RD_", false},
    {Transport::UD, 0x60, "UD_", true},
    {Transport::XRC, 0xA0, "XRC_", true},
}};

constexpr bool transport_defines(Transport t, const OperationRow& op) {
    switch (t) {
        case Transport::RC:
        case Transport::XRC:
            return op.code != 0x15;  // RESYNC exists only for RD
        case Transport::UC:
            // UC: SEND and RDMA WRITE only, no invalidate (IBA 9.2 table 38).
            return op.code <= 0x0B;
        case Transport::RD:
            return op.code <= 0x15;
        case Transport::UD:
            return op.code == 0x04 || op.code == 0x05;
        default:
            return false;
    }
}

constexpr std::uint16_t transport_headers(Transport t, const OperationRow& op) {
    switch (t) {
        case Transport::RD:
            // RD requests carry RDETH and DETH; responses RDETH only.
            return static_cast<std::uint16_t>(ext_bit(Ext::Rdeth) | (op.request ? ext_bit(Ext::Deth) : 0));
        case Transport::UD:
            return ext_bit(Ext::Deth);
        case Transport::XRC:
            return op.request ? ext_bit(Ext::XrcEth) : 0;
        default:
            return 0;
    }
}

constexpr void set_name(OpcodeInfo& info, std::string_view a, std::string_view b) {
    std::size_t n = 0;
    for (char c : a) {
        info.name[n++] = c;
    }
    for (char c : b) {
        info.name[n++] = c;
    }
    info.name[n] = '\0';
}

constexpr void lay_out(OpcodeInfo& info) {
    std::size_t off = sizeof(Bth);
    for (std::size_t e = 0; e < kExtCount; ++e) {
        if (info.ext_mask & (1u << e)) {
            info.offset[e] = static_cast<std::uint8_t>(off);
            off += kExtSize[e];
        } else {
            info.offset[e] = kAbsent;
        }
    }
    info.header_length = static_cast<std::uint8_t>(off);
}

constexpr std::array<OpcodeInfo, 256> make_table() {
    std::array<OpcodeInfo, 256> t{};
    for (std::size_t i = 0; i < t.size(); ++i) {
        lay_out(t[i]);
        set_name(t[i], "UNKNOWN", "");
    }
    for (const auto& tr : kTransports) {
        for (const auto& op : kOperations) {
            if (!transport_defines(tr.transport, op)) {
                continue;
            }
            OpcodeInfo& info = t[tr.class_bits | op.code];
            info.valid = true;
            info.supported = tr.supported;
            info.transport = tr.transport;
            info.operation = op.operation;
            info.segment = op.segment;
            info.is_request = op.request;
            info.payload_allowed = op.payload;
            info.ext_mask = static_cast<std::uint16_t>(op.ext_mask | transport_headers(tr.transport, op));
            info.has_immediate = (info.ext_mask & ext_bit(Ext::ImmDt)) != 0;
            info.has_invalidate = (info.ext_mask & ext_bit(Ext::Ieth)) != 0;
            lay_out(info);
            set_name(info, tr.prefix, op.name);
        }
    }
    // RoCEv2 CNP (IBA A17.9.3): BTH, 16 reserved bytes, ICRC.
    OpcodeInfo& cnp = t[0x81];
    cnp.valid = true;
    cnp.supported = true;
    cnp.transport = Transport::CNP;
    cnp.operation = Operation::Cnp;
    cnp.segment = Segment::Only;
    cnp.ext_mask = ext_bit(Ext::CnpReserved);
    lay_out(cnp);
    set_name(cnp, "CNP", "");
    return t;
}

}  // namespace detail

inline constexpr std::array<OpcodeInfo, 256> kOpcodeTable = detail::make_table();

[[nodiscard]] constexpr const OpcodeInfo& opcode_info(std::uint8_t opcode) { return kOpcodeTable[opcode]; }

// The reverse lookup: what a packet is (transport, operation, segment, with
// immediate or invalidate) to its opcode. The engine picks every opcode it
// sends through here, so no opcode number lives outside this file.
struct OpcodeKey {
    Transport transport = Transport::None;
    Operation operation = Operation::None;
    Segment segment = Segment::None;
    bool immediate = false;
    bool invalidate = false;
};

namespace detail {

constexpr std::size_t kTransportCount = static_cast<std::size_t>(Transport::None) + 1;
constexpr std::size_t kOperationCount = static_cast<std::size_t>(Operation::Cnp) + 1;
constexpr std::size_t kSegmentCount = static_cast<std::size_t>(Segment::Only) + 1;
constexpr std::size_t kKeyCount = kTransportCount * kOperationCount * kSegmentCount * 4;
constexpr std::uint16_t kNoOpcode = 0x100;  // no opcode has this key

constexpr std::size_t key_index(const OpcodeKey& k) {
    std::size_t i = static_cast<std::size_t>(k.transport);
    i = i * kOperationCount + static_cast<std::size_t>(k.operation);
    i = i * kSegmentCount + static_cast<std::size_t>(k.segment);
    return i * 4 + (k.immediate ? 2u : 0u) + (k.invalidate ? 1u : 0u);
}

constexpr std::array<std::uint16_t, kKeyCount> make_reverse_table() {
    std::array<std::uint16_t, kKeyCount> r{};
    r.fill(kNoOpcode);
    for (std::size_t op = 0; op < kOpcodeTable.size(); ++op) {
        const OpcodeInfo& info = kOpcodeTable[op];
        if (info.valid) {
            r[key_index({info.transport, info.operation, info.segment, info.has_immediate, info.has_invalidate})] =
                static_cast<std::uint16_t>(op);
        }
    }
    return r;
}

inline constexpr std::array<std::uint16_t, kKeyCount> kOpcodeByKey = make_reverse_table();

}  // namespace detail

// The opcode the IBA defines for `key`; nullopt when there is none (UC READ,
// UD WRITE, a SEND FIRST with immediate, ...).
[[nodiscard]] constexpr std::optional<std::uint8_t> find_opcode(const OpcodeKey& key) {
    const std::uint16_t op = detail::kOpcodeByKey[detail::key_index(key)];
    if (op == detail::kNoOpcode) {
        return std::nullopt;
    }
    return static_cast<std::uint8_t>(op);
}

// The same at compile time, for a key known to exist: a key without an
// opcode does not compile.
[[nodiscard]] consteval std::uint8_t opcode_of(const OpcodeKey& key) { return find_opcode(key).value(); }

// Opcode numbers the engine names directly (IBA 9.2 table 38).
namespace opcode {
constexpr std::uint8_t kRcSendFirst = 0x00;
constexpr std::uint8_t kRcSendMiddle = 0x01;
constexpr std::uint8_t kRcSendLast = 0x02;
constexpr std::uint8_t kRcSendOnly = 0x04;
constexpr std::uint8_t kRcRdmaWriteFirst = 0x06;
constexpr std::uint8_t kRcRdmaWriteOnly = 0x0A;
constexpr std::uint8_t kRcRdmaReadRequest = 0x0C;
constexpr std::uint8_t kRcRdmaReadResponseFirst = 0x0D;
constexpr std::uint8_t kRcRdmaReadResponseOnly = 0x10;
constexpr std::uint8_t kRcAcknowledge = 0x11;
constexpr std::uint8_t kRcAtomicAcknowledge = 0x12;
constexpr std::uint8_t kRcCompareSwap = 0x13;
constexpr std::uint8_t kRcFetchAdd = 0x14;
constexpr std::uint8_t kUcSendOnly = 0x24;
constexpr std::uint8_t kUdSendOnly = 0x64;
constexpr std::uint8_t kUdSendOnlyWithImmediate = 0x65;
constexpr std::uint8_t kCnp = 0x81;
}  // namespace opcode

// A few checks of the generated table against IBA table 38.
static_assert(opcode_info(opcode::kRcRdmaWriteFirst).header_length == 12 + 16);
static_assert(opcode_info(0x0B).offset[static_cast<std::size_t>(Ext::ImmDt)] == 12 + 16);
static_assert(opcode_info(opcode::kRcAtomicAcknowledge).header_length == 12 + 4 + 8);
static_assert(opcode_info(opcode::kUdSendOnlyWithImmediate).header_length == 12 + 8 + 4);
static_assert(opcode_info(opcode::kRcCompareSwap).header_length == 12 + 28);
static_assert(!opcode_info(0x2C).valid);   // UC has no RDMA READ
static_assert(!opcode_info(0x15).valid);   // RESYNC is RD-only
static_assert(opcode_info(0x55).valid && !opcode_info(0x55).supported);
static_assert(!opcode_info(0x40).supported && opcode_info(0x40).valid);  // RD
static_assert(opcode_info(opcode::kCnp).header_length == 12 + 16);
// XRC (IBA 9.2 table 38): XRCETH right after the BTH on requests, none on responses.
static_assert(opcode_info(0xA4).supported && opcode_info(0xA4).header_length == 12 + 4);
static_assert(opcode_info(0xA6).header_length == 12 + 4 + 16);  // RDMA WRITE ONLY: XRCETH, RETH
static_assert(opcode_info(0xB1).header_length == 12 + 4);       // ACKNOWLEDGE: AETH

// The reverse lookup finds the numbers of IBA table 38.
static_assert(opcode_of({Transport::RC, Operation::Acknowledge, Segment::Only}) == opcode::kRcAcknowledge);
static_assert(opcode_of({Transport::RC, Operation::Send, Segment::Only, false, true}) == 0x17);
static_assert(opcode_of({Transport::UC, Operation::RdmaWrite, Segment::Last, true}) == 0x29);
static_assert(opcode_of({Transport::UD, Operation::Send, Segment::Only, true}) == opcode::kUdSendOnlyWithImmediate);
static_assert(opcode_of({Transport::CNP, Operation::Cnp, Segment::Only}) == opcode::kCnp);
static_assert(!find_opcode({Transport::UC, Operation::RdmaReadRequest, Segment::Only}).has_value());
static_assert(!find_opcode({Transport::RC, Operation::Send, Segment::First, true}).has_value());

}  // namespace uroce::wire
