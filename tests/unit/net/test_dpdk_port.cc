// DpdkPort on real kernel interfaces, as root: net_af_packet on one end of a
// veth pair between two network namespaces this test creates, and net_tap.
// Checked: frames cross intact both ways up to the largest frame; the rx
// wait fd sleeps while idle and wakes when a frame arrives, and the frame is
// there when it does; Neighbours over the port answers the Linux kernel's
// ARP and NS (the kernel then delivers its UDP datagrams to us) and resolves
// the kernel's addresses (our UDP datagrams reach its sockets); net_tap's
// IPv4 checksum offload fixes a wrong header checksum; a net_memif pair's
// wake fd, rung by the sending port, follows the frames the same way.
//
// The EAL starts once per process, so every case runs in a child process of
// its own. Without root (or without the ip tool) the cases report themselves
// skipped.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dpdk_port.h"
#include "net/neighbours.h"
#include "wire/ip_checksum.h"

namespace uroce::port {
namespace {

using namespace std::chrono_literals;
using Frame = std::vector<std::uint8_t>;
using Clock = std::chrono::steady_clock;

// IEEE 802 local experimental EtherType: test frames, told apart from the
// kernels' own traffic on the link.
constexpr std::uint16_t kTestEtherType = 0x88B5;

const std::string kPid = std::to_string(getpid());
const std::string kNsA = "urdpA" + kPid;
const std::string kNsB = "urdpB" + kPid;
const std::string kIfA = "urdpa" + kPid;
const std::string kIfB = "urdpb" + kPid;
const std::string kIfTap = "urdpt" + kPid;

#define REQUIRE(cond, what)                                   \
    do {                                                      \
        if (!(cond)) {                                        \
            return std::string(what) + " [failed: " #cond "]"; \
        }                                                     \
    } while (false)

bool run(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

// ---- namespaces and processes ------------------------------------------------

bool enter_netns(const std::string& ns) {
    const int fd = open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return false;
    }
    const bool ok = setns(fd, CLONE_NEWNET) == 0;
    close(fd);
    return ok;
}

// Runs `body` in a child process; returns what it returned ("" when all is
// well) or how it died.
std::string in_child(const std::function<std::string()>& body) {
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
        return "pipe2 failed";
    }
    const pid_t pid = fork();
    if (pid == 0) {
        close(pipe_fds[0]);
        std::string result;
        try {
            result = body();
        } catch (const std::exception& e) {
            result = std::string("exception: ") + e.what();
        }
        [[maybe_unused]] const ssize_t w = write(pipe_fds[1], result.data(), result.size());
        _exit(0);
    }
    close(pipe_fds[1]);
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
        return out + " (the child died, wait status " + std::to_string(status) + ")";
    }
    return out;
}

