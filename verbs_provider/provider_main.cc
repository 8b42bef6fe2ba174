// The plugin's entry: when libibverbs dlopen()s liburoce-rdmav34.so, a
// constructor registers the "uroce" driver. libibverbs then offers it every
// device no earlier driver claimed; we take those named uroce*.
#include <cstring>
#include <new>
#include <string_view>

#include "provider.h"

namespace uroce::provider {
namespace {

constexpr std::string_view kNamePrefix = "uroce";

// Without kernel RDMA a device has no driver id and no modalias file, so
// libibverbs matches providers against "rdma_device:N<ibdev name>". The
// prefix is ours alone (rxe, siw etc. claim their own names).
constexpr pabi::verbs_match_ent kMatchTable[] = {
    {.driver_data = nullptr,
     .u = {.modalias = "rdma_device:Nuroce*"},
     .vendor = 0,
     .device = 0,
     .kind = pabi::MatchKind::Modalias},
    {.driver_data = nullptr, .u = {.modalias = nullptr}, .vendor = 0, .device = 0, .kind = pabi::MatchKind::Sentinel},
};

std::string_view field(const char* s, std::size_t capacity) {
    return {s, ::strnlen(s, capacity)};
}

// libibverbs' record of a device has a layout we declared ourselves. Before
// trusting it, check the fields whose values we can predict: libibverbs has
// just chosen our match entry, the name must be one that entry matches, and
// the path ends in that name. A mismatch means pabi34.h does not describe
// this libibverbs: refuse the device rather than misread memory later.
bool record_is_ours(const pabi::verbs_sysfs_dev& rec) {
    const std::string_view name = field(rec.ibdev_name, sizeof rec.ibdev_name);
    const std::string_view path = field(rec.ibdev_path, sizeof rec.ibdev_path);
    return rec.match == &kMatchTable[0] && name.starts_with(kNamePrefix) && path.size() > name.size() &&
           path.ends_with(name) && path[path.size() - name.size() - 1] == '/';
}

pabi::verbs_device* alloc_device(pabi::verbs_sysfs_dev* rec) {
    if (!record_is_ours(*rec)) {
        return nullptr;  // libibverbs reports "couldn't allocate device"
    }
    auto* dev = new (std::nothrow) Device{};
    return dev == nullptr ? nullptr : &dev->vdev;
}

void uninit_device(pabi::verbs_device* vdev) {
    delete reinterpret_cast<Device*>(vdev);
}

constexpr pabi::verbs_device_ops kDeviceOps = {
    .name = "uroce",
    .match_min_abi_version = kDeviceAbiVersion,
    .match_max_abi_version = kDeviceAbiVersion,
    .match_table = kMatchTable,
    .static_providers = nullptr,
    .match_device = nullptr,
    .alloc_context = alloc_context,
    .import_context = nullptr,
    .alloc_device = alloc_device,
    .uninit_device = uninit_device,
};

[[gnu::constructor]] void register_driver() {
    pabi::verbs_register_driver_34(&kDeviceOps);
}

}  // namespace
}  // namespace uroce::provider
