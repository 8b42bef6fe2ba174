// query_device_ex and query_port: what uroced answers to QUERY_DEVICE and
// QUERY_PORT (abi/control.h), asked at every call so a port that goes down
// shows. Link layer Ethernet (tools ask for a LID otherwise), the port
// state and active_mtu (perftest and ibv_rc_pingpong take it as the path
// MTU) all come from the daemon.
#include <endian.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "extended_rules.h"
#include "provider.h"

namespace uroce::provider {
namespace {

int device_attr(ibv_context* ctx, ibv_device_attr_ex& ex) {
    uroce_ctrl_hdr req{};
    req.op = UROCE_CTRL_QUERY_DEVICE;
    uroce_ctrl_device_attr d{};
    if (const int err = link_of(ctx).call(&req, sizeof req, &d, sizeof d); err != 0) {
        return err;
    }
    ex = ibv_device_attr_ex{};
    ibv_device_attr& a = ex.orig_attr;
    std::snprintf(a.fw_ver, sizeof a.fw_ver, "%.*s", static_cast<int>(sizeof d.fw_ver), d.fw_ver);
    // The daemon sends host order; verbs wants the GUIDs big-endian (as
    // ibv_get_device_guid reads them from sysfs).
    a.node_guid = htobe64(d.node_guid);
    a.sys_image_guid = htobe64(d.sys_image_guid);
    a.max_mr_size = d.max_mr_size;
    a.page_size_cap = d.page_size_cap;
    a.vendor_id = d.vendor_id;
    a.vendor_part_id = d.vendor_part_id;
    a.hw_ver = d.hw_ver;
    a.max_qp = static_cast<int>(d.max_qp);
    a.max_qp_wr = static_cast<int>(d.max_qp_wr);
    a.device_cap_flags = d.device_cap_flags;
    a.max_sge = static_cast<int>(d.max_sge);
    a.max_sge_rd = static_cast<int>(d.max_sge_rd);
    a.max_cq = static_cast<int>(d.max_cq);
    a.max_cqe = static_cast<int>(d.max_cqe);
    a.max_mr = static_cast<int>(d.max_mr);
    a.max_pd = static_cast<int>(d.max_pd);
    a.max_qp_rd_atom = static_cast<int>(d.max_qp_rd_atom);
    a.max_qp_init_rd_atom = static_cast<int>(d.max_qp_init_rd_atom);
    a.max_res_rd_atom = static_cast<int>(d.max_res_rd_atom);
    a.atomic_cap = static_cast<ibv_atomic_cap>(d.atomic_cap);
    a.max_mw = static_cast<int>(d.max_mw);
    a.max_ah = static_cast<int>(d.max_ah);
    a.max_mcast_grp = static_cast<int>(UROCE_MAX_MCAST_GRP);
    a.max_mcast_qp_attach = static_cast<int>(UROCE_MAX_MCAST_QP_ATTACH);
    a.max_total_mcast_qp_attach = static_cast<int>(UROCE_MAX_TOTAL_MCAST_QP_ATTACH);
    a.max_srq = static_cast<int>(d.max_srq);
    a.max_srq_wr = static_cast<int>(d.max_srq_wr);
    a.max_srq_sge = static_cast<int>(d.max_srq_sge);
    a.max_pkeys = static_cast<std::uint16_t>(d.max_pkeys);
    a.local_ca_ack_delay = d.local_ca_ack_delay;
    a.phys_port_cnt = d.phys_port_cnt;
    ex.phys_port_cnt_ex = d.phys_port_cnt;
    // Completion timestamps (ibv_create_cq_ex): nanoseconds of
    // CLOCK_MONOTONIC when uroced wrote the CQE (verbs_cq_ex.cc).
    ex.completion_timestamp_mask = kCompletionTimestampMask;
    ex.hca_core_clock = kHcaCoreClockKhz;
    report_odp_caps(ex);
    return 0;
}

}  // namespace

int query_device_ex(ibv_context* ctx, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                    std::size_t attr_size) {
    if (input != nullptr && input->comp_mask != 0) {
        return EINVAL;
    }
    if (attr_size < sizeof(ibv_device_attr)) {
        return EINVAL;
    }
    ibv_device_attr_ex full{};
    if (const int err = device_attr(ctx, full); err != 0) {
        return err;
    }
    // The caller owns exactly attr_size bytes: the old structure (232) from
    // ibv_query_device, its own sizeof(ibv_device_attr_ex) from
    // ibv_query_device_ex, which a program built against newer headers may
    // make larger than ours (the part we do not know is zeroed).
    const std::size_t known = std::min(attr_size, sizeof full);
    std::memcpy(attr, &full, known);
    std::memset(reinterpret_cast<char*>(attr) + known, 0, attr_size - known);
    return 0;
}

int query_port(ibv_context* ctx, std::uint8_t port_num, ibv_port_attr* attr) {
    if (port_num != kPortNum) {
        return EINVAL;
    }
    uroce_ctrl_hdr req{};
    req.op = UROCE_CTRL_QUERY_PORT;
    uroce_ctrl_port_attr p{};
    if (const int err = link_of(ctx).call(&req, sizeof req, &p, sizeof p); err != 0) {
        return err;
    }
    // libibverbs zeroed *attr (or gave us a zeroed buffer of the full size).
    attr->state = static_cast<ibv_port_state>(p.state);
    attr->max_mtu = static_cast<ibv_mtu>(p.max_mtu);
    attr->active_mtu = static_cast<ibv_mtu>(p.active_mtu);
    attr->gid_tbl_len = static_cast<int>(p.gid_tbl_len);
    attr->port_cap_flags = p.port_cap_flags;
    attr->max_msg_sz = p.max_msg_sz;
    attr->pkey_tbl_len = p.pkey_tbl_len;
    attr->max_vl_num = p.max_vl_num;
    attr->active_width = p.active_width;
    attr->active_speed = p.active_speed;
    attr->phys_state = static_cast<std::uint8_t>(p.phys_state);
    attr->link_layer = p.link_layer;
    attr->flags = IBV_QPF_GRH_REQUIRED;  // RoCE: every packet carries a GRH
    return 0;
}

}  // namespace uroce::provider
