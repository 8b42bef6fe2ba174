// The rings of every CQ, QP and SRQ the daemon has made, where the engine
// finds them: the daemon-side pointer to each ring header, its geometry, the
// client's cookie (the ibv_cq / ibv_qp / ibv_srq pointer, echoed in events)
// and, for a CQ with a completion channel, the channel's notify fd.
//
// The control server creates the rings (make_*_rings) when it creates the
// object and removes them when the object is destroyed or its client leaves.
// Entries are immutable once added and shared: a lookup returns a
// shared_ptr that keeps the mapping (and the channel fd) valid for as long as
// the caller holds it, even past the object's destruction, so the engine may
// cache them on any thread. The memory itself belongs to a client that may
// write anything into it at any time (abi/rings.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "abi/rings.h"
#include "device/ring_memory.h"
#include "qp/qp_types.h"

namespace uroce::device {

// One work queue (SQ, RQ or SRQ) inside a ring mapping.
struct WorkQueueRing {
    uroce_wq_ring* header = nullptr;  // null: the queue does not exist (the RQ of a QP with an SRQ)
    WqGeometry geometry;

    [[nodiscard]] bool present() const { return header != nullptr; }
    // entries * stride bytes right after the header.
    [[nodiscard]] std::uint8_t* slots() const { return reinterpret_cast<std::uint8_t*>(header + 1); }
};

struct CqRings {
    std::uint32_t owner = 0;   // client
    std::uint32_t handle = 0;
    std::uint64_t cookie = 0;  // the ibv_cq pointer: what ibv_get_cq_event reads from the channel
    int channel_fd = -1;       // owned: the channel's notify end (O_NONBLOCK), -1 without a channel
    uroce_cq_ring* header = nullptr;
    std::uint32_t entries = 0;  // CQEs (a power of two)
    std::uint32_t flags = 0;    // UROCE_CQ_* of CREATE_CQ
    RingMemory memory;

    CqRings() = default;
    ~CqRings();
    CqRings(const CqRings&) = delete;
    CqRings& operator=(const CqRings&) = delete;

    [[nodiscard]] uroce_cqe* slots() const { return reinterpret_cast<uroce_cqe*>(header + 1); }
};

struct QpRings {
    std::uint32_t owner = 0;
    std::uint32_t qpn = 0;
    std::uint64_t cookie = 0;  // the ibv_qp pointer (async events)
    qp::QpType type = qp::QpType::Rc;
    std::uint32_t pd = 0;
    std::uint32_t send_cq = 0;
    std::uint32_t recv_cq = 0;
    std::uint32_t srq = 0;     // 0: none (then rq is present)
    bool sq_sig_all = false;
    std::uint32_t xrc_domain = 0;  // XRC target QPs: the domain whose SRQs they deliver to
    WorkQueueRing sq;
    WorkQueueRing rq;
    RingMemory memory;         // SQ at offset 0, RQ at rq_offset
    std::uint32_t rq_offset = 0;  // 0: no RQ
};

struct SrqRings {
    std::uint32_t owner = 0;
    std::uint32_t handle = 0;
    std::uint32_t pd = 0;
    std::uint64_t cookie = 0;  // the ibv_srq pointer (async events)
    std::uint32_t xrc_domain = 0;  // XRC SRQs: their domain and CQ (0: an ordinary SRQ)
    std::uint32_t cq = 0;
    WorkQueueRing ring;
    RingMemory memory;
};

// Makes the memfd and mapping of a new object's rings with fresh headers.
// 0 or an errno; `out` is complete except for the fields the caller knows
// (owner, handle, cookie, channel, QP attributes).
[[nodiscard]] int make_cq_rings(std::uint32_t entries, std::shared_ptr<CqRings>& out);
// `rq`: null for a QP that uses an SRQ.
[[nodiscard]] int make_qp_rings(const WqGeometry& sq, const WqGeometry* rq, std::shared_ptr<QpRings>& out);
[[nodiscard]] int make_srq_rings(const WqGeometry& g, std::shared_ptr<SrqRings>& out);

struct RingCounts {
    std::size_t cqs = 0;
    std::size_t qps = 0;
    std::size_t srqs = 0;
};

class RingRegistry {
public:
    // Lookups, from any thread; null when there is no such object.
    [[nodiscard]] std::shared_ptr<const CqRings> cq(std::uint32_t handle) const;
    [[nodiscard]] std::shared_ptr<const QpRings> qp(std::uint32_t qpn) const;
    [[nodiscard]] std::shared_ptr<const SrqRings> srq(std::uint32_t handle) const;
    // Every CQ, QP and SRQ at this moment (e.g. to arm their doorbells).
    [[nodiscard]] std::vector<std::shared_ptr<const CqRings>> all_cqs() const;
    [[nodiscard]] std::vector<std::shared_ptr<const QpRings>> all_qps() const;
    [[nodiscard]] std::vector<std::shared_ptr<const SrqRings>> all_srqs() const;
    // Changes (with release order) after every add and remove: a cache that
    // remembers the value it was built at knows when to look again.
    [[nodiscard]] std::uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
    [[nodiscard]] RingCounts counts() const;

    // The control server's side. Adding replaces an entry of the same key.
    void add(std::shared_ptr<const CqRings> cq);
    void add(std::shared_ptr<const QpRings> qp);
    void add(std::shared_ptr<const SrqRings> srq);
    bool remove_cq(std::uint32_t handle);
    bool remove_qp(std::uint32_t qpn);
    bool remove_srq(std::uint32_t handle);
    // Removes everything of a departed client; returns how many entries.
    std::size_t remove_owner(std::uint32_t owner);

private:
    void changed() { generation_.fetch_add(1, std::memory_order_release); }

    mutable std::mutex mutex_;
    std::unordered_map<std::uint32_t, std::shared_ptr<const CqRings>> cqs_;
    std::unordered_map<std::uint32_t, std::shared_ptr<const QpRings>> qps_;
    std::unordered_map<std::uint32_t, std::shared_ptr<const SrqRings>> srqs_;
    std::atomic<std::uint64_t> generation_{0};
};

}  // namespace uroce::device