// A raw socket on `ifname` that sees the frames the interface receives (not
// the ones sent through it).
int open_raw(const std::string& ifname) {
    const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
    if (fd < 0) {
        return -1;
    }
    const int one = 1;
    setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
    sockaddr_ll at{};
    at.sll_family = AF_PACKET;
    at.sll_protocol = htons(ETH_P_ALL);
    at.sll_ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
    if (at.sll_ifindex == 0 || bind(fd, reinterpret_cast<const sockaddr*>(&at), sizeof(at)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

wire::MacAddr interface_mac(const std::string& ifname) {
    const int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
    wire::MacAddr mac{};
    if (ioctl(s, SIOCGIFHWADDR, &ifr) == 0) {
        std::memcpy(mac.data(), ifr.ifr_hwaddr.sa_data, mac.size());
    }
    close(s);
    return mac;
}

// ---- frames ------------------------------------------------------------------

Frame test_frame(const wire::MacAddr& dst, const wire::MacAddr& src, std::size_t size, std::uint8_t seed) {
    Frame f(size);
    std::copy(dst.begin(), dst.end(), f.begin());
    std::copy(src.begin(), src.end(), f.begin() + 6);
    f[12] = kTestEtherType >> 8;
    f[13] = kTestEtherType & 0xFF;
    for (std::size_t i = 14; i < size; ++i) {
        f[i] = static_cast<std::uint8_t>(seed + i * 7);
    }
    return f;
}

bool is_test_frame(std::span<const std::uint8_t> f) {
    return f.size() >= 14 && f[12] == (kTestEtherType >> 8) && f[13] == (kTestEtherType & 0xFF);
}

// The next test frame the raw socket receives within `timeout`.
std::optional<Frame> raw_receive(int fd, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    Frame buf(16384);
    while (Clock::now() < deadline) {
        pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (poll(&p, 1, static_cast<int>(left.count()) + 1) != 1) {
            continue;
        }
        const ssize_t n = recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
        if (n > 0 && is_test_frame(std::span(buf.data(), static_cast<std::size_t>(n)))) {
            buf.resize(static_cast<std::size_t>(n));
            return buf;
        }
    }
    return std::nullopt;
}

// Receives from the port until `wanted` frames for which `keep` is true have
// come (copied out) or `timeout` passes; every other frame goes to `other`.
std::vector<Frame> port_collect(
    DpdkPort& port, std::size_t wanted, std::chrono::milliseconds timeout,
    const std::function<bool(std::span<const std::uint8_t>)>& keep = is_test_frame,
    const std::function<void(std::span<const std::uint8_t>)>& other = [](std::span<const std::uint8_t>) {}) {
    std::vector<Frame> got;
    const auto deadline = Clock::now() + timeout;
    net::RxFrame rx[DpdkPort::kBurst];
    while (got.size() < wanted && Clock::now() < deadline) {
        const std::size_t n = port.receive(rx);
        for (std::size_t i = 0; i < n; ++i) {
            if (keep(rx[i].bytes) && got.size() < wanted) {
                got.emplace_back(rx[i].bytes.begin(), rx[i].bytes.end());
            } else {
                other(rx[i].bytes);
            }
        }
        port.release(std::span(rx, n));
        port.flush();
    }
    return got;
}

std::string af_packet_spec() { return "net_af_packet0,iface=" + kIfA; }
std::string instance(const char* what) { return "t" + kPid + "-" + what; }

// ---- fixture -----------------------------------------------------------------

// Why these tests cannot run here, or "" when they can.
std::string missing_requirement() {
    if (geteuid() != 0) {
        return "needs root (network namespaces, veth, AF_PACKET)";
    }
    if (!run("ip -V")) {
        return "needs the ip tool (iproute2)";
    }
    return "";
}

class DpdkPortNetns : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        skip_ = missing_requirement();
        if (!skip_.empty()) {
            return;
        }
        const bool ok =
            run("ip netns add " + kNsA) && run("ip netns add " + kNsB) &&
            run("ip link add " + kIfA + " netns " + kNsA + " type veth peer name " + kIfB + " netns " + kNsB) &&
            // A belongs to DPDK: its own kernel stays quiet (no IPv6 chatter).
            run("ip netns exec " + kNsA + " sysctl -qw net.ipv6.conf." + kIfA + ".disable_ipv6=1") &&
            run("ip -n " + kNsA + " link set " + kIfA + " up") && run("ip -n " + kNsB + " link set " + kIfB + " up") &&
            run("ip -n " + kNsB + " link set lo up") &&
            run("ip -n " + kNsB + " addr add 192.0.2.2/24 dev " + kIfB) &&
            run("ip -n " + kNsB + " addr add 192.0.2.3/24 dev " + kIfB) &&
            run("ip -n " + kNsB + " addr add 2001:db8::2/64 dev " + kIfB + " nodad") &&
            run("ip -n " + kNsB + " addr add 2001:db8::3/64 dev " + kIfB + " nodad");
        if (!ok) {
            skip_ = "could not create the namespaces and veth pair";
        }
    }

    static void TearDownTestSuite() {
        run("ip netns del " + kNsA);
        run("ip netns del " + kNsB);
    }

    void SetUp() override {
        if (!skip_.empty()) {
            GTEST_SKIP() << skip_;
        }
    }

    static inline std::string skip_;
};

// ---- af_packet -----------------------------------------------------------------

std::string frames_cross_intact() {
    REQUIRE(enter_netns(kNsB), "enter B");
    const int raw = open_raw(kIfB);
    REQUIRE(raw >= 0, "raw socket in B");
    const wire::MacAddr mac_b = interface_mac(kIfB);
    REQUIRE(enter_netns(kNsA), "enter A");
    DpdkPort port(af_packet_spec(), instance("cross"));
    const PortInfo& info = port.info();
    REQUIRE(info.driver == "net_af_packet", "driver " + info.driver);
    REQUIRE(info.mac == interface_mac(kIfA), "the port has the interface's MAC");
    REQUIRE(info.mtu == 1500, "MTU " + std::to_string(info.mtu));
    REQUIRE(port.max_frame() == 1518, "max frame");
    REQUIRE(port.has_wire(), "has a wire");
    REQUIRE(!info.ipv4_checksum_offload, "af_packet offers no checksum offload");

    // Port to kernel: sizes from the Ethernet minimum to the largest untagged
    // frame (max_frame() leaves room for a VLAN tag; the kernel drops an
    // untagged frame longer than MTU + 14).
    const std::size_t largest_untagged = info.mtu + 14;
    std::vector<Frame> sent;
    for (std::size_t size = 60; size <= largest_untagged; size += 73) {
        sent.push_back(test_frame(mac_b, info.mac, size, static_cast<std::uint8_t>(size)));
    }
    sent.push_back(test_frame(mac_b, info.mac, largest_untagged, 1));
    for (const Frame& f : sent) {
        REQUIRE(port.send(f), "send");
    }
    port.flush();
    for (const Frame& f : sent) {
        const auto got = raw_receive(raw, 2000ms);
        REQUIRE(got.has_value(), "the kernel side got frame of " + std::to_string(f.size()));
        REQUIRE(*got == f, "frame of " + std::to_string(f.size()) + " intact");
    }
    REQUIRE(port.counters().tx_frames == sent.size(), "tx counted");

    // Frames built in the lent room (an mbuf's data room) go as they are; a
    // frame sent from elsewhere meanwhile is copied and leaves the room lent.
    std::vector<Frame> built;
    for (std::size_t size : {60u, 700u, 1514u}) {
        const std::span<std::uint8_t> room = port.tx_room();
        REQUIRE(room.size() == port.max_frame(), "the room holds the largest frame");
        REQUIRE(port.tx_room().data() == room.data(), "the same room until a send() takes it");
        built.push_back(test_frame(mac_b, info.mac, size, static_cast<std::uint8_t>(size + 5)));
        std::copy(built.back().begin(), built.back().end(), room.begin());
        const Frame copied = test_frame(mac_b, info.mac, 80, static_cast<std::uint8_t>(size + 6));
        REQUIRE(port.send(copied), "send a copy");
        REQUIRE(port.tx_room().data() == room.data(), "a copied frame leaves the room lent");
        REQUIRE(port.send(room.first(size)), "send the room");
        REQUIRE(port.tx_room().data() != room.data(), "a new room once the old one is queued");
        built.insert(built.end() - 1, copied);
    }
    port.flush();
    for (const Frame& f : built) {
        const auto got = raw_receive(raw, 2000ms);
        REQUIRE(got.has_value(), "the kernel side got frame of " + std::to_string(f.size()));
        REQUIRE(*got == f, "frame of " + std::to_string(f.size()) + " intact, in order");
    }
    REQUIRE(port.counters().tx_frames == sent.size() + built.size(), "tx counted");
    REQUIRE(!port.send(Frame(port.max_frame() + 1)), "an oversized frame is refused");
    REQUIRE(port.counters().tx_dropped == 1, "and counted");

    // Kernel to port.
    std::vector<Frame> injected;
    for (std::size_t size = 60; size <= 1514; size += 97) {
        injected.push_back(test_frame(info.mac, mac_b, size, static_cast<std::uint8_t>(size * 3)));
        REQUIRE(send(raw, injected.back().data(), size, 0) == static_cast<ssize_t>(size), "raw send");
    }
    const auto got = port_collect(port, injected.size(), 3000ms);
    REQUIRE(got == injected, "the port received every frame intact, in order");
    REQUIRE(port.counters().rx_frames >= injected.size(), "rx counted");
    close(raw);
    return "";
}

TEST_F(DpdkPortNetns, AfPacketFramesCrossIntactBothWays) { EXPECT_EQ(in_child(frames_cross_intact), ""); }

// The check both wake fds pass (af_packet's wake ring, memif's peer
// wake-up): while `port` is drained its rx wait fd stays quiet; then in
// each of kWakeRounds rounds `send_one` sends it one frame from a thread on
// another CPU, as a peer's would (the frame may land while this thread is
// already running), the fd turns readable, and the first receive() after
// the wake-up has the frame: the wake never comes before its frame, and
// none is lost. "" or what failed.
constexpr int kWakeRounds = 300;

std::string wake_fd_follows_frames(DpdkPort& port, const std::function<void()>& send_one) {
    const int fd = port.rx_wait_fd();
    REQUIRE(fd >= 0, "an rx wait fd");
    net::RxFrame rx[DpdkPort::kBurst];
    // An empty receive() re-arms; the fd must then stay quiet.
    auto idle = [&] {
        for (int i = 0; i < 100; ++i) {
            const std::size_t n = port.receive(rx);
            port.release(std::span(rx, n));
            pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
            if (n == 0 && poll(&p, 1, 0) == 0) {
                return true;
            }
        }
        return false;
    };
    REQUIRE(idle(), "the fd is not readable once the port is drained");

    std::atomic<int> rounds_to_send{0};
    std::atomic<bool> done{false};
    const unsigned cpus = std::thread::hardware_concurrency();
    auto pin = [cpus](unsigned cpu) {
        if (cpus > 1) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(cpu, &set);
            sched_setaffinity(0, sizeof set, &set);
        }
    };
    std::thread sender([&] {
        pin(cpus - 1);
        for (int sent = 0; !done.load();) {
            if (rounds_to_send.load(std::memory_order_acquire) > sent) {
                send_one();
                ++sent;
            }
        }
    });
    pin(0);
    int first_receive_empty = 0;
    int woken = 0;
    for (int round = 0; round < kWakeRounds; ++round) {
        if (!idle()) {
            break;
        }
        rounds_to_send.store(round + 1, std::memory_order_release);
        pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
        if (poll(&p, 1, 2000) != 1) {
            break;
        }
        ++woken;
        if (port.receive(rx) == 0) {
            ++first_receive_empty;
            port_collect(port, 1, 1000ms);  // it must come after all
        } else {
            port.release(std::span(rx, 1));
        }
    }
    done.store(true);
    sender.join();
    REQUIRE(woken == kWakeRounds,
            "woken in " + std::to_string(woken) + " of " + std::to_string(kWakeRounds) + " rounds");
    REQUIRE(first_receive_empty == 0, std::to_string(first_receive_empty) + " of " + std::to_string(kWakeRounds) +
                                          " wakes came before their frame");
    return "";
}

