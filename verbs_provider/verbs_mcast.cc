// Multicast: ibv_attach_mcast / ibv_detach_mcast become ATTACH_MCAST /
// DETACH_MCAST; uroced checks the QP and the GID as the kernel does and
// delivers a copy of each UD packet sent to the group to every attached QP.
// Like every verb of this kind they return 0 or an errno.
#include <cstring>

#include "provider.h"

namespace uroce::provider {

namespace {

int multicast_request(std::uint16_t op, ibv_qp* qp, const ibv_gid* gid, std::uint16_t lid) {
    auto req = request<uroce_ctrl_mcast>(op);
    req.qpn = qp->qp_num;
    req.lid = lid;
    std::memcpy(req.gid, gid->raw, sizeof req.gid);
    uroce_ctrl_hdr reply{};
    return link_of(qp->context).call(&req, sizeof req, &reply, sizeof reply);
}

}  // namespace

int attach_mcast(ibv_qp* qp, const ibv_gid* gid, std::uint16_t lid) {
    return multicast_request(UROCE_CTRL_ATTACH_MCAST, qp, gid, lid);
}

int detach_mcast(ibv_qp* qp, const ibv_gid* gid, std::uint16_t lid) {
    return multicast_request(UROCE_CTRL_DETACH_MCAST, qp, gid, lid);
}

}  // namespace uroce::provider
