#include "ucma/id_listing.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>

namespace uroce::ucma {

namespace {

// AF_IB (linux/socket.h): not in every libc's headers.
constexpr std::uint8_t kAfIb = 27;

std::uint8_t family_number(Family f) {
    switch (f) {
        case Family::Ipv4:
            return AF_INET;
        case Family::Ipv6:
            return AF_INET6;
        case Family::Ib:
            return kAfIb;
        case Family::Unspecified:
            break;
    }
    return 0;
}

// The address bytes of `e` as its sockaddr holds them: IPv4 in the first 4
// bytes (the GID form keeps it in the last 4), IPv6 and AF_IB all 16.
void copy_address(const Endpoint& e, std::uint8_t (&out)[16]) {
    std::memset(out, 0, sizeof out);
    if (e.family == Family::Ipv4) {
        std::copy(e.ip.begin() + 12, e.ip.end(), out);
    } else {
        std::copy(e.ip.begin(), e.ip.end(), out);
    }
}

}  // namespace

uroce_cm_id_state kernel_state(const CmId& id) {
    switch (id.state) {
        case IdState::Idle:
            return UROCE_CM_STATE_IDLE;
        case IdState::AddrBound:
            return UROCE_CM_STATE_ADDR_BOUND;
        case IdState::AddrQuery:
            return UROCE_CM_STATE_ADDR_QUERY;
        case IdState::AddrResolved:
            return UROCE_CM_STATE_ADDR_RESOLVED;
        case IdState::RouteQuery:
            return UROCE_CM_STATE_ROUTE_QUERY;
        case IdState::RouteResolved:
            return UROCE_CM_STATE_ROUTE_RESOLVED;
        case IdState::Listen:
            return UROCE_CM_STATE_LISTEN;
        case IdState::Connect:
        case IdState::Connected:
            return UROCE_CM_STATE_CONNECT;
        case IdState::Disconnected:
            return id.disconnect_reported ? UROCE_CM_STATE_DISCONNECT : UROCE_CM_STATE_CONNECT;
    }
    return UROCE_CM_STATE_IDLE;
}

uroce_ctrl_cm_id_entry id_entry(const CmId& id, const ChannelOwner& owner) {
    uroce_ctrl_cm_id_entry e{};
    e.handle = id.handle;
    e.pid = owner.pid;
    e.lqpn = id.conn.local_qpn;
    e.port_space = id.port_space;
    e.qp_type = id.qp_type;
    e.state = static_cast<std::uint8_t>(kernel_state(id));
    e.port = id.bound_to_device ? 1 : 0;  // the device's only port
    e.src_family = family_number(id.source.family);
    e.src_port = id.source.port;
    copy_address(id.source, e.src_addr);
    if (id.destination.family != Family::Unspecified) {
        e.dst_family = family_number(id.destination.family);
        e.dst_port = id.destination.port;
        copy_address(id.destination, e.dst_addr);
    } else {
        e.dst_family = e.src_family;  // the wildcard of the source's family, port 0
    }
    std::memcpy(e.comm, owner.comm.data(), sizeof e.comm);
    return e;
}

uroce_ctrl_cm_list_ids_reply list_ids_page(const std::map<std::uint32_t, CmId>& ids, std::uint32_t first_handle,
                                           const ChannelOwnerLookup& owner_of) {
    uroce_ctrl_cm_list_ids_reply r{};
    for (auto it = ids.lower_bound(first_handle); it != ids.end(); ++it) {
        const std::optional<ChannelOwner> owner = owner_of(it->second.channel);
        if (!owner) {
            continue;
        }
        if (r.count == UROCE_CM_LIST_IDS_PER_REPLY) {
            r.more = 1;
            r.next_handle = it->first;  // one more: the next page starts here
            break;
        }
        r.entries[r.count++] = id_entry(it->second, *owner);
    }
    return r;
}

}  // namespace uroce::ucma
