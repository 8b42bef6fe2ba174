#include "run_command.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/unique_fd.h"

extern char** environ;

namespace uroce::tools::testbed {

CommandResult run_command(const std::vector<std::string>& argv) {
    CommandResult r;
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
        r.output = std::string("pipe: ") + std::strerror(errno);
        return r;
    }
    UniqueFd read_end(pipe_fds[0]);
    UniqueFd write_end(pipe_fds[1]);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDERR_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) {
        args.push_back(const_cast<char*>(a.c_str()));
    }
    args.push_back(nullptr);
    pid_t pid = 0;
    const int err = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    write_end.reset();
    if (err != 0) {
        r.output = std::string("cannot run ") + argv[0] + ": " + std::strerror(err);
        return r;
    }
    char buf[4096];
    for (;;) {
        const ssize_t n = ::read(read_end.get(), buf, sizeof buf);
        if (n > 0) {
            r.output.append(buf, static_cast<std::size_t>(n));
        } else if (n == 0 || errno != EINTR) {
            break;
        }
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

std::string command_line(const std::vector<std::string>& argv) {
    std::string s;
    for (const auto& a : argv) {
        s += (s.empty() ? "" : " ") + a;
    }
    return s;
}

}  // namespace uroce::tools::testbed
