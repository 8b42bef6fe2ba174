/*
 * liburoce-preload.so, part two: the rdma_cm character device
 * /dev/infiniband/rdma_cm ("ucma", ABI 4) without kernel RDMA.
 *
 * Stock librdmacm opens that path, checks with fstat() that it is a
 * character device, and then only write()s commands to it (rdma_user_cm.h),
 * reading answers from the pointers inside them (docs/rdmacm-device.md). Here:
 *   open*()  of exactly that path makes an event channel: one end of an
 *            AF_UNIX SOCK_SEQPACKET socketpair, whose other end goes to
 *            uroced (CM_OPEN_CHANNEL). uroced writes one byte into it per
 *            event queued, so poll/epoll/O_NONBLOCK behave as on the kernel
 *            device, and it sees the program's last close as a hang-up.
 *   fstat*() of a channel reports a character device.
 *   write()  of a channel forwards the command (CM_COMMAND) and copies the
 *            answer to the command's response pointer; GET_EVENT reads one
 *            doorbell byte (blocking as the fd's flags say) from its own
 *            duplicate of the fd, then fetches the event (CM_GET_EVENT).
 *   close()  forgets the channel.
 * Commands travel on one control connection per process (not the channel
 * socket a blocked GET_EVENT reads), under a mutex; a forked child makes
 * its own. The daemon is the first uroce device under $SYSFS_PATH.
 */
#undef _FILE_OFFSET_BITS /* fstat and fstat64 are defined below under their own names */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <rdma/rdma_user_cm.h>

#include "abi/control.h"

#define EXPORT __attribute__((visibility("default")))

static const char kUcmaPath[] = "/dev/infiniband/rdma_cm";
/* The misc device numbers the kernel gives rdma_cm are dynamic; any
 * character device will do for librdmacm (it compares st_rdev only with
 * what netlink reported, and under uroce exec RDMA netlink fails:
 * rdma_netlink_preload.c). */
#define UCMA_MAJOR 10
#define UCMA_MINOR 58
/* Channel fds this library can track: fd numbers below this. */
#define MAX_CHANNEL_FD 65536
/* A daemon that takes this long to answer is stuck: fail, never hang. */
#define REPLY_TIMEOUT_S 30
/* GET_EVENT's smallest accepted answer (ucma.c: the event without its
 * reserved word and ECE). */
#define GET_EVENT_MIN_OUT 324u

/* channel id + 1 by fd number; 0: not a channel. */
static uint32_t g_channel_of_fd[MAX_CHANNEL_FD];

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_ctl_fd = -1;
static pid_t g_ctl_pid = 0;
static uint32_t g_seq = 0;

/* ---- the real functions ---- */

