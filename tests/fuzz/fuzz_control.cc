// libFuzzer target for the daemon's control socket (issue 10: "a
// control-socket fuzz target ... with fds, rings and pools").
//
// The real ControlServer (tools/uroced) with a real Device and a Datapath
// over a loopback port, listening on a Unix socket in a private temporary
// directory, is driven through real SOCK_SEQPACKET connections by up to
// kMaxClients clients of this process. An input is a sequence of actions
// (see Action), read with FuzzedDataProvider:
//   - connect a client, or disconnect one mid-sequence;
//   - send a request: an op from the table of control.h request types (or
//     any 16-bit op), a header with the right magic, version and length most
//     of the time, a body of fuzzer bytes in which 32-bit words may be
//     replaced by handles and keys that client got before and the fields
//     naming or sizing objects are mostly given plausible values, and
//     sometimes fds attached by SCM_RIGHTS (memfds, eventfds, pipe ends,
//     /dev/null, one of the daemon's own ring memfds, or two at once);
//   - send raw bytes of any length up to one more than the largest message;
//   - map a memfd the daemon passed back (CQ, QP and SRQ rings, relaxed
//     pools) and scribble into it, or truncate it;
//   - run the data path (the engine reads the scribbled rings);
//   - set up, in one action of a few bytes, a HELLO with this process's
//     files, a PD, a CQ, an MR over the arena and an RC, UC or UD QP
//     connected to itself in RTS, so that scribbled WQEs make the engine
//     move data.
// Memory registrations point into an arena of this process, so the engine's
// DMA, which reaches "the client" (this process) through the /proc/self/mem
// its HELLO carried, lands in the arena and never in the fuzzer's own heap.
// A HELLO mostly carries that file and /proc/self/maps, as abi/control.h
// requires (without them no registration of client memory succeeds), and
// sometimes a wrong set the daemon must refuse.
//
// After every input all clients disconnect, and these must hold, or the
// target traps (libFuzzer keeps the input as a reproducer):
//   - a fresh client's HELLO with this process's files succeeds, and its
//     STATUS is answered;
//   - STATUS counts that one client and no object at all: everything the
//     closed clients owned is gone;
//   - the process holds the same close-on-exec fds as before the first
//     input (the daemon closes every fd it received or created for a
//     client).
// AddressSanitizer and UBSan watch the rest. Message layouts come from
// emulator/abi/control.h types only (sizeof and field names), so the target
// follows the protocol as it changes.
#include <fcntl.h>
#include <fuzzer/FuzzedDataProvider.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <infiniband/verbs.h>  // the QP types, states and attribute masks control.h carries

#include "abi/control.h"
#include "abi/fd_passing.h"
#include "control_server.h"
#include "datapath.h"
#include "device/device.h"
#include "log.h"
#include "net/loopback_port.h"

namespace {

using namespace uroce;

constexpr std::size_t kMaxClients = 3;
constexpr std::size_t kMaxActions = 64;
constexpr std::size_t kArenaBytes = 1u << 20;  // where registered memory lives
constexpr std::size_t kMaxKnownValues = 64;     // handles and keys remembered per input

// ---- the requests control.h defines --------------------------------------

struct RequestType {
    std::uint16_t op;
    std::size_t size;
};

constexpr RequestType kRequests[] = {
    {UROCE_CTRL_HELLO, sizeof(uroce_ctrl_hello)},
    {UROCE_CTRL_QUERY_DEVICE, sizeof(uroce_ctrl_hdr)},
    {UROCE_CTRL_QUERY_PORT, sizeof(uroce_ctrl_hdr)},
    {UROCE_CTRL_ALLOC_PD, sizeof(uroce_ctrl_hdr)},
    {UROCE_CTRL_DEALLOC_PD, sizeof(uroce_ctrl_handle)},
    {UROCE_CTRL_REG_MR, sizeof(uroce_ctrl_reg_mr)},
    {UROCE_CTRL_REREG_MR, sizeof(uroce_ctrl_reg_mr)},
    {UROCE_CTRL_DEREG_MR, sizeof(uroce_ctrl_handle)},
    {UROCE_CTRL_ALLOC_MW, sizeof(uroce_ctrl_alloc_mw)},
    {UROCE_CTRL_DEALLOC_MW, sizeof(uroce_ctrl_handle)},
    {UROCE_CTRL_BIND_MW, sizeof(uroce_ctrl_bind_mw)},
    {UROCE_CTRL_CREATE_RELAXED_POOL, sizeof(uroce_ctrl_relaxed_pool)},
    {UROCE_CTRL_FLUSH_RELAXED, sizeof(uroce_ctrl_handle)},
    {UROCE_CTRL_STATUS, sizeof(uroce_ctrl_hdr)},
    {UROCE_CTRL_CREATE_CQ, sizeof(uroce_ctrl_create_cq)},
    {UROCE_CTRL_DESTROY_CQ, sizeof(uroce_ctrl_handle)},
    {UROCE_CTRL_CREATE_QP, sizeof(uroce_ctrl_create_qp)},
    {UROCE_CTRL_MODIFY_QP, sizeof(uroce_ctrl_modify_qp)},
    {UROCE_CTRL_QUERY_QP, sizeof(uroce_ctrl_handle)},
    {UROCE_CTRL_DESTROY_QP, sizeof(uroce_ctrl_handle)},
    {UROCE_CTRL_CREATE_SRQ, sizeof(uroce_ctrl_srq)},
    {UROCE_CTRL_MODIFY_SRQ, sizeof(uroce_ctrl_srq)},
    {UROCE_CTRL_QUERY_SRQ, sizeof(uroce_ctrl_handle)},
    {UROCE_CTRL_DESTROY_SRQ, sizeof(uroce_ctrl_handle)},
    {UROCE_CTRL_CREATE_AH, sizeof(uroce_ctrl_create_ah)},
    {UROCE_CTRL_DESTROY_AH, sizeof(uroce_ctrl_handle)},
    {UROCE_CTRL_DOORBELL, sizeof(uroce_ctrl_hdr)},
    {UROCE_CTRL_STATS, sizeof(uroce_ctrl_hdr)},
    {UROCE_CTRL_LIST_MRS, sizeof(uroce_ctrl_list_mrs)},
    {UROCE_CTRL_RESIZE_CQ, sizeof(uroce_ctrl_resize_cq)},
    {UROCE_CTRL_ADVISE_MR, sizeof(uroce_ctrl_advise_mr)},
    {UROCE_CTRL_ATTACH_MCAST, sizeof(uroce_ctrl_mcast)},
    {UROCE_CTRL_DETACH_MCAST, sizeof(uroce_ctrl_mcast)},
};

// UROCE_FUZZ_TRACE=1: each request as it is sent, with its fds.
bool tracing() {
    static const bool on = std::getenv("UROCE_FUZZ_TRACE") != nullptr;
    return on;
}

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "fuzz_control: %s\n", what);
    std::abort();
}

