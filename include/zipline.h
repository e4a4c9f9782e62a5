/* SPDX-License-Identifier: MIT */
/*
 * zipline: microsecond messaging between processes and machines.
 *
 * One API over exchangeable transports:
 *   shm://NAME        same host; rings in memfd memory, rendezvous on an
 *                     abstract Unix socket "\0zipline/NAME"
 *   tcp://HOST:PORT   length-prefixed frames over TCP (TCP_NODELAY)
 *   unix:///path      length-prefixed frames over a Unix stream socket
 *   rdma://HOST:PORT  the ring protocol over RDMA WRITEs on RC queue pairs
 *                     (libibverbs), set up over a TCP side channel;
 *                     options dev=, port=, gid_index=, order=auto|single|split
 *
 * Conventions (as liburing): every call returns 0 (or a non-negative value
 * where stated) on success and a negative errno on failure. zl_strerror()
 * turns a return value into text. No call aborts, exits or prints; logging
 * goes through zl_set_log().
 *
 * Timeouts are in microseconds: 0 polls once, -1 waits forever, any other
 * value bounds the wait. A wait spins for opts.spin_us first and then sleeps
 * until the peer wakes it (eventfd on shm, the socket on tcp/unix).
 *
 * Thread safety:
 *   - zl_listener: zl_accept may be called from one thread at a time;
 *     zl_listener_close must not race with zl_accept.
 *   - zl_channel: a channel has one send side and one receive side. One
 *     thread may send while another receives on the same channel; two threads
 *     must not send (or receive) on one channel concurrently. zl_close must
 *     not race with any other call on the channel.
 *   - Distinct objects are independent; the library has no global locks on
 *     the data path. zl_set_log and zl_opts_init are thread-safe.
 */
#ifndef ZIPLINE_H
#define ZIPLINE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZL_VERSION_MAJOR 0
#define ZL_VERSION_MINOR 1
#define ZL_VERSION_PATCH 0
#define ZL_VERSION_NUM \
	(ZL_VERSION_MAJOR * 10000 + ZL_VERSION_MINOR * 100 + ZL_VERSION_PATCH)
#define ZL_VERSION_STRING "0.1.0"

/* Wire protocol version, checked in every handshake. */
#define ZL_PROTO_VERSION 1

/* Returns ZL_VERSION_NUM of the library actually linked. */
int zl_version(void);

/* Text for a return value: zl_strerror(-ETIMEDOUT), zl_strerror(0).
 * Never returns NULL. Thread-safe (returns static strings). */
const char *zl_strerror(int err);

/* ---- logging ---------------------------------------------------------- */

enum zl_log_level {
	ZL_LOG_ERROR = 0,
	ZL_LOG_WARN = 1,
	ZL_LOG_INFO = 2,
	ZL_LOG_DEBUG = 3,
};

typedef void (*zl_log_fn)(enum zl_log_level level, const char *msg, void *arg);

/* Route library log messages at or below `level` to fn (NULL: discard).
 * Default: no callback; if the environment variable ZL_LOG is set to a
 * level number or name (error, warn, info, debug), messages go to stderr. */
void zl_set_log(zl_log_fn fn, void *arg, enum zl_log_level level);

/* ---- options ---------------------------------------------------------- */

/* Options for listeners and channels. Initialise with zl_opts_init(); URL
 * query parameters (shm://x?ring=65536&spin_us=0) override these fields. */
struct zl_opts {
	uint32_t size;        /* sizeof(struct zl_opts), set by zl_opts_init */
	uint32_t ring_size;   /* bytes per direction, power of two,
	                         4 KiB .. 1 GiB; default 1 MiB  (ring=) */
	uint64_t max_msg;     /* largest message accepted, default 64 MiB
	                         (max_msg=) */
	int64_t spin_us;      /* how long a wait spins before sleeping,
	                         default 50 us; -1 spins for the whole
	                         timeout (spin_us=) */
	int busy_poll;        /* tcp/unix: spin on nonblocking reads for
	                         spin_us before blocking (busy_poll=1) */
	int allow_other_uid;  /* shm: accept peers of another uid */
	int64_t handshake_timeout_us; /* default 5 s */
	uint32_t rpos_every;  /* receiver publishes its read position after
	                         this many consumed bytes; 0: ring_size/4 */
	uint32_t reserved[8];
};

