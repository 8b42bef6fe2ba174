#include "control_server.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "abi/fd_passing.h"
#include "client_process.h"
#include "epoll_watch.h"
#include "handlers_explain.h"
#include "handlers_stats.h"
#include "log.h"
#include "messages.h"
#include "mr/relaxed_pool.h"

namespace uroce::daemon {

namespace {

// IBV_EVENT_DEVICE_FATAL (verbs.h enum ibv_event_type).
constexpr std::uint32_t kEventDeviceFatal = 8;
// ibv_port_state / phys_state / link layer values (verbs.h).
constexpr std::uint32_t kPortActive = 4;
constexpr std::uint32_t kPortDown = 1;
constexpr std::uint32_t kPhysLinkUp = 5;
constexpr std::uint32_t kPhysDisabled = 3;
constexpr std::uint8_t kLinkLayerEthernet = 2;
constexpr std::uint32_t kAtomicHca = 1;            // IBV_ATOMIC_HCA
constexpr std::uint32_t kPortIpBasedGids = 1u << 26;  // IBV_PORT_IP_BASED_GIDS
// IBV_DEVICE_RC_RNR_NAK_GEN | SYS_IMAGE_GUID | PORT_ACTIVE_EVENT | MEM_WINDOW | XRC.
constexpr std::uint32_t kDeviceCapFlags = (1u << 12) | (1u << 11) | (1u << 10) | (1u << 17) | (1u << 20);
// ibv_device_attr.vendor_id is the vendor's IEEE OUI (24 bits). 0x75726F is
// "uro" in ASCII; its first octet has the I/G (group) bit set, so it is no
// OUI or CID the IEEE can assign: no vendor's device reports it. rdma_rxe
// uses 0xFFFFFF, siw 0x626D74 (docs/provider.md).
constexpr std::uint32_t kVendorId = 0x75726F;
// File descriptors one request may carry: HELLO's two process files
// (abi/control.h); every other request at most one.
constexpr std::size_t kMaxFdsHello = 2;
constexpr std::size_t kMaxFdsOther = 1;

}  // namespace

ControlServer::ControlServer(std::string socket_path, device::Device& device)
    : path_(std::move(socket_path)),
      device_(device),
      loopback_cm_([this](const wire::Gid& gid) { return is_own_gid(gid); }),
      wire_cm_(device.node_guid()),
      connection_manager_(loopback_cm_, wire_cm_,
                          [this](const wire::Gid& gid) { return port_has_wire_ && !is_own_gid(gid); }),
      ucma_(ucma_view(), connection_manager_) {
    sockaddr_un addr{};
    if (path_.size() >= sizeof(addr.sun_path)) {
        throw std::runtime_error("control socket path too long (max " + std::to_string(sizeof(addr.sun_path) - 1) +
                                 " bytes): " + path_);
    }
    listen_fd_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!listen_fd_.valid()) {
        throw std::runtime_error(fmt::format("socket: {}", std::strerror(errno)));
    }
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
    ::unlink(path_.c_str());
    if (::bind(listen_fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(listen_fd_.get(), 64) != 0) {
        const int err = errno;
        throw std::runtime_error(fmt::format("cannot listen on {}: {}", path_, std::strerror(err)));
    }
    // Any local user may use the device, as with /dev/infiniband/uverbs*;
    // each client is isolated by its connection, not by file permissions.
    ::chmod(path_.c_str(), 0666);
    // The descriptors made so far close themselves when a throw below ends construction.
    epoll_fd_.reset(::epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_fd_.valid()) {
        throw std::runtime_error(fmt::format("epoll_create1: {}", std::strerror(errno)));
    }
    doorbell_fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!doorbell_fd_.valid()) {
        throw std::runtime_error(fmt::format("eventfd: {}", std::strerror(errno)));
    }
    if (!epoll_watch(epoll_fd_.get(), listen_fd_.get(), EPOLLIN, "the control socket")) {
        throw std::runtime_error(fmt::format("cannot watch the control socket: {}", std::strerror(errno)));
    }
}

