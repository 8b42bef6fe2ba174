// AF_IB addresses (struct sockaddr_ib: a GID, a P_Key and a service ID
// whose bits 16-31 name the port space) on a RoCE device, as Linux 6.1's
// cma.c takes them: a wildcard bind works (librdmacm's start-up probe, so
// it uses the AF_IB command set), a bind to a specific GID is ENODEV
// (cma_validate_port: an IB address fits no RoCE port), address resolution
// finds the source GID in the device's table (cma_resolve_ib_dev), and route
// resolution is ENODEV (cma_iboe_set_path_rec_l2_fields: an AF_IB id has no
// bound netdev). docs/rdmacm-device.md, "AF_IB".
#include <cerrno>

#include "ucma/ucma_device.h"

namespace uroce::ucma {

namespace {

// rdma/rdma_user_cm.h RDMA_IB_IP_PS_*: the service ID's port-space bits.
constexpr std::uint64_t kIbIpPsMask = 0xFFFFFFFFFFFF0000ULL;
constexpr std::uint64_t kIbIpPsTcp = 0x0000000001060000ULL;
constexpr std::uint64_t kIbIpPsUdp = 0x0000000001110000ULL;
constexpr std::uint64_t kIbIpPsIb = 0x00000000013F0000ULL;
// The P_Key table of a RoCE port holds only the default full-member key;
// ib_find_cached_pkey compares the low 15 bits.
constexpr std::uint16_t kDefaultPkey = 0xFFFF;
constexpr std::uint16_t kPkeyBaseMask = 0x7FFF;

struct IbPortSpace {
    std::uint16_t ps = 0;    // RDMA_PS_*
    std::uint64_t sid = 0;   // RDMA_IB_IP_PS_*
};

// cma.c cma_select_ib_ps: the port space the service ID names, as far as
// its mask shows it, and that the id's own port space allows.
std::optional<IbPortSpace> select_ib_port_space(std::uint16_t id_ps, const Endpoint& e) {
    const std::uint64_t mask = e.service_id_mask & kIbIpPsMask;
    const std::uint64_t sid = e.service_id & mask;
    if (id_ps == RDMA_PS_IB && sid == (kIbIpPsIb & mask)) {
        return IbPortSpace{RDMA_PS_IB, kIbIpPsIb};
    }
    if ((id_ps == RDMA_PS_IB || id_ps == RDMA_PS_TCP) && sid == (kIbIpPsTcp & mask)) {
        return IbPortSpace{RDMA_PS_TCP, kIbIpPsTcp};
    }
    if ((id_ps == RDMA_PS_IB || id_ps == RDMA_PS_UDP) && sid == (kIbIpPsUdp & mask)) {
        return IbPortSpace{RDMA_PS_UDP, kIbIpPsUdp};
    }
    return std::nullopt;
}

bool same_subnet_prefix(const wire::Gid& a, const wire::Gid& b) {
    return std::equal(a.begin(), a.begin() + 8, b.begin());
}

}  // namespace

int UcmaDevice::bind_ib(CmId& id, Endpoint e) {
    if (id.state != IdState::Idle) {
        return EINVAL;
    }
    if (!e.is_any() && !e.is_loopback()) {
        return ENODEV;  // cma_acquire_dev_by_src_ip finds no IB port
    }
    const auto space = select_ib_port_space(id.port_space, e);
    if (!space) {
        return EPROTONOSUPPORT;
    }
    if (const int err = take_port(id, e); err != 0) {
        return err;
    }
    // cma.c cma_bind_port: the service ID becomes port space | port, exact.
    e.service_id = space->sid | e.port;
    e.service_id_mask = ~0ULL;
    id.source = e;
    id.destination = Endpoint{};
    id.destination.family = Family::Ib;  // rdma_bind_addr sets the family of both
    id.bound_to_device = false;
    id.state = IdState::AddrBound;
    return 0;
}

std::optional<wire::Gid> UcmaDevice::ib_source_for(const Endpoint& dst) const {
    if ((dst.pkey & kPkeyBaseMask) != (kDefaultPkey & kPkeyBaseMask)) {
        return std::nullopt;
    }
    // The first valid entry that is the destination itself or shares its
    // subnet prefix (the port is active whenever the daemon runs).
    for (const auto& entry : device_.gids) {
        if (entry.gid == wire::Gid{}) {
            continue;  // an unused slot: rdma_query_gid fails on it
        }
        if (entry.gid == dst.ip || same_subnet_prefix(entry.gid, dst.ip)) {
            return entry.gid;
        }
    }
    return std::nullopt;
}

int UcmaDevice::start_resolve_ib(CmId& id, std::optional<Endpoint> src, Endpoint dst) {
    if (id.state == IdState::Idle) {
        // cma_bind_addr: the wildcard with the destination's P_Key.
        Endpoint any;
        any.family = Family::Ib;
        any.pkey = dst.pkey;
        if (const int err = bind_endpoint(id, src && src->family != Family::Unspecified ? *src : any); err != 0) {
            return err;
        }
    }
    if (id.state != IdState::AddrBound || id.source.family != Family::Ib) {
        return EINVAL;
    }
    Endpoint source = id.source;
    if (dst.is_any() || dst.is_loopback()) {
        // cma_resolve_loopback: the device's first port, source ::1.
        source.ip = wire::Gid{};
        source.ip[15] = 1;
    } else {
        const auto sgid = ib_source_for(dst);
        if (!sgid) {
            return ENODEV;  // cma_resolve_ib_dev: no port reaches that GID
        }
        source.ip = *sgid;
    }
    source.pkey = dst.pkey;
    id.source = source;
    id.destination = dst;
    id.bound_to_device = true;
    id.state = IdState::AddrResolved;
    queue_event(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0, id.handle);
    return 0;
}

}  // namespace uroce::ucma
