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
 * until the peer wakes it (a record on the rendezvous socket on shm, a
 * completion event on rdma, the socket itself on tcp/unix).
 *
 * Thread safety:
 *   - zl_listener: zl_accept may be called from one thread at a time;
 *     zl_listener_close must not race with zl_accept.
 *   - zl_channel: a channel has one send side and one receive side. One
 *     thread may send while another receives on the same channel; two threads
 *     must not send (or receive) on one channel concurrently. zl_close must
 *     not race with any other call on the channel; zl_shutdown may (it
 *     stops the blocked calls).
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
#define ZL_VERSION_MINOR 2
#define ZL_VERSION_PATCH 0
#define ZL_VERSION_NUM \
	(ZL_VERSION_MAJOR * 10000 + ZL_VERSION_MINOR * 100 + ZL_VERSION_PATCH)
#define ZL_VERSION_STRING "0.2.0"

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
 * query parameters (shm://x?ring=65536&spin_us=0) override these fields.
 * A URL key that no field names (nor the transport, for rdma's own keys)
 * is refused with -EINVAL, as are reserved fields that are not zero and a
 * struct whose size field zl_opts_init did not set. */
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
	int allow_other_uid;  /* shm, unix: accept peers of another uid
	                         (root is no exception) */
	int64_t handshake_timeout_us; /* default 5 s */
	uint32_t rpos_every;  /* receiver publishes its read position after
	                         this many consumed bytes; 0: ring_size/4 */
	uint32_t max_peer_ring; /* shm, rdma: largest ring a peer may ask us
	                         to map and write into, default 64 MiB
	                         (max_peer_ring=) */
	uint32_t max_handshakes; /* listeners: peers in their handshake at
	                         once, default 64; past it a newcomer displaces
	                         the oldest of the peer (uid or address) with
	                         the most (max_handshakes=) */
	uint32_t reserved[6];
};

/* Fill *o with defaults. */
void zl_opts_init(struct zl_opts *o);

/* ---- endpoints -------------------------------------------------------- */

typedef struct zl_listener zl_listener;
typedef struct zl_channel zl_channel;

/*
 * Listen on url. opts may be NULL (defaults).
 * Returns 0 and *out, or
 *   -EINVAL          malformed URL or option (unknown URL key, a value
 *                    out of range, tcp:// without a port: tcp://H:0
 *                    listens on any free port)
 *   -EPROTONOSUPPORT unknown scheme, or a transport not built in
 *   -EADDRNOTAVAIL   tcp, rdma: the host name does not resolve
 *   -EADDRINUSE      the name or address is taken
 *   -ENOMEM          out of memory
 *   other -errno     from socket(2), bind(2), listen(2)
 */
int zl_listen(const char *url, const struct zl_opts *opts, zl_listener **out);

/*
 * Wait up to timeout_us for a peer whose handshake completes. The
 * handshakes of all connecting peers (up to opts.max_handshakes) run side
 * by side, none waited on alone: a silent or slow peer never delays
 * another, nor this call past timeout_us; it is dropped after
 * opts.handshake_timeout_us, as is a peer that hangs up.
 * Returns 0 and *out, or
 *   -ETIMEDOUT    no handshake completed in time (-EAGAIN when
 *                 timeout_us == 0)
 *   -EPROTO       a peer's handshake was malformed or incompatible
 *                 (bad magic, version, ring size); that peer is dropped
 *   -EPERM        shm, unix: a peer runs as another uid
 *   -EMSGSIZE     shm, rdma: a peer's ring is over max_peer_ring
 *   -ENOMEM, other -errno
 * After any of these the listener stays usable.
 */
int zl_accept(zl_listener *l, int64_t timeout_us, zl_channel **out);

/* The URL peers can connect to, with the port actually bound (tcp://...:0
 * listens on an ephemeral port). Returns 0, -EINVAL, or -ENOSPC if cap is
 * too small. */
int zl_listener_url(const zl_listener *l, char *buf, size_t cap);

/* A file descriptor (an epoll set over the listening socket and the
 * handshakes in progress) that polls readable when zl_accept(l, 0) may
 * have something to do: a new connection, a handshake moving on, or one
 * to expire. Never read it; -EINVAL for NULL. */
int zl_listener_fd(const zl_listener *l);

/* Close the listener; established channels are unaffected. NULL is a no-op. */
void zl_listener_close(zl_listener *l);

/*
 * Connect to url and complete the handshake within timeout_us.
 * Returns 0 and *out, or
 *   -EINVAL, -EPROTONOSUPPORT, -EADDRNOTAVAIL as zl_listen
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

/*
 * Stop the channel from another thread: a thread blocked in zl_send,
 * zl_sendv, zl_recv, zl_recv_peek, zl_flush or zl_wait_writable on ch
 * returns -ESHUTDOWN (a sleeping one at once, a spinning one at its next
 * look at the peer, within a millisecond), and every later call on ch but
 * zl_close returns -ESHUTDOWN too. The end is abortive, as a failure is:
 * the peer sees -ECONNRESET, and messages it had not yet received may be
 * lost (on tcp, data it sends afterwards resets the connection; on rdma,
 * writes still in flight are dropped); zl_flush before it for a graceful
 * end. ch stays valid: call zl_close once the other threads have left
 * their calls. Thread-safe; a second call does nothing.
 * 0, or -EINVAL (NULL).
 */
int zl_shutdown(zl_channel *ch);

/* ---- copying data path ------------------------------------------------ */

/*
 * Send one message of len bytes (0 allowed). Returns 0 once the message is
 * accepted: it will be delivered in order unless the channel fails.
 *   -EAGAIN      timeout_us == 0 and no room
 *   -ETIMEDOUT   no room within timeout_us; nothing of the message was sent
 *   -EMSGSIZE    len > max_msg
 *   -ECONNRESET  the peer closed or died
 *   -EPIPE       this side was shut down or the channel failed earlier
 *   -ESHUTDOWN   zl_shutdown was called on ch (also before or during this call)
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
 *   -ESHUTDOWN   zl_shutdown was called on ch (also before or during this call)
 *   -EPROTO      the peer sent a malformed record; the channel is failed
 *   -EBUSY       a zl_recv_peek message is not yet released
 *   -EINVAL      NULL argument
 */
int zl_recv(zl_channel *ch, void *buf, size_t cap, size_t *len,
	    int64_t timeout_us);

/* One message of a zl_sendv batch. */
struct zl_msgvec {
	const void *buf;
	size_t len;
};

/*
 * Send the n messages v[0..n) in order, as n zl_send calls would, with one
 * publication for all of them where the transport allows it: on shm one
 * wake-up check for the batch, on rdma one ibv_post_send (one doorbell)
 * for its records, on tcp/unix one writev. The receiver sees n separate
 * messages. timeout_us bounds the whole call.
 * Returns the number of messages accepted (1..n; 0 when n is 0): fewer
 * than n when the next one found no room in time (-EAGAIN/-ETIMEDOUT
 * would have been returned for it) or failed; the next call then reports
 * that error. If the first message cannot be accepted, its error:
 *   -EAGAIN, -ETIMEDOUT, -EMSGSIZE, -ECONNRESET, -EPIPE, -EPROTO, -EBUSY
 *                as zl_send
 *   -EINVAL      NULL channel, v NULL with n > 0, or a buf NULL with len > 0
 *                (then nothing is sent)
 * A message larger than one ring record is fragmented as by zl_send, and
 * its rest may be kept as zl_send keeps it (zl_flush).
 */
int zl_sendv(zl_channel *ch, const struct zl_msgvec *v, size_t n, int64_t timeout_us);

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

/*
 * Arm the channel fd before sleeping on it, instead of having every empty
 * zl_recv(..., 0) do so (as UCX's ucp_worker_arm). Returns
 *   0        armed: nothing to receive now, and zl_channel_fd will turn
 *            readable when a message arrives or the peer goes away
 *   -EBUSY   do not sleep: zl_recv(..., 0) would not return -EAGAIN now
 *            (a message, the peer's close, or the channel's failure)
 *   -EINVAL  NULL channel, or the fd could not be made (see zl_channel_fd)
 * From the first call on, the channel is in manual mode: an empty
 * zl_recv(..., 0) costs no system call and no fence, and the fd fires only
 * after an arm, so call zl_channel_arm before every sleep on the fd.
 * Same thread as the receive side.
 */
int zl_channel_arm(zl_channel *ch);

/* ---- waiting on many channels and fds --------------------------------- */

/* Events (the values of POLLIN, POLLOUT, POLLERR and POLLHUP). */
#define ZL_POLLIN  0x001u /* zl_recv(..., 0) would not return -EAGAIN */
#define ZL_POLLOUT 0x004u /* a message of ZL_POLL_WRITABLE bytes fits now */
#define ZL_POLLERR 0x008u /* the channel failed (always reported) */
#define ZL_POLLHUP 0x010u /* the peer is gone (always reported) */
#define ZL_POLL_WRITABLE 256

typedef struct zl_poller zl_poller;

struct zl_poll_event {
	uint32_t events; /* ZL_POLL* that hold */
	int id;          /* as returned by zl_poller_add_* */
	void *user;
};

struct zl_poller_info {
	uint64_t waits;    /* zl_poller_wait calls */
	uint64_t sleeps;   /* times it slept in epoll_wait */
	uint64_t arms;     /* channel arms before those sleeps */
	uint64_t kernel_looks; /* epoll_wait calls that did not sleep */
	uint64_t events;   /* events returned */
};

/*
 * zl_poller: one waiter over channels, listeners and foreign fds,
 * level-triggered (an item is reported on every wait while it is ready).
 * A wait looks at the channels' rings first (no system call), then spins
 * for spin_us over the rings (and, now and then, the kernel fds), then arms
 * every ring channel and sleeps in epoll_wait. While any ring channel is
 * busy a wait makes no system call, except a look at the kernel fds every
 * 64 waits (every 1024 with ring channels only; on every wait when it holds
 * tcp/unix channels, whose readiness is the kernel's) and every 128 polls
 * of a spin. Idle past the spin, it takes no CPU.
 * Adding a ring channel puts it in manual mode (see zl_channel_arm): do
 * not also sleep on its fd elsewhere.
 * Thread safety: a poller and the receive sides of its channels belong to
 * one thread; items must be removed before their channel or fd is closed.
 *
 * zl_poller_create: spin_us < 0 uses 50. 0 and *out, -EINVAL, -ENOMEM,
 *   -errno of epoll_create1.
 * zl_poller_add_channel, _add_listener, _add_fd: events is a mask of
 *   ZL_POLLIN and ZL_POLLOUT (listeners: ZL_POLLIN, a connection waits).
 *   Return the item's id (>= 0), or -EINVAL (NULL, no events, a bad fd),
 *   -EEXIST (already in this poller), -ENOMEM, -errno of epoll_ctl.
 * zl_poller_mod: new events for an item. 0, -ENOENT, -EINVAL, or -errno
 *   of epoll_ctl (-EBADF: the fd was closed before its item was removed).
 * zl_poller_del: 0 or -ENOENT.
 * zl_poller_wait: up to max events into ev; returns their number (> 0),
 *   or -ETIMEDOUT (nothing within timeout_us; -EAGAIN when timeout_us is
 *   0), -EINVAL, -EINTR (a signal ended the sleep), -errno of epoll_wait.
 */
int zl_poller_create(int64_t spin_us, zl_poller **out);
int zl_poller_add_channel(zl_poller *p, zl_channel *ch, uint32_t events, void *user);
int zl_poller_add_listener(zl_poller *p, zl_listener *l, void *user);
int zl_poller_add_fd(zl_poller *p, int fd, uint32_t events, void *user);
int zl_poller_mod(zl_poller *p, int id, uint32_t events);
int zl_poller_del(zl_poller *p, int id);
int zl_poller_wait(zl_poller *p, struct zl_poll_event *ev, int max, int64_t timeout_us);
/* Counters; -EINVAL on NULL. */
int zl_poller_info(const zl_poller *p, struct zl_poller_info *info);
/* NULL is a no-op. Channels and fds stay open. */
void zl_poller_destroy(zl_poller *p);

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
	uint64_t arms;          /* times this side asked the peer to wake it */
	uint64_t fences;        /* global fences (membarrier(2)) it issued */
	uint64_t syscalls;      /* system calls its data path made: waits,
	                           wake-ups, fences, and on tcp/unix every
	                           read, write and poll */
	struct zl_verbs_counts {  /* rdma: verbs calls on this channel's queue
	                           pair, both threads, from setup on (records,
	                           read positions, wake-ups, arms); 0 elsewhere */
		uint64_t wr_posted;    /* send work requests posted */
		uint64_t post_calls;   /* ibv_post_send calls (doorbells) */
		uint64_t wr_signaled;  /* of the work requests, signaled ones */
		uint64_t wr_inline;    /* ... and inline ones */
		uint64_t bytes_posted; /* bytes the work requests carry (ring
		                          records, control words) */
		uint64_t send_cq_polls; /* ibv_poll_cq calls on the send CQ */
		uint64_t recv_cq_polls; /* ... and on the receive CQ */
		uint64_t recv_post_calls; /* ibv_post_recv calls */
	} verbs;
};