// ---- the daemon, built once ----------------------------------------------

struct Daemon {
    std::filesystem::path dir;
    device::Device device;
    net::LoopbackPort port;
    daemon::ControlServer server;
    daemon::Datapath datapath;

    static device::DeviceConfig config() {
        device::DeviceConfig c;
        c.name = "uroce_fuzz";
        c.port.mac = {0x02, 0, 0, 0, 0xF0, 0x01};
        c.port.netdev_mtu = 1500;
        c.ips = {wire::ipv4_mapped({192, 0, 2, 1})};
        return c;
    }

    explicit Daemon(std::filesystem::path d)
        : dir(std::move(d)),
          device(config()),
          port(net::LoopbackConfig{.mac = config().port.mac, .max_frame = 1518}),
          server((dir / "uroce_fuzz.sock").string(), device),
          datapath(device, port) {
        server.attach(datapath);
    }

    // Everything the server and the data path have to do, done.
    void settle() {
        for (int i = 0; i < 4; ++i) {
            server.poll_once(0);
            datapath.poll(std::chrono::steady_clock::now());
        }
    }
};

Daemon& the_daemon() {
    static Daemon* d = [] {
        daemon::set_log_quiet(true);  // a line per connection would drown the fuzzer's own output
        static char dir[] = "/tmp/uroce-fuzz-control-XXXXXX";
        if (::mkdtemp(dir) == nullptr) {
            fail("mkdtemp");
        }
        std::atexit([] {
            std::error_code ignored;
            std::filesystem::remove_all(dir, ignored);
        });
        return new Daemon(dir);
    }();
    return *d;
}

