// The emulated ucma character device (/dev/infiniband/rdma_cm, ABI 4): the
// rdma_cm ids of every event channel of one uroce device, driven by the
// raw command bytes librdmacm writes (rdma/rdma_user_cm.h), answered as
// Linux 6.1's drivers/infiniband/core/ucma.c and cma.c answer them.
// docs/rdmacm-device.md describes the behaviour; the preload library
// (verbs_provider/ucma_preload.c) carries the bytes here over the control
// socket (abi/control.h CM_*).
//
// Ids are numbered host-wide (lowest free handle, as the kernel's xarray)
// and belong to one channel; every channel has a FIFO of events and a
// doorbell socket the device writes one byte to per event queued, which is
// what makes the program's channel fd readable. Not thread-safe: the
// daemon's control thread owns it.
#pragma once

#include <rdma/rdma_user_cm.h>
#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "device/gid_table.h"
#include "ucma/cm_id.h"
#include "ucma/connection_manager.h"
#include "ucma/neighbour_resolver.h"

namespace uroce::ucma {

// What the device answers about itself.
struct DeviceView {
    std::uint64_t node_guid = 0;  // host order (sysfs node_guid)
    std::vector<device::GidEntry> gids;
    std::uint8_t active_mtu = 3;  // enum ibv_mtu
    std::uint8_t max_rd_atomic = 16;
};

// The answer to one command: an errno (0: success) and the bytes to copy
// to the command's response pointer (at most what the command's `out` allows).
constexpr std::size_t kMaxAnswer = 440;  // QUERY(PATH) with 6 paths
struct CommandResult {
    int error = 0;
    std::size_t length = 0;
    std::array<std::uint8_t, kMaxAnswer> bytes{};
};

class UcmaDevice final : public CmEventSink {
public:
    UcmaDevice(DeviceView device, ConnectionManager& cm);
    ~UcmaDevice() override;
    UcmaDevice(const UcmaDevice&) = delete;
    UcmaDevice& operator=(const UcmaDevice&) = delete;

    // A new channel (the program opened the device) whose doorbell is
    // `doorbell_fd` (taken; closed with the channel), owned by `owner`.
    ChannelId open_channel(uid_t owner, int doorbell_fd);
    // The program's last copy of the channel fd closed: every id on it goes
    // (ucma_close), as DESTROY_ID would send what each id's state needs.
    void close_channel(ChannelId channel);
    // Whether `channel` exists and `caller` may use it.
    [[nodiscard]] bool may_use(ChannelId channel, uid_t caller) const;
    [[nodiscard]] int doorbell_fd(ChannelId channel) const;

    // One write() on the channel: `command` is the ucma header and body as
    // written (body truncated to what was sent), `option` the value a
    // SET_OPTION points to. MIGRATE_ID's fd field carries the old channel's
    // id (the preload maps fd numbers). GET_EVENT is not a command here.
    CommandResult execute(ChannelId channel, std::span<const std::uint8_t> command,
                          std::span<const std::uint8_t> option);
    // GET_EVENT: the oldest event of `channel`, or ENOENT when none is
    // queued (purged since its doorbell was rung).
    int next_event(ChannelId channel, rdma_ucm_event_resp& out);

    // Runs the connection manager (deliveries, timers) and the address
    // resolutions waiting for a neighbour.
    void poll();

    // Where RESOLVE_IP / RESOLVE_ADDR learn whether the destination's MAC is
    // known (address_resolution.cc); without one (nullptr, the default)
    // every address resolves at once. Not owned; used only while some id
    // resolves (from a command or poll), so it must outlive the ids.
    void set_neighbour_resolver(NeighbourResolver* resolver) { neighbours_ = resolver; }
    // The device's time (steady_clock::now unless a test sets another).
    void set_clock(std::function<std::chrono::steady_clock::time_point()> clock) { clock_ = std::move(clock); }
    // Ids in ADDR_QUERY waiting for their destination's neighbour.
    [[nodiscard]] std::size_t address_queries() const { return address_queries_.size(); }
    // Rings the doorbells a full socket refused before (the program had
    // not read that many yet); call on every wake-up of the daemon.
    void flush_doorbells();

    [[nodiscard]] std::size_t channel_count() const { return channels_.size(); }
    [[nodiscard]] std::size_t id_count() const { return ids_.size(); }
    // Every id by handle, for CM_LIST_IDS (id_listing.h).
    [[nodiscard]] const std::map<std::uint32_t, CmId>& ids() const { return ids_; }