ControlServer::~ControlServer() {
    shutdown_clients();
    ::unlink(path_.c_str());  // the descriptors close with their members
}

void ControlServer::poll_once(int timeout_ms) {
    epoll_event events[32];
    const int n = ::epoll_wait(epoll_fd_.get(), events, 32, timeout_ms);
    ucma_.flush_doorbells();  // what full channel sockets refused before
    for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == listen_fd_.get()) {
            accept_client();
        } else if (async_backlogged_.contains(fd)) {
            flush_async(fd);
        } else if (pidfd_connection_.count(fd) != 0) {
            on_process_exit(fd);
        } else if (cm_channels_.contains(fd)) {
            close_cm_channel(fd);
        } else if ((events[i].events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)) != 0 && (events[i].events & EPOLLIN) == 0) {
            drop(fd, "", false);
        } else {
            handle(fd);
        }
    }
}

void ControlServer::accept_client() {
    for (;;) {
        UniqueFd socket(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (!socket.valid()) {
            return;
        }
        const int fd = socket.get();
        ucred cred{};
        socklen_t len = sizeof(cred);
        if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
            continue;
        }
        int pipe_fds[2];
        if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
            log_warn("cannot create an async-event pipe: {}", std::strerror(errno));
            continue;
        }
        UniqueFd async_read(pipe_fds[0]);
        Connection c;
        c.socket = std::move(socket);
        // The pid is for the log only: the client's memory is reached
        // through the files its HELLO hands over (client_process.h).
        c.client = device_.open_client(cred.pid);
        c.uid = cred.uid;
        client_uids_[c.client] = cred.uid;
        c.async_events = AsyncEventQueue(pipe_fds[1]);
        if (datapath_ != nullptr) {
            datapath_->on_client(c.client);
        }
        // Without a pidfd, its exit is noticed by check_clients instead.
        if (UniqueFd pidfd = peer_pidfd(fd, cred.pid);
            pidfd.valid() && epoll_watch(epoll_fd_.get(), pidfd.get(), EPOLLIN, "a client's pidfd")) {
            pidfd_connection_[pidfd.get()] = fd;
            c.pidfd = std::move(pidfd);
        }
        // The read end goes to the client with the HELLO reply.
        const std::uint32_t client = c.client;
        connections_[fd] = std::move(c);
        pending_async_read_[fd] = std::move(async_read);
        if (!epoll_watch(epoll_fd_.get(), fd, EPOLLIN | EPOLLRDHUP, "a client socket")) {
            drop(fd, "cannot watch its socket", false);  // never served: let it see EOF now
            continue;
        }
        log_info("client {} connected (pid {}, uid {})", client, cred.pid, cred.uid);
    }
}

void ControlServer::on_process_exit(int pidfd) {
    const int fd = pidfd_connection_[pidfd];
    pidfd_connection_.erase(pidfd);
    epoll_unwatch(epoll_fd_.get(), pidfd, "a client's pidfd");
    auto it = connections_.find(fd);
    if (it == connections_.end()) {
        ::close(pidfd);  // owned by no connection (cannot happen: each is erased with its pidfd)
        return;
    }
    it->second.pidfd.reset();
    // A forked child may hold the socket and have said HELLO itself: then
    // its own address space is the client's, and the client stays.
    if (device_.client_gone(it->second.client)) {
        drop(fd, "its process exited; the connection ends", false);
    }
}

void ControlServer::check_clients(std::chrono::steady_clock::time_point now) {
    if (now < next_client_check_) {
        return;
    }
    next_client_check_ = now + kClientCheckInterval;
    std::vector<int> gone;
    for (const auto& [fd, c] : connections_) {
        if (device_.client_gone(c.client)) {
            gone.push_back(fd);
        }
    }
    for (int fd : gone) {
        drop(fd, "its process exec'ed or exited; the connection ends", false);
    }
}