/* Fill *o with defaults. */
void zl_opts_init(struct zl_opts *o);

/* ---- endpoints -------------------------------------------------------- */

typedef struct zl_listener zl_listener;
typedef struct zl_channel zl_channel;

/*
 * Listen on url. opts may be NULL (defaults).
 * Returns 0 and *out, or
 *   -EINVAL          malformed URL or option
 *   -EPROTONOSUPPORT unknown scheme, or a transport not built in
 *   -EADDRINUSE      the name or address is taken
 *   -ENOMEM          out of memory
 *   other -errno     from socket(2), bind(2), listen(2)
 */
int zl_listen(const char *url, const struct zl_opts *opts, zl_listener **out);

/*
 * Wait up to timeout_us for a peer and complete the handshake.
 * Returns 0 and *out, or
 *   -ETIMEDOUT    nobody connected in time (-EAGAIN when timeout_us == 0),
 *                 or a peer connected but stalled in the handshake for
 *                 opts.handshake_timeout_us (which may run past timeout_us)
 *   -EPROTO       the peer's handshake was malformed or incompatible
 *                 (bad magic, version, ring size); that peer is dropped
 *   -EPERM        shm: the peer runs as another uid
 *   -ENOMEM, other -errno
 */
int zl_accept(zl_listener *l, int64_t timeout_us, zl_channel **out);

/* The URL peers can connect to, with the port actually bound (tcp://...:0
 * listens on an ephemeral port). Returns 0, -EINVAL, or -ENOSPC if cap is
 * too small. */
int zl_listener_url(const zl_listener *l, char *buf, size_t cap);

/* File descriptor that polls readable when a connection is pending. */
int zl_listener_fd(const zl_listener *l);

/* Close the listener; established channels are unaffected. NULL is a no-op. */
void zl_listener_close(zl_listener *l);

/*
 * Connect to url and complete the handshake within timeout_us.
 * Returns 0 and *out, or
 *   -EINVAL, -EPROTONOSUPPORT as zl_listen
 *   -ECONNREFUSED nobody listens there
 *   -ETIMEDOUT    no complete handshake in time
 *   -EPROTO       the peer's handshake was malformed or incompatible
 *   -ENOMEM, other -errno
 */
int zl_connect(const char *url, const struct zl_opts *opts,
	       int64_t timeout_us, zl_channel **out);

/* Close the channel. Pending data already accepted by zl_send is flushed
 * for at most 100 ms. The peer sees -ECONNRESET (or -EPIPE) afterwards,
 * once it has received everything sent before. NULL is a no-op. */
void zl_close(zl_channel *ch);

/* ---- copying data path ------------------------------------------------ */

/*
 * Send one message of len bytes (0 allowed). Returns 0 once the message is
 * accepted: it will be delivered in order unless the channel fails.
 *   -EAGAIN      timeout_us == 0 and no room
 *   -ETIMEDOUT   no room within timeout_us; nothing of the message was sent
 *   -EMSGSIZE    len > max_msg
 *   -ECONNRESET  the peer closed or died
 *   -EPIPE       this side was shut down or the channel failed earlier
 *   -EPROTO      the peer violated the protocol; the channel is failed
 *   -EBUSY       a zl_send_reserve reservation is open
 *   -EINVAL      NULL channel, or buf == NULL with len > 0
 * -EMSGSIZE also applies above the peer's max_msg (learned in the
 * handshake on tcp/unix; 4 GiB - 1 at most there).
 * A message larger than one ring record is fragmented. If the timeout hits
 * after the first fragment left, the rest is kept internally, 0 is returned,
 * and later calls on the channel (or zl_flush) finish it.
 */
int zl_send(zl_channel *ch, const void *buf, size_t len, int64_t timeout_us);

/*
 * Receive one message into buf (capacity cap); *len gets its length.
 *   -EAGAIN      timeout_us == 0 and no message
 *   -ETIMEDOUT   no message within timeout_us
 *   -EMSGSIZE    the next message is larger than cap; *len gets its size and
 *                the message stays queued (call again with a bigger buffer)
 *   -ECONNRESET  the peer closed or died and everything it sent was read
 *   -EPROTO      the peer sent a malformed record; the channel is failed
 *   -EBUSY       a zl_recv_peek message is not yet released
 *   -EINVAL      NULL argument
 */
