/* SPDX-License-Identifier: MIT */
/* Internal interfaces shared by the core and the transports. */
#ifndef ZL_INTERNAL_H
#define ZL_INTERNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "zipline.h"
#include "log.h"
#include "url.h"

#define ZL_UNUSED __attribute__((unused))
/* A public symbol (the library is built with hidden visibility). */
#define ZL_API __attribute__((visibility("default")))
#define ZL_LIKELY(x) __builtin_expect(!!(x), 1)
/* A slow path kept out of line, so that its register saves stay off the
 * fast path that calls it. */
#define ZL_NOINLINE __attribute__((noinline))
#define ZL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define ZL_CACHELINE 64

/*
 * Per-transport channel operations (the provider ops table, as in
 * rdma-core). Every op returns 0 or -errno exactly as documented for the
 * public call of the same name in zipline.h; the core validates arguments
 * before calling them.
 */
struct zl_chan_ops {
	int (*send)(zl_channel *ch, const void *buf, size_t len, int64_t timeout_us);
	int (*recv)(zl_channel *ch, void *buf, size_t cap, size_t *len, int64_t timeout_us);
	int (*flush)(zl_channel *ch, int64_t timeout_us);
	/* Optional: zl_sendv with one publication (the core loops over send
	 * without it). Arguments are checked. */
	int (*sendv)(zl_channel *ch, const struct zl_msgvec *v, size_t n, int64_t timeout_us);
	int (*reserve)(zl_channel *ch, size_t len, void **ptr);
	int (*commit)(zl_channel *ch, size_t len);
	int (*peek)(zl_channel *ch, const void **ptr, size_t *len, int64_t timeout_us);
	int (*release)(zl_channel *ch);
	int (*wait_writable)(zl_channel *ch, size_t len, int64_t timeout_us);
	int (*fd)(zl_channel *ch);
	/* The socket this side's sleeps watch for the peer's end (zl_shutdown
	 * shuts it down to wake them), or -1. */
	int (*sock)(zl_channel *ch);
	size_t (*max_inline)(const zl_channel *ch);
	void (*info)(const zl_channel *ch, struct zl_channel_info *info);
	void (*close)(zl_channel *ch);
	/* Optional (ring channels), wakeups for one-sided writes, which the
	 * channel itself does not see:
	 * settle: take pending wakeups (the channel fd turns unreadable) and
	 * look at the peer; with arm, also ask the peer to poke us after its
	 * next one-sided write or message, which makes the fd readable. From
	 * the first call on, empty polls no longer arm by themselves: the
	 * owner arms before it sleeps. 0 or -ECONNRESET.
	 * poke: after a one-sided write, wake the peer if it armed. 0 or
	 * -ECONNRESET. */
	int (*settle)(zl_channel *ch, bool arm);
	int (*poke)(zl_channel *ch);
	/* For zl_poller and zl_channel_arm (both ops optional together):
	 * ready: the ZL_POLL* events (of those asked, plus ERR and HUP) that
	 *   hold now, found without a system call;
	 * arm: before the owner sleeps on the channel fd: take the wake-ups
	 *   if the fd was seen readable (woken), then ask to be woken for
	 *   events; returns the ready mask (> 0: do not sleep) or 0 (armed).
	 *   From the first call on the channel is in manual mode, as after
	 *   settle. Channels without these ops are plain kernel fds. */
	uint32_t (*ready)(zl_channel *ch, uint32_t events);
	int (*arm)(zl_channel *ch, uint32_t events, bool woken);
	/* The channel fd is the socket itself (streams): its readiness counts
	 * as the channel's, beside ready's. */
	bool kernel;
};

/*
 * One-sided access to the peer's memory (rdma:// only; struct
 * zl_channel.os is NULL elsewhere). Local memory is registered on the
 * channel's device (zl_rmem). Part of it is opened to the peer as a window
 * (zl_win: a type-2 memory window bound to this channel's queue pair, so no
 * other connection can use its key), which the peer writes through its
 * description (zl_rwin). Everything but write is for setup paths.
 */
struct zl_rmem;
struct zl_win;
struct zl_rwin {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};

