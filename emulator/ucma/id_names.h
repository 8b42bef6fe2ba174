// The names `rdma resource show cm_id` (iproute2 rdma/res-cmid.c) prints for
// an rdma_cm id's state, port space and QP type, for the values of
// abi/control.h's CM_LIST_IDS entries. Header-only: the uroce CLI uses it
// without the device library.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace uroce::ucma {

// cma.c enum rdma_cm_state, in its order (the numbers netlink carries).
inline constexpr std::array<std::string_view, 11> kCmStateNames = {
    "IDLE",    "ADDR_QUERY", "ADDR_RESOLVED", "ROUTE_QUERY",    "ROUTE_RESOLVED", "CONNECT",
    "DISCONNECT", "ADDR_BOUND", "LISTEN",     "DEVICE_REMOVAL", "DESTROYING",
};

[[nodiscard]] constexpr std::string_view cm_state_name(std::uint8_t state) {
    return state < kCmStateNames.size() ? kCmStateNames[state] : "UNKNOWN";
}

// librdmacm's enum rdma_port_space (rdma_cma.h): the service-ID prefix of
// each port space.
enum class PortSpace : std::uint16_t { Ipoib = 0x0002, Tcp = 0x0106, Ib = 0x013F, Udp = 0x0111 };

// iproute2 prints "IPoIB" for RDMA_PS_IB too; "IB" says which it is.
[[nodiscard]] constexpr std::string_view port_space_name(std::uint16_t ps) {
    switch (static_cast<PortSpace>(ps)) {
        case PortSpace::Tcp:
            return "TCP";
        case PortSpace::Udp:
            return "UDP";
        case PortSpace::Ipoib:
            return "IPoIB";
        case PortSpace::Ib:
            return "IB";
    }
    return "---";
}

// enum ib_qp_type / ibv_qp_type (the same numbers for these), as
// iproute2's qp_types_to_str names them.
[[nodiscard]] constexpr std::string_view qp_type_name(std::uint8_t type) {
    switch (type) {
        case 2:
            return "RC";
        case 3:
            return "UC";
        case 4:
            return "UD";
        case 9:
            return "XRC_INI";
        case 10:
            return "XRC_TGT";
        default:
            return "UNKNOWN";
    }
}

}  // namespace uroce::ucma
