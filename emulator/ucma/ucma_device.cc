#include "ucma/ucma_device.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace uroce::ucma {

namespace {

// ucma.c rejects command numbers past its table (RDMA_USER_CM_CMD_JOIN_MCAST).
constexpr std::uint32_t kCommandCount = RDMA_USER_CM_CMD_JOIN_MCAST + 1;
// The largest command body (ACCEPT with ECE, 296 bytes) and then some.
constexpr std::size_t kMaxBody = 304;
constexpr std::uint8_t kQpTypeUd = 4;  // IB_QPT_UD

}  // namespace

UcmaDevice::UcmaDevice(DeviceView device, ConnectionManager& cm) : device_(std::move(device)), cm_(cm) {
    cm_.attach(*this);
}

UcmaDevice::~UcmaDevice() {
    for (auto& [id, c] : channels_) {
        if (c.doorbell_fd >= 0) {
            ::close(c.doorbell_fd);
        }
    }
}

ChannelId UcmaDevice::open_channel(uid_t owner, int doorbell_fd) {
    const ChannelId id = next_channel_++;
    Channel c;
    c.owner = owner;
    c.doorbell_fd = doorbell_fd;
    channels_.emplace(id, std::move(c));
    return id;
}

void UcmaDevice::close_channel(ChannelId channel) {
    auto it = channels_.find(channel);
    if (it == channels_.end()) {
        return;
    }
    std::vector<std::uint32_t> mine;
    for (const auto& [handle, id] : ids_) {
        if (id.channel == channel) {
            mine.push_back(handle);
        }
    }
    for (std::uint32_t handle : mine) {
        if (ids_.contains(handle)) {  // a listener's removal may have taken its passive ids
            remove_id(handle);
        }
    }
    it = channels_.find(channel);
    if (it->second.doorbell_fd >= 0) {
        ::close(it->second.doorbell_fd);
    }
    channels_.erase(it);
    poll();
}

bool UcmaDevice::may_use(ChannelId channel, uid_t caller) const {
    const auto it = channels_.find(channel);
    return it != channels_.end() && (caller == 0 || caller == it->second.owner);
}

int UcmaDevice::doorbell_fd(ChannelId channel) const {
    const auto it = channels_.find(channel);
    return it == channels_.end() ? -1 : it->second.doorbell_fd;
}

CommandResult UcmaDevice::execute(ChannelId channel, std::span<const std::uint8_t> command,
                                  std::span<const std::uint8_t> option) {
    CommandResult r;
    rdma_ucm_cmd_hdr hdr{};
    // ucma_write: a header, a known command, `in` inside what was written.
    if (command.size() < sizeof(hdr) || !channels_.contains(channel)) {
        r.error = EINVAL;
        return r;
    }
    std::memcpy(&hdr, command.data(), sizeof(hdr));
    if (hdr.cmd >= kCommandCount || hdr.in + sizeof(hdr) > command.size()) {
        r.error = EINVAL;
        return r;
    }
    // The kernel reads each command's struct from the caller's buffer;
    // bytes the caller did not send read as zero here.
    std::array<std::uint8_t, kMaxBody> body{};
    std::memcpy(body.data(), command.data() + sizeof(hdr), std::min(command.size() - sizeof(hdr), kMaxBody));
    const std::uint8_t* b = body.data();
    switch (hdr.cmd) {
        case RDMA_USER_CM_CMD_CREATE_ID: r.error = create_id(channel, b, hdr.out, r); break;
        case RDMA_USER_CM_CMD_DESTROY_ID: r.error = destroy_id(channel, b, hdr.out, r); break;
        case RDMA_USER_CM_CMD_BIND_IP: r.error = bind_ip(channel, b); break;
        case RDMA_USER_CM_CMD_RESOLVE_IP: r.error = resolve_ip(channel, b); break;
        case RDMA_USER_CM_CMD_RESOLVE_ROUTE: r.error = resolve_route(channel, b); break;
        case RDMA_USER_CM_CMD_QUERY_ROUTE: r.error = query_route(channel, b, hdr.out, r); break;
        case RDMA_USER_CM_CMD_CONNECT: r.error = connect(channel, b, hdr.in); break;
        case RDMA_USER_CM_CMD_LISTEN: r.error = listen(channel, b); break;
        case RDMA_USER_CM_CMD_ACCEPT: r.error = accept(channel, b, hdr.in); break;
        case RDMA_USER_CM_CMD_REJECT: r.error = reject(channel, b); break;
        case RDMA_USER_CM_CMD_DISCONNECT: r.error = disconnect(channel, b); break;
        case RDMA_USER_CM_CMD_INIT_QP_ATTR: r.error = init_qp_attr(channel, b, hdr.out, r); break;
        case RDMA_USER_CM_CMD_SET_OPTION: r.error = set_option(channel, b, option); break;
        case RDMA_USER_CM_CMD_NOTIFY: r.error = notify(channel, b); break;
        case RDMA_USER_CM_CMD_MIGRATE_ID: r.error = migrate_id(channel, b, hdr.out, r); break;
        case RDMA_USER_CM_CMD_QUERY: r.error = query(channel, b, hdr.out, r); break;
        case RDMA_USER_CM_CMD_BIND: r.error = bind(channel, b); break;
        case RDMA_USER_CM_CMD_RESOLVE_ADDR: r.error = resolve_addr(channel, b); break;
        case RDMA_USER_CM_CMD_JOIN_IP_MCAST: r.error = join_ip_multicast(channel, b, hdr.out, r); break;
        case RDMA_USER_CM_CMD_JOIN_MCAST: r.error = join_multicast(channel, b, hdr.out, r); break;
        case RDMA_USER_CM_CMD_LEAVE_MCAST: r.error = leave_multicast(channel, b, hdr.out, r); break;
        case RDMA_USER_CM_CMD_GET_EVENT:
            r.error = EINVAL;  // the preload serves it (CM_GET_EVENT): never forwarded as a command
            break;
        default:
            // GET_OPTION has no handler in ucma.c.
            r.error = ENOSYS;
            break;
    }
    if (r.error != 0) {
        r.length = 0;
    }
    poll();
    return r;
}

