// How libibverbs lays out and initialises a provider context: the public
// verbs_context ends with ibv_context, _verbs_init_and_alloc_context puts it
// at the offset we name, and it takes its device reference through the
// refcount where pabi34.h declares it.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "fake_device.h"

namespace uroce::provider_test {
namespace {

// Public-header facts the provider relies on when converting pointers.
static_assert(offsetof(::verbs_context, context) + sizeof(ibv_context) == sizeof(::verbs_context),
              "ibv_context must be the last member of verbs_context");
static_assert(offsetof(pabi::verbs_device, device) == 0, "ibv_device must be first in verbs_device");
static_assert(offsetof(pabi::verbs_mr, ibv_mr) == 0, "ibv_mr must be first in verbs_mr");
static_assert(offsetof(pabi::verbs_qp, qp) == 0 && offsetof(pabi::verbs_qp, qp_ex) == 0);
static_assert(offsetof(ibv_qp_ex, qp_base) == 0, "ibv_qp_ex starts with an ibv_qp");
static_assert(offsetof(ibv_cq_ex, context) == offsetof(ibv_cq, context) &&
                  offsetof(ibv_cq_ex, cq_context) == offsetof(ibv_cq, cq_context) &&
                  offsetof(ibv_cq_ex, async_events_completed) == offsetof(ibv_cq, async_events_completed),
              "ibv_cq_ex starts laid out like ibv_cq");

// A provider context with something before the verbs_context, to see that
// libibverbs honours the offset and leaves the rest alone.
struct Wrapped {
    std::uint64_t before[5];
    ::verbs_context vctx;
    std::uint64_t after;
};

TEST(ContextInit, LibibverbsAgreesOnVerbsContextSize) {
    FakeDevice dev;
    ::verbs_context* vctx = alloc_context(dev);
    ASSERT_NE(vctx, nullptr);
    // sz is sizeof(verbs_context) as libibverbs was compiled: the public
    // header we build with describes the same structure.
    EXPECT_EQ(vctx->sz, sizeof(::verbs_context));
    free_context(&vctx->context);
}

TEST(ContextInit, ContextPlacedAtOffsetAndDeviceHeld) {
    FakeDevice dev;
    ASSERT_EQ(dev.vdev.refcount, 1);
    auto* offset = reinterpret_cast<::verbs_context*>(offsetof(Wrapped, vctx));
    void* mem = pabi::_verbs_init_and_alloc_context(dev.ibdev(), -1, sizeof(Wrapped), offset, 0);
    ASSERT_NE(mem, nullptr);
    auto* w = static_cast<Wrapped*>(mem);

    ibv_context* ctx = &w->vctx.context;
    EXPECT_EQ(verbs_get_ctx(ctx), &w->vctx) << "abi_compat marks the context as extended";
    EXPECT_EQ(ctx->device, dev.ibdev());
    EXPECT_EQ(ctx->cmd_fd, -1);
    EXPECT_EQ(ctx->async_fd, -1) << "the provider must set async_fd itself";
    EXPECT_NE(w->vctx.priv, nullptr);
    for (std::uint64_t word : w->before) {
        EXPECT_EQ(word, 0u);
    }
    EXPECT_EQ(w->after, 0u);
    // The reference libibverbs takes lands on our refcount member.
    EXPECT_EQ(dev.vdev.refcount, 2);

    pabi::verbs_uninit_context(&w->vctx);
    EXPECT_EQ(dev.vdev.refcount, 1);
    std::free(mem);
}

TEST(ContextInit, InitCqFillsTheGenericPart) {
    FakeDevice dev;
    ::verbs_context* vctx = alloc_context(dev);
    ASSERT_NE(vctx, nullptr);
    pabi::verbs_cq vcq{};
    int cookie = 0;
    vcq.cq.comp_events_completed = 99;
    pabi::verbs_init_cq(&vcq.cq, &vctx->context, nullptr, &cookie);
    EXPECT_EQ(vcq.cq.context, &vctx->context);
    EXPECT_EQ(vcq.cq.channel, nullptr);
    EXPECT_EQ(vcq.cq.cq_context, &cookie);
    EXPECT_EQ(vcq.cq.comp_events_completed, 0u);
    EXPECT_EQ(ibv_cq_ex_to_cq(&vcq.cq_ex), &vcq.cq);
    pthread_cond_destroy(&vcq.cq.cond);
    pthread_mutex_destroy(&vcq.cq.mutex);
    free_context(&vctx->context);
}

}  // namespace
}  // namespace uroce::provider_test
