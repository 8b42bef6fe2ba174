// Two engines joined by an in-memory wire, each with its own key table, and
// rings in this process's memory posted to the way the provider does: the
// engine tests drive RC, UC and UD traffic through the real requester,
// responder and completer, with loss, duplication and a fake clock.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "dma/client_memory.h"
#include "wire/parse.h"
#include "engine/engine.h"
#include "mr/access_flags.h"
#include "mr/mr_table.h"
#include "mr/pd_table.h"
#include "wire/parse.h"

namespace uroce::engine::test {

// A ring in 64-byte aligned memory, initialised as the daemon does.
struct RingMemory {
    std::unique_ptr<std::uint8_t, decltype(&std::free)> bytes{nullptr, &std::free};
    uroce_wq_ring* wq() { return reinterpret_cast<uroce_wq_ring*>(bytes.get()); }
    uroce_cq_ring* cq() { return reinterpret_cast<uroce_cq_ring*>(bytes.get()); }
};

inline RingMemory make_wq(std::uint32_t entries, std::uint32_t stride, std::uint32_t max_sge,
                          std::uint32_t max_inline) {
    RingMemory m;
    const std::size_t size = sizeof(uroce_wq_ring) + std::size_t{entries} * stride;
    m.bytes.reset(static_cast<std::uint8_t*>(std::aligned_alloc(64, (size + 63) / 64 * 64)));
    std::memset(m.bytes.get(), 0, size);
    auto* h = m.wq();
    h->version = UROCE_RING_VERSION;
    h->entries = entries;
    h->stride = stride;
    h->max_sge = max_sge;
    h->max_inline = max_inline;
    return m;
}

inline RingMemory make_cq(std::uint32_t entries) {
    RingMemory m;
    const std::size_t size = sizeof(uroce_cq_ring) + std::size_t{entries} * sizeof(uroce_cqe);
    m.bytes.reset(static_cast<std::uint8_t*>(std::aligned_alloc(64, (size + 63) / 64 * 64)));
    std::memset(m.bytes.get(), 0, size);
    m.cq()->version = UROCE_RING_VERSION;
    m.cq()->entries = entries;
    return m;
}

class Node;

// The wire: frames from one node are delivered to the other; a filter may
// drop (return 0) or duplicate (return 2) each frame. `refuse` plays a port
// whose transmit queue is full: a frame it returns true for is not taken
// (the sender, node 0 or 1, keeps it).
class Wire {
public:
    std::function<int(std::span<const std::uint8_t> frame)> filter;
    std::function<bool(int sender, std::span<const std::uint8_t> frame)> refuse;
    std::uint64_t refused = 0;
    std::deque<std::pair<int, std::vector<std::uint8_t>>> in_flight;  // (destination node, frame)
    // Frames the wire carries per step of the fixture (a rate limit); the
    // rest wait in in_flight.
    std::size_t deliver_per_step = SIZE_MAX;
    std::uint64_t delivered = 0;
    std::uint64_t dropped = 0;
    // Bytes of the room each sink lends (FrameSink::tx_room) as a port does;
    // 0: none. Frames sent from the room are counted; a room taken is
    // scribbled over once its frame is copied onto the wire, as a port's
    // buffer is reused after transmission.
    std::size_t tx_room_bytes = 0;
    std::uint64_t built_in_room = 0;
    // The sinks answer FrameSink::icrc_unread with this, as the lone
    // loopback port does. The wire then plays that port: a frame from the
    // room crosses without its ICRC being checked (it is sealed here so the
    // receiver's check passes); every other frame must carry a good one.
    bool icrc_unread = false;
    std::uint64_t room_frames_without_icrc = 0;
    std::uint64_t copies_with_bad_icrc = 0;
};

class NodeSink : public FrameSink {
public:
    NodeSink(Wire& wire, int peer) : wire_(wire), peer_(peer) {}
    bool send_ip(std::span<std::uint8_t> frame, const wire::Gid&, Clock::time_point) override {
        if (wire_.refuse && wire_.refuse(1 - peer_, frame)) {
            ++wire_.refused;
            return false;
        }
        const bool from_room = !room_.empty() && frame.data() == room_.data();
        if (wire_.icrc_unread) {
            const bool good = wire::parse_and_verify(frame).ok();
            if (from_room && !good) {
                ++wire_.room_frames_without_icrc;
                wire::seal_icrc(frame);
            } else if (!from_room && !good) {
                ++wire_.copies_with_bad_icrc;
            }
        }
        int copies = wire_.filter ? wire_.filter(frame) : 1;
        if (copies == 0) {
            ++wire_.dropped;
        }
        for (int i = 0; i < copies; ++i) {
            wire_.in_flight.emplace_back(peer_, std::vector<std::uint8_t>(frame.begin(), frame.end()));
        }
        if (!room_.empty() && frame.data() == room_.data()) {
            ++wire_.built_in_room;
            std::fill(room_.begin(), room_.end(), std::uint8_t{0xA5});
        }
        return true;
    }
    std::span<std::uint8_t> tx_room() override {
        room_.resize(wire_.tx_room_bytes);
        return room_;
    }
    bool icrc_unread() const override { return wire_.icrc_unread; }

private:
    Wire& wire_;
    int peer_;
    std::vector<std::uint8_t> room_;
};

inline wire::Gid ipv4_gid(std::uint8_t last) {
    wire::Gid g{};
    g[10] = 0xFF;
    g[11] = 0xFF;
    g[12] = 10;
    g[13] = 0;
    g[14] = 0;
    g[15] = last;
    return g;
}

constexpr std::uint32_t kOwner = 1;

class Node {
public:
    Node(Wire& wire, int self, int peer, bool ipv6 = false)
        : sink_(wire, peer), memory_(dma::open_process_memory(::getpid())), mrs_(pds_) {
        EngineConfig cfg;
        cfg.mac = {0x02, 0, 0, 0, 0, static_cast<std::uint8_t>(self + 1)};
        wire::Gid gid = ipv4_gid(static_cast<std::uint8_t>(self + 1));
        if (ipv6) {
            gid = wire::Gid{0xFD, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, static_cast<std::uint8_t>(self + 1)};
        }
        cfg.gids.push_back(device::GidEntry{gid, device::GidType::RoceV2});
        gid_ = cfg.gids[0].gid;
        engine_ = std::make_unique<Engine>(
            cfg, mrs_, sink_, [this](std::uint32_t) { return &memory_; },
            [this](std::uint32_t, std::uint64_t cookie, AsyncEvent e) { events.emplace_back(cookie, e); });
        pd = pds_.alloc(kOwner).pd;
    }

