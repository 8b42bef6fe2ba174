// `uroce capture`: writes the RoCE frames a running uroced sends and
// receives, dropped ones marked with the reason, to a pcapng file or to
// stdout (for `tshark -i -`). docs/capture.md.
#pragma once

#include <CLI/CLI.hpp>

namespace uroce::tools {

void add_capture_command(CLI::App& app);

}  // namespace uroce::tools
