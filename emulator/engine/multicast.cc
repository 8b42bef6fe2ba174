// Receiving a multicast packet (destination QP 0xFFFFFF, IBA 10.5.2.2): a
// copy to every UD QP attached to the group its destination GID names, as
// rdma_rxe's rxe_rcv_mcast_pkt does. Each member is checked on its own
// (state, transport, P_Key, its own Q_Key); one member refusing the copy
// does not keep it from the others. The group table is multicast_groups.h.
#include <vector>

#include "engine.h"
#include "qp/address_values.h"

namespace uroce::engine {

namespace {

// Why a member QP does not take a copy, or nullopt when it does (the checks
// of check_silent_drops that concern the QP, in the same order).
std::optional<DropReason> member_refuses(const QueuePair& qp, const wire::Packet& p) {
    if (qp.type != qp::QpType::Ud || p.info().transport != wire::Transport::UD) {
        return DropReason::WrongTransport;
    }
    if (!qp.can_receive()) {
        return DropReason::QpNotReceiving;
    }
    if ((p.bth().pkey.get() & 0x7FFF) != 0x7FFF) {  // the default partition only
        return DropReason::BadPkey;
    }
    const wire::Deth* deth = p.deth();
    if (deth == nullptr || deth->qkey.get() != qp.attr.qkey) {
        return DropReason::BadQkey;
    }
    return std::nullopt;
}

}  // namespace

void Engine::receive_multicast(const wire::Packet& p, Clock::time_point now) {
    const wire::Gid group = p.dst_gid();
    const std::span<const std::uint32_t> members = multicast_.members(group);
    if (!qp::is_multicast_gid(group) || members.empty()) {
        drop(DropReason::UnknownQp);  // no QP is attached to the group
        return;
    }
    if (!p.icrc_ok()) {
        drop(DropReason::BadIcrc);
        return;
    }
    // A copy: delivering may not change the group, but keep the loop safe.
    const std::vector<std::uint32_t> qpns(members.begin(), members.end());
    for (const std::uint32_t qpn : qpns) {
        const auto it = qps_.find(qpn);
        if (it == qps_.end()) {
            continue;
        }
        QueuePair& qp = *it->second;
        if (const std::optional<DropReason> reason = member_refuses(qp, p)) {
            drop(*reason);
            continue;
        }
        on_ud_request(qp, p, now);
    }
}

}  // namespace uroce::engine
