#include "netns_scope.h"

#include <fcntl.h>
#include <sched.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <stdexcept>

#include "log.h"

namespace uroce::daemon {

namespace {

std::runtime_error netns_error(const std::string& what) {
    return std::runtime_error(what + ": " + std::strerror(errno));
}

}  // namespace

NetnsScope::NetnsScope(const std::string& name) {
    if (name.empty()) {
        return;
    }
    UniqueFd home(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    if (!home.valid()) {
        throw netns_error("cannot open this thread's network namespace (/proc/thread-self/ns/net)");
    }
    const std::string path = "/run/netns/" + name;
    const UniqueFd target(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!target.valid()) {
        throw netns_error("netns " + name + ": cannot open " + path + " (made by `ip netns add " + name + "`)");
    }
    if (::setns(target.get(), CLONE_NEWNET) != 0) {
        throw netns_error("netns " + name + ": cannot enter it (setns needs CAP_SYS_ADMIN)");
    }
    home_ = std::move(home);
}

NetnsScope::~NetnsScope() {
    if (home_.valid() && ::setns(home_.get(), CLONE_NEWNET) != 0) {
        log_error("cannot return to the daemon's own network namespace: {}", std::strerror(errno));
        std::terminate();
    }
}

}  // namespace uroce::daemon