std::string af_packet_wake_fd_follows_frames() {
    REQUIRE(enter_netns(kNsB), "enter B");
    const int raw = open_raw(kIfB);
    REQUIRE(raw >= 0, "raw socket in B");
    REQUIRE(enter_netns(kNsA), "enter A");
    DpdkPort port(af_packet_spec(), instance("wake"));
    REQUIRE(port.info().rx_wait == "af_packet wake ring", "rx_wait: " + port.info().rx_wait);
    const Frame f = test_frame(port.mac(), interface_mac(kIfB), 60, 9);
    const std::string failed = wake_fd_follows_frames(port, [&] {
        [[maybe_unused]] const ssize_t n = send(raw, f.data(), f.size(), 0);
    });
    close(raw);
    return failed;
}

TEST_F(DpdkPortNetns, AfPacketWakeFdSleepsWhenIdleAndWakesWithTheFrame) {
    EXPECT_EQ(in_child(af_packet_wake_fd_follows_frames), "");
}

// A UDP datagram from `src` to `dst` (IPv4-mapped or IPv6), Ethernet
// destination left for Neighbours. IPv4 gets its header checksum and no UDP
// checksum; IPv6 must have a UDP checksum (RFC 8200 8.1).
Frame udp_frame(const wire::MacAddr& src_mac, const wire::Gid& src, const wire::Gid& dst, std::uint16_t src_port,
                std::uint16_t dst_port, const std::string& payload) {
    const bool v4 = wire::is_ipv4_mapped(dst);
    const std::size_t ip_size = v4 ? sizeof(wire::Ipv4Hdr) : sizeof(wire::Ipv6Hdr);
    const std::size_t udp_length = sizeof(wire::UdpHdr) + payload.size();
    Frame f(14 + ip_size + udp_length);
    auto* eth = reinterpret_cast<wire::EthHdr*>(f.data());
    eth->src = src_mac;
    auto* udp = reinterpret_cast<wire::UdpHdr*>(f.data() + 14 + ip_size);
    udp->src_port.set(src_port);
    udp->dst_port.set(dst_port);
    udp->length.set(static_cast<std::uint16_t>(udp_length));
    std::memcpy(f.data() + 14 + ip_size + sizeof(wire::UdpHdr), payload.data(), payload.size());
    if (v4) {
        eth->ether_type.set(wire::kEtherTypeIpv4);
        auto* ip = reinterpret_cast<wire::Ipv4Hdr*>(f.data() + 14);
        ip->version_ihl = 0x45;
        ip->total_length.set(static_cast<std::uint16_t>(ip_size + udp_length));
        ip->ttl = 64;
        ip->protocol = wire::kIpProtoUdp;
        ip->src = wire::ipv4_of(src);
        ip->dst = wire::ipv4_of(dst);
        ip->checksum.set(wire::ipv4_header_checksum(*ip));
        return f;
    }
    eth->ether_type.set(wire::kEtherTypeIpv6);
    auto* ip = reinterpret_cast<wire::Ipv6Hdr*>(f.data() + 14);
    ip->vtc_flow.set(6u << 28);
    ip->payload_length.set(static_cast<std::uint16_t>(udp_length));
    ip->next_header = wire::kIpProtoUdp;
    ip->hop_limit = 64;
    ip->src = src;
    ip->dst = dst;
    // Ones'-complement sum of the pseudo-header and the datagram (RFC 1071).
    std::uint32_t sum = wire::kIpProtoUdp + static_cast<std::uint32_t>(udp_length);
    auto add = [&sum](std::span<const std::uint8_t> bytes) {
        for (std::size_t i = 0; i < bytes.size(); i += 2) {
            sum += static_cast<std::uint32_t>(bytes[i] << 8 | (i + 1 < bytes.size() ? bytes[i + 1] : 0));
        }
    };
    add(src);
    add(dst);
    add(std::span(f).subspan(14 + ip_size));
    while ((sum >> 16) != 0) {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    const auto checksum = static_cast<std::uint16_t>(~sum);
    udp->checksum.set(checksum == 0 ? 0xFFFF : checksum);
    return f;
}

// The UDP payload of an IPv4/IPv6 frame to `dst_port`, if it is one.
std::optional<std::string> udp_payload(std::span<const std::uint8_t> f, std::uint16_t dst_port) {
    if (f.size() < 14) {
        return std::nullopt;
    }
    const std::uint16_t type = static_cast<std::uint16_t>(f[12] << 8 | f[13]);
    std::size_t at = 14;
    if (type == wire::kEtherTypeIpv4 && f.size() >= 14 + 20 && f[14 + 9] == wire::kIpProtoUdp) {
        at += std::size_t{f[14] & 0x0Fu} * 4;
    } else if (type == wire::kEtherTypeIpv6 && f.size() >= 14 + 40 && f[14 + 6] == wire::kIpProtoUdp) {
        at += 40;
    } else {
        return std::nullopt;
    }
    if (f.size() < at + 8 || static_cast<std::uint16_t>(f[at + 2] << 8 | f[at + 3]) != dst_port) {
        return std::nullopt;
    }
    const std::size_t length = static_cast<std::size_t>(f[at + 4] << 8 | f[at + 5]);
    if (length < 8 || f.size() < at + length) {
        return std::nullopt;
    }
    return std::string(f.begin() + static_cast<std::ptrdiff_t>(at + 8),
                       f.begin() + static_cast<std::ptrdiff_t>(at + length));
}

int udp_socket(int family, std::uint16_t port) {
    const int s = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    if (family == AF_INET6) {
        setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_port = htons(port);
        a.sin6_addr = in6addr_any;
        return bind(s, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0 ? s : -1;
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    return bind(s, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0 ? s : -1;
}

bool udp_send(int s, const char* ip, std::uint16_t port, const std::string& payload) {
    sockaddr_storage to{};
    socklen_t len = 0;
    if (std::strchr(ip, ':') != nullptr) {
        auto* a = reinterpret_cast<sockaddr_in6*>(&to);
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(port);
        inet_pton(AF_INET6, ip, &a->sin6_addr);
        len = sizeof(sockaddr_in6);
    } else {
        auto* a = reinterpret_cast<sockaddr_in*>(&to);
        a->sin_family = AF_INET;
        a->sin_port = htons(port);
        inet_pton(AF_INET, ip, &a->sin_addr);
        len = sizeof(sockaddr_in);
    }
    return sendto(s, payload.data(), payload.size(), 0, reinterpret_cast<const sockaddr*>(&to), len) ==
           static_cast<ssize_t>(payload.size());
}

// Runs the port and its neighbour table until the socket receives a datagram
// (returned) or `timeout` passes.
std::optional<std::string> serve_until_received(DpdkPort& port, net::Neighbours& table, int s,
                                                std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    net::RxFrame rx[DpdkPort::kBurst];
    char buf[2048];
    while (Clock::now() < deadline) {
        const auto now = Clock::now();
        const std::size_t n = port.receive(rx);
        for (std::size_t i = 0; i < n; ++i) {
            table.handle_frame(rx[i].bytes, now);
        }
        port.release(std::span(rx, n));
        table.poll(now);
        port.flush();
        const ssize_t got = recv(s, buf, sizeof buf, MSG_DONTWAIT);
        if (got >= 0) {
            return std::string(buf, static_cast<std::size_t>(got));
        }
    }
    return std::nullopt;
}

std::string neighbours_with_the_kernel() {
    REQUIRE(enter_netns(kNsB), "enter B");
    const int kernel4 = udp_socket(AF_INET, 5000);
    const int kernel6 = udp_socket(AF_INET6, 5000);
    REQUIRE(kernel4 >= 0 && kernel6 >= 0, "UDP sockets in B");
    REQUIRE(enter_netns(kNsA), "enter A");
    DpdkPort port(af_packet_spec(), instance("nd"));
    const auto ip4_a = wire::ipv4_mapped({192, 0, 2, 1});
    const wire::Gid ip6_a = {0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};
    net::Neighbours table(port, port.mac(), {ip4_a, ip6_a});

    // The kernel resolves us (its ARP request / NS, our reply /
    // NA), then sends its datagram to our MAC.
    for (const char* ip : {"192.0.2.1", "2001:db8::1"}) {
        const std::string hello = std::string("from the kernel to ") + ip;
        REQUIRE(udp_send(std::strchr(ip, ':') ? kernel6 : kernel4, ip, 6000, hello), "kernel send");
        const auto got = port_collect(
            port, 1, 3000ms,
            [&](std::span<const std::uint8_t> f) { return udp_payload(f, 6000) == hello; },
            [&](std::span<const std::uint8_t> f) { table.handle_frame(f, Clock::now()); });
        REQUIRE(got.size() == 1, std::string("the kernel reached us at ") + ip);
    }
    const net::NeighbourCounters after_kernel = table.counters();
    REQUIRE(after_kernel.arp_replies_sent >= 1 && after_kernel.na_sent >= 1, "we answered");

    // We resolve the address of B's two the kernel did not talk from (our
    // ARP request / NS, its reply / NA), and its sockets get our datagrams.
    auto unknown = [&table](wire::Gid a, wire::Gid b) { return table.lookup(a) ? b : a; };
    const auto ip4_b = unknown(wire::ipv4_mapped({192, 0, 2, 2}), wire::ipv4_mapped({192, 0, 2, 3}));
    wire::Gid ip6_b2 = ip6_a;
    wire::Gid ip6_b3 = ip6_a;
    ip6_b2[15] = 2;
    ip6_b3[15] = 3;
    const auto ip6_b = unknown(ip6_b2, ip6_b3);
    REQUIRE(!table.lookup(ip4_b) && !table.lookup(ip6_b), "the kernel talked from one address of each family");
    for (const auto& [src, dst, sock] : {std::tuple{ip4_a, ip4_b, kernel4}, std::tuple{ip6_a, ip6_b, kernel6}}) {
        const std::string hello = wire::is_ipv4_mapped(dst) ? "to the kernel over IPv4" : "over IPv6";
        Frame f = udp_frame(port.mac(), src, dst, 6000, 5000, hello);
        table.send_ip(f, dst, Clock::now());
        const auto got = serve_until_received(port, table, sock, 3000ms);
        REQUIRE(got == hello, "the kernel's socket got our datagram " + hello);
    }
    const net::NeighbourCounters c = table.counters();
    REQUIRE(c.arp_requests_sent >= 1 && c.ns_sent >= 1 && c.frames_released == 2,
            "we resolved (" + std::to_string(c.arp_requests_sent) + " ARP requests, " + std::to_string(c.ns_sent) +
                " NS, " + std::to_string(c.frames_released) + " frames released)");
    REQUIRE(c.malformed == 0, "the kernel's ARP/ND all parse");
    return "";
}

TEST_F(DpdkPortNetns, NeighboursTalkArpAndNdWithTheLinuxKernel) { EXPECT_EQ(in_child(neighbours_with_the_kernel), ""); }

// ---- net_tap -------------------------------------------------------------------

std::string tap_wake_fd_and_checksum_offload() {
    REQUIRE(enter_netns(kNsA), "enter A");
    DpdkPort port("net_tap0,iface=" + kIfTap, instance("tap"));
    REQUIRE(port.info().driver == "net_tap", "driver " + port.info().driver);
    REQUIRE(run("ip netns exec " + kNsA + " sysctl -qw net.ipv6.conf." + kIfTap + ".disable_ipv6=1"),
            "quiet the kernel side");
    const int raw = open_raw(kIfTap);
    REQUIRE(raw >= 0, "raw socket on the tap");
    REQUIRE(port.info().rx_wait == "rx interrupt", "rx_wait: " + port.info().rx_wait);
    const int fd = port.rx_wait_fd();
    REQUIRE(fd >= 0, "an rx wait fd");

    net::RxFrame rx[DpdkPort::kBurst];
    bool quiet = false;
    for (int i = 0; i < 100 && !quiet; ++i) {
        const std::size_t n = port.receive(rx);
        port.release(std::span(rx, n));
        pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
        quiet = n == 0 && poll(&p, 1, 0) == 0;
    }
    REQUIRE(quiet, "the fd is not readable once the queue is empty");
    const Frame f = test_frame(port.mac(), {0x02, 0, 0, 0, 0, 0x77}, 100, 5);
    REQUIRE(send(raw, f.data(), f.size(), 0) == static_cast<ssize_t>(f.size()), "raw send");
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    REQUIRE(poll(&p, 1, 2000) == 1, "woken by the frame");
    REQUIRE(port_collect(port, 1, 1000ms) == std::vector<Frame>{f}, "and the frame is there");

    // A wrong IPv4 header checksum leaves corrected by the offload.
    REQUIRE(port.info().ipv4_checksum_offload, "net_tap offers IPv4 checksum offload");
    Frame ip = udp_frame(port.mac(), wire::ipv4_mapped({192, 0, 2, 1}),
                         wire::ipv4_mapped({192, 0, 2, 9}), 6000, 7000, "checksum me");
    ip[14 + 10] = 0xDE;
    ip[14 + 11] = 0xAD;
    REQUIRE(port.send(ip), "send");
    port.flush();
    Frame buf(2048);
    bool seen = false;
    const auto deadline = Clock::now() + 2000ms;
    while (!seen && Clock::now() < deadline) {
        pollfd q{.fd = raw, .events = POLLIN, .revents = 0};
        if (poll(&q, 1, 100) != 1) {
            continue;
        }
        const ssize_t n = recv(raw, buf.data(), buf.size(), 0);
        if (n == static_cast<ssize_t>(ip.size()) && udp_payload(std::span(buf.data(), ip.size()), 7000)) {
            const auto* hdr = reinterpret_cast<const wire::Ipv4Hdr*>(buf.data() + 14);
            REQUIRE(wire::ipv4_checksum_ok(*hdr), "the checksum was computed on the way out");
            seen = true;
        }
    }
    REQUIRE(seen, "the IPv4 frame came out of the tap");
    close(raw);
    return "";
}

TEST_F(DpdkPortNetns, TapRxInterruptFdAndIpv4ChecksumOffload) { EXPECT_EQ(in_child(tap_wake_fd_and_checksum_offload), ""); }

// ---- net_memif -----------------------------------------------------------------

// Two memif ports of one process on a socket in a directory of this test's
// own: the client's rx wait fd (rung by the server port's sends,
// memif_peer_wake.h) stays quiet while idle and turns readable with each
// frame, which the first receive() after the wake-up has. The frames come
// from a thread on another CPU, as a peer daemon's would.
std::string memif_wake_fd_follows_frames() {
    const std::string dir = "/tmp/urdpm" + kPid;
    REQUIRE(run("mkdir -p " + dir), "mkdir " + dir);
    const std::string socket = dir + "/memif.sock";
    // Never closed: with both ends of a memif in one process, DPDK 22.11's
    // interrupt thread can crash on the disconnect that closing one end
    // sends the other (a segfault in eal-intr-thread after the checks all
    // passed). The child process ends right after; its runtime files go
    // below.
    auto& server = *new DpdkPort("net_memif0,role=server,id=3,uroce-wake=yes,socket=" + socket, instance("memif"));
    auto& client = *new DpdkPort("net_memif1,role=client,id=3,uroce-wake=yes,socket=" + socket, instance("memif"));
    REQUIRE(client.info().rx_wait == "memif peer wake", "rx_wait: " + client.info().rx_wait);
    REQUIRE(server.info().rx_wait == "memif peer wake", "rx_wait: " + server.info().rx_wait);

    // The memif connects in the EAL's interrupt thread: send until a frame
    // gets through.
    const Frame f = test_frame(client.mac(), server.mac(), 60, 4);
    bool connected = false;
    for (const auto deadline = Clock::now() + 5000ms; !connected && Clock::now() < deadline;) {
        REQUIRE(server.send(f), "send");
        server.flush();
        connected = !port_collect(client, 1, 50ms).empty();
    }
    REQUIRE(connected, "the memif connected");

    const std::uint64_t rings_before = server.stats().memif_rings_sent;
    const std::string failed = wake_fd_follows_frames(client, [&] {
        (void)server.send(f);
        server.flush();
    });
    REQUIRE(failed.empty(), failed);
    const std::uint64_t rings = server.stats().memif_rings_sent - rings_before;
    REQUIRE(rings == kWakeRounds, "one ring per frame sent to the idle port (" + std::to_string(rings) + ")");

    // A busy receiver is not rung: once a receive() has found frames, the
    // next frames cost the sender no system call.
    REQUIRE(server.send(f), "send");
    server.flush();
    REQUIRE(port_collect(client, 1, 1000ms).size() == 1, "frame");
    const std::uint64_t rings_busy = server.stats().memif_rings_sent;
    REQUIRE(server.send(f), "send");
    server.flush();
    REQUIRE(server.stats().memif_rings_sent == rings_busy, "no ring for a receiver that is not armed");
    run("rm -rf " + dir + " /var/run/dpdk/uroce-" + instance("memif"));
    return "";
}

TEST_F(DpdkPortNetns, MemifPeerWakeFdSleepsWhenIdleAndWakesWithTheFrame) {
    EXPECT_EQ(in_child(memif_wake_fd_follows_frames), "");
}

}  // namespace
}  // namespace uroce::port

// meson counts a test program that exits with 77 as skipped; a gtest run
// whose cases all skip would count as passed.
int main(int argc, char** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    if (const std::string why = uroce::port::missing_requirement(); !why.empty()) {
        std::fprintf(stderr, "SKIP: %s\n", why.c_str());
        return 77;
    }
    return RUN_ALL_TESTS();
}