/* Fill *info. -EINVAL on NULL. */
int zl_channel_info(const zl_channel *ch, struct zl_channel_info *info);

/* ---- N:1 server and RPC client ---------------------------------------- */

/*
 * zl_server: one thread serves many clients (see zl_server(7) and
 * docs/design-nto1.md). Each client owns K request slots; each slot has a
 * 1-byte mailbox flag, and the flags of all clients form one contiguous
 * array that the serving thread scans with SIMD from a rotating start, so
 * no client starves. The flag's value is the request type (1..255), the
 * RPC id: handlers are registered per type. Replies, of any size, go back
 * over a per-client channel.
 *   shm://   requests are written into the client's own slots (memory no
 *            other client maps) and announced by its flag.
 *   tcp://, unix://, rdma://   requests travel as channel messages; the
 *            server waits on them through epoll (tcp, unix) or by polling
 *            the channels' rings (rdma). Same API, same limits.
 * Requests larger than a slot travel over the client's channel on every
 * transport; the slot then only announces them.
 *
 * Thread safety:
 *   - zl_server: zl_server_run/poll, zl_server_handle, zl_server_listen and
 *     zl_reply* belong to one thread (the serving thread). zl_server_stop
 *     may be called from any thread or a signal handler. zl_server_info may
 *     be called from any thread (counters are read without tearing, not as
 *     one snapshot). zl_server_close must not race with anything.
 *     Connections are accepted on a helper thread, so a client stalling
 *     in its handshake never delays the serving thread.
 *   - zl_client: one thread at a time (calls are not internally locked).
 *   - zl_req: valid inside its handler; a deferred request until its reply.
 */
