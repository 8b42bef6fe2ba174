// The replies of STATS, STATS_REASONS and LIST_MRS (abi/control.h): the device's counters
// and its MRs with the DMA way that serves each, for `uroce stats`.
#pragma once

#include <cstdint>
#include <functional>

#include "abi/control.h"
#include "datapath.h"
#include "device/device.h"
#include "loop_stalls.h"

namespace uroce::daemon {

// Which clients' objects the asker may see (by owner client id): a client
// sees only objects of its own user's clients, root and the daemon's owner
// see the whole device (docs/stats.md, "Who sees what").
using OwnerFilter = std::function<bool(std::uint32_t owner)>;

// Every counter group; `datapath` may be nullptr (no data path attached:
// those groups stay zero and every MR counts as unserved). The MR counts are
// of the MRs `visible` admits; the counters are the device's, as the
// kernel's port and hw counters are readable by every user.
[[nodiscard]] uroce_ctrl_stats_reply stats_reply(const device::Device& device, const Datapath* datapath,
                                                 const OwnerFilter& visible);

// Every drop and NAK by reason; all zero without a data path.
[[nodiscard]] uroce_ctrl_stats_reasons_reply stats_reasons_reply(const Datapath* datapath);

// The loop's stall counters (LOOP_STALLS).
[[nodiscard]] uroce_ctrl_loop_stalls_reply loop_stalls_reply(const LoopStallCounters& counters);

// The IGMP / MLD counters and versions (MEMBERSHIP).
[[nodiscard]] uroce_ctrl_membership_reply membership_reply(const net::MembershipCounters& counters);

// Up to UROCE_LIST_MRS_PER_REPLY of the MRs `visible` admits, from key
// index `first_index` on.
[[nodiscard]] uroce_ctrl_list_mrs_reply list_mrs_reply(const device::Device& device, const Datapath* datapath,
                                                       std::uint32_t first_index, const OwnerFilter& visible);

}  // namespace uroce::daemon
