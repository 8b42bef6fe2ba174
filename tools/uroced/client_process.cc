#include "client_process.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <string_view>

namespace uroce::daemon {

namespace {

// SO_PEERPIDFD (include/uapi/asm-generic/socket.h, Linux 6.5), which the
// distribution's headers may lack.
constexpr int kSoPeerPidfd = 77;

enum class ProcFile : std::uint8_t { Mem, Maps };

// What the file behind `fd` is called, as /proc/self/fd shows it.
std::string name_of(int fd) {
    const std::string link = "/proc/self/fd/" + std::to_string(fd);
    char target[256];
    const ssize_t n = ::readlink(link.c_str(), target, sizeof target);
    if (n <= 0 || static_cast<std::size_t>(n) >= sizeof target) {
        return {};
    }
    return std::string(target, static_cast<std::size_t>(n));
}

bool ends_with(std::string_view s, std::string_view tail) {
    return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

bool is_proc_file(int fd, ProcFile kind) {
    struct statfs fs {};
    struct stat st {};
    if (::fstatfs(fd, &fs) != 0 || fs.f_type != PROC_SUPER_MAGIC || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        return false;
    }
    const int mode = ::fcntl(fd, F_GETFL);
    if (mode < 0) {
        return false;
    }
    const std::string name = name_of(fd);
    switch (kind) {
        case ProcFile::Mem:
            return (mode & O_ACCMODE) == O_RDWR && ends_with(name, "/mem");
        case ProcFile::Maps:
            return ends_with(name, "/maps");
    }
    return false;
}

UniqueFd copy_of(int fd) { return UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 0)); }

}  // namespace

int take_process_files(std::span<const int> fds, ProcessFiles& out) {
    if (fds.size() != 2 || !is_proc_file(fds[0], ProcFile::Mem) || !is_proc_file(fds[1], ProcFile::Maps)) {
        return EINVAL;
    }
    ProcessFiles files{copy_of(fds[0]), copy_of(fds[1])};
    if (!files.mem.valid() || !files.maps.valid()) {
        return EMFILE;
    }
    out = std::move(files);
    return 0;
}

UniqueFd peer_pidfd(int socket, pid_t pid) {
    int pidfd = -1;
    socklen_t len = sizeof pidfd;
    if (::getsockopt(socket, SOL_SOCKET, kSoPeerPidfd, &pidfd, &len) == 0 && pidfd >= 0) {
        return UniqueFd(pidfd);
    }
    // Older kernels: the pid could have been reused since connect, but the
    // pidfd only decides when to look at the client's address space, which
    // its own files tell reliably.
    if (pid > 0) {
        return UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    }
    return {};
}

}  // namespace uroce::daemon
