#include "address_values.h"

namespace uroce::qp {

bool is_multicast_gid(const std::array<std::uint8_t, 16>& gid) {
    if (gid[0] == 0xFF) {
        return true;
    }
    // ::ffff:a.b.c.d (RFC 4291 2.5.5.2)
    for (int i = 0; i < 10; ++i) {
        if (gid[i] != 0) {
            return false;
        }
    }
    return gid[10] == 0xFF && gid[11] == 0xFF && (gid[12] & 0xF0) == 0xE0;
}

AhAttr as_kernel_takes(AhAttr ah) {
    ah.flow_label &= kFlowLabelMask;
    ah.sl &= kSlMask;
    if (!is_multicast_gid(ah.dgid)) {
        ah.hop_limit = kRouteHopLimit;
    }
    return ah;
}

}  // namespace uroce::qp
