// The inverse of the builder: every field of a parsed packet, as the inputs
// build_frame takes. build_frame(fields_of(p)) reproduces p's frame byte for
// byte (Ethernet padding after the IP packet aside), which is how the wire
// layer is tested against rdma_rxe's captures.
#pragma once

#include "build.h"
#include "packet.h"

namespace uroce::wire {

[[nodiscard]] PacketFields fields_of(const Packet& p);

}  // namespace uroce::wire
