// The daemon's control socket: accepts provider connections on a Unix
// SOCK_SEQPACKET socket, validates every message (abi/control.h), and
// dispatches it to the Device on behalf of the connection's client. A
// malformed message or a hostile client ends that connection only; when a
// connection ends, everything the client owned is destroyed.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "abi/control.h"
#include "async_events.h"
#include "client_quota.h"
#include "common/unique_fd.h"
#include "device/device.h"
#include "device/ring_memory.h"
#include "device/ring_registry.h"
#include "datapath.h"
#include "handlers_stats.h"
#include "loop_stalls.h"
#include "mr/relaxed_pool.h"
#include "mr_registrations.h"
#include "net/fault_port.h"
#include "ucma/loopback_cm.h"
#include "ucma/routing_cm.h"
#include "ucma/wire_cm.h"
#include "ucma/ucma_device.h"

namespace uroce::daemon {

class ControlServer {
public:
    // Binds `socket_path` (replacing a stale socket file). Throws
    // std::runtime_error with the reason on failure.
    ControlServer(std::string socket_path, device::Device& device);
    ~ControlServer();
    ControlServer(const ControlServer&) = delete;
    ControlServer& operator=(const ControlServer&) = delete;

    // Serves until `stop` becomes true (checked at least every `tick_ms`).
    // `on_tick` runs at every wake-up (relaxed-pool timers).
    template <typename Tick>
    void run(const std::atomic<bool>& stop, int tick_ms, Tick on_tick) {
        while (!stop.load(std::memory_order_relaxed)) {
            poll_once(tick_ms);
            on_tick();
        }
    }

    // Waits up to `timeout_ms` for activity and handles it.
    void poll_once(int timeout_ms);
    // What poll_once also does with no activity: writes that rdma_cm event
    // channels refused when full are tried again (nothing says when a
    // client has read its channel). No system call when none is owed.
    void retry_refused_writes() { ucma_.flush_doorbells(); }

    // The slowest message handled since the last call (op 0: none), for the
    // loop's stall watch (loop_stalls.h).
    struct SlowestOp {
        std::uint16_t op = 0;
        std::chrono::nanoseconds took{0};
    };
    [[nodiscard]] SlowestOp take_slowest_op() { return std::exchange(slowest_op_, SlowestOp{}); }
    // The loop's stall counters, for LOOP_STALLS (nullptr: ENOTSUP).
    void set_loop_stalls(const LoopStallCounters* counters) { loop_stalls_ = counters; }

    // Runs the relaxed-MR pools' invalidation timers and the rdma_cm ids' timers.
    void poll_pools(std::chrono::steady_clock::time_point now);

    // Ends the connections whose client's address space has ended (its
    // process exec'ed or exited) and that have not said anything since:
    // their objects go. Looks at most every kClientCheckInterval.
    void check_clients(std::chrono::steady_clock::time_point now);

    // Tells every client the device is gone (IBV_EVENT_DEVICE_FATAL on their
    // async fd), then closes all connections.
    void shutdown_clients();

    [[nodiscard]] const std::string& socket_path() const { return path_; }

    // The rings of every CQ, QP and SRQ (device/ring_registry.h), for the engine.
    [[nodiscard]] const device::RingRegistry& rings() const { return rings_; }
    // The doorbell eventfd (abi/rings.h) every client gets a copy of
    // (DOORBELL): readable when a provider rang after the engine armed.
    [[nodiscard]] int doorbell_fd() const { return doorbell_fd_.get(); }
    // Readable when poll_once() has something to do (for the daemon's idle wait).
    [[nodiscard]] int epoll_fd() const { return epoll_fd_.get(); }

    // The data path to tell about clients and objects (once, before serving).
    void attach(Datapath& datapath);
    // Whether `gid` is one of the device's own (not the zero GID).
    [[nodiscard]] bool is_own_gid(const wire::Gid& gid) const;

    // The port's fault injection, for the FAULT_* ops (once, before
    // serving). Without, they answer ENOTSUP.
    void attach_faults(net::FaultPort& faults) { faults_ = &faults; }

    // Per-client quotas and the device's budgets (client_quota.h; before
    // serving). Without, nothing is limited but the device's own limits.
    void set_quota(ClientQuota quota) { quota_ = std::move(quota); }

private:
    struct Connection {
        std::uint32_t client = 0;
        uid_t uid = 0;                // SO_PEERCRED at connect
        UniqueFd socket;               // the connection's own end
        AsyncEventQueue async_events;  // write end of the client's async-event pipe
        UniqueFd pidfd;                // the connecting process (client_process.h), or empty
    };
    // How often check_clients looks: a client that exec'ed keeps its objects
    // (which reach nothing) at most this long.
    static constexpr std::chrono::milliseconds kClientCheckInterval{100};

