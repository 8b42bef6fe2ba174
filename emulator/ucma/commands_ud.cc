// UD ids: rdma_connect and rdma_accept exchange a SIDR_REQ and SIDR_REP
// (IBA 12.11) instead of a connection (cma.c cma_resolve_ib_udp,
// cma_send_sidr_rep, cma_sidr_rep_handler). The active side learns the
// passive QP's number and Q_Key, with the AV to reach it, in ESTABLISHED;
// the passive side gets CONNECT_REQUEST and nothing after its answer.
#include <cerrno>
#include <cstring>

#include "ucma/ucma_device.h"

namespace uroce::ucma {

namespace {

// SIDR_REQ private data: 216 bytes less the 36-byte CMA header; SIDR_REP 136.
constexpr std::uint8_t kSidrReqPrivateData = 180;
constexpr std::uint8_t kSidrRepPrivateData = 136;
// RDMA_UDP_QKEY: the Q_Key of rdma_cm's UDP and IB port spaces.
constexpr std::uint32_t kUdpQkey = 0x01234567;

}  // namespace

int UcmaDevice::connect_ud(CmId& id, const rdma_ucm_conn_param& param) {
    if (param.private_data_len > kSidrReqPrivateData) {
        return EINVAL;
    }
    id.conn.path = path_for(id);
    ConnectionRequest req;
    req.port_space = id.port_space;
    req.qp_type = id.qp_type;
    req.source = id.source;
    req.destination = id.destination;
    req.path = id.conn.path;
    req.private_data.length = param.private_data_len;
    std::memcpy(req.private_data.bytes.data(), param.private_data, param.private_data_len);
    id.state = IdState::Connect;
    id.phase = CmPhase::ReqSent;
    cm_.send_sidr_request(id.handle, req);
    return 0;
}

int UcmaDevice::accept_ud(CmId& id, const rdma_ucm_conn_param& param, std::uint64_t uid) {
    if (param.private_data_len > kSidrRepPrivateData) {
        return EINVAL;
    }
    id.uid = uid;
    SidrReply rep;
    rep.qpn = param.qp_num;
    rep.qkey = kUdpQkey;  // cma_set_qkey: the port space's, whatever the program asked
    rep.private_data.length = param.private_data_len;
    std::memcpy(rep.private_data.bytes.data(), param.private_data, param.private_data_len);
    cm_.send_sidr_reply(id.handle, rep);
    // Nothing more will pass between the two ids.
    id.phase = CmPhase::Timewait;
    id.state = IdState::Connected;
    cm_.release(id.handle);
    return 0;
}

RequestVerdict UcmaDevice::on_sidr_request(const ConnectionRequest& req) {
    CmId* passive = nullptr;
    const RequestVerdict verdict = admit_request(req, passive);
    if (passive == nullptr) {
        return verdict;
    }
    const CmId& listener = *find_any(passive->listener);
    rdma_ucm_event_resp resp{};
    resp.uid = listener.uid;
    resp.id = passive->handle;
    resp.event = RDMA_CM_EVENT_CONNECT_REQUEST;
    // ucma_copy_ud_event: no QP, no AV yet; the whole private-data field.
    std::memcpy(resp.param.ud.private_data, req.private_data.bytes.data(), kSidrReqPrivateData);
    resp.param.ud.private_data_len = kSidrReqPrivateData;
    queue_event(*passive, resp, listener.handle);
    return verdict;
}

void UcmaDevice::on_sidr_reply(ConnectionId active, const SidrReply& rep) {
    CmId* id = find_any(active);
    if (id == nullptr || id->phase != CmPhase::ReqSent) {
        return;
    }
    id->phase = CmPhase::Timewait;
    cm_.release(active);
    rdma_ucm_event_resp resp{};
    if (rep.status != SidrStatus::Success) {
        id->state = IdState::Disconnected;
        resp.event = RDMA_CM_EVENT_UNREACHABLE;
        resp.status = static_cast<std::uint32_t>(rep.status);
        queue_event(*id, resp, id->handle);
        return;
    }
    id->state = IdState::Connected;
    resp.event = RDMA_CM_EVENT_ESTABLISHED;
    auto& ud = resp.param.ud;
    ud.qp_num = rep.qpn;
    ud.qkey = rep.qkey;
    fill_ah_attr(*id, ud.ah_attr);
    std::memcpy(ud.private_data, rep.private_data.bytes.data(), kSidrRepPrivateData);
    ud.private_data_len = kSidrRepPrivateData;
    queue_event(*id, resp, id->handle);
}

void UcmaDevice::fill_ah_attr(const CmId& id, ib_uverbs_ah_attr& ah) const {
    const PathInfo& p = id.conn.path;
    ah = ib_uverbs_ah_attr{};
    std::memcpy(ah.grh.dgid, p.dgid.data(), 16);
    ah.grh.flow_label = p.flow_label;
    const int index = gid_index(p.sgid);
    ah.grh.sgid_index = static_cast<std::uint8_t>(index < 0 ? 0 : index);
    ah.grh.hop_limit = p.hop_limit;
    ah.grh.traffic_class = p.traffic_class;
    ah.is_global = 1;
    ah.sl = p.sl;
    ah.port_num = 1;
}

}  // namespace uroce::ucma