std::uint8_t* arena() {
    static auto* a = static_cast<std::uint8_t*>(
        ::mmap(nullptr, kArenaBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    return a;
}

bool close_on_exec(const char* fd_name) {
    const std::string info = std::string("/proc/self/fdinfo/") + fd_name;
    FILE* f = std::fopen(info.c_str(), "r");
    if (f == nullptr) {
        return false;
    }
    unsigned flags = 0;
    char line[128];
    while (std::fgets(line, sizeof line, f) != nullptr) {
        if (std::sscanf(line, "flags: %o", &flags) == 1) {
            break;
        }
    }
    std::fclose(f);
    return (flags & O_CLOEXEC) != 0;
}

// What each open close-on-exec fd is ("12 socket:[123]", "13 /memfd:uroce-cq
// (deleted)", ...). Every fd the daemon makes or receives is close-on-exec
// (it receives with MSG_CMSG_CLOEXEC); the sanitizer runtime's own pipes,
// made lazily, are not.
std::vector<std::string> open_fds() {
    std::vector<std::string> fds;
    if (DIR* d = ::opendir("/proc/self/fd")) {
        const int own = ::dirfd(d);
        while (const dirent* e = ::readdir(d)) {
            char target[256]{};
            const std::string link = std::string("/proc/self/fd/") + e->d_name;
            if (e->d_name[0] != '.' && std::atoi(e->d_name) != own && close_on_exec(e->d_name) &&
                ::readlink(link.c_str(), target, sizeof target - 1) > 0) {
                fds.push_back(std::string(e->d_name) + " " + target);
            }
        }
        ::closedir(d);
    }
    std::sort(fds.begin(), fds.end());
    return fds;
}

// ---- clients ----------------------------------------------------------------

// What the daemon handed out during this input, to name in later requests:
// by kind from the replies that create objects, and every nonzero word of
// every reply body.
struct Known {
    std::vector<std::uint32_t> words, pds, cqs, qps, srqs, ahs, lkeys, mws;

    void note(const std::uint8_t* reply, std::size_t len);
};

template <typename T>
T reply_as(const std::uint8_t* reply, std::size_t len) {
    T t{};
    std::memcpy(&t, reply, std::min(len, sizeof t));
    return t;
}

void remember(std::vector<std::uint32_t>& list, std::uint32_t v) {
    if (list.size() < kMaxKnownValues) {
        list.push_back(v);
    }
}

void Known::note(const std::uint8_t* reply, std::size_t len) {
    for (std::size_t at = sizeof(uroce_ctrl_hdr); at + 4 <= len; at += 4) {
        std::uint32_t w;
        std::memcpy(&w, reply + at, sizeof w);
        if (w != 0) {
            remember(words, w);
        }
    }
    const auto h = reply_as<uroce_ctrl_hdr>(reply, len);
    if (h.status != 0) {
        return;
    }
    switch (h.op) {
        case UROCE_CTRL_ALLOC_PD:
            remember(pds, reply_as<uroce_ctrl_handle>(reply, len).handle);
            break;
        case UROCE_CTRL_CREATE_CQ:
            remember(cqs, reply_as<uroce_ctrl_cq_reply>(reply, len).handle);
            break;
        case UROCE_CTRL_CREATE_QP:
            remember(qps, reply_as<uroce_ctrl_create_qp_reply>(reply, len).qpn);
            break;
        case UROCE_CTRL_CREATE_SRQ:
            remember(srqs, reply_as<uroce_ctrl_srq>(reply, len).handle);
            break;
        case UROCE_CTRL_CREATE_AH:
            remember(ahs, reply_as<uroce_ctrl_handle>(reply, len).handle);
            break;
        case UROCE_CTRL_REG_MR:
            remember(lkeys, reply_as<uroce_ctrl_mr_reply>(reply, len).lkey);
            break;
        case UROCE_CTRL_ALLOC_MW:
            remember(mws, reply_as<uroce_ctrl_mr_reply>(reply, len).rkey);
            break;
        default:
            break;
    }
}

struct Client {
    int fd = -1;
    std::vector<int> received;  // fds the daemon passed (rings, pools, doorbell, async pipe)
    Known known;                // objects are per client: another's handles only get EINVAL
};

int connect_client() {
    const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string path = the_daemon().server.socket_path();
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        fail("cannot connect to the control socket");
    }
    return fd;
}

void close_client(Client& c) {
    for (int f : c.received) {
        ::close(f);
    }
    ::close(c.fd);
    c = Client{};
}

// Takes every reply waiting on `c`: the fds go to `c.received`, handles and
// keys to `c.known`. The last reply, if any, is left in `last`.
bool drain_replies(Client& c, std::vector<std::uint8_t>* last = nullptr) {
    bool got = false;
    for (;;) {
        alignas(8) std::uint8_t buf[UROCE_CTRL_MAX_MESSAGE];
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
        iovec iov{buf, sizeof buf};
        msghdr mh{};
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = control;
        mh.msg_controllen = sizeof control;
        const ssize_t n = ::recvmsg(c.fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n <= 0) {
            return got;
        }
        got = true;
        if (tracing() && static_cast<std::size_t>(n) >= sizeof(uroce_ctrl_hdr)) {
            uroce_ctrl_hdr h;
            std::memcpy(&h, buf, sizeof h);
            std::fprintf(stderr, "  client fd %d: reply to op %u: status %d\n", c.fd, h.op, h.status);
        }
        for (cmsghdr* m = CMSG_FIRSTHDR(&mh); m != nullptr; m = CMSG_NXTHDR(&mh, m)) {
            if (m->cmsg_level == SOL_SOCKET && m->cmsg_type == SCM_RIGHTS) {
                const std::size_t count = (m->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (std::size_t i = 0; i < count; ++i) {
                    int f;
                    std::memcpy(&f, CMSG_DATA(m) + i * sizeof(int), sizeof f);
                    c.received.push_back(f);
                }
            }
        }
        c.known.note(buf, static_cast<std::size_t>(n));
        if (last != nullptr) {
            last->assign(buf, buf + n);
        }
    }
}

// ---- fds to attach --------------------------------------------------------

enum class FdKind : std::uint8_t { None, Memfd, Eventfd, PipeRead, PipeWrite, DevNull, DaemonMemfd, Two, kMaxValue = Two };

// An fd of `kind` (the caller closes it); -1 for None or when none can be made.
int make_fd(FdKind kind, FuzzedDataProvider& in, const Client& c) {
    switch (kind) {
        case FdKind::Memfd: {
            const int f = ::memfd_create("fuzz-client", MFD_CLOEXEC);
            const auto size = in.ConsumeIntegralInRange<std::uint32_t>(0, 1u << 16);
            if (f >= 0 && ::ftruncate(f, size) != 0) {
                ::close(f);
                return -1;
            }
            return f;
        }
        case FdKind::Eventfd:
            return ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        case FdKind::PipeRead:
        case FdKind::PipeWrite: {
            int p[2];
            if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
                return -1;
            }
            const int keep = kind == FdKind::PipeRead ? 0 : 1;
            ::close(p[1 - keep]);
            return p[keep];
        }
        case FdKind::DevNull:
            return ::open("/dev/null", O_RDWR | O_CLOEXEC);
        case FdKind::DaemonMemfd:
            if (c.received.empty()) {
                return -1;
            }
            return ::fcntl(c.received[in.ConsumeIntegralInRange<std::size_t>(0, c.received.size() - 1)],
                           F_DUPFD_CLOEXEC, 0);
        case FdKind::None:
        case FdKind::Two:
            return -1;
    }
    return -1;
}

// Zero, one or two fds of `kind` (the caller closes them).
std::vector<int> make_fds(FdKind kind, FuzzedDataProvider& in, const Client& c) {
    std::vector<int> fds;
    if (kind == FdKind::Two) {
        fds = {make_fd(FdKind::Eventfd, in, c), make_fd(FdKind::Memfd, in, c)};
    } else {
        fds = {make_fd(kind, in, c)};
    }
    std::erase(fds, -1);
    return fds;
}

// What a HELLO carries. abi/control.h wants this process's /proc/self/mem,
// opened read-write, then its /proc/self/maps: without them the client's
// memory is unreachable and every registration of it fails, so a HELLO
// mostly carries them; the other sets are ones the daemon must refuse
// (EINVAL), and Fuzzed attaches what any other request may.
enum class HelloFiles : std::uint8_t { Own, Swapped, MemReadOnly, OnlyMem, MapsTwice, Fuzzed, kMaxValue = Fuzzed };

std::vector<int> process_files(HelloFiles which) {
    const auto mem = [](int mode) { return ::open("/proc/self/mem", mode | O_CLOEXEC); };
    const auto maps = [] { return ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC); };
    std::vector<int> fds;  // braced lists evaluate left to right: the order is the one written
    switch (which) {
        case HelloFiles::Own:
            fds = {mem(O_RDWR), maps()};
            break;
        case HelloFiles::Swapped:
            fds = {maps(), mem(O_RDWR)};
            break;
        case HelloFiles::MemReadOnly:
            fds = {mem(O_RDONLY), maps()};
            break;
        case HelloFiles::OnlyMem:
            fds = {mem(O_RDWR)};
            break;
        case HelloFiles::MapsTwice:
            fds = {maps(), maps()};
            break;
        case HelloFiles::Fuzzed:
            break;
    }
    std::erase(fds, -1);
    return fds;
}