struct zl_onesided_ops {
	/* Register [addr, addr+len). 0, -ENOMEM (the log names
	 * RLIMIT_MEMLOCK). The region outlives no channel of its device. */
	int (*reg)(zl_channel *ch, void *addr, size_t len, struct zl_rmem **out);
	void (*dereg)(struct zl_rmem *m);
	/* Let the peer reach [addr, addr+len), inside m, through ch only, as
	 * access says (ZL_WIN_*). 0; -EXDEV (m is on another device); -EINVAL
	 * (outside m); -EOPNOTSUPP (the device has no type-2 memory
	 * windows); -ENOMEM; -ECONNRESET. Close the window before the
	 * channel. */
	int (*win_open)(zl_channel *ch, struct zl_rmem *m, void *addr, uint32_t len,
			int access, struct zl_win **w, struct zl_rwin *desc);
	void (*win_close)(struct zl_win *w);
	/* Post one WRITE of src (inside m) to the peer's dst at off. src must
	 * not change until the peer has seen the bytes. 0; -EINVAL (outside
	 * dst); -ECONNRESET. A bad key fails the channel later. */
	int (*write)(zl_channel *ch, struct zl_rmem *m, const void *src, uint32_t len,
		     const struct zl_rwin *dst, uint32_t off);
	/* The one-sided store (src/onesided): post a READ of the peer's
	 * src at off into dst (inside m), or a compare-and-swap of the 8
	 * bytes at off (8-aligned) whose old value lands in *old (inside m);
	 * their results are there once sync returned 0. 0; -EINVAL (outside
	 * the window); -ECONNRESET. sync: 0, or -ECONNRESET (a request
	 * failed, or none completed for 2 s: the channel is failed). */
	int (*read)(zl_channel *ch, struct zl_rmem *m, void *dst, uint32_t len,
		    const struct zl_rwin *src, uint64_t off);
	int (*cas)(zl_channel *ch, struct zl_rmem *m, uint64_t *old, const struct zl_rwin *dst,
		   uint64_t off, uint64_t expect, uint64_t swap);
	int (*sync)(zl_channel *ch);
	/* Whether the device's atomics are atomic with the CPU's
	 * (IBV_ATOMIC_GLOB): if not, memory peers CAS must be CASed through
	 * the device by its owner too. */
	bool (*atomic_glob)(zl_channel *ch);
};
#define ZL_WIN_WRITE 1
#define ZL_WIN_READ 2
#define ZL_WIN_ATOMIC 4

/* Server internals for the one-sided store (src/server): the channel
 * behind a request's client, and behind a zl_client. */
zl_channel *zl_req_channel(const zl_req *req);
zl_channel *zl_client_channel(const zl_client *cli);
/* fn(client id) runs on the serving thread when a client is dropped,
 * before its channel is closed (NULL: none). */
void zl_server_on_drop(zl_server *s, void (*fn)(uint64_t client, void *arg), void *arg);
/* src/server/client.c, for pipelined calls (src/kv): whether a request of
 * len bytes goes through the channel behind a mailbox slot, where a send
 * that runs out of time ends the connection (so zl_call_send with no time
 * to wait is unsafe while replies are pending). */
bool zl_call_needs_channel(const zl_client *c, size_t len);
/* Give up on the pipelined call tag (zl_call_send): its reply is discarded
 * when it comes and the slot is taken back then, as after a zl_call that
 * timed out. */
void zl_call_abandon(zl_client *c, int tag);

/* Every channel starts with this header; transports embed it first. */
struct zl_channel {
	const struct zl_chan_ops *ops;
	_Atomic int shut; /* zl_shutdown was called: calls return -ESHUTDOWN */
	const struct zl_onesided_ops *os; /* NULL: no one-sided access */
	bool no_linger; /* close without flushing (a server dropping a client) */
	/* its slot of the status page (zl-ss; api.c, status.c), +1: 0 none.
	 * Each side counts its own messages and bytes (its thread only) and
	 * copies them there every ZL_STATUS_CHAN_EVERY of them, and when a
	 * call of its returns without one (a timeout, -EAGAIN) */
	int st_idx;
	uint64_t st_tx_msgs, st_tx_bytes, st_tx_pub;
	uint64_t st_rx_msgs, st_rx_bytes, st_rx_pub;
	size_t st_peek_len; /* zl_recv_peek's, counted at its release */
};

