// The reply of EXPLAIN_FETCH (abi/control.h): the explained-failure
// records after a sequence, filtered by QP and by who asks.
#pragma once

#include <sys/types.h>

#include "abi/control.h"
#include "event_log.h"

namespace uroce::daemon {

// Who may read which records: everything (root, the daemon's own user), or
// the records of QPs and pools whose client had this uid.
struct ExplainReader {
    bool sees_all = false;
    uid_t uid = 0;
};

[[nodiscard]] uroce_ctrl_explain_reply explain_reply(const EventLog& log, const uroce_ctrl_explain_fetch& request,
                                                     const ExplainReader& reader);

}  // namespace uroce::daemon