// Sends `msg` with `fds` attached (at most two), then closes them. False
// when the datagram did not go out whole.
bool send_request(Client& c, const std::vector<std::uint8_t>& msg, std::vector<int> fds) {
    if (tracing()) {
        const auto* h = msg.size() >= sizeof(uroce_ctrl_hdr) ? reinterpret_cast<const uroce_ctrl_hdr*>(msg.data())
                                                             : nullptr;
        std::fprintf(stderr, "  client fd %d: %zu bytes, op %d, %zu fds\n", c.fd, msg.size(),
                     h != nullptr ? h->op : -1, fds.size());
    }
    iovec iov{const_cast<std::uint8_t*>(msg.data()), msg.size()};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 2)]{};
    if (!fds.empty()) {
        mh.msg_control = control;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* m = CMSG_FIRSTHDR(&mh);
        m->cmsg_level = SOL_SOCKET;
        m->cmsg_type = SCM_RIGHTS;
        m->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(m), fds.data(), sizeof(int) * fds.size());
    }
    const ssize_t sent = ::sendmsg(c.fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    for (int f : fds) {
        ::close(f);
    }
    return sent == static_cast<ssize_t>(msg.size());
}

// ---- building requests ----------------------------------------------------

template <typename T>
T* as(std::vector<std::uint8_t>& msg) {
    return msg.size() >= sizeof(T) ? reinterpret_cast<T*>(msg.data()) : nullptr;
}

// Registrations point into the arena (see the header comment).
void aim_into_arena(std::vector<std::uint8_t>& msg, FuzzedDataProvider& in) {
    auto* r = as<uroce_ctrl_reg_mr>(msg);
    if (r == nullptr) {
        return;
    }
    const auto offset = in.ConsumeIntegralInRange<std::size_t>(0, kArenaBytes - 1);
    r->addr = reinterpret_cast<std::uintptr_t>(arena()) + offset;
    r->length = in.ConsumeIntegralInRange<std::size_t>(0, kArenaBytes - offset);
    if ((r->flags & UROCE_REG_SHARED) != 0) {
        r->shared_addr = r->addr & ~std::uint64_t{4095};
        r->shared_length = (r->addr + r->length - r->shared_addr + 4095) & ~std::uint64_t{4095};
        r->shared_offset = 0;
    }
}

std::uint32_t pick(FuzzedDataProvider& in, const std::vector<std::uint32_t>& list) {
    if (list.empty()) {
        return in.ConsumeIntegral<std::uint32_t>();
    }
    return list[in.ConsumeIntegralInRange<std::size_t>(0, list.size() - 1)];
}

// A path to ourselves (the loopback port's one address): what modify_qp and
// create_ah are given when shaped.
void aim_at_ourselves(uroce_ctrl_ah_attr& ah, FuzzedDataProvider& in) {
    const wire::Gid self = Daemon::config().ips[0];
    std::memcpy(ah.dgid, self.data(), sizeof ah.dgid);
    ah.is_global = 1;
    ah.port_num = 1;
    ah.sgid_index = in.ConsumeIntegralInRange<std::uint8_t>(0, 3);
    ah.hop_limit = 64;
}

