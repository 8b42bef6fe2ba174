// `uroce testbed down`: removes what a record says `up` made, whatever
// state it is in. Stops only the daemons recorded and still the ones `up`
// started; removes the namespaces that exist (their links go with them);
// removes what a killed daemon could not (its DPDK runtime directory, its
// owner file beside /dev/infiniband/uverbs_<device>); then the state
// directories and the record.
#pragma once

#include <string>
#include <vector>

#include "record.h"

namespace uroce::tools::testbed {

struct TeardownReport {
    std::vector<std::string> done;      // one line per thing removed or stopped
    std::vector<std::string> problems;  // what could not be removed
    [[nodiscard]] bool clean() const { return problems.empty(); }
};

[[nodiscard]] TeardownReport tear_down(const Record& r);
// Without a record (it was never written, or was deleted by hand): the
// namespaces named as `up` names them for testbed `name`.
[[nodiscard]] TeardownReport tear_down_by_name(const std::string& name);

}  // namespace uroce::tools::testbed
