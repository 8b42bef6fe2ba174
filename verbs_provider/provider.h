// The uroce provider plugin's own structures, shared by its source files.
// One concern per file: provider_main.cc registers the driver and makes
// devices, context.cc opens and closes contexts (the connection to uroced),
// daemon_link.cc carries requests to uroced, device_loss.cc and
// loss_watcher.cc handle its going away, attributes.cc answers the device
// and port queries, verbs_pd.cc, verbs_mr.cc, verbs_mw.cc, verbs_cq.cc,
// verbs_qp.cc, verbs_srq.cc, verbs_ah.cc the object verbs, relaxed_mr.cc the
// uroce_dv.h extension.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "abi/control.h"
#include "abi/control_client.h"
#include "common/unique_fd.h"
#include "completion_ring.h"
#include "empty_poll_yield.h"
#include "pabi34.h"
#include "parent_domain.h"
#include "send_batch.h"
#include "work_queue.h"

namespace uroce::mr {
class RelaxedClient;
}

namespace uroce::provider {

namespace pabi = uroce::pabi34;

// The value of <uverbs dir>/abi_version a uroce device must carry: the
// version of the provider <-> uroced interface, written by uroced. libibverbs
// skips the device (with a warning naming both numbers) when it is outside
// the range we register, which is how a provider meets a daemon it does not
// understand.
inline constexpr std::uint32_t kDeviceAbiVersion = 1;

// Every uroce device has one port.
inline constexpr std::uint8_t kPortNum = 1;

// A device as libibverbs holds it. verbs_device must stay first: libibverbs
// hands back ibv_device pointers, and we convert them by cast.
struct Device {
    pabi::verbs_device vdev;
};

struct Qp;
struct Srq;

// The connection of one context to uroced (daemon_link.cc). Requests are
// serialised (verbs may be called from any thread). Once the daemon has gone
// every request fails with EIO at once.
class DaemonLink {
public:
    // Connects to `socket_path` and says HELLO; on success `async_fd` is the
    // daemon's async-event pipe. 0 or an errno (ENODEV when nothing answers).
    int open(const char* socket_path, int& async_fd);

    // One request/reply (abi::ControlClient::call). Returns 0, the daemon's
    // status (a positive errno), or EIO when the daemon did not answer.
    int call(void* req, std::size_t req_size, void* reply, std::size_t reply_size, int send_fd = -1,
             int* recv_fd = nullptr);
    // A request that is one handle (DEALLOC_PD, DESTROY_*, ...), status only.
    int call_handle(std::uint16_t op, std::uint32_t handle);

    // Whether the daemon is known to be gone (a request found the
    // connection broken, or hung_up() saw it). One atomic load.
    [[nodiscard]] bool gone() const { return state_.load(std::memory_order_acquire) == State::Gone; }
    // Looks whether the daemon hung up (a non-blocking poll(2) of the
    // socket; skipped while a request is under way, which finds out itself).
    // Returns gone().
    bool hung_up();
    // The daemon hung up (LossWatcher saw it): every request fails from now.
    void mark_gone() { state_.store(State::Gone, std::memory_order_release); }
    // A close-on-exec copy of the control socket, or -1 (errno set; EIO
    // when the connection is already closed).
    int dup_socket();

private:
    enum class State : std::uint8_t { Connected, Gone };

    std::mutex mutex_;
    abi::ControlClient client_;
    std::atomic<State> state_{State::Connected};
};

// When the daemon goes (device_loss.cc; docs/provider.md): which work queues
// each CQ flushes, and how often an empty CQ looks whether the daemon is
// still there.
class DeviceLoss {
public:
    // Every QP and SRQ, from creation until destruction, for the flush.
    void add(Qp* qp);
    void remove(Qp* qp);
    void add(Srq* srq);
    void remove(Srq* srq);

    // For a CQ found empty: whether the device is gone. Looks at the
    // socket at most every kCheckInterval (and one atomic load otherwise).
    bool device_gone(DaemonLink& link);
    // The flushed completions that belong on `cq`, from the work queues
    // that complete there (docs/provider.md); each work queue is flushed
    // once, and posts to it fail with EIO from then on.
    void collect_flushes(const ibv_cq* cq, std::vector<ibv_wc>& out);

private:
    std::mutex mutex_;
    std::vector<Qp*> qps_;    // in creation order
    std::vector<Srq*> srqs_;
    std::atomic<std::int64_t> next_check_ns_{0};
};

struct Cq;

// Wakes threads blocked in ibv_get_cq_event when the daemon dies
// (loss_watcher.cc): one thread per context, started with the first CQ that
// has a completion channel, sleeping in poll(2) on the control socket; on a
// hang-up it marks the link gone and writes one event on the channel of
// every such CQ. Stopped and joined when the context closes.
class LossWatcher {
public:
    LossWatcher() = default;
    LossWatcher(const LossWatcher&) = delete;
    LossWatcher& operator=(const LossWatcher&) = delete;
    ~LossWatcher();

