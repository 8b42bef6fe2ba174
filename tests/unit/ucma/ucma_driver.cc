#include "ucma_driver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

#include "device/gid_table.h"

namespace uroce::ucma::test {

namespace {

DeviceView test_view() {
    DeviceView v;
    v.node_guid = 0x0200'00ff'fe00'0001ull;
    const wire::MacAddr mac{0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
    v.gids = *device::build_gid_table(mac, {*device::parse_ip("192.0.2.1")});
    v.active_mtu = 3;
    return v;
}

sockaddr_in6 sockaddr_of(const std::string& ip, std::uint16_t port) {
    sockaddr_in6 slot{};
    if (ip.find(':') == std::string::npos) {
        sockaddr_in sin{};
        sin.sin_family = AF_INET;
        sin.sin_port = htons(port);
        inet_pton(AF_INET, ip.c_str(), &sin.sin_addr);
        std::memcpy(&slot, &sin, sizeof sin);
    } else {
        slot.sin6_family = AF_INET6;
        slot.sin6_port = htons(port);
        inet_pton(AF_INET6, ip.c_str(), &slot.sin6_addr);
    }
    return slot;
}

}  // namespace

UcmaDriver::UcmaDriver()
    : cm_([](const wire::Gid& gid) {
          const auto v = test_view();
          for (const auto& e : v.gids) {
              if (e.gid == gid) {
                  return true;
              }
          }
          return false;
      }),
      device_(test_view(), cm_) {}

UcmaDriver::~UcmaDriver() {
    for (int fd : fds_) {
        ::close(fd);
    }
}

Channel UcmaDriver::open_channel(uid_t owner) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        throw std::runtime_error("socketpair");
    }
    Channel c;
    c.id = device_.open_channel(owner, sv[1]);
    c.program_fd = sv[0];
    fds_.push_back(sv[0]);
    return c;
}

void UcmaDriver::close_channel(Channel& c) {
    device_.close_channel(c.id);
}

int UcmaDriver::doorbells(const Channel& c) const {
    int n = 0;
    std::uint8_t b;
    // Peek without consuming: count by reading into a dup'ed view is not
    // possible for datagrams, so drain and count (tests call it once).
    while (::recv(c.program_fd, &b, 1, MSG_DONTWAIT) == 1) {
        ++n;
    }
    return n;
}

CommandResult UcmaDriver::raw(const Channel& c, std::vector<std::uint8_t> bytes, std::vector<std::uint8_t> option) {
    return device_.execute(c.id, bytes, option);
}

int UcmaDriver::create_id(const Channel& c, std::uint64_t uid, std::uint16_t ps, std::uint32_t& handle) {
    rdma_ucm_create_id cmd{};
    cmd.uid = uid;
    cmd.ps = ps;
    cmd.qp_type = 2;
    const auto r = command(c, RDMA_USER_CM_CMD_CREATE_ID, cmd, sizeof(rdma_ucm_create_id_resp));
    if (r.error == 0) {
        std::memcpy(&handle, r.bytes.data(), sizeof handle);
    }
    return r.error;
}

int UcmaDriver::destroy_id(const Channel& c, std::uint32_t handle, std::uint32_t& events_reported) {
    rdma_ucm_destroy_id cmd{};
    cmd.id = handle;
    const auto r = command(c, RDMA_USER_CM_CMD_DESTROY_ID, cmd, sizeof(rdma_ucm_destroy_id_resp));
    if (r.error == 0) {
        std::memcpy(&events_reported, r.bytes.data(), sizeof events_reported);
    }
    return r.error;
}

int UcmaDriver::bind_ip(const Channel& c, std::uint32_t handle, const std::string& ip, std::uint16_t port) {
    rdma_ucm_bind_ip cmd{};
    cmd.id = handle;
    cmd.addr = sockaddr_of(ip, port);
    return command(c, RDMA_USER_CM_CMD_BIND_IP, cmd, 0).error;
}

int UcmaDriver::resolve_ip(const Channel& c, std::uint32_t handle, const std::string& dst, std::uint16_t port) {
    rdma_ucm_resolve_ip cmd{};
    cmd.id = handle;
    cmd.dst_addr = sockaddr_of(dst, port);
    cmd.timeout_ms = 2000;
    return command(c, RDMA_USER_CM_CMD_RESOLVE_IP, cmd, 0).error;
}

int UcmaDriver::resolve_route(const Channel& c, std::uint32_t handle) {
    rdma_ucm_resolve_route cmd{};
    cmd.id = handle;
    cmd.timeout_ms = 2000;
    return command(c, RDMA_USER_CM_CMD_RESOLVE_ROUTE, cmd, 0).error;
}

