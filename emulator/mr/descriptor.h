// What one key names: a memory region, a memory window, or a slot of a
// relaxed-MR pool. A Descriptor is immutable once published in the key table;
// every change (registration, rereg, bind, invalidation) publishes a new one
// and retires the old one through the epoch domain, so a data-path reader
// holding an EpochGuard always sees a whole, live descriptor.
#pragma once

#include <cstdint>
#include <memory>

#include "address_space.h"

namespace uroce::mr {

enum class ObjectKind : std::uint8_t { Mr, MwType1, MwType2, Relaxed };

// Where the bytes behind a descriptor are.
enum class Backing : std::uint8_t {
    ProcessMemory,  // the owning process's virtual addresses
    DmaBuf,         // offsets into a dma-buf the daemon holds (dmabuf_handle)
    ImplicitOdp,    // the owning process's whole address space, checked per access
};

class RelaxedPool;

struct Descriptor {
    ObjectKind kind = ObjectKind::Mr;
    std::uint8_t key_byte = 0;
    std::uint32_t index = 0;
    std::uint32_t pd = 0;
    std::uint32_t owner = 0;
    std::uint32_t access = 0;  // effective ibv_access_flags
    Backing backing = Backing::ProcessMemory;
    bool on_demand = false;    // check the mapping on every access

    // Addressing: keys name [iova, iova + length); byte iova maps to host_base
    // (a process address, or an offset into the dma-buf).
    std::uint64_t iova = 0;
    std::uint64_t length = 0;
    std::uint64_t host_base = 0;
    int dmabuf_handle = -1;
    std::shared_ptr<const AddressSpace> address_space;

    // Memory windows: the MR bound to (index), whether bound, and for type 2
    // the QP the window is bound to.
    bool bound = false;
    std::uint32_t parent_index = 0;
    std::uint32_t bound_qpn = 0;

    // Relaxed slots: the pool and the slot.
    RelaxedPool* pool = nullptr;
    std::uint32_t slot = 0;

    [[nodiscard]] std::uint32_t key() const { return index << 8 | key_byte; }
    [[nodiscard]] bool is_window() const { return kind == ObjectKind::MwType1 || kind == ObjectKind::MwType2; }
};

}  // namespace uroce::mr
