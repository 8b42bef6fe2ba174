// Runs the calling thread in another network namespace for a scope:
// setns(2) into /run/netns/<name> (where `ip netns add` binds it) and back
// to the thread's own namespace at the end. Sockets keep the namespace they
// were made in, so a port opened inside the scope (af_packet's sockets, the
// UDP sink) stays on that namespace's interfaces after it; a loop in the
// daemon's own namespace serves them all (docs/daemon.md "Several devices in
// one daemon").
#pragma once

#include <string>

#include "common/unique_fd.h"

namespace uroce::daemon {

class NetnsScope {
public:
    // An empty name: stays where it is. Throws std::runtime_error when the
    // namespace is not there or setns is refused (needs CAP_SYS_ADMIN).
    explicit NetnsScope(const std::string& name);
    // Back to the namespace the thread was in; std::terminate()s if the
    // kernel refuses, since the loop would then serve from the wrong one.
    ~NetnsScope();
    NetnsScope(const NetnsScope&) = delete;
    NetnsScope& operator=(const NetnsScope&) = delete;

private:
    UniqueFd home_;  // the thread's own namespace, while inside another
};

}  // namespace uroce::daemon
