// Control-protocol handlers for ops 130-139 (abi/control.h): ibv_attach_mcast
// and ibv_detach_mcast. The checks are the kernel's ib_attach_mcast /
// ib_detach_mcast (a UD QP of the caller, a multicast GID; the LID means
// nothing on RoCE); the group table is the engine's (engine/multicast_groups.h).
#include <cerrno>
#include <cstring>

#include "control_server.h"
#include "messages.h"
#include "qp/address_values.h"

namespace uroce::daemon {

static_assert(engine::kMaxMulticastGroups == UROCE_MAX_MCAST_GRP);
static_assert(engine::kMaxQpsPerGroup == UROCE_MAX_MCAST_QP_ATTACH);
static_assert(engine::kMaxTotalAttachments == UROCE_MAX_TOTAL_MCAST_QP_ATTACH);

namespace {

// The group of a request whose QP and GID pass ib_attach_mcast's checks,
// or the errno they fail with.
struct MulticastTarget {
    int error = 0;
    wire::Gid group{};
};

MulticastTarget check_target(const Datapath* datapath, std::uint32_t owner, const uroce_ctrl_mcast& req) {
    MulticastTarget t;
    if (datapath == nullptr) {
        t.error = ENODEV;
        return t;
    }
    std::memcpy(t.group.data(), req.gid, sizeof req.gid);
    const engine::QueuePair* qp = datapath->engine().find_qp(Qpn{req.qpn});
    if (qp == nullptr || qp->owner != owner || qp->type != qp::QpType::Ud || !qp::is_multicast_gid(t.group)) {
        t.error = EINVAL;
    }
    return t;
}

}  // namespace

std::size_t ControlServer::attach_multicast(const Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                            std::uint8_t* out) {
    const auto req = read_as<uroce_ctrl_mcast>(msg);
    const MulticastTarget t = check_target(datapath_, c.client, req);
    if (t.error != 0) {
        return status_only(out, h, t.error);
    }
    return status_only(out, h, datapath_->multicast().attach(t.group, req.qpn));
}

std::size_t ControlServer::detach_multicast(const Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                            std::uint8_t* out) {
    const auto req = read_as<uroce_ctrl_mcast>(msg);
    const MulticastTarget t = check_target(datapath_, c.client, req);
    if (t.error != 0) {
        return status_only(out, h, t.error);
    }
    return status_only(out, h, datapath_->multicast().detach(t.group, req.qpn));
}

}  // namespace uroce::daemon
