// Multicast joins on UD ids (JOIN_IP_MCAST, JOIN_MCAST, LEAVE_MCAST), as
// ucma.c ucma_process_join / ucma_leave_multicast and cma.c
// cma_iboe_join_multicast answer them for RoCE v2: no subnet administrator,
// so MULTICAST_JOIN is queued at once, carrying the group's GID (IPv4
// ::ffff:a.b.c.d), hop limit 64, Q_Key 0x01234567 and QPN 0xFFFFFF. The
// program's librdmacm then attaches the id's QP itself (ibv_attach_mcast).
// A join has its own handle (a table of its own, lowest free number, as the
// kernel's multicast_table) and its own events_reported; its events count
// on the id too.
#include <cerrno>
#include <cstring>

#include "ucma/ucma_device.h"

namespace uroce::ucma {

namespace {

constexpr std::uint8_t kQpTypeUd = 4;                // IB_QPT_UD
constexpr std::uint32_t kMulticastQpn = 0xFFFFFF;    // IBA 10.5.2.2
constexpr std::uint32_t kUdpQkey = 0x01234567;       // RDMA_UDP_QKEY
constexpr std::uint8_t kMulticastHopLimit = 64;      // IPV6_DEFAULT_HOPLIMIT (IPv4 groups on RoCE v2)
// The kernel's ENOTSUPP (include/linux/errno.h; no libc name): IPv6 groups
// on a RoCE v2 port (cma_iboe_join_multicast).
constexpr int kKernelEnotsupp = 524;
// rdma_addr_size: what each family's sockaddr takes.
constexpr std::size_t kSockaddrIn = 16;
constexpr std::size_t kSockaddrIn6 = 28;
constexpr std::size_t kSockaddrIb = 48;

std::size_t sockaddr_size(const Endpoint& e) {
    switch (e.family) {
        case Family::Ipv4:
            return kSockaddrIn;
        case Family::Ipv6:
            return kSockaddrIn6;
        case Family::Ib:
            return kSockaddrIb;
        default:
            return 0;
    }
}

}  // namespace

int UcmaDevice::join_ip_multicast(ChannelId ch, const std::uint8_t* body, std::uint16_t out, CommandResult& r) {
    rdma_ucm_join_ip_mcast cmd{};
    std::memcpy(&cmd, body, sizeof cmd);
    if (out < sizeof(rdma_ucm_create_id_resp)) {
        return ENOSPC;
    }
    // rdma_addr_size_in6: an address that fits the sockaddr_in6 slot (AF_IB does not).
    const auto group = read_sockaddr(&cmd.addr, sizeof cmd.addr);
    if (!group || sockaddr_size(*group) == 0 || sockaddr_size(*group) > sizeof cmd.addr) {
        return EINVAL;
    }
    return join(ch, cmd.id, cmd.uid, *group, r);  // always a full member
}

int UcmaDevice::join_multicast(ChannelId ch, const std::uint8_t* body, std::uint16_t out, CommandResult& r) {
    rdma_ucm_join_mcast cmd{};
    std::memcpy(&cmd, body, sizeof cmd);
    const auto group = read_sockaddr(&cmd.addr, sizeof cmd.addr);
    if (!group || sockaddr_size(*group) == 0) {
        return EINVAL;  // rdma_addr_size_kss
    }
    if (out < sizeof(rdma_ucm_create_id_resp)) {
        return ENOSPC;
    }
    if (cmd.addr_size != sockaddr_size(*group) ||
        (cmd.join_flags != RDMA_MC_JOIN_FLAG_FULLMEMBER && cmd.join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)) {
        return EINVAL;
    }
    // A send-only join differs only in the IGMP membership the kernel
    // reports (not sent here: docs/rdmacm-device.md); librdmacm does not attach.
    return join(ch, cmd.id, cmd.uid, *group, r);
}

int UcmaDevice::join(ChannelId ch, std::uint32_t handle, std::uint64_t uid, const Endpoint& group,
                     CommandResult& r) {
    int err = 0;
    CmId* id = find(ch, handle, err);
    if (id == nullptr) {
        return err;
    }
    // ucma_get_ctx_dev: the id must be on a device; rdma_join_multicast: bound
    // or resolved, UD; cma_iboe_join_multicast: a group address, not 0.
    if (!id->bound_to_device || (id->state != IdState::AddrBound && id->state != IdState::AddrResolved) ||
        id->qp_type != kQpTypeUd || group.family == Family::Ib || group.is_any()) {
        return EINVAL;
    }
    if (group.family == Family::Ipv6) {
        return kKernelEnotsupp;
    }
    Multicast mc;
    mc.handle = allocate_multicast_handle();
    mc.uid = uid;
    mc.id = id->handle;
    mc.group = group;
    multicasts_.emplace(mc.handle, mc);
    queue_multicast_join(*id, mc);
    rdma_ucm_create_id_resp resp{};
    resp.id = mc.handle;
    r.length = sizeof resp;
    std::memcpy(r.bytes.data(), &resp, sizeof resp);
    return 0;
}

int UcmaDevice::leave_multicast(ChannelId ch, const std::uint8_t* body, std::uint16_t out, CommandResult& r) {
    if (out < sizeof(rdma_ucm_destroy_id_resp)) {
        return ENOSPC;
    }
    rdma_ucm_destroy_id cmd{};
    std::memcpy(&cmd, body, sizeof cmd);
    const auto it = multicasts_.find(cmd.id);
    if (it == multicasts_.end()) {
        return ENOENT;
    }
    const CmId* id = find_any(it->second.id);
    if (id == nullptr || id->channel != ch) {
        return EINVAL;
    }
    // ucma_cleanup_mc_events: the join's undelivered events go with it.
    for (auto& [cid, c] : channels_) {
        std::erase_if(c.events, [&](const QueuedEvent& e) { return e.multicast == cmd.id; });
    }
    rdma_ucm_destroy_id_resp resp{};
    resp.events_reported = it->second.events_reported;
    multicasts_.erase(it);
    r.length = sizeof resp;
    std::memcpy(r.bytes.data(), &resp, sizeof resp);
    return 0;
}

void UcmaDevice::queue_multicast_join(const CmId& id, const Multicast& mc) {
    const auto ch = channels_.find(id.channel);
    if (ch == channels_.end()) {
        return;
    }
    QueuedEvent e;
    e.counted_on = id.handle;
    e.subject = id.handle;
    e.multicast = mc.handle;
    e.resp.uid = mc.uid;  // ucma_create_uevent: the join's uid and handle, not the id's
    e.resp.id = mc.handle;
    e.resp.event = RDMA_CM_EVENT_MULTICAST_JOIN;
    rdma_ucm_ud_param& ud = e.resp.param.ud;
    ud.qp_num = kMulticastQpn;
    ud.qkey = kUdpQkey;
    // ib_init_ah_from_mcmember: the group's GID, the source address's GID
    // entry, hop limit 64; flow label, traffic class, SL, rate and LID 0.
    ib_uverbs_ah_attr& ah = ud.ah_attr;
    std::memcpy(ah.grh.dgid, mc.group.ip.data(), sizeof ah.grh.dgid);
    const int index = gid_index(id.source.ip);
    ah.grh.sgid_index = static_cast<std::uint8_t>(index < 0 ? 0 : index);
    ah.grh.hop_limit = kMulticastHopLimit;
    ah.is_global = 1;
    ah.port_num = 1;
    ch->second.events.push_back(e);
    ring(ch->second);
}

std::uint32_t UcmaDevice::allocate_multicast_handle() const {
    std::uint32_t h = 0;
    for (const auto& [handle, mc] : multicasts_) {  // ordered: the first gap is the lowest free
        if (handle != h) {
            break;
        }
        ++h;
    }
    return h;
}

void UcmaDevice::forget_multicasts(std::uint32_t id) {
    std::erase_if(multicasts_, [id](const auto& entry) { return entry.second.id == id; });
}

}  // namespace uroce::ucma