    // A CQ with a channel, from creation until destruction. watch starts
    // the thread the first time; 0 or an errno.
    int watch(DaemonLink& link, Cq* cq);
    void unwatch(Cq* cq);
    // Ends the thread (ibv_close_device); it runs no more after this.
    void stop();

private:
    enum class State : std::uint8_t { Idle, Running, Stopped };

    int start(DaemonLink& link);
    void run(DaemonLink& link);
    void close_fds();

    std::mutex mutex_;
    State state_ = State::Idle;
    std::vector<Cq*> cqs_;
    std::thread thread_;
    UniqueFd socket_fd_;  // our copy of the control socket
    UniqueFd stop_fd_;    // eventfd: stop() wakes the thread
};

// A CQ's flushed completions, handed out after the real ones.
class FlushedCompletions {
public:
    // Up to `num_entries` of them; collects them from `loss` on the first call.
    int poll(DeviceLoss& loss, const ibv_cq* cq, int num_entries, ibv_wc* wc);
    // Whether some are still to be handed out (or not yet collected).
    [[nodiscard]] bool pending();

private:
    enum class Stage : std::uint8_t { NotCollected, Collected };

    std::mutex mutex_;
    Stage stage_ = Stage::NotCollected;
    std::vector<ibv_wc> pending_;
    std::size_t next_ = 0;
};

// State of the relaxed-MR extension (relaxed_mr.cc), one pool per PD.
struct RelaxedPools;

// An open context. libibverbs allocates it (zeroed) for us; the
// verbs_context must stay first so that ibv_context* -> verbs_context* ->
// Context* are plain conversions.
struct Context {
    ::verbs_context vctx;
    DaemonLink* link;        // owned
    DeviceLoss* loss;        // owned
    LossWatcher* watcher;    // owned
    RelaxedPools* relaxed;   // owned, created on first use
    int doorbell_fd;         // owned: the daemon's doorbell eventfd (abi/rings.h)
};
static_assert(offsetof(Context, vctx) == 0);

inline Context* to_context(ibv_context* ctx) {
    return reinterpret_cast<Context*>(verbs_get_ctx(ctx));
}
inline DaemonLink& link_of(ibv_context* ctx) { return *to_context(ctx)->link; }
inline DeviceLoss& loss_of(ibv_context* ctx) { return *to_context(ctx)->loss; }
inline LossWatcher& watcher_of(ibv_context* ctx) { return *to_context(ctx)->watcher; }
inline int doorbell_of(ibv_context* ctx) { return to_context(ctx)->doorbell_fd; }

// Objects: the ibv_* structure first, so libibverbs' pointers convert back.
// Each maps the memfd of its rings (abi/rings.h) the daemon passed.
struct Cq {
    pabi::verbs_cq vcq;
    void* ring;
    std::size_t ring_bytes;
    CompletionRing completions;
    FlushedCompletions flushed;  // once the daemon has gone
    EmptyPollYield yield;        // when polling an empty ring gives the CPU away
    int channel_notify_fd = -1;  // the channel's write end (the preload's), -1 without a channel
    // ibv_cq_ex polling (verbs_cq_ex.cc): the completion start_poll or
    // next_poll took last, which the read_* accessors report, and the lock
    // held from a successful start_poll to end_poll.
    std::mutex poll_mutex;
    ibv_wc current{};
    CompletionTime current_time{};
    Placement placement;  // host memory: a parent domain's allocator or the heap
};
inline Cq* to_cq(ibv_cq* cq) { return reinterpret_cast<Cq*>(cq); }
struct Qp {
    pabi::verbs_qp vqp;
    ibv_qp_cap cap;
    int sq_sig_all;
    void* rings;             // SQ, then RQ (none with an SRQ)
    std::size_t ring_bytes;
    WorkQueue sq;
    WorkQueue rq;
    SendBatch batch;  // ibv_wr_* of an extended QP (verbs_qp_ex.cc)
    Placement placement;  // host memory: a parent domain's allocator or the heap
};
struct Srq {
    ibv_srq srq;
    void* ring;
    std::size_t ring_bytes;
    WorkQueue rq;
};
struct Xrcd {
    ibv_xrcd xrcd;
    std::uint32_t handle;  // this context's reference to the domain
};

// Maps `bytes` of a ring memfd the daemon passed and closes the fd; null
// (errno set) when it cannot (verbs_cq.cc).
void* map_ring(int fd, std::uint64_t bytes);

// Every request header starts zeroed with its op set.
template <typename T>
T request(std::uint16_t op) {
    T r{};
    r.hdr.op = op;
    return r;
}

// context.cc
::verbs_context* alloc_context(ibv_device* device, int cmd_fd, void* private_data);
void free_context(ibv_context* ctx);

// attributes.cc
int query_device_ex(ibv_context* ctx, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                    std::size_t attr_size);
int query_port(ibv_context* ctx, std::uint8_t port_num, ibv_port_attr* attr);

// verbs_pd.cc
ibv_pd* alloc_pd(ibv_context* ctx);
int dealloc_pd(ibv_pd* pd);
ibv_pd* alloc_parent_domain(ibv_context* ctx, ibv_parent_domain_init_attr* attr);
ibv_td* alloc_td(ibv_context* ctx, ibv_td_init_attr* attr);
int dealloc_td(ibv_td* td);

// verbs_mr.cc
ibv_mr* reg_mr(ibv_pd* pd, void* addr, std::size_t length, std::uint64_t hca_va, int access);
ibv_mr* reg_dmabuf_mr(ibv_pd* pd, std::uint64_t offset, std::size_t length, std::uint64_t iova, int fd, int access);
int rereg_mr(pabi::verbs_mr* vmr, int flags, ibv_pd* pd, void* addr, std::size_t length, int access);
int dereg_mr(pabi::verbs_mr* vmr);

// verbs_mw.cc
ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type);
int dealloc_mw(ibv_mw* mw);
int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind);

