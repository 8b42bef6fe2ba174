/* The victim of test_exec_attack.py: a program the test installs setuid
 * root, which an unprivileged attacker execs (docs/security.md). It fills a
 * buffer on its stack with a known byte, tells the attacker where it is
 * (stdout: "ADDR PID EUID"), waits until its stdin closes, and reports
 * whether the buffer is still what it wrote: "INTACT" (exit 0) or
 * "CHANGED" (exit 3). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SECRET_BYTE 0x5A
#define SECRET_BYTES 4096

int main(void) {
    volatile unsigned char secret[SECRET_BYTES];
    for (size_t i = 0; i < SECRET_BYTES; ++i) {
        secret[i] = SECRET_BYTE;
    }
    printf("%llx %ld %ld\n", (unsigned long long)(uintptr_t)secret, (long)getpid(), (long)geteuid());
    fflush(stdout);
    char sink[64];
    while (read(0, sink, sizeof sink) > 0) {
    }
    for (size_t i = 0; i < SECRET_BYTES; ++i) {
        if (secret[i] != SECRET_BYTE) {
            printf("CHANGED at byte %zu\n", i);
            return 3;
        }
    }
    printf("INTACT\n");
    return 0;
}
