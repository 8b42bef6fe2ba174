// `uroce env` prints the shell exports a verbs program needs to see a uroce
// device; `uroce exec -- PROGRAM ARGS` runs a program with them, plus the
// preload library that makes completion channels work.
#pragma once

#include <CLI/CLI.hpp>

namespace uroce::tools {

void add_env_commands(CLI::App& app);

}  // namespace uroce::tools
