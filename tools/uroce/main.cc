// uroce: the command-line tool of the uroce software RoCE device.
#include <CLI/CLI.hpp>

#include "capture_command.h"
#include "cm_command.h"
#include "decode_command.h"
#include "env_command.h"
#include "fault_command.h"
#include "explain_command.h"
#include "stats_command.h"
#include "status_command.h"
#include "testbed_command.h"

int main(int argc, char** argv) {
    CLI::App app{"uroce: tools for the uroce software RoCEv2 device"};
    app.require_subcommand(1);
    uroce::tools::add_capture_command(app);
    uroce::tools::add_cm_command(app);
    uroce::tools::add_decode_command(app);
    uroce::tools::add_env_commands(app);
    uroce::tools::add_explain_command(app);
    uroce::tools::add_status_command(app);
    uroce::tools::add_stats_command(app);
    uroce::tools::add_fault_command(app);
    uroce::tools::add_testbed_command(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    return 0;
}
