// The Management Datagram that carries the Communication Manager (IBA vol. 1,
// 13.4.2 for the common MAD header, 12.6 for the CM's class), as Linux sends
// it over RoCE v2: every CM message is one 256-byte MAD with method Send.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace uroce::cm {

// A MAD is always 256 bytes (IBA 13.4.2); its common header takes 24.
constexpr std::size_t kMadSize = 256;
constexpr std::size_t kMadHeaderSize = 24;
using MadBytes = std::array<std::uint8_t, kMadSize>;

constexpr std::uint8_t kMadBaseVersion = 1;   // IBA 13.4.2: BaseVersion 1
constexpr std::uint8_t kCmMgmtClass = 0x07;   // IBA 13.4.4 table 146: Communication Management
constexpr std::uint8_t kCmClassVersion = 2;   // IBA 1.2 CM; Linux accepts only 2
constexpr std::uint8_t kMadMethodSend = 0x03; // every CM message is a Send (IBA 12.6.1)

// CM attribute IDs (IBA 12.6.1 table 101).
enum class AttrId : std::uint16_t {
    ClassPortInfo = 0x0001,
    Req = 0x0010,
    Mra = 0x0011,
    Rej = 0x0012,
    Rep = 0x0013,
    Rtu = 0x0014,
    Dreq = 0x0015,
    Drep = 0x0016,
    SidrReq = 0x0017,
    SidrRep = 0x0018,
    Lap = 0x0019,  // alternate paths: not used on RoCE
    Apr = 0x001A,
};

[[nodiscard]] constexpr std::string_view attr_name(AttrId a) {
    switch (a) {
    case AttrId::ClassPortInfo: return "ClassPortInfo";
    case AttrId::Req: return "REQ";
    case AttrId::Mra: return "MRA";
    case AttrId::Rej: return "REJ";
    case AttrId::Rep: return "REP";
    case AttrId::Rtu: return "RTU";
    case AttrId::Dreq: return "DREQ";
    case AttrId::Drep: return "DREP";
    case AttrId::SidrReq: return "SIDR_REQ";
    case AttrId::SidrRep: return "SIDR_REP";
    case AttrId::Lap: return "LAP";
    case AttrId::Apr: return "APR";
    }
    return "unknown";
}

// The common MAD header (IBA 13.4.2 figure 171), host values.
struct MadHeader {
    std::uint8_t base_version = kMadBaseVersion;
    std::uint8_t mgmt_class = kCmMgmtClass;
    std::uint8_t class_version = kCmClassVersion;
    std::uint8_t method = kMadMethodSend;
    std::uint16_t status = 0;
    std::uint16_t class_specific = 0;
    std::uint64_t tid = 0;
    std::uint16_t attr_id = 0;
    std::uint32_t attr_mod = 0;  // ECE would go here; rdma_rxe has none, so 0

    friend bool operator==(const MadHeader&, const MadHeader&) = default;
};

// Linux's transaction IDs: the MAD agent's high half, the sender's local
// comm ID in the low half (cm.c). Replies reuse the TID they answer.
[[nodiscard]] constexpr std::uint64_t make_tid(std::uint32_t agent_hi, std::uint32_t local_comm_id) {
    return (static_cast<std::uint64_t>(agent_hi) << 32) | local_comm_id;
}

}  // namespace uroce::cm