// verbs_odp.cc
void report_odp_caps(ibv_device_attr_ex& attr);
int advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, std::uint32_t flags, ibv_sge* sg_list, std::uint32_t num_sge);

// verbs_cq.cc
ibv_cq* create_cq(ibv_context* ctx, int cqe, ibv_comp_channel* channel, int comp_vector);
// The same with UROCE_CQ_* flags for CREATE_CQ (abi/control.h), its host
// memory from `domain`'s allocator when that is a parent domain with one.
ibv_cq* create_cq_flags(ibv_context* ctx, int cqe, ibv_comp_channel* channel, int comp_vector, std::uint32_t flags,
                        ibv_pd* domain = nullptr);
int destroy_cq(ibv_cq* cq);
int poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc);
int req_notify_cq(ibv_cq* cq, int solicited_only);
int resize_cq(ibv_cq* cq, int cqe);

// verbs_cq_ex.cc
ibv_cq_ex* create_cq_ex(ibv_context* ctx, ibv_cq_init_attr_ex* attr);
int query_rt_values(ibv_context* ctx, ibv_values_ex* values);
// Polls one completion for an ibv_cq_ex or ibv_poll_cq: the ring's, then
// (the daemon gone) a flushed one. 1, or 0 when there is none.
int poll_one(Cq& cq, ibv_wc& wc, CompletionTime* time);

// verbs_qp.cc
ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* attr);
int modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask);
int query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr);
int destroy_qp(ibv_qp* qp);
// verbs_qp_ex.cc
ibv_qp* create_qp_ex(ibv_context* ctx, ibv_qp_init_attr_ex* attr);
int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);

// verbs_srq.cc
ibv_srq* create_srq(ibv_pd* pd, ibv_srq_init_attr* attr);
int modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int attr_mask);
int query_srq(ibv_srq* srq, ibv_srq_attr* attr);
int destroy_srq(ibv_srq* srq);
int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
// Sends a CREATE_SRQ or CREATE_XRC_SRQ request for `srq` (freed on failure)
// and maps the ring its reply passes; `attr` gets the granted sizes.
ibv_srq* finish_srq(Srq* srq, ibv_pd* pd, void* req, std::size_t req_len, ibv_srq_init_attr* attr);

// verbs_xrc.cc: XRC domains, XRC SRQs, XRC target QPs (docs/provider.md "XRC").
ibv_xrcd* open_xrcd(ibv_context* ctx, ibv_xrcd_init_attr* attr);
int close_xrcd(ibv_xrcd* xrcd);
ibv_srq* create_srq_ex(ibv_context* ctx, ibv_srq_init_attr_ex* attr);
int get_srq_num(ibv_srq* srq, std::uint32_t* srq_num);
// ibv_create_qp_ex of an IBV_QPT_XRC_RECV QP (create_qp_ex sends it here).
ibv_qp* create_xrc_target(ibv_context* ctx, ibv_qp_init_attr_ex* attr);
// ibv_open_qp(3): a handle on an existing XRC target QP of the caller's domain.
ibv_qp* open_qp(ibv_context* ctx, ibv_qp_open_attr* attr);
// Closes this handle (and no other of the context's) on its XRC target QP:
// 0 or an errno.
int close_xrc_target(ibv_qp* qp);

// verbs_ah.cc
ibv_ah* create_ah(ibv_pd* pd, ibv_ah_attr* attr);
int destroy_ah(ibv_ah* ah);

// verbs_mcast.cc
int attach_mcast(ibv_qp* qp, const ibv_gid* gid, std::uint16_t lid);
int detach_mcast(ibv_qp* qp, const ibv_gid* gid, std::uint16_t lid);

// relaxed_mr.cc
void free_relaxed_pools(Context& ctx);

}  // namespace uroce::provider