int ControlServer::take_client_process(std::uint32_t client) {
    ProcessFiles files;
    if (const int err = take_process_files(message_fds_, files); err != 0) {
        return err;
    }
    if (!device_.attach_address_space(client, std::make_shared<mr::ProcessAddressSpace>(std::move(files.maps)))) {
        return EALREADY;  // a second HELLO does not change whose memory it is
    }
    if (datapath_ != nullptr) {
        datapath_->on_client_memory(client, std::move(files.mem));
    }
    return 0;
}

bool ControlServer::is_own_gid(const wire::Gid& gid) const {
    for (const auto& e : device_.gids()) {
        if (e.gid == gid && gid != wire::Gid{}) {
            return true;
        }
    }
    return false;
}

void ControlServer::attach(Datapath& datapath) {
    datapath_ = &datapath;
    mr_registrations_.set_memory([&datapath](std::uint32_t client) { return datapath.client_memory(client); });
    port_has_wire_ = datapath.port_has_wire();
    datapath.attach_cm(wire_cm_);
    ucma_.set_neighbour_resolver(&datapath);  // RESOLVE_ADDR waits for the peer's MAC (addr.c)
    datapath.events().set_uid_of([this](std::uint32_t client) {
        const auto it = client_uids_.find(client);
        return it != client_uids_.end() ? static_cast<std::uint32_t>(it->second) : UROCE_EXPLAIN_UID_UNKNOWN;
    });
    datapath.set_async_sink([this](std::uint32_t client, std::uint64_t cookie, engine::AsyncEvent event) {
        if (client == device::kNoClient) {
            deliver_shared_qp_event(static_cast<std::uint32_t>(cookie), event);
            return;
        }
        for (auto& [fd, c] : connections_) {
            if (c.client == client) {
                AsyncRecord record;
                record.element = cookie;  // the object's user pointer
                record.event_type = static_cast<std::uint32_t>(event);
                deliver_async(c, record);
                return;
            }
        }
    });
}

void ControlServer::deliver_shared_qp_event(std::uint32_t qpn, engine::AsyncEvent event) {
    for (const device::SharedQpHandle& handle : device_.queues().xrc_tgt_handles(qpn)) {
        for (auto& [fd, c] : connections_) {
            if (c.client == handle.owner) {
                AsyncRecord record;
                record.element = handle.cookie;  // this handle's ibv_qp
                record.event_type = static_cast<std::uint32_t>(event);
                deliver_async(c, record);
                break;
            }
        }
    }
}

void ControlServer::deliver_async(Connection& c, const AsyncRecord& record) {
    const std::uint64_t dropped_before = c.async_events.dropped();
    const bool was_backlogged = c.async_events.backlogged();
    switch (c.async_events.push(record)) {
        case Delivery::Written:
            break;
        case Delivery::Queued:
            if (!was_backlogged) {
                // Wake when the client reads: then the backlog moves on.
                if (epoll_watch(epoll_fd_.get(), c.async_events.fd(), EPOLLOUT, "an async-event pipe")) {
                    async_backlogged_[c.async_events.fd()] = fd_of(c);
                }
            }
            break;
        case Delivery::Dropped:
            if (dropped_before == 0) {
                log_warn("client {} does not read its async events: {} are waiting; dropping new ones", c.client,
                         AsyncEventQueue::kMaxBacklog);
            }
            break;
    }
}

void ControlServer::flush_async(int write_fd) {
    const auto it = async_backlogged_.find(write_fd);
    const auto conn = connections_.find(it->second);
    if (conn != connections_.end()) {
        conn->second.async_events.flush();
        if (conn->second.async_events.backlogged()) {
            return;
        }
    }
    epoll_unwatch(epoll_fd_.get(), write_fd, "an async-event pipe");
    async_backlogged_.erase(it);
}

