// Starting, recognising and stopping the uroced of a testbed node. A PID on
// its own names a process only while it lives: `down` acts on a recorded
// PID only when that process still started at the recorded time and runs
// the recorded command line, so a PID the kernel gave to another program
// since is never signalled.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "plan.h"
#include "record.h"

namespace uroce::tools::testbed {

enum class DaemonState {
    Running,  // the recorded process, alive
    Gone,     // exited (or a zombie nobody reaped yet)
    NotOurs,  // the PID now belongs to another process
};

[[nodiscard]] DaemonState daemon_state(const DaemonRecord& d);
[[nodiscard]] const char* daemon_state_name(DaemonState s);

// Starts `argv` inside `netns` (through `ip netns exec`, as the dataflow
// tests do, so the recorded PID is uroced's own once ip has exec'ed it), in
// a session of its own, its output appended to `log_path`. The returned
// record has pid 0 and `problem` set when it could not start.
[[nodiscard]] DaemonRecord start_daemon(const std::string& netns, const std::vector<std::string>& argv,
                                        const std::string& log_path, std::string& problem);

enum class Readiness { Ready, Exited, TimedOut };
// Waits until the daemon answers on `socket_path` (as `uroce status --wait`
// does), it exits, or `timeout` passes.
[[nodiscard]] Readiness wait_ready(const DaemonRecord& d, const std::string& socket_path,
                                   std::chrono::milliseconds timeout);

enum class StopOutcome {
    Stopped,  // stopped by SIGTERM within the grace time
    Killed,   // needed SIGKILL
    WasGone,  // not running any more (crashed, killed, or stopped by someone)
    NotOurs,  // the PID belongs to another process now: left alone
    Stuck,    // still there after SIGKILL (uninterruptible sleep)
};
[[nodiscard]] StopOutcome stop_daemon(const DaemonRecord& d, std::chrono::milliseconds grace);
[[nodiscard]] const char* stop_outcome_name(StopOutcome s);

// The last `lines` lines of a log file, for error messages.
[[nodiscard]] std::string log_tail(const std::string& path, std::size_t lines = 15);

}  // namespace uroce::tools::testbed