typedef struct zl_server zl_server;
typedef struct zl_client zl_client;
typedef struct zl_req zl_req;

struct zl_server_opts {
	uint32_t size;        /* sizeof(struct zl_server_opts) */
	uint32_t slots;       /* K: request slots per client, 1..64; default 4 */
	uint32_t slot_size;   /* bytes per slot including the 16-byte header,
	                         64..65536, multiple of 64; default 512 */
	uint32_t max_clients; /* 1..65536; default 1024 */
	uint64_t max_req;     /* largest request, 1 .. 2^32-1; default 4 MiB */
	int64_t spin_us;      /* idle spin before sleeping; default 50 */
	int64_t sweep_us;     /* period of the slot-header sweep that recovers
	                         a doorbell lost to a rogue client (within
	                         10 ms + one sweep); default 1000 */
	uint64_t max_queued;  /* reply bytes queued for one client (it does not
	                         read them) before the server stops taking its
	                         requests until they have gone out; default
	                         8 MiB */
	uint32_t max_ring;    /* largest reply ring a client may ask for
	                         (shm, rdma: the server maps or stages it);
	                         default 4 MiB */
	uint32_t max_handshakes; /* clients in their handshake at once; a new
	                         one past this displaces the oldest; default 64 */
	uint64_t max_queued_total; /* reply bytes queued for all clients: past
	                         it the client with the most queued is dropped;
	                         default 256 MiB */
	uint32_t reserved[2];
};

