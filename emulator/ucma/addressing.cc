// Addresses, ports and routes of rdma_cm ids (cma.c: rdma_bind_addr,
// cma_get_port, rdma_resolve_addr, cma_resolve_iboe_route), answered from
// the device's own GID table: a uroce device is its own netdev.
#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "ucma/ucma_device.h"

namespace uroce::ucma {

namespace {

// Linux's default net.ipv4.ip_local_port_range.
constexpr std::uint16_t kEphemeralFirst = 32768;
constexpr std::uint16_t kEphemeralLast = 60999;
// cma.c: packet lifetime of a RoCE path (4.096 us * 2^18 ~ 1 s).
constexpr std::uint8_t kPacketLifeTime = 18;
constexpr std::uint8_t kHopLimit = 64;
// ib_user_path_rec selectors: 2 = "exactly this value" (IBA 15.2.5.16).
constexpr std::uint8_t kSelectorExactly = 2;

Family family_of(const wire::Gid& g) { return wire::is_ipv4_mapped(g) ? Family::Ipv4 : Family::Ipv6; }

bool overlaps(const Endpoint& a, const Endpoint& b) {
    return a.is_any() || b.is_any() || a.ip == b.ip;
}

}  // namespace

bool UcmaDevice::is_own_address(const Endpoint& e) const {
    if (e.family != Family::Ipv4 && e.family != Family::Ipv6) {
        return false;
    }
    return gid_index(e.ip) >= 0;
}

std::optional<Endpoint> UcmaDevice::own_address(Family f) const {
    for (const auto& entry : device_.gids) {
        if (entry.type != device::GidType::RoceV2 || entry.gid == wire::Gid{} || family_of(entry.gid) != f) {
            continue;
        }
        Endpoint e;
        e.family = f;
        e.ip = entry.gid;
        if (e.is_link_local()) {
            continue;  // a link-local address needs a scope; prefer a global one
        }
        return e;
    }
    return std::nullopt;
}

int UcmaDevice::gid_index(const wire::Gid& gid) const {
    for (std::size_t i = 0; i < device_.gids.size(); ++i) {
        if (device_.gids[i].type == device::GidType::RoceV2 && device_.gids[i].gid == gid && gid != wire::Gid{}) {
            return static_cast<int>(i);
        }
    }
    return -1;
}

int UcmaDevice::take_port(CmId& id, Endpoint& e) {
    auto in_use = [&](std::uint16_t port) {
        for (const auto& [handle, other] : ids_) {
            if (handle == id.handle || other.has_listener || other.port_space != id.port_space ||
                other.source.port != port || other.source.family == Family::Unspecified) {
                continue;
            }
            if (other.state != IdState::Listen && id.options.reuse_address && other.options.reuse_address) {
                continue;
            }
            if (overlaps(other.source, e)) {
                return true;
            }
        }
        return false;
    };
    if (e.port != 0) {
        return in_use(e.port) ? EADDRINUSE : 0;
    }
    static std::mt19937 rng{std::random_device{}()};
    const unsigned span = kEphemeralLast - kEphemeralFirst + 1;
    const auto start = static_cast<unsigned>(rng() % span);
    for (unsigned i = 0; i < span; ++i) {
        const auto port = static_cast<std::uint16_t>(kEphemeralFirst + (start + i) % span);
        if (!in_use(port)) {
            e.port = port;
            return 0;
        }
    }
    return EADDRNOTAVAIL;
}

int UcmaDevice::bind_endpoint(CmId& id, Endpoint e) {
    if (e.family == Family::Ib) {
        return bind_ib(id, e);
    }
    if (e.family != Family::Ipv4 && e.family != Family::Ipv6) {
        return EAFNOSUPPORT;
    }
    if (id.state != IdState::Idle) {
        return EINVAL;
    }
    if (e.is_link_local() && e.scope_id == 0) {
        return EINVAL;  // the scope id names the interface
    }
    if (e.is_loopback()) {
        // The device is this host's RoCE interface: a loopback address
        // stands for its own (cma.c cma_bind_loopback).
        const auto own = own_address(e.family);
        if (!own) {
            return EADDRNOTAVAIL;
        }
        e.ip = own->ip;
    }
    if (!e.is_any() && !is_own_address(e)) {
        return EADDRNOTAVAIL;
    }
    if (const int err = take_port(id, e); err != 0) {
        return err;
    }
    id.source = e;
    id.bound_to_device = !e.is_any();
    id.state = IdState::AddrBound;
    return 0;
}

int UcmaDevice::start_resolve(CmId& id, std::optional<Endpoint> src, Endpoint dst, std::uint32_t timeout_ms) {
    if (dst.family == Family::Ib) {
        // cma.c cma_resolve_ib_addr: the GID is the address, no neighbour.
        return start_resolve_ib(id, src, dst);
    }
    if (dst.family != Family::Ipv4 && dst.family != Family::Ipv6) {
        return EINVAL;
    }
    if (id.state == IdState::Idle) {
        // rdma_resolve_addr binds first: to the given source, else to the
        // wildcard of the destination's family.
        Endpoint any;
        any.family = dst.family;
        if (const int err = bind_endpoint(id, src && src->family != Family::Unspecified ? *src : any); err != 0) {
            return err;
        }
    }
    if (id.state != IdState::AddrBound) {
        return EINVAL;
    }
    if (id.source.family != dst.family) {
        return EINVAL;
    }
    if (dst.is_loopback() || dst.is_any()) {
        const auto own = own_address(dst.family);
        if (own) {
            dst.ip = own->ip;
        }
    }
    id.state = IdState::AddrQuery;
    Endpoint source = id.source;
    if (source.is_any()) {
        // The route's source address: the device has one interface, so its
        // first address of the family (cma.c leaves it to the IP route).
        const auto own = own_address(dst.family);
        if (!own) {
            id.state = IdState::AddrBound;
            queue_event(id, RDMA_CM_EVENT_ADDR_ERROR, -EADDRNOTAVAIL, id.handle);
            return 0;
        }
        source.ip = own->ip;
    }
    id.destination = dst;
    begin_address_query(id, source, std::chrono::milliseconds(timeout_ms));
    return 0;
}

PathInfo UcmaDevice::path_for(const CmId& id) const {
    if (id.given_path) {
        return *id.given_path;  // SET_OPTION IB_PATH: the program's record as it is
    }
    PathInfo p;
    p.sgid = id.source.ip;
    p.dgid = id.destination.ip;
    // RoCE v2 flow label from the ports (docs/rdmacm-device.md, "RoCE route").
    p.flow_label = (static_cast<std::uint32_t>(id.source.port) * 31 + id.destination.port) & 0xFFFFF;
    p.hop_limit = kHopLimit;
    p.traffic_class = id.options.tos;
    p.mtu = device_.active_mtu;
    p.packet_life_time = id.options.ack_timeout != 0 ? static_cast<std::uint8_t>(id.options.ack_timeout - 1)
                                                     : kPacketLifeTime;
    return p;
}

bool UcmaDevice::route_resolved(const CmId& id) const {
    return id.bound_to_device && id.state >= IdState::RouteResolved && id.state != IdState::Listen;
}

PathInfo UcmaDevice::route_of(const CmId& id) const { return id.phase != CmPhase::None ? id.conn.path : path_for(id); }

void UcmaDevice::fill_route(const CmId& id, ib_user_path_rec& rec, bool resolved) const {
    rec = ib_user_path_rec{};
    const PathInfo p = route_of(id);
    std::memcpy(rec.sgid, p.sgid.data(), 16);
    std::memcpy(rec.dgid, p.dgid.data(), 16);
    rec.pkey = htons(0xFFFF);
    if (!resolved) {
        return;
    }
    rec.flow_label = htonl(p.flow_label);
    rec.reversible = 1;
    rec.mtu = p.mtu;
    rec.hop_limit = p.hop_limit;
    rec.traffic_class = p.traffic_class;
    rec.numb_path = 1;
    rec.sl = p.sl;
    rec.mtu_selector = kSelectorExactly;
    rec.rate_selector = kSelectorExactly;
    rec.packet_life_time_selector = kSelectorExactly;
    rec.packet_life_time = p.packet_life_time;
}

}  // namespace uroce::ucma
