#include "ring_registry.h"

#include <unistd.h>

#include <cerrno>
#include <new>

namespace uroce::device {

namespace {

template <typename Map>
std::size_t erase_owned(Map& map, std::uint32_t owner) {
    return static_cast<std::size_t>(std::erase_if(map, [owner](const auto& kv) { return kv.second->owner == owner; }));
}

template <typename Map>
auto find_in(const Map& map, std::uint32_t key) -> typename Map::mapped_type {
    auto it = map.find(key);
    return it == map.end() ? nullptr : it->second;
}

template <typename Map>
auto values_of(const Map& map) {
    std::vector<typename Map::mapped_type> out;
    out.reserve(map.size());
    for (const auto& [key, value] : map) {
        out.push_back(value);
    }
    return out;
}

}  // namespace

CqRings::~CqRings() {
    if (channel_fd >= 0) {
        ::close(channel_fd);
    }
}

int make_cq_rings(std::uint32_t entries, std::shared_ptr<CqRings>& out) {
    auto cq = std::shared_ptr<CqRings>(new (std::nothrow) CqRings);
    if (cq == nullptr) {
        return ENOMEM;
    }
    if (const int err = RingMemory::create("uroce-cq", cq_ring_bytes(entries), cq->memory); err != 0) {
        return err;
    }
    cq->header = reinterpret_cast<uroce_cq_ring*>(cq->memory.data());
    cq->entries = entries;
    init_cq_ring(*cq->header, entries);
    out = std::move(cq);
    return 0;
}

int make_qp_rings(const WqGeometry& sq, const WqGeometry* rq, std::shared_ptr<QpRings>& out) {
    auto qp = std::shared_ptr<QpRings>(new (std::nothrow) QpRings);
    if (qp == nullptr) {
        return ENOMEM;
    }
    const std::size_t rq_offset = rq != nullptr ? next_ring_offset(sq.bytes()) : 0;
    const std::size_t bytes = rq != nullptr ? rq_offset + rq->bytes() : sq.bytes();
    if (const int err = RingMemory::create("uroce-qp", bytes, qp->memory); err != 0) {
        return err;
    }
    qp->sq.header = reinterpret_cast<uroce_wq_ring*>(qp->memory.data());
    qp->sq.geometry = sq;
    init_wq_ring(*qp->sq.header, sq);
    if (rq != nullptr) {
        qp->rq_offset = static_cast<std::uint32_t>(rq_offset);
        qp->rq.header = reinterpret_cast<uroce_wq_ring*>(qp->memory.data() + rq_offset);
        qp->rq.geometry = *rq;
        init_wq_ring(*qp->rq.header, *rq);
    }
    out = std::move(qp);
    return 0;
}

int make_srq_rings(const WqGeometry& g, std::shared_ptr<SrqRings>& out) {
    auto srq = std::shared_ptr<SrqRings>(new (std::nothrow) SrqRings);
    if (srq == nullptr) {
        return ENOMEM;
    }
    if (const int err = RingMemory::create("uroce-srq", g.bytes(), srq->memory); err != 0) {
        return err;
    }
    srq->ring.header = reinterpret_cast<uroce_wq_ring*>(srq->memory.data());
    srq->ring.geometry = g;
    init_wq_ring(*srq->ring.header, g);
    out = std::move(srq);
    return 0;
}

std::shared_ptr<const CqRings> RingRegistry::cq(std::uint32_t handle) const {
    std::lock_guard lock(mutex_);
    return find_in(cqs_, handle);
}

std::shared_ptr<const QpRings> RingRegistry::qp(std::uint32_t qpn) const {
    std::lock_guard lock(mutex_);
    return find_in(qps_, qpn);
}

std::shared_ptr<const SrqRings> RingRegistry::srq(std::uint32_t handle) const {
    std::lock_guard lock(mutex_);
    return find_in(srqs_, handle);
}

std::vector<std::shared_ptr<const CqRings>> RingRegistry::all_cqs() const {
    std::lock_guard lock(mutex_);
    return values_of(cqs_);
}

std::vector<std::shared_ptr<const QpRings>> RingRegistry::all_qps() const {
    std::lock_guard lock(mutex_);
    return values_of(qps_);
}

std::vector<std::shared_ptr<const SrqRings>> RingRegistry::all_srqs() const {
    std::lock_guard lock(mutex_);
    return values_of(srqs_);
}

RingCounts RingRegistry::counts() const {
    std::lock_guard lock(mutex_);
    return {cqs_.size(), qps_.size(), srqs_.size()};
}

void RingRegistry::add(std::shared_ptr<const CqRings> cq) {
    std::lock_guard lock(mutex_);
    const std::uint32_t key = cq->handle;
    cqs_[key] = std::move(cq);
    changed();
}

void RingRegistry::add(std::shared_ptr<const QpRings> qp) {
    std::lock_guard lock(mutex_);
    const std::uint32_t key = qp->qpn;
    qps_[key] = std::move(qp);
    changed();
}

void RingRegistry::add(std::shared_ptr<const SrqRings> srq) {
    std::lock_guard lock(mutex_);
    const std::uint32_t key = srq->handle;
    srqs_[key] = std::move(srq);
    changed();
}

bool RingRegistry::remove_cq(std::uint32_t handle) {
    std::lock_guard lock(mutex_);
    const bool removed = cqs_.erase(handle) != 0;
    changed();
    return removed;
}

bool RingRegistry::remove_qp(std::uint32_t qpn) {
    std::lock_guard lock(mutex_);
    const bool removed = qps_.erase(qpn) != 0;
    changed();
    return removed;
}

bool RingRegistry::remove_srq(std::uint32_t handle) {
    std::lock_guard lock(mutex_);
    const bool removed = srqs_.erase(handle) != 0;
    changed();
    return removed;
}

std::size_t RingRegistry::remove_owner(std::uint32_t owner) {
    std::lock_guard lock(mutex_);
    const std::size_t n = erase_owned(qps_, owner) + erase_owned(srqs_, owner) + erase_owned(cqs_, owner);
    changed();
    return n;
}

}  // namespace uroce::device
