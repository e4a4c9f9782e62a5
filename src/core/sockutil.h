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
/* Take one pending connection without waiting: a nonblocking fd (tcp:
 * TCP_NODELAY too), -EAGAIN when none is pending, or -errno. */
int zl_sock_take(int lfd, int tcp);
/* Whether a peer's first handshake message of need bytes is wholly
 * buffered on fd (peeked, nothing consumed): 1 yes, or the bytes there
 * already differ from magic (mlen bytes; the handshake then fails at
 * once); 0 not yet; -ECONNRESET the peer left. */
int zl_sock_ready(int fd, size_t need, const void *magic, size_t mlen);
/* Write / read exactly len bytes before the deadline.
 * 0, -ETIMEDOUT, -ECONNRESET (EOF), or -errno. */
int zl_write_full(int fd, const void *buf, size_t len, int64_t deadline);
int zl_read_full(int fd, void *buf, size_t len, int64_t deadline);
/* "tcp-style" URL of a bound socket: HOST:PORT into buf. 0 or -ENOSPC. */
int zl_sock_name(int fd, char *buf, size_t cap);

/* ---- Unix-socket fd passing and memfds (shm:// and the shm server) ---- */

/* Send one SOCK_SEQPACKET message with nfds (0..8) fds over SCM_RIGHTS,
 * without blocking. 0, or -EPROTO if it did not go out whole. */
int zl_send_fds(int sock, const void *buf, size_t len, const int *fds, int nfds);
/* Receive one message before the deadline into buf; *got gets its size.
 * Up to maxfds (<= 8) fds land in fds[] (*nfds of them, O_CLOEXEC); any
 * extra are closed. 0, -ETIMEDOUT, -ECONNRESET (EOF), -EPROTO (message or
 * fds truncated), or -errno. On error no fd is left open. */
int zl_recv_fds(int sock, void *buf, size_t cap, size_t *got, int *fds, int maxfds,
		int *nfds, int64_t deadline);
/* The uid rule of shm and unix, root included: 0 if the peer of the unix
 * socket runs as our effective uid or allow_other is set, else -EPERM (and
 * a log line naming who); *pid gets the peer's pid. Or -errno. */
int zl_check_peer_uid(int sock, int allow_other, const char *who, int32_t *pid);
/* A memfd of size bytes sealed against shrinking and growing. fd or -errno. */
int zl_memfd_sealed(const char *name, size_t size);
/* 0 if fd is a memfd of exactly size bytes that can no longer shrink (so
 * mapping it can never fault), else -EPROTO. */
int zl_memfd_check(int fd, size_t size);

#endif
