#include "daemon_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>
#include <thread>

#include "abi/control_client.h"

namespace uroce::tools::testbed {

namespace {

using Clock = std::chrono::steady_clock;
// How often a wait looks again: nothing to block on for another process's
// exit (it is not our child after `up` returned) or a socket not yet bound.
constexpr auto kPollInterval = std::chrono::milliseconds(20);

struct ProcStat {
    char state = '?';  // R, S, D, Z, ...
    pid_t ppid = 0;
    std::uint64_t start_time = 0;
};

// /proc/PID/stat: "pid (comm) state ppid ..." with starttime the 22nd
// field (proc(5)); comm may hold spaces and parentheses, so the fields are
// counted from the last ')'.
std::optional<ProcStat> read_stat(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    if (!std::getline(f, text)) {
        return std::nullopt;
    }
    const auto close = text.rfind(')');
    if (close == std::string::npos) {
        return std::nullopt;
    }
    std::istringstream rest(text.substr(close + 1));
    ProcStat s;
    rest >> s.state >> s.ppid;
    std::string skip;
    for (int field = 5; field < 22; ++field) {  // fields 5 (pgrp) to 21
        rest >> skip;
    }
    rest >> s.start_time;
    if (!rest) {
        return std::nullopt;
    }
    return s;
}

std::vector<std::string> read_cmdline(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
    std::vector<std::string> argv;
    std::string arg;
    while (std::getline(f, arg, '\0')) {
        argv.push_back(arg);
    }
    return argv;
}

std::vector<std::string> in_netns(const std::string& netns, const std::vector<std::string>& argv) {
    std::vector<std::string> out = {"ip", "netns", "exec", netns};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
}

// Reaps `pid` if it is our child (during `up`); harmless otherwise.
void reap_if_child(pid_t pid) {
    int status = 0;
    (void)::waitpid(pid, &status, WNOHANG);
}

[[noreturn]] void exec_in_child(const std::vector<std::string>& argv, const std::string& log_path) {
    ::setsid();  // not in the terminal's process group: a ^C to `up` later does not reach it
    const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (null < 0 || log < 0) {
        ::_exit(126);
    }
    ::dup2(null, STDIN_FILENO);
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) {
        args.push_back(const_cast<char*>(a.c_str()));
    }
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
}

}  // namespace

DaemonState daemon_state(const DaemonRecord& d) {
    if (d.pid <= 0) {
        return DaemonState::Gone;
    }
    const auto st = read_stat(d.pid);
    if (!st) {
        return DaemonState::Gone;
    }
    if (st->start_time != d.start_time) {
        return DaemonState::NotOurs;
    }
    if (st->state == 'Z' || st->state == 'X') {
        return DaemonState::Gone;
    }
    if (st->ppid == ::getpid()) {
        return DaemonState::Running;  // our child (during `up`), maybe not exec'ed yet
    }
    // Same start time: the same process, as uroced or (for the first
    // milliseconds) as the `ip netns exec` about to become it.
    const auto cmdline = read_cmdline(d.pid);
    if (cmdline == d.argv || (cmdline.size() > 4 && cmdline[0] == "ip" &&
                              std::equal(d.argv.begin(), d.argv.end(), cmdline.begin() + 4, cmdline.end()))) {
        return DaemonState::Running;
    }
    return cmdline.empty() ? DaemonState::Gone : DaemonState::NotOurs;
}

const char* daemon_state_name(DaemonState s) {
    switch (s) {
        case DaemonState::Running:
            return "running";
        case DaemonState::Gone:
            return "gone";
        case DaemonState::NotOurs:
            return "gone (its PID is another process now)";
    }
    return "?";
}

DaemonRecord start_daemon(const std::string& netns, const std::vector<std::string>& argv,
                          const std::string& log_path, std::string& problem) {
    DaemonRecord d;
    d.argv = argv;
    const std::vector<std::string> full = in_netns(netns, argv);
    const pid_t pid = ::fork();
    if (pid < 0) {
        problem = std::string("fork: ") + std::strerror(errno);
        return d;
    }
    if (pid == 0) {
        exec_in_child(full, log_path);
    }
    const auto st = read_stat(pid);  // the child exists until we reap it
    if (!st) {
        problem = "the daemon's process vanished at once";
        return d;
    }
    d.pid = pid;
    d.start_time = st->start_time;
    return d;
}

Readiness wait_ready(const DaemonRecord& d, const std::string& socket_path, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
        // The daemon is our child here: waitpid says exactly when it ends.
        // (Its command line is no test yet: until `ip` has exec'ed it, the
        // child runs our own.)
        int status = 0;
        const pid_t ended = ::waitpid(d.pid, &status, WNOHANG);
        if (ended == d.pid || (ended < 0 && errno == ECHILD && daemon_state(d) == DaemonState::Gone)) {
            return Readiness::Exited;
        }
        abi::ControlClient probe;
        if (probe.connect(socket_path) == 0) {
            // Answering, so exec'ed: now it must be the recorded uroced.
            return daemon_state(d) == DaemonState::Running ? Readiness::Ready : Readiness::Exited;
        }
        if (Clock::now() >= deadline) {
            return Readiness::TimedOut;
        }
        std::this_thread::sleep_for(kPollInterval);
    }
}

namespace {

bool wait_gone(const DaemonRecord& d, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
        reap_if_child(d.pid);
        if (daemon_state(d) != DaemonState::Running) {
            return true;
        }
        if (Clock::now() >= deadline) {
            return false;
        }
        std::this_thread::sleep_for(kPollInterval);
    }
}

}  // namespace

StopOutcome stop_daemon(const DaemonRecord& d, std::chrono::milliseconds grace) {
    switch (daemon_state(d)) {
        case DaemonState::Gone:
            return StopOutcome::WasGone;
        case DaemonState::NotOurs:
            return StopOutcome::NotOurs;
        case DaemonState::Running:
            break;
    }
    // uroced stops cleanly on SIGTERM: clients told, its files removed
    // (docs/daemon.md).
    ::kill(d.pid, SIGTERM);
    if (wait_gone(d, grace)) {
        return StopOutcome::Stopped;
    }
    ::kill(d.pid, SIGKILL);
    // SIGKILL takes effect at once unless the process sleeps in the kernel.
    return wait_gone(d, std::chrono::seconds(5)) ? StopOutcome::Killed : StopOutcome::Stuck;
}

const char* stop_outcome_name(StopOutcome s) {
    switch (s) {
        case StopOutcome::Stopped:
            return "stopped";
        case StopOutcome::Killed:
            return "killed (did not stop on SIGTERM)";
        case StopOutcome::WasGone:
            return "was not running";
        case StopOutcome::NotOurs:
            return "left alone (its PID is another process now)";
        case StopOutcome::Stuck:
            return "still there after SIGKILL";
    }
    return "?";
}

std::string log_tail(const std::string& path, std::size_t lines) {
    std::ifstream f(path);
    std::deque<std::string> last;
    std::string line;
    while (std::getline(f, line)) {
        last.push_back(line);
        if (last.size() > lines) {
            last.pop_front();
        }
    }
    std::string out;
    for (const auto& l : last) {
        out += "    " + l + "\n";
    }
    return out;
}

}  // namespace uroce::tools::testbed
