/* SPDX-License-Identifier: MIT */
/* TCP helpers with deadlines, for side channels (rdma:// setup). */
#ifndef ZL_SOCKUTIL_H
#define ZL_SOCKUTIL_H

#include <stddef.h>
#include <stdint.h>

/* Listen on host:port (port "0" = ephemeral). Returns fd or -errno. */
int zl_tcp_listen(const char *host, const char *port);
/* Connect within the deadline (absolute zl_now_us time). fd or -errno
 * (-ECONNREFUSED, -ETIMEDOUT). The socket is nonblocking, TCP_NODELAY. */
int zl_tcp_connect(const char *host, const char *port, int64_t deadline);
/* Accept one connection within the deadline; fd or -errno. */
int zl_tcp_accept(int lfd, int64_t deadline);
/* Write / read exactly len bytes before the deadline.
 * 0, -ETIMEDOUT, -ECONNRESET (EOF), or -errno. */
int zl_write_full(int fd, const void *buf, size_t len, int64_t deadline);
int zl_read_full(int fd, void *buf, size_t len, int64_t deadline);
/* "tcp-style" URL of a bound socket: HOST:PORT into buf. 0 or -ENOSPC. */
int zl_sock_name(int fd, char *buf, size_t cap);

#endif
