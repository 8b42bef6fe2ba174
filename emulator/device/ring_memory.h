// The shared memory behind the data-path rings of abi/rings.h, daemon side:
// RingMemory is one memfd mapped MAP_SHARED here, whose descriptor goes to the
// client with the reply that created the object (the client maps the same
// pages); the geometry functions decide how big each ring is and where it
// sits, and the init functions write a fresh ring's header.
//
// Geometry (both sides must agree; the header carries it to the provider):
//  - entries: the smallest power of two >= what was asked, at least 1, so a
//    slot is counter & (entries - 1) with free-running 32-bit counters;
//  - SQ slot: the 64-byte uroce_send_wqe, then room for max_send_sge SGEs of
//    16 bytes or max_inline bytes of inline data (rounded up to 16), the
//    larger, the whole rounded up to a 64-byte cache line;
//  - RQ/SRQ slot: the 16-byte uroce_recv_wqe and max_sge SGEs (at least one,
//    so every slot can hold a WQE with an SGE), a multiple of 16 already;
//  - CQ slot: UROCE_CQE_BYTES.
// A ring is its header (three 64-byte lines, abi/rings.h) followed by its slots. A QP's memfd holds its
// SQ ring at offset 0 and, without an SRQ, its RQ ring on the next 64-byte
// boundary.
#pragma once

#include <cstddef>
#include <cstdint>

#include "abi/rings.h"
#include "common/unique_fd.h"

namespace uroce::device {

// Rings are never bigger than this many entries (2^31 would not leave the
// free-running 32-bit counters room to tell full from empty).
inline constexpr std::uint32_t kMaxRingEntries = 1u << 30;

// The smallest power of two >= max(asked, 1); 0 when that exceeds
// kMaxRingEntries (callers check the device limits first).
[[nodiscard]] std::uint32_t ring_entries(std::uint32_t asked);

// Bytes per slot (see the file comment).
[[nodiscard]] std::uint32_t sq_stride(std::uint32_t max_send_sge, std::uint32_t max_inline);
[[nodiscard]] std::uint32_t rq_stride(std::uint32_t max_sge);

// The shape of one work-queue ring, as its header describes it.
struct WqGeometry {
    std::uint32_t entries = 0;
    std::uint32_t stride = 0;
    std::uint32_t max_sge = 0;
    std::uint32_t max_inline = 0;  // SQ only

    // Header and slots.
    [[nodiscard]] std::size_t bytes() const { return sizeof(uroce_wq_ring) + std::size_t{entries} * stride; }
};

[[nodiscard]] WqGeometry sq_geometry(std::uint32_t max_send_wr, std::uint32_t max_send_sge, std::uint32_t max_inline);
[[nodiscard]] WqGeometry rq_geometry(std::uint32_t max_recv_wr, std::uint32_t max_recv_sge);

// Header and `entries` CQEs.
[[nodiscard]] std::size_t cq_ring_bytes(std::uint32_t entries);

// Where a ring that follows `bytes` of others starts: the next cache line.
[[nodiscard]] constexpr std::size_t next_ring_offset(std::size_t bytes) { return (bytes + 63) & ~std::size_t{63}; }

// Writes a fresh header (version, geometry, counters zero, doorbell not
// armed, no error) into zeroed ring memory.
void init_wq_ring(uroce_wq_ring& header, const WqGeometry& g);
void init_cq_ring(uroce_cq_ring& header, std::uint32_t entries);

// One memfd of `size` bytes (MFD_CLOEXEC), sealed against any change of size
// (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL: a client holding it cannot
// truncate it under the daemon's mapping), mapped read-write MAP_SHARED in
// the daemon; the pages start zeroed. Move-only; the destructor unmaps it
// and closes the memfd if it is still held.
class RingMemory {
public:
    RingMemory() = default;
    ~RingMemory();
    RingMemory(RingMemory&& other) noexcept;
    RingMemory& operator=(RingMemory&& other) noexcept;
    RingMemory(const RingMemory&) = delete;
    RingMemory& operator=(const RingMemory&) = delete;

    // `name` shows in /proc/<pid>/maps and fd links ("memfd:<name>").
    // 0 or an errno (of memfd_create, ftruncate, F_ADD_SEALS or mmap).
    [[nodiscard]] static int create(const char* name, std::size_t size, RingMemory& out);

    [[nodiscard]] bool valid() const { return data_ != nullptr; }
    [[nodiscard]] std::uint8_t* data() const { return data_; }
    [[nodiscard]] std::size_t size() const { return size_; }

    // A new descriptor of the memfd (close-on-exec), e.g. for a reply;
    // -1 with errno when the memfd was released or dup fails.
    [[nodiscard]] int dup_fd() const;
    // Hands the memfd itself over (the caller closes it); the mapping stays.
    // The daemon keeps no descriptor per ring this way: with thousands of
    // QPs, descriptors would run out long before memory.
    [[nodiscard]] int release_fd();

private:
    void reset();

    std::uint8_t* data_ = nullptr;
    std::size_t size_ = 0;
    UniqueFd fd_;
};

}  // namespace uroce::device
