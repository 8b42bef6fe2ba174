// Control-protocol handlers for ops 110-119 (abi/control.h): verbs beyond
// the core set. ADVISE_MR checks one SGE of ibv_advise_mr(3) against the MR
// table (mr/mr_prefetch.cc). Requests arrive validated for size.
#include <cerrno>

#include "control_server.h"
#include "messages.h"

namespace uroce::daemon {

std::size_t ControlServer::dispatch_verbs_ext(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                              std::uint8_t* out, int& /*reply_fd*/) {
    switch (h.op) {
        case UROCE_CTRL_ADVISE_MR: {
            const auto req = read_as<uroce_ctrl_advise_mr>(msg);
            if (req.write > 1) {
                return status_only(out, h, EINVAL);
            }
            const mr::PrefetchTarget t =
                device_.mrs().prefetch_target(c.client, req.pd, req.lkey, req.addr, req.length, req.write == 1);
            uroce_ctrl_advise_mr_reply rep{};
            rep.host_addr = t.host;
            return write_reply(out, h, t.error, rep);
        }
        default:
            return status_only(out, h, EOPNOTSUPP);
    }
}

}  // namespace uroce::daemon