// Gives the fields that name objects or size them plausible values (objects
// this input created, small capacities), so that requests get past the
// first checks and reach deeper states; the rest stays fuzzer bytes.
void shape(std::vector<std::uint8_t>& msg, std::uint16_t op, FuzzedDataProvider& in, const Known& k) {
    switch (op) {
        case UROCE_CTRL_DEALLOC_PD:
            as<uroce_ctrl_handle>(msg)->handle = pick(in, k.pds);
            break;
        case UROCE_CTRL_DEREG_MR:
            as<uroce_ctrl_handle>(msg)->handle = pick(in, k.lkeys);
            break;
        case UROCE_CTRL_DEALLOC_MW:
            as<uroce_ctrl_handle>(msg)->handle = pick(in, k.mws);
            break;
        case UROCE_CTRL_DESTROY_CQ:
            as<uroce_ctrl_handle>(msg)->handle = pick(in, k.cqs);
            break;
        case UROCE_CTRL_ADVISE_MR:
            as<uroce_ctrl_advise_mr>(msg)->pd = pick(in, k.pds);
            as<uroce_ctrl_advise_mr>(msg)->lkey = pick(in, k.lkeys);
            break;
        case UROCE_CTRL_ATTACH_MCAST:
        case UROCE_CTRL_DETACH_MCAST:
            as<uroce_ctrl_mcast>(msg)->qpn = pick(in, k.qps);
            if (in.ConsumeBool()) {  // a group most of the time: ::ffff:239.0.0.x or ff0e::x
                std::uint8_t* gid = as<uroce_ctrl_mcast>(msg)->gid;
                const bool v4 = in.ConsumeBool();
                std::memset(gid, 0, 16);
                gid[0] = static_cast<std::uint8_t>(v4 ? 0x00 : 0xFF);
                gid[1] = static_cast<std::uint8_t>(v4 ? 0x00 : 0x0E);
                gid[10] = gid[11] = static_cast<std::uint8_t>(v4 ? 0xFF : 0x00);
                gid[12] = static_cast<std::uint8_t>(v4 ? 239 : 0);
                gid[15] = in.ConsumeIntegralInRange<std::uint8_t>(0, 3);
            }
            break;
        case UROCE_CTRL_RESIZE_CQ:
            as<uroce_ctrl_resize_cq>(msg)->handle = pick(in, k.cqs);
            as<uroce_ctrl_resize_cq>(msg)->cqe = in.ConsumeIntegralInRange<std::uint32_t>(0, 64);
            break;
        case UROCE_CTRL_QUERY_QP:
        case UROCE_CTRL_DESTROY_QP:
            as<uroce_ctrl_handle>(msg)->handle = pick(in, k.qps);
            break;
        case UROCE_CTRL_QUERY_SRQ:
        case UROCE_CTRL_DESTROY_SRQ:
            as<uroce_ctrl_handle>(msg)->handle = pick(in, k.srqs);
            break;
        case UROCE_CTRL_DESTROY_AH:
            as<uroce_ctrl_handle>(msg)->handle = pick(in, k.ahs);
            break;
        case UROCE_CTRL_FLUSH_RELAXED:
            as<uroce_ctrl_handle>(msg)->handle = pick(in, k.words);
            break;
        case UROCE_CTRL_REG_MR:
        case UROCE_CTRL_REREG_MR: {
            auto* r = as<uroce_ctrl_reg_mr>(msg);
            r->pd = pick(in, k.pds);
            r->access = in.ConsumeIntegralInRange<std::uint32_t>(0, 0x1F);
            r->flags &= UROCE_REG_HAS_IOVA | UROCE_REG_SHARED | (in.ConsumeBool() ? UROCE_REG_DMABUF : 0);
            r->lkey = pick(in, k.lkeys);
            r->rereg_flags &= 0x7;
            break;
        }
        case UROCE_CTRL_ALLOC_MW: {
            auto* r = as<uroce_ctrl_alloc_mw>(msg);
            r->pd = pick(in, k.pds);
            r->type = in.ConsumeIntegralInRange<std::uint32_t>(1, 2);
            break;
        }
        case UROCE_CTRL_BIND_MW: {
            auto* r = as<uroce_ctrl_bind_mw>(msg);
            r->mw_rkey = pick(in, k.mws);
            r->mr_lkey = pick(in, k.lkeys);
            r->qp_pd = pick(in, k.pds);
            r->addr = reinterpret_cast<std::uintptr_t>(arena()) + in.ConsumeIntegralInRange<std::size_t>(0, kArenaBytes);
            r->length = in.ConsumeIntegralInRange<std::uint64_t>(0, kArenaBytes);
            break;
        }
        case UROCE_CTRL_CREATE_RELAXED_POOL: {
            auto* r = as<uroce_ctrl_relaxed_pool>(msg);
            r->pd = pick(in, k.pds);
            r->capacity = in.ConsumeIntegralInRange<std::uint32_t>(1, 64);
            r->dirty_watermark = in.ConsumeIntegralInRange<std::uint32_t>(1, r->capacity);
            r->invalidate_after_us = in.ConsumeIntegralInRange<std::uint32_t>(0, 1000);
            break;
        }
        case UROCE_CTRL_CREATE_CQ:
            as<uroce_ctrl_create_cq>(msg)->cqe = in.ConsumeIntegralInRange<std::uint32_t>(1, 64);
            as<uroce_ctrl_create_cq>(msg)->has_channel &= 1;
            as<uroce_ctrl_create_cq>(msg)->flags &= UROCE_CQ_TIMESTAMPS;
            break;
        case UROCE_CTRL_CREATE_QP: {
            auto* r = as<uroce_ctrl_create_qp>(msg);
            r->pd = pick(in, k.pds);
            r->send_cq = pick(in, k.cqs);
            r->recv_cq = pick(in, k.cqs);
            r->srq = in.ConsumeBool() ? pick(in, k.srqs) : 0;
            r->qp_type = in.PickValueInArray<std::uint8_t>({2, 3, 4});  // IBV_QPT_RC, UC, UD
            r->cap = {in.ConsumeIntegralInRange<std::uint32_t>(1, 16), in.ConsumeIntegralInRange<std::uint32_t>(1, 16),
                      in.ConsumeIntegralInRange<std::uint32_t>(1, 4), in.ConsumeIntegralInRange<std::uint32_t>(1, 4),
                      in.ConsumeIntegralInRange<std::uint32_t>(0, 64), 0};
            break;
        }
        case UROCE_CTRL_MODIFY_QP: {
            auto* r = as<uroce_ctrl_modify_qp>(msg);
            r->qpn = pick(in, k.qps);
            r->attr.qp_state = in.ConsumeIntegralInRange<std::uint32_t>(0, 6);  // IBV_QPS_RESET .. ERR
            r->attr.path_mtu = in.ConsumeIntegralInRange<std::uint32_t>(1, 5);
            r->attr.dest_qp_num = pick(in, k.qps);
            r->attr.port_num = 1;
            aim_at_ourselves(r->attr.ah_attr, in);
            break;
        }
        case UROCE_CTRL_CREATE_SRQ:
        case UROCE_CTRL_MODIFY_SRQ: {
            auto* r = as<uroce_ctrl_srq>(msg);
            r->pd = pick(in, k.pds);
            r->handle = pick(in, k.srqs);
            r->max_wr = in.ConsumeIntegralInRange<std::uint32_t>(1, 64);
            r->max_sge = in.ConsumeIntegralInRange<std::uint32_t>(1, 4);
            r->srq_limit = in.ConsumeIntegralInRange<std::uint32_t>(0, r->max_wr);
            break;
        }
        case UROCE_CTRL_CREATE_AH: {
            auto* r = as<uroce_ctrl_create_ah>(msg);
            r->pd = pick(in, k.pds);
            aim_at_ourselves(r->attr, in);
            break;
        }
        default:
            break;
    }
}

