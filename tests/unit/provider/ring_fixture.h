// Rings for the provider's data-path tests, made the way uroced makes them
// (device/ring_registry.h, device/ring_memory.h), so the provider's side is
// tested against the daemon's own geometry.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "device/ring_registry.h"

namespace uroce::provider_test {

// Reads the struct at `p` (slots are not necessarily aligned for T).
template <typename T>
T read_at(const std::uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

inline std::shared_ptr<device::QpRings> make_qp(std::uint32_t send_wr, std::uint32_t send_sge,
                                                std::uint32_t max_inline, std::uint32_t recv_wr,
                                                std::uint32_t recv_sge) {
    const device::WqGeometry sq = device::sq_geometry(send_wr, send_sge, max_inline);
    const device::WqGeometry rq = device::rq_geometry(recv_wr, recv_sge);
    std::shared_ptr<device::QpRings> qp;
    EXPECT_EQ(device::make_qp_rings(sq, &rq, qp), 0);
    return qp;
}

// Slot `index` (a counter) of a work ring.
inline const std::uint8_t* slot(const device::WorkQueueRing& ring, std::uint32_t index) {
    return ring.slots() + std::size_t{index & (ring.geometry.entries - 1)} * ring.geometry.stride;
}

}  // namespace uroce::provider_test
