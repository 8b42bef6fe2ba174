// `uroce fault`: the daemon's fault-injection rules while it runs
// (docs/fault-injection.md): add RULE, list, clear [ID], seed N.
#pragma once

#include <CLI/CLI.hpp>

namespace uroce::tools {

void add_fault_command(CLI::App& app);

}  // namespace uroce::tools
