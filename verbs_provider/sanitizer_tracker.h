// The RDMA sanitizer's bookkeeping (docs/sanitizer.md): every work request
// a process posts, from ibv_post_* until its completion is polled, with the
// buffers it names, so that the bugs that corrupt data silently on hardware
// are seen when they happen:
//
//   - a send or RDMA WRITE source changed between posting and completion;
//   - a receive buffer written by the application before its completion;
//   - an MR deregistered while a work request that names it is in flight;
//   - a buffer unmapped before its work request completed;
//   - receive buffers posted at once that overlap without being the same;
//   - an RDMA READ or atomic target that overlaps another buffer in flight;
//   - more completions possible on a CQ than it holds (it can overrun).
//
// The device writes received data, READ responses and atomic results into
// memory too; a change the device may have made is never reported: a
// buffer that such a write overlapped, or may overlap now, is not checked.
// The same buffer posted many times at once (ibv_rc_pingpong's and
// perftest's scratch buffers) is an idiom, not a finding; partial overlaps
// are findings.
//
// Uses the types of <infiniband/verbs.h> only, no libibverbs function, so
// the unit tests drive it without a device.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace uroce::provider::sanitizer {

enum class Finding : std::uint8_t {
    SendBufferChanged,
    ReceiveBufferWritten,
    InFlightDeregistered,
    BufferUnmapped,
    OverlappingReceives,
    DeviceWriteOverlap,
    CqMayOverrun,
};
inline constexpr std::size_t kFindingCount = 7;

// A short stable name per finding ("send-buffer-changed"), for reports and tests.
[[nodiscard]] const char* finding_name(Finding finding);

// Which queue a work request went to: a QP's send or receive queue, or an SRQ.
struct QueueKey {
    enum class Kind : std::uint8_t { Send, Receive, SharedReceive };
    Kind kind = Kind::Send;
    std::uint64_t id = 0;  // the QP number, or the SRQ's address
    friend bool operator==(const QueueKey&, const QueueKey&) = default;
};

// What the device does with a buffer.
enum class DeviceUse : std::uint8_t {
    Reads,   // send and RDMA WRITE sources
    Writes,  // receive buffers, RDMA READ and atomic targets
};

// The CQ a posted work request completes on, when it completes on one the
// tracker counts (signalled sends, receives of a QP's own receive queue).
struct CqSlot {
    std::uint64_t id = 0;  // the CQ's address; 0: not counted
    std::uint32_t capacity = 0;
};

struct PostedWork {
    QueueKey queue;
    std::uint32_t qp_num = 0;
    std::uint64_t wr_id = 0;
    const char* verb = "";  // "SEND", "RDMA_WRITE", "RECV", ... for reports
    DeviceUse use = DeviceUse::Reads;
    bool is_read_or_atomic = false;  // a DeviceUse::Writes that is not a receive
    CqSlot cq;
    std::vector<ibv_sge> sges;  // empty for inline data (copied at post)
};

// Copies the process's own memory at [addr, addr + out.size()); false when
// some of it is not mapped (never faults).
using MemoryReader = std::function<bool(std::uint64_t addr, std::span<std::uint8_t> out)>;
using Sink = std::function<void(Finding, const std::string& text)>;

class Tracker {
public:
    Tracker(Sink sink, MemoryReader reader);

    // A work request the provider accepted.
    void posted(PostedWork work);
    // A completion the application polled from CQ `cq`.
    void completed(const ibv_wc& wc, std::uint64_t cq);
    // ibv_dereg_mr of the MR `lkey`, before it happens.
    void deregistering(std::uint32_t lkey);
    // The queue is destroyed: its work is gone with it.
    void queue_destroyed(const QueueKey& queue);

    // How many of each finding were reported.
    [[nodiscard]] std::uint64_t count(Finding finding) const;

private:
    struct Buffer {
        ibv_sge sge{};
        std::vector<std::uint8_t> shadow;  // the bytes at post time
        bool device_wrote = false;         // a device write overlapped it since
    };
    struct Work {
        PostedWork posted;
        std::vector<Buffer> buffers;
    };
    using WorkList = std::deque<std::unique_ptr<Work>>;
    struct QueueHash {
        std::size_t operator()(const QueueKey& q) const {
            return std::hash<std::uint64_t>{}(q.id * 4 + static_cast<std::uint64_t>(q.kind));
        }
    };

    void report(Finding finding, const std::string& text);
    void check_overlaps_at_post(const Work& work);
    void count_on_cq(const PostedWork& work);
    // The work `wc` completes, taken off its queue (and those before it
    // that completed unsignalled), oldest first; empty when unknown.
    std::vector<std::unique_ptr<Work>> retire(const ibv_wc& wc);
    std::unique_ptr<Work> take_receive(const ibv_wc& wc);
    void check_at_completion(const Work& work, const ibv_wc& wc);
    void check_source_unchanged(const Work& work, const Buffer& buffer, std::size_t index);
    void check_receive_tail(const Work& work, const ibv_wc& wc);
    // The device wrote [addr, addr + length): every buffer in flight there may differ.
    void mark_device_write(std::uint64_t addr, std::uint64_t length);
    // Whether a device-written buffer in flight (not `self`) overlaps the range.
    [[nodiscard]] bool device_may_write(std::uint64_t addr, std::uint64_t length, const Work* self) const;

    mutable std::mutex mutex_;
    Sink sink_;
    MemoryReader reader_;
    std::unordered_map<QueueKey, WorkList, QueueHash> queues_;
    std::unordered_map<std::uint64_t, std::uint64_t> on_cq_;  // CQ -> completions it may still get
    std::unordered_map<std::uint64_t, bool> cq_reported_;
    std::uint64_t counts_[kFindingCount] = {};
};

}  // namespace uroce::provider::sanitizer
