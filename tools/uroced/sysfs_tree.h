// The device as libibverbs discovers it without kernel RDMA: a sysfs-style
// tree under <state-dir>/sys (clients point SYSFS_PATH at it) and a device
// node /dev/infiniband/uverbs_<name>. docs/daemon.md lists every file; the
// facts behind them are in docs/provider.md.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "device/gid_table.h"

namespace uroce::daemon {

struct SysfsDevice {
    std::string name;            // ibdev, e.g. uroce0
    std::uint64_t node_guid = 0;
    std::string board_id = "uroce software RoCE";
    std::string control_socket;  // absolute path, for the provider
    std::vector<device::GidEntry> gids;
};

class SysfsTree {
public:
    // Writes the tree under `root` (created if missing). Throws
    // std::runtime_error with the path on failure.
    SysfsTree(std::filesystem::path root, const SysfsDevice& dev);
    // Removes what the constructor created.
    ~SysfsTree();
    SysfsTree(const SysfsTree&) = delete;
    SysfsTree& operator=(const SysfsTree&) = delete;

    [[nodiscard]] const std::filesystem::path& root() const { return root_; }
    [[nodiscard]] std::string uverbs_name() const { return "uverbs_" + name_; }

private:
    std::filesystem::path root_;
    std::string name_;
};

// Creates /dev/infiniband/uverbs_<name> as a symlink to /dev/null (what
// libibverbs needs to open; docs/provider.md). Returns an empty string on
// success, else a message saying what to do instead.
[[nodiscard]] std::string ensure_device_node(const std::string& uverbs_name, bool& created);
void remove_device_node(const std::string& uverbs_name);

}  // namespace uroce::daemon