    void accept_client();
    // Async events (async_events.h): delivered without ever blocking; a
    // backlogged queue's fd is watched for EPOLLOUT until it drains.
    void deliver_async(Connection& c, const AsyncRecord& record);
    // A shared (XRC target) QP's event goes to every client holding a
    // handle on it, each with its handle's cookie (the kernel's
    // __ib_shared_qp_event_handler, drivers/infiniband/core/verbs.c).
    void deliver_shared_qp_event(std::uint32_t qpn, engine::AsyncEvent event);
    void flush_async(int write_fd);
    // The socket of connection `c`.
    [[nodiscard]] int fd_of(const Connection& c) const;
    // Whose objects `c` may see in STATS and LIST_MRS (handlers_stats.h).
    [[nodiscard]] OwnerFilter visible_to(const Connection& c) const;
    void handle(int fd);
    // The connecting process of connection `fd` exited (its pidfd woke).
    void on_process_exit(int pidfd);
    // HELLO: the client's address space, from the files it carries.
    int take_client_process(std::uint32_t client);
    // Ends a connection and destroys what its client owned. A misbehaving
    // client is logged and counted as a bad message.
    void drop(int fd, const std::string& why, bool client_misbehaved = true);
    // Returns the reply length (0: drop the connection); fills `reply` and
    // may set `reply_fd` to an fd to pass along.
    std::size_t dispatch(Connection& c, const std::uint8_t* msg, std::size_t len, std::uint8_t* reply,
                         int& reply_fd, int received_fd);

    // ---- the table of ops (control_ops.cc) ----
    // One request, validated against its op's entry (known op, size right).
    struct Request {
        Connection& c;
        const uroce_ctrl_hdr& h;
        const std::uint8_t* msg;
        std::uint8_t* out;   // the reply, UROCE_CTRL_MAX_MESSAGE bytes
        int& reply_fd;       // an fd to pass with the reply (closed after sending), or -1
        int received_fd;     // the fd the request carried, or -1 (closed by the caller)
    };
    using Handler = std::size_t (ControlServer::*)(Request&);
    enum class SizeRule : std::uint8_t {
        Exact,    // the request is exactly `size` bytes
        AtLeast,  // `size` bytes or more, up to UROCE_CTRL_MAX_MESSAGE (a variable tail)
    };
    // One op: {number, request size, how the size is checked, handler}.
    struct ControlOp {
        std::uint16_t op = 0;
        std::size_t size = 0;
        SizeRule rule = SizeRule::Exact;
        Handler handler = nullptr;
    };
    // The entry of `op`, or nullptr for an unknown op.
    static const ControlOp* find_op(std::uint16_t op);
    // Calls handler `Fn` with what it takes of `r`: every handler takes
    // (connection, header, message, reply buffer), then optionally `int&
    // reply_fd` and/or `int received_fd`, in that order.
    template <auto Fn>
    std::size_t serve(Request& r);
    template <auto Fn>
    static constexpr ControlOp exact(std::uint16_t op, std::size_t size) {
        return {op, size, SizeRule::Exact, &ControlServer::serve<Fn>};
    }

