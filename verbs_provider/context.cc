// Opening and closing a context: the connection to uroced. The device's
// sysfs directory names the daemon's control socket (uroce_control_socket);
// alloc_context connects, says HELLO and takes the async-event fd the daemon
// passes back as context.async_fd, so IBV_EVENT_DEVICE_FATAL arrives there
// when the daemon stops; then DOORBELL brings the daemon's doorbell eventfd
// the post verbs ring (abi/rings.h). No daemon: ibv_open_device returns NULL
// with errno set (ENODEV).
#include <fcntl.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <new>

#include "common/unique_fd.h"
#include "provider.h"

namespace uroce::provider {
namespace {

// libibverbs still uses the command fd for the few verbs that have no
// provider hook. GID queries try one ioctl and fall back to the sysfs files
// only when it fails with ENOTTY, which /dev/null gives (-1 would give EBADF
// and break them). ibv_create_comp_channel writes a kernel command and reads
// the channel's fd from the reply: on a writable /dev/null the write
// "succeeds" and the fd is garbage (0, stdin), so open it read-only to make
// that fail cleanly with EBADF. The fd libibverbs opened (the device node, a
// symlink to /dev/null) is replaced rather than reopened read-only because
// its open mode is libibverbs' choice.
bool replace_cmd_fd(ibv_context& ctx) {
    const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return false;
    }
    if (ctx.cmd_fd >= 0) {
        ::close(ctx.cmd_fd);
    }
    ctx.cmd_fd = fd;
    return true;
}

// The control socket's path, as uroced wrote it into the device's sysfs
// directory. 0 or an errno.
int control_socket_path(ibv_device* device, char* buf, std::size_t size) {
    auto* vdev = reinterpret_cast<pabi::verbs_device*>(device);
    if (vdev->sysfs == nullptr) {
        return ENODEV;
    }
    const int n = pabi::ibv_read_ibdev_sysfs_file(buf, size, vdev->sysfs, "uroce_control_socket");
    if (n <= 0) {
        return ENODEV;  // no daemon published this device (or it has gone)
    }
    return 0;
}

// Entries left null keep libibverbs' stubs, which fail with EOPNOTSUPP.
constexpr pabi::verbs_context_ops kContextOps = [] {
    pabi::verbs_context_ops ops{};
    ops.free_context = free_context;
    ops.query_device_ex = query_device_ex;
    ops.query_port = query_port;
    ops.alloc_pd = alloc_pd;
    ops.dealloc_pd = dealloc_pd;
    ops.alloc_parent_domain = alloc_parent_domain;
    ops.alloc_td = alloc_td;
    ops.dealloc_td = dealloc_td;
    ops.reg_mr = reg_mr;
    ops.reg_dmabuf_mr = reg_dmabuf_mr;
    ops.rereg_mr = rereg_mr;
    ops.dereg_mr = dereg_mr;
    ops.alloc_mw = alloc_mw;
    ops.advise_mr = advise_mr;
    ops.dealloc_mw = dealloc_mw;
    ops.bind_mw = bind_mw;
    ops.create_cq = create_cq;
    ops.create_cq_ex = create_cq_ex;
    ops.query_rt_values = query_rt_values;
    ops.destroy_cq = destroy_cq;
    ops.poll_cq = poll_cq;
    ops.req_notify_cq = req_notify_cq;
    ops.resize_cq = resize_cq;
    ops.create_qp = create_qp;
    ops.create_qp_ex = create_qp_ex;
    ops.modify_qp = modify_qp;
    ops.query_qp = query_qp;
    ops.destroy_qp = destroy_qp;
    ops.post_send = post_send;
    ops.post_recv = post_recv;
    ops.create_srq = create_srq;
    ops.modify_srq = modify_srq;
    ops.query_srq = query_srq;
    ops.destroy_srq = destroy_srq;
    ops.post_srq_recv = post_srq_recv;
    ops.open_xrcd = open_xrcd;
    ops.open_qp = open_qp;
    ops.close_xrcd = close_xrcd;
    ops.create_srq_ex = create_srq_ex;
    ops.get_srq_num = get_srq_num;
    ops.create_ah = create_ah;
    ops.destroy_ah = destroy_ah;
    ops.attach_mcast = attach_mcast;
    ops.detach_mcast = detach_mcast;
    return ops;
}();

// The daemon's doorbell eventfd; 0 or an errno.
int fetch_doorbell(DaemonLink& link, int& doorbell_fd) {
    uroce_ctrl_hdr req{};
    req.op = UROCE_CTRL_DOORBELL;
    uroce_ctrl_handle reply{};
    doorbell_fd = -1;
    const int err = link.call(&req, sizeof req, &reply, sizeof reply, -1, &doorbell_fd);
    if (err == 0 && doorbell_fd < 0) {
        return EPROTO;  // DOORBELL must pass the eventfd
    }
    return err;
}

void release(Context* ctx) {
    delete ctx->watcher;  // joins its thread, which uses the link
    if (ctx->doorbell_fd >= 0) {
        ::close(ctx->doorbell_fd);
    }
    delete ctx->link;
    delete ctx->loss;
    // Closes cmd_fd and async_fd and drops the device reference.
    pabi::verbs_uninit_context(&ctx->vctx);
    std::free(ctx);
}

}  // namespace

::verbs_context* alloc_context(ibv_device* device, int cmd_fd, void* /*private_data*/) {
    // There is no kernel driver id for uroce; libibverbs only uses it to tag
    // kernel commands we never send.
    void* mem = pabi::_verbs_init_and_alloc_context(device, cmd_fd, sizeof(Context), nullptr, RDMA_DRIVER_UNKNOWN);
    if (mem == nullptr) {
        return nullptr;  // cmd_fd already closed
    }
    auto* ctx = static_cast<Context*>(mem);
    ctx->doorbell_fd = -1;
    ctx->link = new (std::nothrow) DaemonLink;
    ctx->loss = new (std::nothrow) DeviceLoss;
    ctx->watcher = new (std::nothrow) LossWatcher;
    char path[4096];
    int err = ctx->link == nullptr || ctx->loss == nullptr || ctx->watcher == nullptr ? ENOMEM : 0;
    if (err == 0 && !replace_cmd_fd(ctx->vctx.context)) {
        err = errno;
    }
    if (err == 0) {
        err = control_socket_path(device, path, sizeof path);
    }
    UniqueFd async_pipe;  // closed here unless the context takes it
    if (err == 0) {
        int async_fd = -1;
        err = ctx->link->open(path, async_fd);
        async_pipe.reset(async_fd);
    }
    if (err == 0) {
        err = fetch_doorbell(*ctx->link, ctx->doorbell_fd);
    }
    if (err != 0) {
        release(ctx);
        errno = err;
        return nullptr;
    }
    // ibv_open_device fails (ENOTTY) unless async_fd is set: with a kernel
    // it is the uverbs event file; here it is the daemon's pipe, whose
    // 16-byte records ibv_get_async_event reads.
    ctx->vctx.context.async_fd = async_pipe.release();
    ctx->vctx.context.num_comp_vectors = 1;
    pabi::verbs_set_ops(&ctx->vctx, &kContextOps);
    return &ctx->vctx;
}

void free_context(ibv_context* ibctx) {
    Context* ctx = to_context(ibctx);
    free_relaxed_pools(*ctx);
    release(ctx);
}

}  // namespace uroce::provider
