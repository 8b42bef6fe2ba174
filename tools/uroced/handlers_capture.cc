// Packet capture sessions (ops 95-99, abi/control.h; docs/capture.md).
#include <fcntl.h>
#include <unistd.h>

#include "control_server.h"
#include "log.h"
#include "messages.h"

namespace uroce::daemon {

std::size_t ControlServer::dispatch_capture(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                            std::uint8_t* out, int received_fd) {
    CaptureTap* tap = datapath_ != nullptr ? datapath_->capture() : nullptr;
    if (tap == nullptr) {
        return status_only(out, h, EOPNOTSUPP);
    }
    uroce_ctrl_capture_reply r{};
    if (h.op == UROCE_CTRL_CAPTURE_STOP) {
        const auto req = read_as<uroce_ctrl_handle>(msg);
        const auto totals = tap->stop(req.handle, c.client);
        if (!totals) {
            return status_only(out, h, ENOENT);
        }
        r.session = req.handle;
        r.frames_sent = totals->frames_sent;
        r.frames_lost = totals->frames_lost;
        return write_reply(out, h, 0, r);
    }
    // A capture shows every user's traffic: the same rule as the whole
    // device's view in STATS (visible_to), root or the daemon's own user.
    if (c.uid != 0 && c.uid != ::geteuid()) {
        log_warn("client {}: capture refused to uid {} (only root and uid {} may capture)", c.client, c.uid,
                 ::geteuid());
        return status_only(out, h, EPERM);
    }
    if (received_fd < 0) {
        return status_only(out, h, EINVAL);
    }
    const int socket = ::fcntl(received_fd, F_DUPFD_CLOEXEC, 0);  // the caller closes received_fd
    if (socket < 0) {
        return status_only(out, h, errno);
    }
    const auto req = read_as<uroce_ctrl_capture_start>(msg);
    const std::optional<std::uint32_t> qpn =
        req.qpn == UROCE_CAPTURE_ANY_QP ? std::nullopt : std::optional<std::uint32_t>(req.qpn);
    if (const int err = tap->start(UniqueFd(socket), c.client, qpn, r.session); err != 0) {
        return status_only(out, h, err);
    }
    return write_reply(out, h, 0, r);
}

}  // namespace uroce::daemon
