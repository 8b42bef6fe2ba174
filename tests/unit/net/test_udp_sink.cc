// UdpSink, in a private network namespace: with no socket on UDP 4791 the
// kernel answers a datagram with ICMP port unreachable; with the sink open it
// does not, and the datagram is dropped by the filter (counted in the
// socket's drops, never queued). A port already taken gives a warning.
//
// Each case runs in a child process that unshares its network namespace
// (root, or an unprivileged user namespace where the host allows them);
// otherwise the cases report themselves skipped.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/errqueue.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "udp_sink.h"

namespace uroce::daemon {
namespace {

constexpr std::uint16_t kRocePort = 4791;
constexpr std::uint16_t kClosedPort = 4792;  // nobody listens: always answered
constexpr const char* kSkip = "SKIP: ";

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

bool write_file(const std::string& path, const std::string& text) {
    std::ofstream f(path);
    f << text;
    return static_cast<bool>(f.flush());
}

// Runs `body` in a child process inside a new network namespace with its
// loopback up; returns what body returned ("" when all is well), or
// kSkip + reason when no namespace could be made.
std::string in_private_netns(const std::function<std::string()>& body) {
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
        return errno_text("pipe2");
    }
    const pid_t pid = fork();
    if (pid == 0) {
        close(pipe_fds[0]);
        std::string result;
        if (unshare(CLONE_NEWNET) != 0) {
            const uid_t uid = getuid();
            const gid_t gid = getgid();
            if (unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) {
                result = kSkip + errno_text("cannot make a network namespace (needs root or user namespaces)");
            } else {
                write_file("/proc/self/setgroups", "deny");
                write_file("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1");
                write_file("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1");
            }
        }
        if (result.empty()) {
            const int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
            ifreq ifr{};
            std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
            ifr.ifr_flags = IFF_UP;
            if (s < 0 || ioctl(s, SIOCSIFFLAGS, &ifr) != 0) {
                result = kSkip + errno_text("cannot bring lo up in the new namespace");
            } else {
                result = body();
            }
            close(s);
        }
        [[maybe_unused]] const ssize_t w = write(pipe_fds[1], result.data(), result.size());
        _exit(0);
    }
    close(pipe_fds[1]);
    if (pid < 0) {
        close(pipe_fds[0]);
        return errno_text("fork");
    }
    std::string out;
    char buf[512];
    ssize_t n = 0;
    while ((n = read(pipe_fds[0], buf, sizeof buf)) > 0) {
        out.append(buf, static_cast<std::size_t>(n));
    }
    close(pipe_fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        return "the child died (wait status " + std::to_string(status) + ")";
    }
    return out;
}

#define RUN_IN_PRIVATE_NETNS(body)                           \
    do {                                                     \
        const std::string result_ = in_private_netns(body);  \
        if (result_.rfind(kSkip, 0) == 0) {                  \
            GTEST_SKIP() << result_.substr(6);               \
        }                                                    \
        EXPECT_EQ(result_, "");                              \
    } while (false)

struct Answers {
    bool roce_port_unreachable = false;
    std::string error;
};

// Sends one datagram to loopback:4791, then one to a closed port, and reads
// the ICMP errors the kernel reports back (IP_RECVERR) until the closed
// port's arrives. Loopback handles them in order, so any answer for 4791
// arrives first.
Answers probe(int family) {
    Answers a;
    const int s = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) {
        a.error = errno_text("socket");
        return a;
    }
    const int one = 1;
    const bool v6 = family == AF_INET6;
    setsockopt(s, v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_RECVERR : IP_RECVERR, &one, sizeof(one));
    auto send_to = [&](std::uint16_t port) {
        sockaddr_storage to{};
        socklen_t len = 0;
        if (v6) {
            auto* sin6 = reinterpret_cast<sockaddr_in6*>(&to);
            sin6->sin6_family = AF_INET6;
            sin6->sin6_port = htons(port);
            sin6->sin6_addr = in6addr_loopback;
            len = sizeof(sockaddr_in6);
        } else {
            auto* sin = reinterpret_cast<sockaddr_in*>(&to);
            sin->sin_family = AF_INET;
            sin->sin_port = htons(port);
            sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            len = sizeof(sockaddr_in);
        }
        // An ICMP error for the previous datagram (loopback answers within
        // the sendto() call) fails the next send once with ECONNREFUSED; the
        // error itself stays on the error queue.
        for (int attempt = 0; attempt < 2; ++attempt) {
            if (sendto(s, "x", 1, 0, reinterpret_cast<const sockaddr*>(&to), len) == 1) {
                return true;
            }
            if (errno != ECONNREFUSED) {
                return false;
            }
        }
        return false;
    };
    if (!send_to(kRocePort) || !send_to(kClosedPort)) {
        a.error = errno_text("sendto");
        close(s);
        return a;
    }
    for (;;) {
        pollfd p{.fd = s, .events = 0, .revents = 0};
        if (poll(&p, 1, 5000) != 1) {
            a.error = "no ICMP error for the closed port within 5 s";
            break;
        }
        sockaddr_storage original{};
        char data[16];
        char control[256];
        iovec iov{.iov_base = data, .iov_len = sizeof data};
        msghdr msg{};
        msg.msg_name = &original;
        msg.msg_namelen = sizeof original;
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        if (recvmsg(s, &msg, MSG_ERRQUEUE) < 0) {
            a.error = errno_text("recvmsg(MSG_ERRQUEUE)");
            break;
        }
        bool port_unreachable = false;
        for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
            sock_extended_err ee{};
            std::memcpy(&ee, CMSG_DATA(c), sizeof ee);
            // ICMP type 3 code 3, ICMPv6 type 1 code 4: port unreachable.
            port_unreachable = port_unreachable || (ee.ee_origin == SO_EE_ORIGIN_ICMP && ee.ee_type == 3 &&
                                                    ee.ee_code == 3) ||
                               (ee.ee_origin == SO_EE_ORIGIN_ICMP6 && ee.ee_type == 1 && ee.ee_code == 4);
        }
        const std::uint16_t port =
            ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&original)->sin6_port
                     : reinterpret_cast<sockaddr_in*>(&original)->sin_port);
        if (port_unreachable && port == kRocePort) {
            a.roce_port_unreachable = true;
        }
        if (port_unreachable && port == kClosedPort) {
            break;
        }
    }
    close(s);
    return a;
}