    // CmEventSink: messages from the peer of a connection.
    RequestVerdict on_request(const ConnectionRequest& req) override;
    void on_reply(ConnectionId active, const ConnectionReply& rep) override;
    RequestVerdict on_sidr_request(const ConnectionRequest& req) override;
    void on_sidr_reply(ConnectionId active, const SidrReply& rep) override;
    void on_ready_to_use(ConnectionId passive) override;
    void on_reject(ConnectionId id, RejectReason reason, const PrivateData& data) override;
    void on_disconnect_request(ConnectionId id) override;
    void on_disconnect_reply(ConnectionId id) override;
    void on_unreachable(ConnectionId id, int status) override;
    void on_timewait_exit(ConnectionId id) override;

private:
    struct QueuedEvent {
        std::uint32_t counted_on = 0;  // the id whose events_reported it adds to
        std::uint32_t subject = 0;     // the id it is about (purged with it)
        rdma_ucm_event_resp resp{};
        std::optional<std::uint32_t> multicast;  // a join's event: it counts on the join too
    };
    // A multicast join (commands_multicast.cc), named by its own handle.
    struct Multicast {
        std::uint32_t handle = 0;
        std::uint64_t uid = 0;   // the program's, echoed in its events
        std::uint32_t id = 0;    // the id that joined
        Endpoint group;
        std::uint32_t events_reported = 0;
    };
    // An id in ADDR_QUERY waiting for its destination's MAC (addr.c's
    // struct addr_req): the source the route chose, and when it gives up.
    struct AddressQuery {
        Endpoint source;
        std::chrono::steady_clock::time_point deadline;
    };
    struct Channel {
        uid_t owner = 0;
        int doorbell_fd = -1;
        std::deque<QueuedEvent> events;
        // Doorbells owed: a socket holds a few hundred unread datagrams, a
        // channel may queue more events than that (a listener's backlog).
        std::uint32_t owed = 0;
    };

    // Command handlers (commands_*.cc). `body` is the command body, zero
    // padded to the struct's size; `out` the header's answer size.
    int create_id(ChannelId ch, const std::uint8_t* body, std::uint16_t out, CommandResult& r);
    int destroy_id(ChannelId ch, const std::uint8_t* body, std::uint16_t out, CommandResult& r);
    int bind_ip(ChannelId ch, const std::uint8_t* body);
    int bind(ChannelId ch, const std::uint8_t* body);
    int resolve_ip(ChannelId ch, const std::uint8_t* body);
    int resolve_addr(ChannelId ch, const std::uint8_t* body);
    int resolve_route(ChannelId ch, const std::uint8_t* body);
    int query_route(ChannelId ch, const std::uint8_t* body, std::uint16_t out, CommandResult& r);
    int query(ChannelId ch, const std::uint8_t* body, std::uint16_t out, CommandResult& r);
    int connect(ChannelId ch, const std::uint8_t* body, std::uint16_t in);
    int listen(ChannelId ch, const std::uint8_t* body);
    int accept(ChannelId ch, const std::uint8_t* body, std::uint16_t in);
    int reject(ChannelId ch, const std::uint8_t* body);
    int disconnect(ChannelId ch, const std::uint8_t* body);
    int init_qp_attr(ChannelId ch, const std::uint8_t* body, std::uint16_t out, CommandResult& r);
    int set_option(ChannelId ch, const std::uint8_t* body, std::span<const std::uint8_t> option);
    int set_ib_path(CmId& id, std::span<const std::uint8_t> records);
    int notify(ChannelId ch, const std::uint8_t* body);
    int migrate_id(ChannelId ch, const std::uint8_t* body, std::uint16_t out, CommandResult& r);
    int join_ip_multicast(ChannelId ch, const std::uint8_t* body, std::uint16_t out, CommandResult& r);
    int join_multicast(ChannelId ch, const std::uint8_t* body, std::uint16_t out, CommandResult& r);
    int leave_multicast(ChannelId ch, const std::uint8_t* body, std::uint16_t out, CommandResult& r);
    // Both joins, once their command is read: the checks of rdma_join_multicast, the join, its event.
    int join(ChannelId ch, std::uint32_t handle, std::uint64_t uid, const Endpoint& group, CommandResult& r);
    void queue_multicast_join(const CmId& id, const Multicast& mc);
    [[nodiscard]] std::uint32_t allocate_multicast_handle() const;
    // DESTROY_ID: the id's joins go (ucma_cleanup_multicast).
    void forget_multicasts(std::uint32_t id);

