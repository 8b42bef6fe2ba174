// One uroce device as the daemon runs it: attributes, the port, the tables of
// objects, and the clients that own them. Every operation names the client it
// acts for, and a client can only name its own objects. Plain C++: the
// control server (tools/uroced) decodes messages and calls in here.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "device/gid_table.h"
#include "device/queue_objects.h"
#include "mr/mr_table.h"

namespace uroce::device {

struct PortConfig {
    wire::MacAddr mac{};
    std::uint32_t netdev_mtu = 1500;
    bool link_up = true;
    std::uint32_t speed_mbps = 10000;
};

// IB MTU enum values (verbs.h enum ibv_mtu).
enum class IbMtu : std::uint32_t { Mtu256 = 1, Mtu512 = 2, Mtu1024 = 3, Mtu2048 = 4, Mtu4096 = 5 };

// The largest IB MTU whose packets fit an Ethernet MTU once the RoCEv2
// headers are added (IPv6 40 + UDP 8 + BTH 12 + the largest extension header
// set 28 + ICRC 4 = 92 bytes): 1500 gives 1024, 9000 gives 4096.
[[nodiscard]] IbMtu active_mtu_for(std::uint32_t netdev_mtu);
[[nodiscard]] std::uint32_t mtu_bytes(IbMtu m);

struct DeviceConfig {
    std::string name = "uroce0";
    PortConfig port;
    std::vector<wire::Gid> ips;
    mr::Limits mr_limits;
    QueueLimits queue_limits;
};

struct ClientCounters {
    std::uint64_t clients_opened = 0;
    std::uint64_t clients_closed = 0;
    std::uint64_t objects_reclaimed = 0;
    std::uint64_t bad_messages = 0;
};

class Device {
public:
    // Throws std::invalid_argument when the configuration cannot make a
    // device (too many addresses for the GID table).
    explicit Device(DeviceConfig config);

    [[nodiscard]] const DeviceConfig& config() const { return config_; }
    [[nodiscard]] const std::vector<GidEntry>& gids() const { return gids_; }
    [[nodiscard]] std::uint64_t node_guid() const { return node_guid_; }
    [[nodiscard]] IbMtu active_mtu() const { return active_mtu_for(config_.port.netdev_mtu); }

    // Clients: one per control connection. `pid` is what SO_PEERCRED said at
    // connect, for logs only: the device never reaches a client by its pid.
    // A client's address space is empty until it hands one over
    // (attach_address_space, at HELLO).
    std::uint32_t open_client(pid_t pid);
    // The client's own address space (its /proc/self/maps). False when the
    // client is unknown or already has one.
    bool attach_address_space(std::uint32_t client, std::shared_ptr<const mr::AddressSpace> space);
    // True when the client's address space has ended: its process exited or
    // exec'ed (a client that never attached one has not ended).
    [[nodiscard]] bool client_gone(std::uint32_t client) const;
    // Destroys everything the client owned; returns how many objects.
    std::size_t close_client(std::uint32_t client);
    [[nodiscard]] std::size_t client_count() const { return clients_.size(); }
    [[nodiscard]] pid_t client_pid(std::uint32_t client) const;
    void count_bad_message() { ++counters_.bad_messages; }
    [[nodiscard]] const ClientCounters& counters() const { return counters_; }

    mr::PdTable& pds() { return pds_; }
    mr::MrTable& mrs() { return *mrs_; }
    [[nodiscard]] const mr::MrTable& mrs() const { return *mrs_; }
    // CQs, QPs, SRQs and AHs.
    QueueObjects& queues() { return *queues_; }
    [[nodiscard]] const QueueObjects& queues() const { return *queues_; }
    // What the QP state machine checks modify_qp against (the port's MTU,
    // GID table, the device's RDMA read depths).
    [[nodiscard]] qp::PortLimits port_limits() const;

    // The process's address space, shared by its registrations.
    std::shared_ptr<const mr::AddressSpace> address_space(std::uint32_t client);

private:
    struct Client {
        pid_t pid = 0;
        std::shared_ptr<const mr::AddressSpace> address_space;
        bool attached = false;  // address_space is the client's own
    };

    DeviceConfig config_;
    std::vector<GidEntry> gids_;
    std::uint64_t node_guid_ = 0;
    mr::PdTable pds_;
    std::unique_ptr<mr::MrTable> mrs_;
    std::unique_ptr<QueueObjects> queues_;
    std::unordered_map<std::uint32_t, Client> clients_;
    std::uint32_t next_client_ = 1;
    ClientCounters counters_;
};

}  // namespace uroce::device