int zl_recv(zl_channel *ch, void *buf, size_t cap, size_t *len,
	    int64_t timeout_us);

/* Push out the rest of a message kept by zl_send. Returns 0 when nothing
 * is pending (any more), else as zl_send; on a failed channel the rest is
 * dropped and the channel's error returned. */
int zl_flush(zl_channel *ch, int64_t timeout_us);

/* ---- zero-copy data path ---------------------------------------------- */

/*
 * Reserve room for a message of len bytes and return in *ptr where to write
 * it. On shm this is the peer's ring itself. Nothing is visible to the peer
 * until zl_send_commit. One reservation at a time.
 *   -EMSGSIZE    len exceeds the largest single record (zl_max_inline)
 *   -EAGAIN      no room now (this call never waits: use zl_wait_writable)
 *   -EBUSY       a reservation is already open
 *   -ECONNRESET, -EPIPE, -EPROTO, -EINVAL as zl_send
 */
int zl_send_reserve(zl_channel *ch, size_t len, void **ptr);

/* Publish the reserved message, truncated to len (<= reserved length).
 *   -EINVAL no open reservation, or len larger than reserved */
int zl_send_commit(zl_channel *ch, size_t len);

/*
 * Wait for the next message and expose it in place. *ptr stays valid until
 * zl_recv_release. On shm the bytes live in memory the peer can write: a
 * hostile peer can change them while you read.
 *   -EMSGSIZE    the message is fragmented (larger than one record); read it
 *                with zl_recv. *len gets its size.
 *   -EBUSY       a peeked message is not yet released
 *   otherwise as zl_recv
 */
int zl_recv_peek(zl_channel *ch, const void **ptr, size_t *len,
		 int64_t timeout_us);

/* Release the message returned by zl_recv_peek. -EINVAL if none. */
int zl_recv_release(zl_channel *ch);

/* Largest message that zl_send_reserve / zl_recv_peek handle in one piece. */
size_t zl_max_inline(const zl_channel *ch);

/* Wait until at least len bytes could be reserved.
 * 0, -ETIMEDOUT, -EAGAIN (timeout 0), -EMSGSIZE, -ECONNRESET, -EPIPE. */
int zl_wait_writable(zl_channel *ch, size_t len, int64_t timeout_us);

/* ---- event-loop integration ------------------------------------------ */

/*
 * A file descriptor that polls readable when a message may be waiting.
 * Contract (as for edge-style nonblocking sockets): after zl_recv or
 * zl_recv_peek returned -EAGAIN, the fd becomes readable when the next
 * message arrives or the peer goes away. Spurious readiness is possible:
 * always call zl_recv(..., 0) and handle -EAGAIN. Do not read from or close
 * the fd. Returns the fd (>= 0) or -EINVAL.
 */
int zl_channel_fd(zl_channel *ch);

/* ---- introspection ---------------------------------------------------- */

struct zl_channel_info {
	char transport[8];      /* "shm", "tcp", "unix", "rdma" */
	uint32_t ring_size;     /* bytes per direction (0 for streams) */
	uint64_t max_msg;
	uint64_t msgs_sent, msgs_recv;
	uint64_t bytes_sent, bytes_recv;
	uint64_t wakeups_sent;  /* times this side woke a sleeping peer */
	uint64_t sleeps;        /* times this side went to sleep */
	uint64_t rpos_updates;  /* read-position publications */
	uint64_t rpos_reads;    /* times the sender re-read the peer's rpos */
	int32_t peer_pid;       /* shm and unix: from SO_PEERCRED, else -1 */
	char mode[8];           /* rdma: how our ring is written, "single"
	                           (one WRITE, in-order placement) or "split"
	                           (data WRITE, then the tag); else "" */
};

/* Fill *info. -EINVAL on NULL. */
int zl_channel_info(const zl_channel *ch, struct zl_channel_info *info);

#ifdef __cplusplus
}
#endif
#endif /* ZIPLINE_H */
