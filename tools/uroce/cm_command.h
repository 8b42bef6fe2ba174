// `uroce cm`: the daemon's rdma_cm ids, one line each as Linux's
// `rdma resource show cm_id` prints the kernel's (link, lqpn, qp-type, state,
// ps, pid, comm, cm-idn, src-addr, dst-addr), or a JSON list (--json).
// docs/rdmacm-device.md, "Listing the ids".
#pragma once

#include <CLI/CLI.hpp>

namespace uroce::tools {

void add_cm_command(CLI::App& app);

}  // namespace uroce::tools
