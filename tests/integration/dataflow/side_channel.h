/* The TCP connection two test programs use to exchange QP numbers, GIDs,
 * MR keys and verification requests, as ibv_rc_pingpong and perftest do.
 * Both ends run on the same host (namespaces of one machine), so messages are
 * fixed-size structs in host byte order. */
#ifndef UROCE_TEST_SIDE_CHANNEL_H
#define UROCE_TEST_SIDE_CHANNEL_H

#include <stddef.h>
#include <stdint.h>

/* The server: listens on `port` on every address, accepts one connection.
 * Returns the connected fd, or -1 (reason printed). */
int side_channel_accept(uint16_t port);

/* The client: connects to host:port, retrying for up to `seconds` while the
 * server is not listening yet. Returns the fd, or -1 (reason printed). */
int side_channel_connect(const char *host, uint16_t port, int seconds);

/* Sends or receives exactly len bytes. Return 0, or -1 (EOF or error). */
int side_channel_send(int fd, const void *buf, size_t len);
int side_channel_recv(int fd, void *buf, size_t len);

#endif