#define REAL(ret, name, params)                                   \
    static ret(*real_##name) params;                              \
    static ret(*get_##name(void)) params {                        \
        if (real_##name == NULL) {                                \
            *(void **)&real_##name = dlsym(RTLD_NEXT, #name);     \
        }                                                         \
        return real_##name;                                       \
    }
REAL(int, open, (const char *, int, ...))
REAL(int, open64, (const char *, int, ...))
REAL(int, openat, (int, const char *, int, ...))
REAL(int, openat64, (int, const char *, int, ...))
REAL(int, __open_2, (const char *, int))
REAL(int, __open64_2, (const char *, int))
REAL(int, __openat_2, (int, const char *, int))
REAL(int, __openat64_2, (int, const char *, int))
REAL(ssize_t, write, (int, const void *, size_t))
REAL(int, close, (int))
REAL(int, fstat, (int, struct stat *))
REAL(int, fstat64, (int, struct stat64 *))
REAL(int, __fxstat, (int, int, struct stat *))
REAL(int, __fxstat64, (int, int, struct stat64 *))

static int real_close_fd(int fd) {
    int (*f)(int) = get_close();
    return f != NULL ? f(fd) : -1;
}

static uint32_t channel_of(int fd) {
    if (fd < 0 || fd >= MAX_CHANNEL_FD) {
        return 0;
    }
    return __atomic_load_n(&g_channel_of_fd[fd], __ATOMIC_ACQUIRE);
}

/* ---- the control connection ---- */

/* The first uroce device's control socket, from $SYSFS_PATH (uroce exec). */
static int find_socket_path(char *out, size_t size) {
    const char *sysfs = getenv("SYSFS_PATH");
    if (sysfs == NULL || *sysfs == '\0') {
        return ENODEV;
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/class/infiniband", sysfs);
    DIR *d = opendir(dir);
    if (d == NULL) {
        return ENODEV;
    }
    int err = ENODEV;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && err != 0) {
        if (e->d_name[0] == '.') {
            continue;
        }
        char file[PATH_MAX + 320]; /* the directory, a d_name (<= 255) and the file name */
        snprintf(file, sizeof file, "%s/%s/uroce_control_socket", dir, e->d_name);
        FILE *f = fopen(file, "re");
        if (f == NULL) {
            continue;
        }
        if (fgets(out, (int)size, f) != NULL) {
            out[strcspn(out, "\n")] = '\0';
            err = out[0] != '\0' ? 0 : ENODEV;
        }
        fclose(f);
    }
    closedir(d);
    return err;
}

/* Connects if not connected in this process. Called with g_lock held. */
static int ensure_connected(void) {
    const pid_t pid = getpid();
    if (g_ctl_fd >= 0 && g_ctl_pid == pid) {
        return 0;
    }
    if (g_ctl_fd >= 0) {
        real_close_fd(g_ctl_fd); /* the parent's connection: leave it to the parent */
        g_ctl_fd = -1;
    }
    char path[PATH_MAX];
    int err = find_socket_path(path, sizeof path);
    if (err != 0) {
        return err;
    }
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof addr.sun_path) {
        return ENAMETOOLONG;
    }
    strcpy(addr.sun_path, path);
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return errno;
    }
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        err = errno;
        real_close_fd(fd);
        return err == EACCES ? EACCES : ENODEV;
    }
    struct timeval tv = {REPLY_TIMEOUT_S, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    g_ctl_fd = fd;
    g_ctl_pid = pid;
    return 0;
}

/* One request and its reply; `send_fd` (>= 0) travels with the request.
 * Returns the reply's status, or an errno for transport failures. */
static int call(void *req, size_t req_size, void *reply, size_t reply_size, int send_fd) {
    pthread_mutex_lock(&g_lock);
    int err = ensure_connected();
    if (err != 0) {
        pthread_mutex_unlock(&g_lock);
        return err;
    }
    struct uroce_ctrl_hdr *h = req;
    h->magic = UROCE_CTRL_MAGIC;
    h->version = UROCE_CTRL_VERSION;
    h->length = (uint32_t)req_size;
    h->seq = ++g_seq;
    h->status = 0;
    struct iovec iov = {req, req_size};
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int))];
    } control;
    if (send_fd >= 0) {
        mh.msg_control = control.buf;
        mh.msg_controllen = sizeof control.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &send_fd, sizeof(int));
    }
    ssize_t n;
    do {
        n = sendmsg(g_ctl_fd, &mh, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n == (ssize_t)req_size) {
        do {
            n = recv(g_ctl_fd, reply, reply_size, 0);
        } while (n < 0 && errno == EINTR);
    } else {
        n = -1;
    }
    const struct uroce_ctrl_hdr *r = reply;
    if (n < (ssize_t)sizeof(*r) || r->magic != UROCE_CTRL_MAGIC || r->seq != h->seq || r->op != h->op) {
        /* No answer, or not ours: this connection cannot be trusted again. */
        real_close_fd(g_ctl_fd);
        g_ctl_fd = -1;
        pthread_mutex_unlock(&g_lock);
        return ENODEV;
    }
    err = r->status;
    pthread_mutex_unlock(&g_lock);
    return err;
}

/* ---- the device ---- */