    Engine& engine() { return *engine_; }
    mr::MrTable& mrs() { return mrs_; }
    dma::ClientMemory& memory() { return memory_; }
    const wire::Gid& gid() const { return gid_; }

    mr::Registered reg(void* addr, std::size_t len, std::uint32_t access) {
        mr::RegRequest r;
        r.pd = pd;
        r.owner = kOwner;
        r.addr = reinterpret_cast<std::uintptr_t>(addr);
        r.length = len;
        r.access = access;
        return mrs_.reg_mr(r);
    }

    std::uint32_t pd = 0;
    std::vector<std::pair<std::uint64_t, AsyncEvent>> events;

private:
    NodeSink sink_;
    dma::ClientMemory memory_;
    mr::PdTable pds_;
    mr::MrTable mrs_;
    std::unique_ptr<Engine> engine_;
    wire::Gid gid_{};
};

// One QP with its own SQ, RQ and CQ rings.
struct TestQp {
    std::uint32_t qpn = 0;
    RingMemory sq_mem, rq_mem, cq_mem;
    std::uint32_t sq_entries = 64, rq_entries = 64, cq_entries = 256;
    std::uint32_t sq_stride = 64 + 4 * 16 + 64;  // 4 SGEs or 128 bytes inline
    std::uint32_t rq_stride = 16 + 4 * 16;
    std::uint32_t cq_consumer = 0;

    uroce_wq_ring* sq() { return sq_mem.wq(); }
    uroce_wq_ring* rq() { return rq_mem.wq(); }
    uroce_cq_ring* cq() { return cq_mem.cq(); }

    void post_send(const uroce_send_wqe& w, std::span<const uroce_sge> sges, std::span<const std::uint8_t> inline_data = {}) {
        auto* h = sq();
        std::uint8_t* slot = reinterpret_cast<std::uint8_t*>(h + 1) + std::size_t{h->producer & (h->entries - 1)} * h->stride;
        std::memcpy(slot, &w, sizeof w);
        if (!inline_data.empty()) {
            std::memcpy(slot + sizeof w, inline_data.data(), inline_data.size());
        } else if (!sges.empty()) {
            std::memcpy(slot + sizeof w, sges.data(), sges.size_bytes());
        }
        std::atomic_ref<std::uint32_t>(h->producer).fetch_add(1, std::memory_order_release);
    }
    void post_recv(std::uint64_t wr_id, std::span<const uroce_sge> sges) {
        auto* h = rq();
        std::uint8_t* slot = reinterpret_cast<std::uint8_t*>(h + 1) + std::size_t{h->producer & (h->entries - 1)} * h->stride;
        uroce_recv_wqe w{wr_id, static_cast<std::uint32_t>(sges.size()), 0};
        std::memcpy(slot, &w, sizeof w);
        std::memcpy(slot + sizeof w, sges.data(), sges.size_bytes());
        std::atomic_ref<std::uint32_t>(h->producer).fetch_add(1, std::memory_order_release);
    }
    // Completions not yet taken.
    std::vector<uroce_cqe> poll() {
        std::vector<uroce_cqe> out;
        const std::uint32_t produced = std::atomic_ref<std::uint32_t>(cq()->producer).load(std::memory_order_acquire);
        while (cq_consumer != produced) {
            uroce_cqe e;
            std::memcpy(&e, reinterpret_cast<std::uint8_t*>(cq() + 1) + std::size_t{cq_consumer & (cq_entries - 1)} * sizeof(uroce_cqe), sizeof e);
            out.push_back(e);
            ++cq_consumer;
        }
        std::atomic_ref<std::uint32_t>(cq()->consumer).store(cq_consumer, std::memory_order_release);
        return out;
    }
};

}  // namespace uroce::engine::test
