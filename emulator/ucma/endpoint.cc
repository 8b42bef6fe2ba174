#include "ucma/endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <endian.h>

#include <cstring>

namespace uroce::ucma {

namespace {

// AF_IB (linux/socket.h): not in every libc's headers.
constexpr sa_family_t kAfIb = 27;

// struct sockaddr_ib (rdma/ib.h, librdmacm's infiniband/ib.h), 48 bytes;
// every multi-byte field big-endian but the family and the scope.
struct SockaddrIb {
    std::uint16_t family;
    std::uint16_t pkey;
    std::uint32_t flowinfo;
    std::uint8_t addr[16];
    std::uint64_t sid;
    std::uint64_t sid_mask;
    std::uint64_t scope_id;
};
static_assert(sizeof(SockaddrIb) == 48);

bool all_zero(const wire::Gid& g, std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to; ++i) {
        if (g[i] != 0) {
            return false;
        }
    }
    return true;
}

}  // namespace

bool Endpoint::is_any() const {
    if (family == Family::Ipv4) {
        return all_zero(ip, 12, 16);
    }
    return all_zero(ip, 0, 16);
}

bool Endpoint::is_loopback() const {
    if (family == Family::Ipv4) {
        return ip[12] == 127;
    }
    return (family == Family::Ipv6 || family == Family::Ib) && all_zero(ip, 0, 15) && ip[15] == 1;
}

bool Endpoint::is_multicast() const {
    if (family == Family::Ipv4) {
        return (ip[12] & 0xF0) == 0xE0;  // 224/4
    }
    return family == Family::Ipv6 && ip[0] == 0xFF;
}

bool Endpoint::is_link_local() const { return family == Family::Ipv6 && ip[0] == 0xFE && (ip[1] & 0xC0) == 0x80; }

std::optional<Endpoint> read_sockaddr(const void* bytes, std::size_t size) {
    sa_family_t family = 0;
    if (size < sizeof(family)) {
        return std::nullopt;
    }
    std::memcpy(&family, bytes, sizeof(family));
    Endpoint e;
    if (family == AF_INET && size >= sizeof(sockaddr_in)) {
        sockaddr_in sin{};
        std::memcpy(&sin, bytes, sizeof(sin));
        std::array<std::uint8_t, 4> a{};
        std::memcpy(a.data(), &sin.sin_addr, 4);
        e.family = Family::Ipv4;
        e.ip = wire::ipv4_mapped(a);
        e.port = ntohs(sin.sin_port);
        return e;
    }
    if (family == AF_INET6 && size >= sizeof(sockaddr_in6)) {
        sockaddr_in6 sin6{};
        std::memcpy(&sin6, bytes, sizeof(sin6));
        e.family = Family::Ipv6;
        std::memcpy(e.ip.data(), &sin6.sin6_addr, 16);
        e.port = ntohs(sin6.sin6_port);
        e.scope_id = sin6.sin6_scope_id;
        return e;
    }
    if (family == kAfIb && size >= sizeof(SockaddrIb)) {
        SockaddrIb sib{};
        std::memcpy(&sib, bytes, sizeof(sib));
        e.family = Family::Ib;
        std::memcpy(e.ip.data(), sib.addr, 16);
        e.pkey = ntohs(sib.pkey);
        e.service_id = be64toh(sib.sid);
        e.service_id_mask = be64toh(sib.sid_mask);
        e.port = static_cast<std::uint16_t>(e.service_id & e.service_id_mask);  // cma.c cma_port
        e.scope_id = static_cast<std::uint32_t>(sib.scope_id);
        return e;
    }
    return std::nullopt;
}

std::size_t write_sockaddr(const Endpoint& e, void* out, std::size_t slot) {
    std::memset(out, 0, slot);
    if (e.family == Family::Ipv4 && slot >= sizeof(sockaddr_in)) {
        sockaddr_in sin{};
        sin.sin_family = AF_INET;
        sin.sin_port = htons(e.port);
        std::memcpy(&sin.sin_addr, e.ip.data() + 12, 4);
        std::memcpy(out, &sin, sizeof(sin));
        return sizeof(sin);
    }
    if (e.family == Family::Ipv6 && slot >= sizeof(sockaddr_in6)) {
        sockaddr_in6 sin6{};
        sin6.sin6_family = AF_INET6;
        sin6.sin6_port = htons(e.port);
        sin6.sin6_scope_id = e.scope_id;
        std::memcpy(&sin6.sin6_addr, e.ip.data(), 16);
        std::memcpy(out, &sin6, sizeof(sin6));
        return sizeof(sin6);
    }
    if (e.family == Family::Ib && slot >= sizeof(SockaddrIb)) {
        SockaddrIb sib{};
        sib.family = kAfIb;
        sib.pkey = htons(e.pkey);
        std::memcpy(sib.addr, e.ip.data(), 16);
        sib.sid = htobe64(e.service_id);
        sib.sid_mask = htobe64(e.service_id_mask);
        sib.scope_id = e.scope_id;
        std::memcpy(out, &sib, sizeof(sib));
        return sizeof(sib);
    }
    return 0;
}

}  // namespace uroce::ucma
