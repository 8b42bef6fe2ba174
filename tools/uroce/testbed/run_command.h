// Running the system's own tools (ip) and collecting what they print.
#pragma once

#include <string>
#include <vector>

namespace uroce::tools::testbed {

struct CommandResult {
    int exit_code = -1;   // -1: it could not be started, or died of a signal
    std::string output;   // stdout and stderr, interleaved
    [[nodiscard]] bool ok() const { return exit_code == 0; }
};

// Runs argv (looked up in PATH) to completion, its stdin /dev/null.
[[nodiscard]] CommandResult run_command(const std::vector<std::string>& argv);
// "ip a b c" for messages.
[[nodiscard]] std::string command_line(const std::vector<std::string>& argv);

}  // namespace uroce::tools::testbed