// rx_queue and drops of the socket bound to local `port` in /proc/net/udp{,6}.
struct SocketQueue {
    bool found = false;
    unsigned long rx_queue = 0;
    unsigned long drops = 0;
};

SocketQueue udp_socket_queue(bool v6, std::uint16_t port) {
    std::ifstream f(v6 ? "/proc/self/net/udp6" : "/proc/self/net/udp");
    std::string line;
    std::getline(f, line);  // header
    char port_hex[8];
    std::snprintf(port_hex, sizeof port_hex, ":%04X", port);
    SocketQueue q;
    while (std::getline(f, line)) {
        std::istringstream fields(line);
        std::string slot, local, remote, state, queues, last;
        fields >> slot >> local >> remote >> state >> queues;
        if (local.size() < 5 || local.compare(local.size() - 5, 5, port_hex) != 0) {
            continue;
        }
        std::string field;
        while (fields >> field) {
            last = field;  // the drops column comes last
        }
        q.found = true;
        q.rx_queue = std::stoul(queues.substr(queues.find(':') + 1), nullptr, 16);
        q.drops = std::stoul(last);
    }
    return q;
}

std::string check_family(int family) {
    const bool v6 = family == AF_INET6;
    const char* name = v6 ? "IPv6" : "IPv4";
    const Answers without = probe(family);
    if (!without.error.empty()) {
        return std::string(name) + " without the sink: " + without.error;
    }
    if (!without.roce_port_unreachable) {
        return std::string(name) + ": without the sink the kernel should answer 4791 with port unreachable";
    }
    UdpSink sink;
    if (!sink.warning().empty() || !sink.ipv4_open() || !sink.ipv6_open()) {
        return "the sink did not open cleanly: " + sink.warning();
    }
    const Answers with = probe(family);
    if (!with.error.empty()) {
        return std::string(name) + " with the sink: " + with.error;
    }
    if (with.roce_port_unreachable) {
        return std::string(name) + ": the kernel answered 4791 although the sink is open";
    }
    const SocketQueue q = udp_socket_queue(v6, kRocePort);
    if (!q.found || q.rx_queue != 0 || q.drops != 1) {
        return std::string(name) + ": the sink should have dropped exactly one datagram without queueing it (found " +
               std::to_string(q.found) + ", rx_queue " + std::to_string(q.rx_queue) + ", drops " +
               std::to_string(q.drops) + ")";
    }
    return "";
}

TEST(UdpSink, Ipv4DatagramsGetNoPortUnreachable) { RUN_IN_PRIVATE_NETNS([] { return check_family(AF_INET); }); }

TEST(UdpSink, Ipv6DatagramsGetNoPortUnreachable) { RUN_IN_PRIVATE_NETNS([] { return check_family(AF_INET6); }); }

TEST(UdpSink, PortAlreadyTakenGivesAWarning) {
    RUN_IN_PRIVATE_NETNS([]() -> std::string {
        // What a kernel rdma_rxe does: hold UDP 4791.
        const int owner = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_in any{};
        any.sin_family = AF_INET;
        any.sin_port = htons(kRocePort);
        if (bind(owner, reinterpret_cast<const sockaddr*>(&any), sizeof any) != 0) {
            return errno_text("bind the owner");
        }
        std::string problem;
        const auto sink = UdpSink::open(problem);
        close(owner);
        if (sink->ipv4_open()) {
            return "the sink cannot share the port";
        }
        if (!sink->ipv6_open()) {
            return "IPv6 should still be held: " + problem;
        }
        if (problem.find("4791") == std::string::npos || problem.find("already taken") == std::string::npos ||
            problem.find("rdma_rxe") == std::string::npos) {
            return "unclear warning: '" + problem + "'";
        }
        return "";
    });
}

}  // namespace
}  // namespace uroce::daemon
