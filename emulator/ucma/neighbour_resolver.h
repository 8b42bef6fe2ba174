// The seam between rdma_cm address resolution (RESOLVE_IP, RESOLVE_ADDR) and
// whatever knows the link-layer addresses of the port's peers: the daemon's
// neighbour table (net/neighbours.h). Linux's ib_addr asks the IP
// neighbour table the same question before it reports ADDR_RESOLVED
// (drivers/infiniband/core/addr.c addr_resolve_neigh, dst_fetch_ha).
// docs/rdmacm-device.md, "Address resolution".
#pragma once

#include <chrono>
#include <cstdint>

#include "wire/headers.h"

namespace uroce::ucma {

// Whether a destination's link-layer address is known.
enum class NeighbourState : std::uint8_t {
    Known,      // known, or none is needed (our own address, multicast, a port without a wire)
    Resolving,  // not yet: a request (ARP, IPv6 NS) is out
};

class NeighbourResolver {
public:
    virtual ~NeighbourResolver() = default;
    // The state of `destination`; when it is not known, a request goes out
    // from `source` unless one is out already (addr.c dst_fetch_ha:
    // neigh_event_send on an entry that is not NUD_VALID).
    virtual NeighbourState resolve(const wire::Gid& source, const wire::Gid& destination,
                                   std::chrono::steady_clock::time_point now) = 0;
    // The same, sending nothing.
    [[nodiscard]] virtual NeighbourState state_of(const wire::Gid& destination) const = 0;
};

}  // namespace uroce::ucma