struct zl_listener_ops {
	/* Accepting without waiting on any peer (zl_accept and zl_server run
	 * many handshakes side by side: hs.c), in steps:
	 * take: the next connection's socket, before any handshake: an fd,
	 *   -EAGAIN (none pending) or -errno.
	 * ready: 1 once the peer's first handshake message is wholly buffered
	 *   on fd, so that finish need not wait for it; 0 not yet;
	 *   -ECONNRESET (the peer left).
	 * finish: the handshake on a ready fd; takes fd (closed on failure):
	 *   0 and *out, or the errors of zl_accept; or -EINPROGRESS: the
	 *   answer is sent and the peer's next message is awaited on *wfd
	 *   (rdma: its queue pair is ready), *half holding the state.
	 * complete: that message, once *wfd turned readable: 0 and *out,
	 *   -EAGAIN (not all there yet), or an error (half is freed).
	 * abort: free a half that will not be completed. */
	int (*take)(zl_listener *l);
	int (*ready)(zl_listener *l, int fd);
	int (*finish)(zl_listener *l, int fd, zl_channel **out, void **half, int *wfd);
	int (*complete)(zl_listener *l, void *half, zl_channel **out);
	void (*abort)(zl_listener *l, void *half);
	int (*fd)(const zl_listener *l); /* the listening socket */
	int (*url)(const zl_listener *l, char *buf, size_t cap);
	void (*close)(zl_listener *l);
};

struct zl_listener {
	const struct zl_listener_ops *ops;
	struct zl_hs *hs; /* zl_accept's handshakes (NULL under zl_server) */
};

/* A transport: its URL scheme and how to make endpoints. */
struct zl_transport {
	const char *scheme;
	int (*listen)(const struct zl_url *u, const struct zl_opts *o, zl_listener **out);
	int (*connect)(const struct zl_url *u, const struct zl_opts *o,
		       int64_t timeout_us, zl_channel **out);
};

extern const struct zl_transport zl_transport_shm;
extern const struct zl_transport zl_transport_tcp;
extern const struct zl_transport zl_transport_unix;
extern const struct zl_transport zl_transport_rdma; /* a stub without verbs */

/* The rendezvous socket of a shm:// channel (for the shm server's own
 * setup message, sent right after the handshake), or -EINVAL. */
int zl_shm_sock(const zl_channel *ch);
/* Wake the receiver of a shm:// channel's peer unconditionally (the shm
 * server's doorbell: the peer's own flag said it sleeps). 0 or -EINVAL. */
int zl_shm_kick(zl_channel *ch);

/* Grow *buf (capacity *cap) to hold need bytes, at least doubling.
 * 0 or -ENOMEM (the old buffer stays). */
static inline int zl_grow(uint8_t **buf, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap * 2 > need ? *cap * 2 : need;
	uint8_t *p = realloc(*buf, n);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = n;
	return 0;
}

/* zl_listen with budgets that neither opts nor the URL may raise (the
 * server's): max_msg and max_peer_ring at most these; *hs_us (if not NULL)
 * gets the handshake timeout in force. */
int zl_listen_capped(const char *url, const struct zl_opts *opts, uint64_t max_msg,
		     uint32_t max_peer_ring, int64_t *hs_us, zl_listener **out);

/* Merge URL query parameters into a copy of the caller's options.
 * -EINVAL on an unknown key or a bad value. */
int zl_opts_apply_url(struct zl_opts *o, const struct zl_url *u);
/* -EINVAL if the options are out of range. */
int zl_opts_check(const struct zl_opts *o);
/* Whether k is a URL key of struct zl_opts; -EINVAL (logged) for a URL
 * with any other key, for transports without keys of their own. */
bool zl_opts_core_key(const char *k);
int zl_opts_check_keys(const struct zl_url *u);

#endif
