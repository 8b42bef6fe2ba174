#include "device.h"

#include <stdexcept>

namespace uroce::device {

namespace {

// RoCEv2 overhead on top of the IB payload, at its largest: IPv6 (40), UDP
// (8), BTH (12), RETH+ImmDt or AtomicETH (28), ICRC (4). IBA A17.4.4 leaves
// the IB MTU to be the largest that fits.
constexpr std::uint32_t kRoceOverhead = 40 + 8 + 12 + 28 + 4;

}  // namespace

IbMtu active_mtu_for(std::uint32_t netdev_mtu) {
    for (IbMtu m : {IbMtu::Mtu4096, IbMtu::Mtu2048, IbMtu::Mtu1024, IbMtu::Mtu512}) {
        if (mtu_bytes(m) + kRoceOverhead <= netdev_mtu) {
            return m;
        }
    }
    return IbMtu::Mtu256;
}

std::uint32_t mtu_bytes(IbMtu m) { return 128u << static_cast<std::uint32_t>(m); }

Device::Device(DeviceConfig config) : config_(std::move(config)), pds_() {
    auto table = build_gid_table(config_.port.mac, config_.ips);
    if (!table) {
        throw std::invalid_argument("too many addresses: the GID table holds " + std::to_string(kGidTableLength) +
                                    " entries, two of them link-local");
    }
    gids_ = std::move(*table);
    node_guid_ = eui64(config_.port.mac);
    mrs_ = std::make_unique<mr::MrTable>(pds_, config_.mr_limits);
    queues_ = std::make_unique<QueueObjects>(pds_, config_.queue_limits, port_limits());
}

qp::PortLimits Device::port_limits() const {
    qp::PortLimits p;
    p.active_mtu = static_cast<qp::Mtu>(static_cast<std::uint8_t>(active_mtu()));
    p.gid_table_len = static_cast<std::uint16_t>(kGidTableLength);
    p.pkey_table_len = 1;
    return p;
}

std::uint32_t Device::open_client(pid_t pid) {
    const std::uint32_t id = next_client_++;
    clients_[id] = Client{pid, std::make_shared<mr::NoAddressSpace>(), false};
    ++counters_.clients_opened;
    return id;
}

bool Device::attach_address_space(std::uint32_t client, std::shared_ptr<const mr::AddressSpace> space) {
    auto it = clients_.find(client);
    if (it == clients_.end() || it->second.attached || space == nullptr) {
        return false;
    }
    it->second.address_space = std::move(space);
    it->second.attached = true;
    return true;
}

bool Device::client_gone(std::uint32_t client) const {
    auto it = clients_.find(client);
    return it != clients_.end() && it->second.attached && it->second.address_space->gone();
}

std::size_t Device::close_client(std::uint32_t client) {
    if (clients_.erase(client) == 0) {
        return 0;
    }
    std::size_t n = queues_->destroy_owner(client);
    n += mrs_->destroy_owner(client);
    n += pds_.destroy_owner(client);
    ++counters_.clients_closed;
    counters_.objects_reclaimed += n;
    return n;
}

pid_t Device::client_pid(std::uint32_t client) const {
    auto it = clients_.find(client);
    return it == clients_.end() ? 0 : it->second.pid;
}

std::shared_ptr<const mr::AddressSpace> Device::address_space(std::uint32_t client) {
    auto it = clients_.find(client);
    return it == clients_.end() ? nullptr : it->second.address_space;
}

}  // namespace uroce::device
