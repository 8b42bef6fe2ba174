// The device as libibverbs discovers it without kernel RDMA: a sysfs-style
// tree under <state-dir>/sys (clients point SYSFS_PATH at it); the device
// node beside it is device_node.h's. docs/daemon.md lists every file; the
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
    // Writes the tree under `root` (created if missing), after removing
    // what a daemon of the same name that did not stop cleanly left there
    // (the caller holds the InstanceLock, so no live daemon owns it).
    // Throws std::runtime_error with the path on failure.
    SysfsTree(std::filesystem::path root, const SysfsDevice& dev);
    // Removes the device's entries, and the shared skeleton (class
    // directories, abi_version, `root` itself) once no other device of
    // the state directory uses it.
    ~SysfsTree();
    SysfsTree(const SysfsTree&) = delete;
    SysfsTree& operator=(const SysfsTree&) = delete;

    [[nodiscard]] const std::filesystem::path& root() const { return root_; }
    [[nodiscard]] std::string uverbs_name() const { return "uverbs_" + name_; }
    // Whether the constructor found (and removed) entries of a previous daemon.
    [[nodiscard]] bool removed_stale() const { return removed_stale_; }

private:
    std::filesystem::path root_;
    std::string name_;
    bool removed_stale_ = false;
};

}  // namespace uroce::daemon
