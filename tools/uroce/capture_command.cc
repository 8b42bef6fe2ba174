#include "capture_command.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "abi/control_client.h"
#include "common/unique_fd.h"
#include "device_locator.h"
#include "pcapng_writer.h"

namespace uroce::tools {

namespace {

struct CaptureOptions {
    DeviceLocation location;
    std::optional<std::uint32_t> qpn;
    std::uint64_t count = 0;  // 0: until interrupted
    std::string output;
};

// Why the capture loop ended.
enum class Ending : std::uint8_t {
    Interrupted,   // SIGINT or SIGTERM
    CountReached,  // --count frames written
    DaemonClosed,  // the daemon ended the session (it stopped)
    OutputFailed,  // the file or pipe refused a write (a reader on stdout went away)
    ReadFailed,
};

volatile std::sig_atomic_t g_interrupted = 0;

void on_signal(int) { g_interrupted = 1; }

// SIGINT and SIGTERM end the capture cleanly (the loop's poll returns
// EINTR); SIGPIPE is ignored so a reader of stdout that exits shows as EPIPE.
void install_signals() {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: poll() returns EINTR
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
}

// Largest record: header, note (u16 length), jumbo frame.
constexpr std::size_t kRecordBuffer = sizeof(uroce_capture_record) + 65535 + 16384;
// How long the loop waits for a frame before it looks at the signal flag.
constexpr int kPollMs = 200;

struct Loop {
    int socket;
    PcapngWriter& writer;
    std::uint64_t limit;
    std::uint64_t written = 0;
    std::uint64_t malformed = 0;
    std::array<std::uint8_t, kRecordBuffer> buffer{};

    // Reads and writes what is queued now (wait_ms: how long to wait for the
    // first); nullopt when the caller should keep going.
    std::optional<Ending> drain(int wait_ms) {
        pollfd p{socket, POLLIN, 0};
        const int ready = ::poll(&p, 1, wait_ms);
        if (ready < 0) {
            return errno == EINTR ? std::nullopt : std::optional(Ending::ReadFailed);
        }
        while (ready > 0) {
            if (limit != 0 && written >= limit) {
                return Ending::CountReached;
            }
            const ssize_t n = ::recv(socket, buffer.data(), buffer.size(), MSG_DONTWAIT);
            if (n == 0) {
                return Ending::DaemonClosed;
            }
            if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK) {
                    break;
                }
                return errno == EINTR ? std::nullopt : std::optional(Ending::ReadFailed);
            }
            if (!write_record(static_cast<std::size_t>(n))) {
                return Ending::OutputFailed;
            }
        }
        if (!writer.flush()) {
            return Ending::OutputFailed;
        }
        if (limit != 0 && written >= limit) {
            return Ending::CountReached;
        }
        return std::nullopt;
    }

    bool write_record(std::size_t n) {
        uroce_capture_record h{};
        if (n < sizeof(h)) {
            ++malformed;
            return true;
        }
        std::memcpy(&h, buffer.data(), sizeof(h));
        if (sizeof(h) + h.note_length + h.frame_length != n) {
            ++malformed;
            return true;
        }
        const std::string_view note(reinterpret_cast<const char*>(buffer.data() + sizeof(h)), h.note_length);
        const std::span<const std::uint8_t> frame(buffer.data() + sizeof(h) + h.note_length, h.frame_length);
        const FrameDirection direction = h.direction == UROCE_CAPTURE_RECEIVED ? FrameDirection::Inbound
                                         : h.direction == UROCE_CAPTURE_SENT   ? FrameDirection::Outbound
                                                                               : FrameDirection::Unknown;
        if (!writer.write(h.time_ns, frame, direction, note)) {
            return false;
        }
        ++written;
        return true;
    }
};

int refuse(const std::string& why) {
    fmt::print(stderr, "uroce capture: {}\n", why);
    return 1;
}

