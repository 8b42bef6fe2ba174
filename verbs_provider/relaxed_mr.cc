// Relaxed memory regions (uroce_dv.h): one pool per PD, created on first use
// with CREATE_RELAXED_POOL; the daemon passes the pool's memfd, mapped here.
// Registration and deregistration are writes into the pool
// (mr::RelaxedClient), with no round trip; flushing asks the daemon
// (FLUSH_RELAXED). These three functions are the only symbols the plugin
// exports besides what libibverbs needs.
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <new>

#include "common/unique_fd.h"
#include "mr/relaxed_client.h"
#include "mr/relaxed_pool.h"
#include "provider.h"
#include "uroce_dv.h"

namespace uroce::provider {

namespace {

constexpr std::uint32_t kPoolCapacity = 1024;
constexpr std::uint32_t kDirtyWatermark = 64;
constexpr std::uint32_t kInvalidateAfterUs = 10000;

struct Pool {
    std::uint32_t handle = 0;
    void* memory = nullptr;
    std::size_t bytes = 0;
    std::unique_ptr<mr::RelaxedClient> client;
};

std::uint64_t now_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

}  // namespace

struct RelaxedPools {
    std::mutex mutex;
    std::map<std::uint32_t, Pool> by_pd;
};

namespace {

RelaxedPools* pools_of(ibv_context* ctx) {
    Context* c = to_context(ctx);
    static std::mutex creation;
    std::lock_guard lock(creation);
    if (c->relaxed == nullptr) {
        c->relaxed = new (std::nothrow) RelaxedPools;
    }
    return c->relaxed;
}

// The PD's pool, created on first use. Call with pools->mutex held.
Pool* pool_for(RelaxedPools& pools, ibv_pd* pd, int& err) {
    if (auto it = pools.by_pd.find(pd->handle); it != pools.by_pd.end()) {
        return &it->second;
    }
    auto req = request<uroce_ctrl_relaxed_pool>(UROCE_CTRL_CREATE_RELAXED_POOL);
    req.pd = pd->handle;
    req.capacity = kPoolCapacity;
    req.dirty_watermark = kDirtyWatermark;
    req.invalidate_after_us = kInvalidateAfterUs;
    uroce_ctrl_handle reply{};
    int fd = -1;
    err = link_of(pd->context).call(&req, sizeof req, &reply, sizeof reply, -1, &fd);
    if (err != 0) {
        return nullptr;
    }
    const UniqueFd pool_file(fd);  // the mapping keeps the memory; the file is not needed after mmap
    const std::size_t bytes = mr::relaxed_pool_bytes(kPoolCapacity);
    void* mem = !pool_file.valid() ? MAP_FAILED
                                   : ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, pool_file.get(), 0);
    if (mem == MAP_FAILED) {
        err = EPROTO;
        return nullptr;
    }
    Pool& p = pools.by_pd[pd->handle];
    p.handle = reply.handle;
    p.memory = mem;
    p.bytes = bytes;
    p.client = std::make_unique<mr::RelaxedClient>(static_cast<uroce_relaxed_pool_header*>(mem));
    return &p;
}

}  // namespace

void free_relaxed_pools(Context& ctx) {
    if (ctx.relaxed == nullptr) {
        return;
    }
    for (auto& [pd, p] : ctx.relaxed->by_pd) {
        ::munmap(p.memory, p.bytes);
    }
    delete ctx.relaxed;
    ctx.relaxed = nullptr;
}

}  // namespace uroce::provider

using namespace uroce::provider;

extern "C" {

[[gnu::visibility("default")]] ibv_mr* uroce_dv_reg_mr_relaxed(ibv_pd* pd, void* addr, std::size_t length,
                                                                int access) {
    RelaxedPools* pools = pd == nullptr ? nullptr : pools_of(pd->context);
    if (pools == nullptr) {
        errno = pd == nullptr ? EINVAL : ENOMEM;
        return nullptr;
    }
    std::lock_guard lock(pools->mutex);
    int err = 0;
    Pool* pool = pool_for(*pools, pd, err);
    if (pool == nullptr) {
        errno = err;
        return nullptr;
    }
    const auto reg = pool->client->reg(reinterpret_cast<std::uintptr_t>(addr), length,
                                       static_cast<std::uint32_t>(access), now_ns());
    if (reg.error != 0) {
        errno = reg.error;
        return nullptr;
    }
    auto* vmr = new (std::nothrow) pabi::verbs_mr{};
    if (vmr == nullptr) {
        pool->client->dereg(reg.key, now_ns());
        errno = ENOMEM;
        return nullptr;
    }
    ibv_mr& mr = vmr->ibv_mr;
    mr.context = pd->context;
    mr.pd = pd;
    mr.addr = addr;
    mr.length = length;
    mr.handle = reg.key;
    mr.lkey = reg.key;
    mr.rkey = reg.key;
    vmr->mr_type = pabi::MrType::Mr;
    vmr->access = access;
    return &mr;
}

[[gnu::visibility("default")]] int uroce_dv_dereg_mr_relaxed(ibv_mr* mr) {
    if (mr == nullptr || mr->pd == nullptr) {
        return EINVAL;
    }
    RelaxedPools* pools = to_context(mr->context)->relaxed;
    if (pools == nullptr) {
        return EINVAL;
    }
    std::lock_guard lock(pools->mutex);
    auto it = pools->by_pd.find(mr->pd->handle);
    if (it == pools->by_pd.end()) {
        return EINVAL;
    }
    if (const int err = it->second.client->dereg(mr->lkey, now_ns()); err != 0) {
        return err;
    }
    delete reinterpret_cast<pabi::verbs_mr*>(mr);
    return 0;
}

[[gnu::visibility("default")]] int uroce_dv_flush_relaxed_mr(ibv_pd* pd) {
    if (pd == nullptr) {
        return EINVAL;
    }
    RelaxedPools* pools = to_context(pd->context)->relaxed;
    if (pools == nullptr) {
        return 0;  // no pool: nothing to invalidate
    }
    std::uint32_t handle = 0;
    {
        std::lock_guard lock(pools->mutex);
        auto it = pools->by_pd.find(pd->handle);
        if (it == pools->by_pd.end()) {
            return 0;
        }
        handle = it->second.handle;
    }
    return link_of(pd->context).call_handle(UROCE_CTRL_FLUSH_RELAXED, handle);
}

}  // extern "C"
