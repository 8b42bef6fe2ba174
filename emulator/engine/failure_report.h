// Building explained-failure records (failure_event.h) from what the engine
// and the key table know at a failure: free functions for what needs no
// engine state; the Engine's own note_* members are in failure_report.cc.
#pragma once

#include "abi/control.h"
#include "engine/failure_event.h"
#include "mr/access_diagnosis.h"
#include "mr/access_report.h"

namespace uroce::engine {

// The check a key diagnosis names (the enumerations share their first values).
[[nodiscard]] FailureCheck check_of(mr::RefusedCheck check);

// Copies a key diagnosis (what the key names, the overrun, a relaxed MR's
// history) into `r`, with its check.
void fill_diagnosis(uroce_explain_record& r, const mr::AccessDiagnosis& d);

// A stale relaxed-MR access report as a record (kind StaleAccess).
[[nodiscard]] uroce_explain_record stale_access_record(const mr::StaleAccessReport& report);

}  // namespace uroce::engine