int run(const CaptureOptions& o) {
    install_signals();
    abi::ControlClient c;
    if (const int err = c.connect(o.location.socket_path()); err != 0) {
        return refuse(fmt::format("no daemon at {} ({})", o.location.socket_path(), std::strerror(err)));
    }
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
        return refuse(fmt::format("socketpair: {}", std::strerror(errno)));
    }
    const UniqueFd ours(pair[0]);
    UniqueFd theirs(pair[1]);
    uroce_ctrl_capture_start req{};
    req.hdr.op = UROCE_CTRL_CAPTURE_START;
    req.qpn = o.qpn.value_or(UROCE_CAPTURE_ANY_QP);
    uroce_ctrl_capture_reply reply{};
    const int err = c.call(&req, sizeof req, &reply, sizeof reply, theirs.get());
    theirs.reset();  // the daemon holds its own copy now
    if (err == EPERM) {
        return refuse(fmt::format(
            "permission denied (EPERM): a capture shows every user's traffic, so only root or the daemon's own user "
            "may start one; you are uid {}",
            ::getuid()));
    }
    if (err != 0) {
        return refuse(fmt::format("the daemon at {} refused the capture: {}", o.location.socket_path(),
                                  std::strerror(err)));
    }

    std::FILE* out = o.output == "-" ? stdout : std::fopen(o.output.c_str(), "wb");
    if (out == nullptr) {
        return refuse(fmt::format("cannot write {}: {}", o.output, std::strerror(errno)));
    }
    PcapngWriter writer(out, o.location.device);
    auto loop = std::make_unique<Loop>(Loop{ours.get(), writer, o.count});
    if (!writer.flush()) {
        return refuse(fmt::format("cannot write {}: {}", o.output, std::strerror(errno)));
    }
    fmt::print(stderr, "uroce capture: capturing {} of {} into {} (session {}); Ctrl-C stops\n",
               o.qpn ? fmt::format("QP {}", *o.qpn) : std::string("every QP"), o.location.device,
               o.output == "-" ? std::string("stdout") : o.output, reply.session);
    std::optional<Ending> ending;
    while (!ending) {
        ending = g_interrupted != 0 ? std::optional(Ending::Interrupted) : loop->drain(kPollMs);
    }
    // The daemon's totals; then what it sent before it stopped is still in
    // the socket: written too, unless the count was reached or the output failed.
    uroce_ctrl_handle stop{};
    stop.hdr.op = UROCE_CTRL_CAPTURE_STOP;
    stop.handle = reply.session;
    uroce_ctrl_capture_reply totals{};
    const int stop_err =
        *ending == Ending::DaemonClosed ? ENOENT : c.call(&stop, sizeof stop, &totals, sizeof totals);
    if (*ending == Ending::Interrupted && stop_err == 0) {
        while (!loop->drain(0)) {
        }
    }
    const std::uint64_t written = loop->written;
    const bool output_failed = *ending == Ending::OutputFailed || !writer.flush();
    if (out != stdout) {
        std::fclose(out);
    }
    fmt::print(stderr, "uroce capture: {} frames written to {}\n", written,
               o.output == "-" ? std::string("stdout") : o.output);
    if (stop_err == 0) {
        fmt::print(stderr, "uroce capture: capture lost {} frames\n", totals.frames_lost);
    } else {
        fmt::print(stderr, "uroce capture: the daemon ended the capture (it stopped?); frames lost unknown\n");
    }
    if (loop->malformed != 0) {
        fmt::print(stderr, "uroce capture: {} malformed records from the daemon skipped\n", loop->malformed);
    }
    if (output_failed && o.output != "-") {
        return refuse(fmt::format("writing {} failed: {}", o.output, std::strerror(errno)));
    }
    return *ending == Ending::ReadFailed ? 1 : 0;
}

}  // namespace

void add_capture_command(CLI::App& app) {
    auto o = std::make_shared<CaptureOptions>();
    o->location.state_dir = default_state_dir();
    auto* cmd = app.add_subcommand(
        "capture", "Write the RoCE frames the device sends and receives (dropped ones marked) to a pcapng file");
    cmd->add_option("--state-dir", o->location.state_dir, "where uroced publishes the device")->capture_default_str();
    cmd->add_option("--device", o->location.device, "device name")->capture_default_str();
    cmd->add_option("--qp", o->qpn, "only frames to this QP, and those it sends to its connected peer");
    cmd->add_option("--count", o->count, "stop after this many frames (default: until Ctrl-C)");
    cmd->add_option("-w,--write", o->output, "output file ('-': stdout, e.g. | tshark -i -)")->required();
    cmd->footer(
        "The file is pcapng whatever its name: each frame carries its direction, and a frame a receive check "
        "dropped carries a comment with the reason (tshark: frame.comment). Only root and the daemon's user may "
        "capture. At exit, prints how many frames were written and how many the capture lost (a reader too slow "
        "for the daemon, which never waits).");
    cmd->callback([o] { throw CLI::RuntimeError(run(*o)); });
}

}  // namespace uroce::tools
