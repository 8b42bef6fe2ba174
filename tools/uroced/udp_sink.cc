#include "udp_sink.h"

#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace uroce::daemon {

namespace {

struct SinkResult {
    UniqueFd fd;
    int error = 0;    // errno of the step that failed
    std::string why;  // empty when the family does not exist here (nobody's problem)
};

SinkResult open_sink(int family, std::uint16_t port) {
    SinkResult r;
    UniqueFd owned(socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    const int fd = owned.get();
    if (!owned.valid()) {
        r.error = errno;
        if (r.error != EAFNOSUPPORT) {
            r.why = std::string("socket: ") + std::strerror(r.error);
        }
        return r;
    }
    auto fail = [&](const char* what) -> SinkResult {
        r.error = errno;
        r.why = std::string(what) + ": " + std::strerror(r.error);
        return std::move(r);  // `owned` closes the socket
    };
    // The filter goes on before bind(), so no datagram is ever queued.
    sock_filter drop_all[] = {BPF_STMT(BPF_RET | BPF_K, 0)};
    const sock_fprog program{.len = 1, .filter = drop_all};
    if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &program, sizeof(program)) != 0) {
        return fail("SO_ATTACH_FILTER");
    }
    const int one = 1;
    if (family == AF_INET6) {
        // Leave IPv4 to the IPv4 socket, so both can bind the port.
        if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) != 0) {
            return fail("IPV6_V6ONLY");
        }
        // RoCEv2 packets may carry a zero UDP checksum over IPv6 too (the
        // ICRC protects them): take such datagrams, and drop them in the
        // filter, rather than count them as checksum errors.
        setsockopt(fd, IPPROTO_UDP, UDP_NO_CHECK6_RX, &one, sizeof(one));
        sockaddr_in6 any{};
        any.sin6_family = AF_INET6;
        any.sin6_port = htons(port);
        any.sin6_addr = in6addr_any;
        if (bind(fd, reinterpret_cast<const sockaddr*>(&any), sizeof(any)) != 0) {
            return fail("bind");
        }
    } else {
        sockaddr_in any{};
        any.sin_family = AF_INET;
        any.sin_port = htons(port);
        any.sin_addr.s_addr = htonl(INADDR_ANY);
        if (bind(fd, reinterpret_cast<const sockaddr*>(&any), sizeof(any)) != 0) {
            return fail("bind");
        }
    }
    r.fd = std::move(owned);
    return r;
}

}  // namespace

UdpSink::UdpSink(std::uint16_t port) {
    SinkResult v4 = open_sink(AF_INET, port);
    SinkResult v6 = open_sink(AF_INET6, port);
    ipv4_fd_ = std::move(v4.fd);
    ipv6_fd_ = std::move(v6.fd);
    if (v4.why.empty() && v6.why.empty()) {
        return;
    }
    const std::string where = "UDP port " + std::to_string(port);
    if (v4.error == EADDRINUSE || v6.error == EADDRINUSE) {
        warning_ = where +
                   " is already taken in this network namespace (a kernel RoCE device such as rdma_rxe, "
                   "or another uroced?): that owner, not uroced, sees the RoCE packets the host kernel "
                   "receives on this interface";
    } else {
        warning_ = "cannot hold " + where + " (" + (v4.why.empty() ? "IPv6 " + v6.why : "IPv4 " + v4.why) +
                   "): the host kernel may answer RoCE packets with ICMP port unreachable";
    }
}

std::unique_ptr<UdpSink> UdpSink::open(std::string& problem, std::uint16_t port) {
    auto sink = std::make_unique<UdpSink>(port);
    problem = sink->warning();
    return sink;
}

UdpSink::~UdpSink() = default;

}  // namespace uroce::daemon
