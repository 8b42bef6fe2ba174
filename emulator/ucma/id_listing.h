// The rdma_cm ids as CM_LIST_IDS (abi/control.h, op 150) reports them, the
// way Linux's netlink reports the kernel's to `rdma resource show cm_id`
// (nldev.c fill_res_cm_id_entry): each id's state in the kernel's terms and
// its addresses, a page at a time in handle order.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>

#include "abi/control.h"
#include "ucma/cm_id.h"

namespace uroce::ucma {

// The process behind a channel, as the asker may see it.
struct ChannelOwner {
    std::uint32_t pid = 0;
    std::array<char, UROCE_CM_COMM_BYTES> comm{};
};
// The owner of a channel, or nothing when the asker may not see its ids.
using ChannelOwnerLookup = std::function<std::optional<ChannelOwner>(ChannelId)>;

// cma.c's state for the id (enum uroce_cm_id_state). The kernel has one
// state, RDMA_CM_CONNECT, from CONNECT (or the REQ) to the disconnection, and
// a rejected or unreachable id stays in it; RDMA_CM_DISCONNECT once
// DISCONNECTED was reported.
[[nodiscard]] uroce_cm_id_state kernel_state(const CmId& id);

// One entry: addresses as nldev puts them (the source once the id has a
// family; the destination's family is the source's until it has its own, as
// rdma_bind_addr sets it, so a listener shows 0.0.0.0:0).
[[nodiscard]] uroce_ctrl_cm_id_entry id_entry(const CmId& id, const ChannelOwner& owner);

// The ids from handle `first_handle` on that `owner_of` admits, at most
// UROCE_CM_LIST_IDS_PER_REPLY; `more` and `next_handle` say where the next
// page starts.
[[nodiscard]] uroce_ctrl_cm_list_ids_reply list_ids_page(const std::map<std::uint32_t, CmId>& ids,
                                                         std::uint32_t first_handle,
                                                         const ChannelOwnerLookup& owner_of);

}  // namespace uroce::ucma
