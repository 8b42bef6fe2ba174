// An rdma_cm address: IPv4 or IPv6 address and port, in the GID form the
// device's GID table uses (IPv4 as ::ffff:a.b.c.d), read from and written
// to the sockaddr slots of the ucma ABI (rdma/rdma_user_cm.h): a
// sockaddr_in6-sized slot (legacy commands) or a sockaddr_storage (AF_IB set).
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <optional>

#include "wire/headers.h"

namespace uroce::ucma {

enum class Family : std::uint8_t { Unspecified, Ipv4, Ipv6, Ib };

struct Endpoint {
    Family family = Family::Unspecified;
    wire::Gid ip{};              // ::ffff:a.b.c.d for IPv4; AF_IB: the GID
    std::uint16_t port = 0;      // host order; AF_IB: the service ID's low 16 bits under its mask
    std::uint32_t scope_id = 0;  // IPv6 link-local: the interface
    // AF_IB only (struct sockaddr_ib, host order): the service ID and its
    // mask (the port space lives in bits 16-31, RDMA_IB_IP_PS_*), the P_Key.
    std::uint64_t service_id = 0;
    std::uint64_t service_id_mask = 0;
    std::uint16_t pkey = 0;
    [[nodiscard]] bool is_any() const;       // 0.0.0.0 or ::
    [[nodiscard]] bool is_loopback() const;  // 127/8 or ::1
    [[nodiscard]] bool is_multicast() const;
    [[nodiscard]] bool is_link_local() const;  // fe80::/10
    friend bool operator==(const Endpoint&, const Endpoint&) = default;
};

// Reads the sockaddr at `bytes` (at most `size` bytes available). Nothing
// when the family is unknown or the size too small for it.
[[nodiscard]] std::optional<Endpoint> read_sockaddr(const void* bytes, std::size_t size);

// Writes `e` as sockaddr_in, sockaddr_in6 or sockaddr_ib at `out` (zeroing
// `slot` bytes first) and returns its size (16, 28 or 48); 0 for
// Unspecified or a slot too small.
std::size_t write_sockaddr(const Endpoint& e, void* out, std::size_t slot);

}  // namespace uroce::ucma
