#include "access_report.h"

#include <fmt/format.h>

#include "wire/describe.h"

namespace uroce::mr {

namespace {

const char* op_name(RemoteOp op) {
    switch (op) {
        case RemoteOp::Read:
            return "RDMA READ";
        case RemoteOp::Write:
            return "RDMA WRITE";
        case RemoteOp::Atomic:
            return "ATOMIC";
        case RemoteOp::Local:
            return "local SGE";
    }
    return "?";
}

}  // namespace

std::string describe(const StaleAccessReport& r) {
    const double since_dereg_us =
        r.seen_ns >= r.deregistered_ns ? static_cast<double>(r.seen_ns - r.deregistered_ns) / 1e3 : 0.0;
    return fmt::format(
        "stale relaxed MR access: {} of {} bytes at 0x{:x} through key 0x{:08x} (pd {}) by qp 0x{:06x} from {} "
        "qp 0x{:06x}; MR registered [0x{:x}, +{}) (granted [0x{:x}, +{}), access 0x{:x}) at {} ns, deregistered at "
        "{} ns, not yet invalidated ({:.1f} us after deregistration)",
        op_name(r.op), r.length, r.va, r.key, r.pd, r.qpn, wire::ip_to_string(r.peer.gid), r.peer.qpn, r.user_addr,
        r.user_length, r.granted_addr, r.granted_length, r.access_flags, r.registered_ns, r.deregistered_ns,
        since_dereg_us);
}

}  // namespace uroce::mr