    // Device, PD, status and stats ops (control_server.cc).
    std::size_t hello(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out,
                      int& reply_fd);
    std::size_t query_device(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out);
    std::size_t query_port(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out);
    std::size_t alloc_pd(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out);
    std::size_t dealloc_pd(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out);
    std::size_t status(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out);
    std::size_t stats(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out);
    std::size_t stats_reasons(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out);
    std::size_t explain_fetch(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out);
    std::size_t list_mrs(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out);
    // MRs, MWs and relaxed-MR pools (handlers_mr.cc).
    std::size_t reg_mr(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out,
                       int received_fd);
    std::size_t dereg_mr(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out);
    std::size_t alloc_mw(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out);
    std::size_t dealloc_mw(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out);
    std::size_t bind_mw(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out);
    std::size_t create_relaxed_pool(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                    std::uint8_t* out, int& reply_fd);
    std::size_t flush_relaxed(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out);
    // CQ, QP, SRQ and AH operations (handlers_queues.cc, handlers_qp.cc);
    // `h` was validated (a known op of the right size); `received_fd`, where
    // taken: the fd the request carried, or -1 (closed by the caller).
    std::size_t dispatch_queues(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                std::uint8_t* out, int& reply_fd);
    std::size_t handle_qp(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out);
    std::size_t create_cq(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out,
                          int& reply_fd, int received_fd);
    std::size_t resize_cq(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out,
                          int& reply_fd);
    std::size_t create_srq(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out,
                           int& reply_fd);
    std::size_t create_qp(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out,
                          int& reply_fd);
    // Ops 110-119: ibv_advise_mr, XRC (handlers_verbs_ext.cc).
    std::size_t dispatch_verbs_ext(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                   std::uint8_t* out, int& reply_fd);
    // An XRC SRQ's domain and CQ; zero for an ordinary SRQ.
    struct SrqDomain {
        std::uint32_t xrc_domain = 0;
        std::uint32_t cq = 0;
    };
    // The rest of CREATE_SRQ / CREATE_XRC_SRQ once QueueObjects made the SRQ:
    // quota, ring, reply (handlers_queues.cc).
    std::size_t finish_srq(Connection& c, const uroce_ctrl_hdr& h, const uroce_ctrl_srq& req, std::uint32_t handle,
                           const device::SrqAttr& a, SrqDomain domain, std::uint8_t* out, int& reply_fd);
    // Ops 120-129: XRC domains, SRQs and target QPs (handlers_xrc.cc).
    std::size_t open_xrcd(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out,
                          int received_fd);
    std::size_t close_xrcd(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out);
    std::size_t create_xrc_srq(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out,
                               int& reply_fd);
    std::size_t create_xrc_tgt(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out);
    std::size_t open_xrc_tgt(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out);
    std::size_t close_xrc_tgt(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out);
    // A QP QueueObjects destroyed leaves the data path, the rings and the quota.
    void forget_qp(std::uint32_t qpn);
    // Op 140: the loop's stall counters (docs/daemon.md "Loop stalls").
    std::size_t query_loop_stalls(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out);
    std::size_t query_membership(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out);
    // Ops 130-139: ibv_attach_mcast / ibv_detach_mcast (handlers_multicast.cc).
    std::size_t attach_multicast(const Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                 std::uint8_t* out);
    std::size_t detach_multicast(const Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                 std::uint8_t* out);
    // rdma_cm event channels and commands (handlers_cm.cc).
    std::size_t dispatch_cm(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out,
                            int received_fd);
    // Packet capture sessions (handlers_capture.cc).
    std::size_t dispatch_capture(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out,
                                 int received_fd);
    // The program's end of a channel's doorbell socket closed, or the
    // connection that opened it ended.
    void close_cm_channel(int doorbell_fd);
    // Fault-injection rules (handlers_fault.cc); changes only from root or
    // the daemon's own user.
    std::size_t dispatch_fault(const Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                               std::uint8_t* out);
    void close_cm_channels_of(std::uint32_t client);
    // Op 150: the rdma_cm ids the asker may see, a page at a time (handlers_cm_list.cc).
    std::size_t list_cm_ids(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out);
    [[nodiscard]] ucma::DeviceView ucma_view() const;

    std::string path_;
    device::Device& device_;
    UniqueFd listen_fd_;
    UniqueFd epoll_fd_;
    std::unordered_map<int, Connection> connections_;
    std::unordered_map<std::uint32_t, uid_t> client_uids_;  // by client id: SO_PEERCRED's uid
    // Read ends of async-event pipes, handed over with the HELLO reply.
    std::unordered_map<int, UniqueFd> pending_async_read_;
    // Backlogged async-event fds watched for EPOLLOUT -> their connection's fd.
    std::unordered_map<int, int> async_backlogged_;
    // Connection fd by the pidfd of its connecting process.
    std::unordered_map<int, int> pidfd_connection_;
    // The fds of the message being dispatched (HELLO takes two; every other
    // request at most one, passed as received_fd).
    std::vector<int> message_fds_;
    std::chrono::steady_clock::time_point next_client_check_{};

    struct PoolMapping {
        std::uint32_t client = 0;
        mr::RelaxedPool* pool = nullptr;
        device::RingMemory memory;  // sealed memfd, as the rings' (device/ring_memory.h)
    };
    std::unordered_map<std::uint32_t, PoolMapping> pools_;  // by pool handle (its base key index)

    ClientQuota quota_;
    MrRegistrations mr_registrations_{device_.mrs(), quota_};  // every MR's memory path
    device::RingRegistry rings_;
    Datapath* datapath_ = nullptr;
    net::FaultPort* faults_ = nullptr;
    UniqueFd doorbell_fd_;
    SlowestOp slowest_op_;
    const LoopStallCounters* loop_stalls_ = nullptr;

    // The emulated rdma_cm device. Connections between its own ids are
    // made inside the daemon (ucma/loopback_cm.h); those to peers behind a
    // port with a wire carry CM MADs on QP1 (ucma/wire_cm.h), which the
    // datapath receives and sends (attach). docs/rdmacm-device.md.
    ucma::LoopbackConnectionManager loopback_cm_;
    ucma::WireConnectionManager wire_cm_;
    bool port_has_wire_ = false;  // set by attach
    ucma::RoutingConnectionManager connection_manager_;
    ucma::UcmaDevice ucma_;
    struct CmChannel {
        ucma::ChannelId channel = 0;
        std::uint32_t client = 0;  // whose connection opened it: it goes with that connection
    };
    std::unordered_map<int, CmChannel> cm_channels_;  // by the daemon's end of the doorbell socket
};

}  // namespace uroce::daemon
