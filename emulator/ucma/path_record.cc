#include "ucma/path_record.h"

#include <cstring>

namespace uroce::ucma {

namespace {

// Byte offsets in the record (IBA 15.2.5.16, table 209).
constexpr std::size_t kDgid = 8;
constexpr std::size_t kSgid = 24;
constexpr std::size_t kFlowHop = 44;   // RawTraffic:1 reserved:3 FlowLabel:20 HopLimit:8
constexpr std::size_t kTClass = 48;
constexpr std::size_t kReversible = 49;  // Reversible:1 NumbPath:7
constexpr std::size_t kPkey = 50;
constexpr std::size_t kQosSl = 52;     // QoSClass:12 SL:4
constexpr std::size_t kMtu = 54;       // MTUSelector:2 MTU:6
constexpr std::size_t kRate = 55;      // RateSelector:2 Rate:6
constexpr std::size_t kLifetime = 56;  // PacketLifeTimeSelector:2 PacketLifeTime:6
constexpr std::uint8_t kSelectorExactly = 2;  // IB_SA_EQ
constexpr std::uint16_t kRocePkey = 0xFFFF;

std::uint32_t load_be32(const std::uint8_t* p) {
    return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

void store_be32(std::uint8_t* p, std::uint32_t v) {
    p[0] = static_cast<std::uint8_t>(v >> 24);
    p[1] = static_cast<std::uint8_t>(v >> 16);
    p[2] = static_cast<std::uint8_t>(v >> 8);
    p[3] = static_cast<std::uint8_t>(v);
}

std::uint8_t with_selector(std::uint8_t value) {
    return static_cast<std::uint8_t>((kSelectorExactly << 6) | (value & 0x3F));
}

}  // namespace

PackedPathRecord pack_path_record(const PathInfo& path) {
    PackedPathRecord r{};
    std::memcpy(&r[kDgid], path.dgid.data(), 16);
    std::memcpy(&r[kSgid], path.sgid.data(), 16);
    store_be32(&r[kFlowHop], ((path.flow_label & 0xFFFFF) << 8) | path.hop_limit);
    r[kTClass] = path.traffic_class;
    r[kReversible] = 0x80;
    r[kPkey] = static_cast<std::uint8_t>(kRocePkey >> 8);
    r[kPkey + 1] = static_cast<std::uint8_t>(kRocePkey);
    r[kQosSl + 1] = static_cast<std::uint8_t>(path.sl & 0x0F);
    r[kMtu] = with_selector(path.mtu);
    r[kRate] = with_selector(0);  // IB_RATE_PORT_CURRENT
    r[kLifetime] = with_selector(path.packet_life_time);
    return r;
}

PathInfo unpack_path_record(std::span<const std::uint8_t, kPathRecordBytes> record) {
    PathInfo p;
    std::memcpy(p.dgid.data(), &record[kDgid], 16);
    std::memcpy(p.sgid.data(), &record[kSgid], 16);
    const std::uint32_t flow_hop = load_be32(&record[kFlowHop]);
    p.flow_label = (flow_hop >> 8) & 0xFFFFF;
    p.hop_limit = static_cast<std::uint8_t>(flow_hop);
    p.traffic_class = record[kTClass];
    p.sl = static_cast<std::uint8_t>(record[kQosSl + 1] & 0x0F);
    p.mtu = static_cast<std::uint8_t>(record[kMtu] & 0x3F);
    p.packet_life_time = static_cast<std::uint8_t>(record[kLifetime] & 0x3F);
    return p;
}

std::optional<PathInfo> primary_path_of(std::span<const std::uint8_t> records) {
    if (records.empty() || records.size() % kPathDataBytes != 0) {
        return std::nullopt;
    }
    for (std::size_t at = 0; at < records.size(); at += kPathDataBytes) {
        std::uint32_t flags = 0;
        std::memcpy(&flags, &records[at], sizeof(flags));  // host order, as the kernel reads it
        if (flags == kPrimaryPathFlags) {
            return unpack_path_record(records.subspan(at + 8).first<kPathRecordBytes>());
        }
    }
    return std::nullopt;
}

}  // namespace uroce::ucma
