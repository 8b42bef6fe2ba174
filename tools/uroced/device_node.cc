#include "device_node.h"

#include <fcntl.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

namespace uroce::daemon {

namespace fs = std::filesystem;

namespace {

const fs::path kNodeDir = "/dev/infiniband";

std::string node_path(const std::string& uverbs_name) { return (kNodeDir / uverbs_name).string(); }
std::string owner_prefix(const std::string& uverbs_name) { return "." + uverbs_name + ".owner-"; }
std::string made_marker(const std::string& uverbs_name) {
    return (kNodeDir / ("." + uverbs_name + ".made-by-uroced")).string();
}

// flock(2) on /dev/infiniband for as long as it lives; a no-op when the
// directory cannot be opened (then nothing here can be written either).
class DirectoryLock {
public:
    DirectoryLock() : fd_(::open(kNodeDir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
        if (fd_.valid()) {
            ::flock(fd_.get(), LOCK_EX);
        }
    }

private:
    UniqueFd fd_;  // closing it releases the lock
};

// Whether some process holds the owner file at `path`.
bool held_by_a_live_daemon(const fs::path& path) {
    const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd.valid()) {
        return false;
    }
    return ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
}

// Removes owner files nobody holds (their daemons died) except `own`;
// returns how many live owners remain besides `own`, and whether any file was removed.
int prune_owners(const std::string& uverbs_name, const std::string& own, bool& removed) {
    const std::string prefix = owner_prefix(uverbs_name);
    int live = 0;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(kNodeDir, ec)) {
        const std::string file = entry.path().filename().string();
        if (file.rfind(prefix, 0) != 0 || entry.path().string() == own) {
            continue;
        }
        if (held_by_a_live_daemon(entry.path())) {
            ++live;
        } else {
            fs::remove(entry.path(), ec);
            removed = true;
        }
    }
    return live;
}

// The node and its marker, when a uroced made the node.
bool remove_node_we_made(const std::string& uverbs_name) {
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(made_marker(uverbs_name), ec))) {
        return false;
    }
    fs::remove(node_path(uverbs_name), ec);
    fs::remove(made_marker(uverbs_name), ec);
    return true;
}

std::string cannot_create(const std::string& uverbs_name, int err) {
    const std::string node = node_path(uverbs_name);
    return fmt::format(
        "cannot create {} ({}): libibverbs will not list the device. As root, run once:\n"
        "  mkdir -p /dev/infiniband && ln -s /dev/null {}\n"
        "or, unprivileged, run each client inside a private user and mount namespace (docs/daemon.md):\n"
        "  unshare -Urm sh -ec 'mkdir -p /tmp/hostdev && mount --rbind /dev /tmp/hostdev &&\n"
        "    mount -t tmpfs tmpfs /dev && for n in null zero random urandom; do touch /dev/$n;\n"
        "    mount --bind /tmp/hostdev/$n /dev/$n; done && mkdir /dev/infiniband &&\n"
        "    ln -s /dev/null /dev/infiniband/{} && exec \"$@\"' sh uroce exec -- PROGRAM",
        node, std::error_code(err, std::generic_category()).message(), node, uverbs_name);
}

}  // namespace

DeviceNode::DeviceNode(std::string uverbs_name) : uverbs_name_(std::move(uverbs_name)) {
    std::error_code ec;
    fs::create_directories(kNodeDir, ec);
    DirectoryLock lock;
    bool pruned = false;
    const int others = prune_owners(uverbs_name_, "", pruned);
    if (others == 0 && remove_node_we_made(uverbs_name_)) {
        pruned = true;  // a node only dead daemons used
    }
    removed_stale_ = pruned;

    // Our owner file: pid, then the clock, since daemons in other pid
    // namespaces may have our pid.
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    const std::string owner = (kNodeDir / fmt::format("{}{}-{}{:09}", owner_prefix(uverbs_name_), ::getpid(),
                                                      now.tv_sec, now.tv_nsec))
                                  .string();
    owner_fd_.reset(::open(owner.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (owner_fd_.valid()) {
        ::flock(owner_fd_.get(), LOCK_EX);
        owner_path_ = owner;
    }

    const std::string node = node_path(uverbs_name_);
    if (fs::is_symlink(node, ec) || fs::exists(node, ec)) {
        return;  // another daemon's, or an administrator's
    }
    if (::symlink("/dev/null", node.c_str()) != 0) {
        problem_ = cannot_create(uverbs_name_, errno);
        return;
    }
    // Only its existence counts: created and closed at once.
    const UniqueFd marker(::open(made_marker(uverbs_name_).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
}

DeviceNode::~DeviceNode() {
    if (!owner_fd_.valid()) {
        return;  // not registered: nothing of ours to undo
    }
    DirectoryLock lock;
    std::error_code ec;
    fs::remove(owner_path_, ec);
    owner_fd_.reset();
    bool pruned = false;
    if (prune_owners(uverbs_name_, owner_path_, pruned) == 0) {
        remove_node_we_made(uverbs_name_);
    }
}

}  // namespace uroce::daemon