int UcmaDevice::next_event(ChannelId channel, rdma_ucm_event_resp& out) {
    auto it = channels_.find(channel);
    if (it == channels_.end() || it->second.events.empty()) {
        return ENOENT;
    }
    QueuedEvent e = it->second.events.front();
    it->second.events.pop_front();
    if (e.resp.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
        // Handed out: the passive id becomes nameable and frees its slot in
        // the listener's backlog (ucma_get_event, ucma_finish_ctx).
        if (CmId* passive = find_any(e.subject)) {
            passive->visible = true;
        }
        if (CmId* listener = find_any(e.counted_on)) {
            ++listener->backlog;
        }
    }
    if (CmId* counted = find_any(e.counted_on)) {
        ++counted->events_reported;
    }
    if (e.multicast) {
        if (const auto mc = multicasts_.find(*e.multicast); mc != multicasts_.end()) {
            ++mc->second.events_reported;  // ucma_get_event: on the id and on the join
        }
    }
    out = e.resp;
    return 0;
}

void UcmaDevice::poll() {
    const auto now = clock_();
    finish_address_queries(now);
    cm_.poll(now);
}

CmId* UcmaDevice::find(ChannelId ch, std::uint32_t handle, int& error) {
    auto it = ids_.find(handle);
    if (it == ids_.end() || !it->second.visible) {
        error = ENOENT;
        return nullptr;
    }
    if (it->second.channel != ch) {
        error = EINVAL;
        return nullptr;
    }
    error = 0;
    return &it->second;
}

CmId* UcmaDevice::find_any(std::uint32_t handle) {
    auto it = ids_.find(handle);
    return it == ids_.end() ? nullptr : &it->second;
}

std::uint32_t UcmaDevice::allocate_handle() const {
    std::uint32_t h = 0;
    for (const auto& [handle, id] : ids_) {  // ordered: the first gap is the lowest free
        if (handle != h) {
            break;
        }
        ++h;
    }
    return h;
}

CmId& UcmaDevice::add_id(ChannelId ch, std::uint64_t uid, std::uint16_t ps, std::uint8_t qp_type) {
    static std::mt19937 rng{std::random_device{}()};
    CmId id;
    id.handle = allocate_handle();
    id.uid = uid;
    id.channel = ch;
    id.port_space = ps;
    id.qp_type = qp_type;
    id.conn.own_psn = rng() & 0xFFFFFF;  // cma.c: a random 24-bit seq_num per id
    return ids_.emplace(id.handle, id).first->second;
}

