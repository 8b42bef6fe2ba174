// Parent domains and thread domains (parent_domain.h): provider-side
// objects over a protection domain; nothing of them reaches the daemon.
#include <cerrno>
#include <new>

#include "parent_domain.h"
#include "provider.h"

namespace uroce::provider {
namespace {

// comp_mask bits of ibv_parent_domain_init_attr this provider knows; any
// other is EINVAL (as mlx5 answers).
constexpr std::uint32_t kParentDomainCompMask =
    IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;

// 0, or the errno ibv_alloc_parent_domain fails with for `attr`.
int check_parent_domain_attr(ibv_context* ctx, const ibv_parent_domain_init_attr& attr) {
    if ((attr.comp_mask & ~kParentDomainCompMask) != 0) {
        return EINVAL;
    }
    // The PD must be a protection domain of this context (not another
    // parent domain); the TD, if any, of this context too.
    if (attr.pd == nullptr || attr.pd->context != ctx || is_parent_domain(attr.pd)) {
        return EINVAL;
    }
    if (attr.td != nullptr && attr.td->context != ctx) {
        return EINVAL;
    }
    if ((attr.comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) != 0 &&
        (attr.alloc == nullptr || attr.free == nullptr)) {
        return EINVAL;
    }
    return 0;
}

}  // namespace

int dealloc_parent_domain(Pd* pd) {
    if (pd->users.load() != 0) {
        return EBUSY;  // QPs or CQs made on it still exist
    }
    pd->protection->users.fetch_sub(1);
    if (pd->td != nullptr) {
        pd->td->users.fetch_sub(1);
    }
    delete pd;
    return 0;
}

ibv_pd* alloc_parent_domain(ibv_context* ctx, ibv_parent_domain_init_attr* attr) {
    if (const int err = check_parent_domain_attr(ctx, *attr); err != 0) {
        errno = err;
        return nullptr;
    }
    auto* pd = new (std::nothrow) Pd{};
    if (pd == nullptr) {
        errno = ENOMEM;
        return nullptr;
    }
    pd->kind = PdKind::Parent;
    pd->protection = to_pd(attr->pd);
    pd->td = attr->td != nullptr ? reinterpret_cast<Td*>(attr->td) : nullptr;
    if ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) != 0) {
        pd->alloc = attr->alloc;
        pd->free = attr->free;
    }
    if ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT) != 0) {
        pd->pd_context = attr->pd_context;
    }
    pd->protection->users.fetch_add(1);
    if (pd->td != nullptr) {
        pd->td->users.fetch_add(1);
    }
    pd->pd.context = ctx;
    pd->pd.handle = attr->pd->handle;  // the daemon sees the protection domain
    return &pd->pd;
}

ibv_td* alloc_td(ibv_context* ctx, ibv_td_init_attr* attr) {
    if (attr->comp_mask != 0) {
        errno = EINVAL;
        return nullptr;
    }
    auto* td = new (std::nothrow) Td{};
    if (td == nullptr) {
        errno = ENOMEM;
        return nullptr;
    }
    td->td.context = ctx;
    return &td->td;
}

int dealloc_td(ibv_td* ibtd) {
    auto* td = reinterpret_cast<Td*>(ibtd);
    if (td->users.load() != 0) {
        return EBUSY;  // a parent domain names it
    }
    delete td;
    return 0;
}

void* domain_alloc(ibv_pd* ibpd, std::size_t size, std::size_t align, std::uint64_t resource_type, Placement& p) {
    p = Placement{};
    if (!is_parent_domain(ibpd)) {
        return nullptr;
    }
    Pd* pd = to_pd(ibpd);
    pd->users.fetch_add(1);
    p.domain = pd;
    p.resource_type = resource_type;
    if (pd->alloc == nullptr) {
        return nullptr;
    }
    void* mem = pd->alloc(ibpd, pd->pd_context, size, align, resource_type);
    if (mem == IBV_ALLOCATOR_USE_DEFAULT) {
        return nullptr;
    }
    p.source = Source::Allocator;
    if (mem == nullptr) {
        errno = ENOMEM;
    }
    return mem;
}

void domain_free(void* mem, const Placement& p) {
    if (p.domain == nullptr) {
        return;
    }
    if (p.source == Source::Allocator && mem != nullptr) {
        p.domain->free(&p.domain->pd, p.domain->pd_context, mem, p.resource_type);
    }
    p.domain->users.fetch_sub(1);
}

}  // namespace uroce::provider
