// Human-readable text for addresses, headers and packets, for traces and for
// `uroce decode`. Every extension header prints itself as name(field=value...).
#pragma once

#include <string>

#include "headers.h"
#include "packet.h"

namespace uroce::wire {

[[nodiscard]] std::string to_string(const MacAddr& mac);
// IPv4-mapped GIDs print as dotted quads, other GIDs in RFC 5952 form.
[[nodiscard]] std::string ip_to_string(const Gid& gid);
[[nodiscard]] std::string describe_syndrome(std::uint8_t syndrome);

[[nodiscard]] std::string to_string(const Bth& h);
[[nodiscard]] std::string to_string(const Reth& h);
[[nodiscard]] std::string to_string(const AtomicEth& h);
[[nodiscard]] std::string to_string(const Aeth& h);
[[nodiscard]] std::string to_string(const AtomicAckEth& h);
[[nodiscard]] std::string to_string(const ImmDt& h);
[[nodiscard]] std::string to_string(const Ieth& h);
[[nodiscard]] std::string to_string(const Deth& h);

// The opcode and every extension header of `p`, space-separated.
[[nodiscard]] std::string describe_transport(const Packet& p);

}  // namespace uroce::wire
