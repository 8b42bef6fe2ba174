// `uroce status`: the device, its port and GIDs, and the daemon's client and
// object counts. Exits 0 once the daemon answers, so scripts can wait on it
// (`uroce status --wait 10`).
#pragma once

#include <CLI/CLI.hpp>

namespace uroce::tools {

void add_status_command(CLI::App& app);

}  // namespace uroce::tools
