#include "format.h"

#include "timers.h"

namespace uroce::cm {

ReqMsg format_req(const ConnectParams& p, std::uint32_t local_comm_id) {
    ReqMsg m;
    m.local_comm_id = local_comm_id;
    m.service_id = p.service_id;
    m.local_ca_guid = p.local_ca_guid;
    m.local_qkey = 0;  // RC/UC: no Q_Key
    m.local_qpn = p.qpn;
    m.responder_resources = p.responder_resources;
    m.initiator_depth = p.initiator_depth;
    m.remote_cm_response_timeout = p.remote_cm_response_timeout;
    m.transport_type = p.transport;
    m.end_to_end_flow_control = p.flow_control;
    m.starting_psn = p.starting_psn;
    m.local_cm_response_timeout = p.local_cm_response_timeout;
    m.retry_count = p.retry_count;
    m.partition_key = 0xFFFF;
    m.path_mtu = p.path.mtu;
    m.rnr_retry_count = p.rnr_retry_count;
    m.max_cm_retries = p.max_cm_retries;
    m.srq = p.srq;
    m.primary.local_lid = kPermissiveLid;
    m.primary.remote_lid = kPermissiveLid;
    m.primary.local_gid = p.path.local_gid;
    m.primary.remote_gid = p.path.remote_gid;
    m.primary.flow_label = p.path.flow_label;
    m.primary.traffic_class = p.path.traffic_class;
    m.primary.hop_limit = p.path.hop_limit;
    m.primary.sl = p.path.sl;
    m.primary.local_ack_timeout = local_ack_timeout(p.ca_ack_delay, p.path.packet_life_time);
    m.private_data = p.private_data;
    return m;
}

RepMsg format_rep(const AcceptParams& p, std::uint32_t local_comm_id, std::uint32_t remote_comm_id) {
    RepMsg m;
    m.local_comm_id = local_comm_id;
    m.remote_comm_id = remote_comm_id;
    m.local_qpn = p.qpn;
    m.starting_psn = p.starting_psn;
    m.responder_resources = p.responder_resources;
    m.initiator_depth = p.initiator_depth;
    m.target_ack_delay = p.target_ack_delay;
    m.end_to_end_flow_control = p.flow_control;
    m.rnr_retry_count = p.rnr_retry_count;
    m.srq = p.srq;
    m.local_ca_guid = p.local_ca_guid;
    m.private_data = p.private_data;
    return m;
}

}  // namespace uroce::cm