void ControlServer::drop(int fd, const std::string& why, bool client_misbehaved) {
    auto it = connections_.find(fd);
    if (it == connections_.end()) {
        return;
    }
    const std::uint32_t client = it->second.client;
    if (client_misbehaved) {
        device_.count_bad_message();
        log_warn("client {}: {}; closing its connection", client, why);
    } else if (!why.empty()) {
        log_info("client {}: {}", client, why);
    }
    epoll_unwatch(epoll_fd_.get(), fd, "a client socket");
    it->second.socket.reset();  // the client sees the end now
    if (const int afd = it->second.async_events.fd(); async_backlogged_.erase(afd) != 0) {
        epoll_unwatch(epoll_fd_.get(), afd, "an async-event pipe");
    }
    if (it->second.async_events.dropped() != 0) {
        log_warn("client {}: {} async events were dropped", client, it->second.async_events.dropped());
    }
    pending_async_read_.erase(fd);  // closes the read end it never took
    if (const int pidfd = it->second.pidfd.get(); pidfd >= 0) {
        epoll_unwatch(epoll_fd_.get(), pidfd, "a client's pidfd");
        pidfd_connection_.erase(pidfd);
    }
    connections_.erase(it);
    close_cm_channels_of(client);
    if (CaptureTap* tap = datapath_ != nullptr ? datapath_->capture() : nullptr) {
        tap->stop_all_of(client);  // its capture sessions end with it
    }
    mr_registrations_.forget_client(client);  // its MRs' shared references, before its memory goes
    if (datapath_ != nullptr) {
        datapath_->on_client_gone(client);  // before its rings and memory go
    }
    for (const std::uint32_t qpn : device_.queues().close_xrc_tgts_of(client)) {
        forget_qp(qpn);  // the last handles on these XRC target QPs were the client's
    }
    const std::size_t n = device_.close_client(client);
    rings_.remove_owner(client);
    quota_.remove_client(client);
    client_uids_.erase(client);
    for (auto pit = pools_.begin(); pit != pools_.end();) {
        if (pit->second.client == client) {
            pit = pools_.erase(pit);  // unmaps
        } else {
            ++pit;
        }
    }
    log_info("client {} gone; destroyed {} objects", client, n);
}