void zl_server_opts_init(struct zl_server_opts *o);

/* A handler. Read the request with zl_req_data (in place: on shm it is the
 * client's memory, which that client can change while you read it; never
 * read a length twice from it). Answer with zl_reply (or
 * zl_reply_reserve/commit), or call zl_req_defer and answer later. Return
 * 0, or a negative errno: if no reply was sent, the client's call then
 * returns that error. Returning 0 without replying sends an empty reply. */
typedef int (*zl_handler_fn)(zl_req *req, void *arg);

/* Create a server (opts NULL: defaults). 0, -EINVAL, -ENOMEM. */
int zl_server_create(const struct zl_server_opts *opts, zl_server **out);

/*
 * Accept clients on url (callable several times: one server can serve
 * shm and tcp at once). opts as zl_listen. Returns 0 or as zl_listen, or
 *   -ENOSPC  the server already has 8 listeners
 */
int zl_server_listen(zl_server *srv, const char *url, const struct zl_opts *opts);

/* The URL of listener i (in zl_server_listen order), as zl_listener_url.
 * -ENOENT if there is no listener i. */
int zl_server_url(const zl_server *srv, int i, char *buf, size_t cap);

/* Handle requests of this type (1..255) with fn (NULL removes it).
 * 0 or -EINVAL. A request with no handler gets -EOPNOTSUPP. */
