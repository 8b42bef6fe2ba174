/*
 * liburoce-preload.so: real completion channels for uroce devices.
 *
 * Stock ibv_create_comp_channel() is not a provider op: it sends a command to
 * the kernel on the command fd and reads the new channel's fd from the reply.
 * Without kernel RDMA that cannot work (docs/provider.md). `uroce exec` puts
 * this library in LD_PRELOAD; for contexts of uroce devices it makes the
 * channel from a pipe instead. ibv_get_cq_event() only reads 8-byte CQ
 * handles (the struct ibv_cq pointer) from channel->fd, so whoever holds the
 * write end can deliver completion events: the provider fetches it with
 * uroce_comp_channel_notify_fd() and hands it to the daemon. Contexts of any
 * other device go to the real libibverbs functions.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define UROCE_CHANNEL_MAGIC 0x55524343u /* "URCC" */

struct uroce_channel {
    struct ibv_comp_channel channel; /* first: what the application sees */
    uint32_t magic;
    int notify_fd;                   /* write end of the pipe */
};

__attribute__((visibility("default"))) int uroce_comp_channel_notify_fd(struct ibv_comp_channel *channel);

static int is_uroce(const struct ibv_context *context) {
    return context != NULL && context->device != NULL && strncmp(context->device->name, "uroce", 5) == 0;
}

static void *real(const char *name) { return dlsym(RTLD_NEXT, name); }

__attribute__((visibility("default"))) struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context) {
    if (!is_uroce(context)) {
        struct ibv_comp_channel *(*next)(struct ibv_context *);
        *(void **)&next = real("ibv_create_comp_channel"); /* POSIX's way to take a function from dlsym */
        if (next == NULL) {
            errno = ENOSYS;
            return NULL;
        }
        return next(context);
    }
    struct uroce_channel *ch = calloc(1, sizeof(*ch));
    if (ch == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        int err = errno;
        free(ch);
        errno = err;
        return NULL;
    }
    ch->channel.context = context;
    ch->channel.fd = fds[0];
    ch->channel.refcnt = 0;
    ch->magic = UROCE_CHANNEL_MAGIC;
    ch->notify_fd = fds[1];
    return &ch->channel;
}

__attribute__((visibility("default"))) int ibv_destroy_comp_channel(struct ibv_comp_channel *channel) {
    if (channel == NULL || !is_uroce(channel->context)) {
        int (*next)(struct ibv_comp_channel *);
        *(void **)&next = real("ibv_destroy_comp_channel");
        return next != NULL ? next(channel) : ENOSYS;
    }
    struct uroce_channel *ch = (struct uroce_channel *)channel;
    if (ch->magic != UROCE_CHANNEL_MAGIC) {
        return EINVAL;
    }
    /* libibverbs counts the CQs using a channel under the context mutex. */
    pthread_mutex_lock(&channel->context->mutex);
    int busy = channel->refcnt != 0;
    pthread_mutex_unlock(&channel->context->mutex);
    if (busy) {
        return EBUSY;
    }
    close(ch->channel.fd);
    close(ch->notify_fd);
    ch->magic = 0;
    free(ch);
    return 0;
}

int uroce_comp_channel_notify_fd(struct ibv_comp_channel *channel) {
    if (channel == NULL || !is_uroce(channel->context)) {
        return -1;
    }
    const struct uroce_channel *ch = (const struct uroce_channel *)channel;
    return ch->magic == UROCE_CHANNEL_MAGIC ? ch->notify_fd : -1;
}
