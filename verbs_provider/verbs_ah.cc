// Address handles: CREATE_AH / DESTROY_AH. RoCE addresses by GID, so the
// daemon requires a GRH (is_global) with a source GID in its table.
#include <cerrno>
#include <cstring>
#include <new>

#include "provider.h"

namespace uroce::provider {

ibv_ah* create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
    auto req = request<uroce_ctrl_create_ah>(UROCE_CTRL_CREATE_AH);
    req.pd = pd->handle;
    uroce_ctrl_ah_attr& w = req.attr;
    std::memcpy(w.dgid, attr->grh.dgid.raw, sizeof w.dgid);
    w.flow_label = attr->grh.flow_label;
    w.sgid_index = attr->grh.sgid_index;
    w.hop_limit = attr->grh.hop_limit;
    w.traffic_class = attr->grh.traffic_class;
    w.is_global = attr->is_global;
    w.dlid = attr->dlid;
    w.sl = attr->sl;
    w.src_path_bits = attr->src_path_bits;
    w.static_rate = attr->static_rate;
    w.port_num = attr->port_num;
    uroce_ctrl_handle reply{};
    if (const int err = link_of(pd->context).call(&req, sizeof req, &reply, sizeof reply); err != 0) {
        errno = err;
        return nullptr;
    }
    auto* ah = new (std::nothrow) ibv_ah{};
    if (ah == nullptr) {
        link_of(pd->context).call_handle(UROCE_CTRL_DESTROY_AH, reply.handle);
        errno = ENOMEM;
        return nullptr;
    }
    ah->context = pd->context;
    ah->pd = pd;
    ah->handle = reply.handle;
    return ah;
}

int destroy_ah(ibv_ah* ah) {
    if (const int err = link_of(ah->context).call_handle(UROCE_CTRL_DESTROY_AH, ah->handle); err != 0) {
        return err;
    }
    delete ah;
    return 0;
}

}  // namespace uroce::provider
