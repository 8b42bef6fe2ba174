// `uroce explain`: the daemon's explained-failure records (docs/explain.md):
// every refused remote request, access through a deregistered relaxed MR
// and error completion, in words; --follow keeps printing new ones, --json
// prints one JSON object per record.
#pragma once

#include <CLI/CLI.hpp>

namespace uroce::tools {

void add_explain_command(CLI::App& app);

}  // namespace uroce::tools