std::vector<std::uint8_t> build_request(FuzzedDataProvider& in, const Known& known, std::uint32_t seq) {
    RequestType type = in.PickValueInArray(kRequests);
    if (in.ConsumeIntegralInRange<int>(0, 31) == 0) {
        type.op = in.ConsumeIntegral<std::uint16_t>();  // any op, known or not
    }
    std::vector<std::uint8_t> msg(type.size, 0);
    const std::vector<std::uint8_t> body = in.ConsumeBytes<std::uint8_t>(type.size - sizeof(uroce_ctrl_hdr));
    if (!body.empty()) {
        std::memcpy(msg.data() + sizeof(uroce_ctrl_hdr), body.data(), body.size());
    }
    // Known handles and keys in place of some words of the body.
    const int substitutions = in.ConsumeIntegralInRange<int>(0, 3);
    for (int i = 0; i < substitutions && !known.words.empty() && type.size > sizeof(uroce_ctrl_hdr); ++i) {
        const std::size_t words = (type.size - sizeof(uroce_ctrl_hdr)) / 4;
        const std::size_t at = sizeof(uroce_ctrl_hdr) + 4 * in.ConsumeIntegralInRange<std::size_t>(0, words - 1);
        const std::uint32_t v = pick(in, known.words);
        std::memcpy(msg.data() + at, &v, sizeof v);
    }
    const bool sized_as_its_op = std::any_of(std::begin(kRequests), std::end(kRequests), [&](const RequestType& t) {
        return t.op == type.op && t.size == type.size;
    });
    if (sized_as_its_op && in.ConsumeIntegralInRange<int>(0, 3) != 0) {
        shape(msg, type.op, in, known);
    }
    if (auto* hello = as<uroce_ctrl_hello>(msg); type.op == UROCE_CTRL_HELLO && hello != nullptr && in.ConsumeBool()) {
        hello->abi_version = UROCE_CTRL_VERSION;
    }
    if ((type.op == UROCE_CTRL_REG_MR || type.op == UROCE_CTRL_REREG_MR) && in.ConsumeIntegralInRange<int>(0, 7) != 0) {
        aim_into_arena(msg, in);
    }
    auto* h = as<uroce_ctrl_hdr>(msg);
    h->magic = in.ConsumeIntegralInRange<int>(0, 63) != 0 ? UROCE_CTRL_MAGIC : in.ConsumeIntegral<std::uint32_t>();
    h->version = in.ConsumeIntegralInRange<int>(0, 63) != 0 ? UROCE_CTRL_VERSION : in.ConsumeIntegral<std::uint16_t>();
    h->op = type.op;
    h->length = static_cast<std::uint32_t>(msg.size());
    h->seq = seq;
    if (in.ConsumeIntegralInRange<int>(0, 31) == 0) {  // a length field or a datagram that disagrees
        h->length = in.ConsumeIntegral<std::uint32_t>();
    }
    if (in.ConsumeIntegralInRange<int>(0, 31) == 0) {
        msg.resize(in.ConsumeIntegralInRange<std::size_t>(0, UROCE_CTRL_MAX_MESSAGE + 1));
    }
    return msg;
}

// The fds a fuzzed request carries: a HELLO mostly this process's files
// (seven times in eight), any request sometimes one or two other fds.
std::vector<int> fds_for_request(const std::vector<std::uint8_t>& msg, FuzzedDataProvider& in, const Client& c) {
    const bool hello =
        msg.size() >= sizeof(uroce_ctrl_hdr) && reply_as<uroce_ctrl_hdr>(msg.data(), msg.size()).op == UROCE_CTRL_HELLO;
    if (hello) {
        const auto files = in.ConsumeIntegralInRange<int>(0, 7) != 0 ? HelloFiles::Own : in.ConsumeEnum<HelloFiles>();
        if (files != HelloFiles::Fuzzed) {
            return process_files(files);
        }
    }
    const auto kind = in.ConsumeIntegralInRange<int>(0, 3) == 0 ? in.ConsumeEnum<FdKind>() : FdKind::None;
    return make_fds(kind, in, c);
}

// ---- shared memory the daemon handed out ----------------------------------

