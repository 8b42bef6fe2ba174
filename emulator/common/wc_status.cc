#include "wc_status.h"

#include <array>

namespace uroce {

std::string_view to_string(WcStatus s) {
    // The names ibv_wc_status_str() uses, so logs read the same as rdma-core's.
    static constexpr std::array<std::string_view, 22> kNames = {
        "success",
        "local length error",
        "local QP operation error",
        "local EE context operation error",
        "local protection error",
        "Work Request Flushed Error",
        "memory management operation error",
        "bad response error",
        "local access error",
        "remote invalid request error",
        "remote access error",
        "remote operation error",
        "transport retry counter exceeded",
        "RNR retry counter exceeded",
        "local RDD violation error",
        "remote invalid RD request",
        "aborted error",
        "invalid EE context number",
        "invalid EE context state",
        "fatal error",
        "response timeout error",
        "general error",
    };
    const auto i = static_cast<std::size_t>(s);
    return i < kNames.size() ? kNames[i] : "unknown";
}

}  // namespace uroce
