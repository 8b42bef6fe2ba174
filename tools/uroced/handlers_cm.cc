// Control-protocol handlers of the emulated rdma_cm device (abi/control.h
// CM_*, ops 40-59): event channels and their doorbell sockets, and the
// ucma commands the preload library forwards (emulator/ucma).
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "control_server.h"
#include "epoll_watch.h"
#include "log.h"
#include "messages.h"

namespace uroce::daemon {

namespace {

// Whether `fd` is what CM_OPEN_CHANNEL wants: an AF_UNIX SOCK_SEQPACKET socket.
bool is_seqpacket_socket(int fd) {
    int type = 0;
    int domain = 0;
    socklen_t len = sizeof(type);
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_SEQPACKET) {
        return false;
    }
    len = sizeof(domain);
    return ::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_UNIX;
}

}  // namespace

ucma::DeviceView ControlServer::ucma_view() const {
    ucma::DeviceView v;
    v.node_guid = device_.node_guid();
    v.gids = device_.gids();
    v.active_mtu = static_cast<std::uint8_t>(device_.active_mtu());
    v.max_rd_atomic = static_cast<std::uint8_t>(device_.port_limits().max_rd_atomic);
    return v;
}

std::size_t ControlServer::dispatch_cm(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                       std::uint8_t* out, int received_fd) {
    switch (h.op) {
        case UROCE_CTRL_CM_OPEN_CHANNEL: {
            if (received_fd < 0 || !is_seqpacket_socket(received_fd)) {
                return status_only(out, h, EINVAL);
            }
            const Charge charge{1, 0, 0, 1};  // the doorbell socket is a daemon fd
            if (const int err = quota_.admit(c.client, charge); err != 0) {
                return status_only(out, h, err);
            }
            const int doorbell = ::fcntl(received_fd, F_DUPFD_CLOEXEC, 0);  // the caller closes received_fd
            if (doorbell < 0) {
                return status_only(out, h, EMFILE);
            }
            const ucma::ChannelId channel = ucma_.open_channel(c.uid, doorbell);
            // Only the hang-up matters: the daemon never reads the socket.
            if (!epoll_watch(epoll_fd_.get(), doorbell, EPOLLRDHUP, "an rdma_cm channel doorbell")) {
                ucma_.close_channel(channel);
                return status_only(out, h, ENOMEM);
            }
            cm_channels_[doorbell] = CmChannel{channel, c.client};
            quota_.add(ObjectKind::CmChannel, channel, c.client, charge);
            uroce_ctrl_handle r{};
            r.handle = channel;
            return write_reply(out, h, 0, r);
        }
        case UROCE_CTRL_CM_COMMAND: {
            const auto req = read_as<uroce_ctrl_cm_command>(msg);
            if (!ucma_.may_use(req.channel, c.uid)) {
                return status_only(out, h, EBADF);
            }
            if (req.command_length > UROCE_CM_COMMAND_MAX || req.option_length > UROCE_CM_OPTION_MAX) {
                return status_only(out, h, EINVAL);
            }
            const ucma::CommandResult result =
                ucma_.execute(req.channel, std::span(req.command, req.command_length),
                              std::span(req.option, req.option_length));
            uroce_ctrl_cm_answer a{};
            a.answer_length = static_cast<std::uint32_t>(result.length);
            std::memcpy(a.answer, result.bytes.data(), result.length);
            return write_reply(out, h, result.error, a);
        }
        case UROCE_CTRL_CM_GET_EVENT: {
            const std::uint32_t channel = read_as<uroce_ctrl_handle>(msg).handle;
            if (!ucma_.may_use(channel, c.uid)) {
                return status_only(out, h, EBADF);
            }
            rdma_ucm_event_resp event{};
            if (const int err = ucma_.next_event(channel, event); err != 0) {
                return status_only(out, h, err);
            }
            uroce_ctrl_cm_event e{};
            static_assert(sizeof(event) == sizeof(e.event));
            std::memcpy(e.event, &event, sizeof(event));
            return write_reply(out, h, 0, e);
        }
        default:
            return status_only(out, h, EINVAL);
    }
}

void ControlServer::close_cm_channel(int doorbell_fd) {
    const auto it = cm_channels_.find(doorbell_fd);
    if (it == cm_channels_.end()) {
        return;
    }
    epoll_unwatch(epoll_fd_.get(), doorbell_fd, "an rdma_cm channel doorbell");
    const ucma::ChannelId channel = it->second.channel;
    cm_channels_.erase(it);
    quota_.remove(ObjectKind::CmChannel, channel);
    ucma_.close_channel(channel);  // closes doorbell_fd
}

void ControlServer::close_cm_channels_of(std::uint32_t client) {
    // Channels live on the connection that opened them (one per process, as
    // the preload library keeps it): without this, a client could reconnect
    // again and again and leave the daemon holding its channels' fds.
    std::vector<int> doorbells;
    for (const auto& [fd, ch] : cm_channels_) {
        if (ch.client == client) {
            doorbells.push_back(fd);
        }
    }
    for (int fd : doorbells) {
        close_cm_channel(fd);
    }
}

}  // namespace uroce::daemon
