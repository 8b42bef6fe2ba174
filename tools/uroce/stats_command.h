// `uroce stats`: the daemon's counters (engine, frames, port, neighbours,
// DMA, idle loop) and every MR with the DMA way that serves it: shared
// mapping (zero-copy) or copies through the client's /proc/self/mem. docs/stats.md describes them.
#pragma once

#include <CLI/CLI.hpp>

namespace uroce::tools {

void add_stats_command(CLI::App& app);

}  // namespace uroce::tools
