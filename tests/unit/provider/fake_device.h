// A minimal in-process provider for the ABI tests: a device that libibverbs
// never found in sysfs (so opening it touches no device node and needs no
// kernel), whose alloc_context installs whatever ops table the test hands it.
// Everything the tests observe is then done by libibverbs' own code.
#pragma once

#include <infiniband/verbs.h>

#include "pabi34.h"

namespace uroce::provider_test {

namespace pabi = uroce::pabi34;

// The provider's context: only the verbs_context, at offset 0.
struct TestContext {
    ::verbs_context vctx;
};

struct FakeDevice {
    // refcount 1, as if libibverbs' device list held it; no sysfs record.
    FakeDevice();

    ibv_device* ibdev() { return &vdev.device; }

    pabi::verbs_device vdev{};
};

// How often libibverbs called the fake device's uninit_device, and with what.
extern int g_uninit_device_calls;
extern pabi::verbs_device* g_last_uninit_device;

// A context made the way a provider's alloc_context makes one, without the
// rest of the open path: every op is libibverbs' stub.
::verbs_context* alloc_context(FakeDevice& dev);

// Undoes alloc_context (also usable as the free_context op).
void free_context(ibv_context* ctx);

// ibv_open_device's path (verbs_open_device): the fake alloc_context
// installs `ops`, then libibverbs adds its own wrappers on top.
ibv_context* open_with_ops(FakeDevice& dev, const pabi::verbs_context_ops& ops);

}  // namespace uroce::provider_test