int zl_server_handle(zl_server *srv, int type, zl_handler_fn fn, void *arg);

/*
 * Serve: wait up to timeout_us for requests, serve what is ready, and
 * return. Returns the number of requests served (>= 0), 0 on timeout, or
 *   -ECANCELED  zl_server_stop was called (the stop is consumed)
 *   -EINVAL     NULL server
 * Failures of single clients never end the call: those clients are
 * dropped and counted.
 */
int zl_server_poll(zl_server *srv, int64_t timeout_us);

/* Serve until zl_server_stop or timeout_us elapses (-1: forever).
 * 0 after a stop or on timeout, or -EINVAL. */
int zl_server_run(zl_server *srv, int64_t timeout_us);

/* Make a running zl_server_run/poll return soon. Async-signal-safe. */
void zl_server_stop(zl_server *srv);

struct zl_server_info {
	uint64_t clients;         /* connected now */
	uint64_t clients_total;   /* ever accepted */
	uint64_t clients_dropped; /* disconnected by the server: protocol
	                             violation, or a reply that could not go */
	uint64_t requests;        /* served (handler called) */
	uint64_t rejected;        /* malformed requests (their clients are
	                             dropped), requests with no handler */
	uint64_t spurious;        /* flags set without a valid request */
	uint64_t recovered;       /* requests found by the sweep, not a flag */
	uint64_t sleeps;          /* times the serving thread slept */
	uint64_t per_type[256];   /* requests served per type */
	uint64_t paused;          /* times a client was paused: more than
	                             max_queued bytes of replies it does not read */
	uint64_t handshakes_failed; /* new clients dropped in their handshake:
	                             malformed, refused, too slow, or displaced
	                             by newer ones past max_handshakes */
	uint64_t arms;            /* client channels the serving thread asked
	                             for a wake-up (before it slept) */
};

/* Fill *info. 0 or -EINVAL. */
int zl_server_info(const zl_server *srv, struct zl_server_info *info);

/* Close every client and listener and free the server. Deferred requests
 * still open are dropped (their clients see -ECONNRESET). NULL: no-op. */
