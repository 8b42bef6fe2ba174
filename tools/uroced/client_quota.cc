#include "client_quota.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

namespace uroce::daemon {

namespace {

// Mappings kept for the daemon itself beyond those it has at start: its
// heap, threads, and a DPDK port's memory segments (which can be hundreds).
constexpr std::uint64_t kDaemonMappingReserve = 2048;
// Descriptors kept for the daemon itself: its sockets, port, logs, and the
// two per connected client (socket, async pipe) that connections cost.
constexpr std::uint64_t kDaemonFdReserve = 1024;
// A quarter of the device's MR keys (mr/mr_table.h Limits::max_mr, 2^22).
constexpr std::uint64_t kDefaultObjects = 1u << 20;
// vm.max_map_count's default (mm/internal.h DEFAULT_MAX_MAP_COUNT).
constexpr std::uint64_t kDefaultMaxMapCount = 65530;

std::uint64_t read_number(const char* path, std::uint64_t fallback) {
    std::ifstream f(path);
    std::uint64_t v = 0;
    return f >> v ? v : fallback;
}

std::uint64_t own_mappings() {
    std::ifstream f("/proc/self/maps");
    std::uint64_t n = 0;
    for (std::string line; std::getline(f, line);) {
        ++n;
    }
    return n;
}

std::uint64_t less(std::uint64_t total, std::uint64_t reserve) { return total > reserve ? total - reserve : 0; }

}  // namespace

DeviceBudget measure_device_budget() {
    DeviceBudget b;
    const std::uint64_t max_maps = read_number("/proc/sys/vm/max_map_count", kDefaultMaxMapCount);
    b.mappings = less(max_maps, own_mappings() + kDaemonMappingReserve);
    rlimit nofile{};
    if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
        if (nofile.rlim_cur < nofile.rlim_max) {
            nofile.rlim_cur = nofile.rlim_max;
            ::setrlimit(RLIMIT_NOFILE, &nofile);
            ::getrlimit(RLIMIT_NOFILE, &nofile);
        }
        const std::uint64_t fds = nofile.rlim_cur == RLIM_INFINITY ? (1u << 20) : nofile.rlim_cur;
        b.fds = less(fds, kDaemonFdReserve);
    }
    return b;
}

QuotaLimits default_quota(const DeviceBudget& budget) {
    QuotaLimits q;
    q.objects = kDefaultObjects;
    q.mappings = budget.mappings / 4;
    q.fds = budget.fds / 4;
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page = ::sysconf(_SC_PAGESIZE);
    q.bytes = pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) / 4
                                    : std::uint64_t{1} << 32;
    return q;
}

int ClientQuota::admit(std::uint32_t client, const Charge& c) const {
    const QuotaLimits u = usage(client);
    if (u.objects + c.objects > limits_.objects || u.mappings + c.mappings > limits_.mappings ||
        u.bytes + c.bytes > limits_.bytes || u.fds + c.fds > limits_.fds) {
        return EDQUOT;
    }
    if (device_mappings_ + c.mappings > device_.mappings || device_fds_ + c.fds > device_.fds) {
        return ENOMEM;
    }
    return 0;
}

void ClientQuota::add(ObjectKind kind, std::uint32_t handle, std::uint32_t client, const Charge& c) {
    remove(kind, handle);  // a handle reused after a missed release is not counted twice
    held_[key(kind, handle)] = Held{client, c};
    QuotaLimits& u = used_.try_emplace(client, QuotaLimits{0, 0, 0, 0}).first->second;
    u.objects += c.objects;
    u.mappings += c.mappings;
    u.bytes += c.bytes;
    u.fds += c.fds;
    device_mappings_ += c.mappings;
    device_fds_ += c.fds;
}

void ClientQuota::remove(ObjectKind kind, std::uint32_t handle) {
    const auto it = held_.find(key(kind, handle));
    if (it == held_.end()) {
        return;
    }
    const Charge& c = it->second.charge;
    QuotaLimits& u = used_[it->second.client];
    u.objects -= c.objects;
    u.mappings -= c.mappings;
    u.bytes -= c.bytes;
    u.fds -= c.fds;
    device_mappings_ -= c.mappings;
    device_fds_ -= c.fds;
    held_.erase(it);
}

void ClientQuota::remove_client(std::uint32_t client) {
    for (auto it = held_.begin(); it != held_.end();) {
        if (it->second.client == client) {
            device_mappings_ -= it->second.charge.mappings;
            device_fds_ -= it->second.charge.fds;
            it = held_.erase(it);
        } else {
            ++it;
        }
    }
    used_.erase(client);
}

QuotaLimits ClientQuota::usage(std::uint32_t client) const {
    const auto it = used_.find(client);
    return it != used_.end() ? it->second : QuotaLimits{0, 0, 0, 0};
}

}  // namespace uroce::daemon
