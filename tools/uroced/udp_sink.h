// Keeps the host kernel quiet about RoCE packets. On a kernel-interface port
// (net_af_packet, net_af_xdp in copy mode, net_tap) the kernel's own IP stack
// receives a copy of every packet addressed to the interface's IP. With no
// socket on UDP 4791 it answers each RoCE packet with an ICMP port
// unreachable (RFC 1122 3.2.2.1), which the peer's kernel turns into errors.
//
// The sink binds UDP 4791 (IPv4 and IPv6, any address) in the daemon's network
// namespace and attaches a classic BPF filter that accepts nothing
// (SO_ATTACH_FILTER with "ret #0"): the kernel finds a socket, so it sends no
// ICMP, and the filter drops every datagram before it is queued, so the
// socket costs no memory and nobody has to read it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/unique_fd.h"
#include "wire/headers.h"

namespace uroce::daemon {

class UdpSink {
public:
    // Opens the sockets in the calling thread's network namespace. Never
    // throws: what could not be done is in warning().
    explicit UdpSink(std::uint16_t port = wire::kRoceV2Port);
    ~UdpSink();
    // The same, with warning() copied into `problem` (empty when all is well).
    [[nodiscard]] static std::unique_ptr<UdpSink> open(std::string& problem,
                                                       std::uint16_t port = wire::kRoceV2Port);
    UdpSink(const UdpSink&) = delete;
    UdpSink& operator=(const UdpSink&) = delete;

    [[nodiscard]] bool ipv4_open() const { return ipv4_fd_.valid(); }
    [[nodiscard]] bool ipv6_open() const { return ipv6_fd_.valid(); }
    // Empty when every family available here is covered; otherwise one line
    // for the log saying what is not and why (the port already taken by a
    // kernel RDMA device such as rdma_rxe, say).
    [[nodiscard]] const std::string& warning() const { return warning_; }

private:
    UniqueFd ipv4_fd_;
    UniqueFd ipv6_fd_;
    std::string warning_;
};

}  // namespace uroce::daemon
