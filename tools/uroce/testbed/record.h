// The testbed's record, <state_root>/testbed-<name>.json: everything `up`
// made or was about to make, so `down` can remove it even after `up` or a
// daemon crashed half-way. Written before each step, atomically (a
// temporary file renamed over the old one).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plan.h"

namespace uroce::tools::testbed {

// A uroced `up` started: its PID and the time it started (field 22 of
// /proc/PID/stat, clock ticks since boot), which together name it even
// when the PID is reused later; and its command line.
struct DaemonRecord {
    pid_t pid = 0;  // 0: not started
    std::uint64_t start_time = 0;
    std::vector<std::string> argv;
};

struct Record {
    Plan plan;
    std::string uroced;              // the daemon binary
    std::vector<std::string> links;  // network.h describe_links
    // One per plan.nodes entry: the node's uroced; with DaemonShape::Shared
    // every entry names the same process.
    std::vector<DaemonRecord> daemons;
};

// Empty on success, else why it could not be written.
[[nodiscard]] std::string save_record(const Record& r);
// The record at `path`; nullopt with `problem` set when it is missing or
// unreadable.
[[nodiscard]] std::optional<Record> load_record(const std::string& path, std::string& problem);
// The names of the testbeds with a record under `state_root`.
[[nodiscard]] std::vector<std::string> recorded_testbeds(const std::string& state_root);
// The record as JSON text (uroce testbed status --json).
[[nodiscard]] std::string record_json(const Record& r);

}  // namespace uroce::tools::testbed
