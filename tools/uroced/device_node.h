// /dev/infiniband/uverbs_<name>: the node libibverbs insists on opening for a
// device it lists (a symlink to /dev/null will do; docs/provider.md). /dev is
// shared by daemons that differ only in their network namespace and state
// directory, so two uroced may publish the same name: the node is shared
// and the last of them to stop removes it.
//
// Each daemon that uses the node holds an owner file beside it,
// /dev/infiniband/.uverbs_<name>.owner-<pid>-<n>, flock(2)ed for its life;
// /dev/infiniband/.uverbs_<name>.made-by-uroced says a uroced created the
// node (one an administrator made is never removed). Owner files nobody
// holds are a crashed daemon's: whoever comes next removes them, and with
// the last of them a node no live daemon uses. Every change happens under
// flock on the /dev/infiniband directory itself, so starts and stops of
// several daemons never interleave.
#pragma once

#include <string>

#include "common/unique_fd.h"

namespace uroce::daemon {

class DeviceNode {
public:
    // Makes sure the node exists and registers this daemon as a user.
    explicit DeviceNode(std::string uverbs_name);
    // Unregisters; removes the node when no other live daemon uses it and a
    // uroced made it.
    ~DeviceNode();
    DeviceNode(const DeviceNode&) = delete;
    DeviceNode& operator=(const DeviceNode&) = delete;

    // Empty when the node is there; else what to do instead (not root).
    [[nodiscard]] const std::string& problem() const { return problem_; }
    // Whether a node (and owner files) of a daemon that died were found and removed.
    [[nodiscard]] bool removed_stale() const { return removed_stale_; }

private:
    std::string uverbs_name_;
    std::string owner_path_;  // empty: not registered (the directory is not ours to write)
    UniqueFd owner_fd_;
    std::string problem_;
    bool removed_stale_ = false;
};

}  // namespace uroce::daemon
