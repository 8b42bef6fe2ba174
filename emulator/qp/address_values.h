// The values of an address vector (struct ibv_ah_attr, for ibv_create_ah and
// the IBV_QP_AV of ibv_modify_qp) as a kernel RDMA device takes them. The
// uverbs layer passes the fields through unchecked and the device uses the
// width the wire has, so a value wider than its field is masked, not refused
// (UCX, for one, sets grh.flow_label = 0xFFFFFFFF on purpose).
#pragma once

#include <array>
#include <cstdint>

#include "qp_attr.h"

namespace uroce::qp {

// The service level is a 4-bit field (IBA 7.6.5); the kernel passes sl
// through as a u8 and hardware keeps its low bits.
inline constexpr std::uint8_t kSlMask = 0xF;

// The hop limit a unicast RoCE v2 path gets: the kernel resolves it from the
// route (ib_resolve_eth_dmac -> rdma_addr_find_l2_eth_by_grh, the dst's
// ip4_dst_hoplimit / ip6_dst_hoplimit) and overwrites grh.hop_limit with it,
// so rdma_rxe and hardware send the route's value. 64 is Linux's default
// (net.ipv4.ip_default_ttl, net.ipv6.conf.*.hop_limit); uroce has no route
// table of its own, so it uses that default.
inline constexpr std::uint8_t kRouteHopLimit = 64;

// ff00::/8, or an IPv4-mapped 224.0.0.0/4 (RFC 4291 2.7, RFC 5771).
[[nodiscard]] bool is_multicast_gid(const std::array<std::uint8_t, 16>& gid);

// `ah` as the kernel stores it after create_ah / modify_qp: flow_label masked
// to 20 bits, sl to 4, and for a unicast DGID the hop limit of the route;
// a multicast DGID keeps the consumer's hop limit (ib_resolve_eth_dmac
// resolves only unicast paths). Other fields unchanged.
[[nodiscard]] AhAttr as_kernel_takes(AhAttr ah);

}  // namespace uroce::qp