int UcmaDriver::listen(const Channel& c, std::uint32_t handle, std::uint32_t backlog) {
    rdma_ucm_listen cmd{};
    cmd.id = handle;
    cmd.backlog = backlog;
    return command(c, RDMA_USER_CM_CMD_LISTEN, cmd, 0).error;
}

int UcmaDriver::connect(const Channel& c, std::uint32_t handle, std::uint32_t qpn, const std::string& data) {
    rdma_ucm_connect cmd{};
    cmd.id = handle;
    cmd.conn_param.qp_num = qpn;
    cmd.conn_param.valid = 1;
    cmd.conn_param.responder_resources = 1;
    cmd.conn_param.initiator_depth = 2;
    cmd.conn_param.retry_count = 7;
    cmd.conn_param.rnr_retry_count = 6;
    cmd.conn_param.private_data_len = static_cast<std::uint8_t>(data.size());
    std::memcpy(cmd.conn_param.private_data, data.data(), std::min<std::size_t>(data.size(), 256));
    return command(c, RDMA_USER_CM_CMD_CONNECT, cmd, 0).error;
}

int UcmaDriver::accept(const Channel& c, std::uint32_t handle, std::uint64_t uid, std::uint32_t qpn, bool valid) {
    rdma_ucm_accept cmd{};
    cmd.id = handle;
    cmd.uid = uid;
    cmd.conn_param.qp_num = qpn;
    cmd.conn_param.valid = valid ? 1 : 0;
    cmd.conn_param.responder_resources = 1;
    cmd.conn_param.initiator_depth = 1;
    cmd.conn_param.rnr_retry_count = 7;
    return command(c, RDMA_USER_CM_CMD_ACCEPT, cmd, 0).error;
}

int UcmaDriver::disconnect(const Channel& c, std::uint32_t handle) {
    rdma_ucm_disconnect cmd{};
    cmd.id = handle;
    return command(c, RDMA_USER_CM_CMD_DISCONNECT, cmd, 0).error;
}

int UcmaDriver::init_qp_attr(const Channel& c, std::uint32_t handle, std::uint32_t state, ib_uverbs_qp_attr& attr) {
    rdma_ucm_init_qp_attr cmd{};
    cmd.id = handle;
    cmd.qp_state = state;
    const auto r = command(c, RDMA_USER_CM_CMD_INIT_QP_ATTR, cmd, sizeof(ib_uverbs_qp_attr));
    if (r.error == 0) {
        std::memcpy(&attr, r.bytes.data(), sizeof attr);
    }
    return r.error;
}

int UcmaDriver::query_route(const Channel& c, std::uint32_t handle, rdma_ucm_query_route_resp& resp) {
    rdma_ucm_query cmd{};
    cmd.id = handle;
    const auto r = command(c, RDMA_USER_CM_CMD_QUERY_ROUTE, cmd, sizeof(rdma_ucm_query_route_resp));
    if (r.error == 0) {
        std::memcpy(&resp, r.bytes.data(), sizeof resp);
    }
    return r.error;
}

int UcmaDriver::migrate(const Channel& to, const Channel& from, std::uint32_t handle,
                        std::uint32_t& events_reported) {
    rdma_ucm_migrate_id cmd{};
    cmd.id = handle;
    cmd.fd = from.id;  // the preload's translation of the old fd
    const auto r = command(to, RDMA_USER_CM_CMD_MIGRATE_ID, cmd, sizeof(rdma_ucm_migrate_resp));
    if (r.error == 0) {
        std::memcpy(&events_reported, r.bytes.data(), sizeof events_reported);
    }
    return r.error;
}

std::optional<rdma_ucm_event_resp> UcmaDriver::next_event(const Channel& c) {
    std::uint8_t b;
    while (::recv(c.program_fd, &b, 1, MSG_DONTWAIT) == 1) {
        rdma_ucm_event_resp e{};
        if (device_.next_event(c.id, e) == 0) {
            return e;
        }
    }
    return std::nullopt;
}

int UcmaDriver::set_ack_timeout(const Channel& c, std::uint32_t handle, std::uint8_t timeout) {
    rdma_ucm_set_option opt{};
    opt.id = handle;
    opt.level = RDMA_OPTION_ID;
    opt.optname = RDMA_OPTION_ID_ACK_TIMEOUT;
    opt.optlen = 1;
    return command(c, RDMA_USER_CM_CMD_SET_OPTION, opt, 0, {timeout}).error;
}

}  // namespace uroce::ucma::test
