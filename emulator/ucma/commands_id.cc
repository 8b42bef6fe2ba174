// ucma commands that make, name, place and query ids (ucma.c: ucma_create_id,
// ucma_destroy_id, ucma_bind*, ucma_resolve_*, ucma_query*, ucma_set_option,
// ucma_migrate_id), with the kernel's errno for each refusal.
#include <cerrno>
#include <cstring>

#include "ucma/path_record.h"
#include "ucma/ucma_device.h"

namespace uroce::ucma {

namespace {

template <typename T>
T read_body(const std::uint8_t* body) {
    T v;
    std::memcpy(&v, body, sizeof(T));
    return v;
}

template <typename T>
void answer(CommandResult& r, const T& resp, std::uint16_t out) {
    r.length = std::min<std::size_t>(sizeof(T), out);
    std::memcpy(r.bytes.data(), &resp, r.length);
}

// ucma_get_qp_type: the QP type each port space implies.
bool qp_type_for(std::uint16_t ps, std::uint8_t asked, std::uint8_t& qp_type) {
    constexpr std::uint8_t kRc = 2;  // IB_QPT_RC
    constexpr std::uint8_t kUd = 4;  // IB_QPT_UD
    switch (ps) {
        case RDMA_PS_TCP: qp_type = kRc; return true;
        case RDMA_PS_UDP:
        case RDMA_PS_IPOIB: qp_type = kUd; return true;
        case RDMA_PS_IB: qp_type = asked; return true;
        default: return false;
    }
}

}  // namespace

int UcmaDevice::create_id(ChannelId ch, const std::uint8_t* body, std::uint16_t out, CommandResult& r) {
    const auto cmd = read_body<rdma_ucm_create_id>(body);
    if (out < sizeof(rdma_ucm_create_id_resp)) {
        return ENOSPC;
    }
    std::uint8_t qp_type = 0;
    if (!qp_type_for(cmd.ps, cmd.qp_type, qp_type)) {
        return EINVAL;
    }
    const CmId& id = add_id(ch, cmd.uid, cmd.ps, qp_type);
    rdma_ucm_create_id_resp resp{};
    resp.id = id.handle;
    answer(r, resp, out);
    return 0;
}

int UcmaDevice::destroy_id(ChannelId ch, const std::uint8_t* body, std::uint16_t out, CommandResult& r) {
    const auto cmd = read_body<rdma_ucm_destroy_id>(body);
    if (out < sizeof(rdma_ucm_destroy_id_resp)) {
        return ENOSPC;
    }
    int err = 0;
    CmId* id = find(ch, cmd.id, err);
    if (id == nullptr) {
        return err;
    }
    rdma_ucm_destroy_id_resp resp{};
    resp.events_reported = id->events_reported;
    remove_id(cmd.id);
    answer(r, resp, out);
    return 0;
}

int UcmaDevice::bind_ip(ChannelId ch, const std::uint8_t* body) {
    const auto cmd = read_body<rdma_ucm_bind_ip>(body);
    int err = 0;
    CmId* id = find(ch, cmd.id, err);
    if (id == nullptr) {
        return err;
    }
    // ucma_bind_ip: an address that does not fit sockaddr_in6 (AF_IB) or
    // an unknown family has no size: EINVAL.
    const auto e = read_sockaddr(&cmd.addr, sizeof(cmd.addr));
    return e ? bind_endpoint(*id, *e) : EINVAL;
}

int UcmaDevice::bind(ChannelId ch, const std::uint8_t* body) {
    const auto cmd = read_body<rdma_ucm_bind>(body);
    if (cmd.addr_size > sizeof(cmd.addr)) {
        return EINVAL;
    }
    int err = 0;
    CmId* id = find(ch, cmd.id, err);
    if (id == nullptr) {
        return err;
    }
    const auto e = read_sockaddr(&cmd.addr, cmd.addr_size);
    return e ? bind_endpoint(*id, *e) : EINVAL;
}

int UcmaDevice::resolve_ip(ChannelId ch, const std::uint8_t* body) {
    const auto cmd = read_body<rdma_ucm_resolve_ip>(body);
    int err = 0;
    CmId* id = find(ch, cmd.id, err);
    if (id == nullptr) {
        return err;
    }
    const auto dst = read_sockaddr(&cmd.dst_addr, sizeof(cmd.dst_addr));
    if (!dst) {
        return EINVAL;
    }
    return start_resolve(*id, read_sockaddr(&cmd.src_addr, sizeof(cmd.src_addr)), *dst, cmd.timeout_ms);
}

int UcmaDevice::resolve_addr(ChannelId ch, const std::uint8_t* body) {
    const auto cmd = read_body<rdma_ucm_resolve_addr>(body);
    if (cmd.reserved != 0 || cmd.dst_size == 0 || cmd.src_size > sizeof(cmd.src_addr) ||
        cmd.dst_size > sizeof(cmd.dst_addr)) {
        return EINVAL;
    }
    int err = 0;
    CmId* id = find(ch, cmd.id, err);
    if (id == nullptr) {
        return err;
    }
    const auto dst = read_sockaddr(&cmd.dst_addr, cmd.dst_size);
    if (!dst) {
        return EINVAL;
    }
    std::optional<Endpoint> src;
    if (cmd.src_size != 0) {
        src = read_sockaddr(&cmd.src_addr, cmd.src_size);
    }
    return start_resolve(*id, src, *dst, cmd.timeout_ms);
}

int UcmaDevice::resolve_route(ChannelId ch, const std::uint8_t* body) {
    const auto cmd = read_body<rdma_ucm_resolve_route>(body);
    int err = 0;
    CmId* id = find(ch, cmd.id, err);
    if (id == nullptr) {
        return err;
    }
    if (id->state != IdState::AddrResolved) {
        return EINVAL;
    }
    if (id->source.family == Family::Ib) {
        return ENODEV;  // cma_resolve_iboe_route: an AF_IB id has no bound netdev
    }
    id->state = IdState::RouteResolved;
    queue_event(*id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, id->handle);
    return 0;
}

int UcmaDevice::query_route(ChannelId ch, const std::uint8_t* body, std::uint16_t out, CommandResult& r) {
    const auto cmd = read_body<rdma_ucm_query>(body);
    if (out < offsetof(rdma_ucm_query_route_resp, ibdev_index)) {
        return ENOSPC;
    }
    int err = 0;
    CmId* id = find(ch, cmd.id, err);
    if (id == nullptr) {
        return err;
    }
    rdma_ucm_query_route_resp resp{};
    write_sockaddr(id->source, &resp.src_addr, sizeof(resp.src_addr));
    write_sockaddr(id->destination, &resp.dst_addr, sizeof(resp.dst_addr));
    if (id->bound_to_device) {
        // Big-endian, as the kernel's node_guid and ibv_get_device_guid.
        resp.node_guid = htobe64(device_.node_guid);
        resp.port_num = 1;
        resp.ibdev_index = 0;
        const bool resolved = id->state >= IdState::RouteResolved && id->state != IdState::Listen;
        resp.num_paths = resolved ? 1 : 0;
        fill_route(*id, resp.ib_route[0], resolved);
    }
    answer(r, resp, out);
    return 0;
}

int UcmaDevice::query(ChannelId ch, const std::uint8_t* body, std::uint16_t out, CommandResult& r) {
    const auto cmd = read_body<rdma_ucm_query>(body);
    int err = 0;
    CmId* id = find(ch, cmd.id, err);
    if (id == nullptr) {
        return err;
    }
    switch (cmd.option) {
        case RDMA_USER_CM_QUERY_ADDR: break;
        case RDMA_USER_CM_QUERY_GID: return query_gid(*id, out, r);
        case RDMA_USER_CM_QUERY_PATH: return query_path(*id, out, r);
        default: return ENOSYS;
    }
    if (out < sizeof(rdma_ucm_query_addr_resp)) {
        return ENOSPC;
    }
    rdma_ucm_query_addr_resp resp{};
    resp.src_size = static_cast<std::uint16_t>(write_sockaddr(id->source, &resp.src_addr, sizeof(resp.src_addr)));
    resp.dst_size =
        static_cast<std::uint16_t>(write_sockaddr(id->destination, &resp.dst_addr, sizeof(resp.dst_addr)));
    fill_device_addr(*id, resp);
    answer(r, resp, out);
    return 0;
}

int UcmaDevice::set_option(ChannelId ch, const std::uint8_t* body, std::span<const std::uint8_t> option) {
    const auto cmd = read_body<rdma_ucm_set_option>(body);
    int err = 0;
    CmId* id = find(ch, cmd.id, err);
    if (id == nullptr) {
        return err;
    }
    if (cmd.level == RDMA_OPTION_IB) {
        return cmd.optname == RDMA_OPTION_IB_PATH ? set_ib_path(*id, option) : ENOSYS;
    }
    if (option.size() < cmd.optlen) {
        return EINVAL;  // larger than any ID-level option: the value did not travel whole
    }
    auto int_value = [&] {
        int v = 0;
        std::memcpy(&v, option.data(), sizeof(v));
        return v;
    };
    if (cmd.level != RDMA_OPTION_ID) {
        return ENOSYS;
    }
    switch (cmd.optname) {
        case RDMA_OPTION_ID_TOS:
            if (cmd.optlen != 1) {
                return EINVAL;
            }
            id->options.tos = option[0];
            return 0;
        case RDMA_OPTION_ID_REUSEADDR:
            if (cmd.optlen != sizeof(int)) {
                return EINVAL;
            }
            if (id->state != IdState::Idle && !(int_value() == 0 && id->state == IdState::Listen)) {
                return EINVAL;  // cma.c rdma_set_reuseaddr: before binding only
            }
            id->options.reuse_address = int_value() != 0;
            return 0;
        case RDMA_OPTION_ID_AFONLY:
            if (cmd.optlen != sizeof(int)) {
                return EINVAL;
            }
            if (id->state != IdState::Idle && id->state != IdState::AddrBound) {
                return EINVAL;
            }
            id->options.ipv6_only = int_value() != 0;
            return 0;
        case RDMA_OPTION_ID_ACK_TIMEOUT:
            if (cmd.optlen != 1) {
                return EINVAL;
            }
            id->options.ack_timeout = option[0];
            return 0;
        default:
            return ENOSYS;
    }
}

int UcmaDevice::set_ib_path(CmId& id, std::span<const std::uint8_t> records) {
    // ucma.c ucma_set_ib_path + cma.c rdma_set_ib_path. The preload sends
    // only the record the kernel would take (the first GMP | PRIMARY |
    // BIDIRECTIONAL one), nothing when the value has none or is not made of
    // whole 72-byte entries: EINVAL, as for an id without a device or not
    // in ADDR_RESOLVED.
    const auto path = primary_path_of(records);
    if (!path || !id.bound_to_device || id.state != IdState::AddrResolved) {
        return EINVAL;
    }
    if (id.source.family == Family::Ib) {
        return ENODEV;  // cma_iboe_set_path_rec_l2_fields: no bound netdev
    }
    id.given_path = *path;
    id.state = IdState::RouteResolved;
    // The event is queued at once (ucma_set_ib_path calls ucma_event_handler).
    queue_event(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, id.handle);
    return 0;
}

int UcmaDevice::migrate_id(ChannelId ch, const std::uint8_t* body, std::uint16_t out, CommandResult& r) {
    const auto cmd = read_body<rdma_ucm_migrate_id>(body);
    const ChannelId old_channel = cmd.fd;  // the preload put the old channel's id here
    const auto old = channels_.find(old_channel);
    const auto now = channels_.find(ch);
    if (old == channels_.end() || now == channels_.end() || old->second.owner != now->second.owner) {
        return EINVAL;
    }
    int err = 0;
    CmId* id = find(old_channel, cmd.id, err);
    if (id == nullptr) {
        return err;
    }
    if (old_channel != ch) {
        // The id and the events it counts move to the new channel, in order.
        auto& from = old->second.events;
        for (auto it = from.begin(); it != from.end();) {
            if (it->counted_on == id->handle) {
                if (CmId* passive = find_any(it->subject); passive != nullptr && it->subject != id->handle) {
                    passive->channel = ch;  // an undelivered CONNECT_REQUEST's id goes along
                }
                now->second.events.push_back(*it);
                ring(now->second);
                it = from.erase(it);
            } else {
                ++it;
            }
        }
        id->channel = ch;
    }
    rdma_ucm_migrate_resp resp{};
    resp.events_reported = id->events_reported;
    answer(r, resp, out);
    return 0;
}

}  // namespace uroce::ucma
