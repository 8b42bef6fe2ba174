// Work-completion status codes. The numbers are those of enum ibv_wc_status
// (rdma-core verbs.h, from IBA 11.4.2.1), so a CQE can carry them to the
// provider unchanged; the engine itself does not include rdma-core headers.
#pragma once

#include <cstdint>
#include <string_view>

namespace uroce {

enum class WcStatus : std::uint8_t {
    Success = 0,
    LocLenErr = 1,
    LocQpOpErr = 2,
    LocEecOpErr = 3,
    LocProtErr = 4,
    WrFlushErr = 5,
    MwBindErr = 6,
    BadRespErr = 7,
    LocAccessErr = 8,
    RemInvReqErr = 9,
    RemAccessErr = 10,
    RemOpErr = 11,
    RetryExcErr = 12,
    RnrRetryExcErr = 13,
    LocRddViolErr = 14,
    RemInvRdReqErr = 15,
    RemAbortErr = 16,
    InvEecnErr = 17,
    InvEecStateErr = 18,
    FatalErr = 19,
    RespTimeoutErr = 20,
    GeneralErr = 21,
};

[[nodiscard]] std::string_view to_string(WcStatus s);

}  // namespace uroce
