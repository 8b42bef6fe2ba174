/*
 * Completion channels on a uroce device, through stock libibverbs under
 * `uroce exec` (which preloads liburoce-preload.so): the channel has a real
 * fd, a CQ can use it, an event written to the channel's notify end comes
 * back from ibv_get_cq_event() as that CQ, and destroying a channel still in
 * use is EBUSY.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "verbs_check.h"

static int finish(void) {
    printf("%d failure(s)\n", check_failures);
    return check_failures == 0 ? 0 : 1;
}

int main(void) {
    struct ibv_device **list = NULL;
    struct ibv_context *ctx = open_uroce(&list);
    struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
    check(ch != NULL, "ibv_create_comp_channel");
    if (ch == NULL) {
        return finish();
    }
    check(ch->fd > 2 && fcntl(ch->fd, F_GETFD) >= 0, "the channel has a real fd of its own");

    int (*notify_fd)(struct ibv_comp_channel *);
    *(void **)&notify_fd = dlsym(RTLD_DEFAULT, "uroce_comp_channel_notify_fd");
    check(notify_fd != NULL, "the preload library is loaded (uroce exec)");

    int marker = 42;
    struct ibv_cq *cq = ibv_create_cq(ctx, 16, &marker, ch, 0);
    check(cq != NULL, "ibv_create_cq with the channel");
    check(ibv_req_notify_cq(cq, 0) == 0, "ibv_req_notify_cq");
    check_ret(ibv_destroy_comp_channel(ch), EBUSY, "destroying a channel a CQ uses");

    if (notify_fd != NULL && cq != NULL) {
        const int wfd = notify_fd(ch);
        check(wfd >= 0, "the channel's notify end");
        uint64_t handle = (uint64_t)(uintptr_t)cq;
        check(write(wfd, &handle, sizeof(handle)) == (ssize_t)sizeof(handle), "deliver one event");
        struct ibv_cq *got = NULL;
        void *got_context = NULL;
        check(ibv_get_cq_event(ch, &got, &got_context) == 0, "ibv_get_cq_event");
        check(got == cq && got_context == &marker, "the event names the CQ and its context");
        ibv_ack_cq_events(cq, 1);
    }
    if (cq != NULL) {
        check(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
    }
    check(ibv_destroy_comp_channel(ch) == 0, "ibv_destroy_comp_channel");
    check(ibv_close_device(ctx) == 0, "ibv_close_device");
    ibv_free_device_list(list);
    return finish();
}
