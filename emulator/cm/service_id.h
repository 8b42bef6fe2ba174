// The service IDs rdma_cm puts in REQ and SIDR_REQ for IP-addressed
// connections (IBA vol. 1, annex A11 "RDMA IP CM Service"; Linux cma.c):
// 0x0000000001 | port space (low byte) | port, i.e. (PS << 16) + port with
// the port spaces below (0x01xx), e.g. 0x0000000001061c06 = TCP port 7174.
#pragma once

#include <cstdint>
#include <optional>

namespace uroce::cm {

// rdma_cm port spaces (include/rdma/rdma_cm.h values, as librdmacm passes them).
enum class PortSpace : std::uint16_t {
    Ipoib = 0x0002,
    Ib = 0x013F,
    Tcp = 0x0106,
    Udp = 0x0111,
};

// The fixed part: everything above the port space byte (annex A11.2.1).
constexpr std::uint64_t kIpServiceIdPrefix = 0x0000000001000000ULL;
constexpr std::uint64_t kIpServiceIdPrefixMask = 0xFFFFFFFFFF000000ULL;
// Listeners match (PS, port): the low 32 bits are all significant.
constexpr std::uint64_t kServiceIdFullMask = ~std::uint64_t{0};

[[nodiscard]] constexpr std::uint64_t ip_service_id(PortSpace ps, std::uint16_t port) {
    return (static_cast<std::uint64_t>(ps) << 16) + port;
}

struct IpService {
    PortSpace port_space;
    std::uint16_t port;
};

// The port space and port of an rdma_cm IP service ID; nullopt for any
// other service ID (a native IB service, or an unknown port space).
[[nodiscard]] constexpr std::optional<IpService> parse_ip_service_id(std::uint64_t sid) {
    if ((sid & kIpServiceIdPrefixMask) != kIpServiceIdPrefix) {
        return std::nullopt;
    }
    const auto ps = static_cast<std::uint16_t>((sid >> 16) & 0xFFFF);
    switch (static_cast<PortSpace>(ps)) {
    case PortSpace::Ib:
    case PortSpace::Tcp:
    case PortSpace::Udp: return IpService{static_cast<PortSpace>(ps), static_cast<std::uint16_t>(sid & 0xFFFF)};
    default: return std::nullopt;  // IPoIB (0x0002) has no 0x01 prefix byte
    }
}

}  // namespace uroce::cm