static int ucma_open(int flags) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        return -1;
    }
    if (sv[0] >= MAX_CHANNEL_FD) {
        real_close_fd(sv[0]);
        real_close_fd(sv[1]);
        errno = EMFILE;
        return -1;
    }
    struct uroce_ctrl_hdr req;
    memset(&req, 0, sizeof req);
    req.op = UROCE_CTRL_CM_OPEN_CHANNEL;
    struct uroce_ctrl_handle reply;
    memset(&reply, 0, sizeof reply);
    const int err = call(&req, sizeof req, &reply, sizeof reply, sv[1]);
    real_close_fd(sv[1]);
    if (err != 0) {
        real_close_fd(sv[0]);
        errno = err;
        return -1;
    }
    if ((flags & O_CLOEXEC) == 0) {
        fcntl(sv[0], F_SETFD, 0);
    }
    if ((flags & O_NONBLOCK) != 0) {
        fcntl(sv[0], F_SETFL, O_NONBLOCK);
    }
    __atomic_store_n(&g_channel_of_fd[sv[0]], reply.handle + 1, __ATOMIC_RELEASE);
    return sv[0];
}

static int is_ucma_path(int dirfd, const char *path) {
    (void)dirfd; /* only the absolute path is the device */
    return path != NULL && strcmp(path, kUcmaPath) == 0;
}

/* Where a command's answer goes: its `response` field (rdma_user_cm.h). */
static void *response_pointer(uint32_t cmd, const uint8_t *body, size_t body_len) {
    const size_t at = cmd == RDMA_USER_CM_CMD_CREATE_ID ? 8 : 0;
    uint64_t p = 0;
    if (body_len >= at + sizeof p) {
        memcpy(&p, body + at, sizeof p);
    }
    return (void *)(uintptr_t)p;
}

/* GET_EVENT's loop on `held`, the channel's socket: a doorbell byte, then
 * the event, until one is not purged. */
static ssize_t wait_for_event(int held, uint32_t channel, uint32_t out, void *response, size_t len) {
    for (;;) {
        uint8_t bell;
        const ssize_t n = recv(held, &bell, 1, 0); /* blocks unless the fd is O_NONBLOCK */
        if (n < 0) {
            return -1; /* EAGAIN, EINTR as the kernel's */
        }
        if (n == 0) {
            errno = ENODEV; /* the daemon has gone */
            return -1;
        }
        struct uroce_ctrl_handle req;
        memset(&req, 0, sizeof req);
        req.hdr.op = UROCE_CTRL_CM_GET_EVENT;
        req.handle = channel;
        struct uroce_ctrl_cm_event reply;
        const int err = call(&req, sizeof req, &reply, sizeof reply, -1);
        if (err == ENOENT) {
            continue; /* purged after its doorbell rang: wait for the next */
        }
        if (err != 0) {
            errno = err;
            return -1;
        }
        const size_t copy = out < UROCE_CM_EVENT_BYTES ? out : UROCE_CM_EVENT_BYTES;
        memcpy(response, reply.event, copy);
        return (ssize_t)len;
    }
}

static ssize_t ucma_get_event(int fd, uint32_t channel, const struct rdma_ucm_cmd_hdr *hdr, const uint8_t *body,
                              size_t body_len, size_t len) {
    if (hdr->out < GET_EVENT_MIN_OUT) {
        errno = ENOSPC;
        return -1;
    }
    void *response = response_pointer(hdr->cmd, body, body_len);
    /* The wait holds its own reference to the channel, as the kernel's
     * write() holds the file: another thread closing the fd number (rping's
     * main destroys its event channel while its cm thread still waits)
     * leaves the wait blocked, never makes its next recv() fail with EBADF
     * after a purged event's doorbell. */
    const int held = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (held < 0 && errno != EMFILE && errno != ENFILE) {
        return -1; /* EBADF: closed before the write began, as the kernel's */
    }
    if (held < 0) {
        /* No fd to spare: wait on the program's own (a close() overtaking
         * this wait then ends it with EBADF). */
        return wait_for_event(fd, channel, hdr->out, response, len);
    }
    const ssize_t r = wait_for_event(held, channel, hdr->out, response, len);
    const int saved = errno;
    real_close_fd(held);
    errno = saved;
    return r;
}

/* SET_OPTION(RDMA_OPTION_IB_PATH) carries n x struct ib_path_rec_data; the
 * kernel (ucma.c ucma_set_ib_path) takes the first entry whose flags are
 * exactly GMP | PRIMARY | BIDIRECTIONAL. Only that entry travels (at most
 * UROCE_CM_OPTION_MAX bytes); none (no such entry, or a length that is not
 * a whole number of entries) makes the daemon answer EINVAL. */
