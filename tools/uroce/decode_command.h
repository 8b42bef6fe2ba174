// `uroce decode FILE.pcap [--json]`: one line per frame, then the totals.
#pragma once

#include <CLI/CLI.hpp>

namespace uroce::tools {

void add_decode_command(CLI::App& app);

}  // namespace uroce::tools