void UcmaDevice::purge_events(std::uint32_t handle) {
    for (auto& [cid, c] : channels_) {
        std::erase_if(c.events, [handle](const QueuedEvent& e) { return e.counted_on == handle; });
    }
}

void UcmaDevice::remove_id(std::uint32_t handle) {
    auto it = ids_.find(handle);
    if (it == ids_.end()) {
        return;
    }
    CmId& id = it->second;
    // cm.c cm_destroy_id: what the connection's state needs sent.
    switch (id.phase) {
        case CmPhase::ReqSent:
            cm_.send_reject(handle, RejectReason::Timeout, PrivateData{});
            break;
        case CmPhase::ReqReceived:
            if (id.qp_type == kQpTypeUd) {
                SidrReply rep;  // a SIDR_REQ nobody answered: refused
                rep.status = SidrStatus::Rejected;
                cm_.send_sidr_reply(handle, rep);
            } else {
                cm_.send_reject(handle, RejectReason::ConsumerDefined, PrivateData{});
            }
            break;
        case CmPhase::RepSent:
        case CmPhase::RepReceived:
            cm_.send_reject(handle, RejectReason::ConsumerDefined, PrivateData{});
            break;
        case CmPhase::Established:
            cm_.send_disconnect_request(handle);
            break;
        case CmPhase::DreqReceived:
            cm_.send_disconnect_reply(handle);
            break;
        default:
            break;
    }
    if (id.phase != CmPhase::None) {
        cm_.release(handle);
    }
    // A listener takes with it the passive ids whose CONNECT_REQUEST it has
    // not handed out (ucma.c ucma_cleanup_ctx_events).
    std::vector<std::uint32_t> undelivered;
    if (const auto ch = channels_.find(id.channel); ch != channels_.end()) {
        for (const QueuedEvent& e : ch->second.events) {
            if (e.counted_on == handle && e.resp.event == RDMA_CM_EVENT_CONNECT_REQUEST && e.subject != handle) {
                undelivered.push_back(e.subject);
            }
        }
    }
    address_queries_.erase(handle);  // cma.c destroy_id_handler_unlock: rdma_addr_cancel
    purge_events(handle);
    forget_multicasts(handle);
    ids_.erase(it);
    for (std::uint32_t passive : undelivered) {
        remove_id(passive);
    }
}

void UcmaDevice::queue_event(const CmId& id, std::uint32_t event, std::int32_t status, std::uint32_t counted_on) {
    rdma_ucm_event_resp resp{};
    resp.event = event;
    resp.status = static_cast<std::uint32_t>(status);
    queue_event(id, resp, counted_on);
}

void UcmaDevice::queue_event(const CmId& id, const rdma_ucm_event_resp& resp, std::uint32_t counted_on) {
    const bool connect_request = resp.event == RDMA_CM_EVENT_CONNECT_REQUEST;
    if (!connect_request && id.uid == 0 && id.has_listener) {
        return;  // a passive id not accepted yet: ucma_event_handler drops its events
    }
    auto ch = channels_.find(id.channel);
    if (ch == channels_.end()) {
        return;
    }
    QueuedEvent e;
    e.counted_on = counted_on;
    e.subject = id.handle;
    e.resp = resp;
    if (!connect_request) {
        e.resp.uid = id.uid;
        e.resp.id = id.handle;
    }
    ch->second.events.push_back(e);
    ring(ch->second);
}

void UcmaDevice::ring(Channel& c) {
    if (c.doorbell_fd < 0) {
        return;
    }
    // One datagram per event, never blocking the daemon: what a full socket
    // refuses is owed and sent as the program reads (flush_doorbells).
    if (c.owed++ == 0 && !pay(c)) {
        for (auto& [id, ch] : channels_) {
            if (&ch == &c) {
                owing_.push_back(id);
            }
        }
    }
}

bool UcmaDevice::pay(Channel& c) {
    const std::uint8_t bell = 1;
    while (c.owed > 0) {
        if (::send(c.doorbell_fd, &bell, 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1) {
            return false;  // full (or the program has gone: the hang-up will close the channel)
        }
        --c.owed;
    }
    return true;
}

void UcmaDevice::flush_doorbells() {
    std::erase_if(owing_, [this](ChannelId id) {
        const auto it = channels_.find(id);
        return it == channels_.end() || pay(it->second);
    });
}

}  // namespace uroce::ucma