void zl_server_close(zl_server *srv);

/* ---- requests (inside a handler) ---- */

/* The request's type (1..255). */
int zl_req_type(const zl_req *req);

/* The request's bytes and length (in place; see zl_handler_fn). */
const void *zl_req_data(const zl_req *req, size_t *len);

/* A number for the requesting client, unique while the server lives. */
uint64_t zl_req_client(const zl_req *req);

/* Keep the request open after the handler returns; reply later from the
 * serving thread. Returns 0, or -EINVAL (already replied or deferred). */
int zl_req_defer(zl_req *req);

/*
 * Send the reply (any size up to the client's max_msg) and close the
 * request. Never blocks: a reply that does not fit now is queued and sent
 * as the client makes room. Returns 0, or
 *   -EINVAL      already replied, or buf NULL with len > 0
 *   -ECONNRESET  the client is gone (a deferred request is still closed)
 *   -ENOMEM      no memory to queue the reply (the client is dropped)
 *   -EMSGSIZE    len beyond the client's max_msg
 */
int zl_reply(zl_req *req, const void *buf, size_t len);

/* Answer with an error instead (err < 0): the client's call returns err. */
int zl_reply_error(zl_req *req, int err);

/*
 * Zero-copy reply: room for len bytes in the client's reply ring (shm:
 * the client's memory). -EAGAIN if it does not fit now (use zl_reply),
 * -EMSGSIZE if it never fits in one piece, -EINVAL, -ECONNRESET.
 * zl_reply_commit(req, n) sends the first n <= len bytes.
 */
int zl_reply_reserve(zl_req *req, size_t len, void **ptr);
int zl_reply_commit(zl_req *req, size_t len);

/* ---- client ---- */

/*
 * Connect to a zl_server at url. opts as zl_connect (ring_size sizes the
 * reply ring). Returns 0 and *out, or as zl_connect, or
 *   -EPROTO   the peer is not a zl_server or speaks another version
 *   -EUSERS   the server has max_clients clients
 */
int zl_client_connect(const char *url, const struct zl_opts *opts,
		      int64_t timeout_us, zl_client **out);

/* Disconnect. Calls in flight are abandoned. NULL: no-op. */
void zl_client_close(zl_client *cli);

/* Requests this client may have in flight (the server's K). */
int zl_client_slots(const zl_client *cli);

/*
 * Call: send a request of the given type (1..255) and wait for its reply.
 * *rep points at the reply (zero copy where possible) until the next call
 * on this client. Returns 0, or the handler's error (-EOPNOTSUPP: no
 * handler), or
 *   -ETIMEDOUT   no reply in time (the request stays in flight; its
 *                reply is discarded when it comes)
 *   -EMSGSIZE    len > the server's max_req
 *   -EBUSY       calls started with zl_call_send are still open
 *   -ECONNRESET  the server went away or dropped this client
 *   -EINVAL      bad type or NULL argument
 */
int zl_call(zl_client *cli, int type, const void *req, size_t len,
	    const void **rep, size_t *replen, int64_t timeout_us);

/*
 * Pipelined calls: zl_call_send starts a request and returns its tag
 * (>= 0), or -EBUSY at once when K requests are in flight (collect
 * replies first); timeout_us bounds only the wait for room in the channel
 * (-EAGAIN with timeout 0, -ETIMEDOUT: nothing was sent); zl_call_recv waits for any reply and returns its tag in
 * *tag, with the same results as zl_call (*tag is -1 when the error is not
 * a reply: -ETIMEDOUT, -EAGAIN, -ECONNRESET). *rep is valid until the next
 * zl_call_recv or zl_call on this client.
 */
int zl_call_send(zl_client *cli, int type, const void *req, size_t len,
		 int64_t timeout_us);
int zl_call_recv(zl_client *cli, int *tag, const void **rep, size_t *replen,
		 int64_t timeout_us);

#ifdef __cplusplus
}
#endif
#endif /* ZIPLINE_H */
