// QUERY's GID and PATH answers (ucma.c ucma_query_gid, ucma_query_path):
// librdmacm asks them once the AF_IB probe succeeded, for every id: the
// addresses as sockaddr_ib (GID, P_Key, service ID) and the route as packed
// IBA PathRecords.
#include <arpa/inet.h>
#include <endian.h>

#include <cerrno>
#include <cstring>

#include "ucma/path_record.h"
#include "ucma/ucma_device.h"

namespace uroce::ucma {

namespace {

// The id's address in AF_IB terms (ucma_query_gid): an AF_IB address as it
// is; an IP one as its GID (once the id has a device: rdma_read_gids), the
// id's P_Key and the service ID of (port space, port)
// (rdma_get_service_id); the mask stays 0.
Endpoint as_ib(const Endpoint& e, std::uint16_t port_space, bool has_device, std::uint16_t pkey) {
    if (e.family == Family::Ib) {
        return e;
    }
    Endpoint ib;
    ib.family = Family::Ib;
    ib.pkey = pkey;
    if (has_device && e.family != Family::Unspecified) {
        ib.ip = e.ip;  // IPv4 already in its mapped GID form
    }
    ib.service_id = (static_cast<std::uint64_t>(port_space) << 16) + e.port;
    return ib;
}

}  // namespace

void UcmaDevice::fill_device_addr(const CmId& id, rdma_ucm_query_addr_resp& resp) const {
    // ucma_query_device_addr: nothing until the id has a device.
    if (!id.bound_to_device) {
        return;
    }
    resp.node_guid = htobe64(device_.node_guid);  // big-endian, as the kernel's node_guid
    resp.port_num = 1;
    resp.ibdev_index = 0;
    // The netdev broadcast address's bytes 8-9: 0 on Ethernet; an AF_IB id
    // keeps the P_Key it was resolved with (cma_translate_ib).
    resp.pkey = id.source.family == Family::Ib ? htons(id.source.pkey) : 0;
}

int UcmaDevice::query_gid(const CmId& id, std::uint16_t out, CommandResult& r) const {
    if (out < offsetof(rdma_ucm_query_addr_resp, ibdev_index)) {
        return ENOSPC;
    }
    rdma_ucm_query_addr_resp resp{};
    fill_device_addr(id, resp);
    const std::uint16_t pkey = ntohs(resp.pkey);
    resp.src_size = static_cast<std::uint16_t>(write_sockaddr(
        as_ib(id.source, id.port_space, id.bound_to_device, pkey), &resp.src_addr, sizeof(resp.src_addr)));
    resp.dst_size = static_cast<std::uint16_t>(write_sockaddr(
        as_ib(id.destination, id.port_space, id.bound_to_device, pkey), &resp.dst_addr, sizeof(resp.dst_addr)));
    r.length = std::min<std::size_t>(sizeof(resp), out);
    std::memcpy(r.bytes.data(), &resp, r.length);
    return 0;
}

namespace {

// The fixed part of rdma_ucm_query_path_resp (num_paths, reserved): the
// kernel's struct ends in a flexible array member, which C++ may not
// instantiate (clang -Wpedantic refuses it).
struct QueryPathHeader {
    std::uint32_t num_paths;
    std::uint32_t reserved;
};
static_assert(sizeof(QueryPathHeader) == 8, "rdma_ucm_query_path_resp's header: two __u32");

}  // namespace

int UcmaDevice::query_path(const CmId& id, std::uint16_t out, CommandResult& r) const {
    QueryPathHeader header{};
    if (out < sizeof(header)) {
        return ENOSPC;
    }
    header.num_paths = route_resolved(id) ? 1 : 0;
    std::size_t length = sizeof(header);
    // As many records as fit in `out` strictly (the kernel's loop test).
    if (header.num_paths == 1 && out - sizeof(header) > kPathDataBytes) {
        ib_path_rec_data entry{};
        entry.flags = kPrimaryPathFlags;
        const PackedPathRecord rec = pack_path_record(route_of(id));
        std::memcpy(entry.path_rec, rec.data(), rec.size());
        std::memcpy(r.bytes.data() + length, &entry, sizeof(entry));
        length += sizeof(entry);
    }
    std::memcpy(r.bytes.data(), &header, sizeof(header));
    r.length = length;
    return 0;
}

}  // namespace uroce::ucma
