#include "status_command.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>

#include "abi/control_client.h"
#include "device_locator.h"

namespace uroce::tools {

namespace {

std::string read_line(const std::string& path) {
    std::ifstream f(path);
    std::string s;
    std::getline(f, s);
    return s;
}

const char* mtu_name(std::uint32_t m) {
    static constexpr const char* kNames[] = {"?", "256", "512", "1024", "2048", "4096"};
    return m < 6 ? kNames[m] : "?";
}

// Whether the device's lock file is there and nobody holds it: what a
// uroced that crashed or was SIGKILLed leaves.
bool left_by_a_dead_daemon(const DeviceLocation& loc) {
    const int fd = ::open(loc.lock_path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return false;
    }
    const bool free = ::flock(fd, LOCK_SH | LOCK_NB) == 0;
    ::close(fd);
    return free;
}

int show(const DeviceLocation& loc) {
    abi::ControlClient c;
    if (int err = c.connect(loc.socket_path()); err != 0) {
        fmt::print(stderr, "uroce status: no daemon at {} ({})\n", loc.socket_path(), std::strerror(err));
        if (left_by_a_dead_daemon(loc)) {
            fmt::print(stderr,
                       "uroce status: the uroced of {} in {} did not stop cleanly; the next uroced started there "
                       "removes what it left\n",
                       loc.device, loc.state_dir);
        }
        return 1;
    }
    uroce_ctrl_status_reply st{};
    uroce_ctrl_port_attr port{};
    uroce_ctrl_device_attr dev{};
    int err = c.call_simple(UROCE_CTRL_STATUS, &st, sizeof(st));
    if (err == 0) {
        err = c.call_simple(UROCE_CTRL_QUERY_PORT, &port, sizeof(port));
    }
    if (err == 0) {
        err = c.call_simple(UROCE_CTRL_QUERY_DEVICE, &dev, sizeof(dev));
    }
    if (err != 0) {
        fmt::print(stderr, "uroce status: the daemon at {} did not answer: {}\n", loc.socket_path(), std::strerror(err));
        return 1;
    }
    const std::string dir = loc.sysfs_path() + "/class/infiniband/" + loc.device;
    fmt::print("device    {} (node GUID {}), firmware {}\n", loc.device, read_line(dir + "/node_guid"), dev.fw_ver);
    fmt::print("port 1    {}, link layer Ethernet, MAC {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}, active MTU {}\n",
               port.state == 4 ? "PORT_ACTIVE" : "PORT_DOWN", port.mac[0], port.mac[1], port.mac[2], port.mac[3],
               port.mac[4], port.mac[5], mtu_name(port.active_mtu));
    for (std::uint32_t i = 0; i < port.gid_tbl_len; ++i) {
        const std::string gid = read_line(dir + "/ports/1/gids/" + std::to_string(i));
        if (gid.empty() || gid == "0000:0000:0000:0000:0000:0000:0000:0000") {
            continue;
        }
        fmt::print("GID {:<5} {}  {}\n", i, gid, read_line(dir + "/ports/1/gid_attrs/types/" + std::to_string(i)));
    }
    fmt::print("clients   {} connected, {} closed ({} objects reclaimed), {} bad messages\n", st.clients,
               st.clients_closed, st.objects_reclaimed, st.bad_messages);
    fmt::print("objects   {} PDs, {} MRs, {} MWs, {} relaxed-MR pools\n", st.pds, st.mrs, st.mws, st.relaxed_pools);
    fmt::print("env       eval \"$(uroce env --state-dir {})\"\n", loc.state_dir);
    return 0;
}

}  // namespace

void add_status_command(CLI::App& app) {
    auto loc = std::make_shared<DeviceLocation>();
    loc->state_dir = default_state_dir();
    auto wait = std::make_shared<double>(0);
    auto* cmd = app.add_subcommand("status", "Show the device and the daemon's counts; exit 0 once it is ready");
    cmd->add_option("--state-dir", loc->state_dir, "where uroced publishes the device")->capture_default_str();
    cmd->add_option("--device", loc->device, "device name")->capture_default_str();
    cmd->add_option("--wait", *wait, "wait up to this many seconds for the daemon to answer");
    cmd->callback([loc, wait] {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(*wait);
        for (;;) {
            abi::ControlClient probe;
            if (probe.connect(loc->socket_path()) == 0 || std::chrono::steady_clock::now() >= deadline) {
                break;
            }
            // Polling a socket path that does not exist yet: nothing to block on.
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        throw CLI::RuntimeError(show(*loc));
    });
}

}  // namespace uroce::tools
