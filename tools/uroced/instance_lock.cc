#include "instance_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <utility>

namespace uroce::daemon {

namespace {

// A holder that is stopping unlinks the file while we wait on it; a few
// rounds always suffice unless daemons are started in a tight loop.
constexpr int kAttempts = 8;

std::optional<pid_t> read_pid(int fd) {
    char text[32] = {};
    const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
    pid_t pid = 0;
    if (n <= 0 || std::from_chars(text, text + n, pid).ec != std::errc{} || pid <= 0) {
        return std::nullopt;
    }
    return pid;
}

}  // namespace

InstanceLock::InstanceLock(const std::filesystem::path& state_dir, const std::string& name)
    : path_(state_dir / (name + ".lock")) {
    for (int i = 0; i < kAttempts; ++i) {
        if (try_once()) {
            return;
        }
    }
    outcome_ = Outcome::Failed;
    problem_ = fmt::format("{}: replaced while locking it, {} times; is uroced being restarted in a loop?",
                           path_.string(), kAttempts);
}

bool InstanceLock::try_once() {
    // Closed on every way out but success (which hands it to fd_).
    UniqueFd owned(::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
    const int fd = owned.get();
    if (!owned.valid()) {
        outcome_ = Outcome::Failed;
        problem_ = fmt::format("cannot open {}: {}", path_.string(), std::strerror(errno));
        return true;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        if (err == EWOULDBLOCK) {
            outcome_ = Outcome::HeldByOther;
            holder_ = read_pid(fd);
        } else {
            outcome_ = Outcome::Failed;
            problem_ = fmt::format("cannot lock {}: {}", path_.string(), std::strerror(err));
        }
        return true;
    }
    // The file we hold must still be the one at the path: a holder that
    // stopped between our open and our flock has unlinked it.
    struct stat held {};
    struct stat named {};
    if (::fstat(fd, &held) != 0 || ::stat(path_.c_str(), &named) != 0 || held.st_ino != named.st_ino ||
        held.st_dev != named.st_dev) {
        return false;
    }
    found_stale_ = held.st_size > 0;  // a pid: its writer died without removing the file
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
        outcome_ = Outcome::Failed;
        problem_ = fmt::format("cannot write {}: {}", path_.string(), std::strerror(errno));
        return true;
    }
    fd_ = std::move(owned);
    outcome_ = Outcome::Acquired;
    return true;
}

InstanceLock::~InstanceLock() {
    if (fd_.valid()) {
        // Unlink before unlocking, so nobody locks a file that is going away
        // (and try_once's inode check catches whoever opened it already).
        ::unlink(path_.c_str());
        fd_.reset();
    }
}

}  // namespace uroce::daemon
