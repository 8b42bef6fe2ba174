#include "side_channel.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Small request/reply messages: no Nagle delay. */
static void no_delay(int fd) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int side_channel_accept(uint16_t port) {
    const int lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0) {
        perror("socket");
        return -1;
    }
    const int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(lfd, 1) != 0) {
        fprintf(stderr, "cannot listen on TCP port %u: %s\n", port, strerror(errno));
        close(lfd);
        return -1;
    }
    const int fd = accept(lfd, NULL, NULL);
    if (fd < 0) {
        perror("accept");
    } else {
        no_delay(fd);
    }
    close(lfd);
    return fd;
}

int side_channel_connect(const char *host, uint16_t port, int seconds) {
    char service[8];
    snprintf(service, sizeof service, "%u", port);
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    const int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", host, gai_strerror(rc));
        return -1;
    }
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        const int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
            freeaddrinfo(res);
            no_delay(fd);
            return fd;
        }
        const int err = errno;
        if (fd >= 0) {
            close(fd);
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (err != ECONNREFUSED || now.tv_sec - start.tv_sec >= seconds) {
            fprintf(stderr, "cannot connect to %s:%u: %s\n", host, port, strerror(err));
            freeaddrinfo(res);
            return -1;
        }
        const struct timespec pause = {.tv_nsec = 50 * 1000 * 1000};  // the server is still starting
        nanosleep(&pause, NULL);
    }
}

int side_channel_send(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        const ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int side_channel_recv(int fd, void *buf, size_t len) {
    char *p = buf;
    while (len > 0) {
        const ssize_t n = recv(fd, p, len, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}
