#include "fake_device.h"

#include <cstdlib>

namespace uroce::provider_test {

int g_uninit_device_calls = 0;
pabi::verbs_device* g_last_uninit_device = nullptr;

namespace {

::verbs_context* alloc_context_op(ibv_device* device, int cmd_fd, void* private_data) {
    // The offset argument is an offsetof() value passed as a pointer.
    void* mem = pabi::_verbs_init_and_alloc_context(device, cmd_fd, sizeof(TestContext), nullptr, 0);
    if (mem == nullptr) {
        return nullptr;
    }
    auto* ctx = static_cast<TestContext*>(mem);
    if (private_data != nullptr) {
        pabi::verbs_set_ops(&ctx->vctx, static_cast<const pabi::verbs_context_ops*>(private_data));
    }
    return &ctx->vctx;
}

void uninit_device_op(pabi::verbs_device* device) {
    ++g_uninit_device_calls;
    g_last_uninit_device = device;
}

const pabi::verbs_device_ops kFakeDeviceOps = {
    .name = "uroce_abi_test",
    .match_min_abi_version = 0,
    .match_max_abi_version = 0,
    .match_table = nullptr,
    .static_providers = nullptr,
    .match_device = nullptr,
    .alloc_context = alloc_context_op,
    .import_context = nullptr,
    .alloc_device = nullptr,
    .uninit_device = uninit_device_op,
};

}  // namespace

FakeDevice::FakeDevice() {
    vdev.ops = &kFakeDeviceOps;
    vdev.refcount = 1;
}

::verbs_context* alloc_context(FakeDevice& dev) {
    return alloc_context_op(dev.ibdev(), -1, nullptr);
}

void free_context(ibv_context* ctx) {
    ::verbs_context* vctx = verbs_get_ctx(ctx);
    pabi::verbs_uninit_context(vctx);
    // TestContext starts with its verbs_context: the allocation starts there.
    std::free(vctx);
}

ibv_context* open_with_ops(FakeDevice& dev, const pabi::verbs_context_ops& ops) {
    // verbs_set_ops copies the table, so a temporary would do; the cast only
    // drops const for the untyped private-data channel.
    return pabi::verbs_open_device(dev.ibdev(), const_cast<pabi::verbs_context_ops*>(&ops));
}

}  // namespace uroce::provider_test