    // The id `handle` as channel `ch` may name it: ENOENT when there is no
    // such (visible) id, EINVAL when it belongs to another channel (ucma.c
    // ucma_get_ctx).
    CmId* find(ChannelId ch, std::uint32_t handle, int& error);
    CmId* find_any(std::uint32_t handle);
    std::uint32_t allocate_handle() const;
    CmId& add_id(ChannelId ch, std::uint64_t uid, std::uint16_t ps, std::uint8_t qp_type);
    // Sends what the id's connection state needs on destruction (DREQ,
    // DREP, REJ), drops its queued events and those of the passive ids a
    // listener had not handed out (destroying them), and forgets it.
    void remove_id(std::uint32_t handle);
    // Drops the id's queued events; returns nothing (their doorbells become
    // spurious, which GET_EVENT tolerates).
    void purge_events(std::uint32_t handle);

    // Queues an event on the id's channel and rings its doorbell. Events for
    // a passive id whose uid is still 0 are dropped (ucma_event_handler).
    void queue_event(const CmId& id, std::uint32_t event, std::int32_t status, std::uint32_t counted_on);
    void queue_event(const CmId& id, const rdma_ucm_event_resp& resp, std::uint32_t counted_on);
    void ring(Channel& c);
    // Sends owed doorbells until the socket is full; whether all went.
    bool pay(Channel& c);

    // The listener a REQ or SIDR_REQ is for, and the passive id it makes
    // (commands_connect.cc); nothing when it is refused or dropped.
    RequestVerdict admit_request(const ConnectionRequest& req, CmId*& passive);
    // The AV of the id's path, as INIT_QP_ATTR and UD events give it.
    void fill_ah_attr(const CmId& id, ib_uverbs_ah_attr& ah) const;
    int connect_ud(CmId& id, const rdma_ucm_conn_param& param);
    int accept_ud(CmId& id, const rdma_ucm_conn_param& param, std::uint64_t uid);

    // Addressing (addressing.cc).
    [[nodiscard]] bool is_own_address(const Endpoint& e) const;
    // A local address of e's family to stand for a loopback or wildcard one.
    [[nodiscard]] std::optional<Endpoint> own_address(Family f) const;
    int bind_endpoint(CmId& id, Endpoint e);
    int take_port(CmId& id, Endpoint& e);
    [[nodiscard]] int gid_index(const wire::Gid& gid) const;
    [[nodiscard]] PathInfo path_for(const CmId& id) const;
    void fill_route(const CmId& id, ib_user_path_rec& rec, bool resolved) const;
    int start_resolve(CmId& id, std::optional<Endpoint> src, Endpoint dst, std::uint32_t timeout_ms);
    // Neighbour resolution of an id in ADDR_QUERY (address_resolution.cc).
    void begin_address_query(CmId& id, const Endpoint& source, std::chrono::milliseconds timeout);
    void finish_address_queries(std::chrono::steady_clock::time_point now);
    void address_resolved(CmId& id, const Endpoint& source);
    void address_failed(CmId& id, int status);
    // AF_IB (addressing_ib.cc).
    int bind_ib(CmId& id, Endpoint e);
    int start_resolve_ib(CmId& id, std::optional<Endpoint> src, Endpoint dst);
    [[nodiscard]] std::optional<wire::Gid> ib_source_for(const Endpoint& dst) const;
    // QUERY's GID and PATH answers (commands_query.cc).
    int query_gid(const CmId& id, std::uint16_t out, CommandResult& r) const;
    int query_path(const CmId& id, std::uint16_t out, CommandResult& r) const;
    void fill_device_addr(const CmId& id, rdma_ucm_query_addr_resp& resp) const;
    [[nodiscard]] bool route_resolved(const CmId& id) const;
    [[nodiscard]] PathInfo route_of(const CmId& id) const;

    DeviceView device_;
    ConnectionManager& cm_;
    std::map<ChannelId, Channel> channels_;
    ChannelId next_channel_ = 1;
    std::map<std::uint32_t, CmId> ids_;
    std::map<std::uint32_t, Multicast> multicasts_;  // by join handle
    std::vector<ChannelId> owing_;  // channels with owed doorbells
    NeighbourResolver* neighbours_ = nullptr;
    std::function<std::chrono::steady_clock::time_point()> clock_ = [] { return std::chrono::steady_clock::now(); };
    std::map<std::uint32_t, AddressQuery> address_queries_;  // by id handle
};

}  // namespace uroce::ucma