void scribble(Client& c, FuzzedDataProvider& in) {
    if (c.received.empty()) {
        return;
    }
    const int f = c.received[in.ConsumeIntegralInRange<std::size_t>(0, c.received.size() - 1)];
    struct stat st {};
    if (::fstat(f, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
        return;  // the doorbell eventfd or the async pipe: nothing to map
    }
    const auto size = static_cast<std::size_t>(st.st_size);
    void* mem = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    if (mem == MAP_FAILED) {
        return;
    }
    const int writes = in.ConsumeIntegralInRange<int>(1, 8);
    for (int i = 0; i < writes; ++i) {
        // Near the start of a page (where ring headers keep their indices
        // and flags: a QP's SQ and RQ rings each start on one), or anywhere.
        std::size_t at = 0;
        if (in.ConsumeIntegralInRange<int>(0, 3) != 0) {
            const std::size_t page = in.ConsumeIntegralInRange<std::size_t>(0, (size - 1) / 4096);
            at = std::min(size - 1, page * 4096 + in.ConsumeIntegralInRange<std::size_t>(0, 255));
        } else {
            at = in.ConsumeIntegralInRange<std::size_t>(0, size - 1);
        }
        const std::vector<std::uint8_t> bytes = in.ConsumeBytes<std::uint8_t>(std::min<std::size_t>(size - at, 16));
        if (!bytes.empty()) {
            std::memcpy(static_cast<std::uint8_t*>(mem) + at, bytes.data(), bytes.size());
        }
    }
    ::munmap(mem, size);
}

void truncate_received(Client& c, FuzzedDataProvider& in) {
    if (c.received.empty()) {
        return;
    }
    const int f = c.received[in.ConsumeIntegralInRange<std::size_t>(0, c.received.size() - 1)];
    [[maybe_unused]] const int r = ::ftruncate(f, in.ConsumeIntegralInRange<off_t>(0, 8192));
}

// ---- the invariants ---------------------------------------------------------

// A fresh client's HELLO and STATUS: answered, and no object of anyone left.
void check_daemon_is_clean(Daemon& d) {
    Client c{connect_client(), {}, {}};
    std::vector<std::uint8_t> reply;
    uroce_ctrl_hello hello{};
    hello.hdr = {UROCE_CTRL_MAGIC, UROCE_CTRL_VERSION, UROCE_CTRL_HELLO, sizeof hello, 1, 0, 0};
    hello.abi_version = UROCE_CTRL_VERSION;
    uroce_ctrl_hdr status{UROCE_CTRL_MAGIC, UROCE_CTRL_VERSION, UROCE_CTRL_STATUS, sizeof(uroce_ctrl_hdr), 2, 0, 0};
    const std::vector<int> files = process_files(HelloFiles::Own);
    if (files.size() != 2) {
        fail("cannot open /proc/self/mem and /proc/self/maps");
    }
    const auto ask = [&](const void* msg, std::size_t len, std::vector<int> fds) {
        const auto* bytes = static_cast<const std::uint8_t*>(msg);
        if (!send_request(c, std::vector<std::uint8_t>(bytes, bytes + len), std::move(fds))) {
            fail("cannot send to the daemon");
        }
        d.settle();
        if (!drain_replies(c, &reply)) {
            fail("the daemon did not answer a valid request");
        }
    };
    ask(&hello, sizeof hello, files);
    if (reply.size() != sizeof(uroce_ctrl_hello_reply) ||
        reply_as<uroce_ctrl_hdr>(reply.data(), reply.size()).status != 0) {
        fail("the daemon refused a HELLO with this process's own files");
    }
    ask(&status, sizeof status, {});
    if (reply.size() != sizeof(uroce_ctrl_status_reply)) {
        fail("STATUS reply of the wrong size");
    }
    uroce_ctrl_status_reply s;
    std::memcpy(&s, reply.data(), sizeof s);
    if (s.hdr.status != 0 || s.clients != 1) {
        fail("STATUS failed or counts clients that have gone");
    }
    if (s.pds + s.mrs + s.mws + s.relaxed_pools + s.cqs + s.qps + s.srqs + s.ahs != 0) {
        fail("objects of closed clients are still there");
    }
    close_client(c);
    d.settle();
}

// ---- a connected QP in few bytes --------------------------------------------

// Sends `msg` (with `fds`) on `c`, lets the daemon answer, takes the reply.
void call(Daemon& d, Client& c, std::vector<std::uint8_t> msg, std::uint16_t op, std::uint32_t seq,
          std::vector<int> fds = {}) {
    auto* h = as<uroce_ctrl_hdr>(msg);
    *h = {UROCE_CTRL_MAGIC, UROCE_CTRL_VERSION, op, static_cast<std::uint32_t>(msg.size()), seq, 0, 0};
    send_request(c, msg, std::move(fds));
    d.settle();
    drain_replies(c);
}

// The attributes of one step RESET -> INIT -> RTR -> RTS (ibv_modify_qp(3)'s
// required masks), towards `dest_qpn` on our own address.
std::vector<std::uint8_t> modify_step(std::uint32_t qpn, ibv_qp_type type, ibv_qp_state to, std::uint32_t dest_qpn,
                                      FuzzedDataProvider& in) {
    std::vector<std::uint8_t> msg(sizeof(uroce_ctrl_modify_qp), 0);
    auto* m = as<uroce_ctrl_modify_qp>(msg);
    m->qpn = qpn;
    uroce_ctrl_qp_attr& a = m->attr;
    a.qp_state = to;
    a.port_num = 1;
    a.qkey = 0x11111111;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                        IBV_ACCESS_REMOTE_ATOMIC;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = dest_qpn;
    a.rq_psn = a.sq_psn = in.ConsumeIntegralInRange<std::uint32_t>(0, 0xFFFFFF);
    a.max_rd_atomic = a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.timeout = in.ConsumeIntegralInRange<std::uint8_t>(0, 14);
    a.retry_cnt = in.ConsumeIntegralInRange<std::uint8_t>(0, 7);
    a.rnr_retry = in.ConsumeIntegralInRange<std::uint8_t>(0, 7);
    aim_at_ourselves(a.ah_attr, in);
    const bool ud = type == IBV_QPT_UD;
    switch (to) {
        case IBV_QPS_INIT:
            m->attr_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
            break;
        case IBV_QPS_RTR:
            m->attr_mask = ud ? IBV_QP_STATE
                              : IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                    (type == IBV_QPT_RC ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0);
            break;
        default:
            m->attr_mask = IBV_QP_STATE | IBV_QP_SQ_PSN |
                           (type == IBV_QPT_RC ? IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                                     IBV_QP_MAX_QP_RD_ATOMIC
                                               : 0);
            break;
    }
    return msg;
}

// PD, CQ, an MR over the arena and a QP of the chosen type connected to
// itself and moved to RTS: the state where scribbled WQEs make the engine
// move data. Each step is a real request; a failing one ends the kit.
void connected_qp(Daemon& d, Client& c, FuzzedDataProvider& in, std::uint32_t& seq) {
    // The client's memory reachable first (EALREADY if it already is).
    std::vector<std::uint8_t> hello(sizeof(uroce_ctrl_hello), 0);
    as<uroce_ctrl_hello>(hello)->abi_version = UROCE_CTRL_VERSION;
    call(d, c, hello, UROCE_CTRL_HELLO, ++seq, process_files(HelloFiles::Own));
    call(d, c, std::vector<std::uint8_t>(sizeof(uroce_ctrl_hdr)), UROCE_CTRL_ALLOC_PD, ++seq);
    std::vector<std::uint8_t> cq(sizeof(uroce_ctrl_create_cq), 0);
    as<uroce_ctrl_create_cq>(cq)->cqe = in.ConsumeIntegralInRange<std::uint32_t>(1, 64);
    call(d, c, cq, UROCE_CTRL_CREATE_CQ, ++seq);
    if (c.known.pds.empty() || c.known.cqs.empty()) {
        return;
    }
    std::vector<std::uint8_t> mr(sizeof(uroce_ctrl_reg_mr), 0);
    as<uroce_ctrl_reg_mr>(mr)->pd = c.known.pds.back();
    as<uroce_ctrl_reg_mr>(mr)->access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                       IBV_ACCESS_REMOTE_ATOMIC;
    aim_into_arena(mr, in);
    call(d, c, mr, UROCE_CTRL_REG_MR, ++seq);
    const auto type = in.PickValueInArray({IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD});
    std::vector<std::uint8_t> qp(sizeof(uroce_ctrl_create_qp), 0);
    auto* q = as<uroce_ctrl_create_qp>(qp);
    q->pd = c.known.pds.back();
    q->send_cq = q->recv_cq = c.known.cqs.back();
    q->qp_type = static_cast<std::uint8_t>(type);
    q->sq_sig_all = in.ConsumeBool() ? 1 : 0;
    q->cap = {8, 8, 2, 2, 64, 0};
    const std::size_t qps_before = c.known.qps.size();
    call(d, c, qp, UROCE_CTRL_CREATE_QP, ++seq);
    if (c.known.qps.size() == qps_before) {
        return;
    }
    const std::uint32_t qpn = c.known.qps.back();
    for (const ibv_qp_state to : {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS}) {
        call(d, c, modify_step(qpn, type, to, qpn, in), UROCE_CTRL_MODIFY_QP, ++seq);
    }
}

enum class Action : std::uint8_t {
    Connect,
    Request,
    Raw,
    Scribble,
    Truncate,
    Disconnect,
    RunDatapath,
    ConnectedQp,
    kMaxValue = ConnectedQp
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    Daemon& d = the_daemon();
    static const std::vector<std::string> baseline_fds = [&] {
        check_daemon_is_clean(d);
        return open_fds();
    }();
    FuzzedDataProvider in(data, size);
    std::array<Client, kMaxClients> clients;
    std::uint32_t seq = 0;
    clients[0].fd = connect_client();
    d.settle();
    for (std::size_t step = 0; step < kMaxActions && in.remaining_bytes() > 0; ++step) {
        const auto action = in.ConsumeEnum<Action>();
        Client& c = clients[in.ConsumeIntegralInRange<std::size_t>(0, kMaxClients - 1)];
        if (c.fd < 0 && action != Action::Connect) {
            continue;
        }
        switch (action) {
            case Action::Connect:
                if (c.fd < 0) {
                    c.fd = connect_client();
                }
                break;
            case Action::Request: {
                const std::vector<std::uint8_t> msg = build_request(in, c.known, ++seq);
                send_request(c, msg, fds_for_request(msg, in, c));
                break;
            }
            case Action::Raw: {
                const std::vector<std::uint8_t> msg =
                    in.ConsumeBytes<std::uint8_t>(in.ConsumeIntegralInRange<std::size_t>(0, UROCE_CTRL_MAX_MESSAGE + 1));
                send_request(c, msg, {});
                break;
            }
            case Action::Scribble:
                scribble(c, in);
                break;
            case Action::Truncate:
                truncate_received(c, in);
                break;
            case Action::Disconnect:
                close_client(c);
                break;
            case Action::RunDatapath:
                break;
            case Action::ConnectedQp:
                connected_qp(d, c, in, seq);
                break;
        }
        d.settle();
        if (c.fd >= 0) {
            drain_replies(c);
        }
    }
    for (Client& c : clients) {
        if (c.fd >= 0) {
            close_client(c);
        }
    }
    d.settle();
    check_daemon_is_clean(d);
    if (const std::vector<std::string> now = open_fds(); now != baseline_fds) {
        for (const std::string& f : now) {
            if (std::find(baseline_fds.begin(), baseline_fds.end(), f) == baseline_fds.end()) {
                std::fprintf(stderr, "fuzz_control: fd %s is new\n", f.c_str());
            }
        }
        fail("the daemon kept fds of clients that have gone");
    }
    return 0;
}
