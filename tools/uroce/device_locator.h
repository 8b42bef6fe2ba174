// Where a running uroced publishes its device, and where the provider plugin
// lives, as the env/exec/status commands need them.
#pragma once

#include <string>

namespace uroce::tools {

struct DeviceLocation {
    std::string state_dir = "/run/uroce";
    std::string device = "uroce0";

    [[nodiscard]] std::string sysfs_path() const { return state_dir + "/sys"; }
    [[nodiscard]] std::string socket_path() const { return state_dir + "/" + device + ".sock"; }
    // flock(2)ed by the uroced serving the device (docs/daemon.md).
    [[nodiscard]] std::string lock_path() const { return state_dir + "/" + device + ".lock"; }
};

// The state directory: --state-dir if given, else $UROCE_STATE_DIR, else /run/uroce.
[[nodiscard]] std::string default_state_dir();

// The provider plugin as RDMAV_DRIVERS wants it: the path without the
// "-rdmav34.so" suffix libibverbs appends. Prefers the build tree next to
// this executable, then where `meson install` puts it (libibverbs' provider
// directory, docs/install.md). Empty when neither exists.
[[nodiscard]] std::string provider_driver_path();
// The preload library that gives ibv_create_comp_channel a real channel.
[[nodiscard]] std::string preload_library_path();
// The uroced to start (uroce testbed): the build tree's beside this uroce,
// else the installed one, else the first in PATH. Empty when none.
[[nodiscard]] std::string daemon_path();

}  // namespace uroce::tools
