// The neighbour step of rdma_cm address resolution, as Linux's ib_addr
// takes it (drivers/infiniband/core/addr.c): rdma_resolve_ip asks for the
// destination's link-layer address (addr_resolve -> addr_resolve_neigh ->
// dst_fetch_ha); when the neighbour is not valid yet the request waits
// (-ENODATA) and is looked at again when a neighbour becomes valid
// (netevent_callback) or when the command's timeout_ms runs out
// (process_one_req), which ends it with -ETIMEDOUT. cma.c addr_handler then
// reports ADDR_RESOLVED, or ADDR_ERROR with that status and the id back in
// ADDR_BOUND. A destination routed through lo (one of our own addresses)
// needs no neighbour (IFF_LOOPBACK) and resolves at once. uroce has no
// route table: every destination is resolved as a neighbour on the port's
// link, there is no gateway. docs/rdmacm-device.md, "Address resolution".
#include <cerrno>

#include "ucma/ucma_device.h"

namespace uroce::ucma {

void UcmaDevice::begin_address_query(CmId& id, const Endpoint& source, std::chrono::milliseconds timeout) {
    const auto now = clock_();
    const bool own = gid_index(id.destination.ip) >= 0;  // addr_resolve_neigh: IFF_LOOPBACK
    if (neighbours_ == nullptr || own ||
        neighbours_->resolve(source.ip, id.destination.ip, now) == NeighbourState::Known) {
        address_resolved(id, source);  // rdma_resolve_ip: status 0, reported at once
        return;
    }
    // rdma_resolve_ip: -ENODATA, the request waits until timeout_ms from now.
    address_queries_[id.handle] = AddressQuery{source, now + timeout};
}

void UcmaDevice::finish_address_queries(std::chrono::steady_clock::time_point now) {
    for (auto it = address_queries_.begin(); it != address_queries_.end();) {
        CmId* id = find_any(it->first);
        if (id == nullptr || id->state != IdState::AddrQuery) {
            it = address_queries_.erase(it);  // not expected: destroying an id cancels its query
            continue;
        }
        const AddressQuery query = it->second;
        if (neighbours_ != nullptr && neighbours_->state_of(id->destination.ip) == NeighbourState::Known) {
            it = address_queries_.erase(it);
            address_resolved(*id, query.source);
        } else if (now >= query.deadline) {
            it = address_queries_.erase(it);
            address_failed(*id, -ETIMEDOUT);  // process_one_req: time_after_eq(jiffies, req->timeout)
        } else {
            ++it;
        }
    }
}

void UcmaDevice::address_resolved(CmId& id, const Endpoint& source) {
    // cma.c addr_handler: the route's source address becomes the id's, and
    // the id takes the device (cma_acquire_dev_by_src_ip).
    id.source = source;
    id.bound_to_device = true;
    id.state = IdState::AddrResolved;
    queue_event(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0, id.handle);
}

void UcmaDevice::address_failed(CmId& id, int status) {
    // cma.c addr_handler: the source stays what it was, ADDR_QUERY goes back
    // to ADDR_BOUND (RESOLVE_ADDR may be tried again), ADDR_ERROR carries the status.
    id.state = IdState::AddrBound;
    queue_event(id, RDMA_CM_EVENT_ADDR_ERROR, status, id.handle);
}

}  // namespace uroce::ucma
