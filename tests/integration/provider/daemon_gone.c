/* What an application sees when uroced stops under it: IBV_EVENT_DEVICE_FATAL
 * on the async fd, then every verb fails with an errno (EIO), none hangs.
 * Prints "ready" once its objects exist, then waits for the event; the test
 * stops the daemon meanwhile. Exit status: the number of failures. */
#include <poll.h>

#include "verbs_check.h"

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct ibv_device** list;
    struct ibv_context* ctx = open_uroce(&list);
    struct ibv_pd* pd = ibv_alloc_pd(ctx);
    check(pd != NULL, "ibv_alloc_pd while the daemon runs");
    printf("ready\n");

    struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN, .revents = 0};
    check(poll(&p, 1, 60000) == 1, "the async fd becomes readable");
    struct ibv_async_event ev;
    check(ibv_get_async_event(ctx, &ev) == 0 && ev.event_type == IBV_EVENT_DEVICE_FATAL,
          "ibv_get_async_event: IBV_EVENT_DEVICE_FATAL");
    ibv_ack_async_event(&ev);

    errno = 0;
    check_ptr(ibv_alloc_pd(ctx), EIO, "ibv_alloc_pd after the daemon stopped");
    struct ibv_port_attr pa;
    check_ret(ibv_query_port(ctx, 1, &pa), EIO, "ibv_query_port after the daemon stopped");
    check_ptr(ibv_create_cq(ctx, 4, NULL, NULL, 0), EIO, "ibv_create_cq after the daemon stopped");
    check_ret(ibv_dealloc_pd(pd), EIO, "ibv_dealloc_pd after the daemon stopped");
    check_ret(ibv_close_device(ctx), 0, "ibv_close_device");
    ibv_free_device_list(list);
    printf("%d failure(s)\n", check_failures);
    return check_failures;
}