_Static_assert(sizeof(struct ib_path_rec_data) <= UROCE_CM_OPTION_MAX, "one path entry travels");

static uint16_t primary_path_entry(const struct rdma_ucm_set_option *opt, uint8_t *out)
{
    const uint32_t flags = IB_PATH_GMP | IB_PATH_PRIMARY | IB_PATH_BIDIRECTIONAL;
    const size_t entry = sizeof(struct ib_path_rec_data);
    if (opt->optlen == 0 || opt->optlen % entry != 0) {
        return 0;
    }
    const uint8_t *records = (const uint8_t *)(uintptr_t)opt->optval;
    for (size_t at = 0; at < opt->optlen; at += entry) {
        struct ib_path_rec_data rec;
        memcpy(&rec, records + at, entry);
        if (rec.flags == flags) {
            memcpy(out, &rec, entry);
            return (uint16_t)entry;
        }
    }
    return 0;
}

static ssize_t ucma_write(int fd, uint32_t channel, const void *buf, size_t len) {
    struct rdma_ucm_cmd_hdr hdr;
    /* ucma_write's checks, before anything reaches the daemon. */
    if (len < sizeof hdr) {
        errno = EINVAL;
        return -1;
    }
    memcpy(&hdr, buf, sizeof hdr);
    if (hdr.cmd > RDMA_USER_CM_CMD_JOIN_MCAST || hdr.in + sizeof hdr > len) {
        errno = EINVAL;
        return -1;
    }
    const uint8_t *body = (const uint8_t *)buf + sizeof hdr;
    const size_t body_len = len - sizeof hdr;
    if (hdr.cmd == RDMA_USER_CM_CMD_GET_EVENT) {
        return ucma_get_event(fd, channel, &hdr, body, body_len, len);
    }
    static __thread struct uroce_ctrl_cm_command req;
    static __thread struct uroce_ctrl_cm_answer reply;
    memset(&req, 0, sizeof req);
    req.hdr.op = UROCE_CTRL_CM_COMMAND;
    req.channel = channel;
    req.command_length = (uint16_t)(len < UROCE_CM_COMMAND_MAX ? len : UROCE_CM_COMMAND_MAX);
    memcpy(req.command, buf, req.command_length);
    if (hdr.cmd == RDMA_USER_CM_CMD_SET_OPTION && body_len >= sizeof(struct rdma_ucm_set_option)) {
        struct rdma_ucm_set_option opt;
        memcpy(&opt, body, sizeof opt);
        if (opt.optlen != 0 && opt.optval == 0) {
            errno = EFAULT;
            return -1;
        }
        if (opt.level == RDMA_OPTION_IB && opt.optname == RDMA_OPTION_IB_PATH) {
            req.option_length = primary_path_entry(&opt, req.option);
        } else {
            const uint32_t n = opt.optlen < UROCE_CM_OPTION_MAX ? opt.optlen : UROCE_CM_OPTION_MAX;
            memcpy(req.option, (const void *)(uintptr_t)opt.optval, n);
            req.option_length = (uint16_t)n;
        }
    }
    if (hdr.cmd == RDMA_USER_CM_CMD_MIGRATE_ID && body_len >= sizeof(struct rdma_ucm_migrate_id)) {
        /* The old channel by its fd number (ucma.c: not an fd: ENOENT,
         * not the ucma device: EINVAL); the daemon knows channels by id. */
        struct rdma_ucm_migrate_id m;
        memcpy(&m, body, sizeof m);
        const uint32_t old_channel = channel_of((int)m.fd);
        if (old_channel == 0) {
            errno = fcntl((int)m.fd, F_GETFD) < 0 ? ENOENT : EINVAL;
            return -1;
        }
        m.fd = old_channel - 1;
        memcpy(req.command + sizeof hdr, &m, sizeof m);
    }
    memset(&reply, 0, sizeof reply);
    const int err = call(&req, sizeof req, &reply, sizeof reply, -1);
    if (err != 0) {
        errno = err;
        return -1;
    }
    if (reply.answer_length != 0) {
        void *response = response_pointer(hdr.cmd, body, body_len);
        const size_t copy = reply.answer_length < hdr.out ? reply.answer_length : hdr.out;
        if (response == NULL) {
            errno = EFAULT;
            return -1;
        }
        memcpy(response, reply.answer, copy);
    }
    return (ssize_t)len;
}

