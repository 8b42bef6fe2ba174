// The name that separates one uroced's DPDK files from another's: its EAL
// --file-prefix is "uroce-" + this, so its runtime directory is
// /var/run/dpdk/uroce-<name>-<hash> (docs/daemon.md). Shared with
// `uroce testbed down`, which removes the directory a killed daemon left.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace uroce::daemon {

// The device name and the state directory, since two daemons of one name in
// two network namespaces share /var/run. FNV-1a (stable across builds,
// unlike std::hash) of the absolute state directory.
inline std::string dpdk_instance(const std::string& name, const std::filesystem::path& state_dir) {
    std::uint32_t h = 2166136261u;  // FNV-1a 32-bit offset basis
    for (const char c : std::filesystem::absolute(state_dir).lexically_normal().string()) {
        h = (h ^ static_cast<std::uint8_t>(c)) * 16777619u;  // FNV prime
    }
    return fmt::format("{}-{:08x}", name, h);
}

// Where the EAL of that daemon keeps its runtime files (DPDK's default
// runtime directory for root, the only user that opens af_packet ports).
inline std::filesystem::path dpdk_runtime_dir(const std::string& name, const std::filesystem::path& state_dir) {
    return std::filesystem::path("/var/run/dpdk") / ("uroce-" + dpdk_instance(name, state_dir));
}

}  // namespace uroce::daemon