void ControlServer::handle(int fd) {
    auto it = connections_.find(fd);
    if (it == connections_.end()) {
        return;
    }
    // One byte more than the largest message, so an oversized one shows as
    // truncated instead of passing as a valid prefix.
    alignas(8) std::uint8_t msg[UROCE_CTRL_MAX_MESSAGE + 1];
    alignas(8) std::uint8_t reply[UROCE_CTRL_MAX_MESSAGE];
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    iovec iov{msg, sizeof(msg)};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control;
    mh.msg_controllen = sizeof(control);
    const ssize_t n = ::recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    if (n < 0) {
        if (errno != EAGAIN && errno != EINTR) {
            drop(fd, fmt::format("receive failed: {}", std::strerror(errno)), false);
        }
        return;
    }
    // Take every fd the client sent, so none leaks whatever happens next:
    // an empty datagram (n == 0, read as the end of the connection) may carry
    // fds too.
    std::vector<UniqueFd> fds;  // closed however this returns (before the reply, below)
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (std::size_t i = 0; i < count; ++i) {
                int f;
                std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                fds.emplace_back(f);
            }
        }
    }
    if (n == 0) {
        drop(fd, "", false);
        return;
    }
    const bool hello = static_cast<std::size_t>(n) >= sizeof(uroce_ctrl_hdr) &&
                       read_as<uroce_ctrl_hdr>(msg).op == UROCE_CTRL_HELLO;
    const std::size_t max_fds = hello ? kMaxFdsHello : kMaxFdsOther;
    if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 || fds.size() > max_fds) {
        drop(fd, (mh.msg_flags & MSG_CTRUNC) != 0 || fds.size() > max_fds ? "too many file descriptors"
                                                                            : "message longer than any request");
        return;
    }
    // A client whose process exec'ed or exited since its HELLO speaks for
    // nobody: whoever holds the socket now (a forked child) gets nothing.
    if (device_.client_gone(it->second.client)) {
        drop(fd, "its process exec'ed or exited; the connection ends", false);
        return;
    }
    int reply_fd = -1;
    message_fds_.clear();
    for (const UniqueFd& f : fds) {
        message_fds_.push_back(f.get());
    }
    const auto started = std::chrono::steady_clock::now();
    const std::size_t len = dispatch(it->second, msg, static_cast<std::size_t>(n), reply, reply_fd,
                                     fds.size() == 1 ? fds[0].get() : -1);
    if (const auto took = std::chrono::steady_clock::now() - started;
        took >= slowest_op_.took && static_cast<std::size_t>(n) >= sizeof(uroce_ctrl_hdr)) {
        slowest_op_ = {read_as<uroce_ctrl_hdr>(msg).op, took};  // for the loop's stall watch
    }
    message_fds_.clear();
    fds.clear();  // closed before the reply: a client that sees it finds them closed
    const UniqueFd passed(reply_fd);  // closed after sending
    if (len == 0) {
        return;  // dispatch dropped the connection
    }
    if (abi::send_with_fd(fd, reply, len, passed.get(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        drop(fd, fmt::format("cannot reply: {}", std::strerror(errno)), false);
    }
}

std::size_t ControlServer::dispatch(Connection& c, const std::uint8_t* msg, std::size_t len, std::uint8_t* out,
                                    int& reply_fd, int received_fd) {
    const int fd = fd_of(c);
    if (len < sizeof(uroce_ctrl_hdr)) {
        drop(fd, fmt::format("message of {} bytes is shorter than a header", len));
        return 0;
    }
    const auto h = read_as<uroce_ctrl_hdr>(msg);
    if (h.magic != UROCE_CTRL_MAGIC || h.version != UROCE_CTRL_VERSION) {
        drop(fd, fmt::format("bad magic 0x{:08x} or version {}", h.magic, h.version));
        return 0;
    }
    const ControlOp* entry = find_op(h.op);
    if (entry == nullptr) {
        drop(fd, fmt::format("unknown operation {}", h.op));
        return 0;
    }
    const bool size_ok = entry->rule == SizeRule::Exact ? len == entry->size : len >= entry->size;
    if (h.length != len || !size_ok) {
        drop(fd, fmt::format("operation {} with length field {} in a {}-byte message (expected {}{})", h.op,
                             h.length, len, entry->rule == SizeRule::AtLeast ? "at least " : "", entry->size));
        return 0;
    }
    Request request{c, h, msg, out, reply_fd, received_fd};
    return (this->*entry->handler)(request);
}

std::size_t ControlServer::query_loop_stalls(Connection&, const uroce_ctrl_hdr& h, const std::uint8_t*,
                                             std::uint8_t* out) {
    if (loop_stalls_ == nullptr) {
        return status_only(out, h, ENOTSUP);
    }
    return write_reply(out, h, 0, loop_stalls_reply(*loop_stalls_));
}

std::size_t ControlServer::query_membership(Connection&, const uroce_ctrl_hdr& h, const std::uint8_t*,
                                            std::uint8_t* out) {
    if (datapath_ == nullptr) {
        return status_only(out, h, ENODEV);
    }
    return write_reply(out, h, 0, membership_reply(datapath_->membership().counters()));
}

int ControlServer::fd_of(const Connection& c) const {
    for (const auto& [fd, conn] : connections_) {
        if (&conn == &c) {
            return fd;
        }
    }
    return -1;
}

std::size_t ControlServer::hello(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out,
                                 int& reply_fd) {
    const std::uint32_t owner = c.client;
    const auto req = read_as<uroce_ctrl_hello>(msg);
    if (req.abi_version != UROCE_CTRL_VERSION) {
        return status_only(out, h, EPROTONOSUPPORT);
    }
    if (const int err = take_client_process(owner); err != 0) {
        log_warn("client {}: HELLO without its process files ({}); its memory stays unreachable", owner,
                 std::strerror(err));
        return status_only(out, h, err);
    }
    if (auto p = pending_async_read_.find(fd_of(c)); p != pending_async_read_.end()) {
        reply_fd = p->second.release();  // closed after sending
        pending_async_read_.erase(p);
    }
    uroce_ctrl_hello_reply r{};
    r.client_id = owner;
    return write_reply(out, h, 0, r);
}

std::size_t ControlServer::query_device(Connection& /*c*/, const uroce_ctrl_hdr& h, const std::uint8_t* /*msg*/,
                                        std::uint8_t* out) {
    const auto& lim = device_.mrs().limits();
    uroce_ctrl_device_attr a{};
    a.node_guid = device_.node_guid();
    a.sys_image_guid = device_.node_guid();
    a.max_mr_size = lim.max_mr_size;
    a.page_size_cap = lim.page_size_cap;
    a.max_mr = lim.max_mr;
    a.max_mw = lim.max_mw;
    a.max_pd = device_.pds().max_pd();
    a.vendor_id = kVendorId;
    a.vendor_part_id = 0;
    a.hw_ver = 1;
    const auto& ql = device_.queues().limits();
    const qp::PortLimits pl = device_.port_limits();
    a.max_qp = ql.max_qp;
    a.max_qp_wr = ql.max_qp_wr;
    a.max_sge = ql.max_sge;
    a.max_sge_rd = ql.max_sge;
    a.max_cq = ql.max_cq;
    a.max_cqe = ql.max_cqe;
    a.max_qp_rd_atom = pl.max_dest_rd_atomic;
    a.max_qp_init_rd_atom = pl.max_rd_atomic;
    a.max_res_rd_atom = ql.max_qp * pl.max_dest_rd_atomic;
    a.max_srq = ql.max_srq;
    a.max_srq_wr = ql.max_srq_wr;
    a.max_srq_sge = ql.max_srq_sge;
    a.max_ah = ql.max_ah;
    a.max_inline_data = ql.max_inline_data;
    a.max_pkeys = pl.pkey_table_len;
    a.atomic_cap = kAtomicHca;  // the daemon serialises every atomic
    a.local_ca_ack_delay = 15;
    a.phys_port_cnt = 1;
    a.device_cap_flags = kDeviceCapFlags;
    std::snprintf(a.fw_ver, sizeof(a.fw_ver), "uroce 0.1.0");
    return write_reply(out, h, 0, a);
}

std::size_t ControlServer::query_port(Connection& /*c*/, const uroce_ctrl_hdr& h, const std::uint8_t* /*msg*/,
                                      std::uint8_t* out) {
    const auto& port = device_.config().port;
    uroce_ctrl_port_attr p{};
    p.state = port.link_up ? kPortActive : kPortDown;
    p.phys_state = port.link_up ? kPhysLinkUp : kPhysDisabled;
    p.max_mtu = static_cast<std::uint32_t>(device::IbMtu::Mtu4096);
    p.active_mtu = static_cast<std::uint32_t>(device_.active_mtu());
    p.gid_tbl_len = device::kGidTableLength;
    p.max_msg_sz = 1u << 31;
    p.link_layer = kLinkLayerEthernet;
    p.active_width = 1;   // 1X
    p.active_speed = 32;  // IBV_SPEED_FDR10 stand-in for 10 Gb/s
    std::memcpy(p.mac, port.mac.data(), 6);
    p.port_cap_flags = kPortIpBasedGids;
    p.pkey_tbl_len = 1;
    p.max_vl_num = 1;
    return write_reply(out, h, 0, p);
}

std::size_t ControlServer::alloc_pd(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* /*msg*/,
                                    std::uint8_t* out) {
    if (const int err = quota_.admit(c.client, Charge{}); err != 0) {
        return status_only(out, h, err);
    }
    const auto a = device_.pds().alloc(c.client);
    if (a.error == 0) {
        quota_.add(ObjectKind::Pd, a.pd, c.client, Charge{});
    }
    uroce_ctrl_handle r{};
    r.handle = a.pd;
    return write_reply(out, h, a.error, r);
}

std::size_t ControlServer::dealloc_pd(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                      std::uint8_t* out) {
    const std::uint32_t pd = read_as<uroce_ctrl_handle>(msg).handle;
    const int err = device_.pds().dealloc(pd, c.client);
    if (err == 0) {
        quota_.remove(ObjectKind::Pd, pd);
    }
    return status_only(out, h, err);
}

std::size_t ControlServer::status(Connection& /*c*/, const uroce_ctrl_hdr& h, const std::uint8_t* /*msg*/,
                                  std::uint8_t* out) {
    const auto counts = device_.mrs().counts();
    const auto& k = device_.counters();
    uroce_ctrl_status_reply s{};
    s.clients = static_cast<std::uint32_t>(device_.client_count());
    s.pds = static_cast<std::uint32_t>(device_.pds().count());
    s.mrs = static_cast<std::uint32_t>(counts.mrs);
    s.mws = static_cast<std::uint32_t>(counts.mws);
    s.relaxed_pools = static_cast<std::uint32_t>(counts.relaxed_pools);
    s.clients_closed = k.clients_closed;
    s.objects_reclaimed = k.objects_reclaimed;
    s.bad_messages = k.bad_messages;
    const auto q = device_.queues().counts();
    s.cqs = static_cast<std::uint32_t>(q.cqs);
    s.qps = static_cast<std::uint32_t>(q.qps);
    s.srqs = static_cast<std::uint32_t>(q.srqs);
    s.ahs = static_cast<std::uint32_t>(q.ahs);
    return write_reply(out, h, 0, s);
}

std::size_t ControlServer::stats(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* /*msg*/,
                                 std::uint8_t* out) {
    return write_reply(out, h, 0, stats_reply(device_, datapath_, visible_to(c)));
}

std::size_t ControlServer::stats_reasons(Connection& /*c*/, const uroce_ctrl_hdr& h, const std::uint8_t* /*msg*/,
                                         std::uint8_t* out) {
    return write_reply(out, h, 0, stats_reasons_reply(datapath_));
}

std::size_t ControlServer::explain_fetch(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                         std::uint8_t* out) {
    if (datapath_ == nullptr) {
        return status_only(out, h, ENODEV);
    }
    const ExplainReader reader{c.uid == 0 || c.uid == ::geteuid(), c.uid};
    return write_reply(out, h, 0,
                       explain_reply(datapath_->events(), read_as<uroce_ctrl_explain_fetch>(msg), reader));
}

std::size_t ControlServer::list_mrs(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                    std::uint8_t* out) {
    return write_reply(out, h, 0,
                       list_mrs_reply(device_, datapath_, read_as<uroce_ctrl_list_mrs>(msg).first_index,
                                      visible_to(c)));
}

OwnerFilter ControlServer::visible_to(const Connection& c) const {
    if (c.uid == 0 || c.uid == ::geteuid()) {
        return [](std::uint32_t) { return true; };  // root and the daemon's owner: the whole device
    }
    return [this, uid = c.uid](std::uint32_t owner) {
        const auto it = client_uids_.find(owner);
        return it != client_uids_.end() && it->second == uid;
    };
}

void ControlServer::poll_pools(std::chrono::steady_clock::time_point now) {
    for (auto& [handle, p] : pools_) {
        p.pool->poll(now);
    }
    ucma_.poll();  // the rdma_cm ids' timers between commands (loopback timewait)
}

void ControlServer::shutdown_clients() {
    AsyncRecord fatal;
    fatal.event_type = kEventDeviceFatal;
    std::vector<int> fds;
    // Hang up first: a client woken by what follows must find the
    // connection closed, which is how its provider knows to flush its work
    // requests (docs/provider.md).
    for (auto& [fd, c] : connections_) {
        ::shutdown(fd, SHUT_RDWR);
    }
    // One event on every completion channel, as a device in fatal error
    // calls every CQ's completion handler: a thread blocked in
    // ibv_get_cq_event wakes, polls and gets its flushed completions.
    for (const auto& cq : rings_.all_cqs()) {
        if (cq->channel_fd >= 0) {
            const std::uint64_t cookie = cq->cookie;
            [[maybe_unused]] const ssize_t w = ::write(cq->channel_fd, &cookie, sizeof cookie);
        }
    }
    for (auto& [fd, c] : connections_) {
        c.async_events.push(fatal);  // never blocks; lost if the client's pipe is full
        fds.push_back(fd);
    }
    for (int fd : fds) {
        drop(fd, "", false);
    }
}

}  // namespace uroce::daemon
