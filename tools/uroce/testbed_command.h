// `uroce testbed up|exec|status|down`: network namespaces joined by veth
// (or a bridge), a uroced in each, one command to make and one to remove
// (docs/ci-testbed.md). The pieces are in testbed/.
#pragma once

#include <CLI/CLI.hpp>

namespace uroce::tools {

void add_testbed_command(CLI::App& app);

}  // namespace uroce::tools
