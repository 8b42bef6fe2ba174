// `uroce testbed up`: makes the plan real, step by step, recording each step
// before taking it; on any failure it takes down what it made and says
// which step failed and why.
#pragma once

#include <chrono>
#include <string>

#include "record.h"

namespace uroce::tools::testbed {

struct UpResult {
    std::optional<Record> record;  // set when the testbed is up and every daemon ready
    std::string problem;           // why not
};

[[nodiscard]] UpResult bring_up(const Plan& plan, const std::string& uroced, std::chrono::milliseconds ready_timeout);

}  // namespace uroce::tools::testbed
