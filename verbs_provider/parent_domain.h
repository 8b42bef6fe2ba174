// Protection domains, parent domains and thread domains
// (ibv_alloc_parent_domain(3), ibv_alloc_td(3); docs/provider.md "Parent
// domains").
//
// A parent domain is a provider-side object only: its ibv_pd carries the
// daemon handle of the protection domain under it, so every verb that names
// a PD (MRs, windows, QPs, SRQs, AHs) reaches the daemon with the underlying
// PD and behaves exactly as with that PD. What it adds is on this side: the
// program's allocator for the host memory of the QPs and CQs made on it, and
// a thread domain.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <new>

#include "uroce_dv.h"

namespace uroce::provider {

// ibv_td: uroce's work queues and CQs keep their locks whatever the thread
// domain says (docs/provider.md), so a TD only counts the parent domains
// that name it, for ibv_dealloc_td's EBUSY.
struct Td {
    ibv_td td;
    std::atomic<int> users{0};
};

enum class PdKind : std::uint8_t { Protection, Parent };

struct Pd {
    ibv_pd pd;  // first: ibv_pd* converts back
    PdKind kind = PdKind::Protection;
    Pd* protection = nullptr;  // Parent: the PD under it
    Td* td = nullptr;          // Parent: its thread domain, or null
    void* (*alloc)(ibv_pd*, void*, std::size_t, std::size_t, std::uint64_t) = nullptr;
    void (*free)(ibv_pd*, void*, void*, std::uint64_t) = nullptr;
    void* pd_context = nullptr;
    // Protection: parent domains over it. Parent: QPs and CQs made on it.
    std::atomic<int> users{0};
};
inline Pd* to_pd(ibv_pd* pd) { return reinterpret_cast<Pd*>(pd); }
inline bool is_parent_domain(ibv_pd* pd) { return pd != nullptr && to_pd(pd)->kind == PdKind::Parent; }

// Where an object's host memory came from, kept in the object so that its
// destruction gives it back the same way.
enum class Source : std::uint8_t { Heap, Allocator };
struct Placement {
    Source source = Source::Heap;
    Pd* domain = nullptr;  // the parent domain it was made on (holds a reference), or null
    std::uint64_t resource_type = 0;
};

// `size` bytes aligned to `align` for an object made on `pd` (any PD or
// null): from the parent domain's allocator when it has one and does not
// answer IBV_ALLOCATOR_USE_DEFAULT, else null with p.source = Heap (the
// caller uses the heap). Takes a reference on a parent domain. errno ENOMEM
// and null with p.source = Allocator when the allocator failed.
void* domain_alloc(ibv_pd* pd, std::size_t size, std::size_t align, std::uint64_t resource_type, Placement& p);
// Gives memory from domain_alloc back and drops the reference.
void domain_free(void* mem, const Placement& p);

// ibv_dealloc_pd of a parent domain: EBUSY while QPs or CQs made on it exist.
int dealloc_parent_domain(Pd* pd);

// A value-initialised T (which has a `Placement placement` member) in the
// memory domain_alloc gives for `pd`; null (errno set) on failure.
template <typename T>
T* make_object(ibv_pd* pd, std::uint64_t resource_type) {
    Placement p;
    void* mem = domain_alloc(pd, sizeof(T), alignof(T), resource_type, p);
    T* obj = nullptr;
    if (p.source == Source::Allocator) {
        if (mem == nullptr) {
            domain_free(nullptr, p);  // drops the reference
            return nullptr;
        }
        obj = new (mem) T{};
    } else {
        obj = new (std::nothrow) T{};
        if (obj == nullptr) {
            domain_free(nullptr, p);
            errno = ENOMEM;
            return nullptr;
        }
    }
    obj->placement = p;
    return obj;
}

template <typename T>
void destroy_object(T* obj) {
    const Placement p = obj->placement;
    if (p.source == Source::Allocator) {
        obj->~T();
        domain_free(obj, p);
    } else {
        delete obj;
        domain_free(nullptr, p);
    }
}

}  // namespace uroce::provider