static void fill_chardev(struct stat64 *st) {
    memset(st, 0, sizeof *st);
    st->st_mode = S_IFCHR | 0666;
    st->st_nlink = 1;
    st->st_rdev = makedev(UCMA_MAJOR, UCMA_MINOR);
    st->st_blksize = 4096;
}

/* ---- the interposed functions ---- */

/* The mode argument exists only with O_CREAT or O_TMPFILE (glibc's
 * __OPEN_NEEDS_MODE; O_TMPFILE includes O_DIRECTORY's bit). */
#define OPEN_MODE(flags, mode)                                                      \
    do {                                                                            \
        if (((flags) & O_CREAT) != 0 || ((flags) & O_TMPFILE) == O_TMPFILE) {      \
            va_list ap;                                                             \
            va_start(ap, flags);                                                    \
            mode = va_arg(ap, mode_t);                                              \
            va_end(ap);                                                             \
        }                                                                           \
    } while (0)

EXPORT int open(const char *path, int flags, ...) {
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    if (is_ucma_path(AT_FDCWD, path)) {
        return ucma_open(flags);
    }
    return get_open()(path, flags, mode);
}

EXPORT int open64(const char *path, int flags, ...) {
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    if (is_ucma_path(AT_FDCWD, path)) {
        return ucma_open(flags);
    }
    return get_open64()(path, flags, mode);
}

EXPORT int openat(int dirfd, const char *path, int flags, ...) {
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    if (is_ucma_path(dirfd, path)) {
        return ucma_open(flags);
    }
    return get_openat()(dirfd, path, flags, mode);
}

EXPORT int openat64(int dirfd, const char *path, int flags, ...) {
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    if (is_ucma_path(dirfd, path)) {
        return ucma_open(flags);
    }
    return get_openat64()(dirfd, path, flags, mode);
}

EXPORT int __open_2(const char *path, int flags) {
    return is_ucma_path(AT_FDCWD, path) ? ucma_open(flags) : get___open_2()(path, flags);
}

EXPORT int __open64_2(const char *path, int flags) {
    return is_ucma_path(AT_FDCWD, path) ? ucma_open(flags) : get___open64_2()(path, flags);
}

EXPORT int __openat_2(int dirfd, const char *path, int flags) {
    return is_ucma_path(dirfd, path) ? ucma_open(flags) : get___openat_2()(dirfd, path, flags);
}

EXPORT int __openat64_2(int dirfd, const char *path, int flags) {
    return is_ucma_path(dirfd, path) ? ucma_open(flags) : get___openat64_2()(dirfd, path, flags);
}

EXPORT ssize_t write(int fd, const void *buf, size_t len) {
    const uint32_t channel = channel_of(fd);
    if (channel != 0) {
        return ucma_write(fd, channel - 1, buf, len);
    }
    return get_write()(fd, buf, len);
}

EXPORT int close(int fd) {
    if (channel_of(fd) != 0) {
        __atomic_store_n(&g_channel_of_fd[fd], 0, __ATOMIC_RELEASE);
    }
    return real_close_fd(fd);
}

EXPORT int fstat(int fd, struct stat *st) {
    if (channel_of(fd) != 0) {
        fill_chardev((struct stat64 *)st);
        return 0;
    }
    return get_fstat()(fd, st);
}

EXPORT int fstat64(int fd, struct stat64 *st) {
    if (channel_of(fd) != 0) {
        fill_chardev(st);
        return 0;
    }
    return get_fstat64()(fd, st);
}

EXPORT int __fxstat(int ver, int fd, struct stat *st) {
    if (channel_of(fd) != 0) {
        fill_chardev((struct stat64 *)st);
        return 0;
    }
    return get___fxstat()(ver, fd, st);
}

EXPORT int __fxstat64(int ver, int fd, struct stat64 *st) {
    if (channel_of(fd) != 0) {
        fill_chardev(st);
        return 0;
    }
    return get___fxstat64()(ver, fd, st);
}
