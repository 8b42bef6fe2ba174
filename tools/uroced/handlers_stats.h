// The replies of STATS and LIST_MRS (abi/control.h): the device's counters
// and its MRs with the DMA way that serves each, for `uroce stats`.
#pragma once

#include <cstdint>

#include "abi/control.h"
#include "datapath.h"
#include "device/device.h"

namespace uroce::daemon {

// Every counter group; `datapath` may be nullptr (no data path attached:
// those groups stay zero and every MR counts as unserved).
[[nodiscard]] uroce_ctrl_stats_reply stats_reply(const device::Device& device, const Datapath* datapath);

// Up to UROCE_LIST_MRS_PER_REPLY MRs from key index `first_index` on.
[[nodiscard]] uroce_ctrl_list_mrs_reply list_mrs_reply(const device::Device& device, const Datapath* datapath,
                                                       std::uint32_t first_index);

}  // namespace uroce::daemon
