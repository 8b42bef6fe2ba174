/* One client creating CQs until the daemon says no (docs/security.md,
 * "Denial of service"): ibv_create_cq up to COUNT times (default 70000),
 * stopping at the first failure. Prints "created N; errno E (NAME)" (or
 * "created N; no failure"), then "holding" and keeps its CQs until stdin
 * closes, so that the test can check another client meanwhile. Exit status:
 * 0 when the first failure was ENOMEM or EDQUOT (what a kernel driver or
 * the rdma cgroup answers at a limit), 1 otherwise. */
#include <stdlib.h>
#include <string.h>

#include "verbs_check.h"

int main(int argc, char** argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const long count = argc > 1 ? strtol(argv[1], NULL, 10) : 70000;
    struct ibv_device** list;
    struct ibv_context* ctx = open_uroce(&list);
    struct ibv_cq** cqs = calloc((size_t)count, sizeof(*cqs));
    if (cqs == NULL) {
        return 1;
    }
    long made = 0;
    int err = 0;
    while (made < count) {
        errno = 0;
        cqs[made] = ibv_create_cq(ctx, 1, NULL, NULL, 0);
        if (cqs[made] == NULL) {
            err = errno;
            break;
        }
        ++made;
    }
    if (err != 0) {
        printf("created %ld; errno %d (%s)\n", made, err, strerrorname_np(err) ? strerrorname_np(err) : "?");
    } else {
        printf("created %ld; no failure\n", made);
    }
    printf("holding\n");
    char line[16];
    while (fgets(line, sizeof line, stdin) != NULL) {
    }
    for (long i = 0; i < made; ++i) {
        ibv_destroy_cq(cqs[i]);
    }
    free(cqs);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    return err == ENOMEM || err == EDQUOT ? 0 : 1;
}
