/* SPDX-License-Identifier: MIT */
/*
 * A switched socket: the program's fd stays the kernel socket (so that
 * getsockname, setsockopt, fcntl flags, fork and exec inheritance are the
 * kernel's), while the bytes travel through two rings in one memfd shared
 * by the two processes (struct zp_shared).
 *
 * Switching without a marker in the stream. Each direction switches on its
 * own: the sender stores kbytes, the number of bytes it has sent on the
 * kernel stream, then state = 1 (release), and from then on writes into the
 * ring. The receiver reads the kernel stream while state is 0 or it has
 * consumed fewer than kbytes bytes there, and the ring afterwards. After
 * kbytes the kernel stream carries only wake-ups: one byte each, sent when
 * the other side sleeps. A receive that raced with the switch and read past
 * kbytes is cut back to kbytes: state and kbytes are stored before any
 * wake-up byte is sent, and a byte that came through the kernel was sent
 * after, so the load after the recv sees them. Kernel bytes never reach the
 * ring reader unordered: the ring is read only after all kbytes bytes.
 *
 * Wake-ups (the Dekker pattern of the library's rings): a receiver about to
 * sleep sets rx_sleeping, fences, and looks at the ring again; a sender
 * stores tail, fences, and sends a wake-up byte if rx_sleeping is set. A
 * sender out of room does the same with tx_sleeping and head. Sleeping is
 * a poll of the kernel socket for POLLIN, so poll, select and epoll sleep
 * on it too (wait.c).
 *
 * End of stream: shutdown(SHUT_WR), or the last close in the last process
 * holding the side (refs), sets closed after the final tail; the kernel
 * stream's own end (the process died) is noticed in a drain. Writing to a
 * side that is gone fails with EPIPE (and SIGPIPE) as on a kernel socket.
 * What the peer writes into the shared memory is checked against what the
 * stream carried, and what decides a direction (its state and kbytes, its
 * end, its reset) is read once and kept (rx_kb, closed_seen, reset_seen):
 * a tail more than the ring size ahead of head, kbytes behind the kernel
 * bytes already read or ahead of where the kernel stream ended, or a tail
 * that moves after the end are lies. A lie ends that connection only:
 * ECONNRESET to the program (then the end of the stream), the kernel
 * socket shut both ways so that the liar sees its end too, and everything
 * freed at the program's close. The counters of sleepers and kicks only
 * cost the liar's own connection wake-ups.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "clock.h"
#include "preload.h"

static bool rx_on_kernel(struct zsock *z, uint64_t *left);
static int64_t rx_avail(struct zsock *z);
static bool peer_reset(struct zsock *z);
static bool peer_closed(struct zsock *z);
static uint64_t rx_switch(struct zsock *z);
static inline bool trusted(struct zsock *z);

/* ---- the fd table -------------------------------------------------------- */

#define MAX_FDS (1 << 20)
static _Atomic(struct zsock *) *table;
static int table_len;
static _Atomic int table_hi; /* above every fd ever set: scans stop there */
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
	struct rlimit rl;
	rlim_t n = getrlimit(RLIMIT_NOFILE, &rl) ? 1024 : rl.rlim_max;
	if (n == RLIM_INFINITY || n > MAX_FDS)
		n = MAX_FDS;
	table = calloc((size_t)n, sizeof(*table));
	table_len = table ? (int)n : 0;
}

struct zsock *zp_get(int fd)
{
	if (!table) /* before the first switch nothing is in it */
		return NULL;
	return fd >= 0 && fd < table_len ? atomic_load_explicit(&table[fd], memory_order_acquire)
					 : NULL;
}

void zp_set(int fd, struct zsock *z)
{
	pthread_once(&table_once, table_init);
	if (fd < 0 || fd >= table_len)
		return; /* past the table: stays a kernel socket (never switched) */
	pthread_mutex_lock(&z->lock);
	z->refs++;
	pthread_mutex_unlock(&z->lock);
	atomic_store_explicit(&table[fd], z, memory_order_release);
	int hi = atomic_load(&table_hi);
	while (fd >= hi && !atomic_compare_exchange_weak(&table_hi, &hi, fd + 1))
		;
}

/* SO_ERROR of a switched socket (kerr: what the kernel socket says): on
 * one host the peer's reset, once (as the kernel clears a socket's error
 * when it reports it; a read then sees the end of the stream); across
 * hosts xhost.c's. */
int zp_so_error(struct zsock *z, int kerr)
{
	if (z->xh)
		return zx_so_error(z, kerr);
	if (kerr || !z->sh)
		return kerr;
	if (peer_reset(z) && !z->reset_told) {
		z->reset_told = true;
		return ECONNRESET;
	}
	kerr = z->so_err; /* EPIPE after a send to a closed TCP peer */
	z->so_err = 0;
	return kerr;
}

/* The program asked for an abortive close (SO_LINGER on, 0 s): on TCP the
 * peer then sees a reset, not the end of the stream. */
bool zp_linger_abort(int fd)
{
	struct linger l = { 0, 0 };
	socklen_t n = sizeof(l);
	return !zp_real.getsockopt(fd, SOL_SOCKET, SO_LINGER, &l, &n) && n == sizeof(l) &&
	       l.l_onoff && !l.l_linger;
}

/* A kernel socket timeout (SO_RCVTIMEO, SO_SNDTIMEO) in microseconds, 0
 * for none: set before the switch (before connect, on the listener of an
 * accepted TCP socket, before exec), it holds after. */
static int64_t kernel_timeo(int fd, int opt)
{
	struct timeval t = { 0, 0 };
	socklen_t l = sizeof(t);
	if (zp_real.getsockopt(fd, SOL_SOCKET, opt, &t, &l) || l != sizeof(t))
		return 0;
	return (int64_t)t.tv_sec * 1000000 + t.tv_usec;
}

void zp_adopt(int fd, struct zsock *z)
{
	int on = 1, v = 0;
	socklen_t l = sizeof(v);
	z->rcvtimeo_us = kernel_timeo(fd, SO_RCVTIMEO);
	z->sndtimeo_us = kernel_timeo(fd, SO_SNDTIMEO);
	z->app_nodelay = -1;
	if (!z->is_unix && !zp_real.getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &l)) {
		z->app_nodelay = v;
		zp_real.setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
	}
	zp_set(fd, z);
}

static void zsock_free(struct zsock *z);

/* A closed zsock is freed once no thread sleeps with it and a second has
 * passed: another thread may still be in a call on it (a close racing
 * with a read is the program's right, and the kernel's file lives on for
 * that call). Its fds are closed at once. */
static pthread_mutex_t grave_lock = PTHREAD_MUTEX_INITIALIZER;
static struct zsock *graves;

/* (locked: the caller holds z->lock, under which a client's join uses
 * hello_fd: a number closed here may be reused for a program's file) */
static void bury(struct zsock *z, bool locked)
{
	if (!locked)
		pthread_mutex_lock(&z->lock);
	if (z->mem >= 0)
		zp_real.close(z->mem);
	if (z->hello_fd >= 0)
		zp_real.close(z->hello_fd);
	z->mem = z->hello_fd = -1;
	atomic_store(&z->pending, false);
	if (!locked)
		pthread_mutex_unlock(&z->lock);
	int64_t now = zl_now_us();
	z->dead_at = now;
	pthread_mutex_lock(&grave_lock);
	z->grave_next = graves;
	graves = z;
	for (struct zsock **pp = &graves; *pp;) {
		struct zsock *g = *pp;
		if (now - g->dead_at > 1000000 && !atomic_load(&g->users)) {
			*pp = g->grave_next;
			zsock_free(g);
		} else {
			pp = &g->grave_next;
		}
	}
	pthread_mutex_unlock(&grave_lock);
}

static void zsock_free(struct zsock *z)
{
	if (z->xh) {
		zx_free(z);
		return;
	}
	if (z->hello_fd >= 0)
		zp_real.close(z->hello_fd);
	if (z->mem >= 0)
		zp_real.close(z->mem);
	zp_join_free(z);
	if (z->sh)
		munmap(z->sh, z->map_len);
	if (z->fam)
		munmap(z->fam, sizeof(*z->fam));
	pthread_mutex_destroy(&z->lock);
	free(z);
}

static void wake(struct zsock *z)
{
	static const char b = 0;
	/* Until our sends moved to the ring, our kernel stream carries data
	 * and a byte on it would be one: no wake-up then (the peer wakes for
	 * our data; one waiting for room in its ring is woken by our switch,
	 * which our next call makes: its own switch told us to). */
	if (!atomic_load_explicit(&z->tx_ring, memory_order_acquire))
		return;
	zp_real.send(z->fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
	/* EAGAIN: wake-ups the peer has not read yet; it will look anyway */
}

/* The peer may sleep on its socket: after our store, wake it if so, once
 * until it arms again. */
static void notify(struct zsock *z, _Atomic uint32_t *sleeping, _Atomic uint32_t *kick)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(sleeping, memory_order_relaxed) &&
	    !atomic_exchange_explicit(kick, 1, memory_order_relaxed))
		wake(z);
}
#define NOTIFY_RX(z) notify((z), &(z)->tx->rx_sleeping, &(z)->tx->rx_kick)
#define NOTIFY_TX(z) notify((z), &(z)->rx->tx_sleeping, &(z)->rx->tx_kick)

void zp_forget(int fd)
{
	if (!table || fd < 0 || fd >= table_len)
		return;
	struct zsock *z = atomic_exchange(&table[fd], NULL);
	if (!z)
		return;
	pthread_mutex_lock(&z->lock);
	bool last = --z->refs == 0;
	if (!last && z->fd == fd) { /* wake-ups go through another fd now */
		for (int i = 0; i < atomic_load(&table_hi); i++)
			if (atomic_load_explicit(&table[i], memory_order_relaxed) == z) {
				z->fd = i;
				break;
			}
	}
	pthread_mutex_unlock(&z->lock);
	if (!last)
		return;
	if (z->xh)
		zx_closed(z);
	if (z->sh && atomic_fetch_sub(&z->sh->refs[z->side], 1) == 1) {
		/* the last copy of our side: the peer sees the end of the stream,
		 * or a reset if we leave bytes unread (as TCP sends RST) */
		uint64_t left;
		if ((rx_on_kernel(z, &left) && zp_fionread(z) > 0) || rx_avail(z) != 0 ||
		    (!z->is_unix && zp_linger_abort(z->fd)))
			atomic_store_explicit(&z->sh->reset[z->side], 1, memory_order_relaxed);
		else
			zp_drain(z); /* unread wake-ups would make the kernel reset */
		atomic_store_explicit(&z->tx->closed, 1, memory_order_release);
		atomic_store_explicit(&z->sh->gone[z->side], 1, memory_order_release);
		NOTIFY_RX(z);
		NOTIFY_TX(z);
	}
	bury(z, false);
}

/* fork: the child will hold every side this process holds. The count goes
 * up before the fork (the parent may close its copy before the child
 * runs a line), and down again if the fork failed. */
static void fork_count(int d)
{
	int hi = atomic_load(&table_hi);
	for (int i = 0; table && i < hi; i++) {
		struct zsock *z = atomic_load_explicit(&table[i], memory_order_relaxed);
		bool first = z != NULL;
		for (int j = 0; first && j < i; j++) /* once per zsock */
			first = atomic_load_explicit(&table[j], memory_order_relaxed) != z;
		if (first && z->sh)
			atomic_fetch_add(&z->sh->refs[z->side], d);
		if (first && z->xh)
			zx_fork_count(z, d);
	}
}

void zp_fork_prepare(void) { fork_count(1); }

/* A process leaving (_exit, exit): its sockets switched across hosts are
 * closed first, as the kernel would close them. TCP delivers what was
 * written before a process left; an rdma channel dies with its process,
 * and with it what it had posted and not yet seen leave: zx_closed waits
 * for that (bounded) and ends the stream. */
void zp_leave(void)
{
	int hi = atomic_load(&table_hi);
	for (int i = 0; table && i < hi; i++) {
		struct zsock *z = atomic_load_explicit(&table[i], memory_order_relaxed);
		if (z && z->xh) {
			zp_forget(i);
			zp_real.close(i);
		}
	}
}

void zp_fork_failed(void) { fork_count(-1); }

void zp_atfork_child(void)
{
	int hi = atomic_load(&table_hi);
	for (int i = 0; table && i < hi; i++) {
		struct zsock *z = atomic_load_explicit(&table[i], memory_order_relaxed);
		if (z)
			pthread_mutex_init(&z->lock, NULL);
		if (z && z->fd == i)
			zp_name_child(z, i); /* offered, not joined yet: we hold it too */
		if (z && z->xh)
			zx_atfork_child(z);
	}
}

/* ---- switching ----------------------------------------------------------- */

/* Our sends move to the ring (under z->lock). */
static void switch_tx(struct zsock *z)
{
	atomic_store_explicit(&z->tx->kbytes, atomic_load(&z->tx_k), memory_order_relaxed);
	atomic_store_explicit(&z->tx->state, 1, memory_order_release);
	atomic_store_explicit(&z->tx_ring, true, memory_order_release);
	NOTIFY_RX(z);
	NOTIFY_TX(z); /* a wake-up we could not send before (wake) */
}

/* The client gave up its join: in every fd that names it the socket is a
 * kernel socket again (under z->lock; epoll sets notice, wait.c). */
_Atomic unsigned zp_gave_up;

static void unswitch(struct zsock *z)
{
	atomic_store(&z->pending, false);
	atomic_fetch_add(&zp_gave_up, 1);
	zp_join_free(z);
	int hi = atomic_load(&table_hi);
	for (int i = 0; i < hi; i++) {
		struct zsock *w = z;
		if (atomic_compare_exchange_strong(&table[i], &w, NULL))
			z->refs--;
	}
	if (!z->refs)
		bury(z, true);
}


/* Our sends move to the ring, unless another process of ours (a fork)
 * moved them already (under z->lock). */
static void switch_tx_once(struct zsock *z)
{
	if (z->wr_shut)
		return; /* the kernel stream carries our end */
	if (atomic_load_explicit(&z->tx->state, memory_order_acquire))
		atomic_store_explicit(&z->tx_ring, true, memory_order_release);
	else
		switch_tx(z);
}

/* The client, until it proved the server: the answer is looked for once
 * the server says it answered (a hint: the rings are not trusted yet),
 * and given up when none came in time; a fork may have done either. */
static void client_poll(struct zsock *z)
{
	uint32_t st = atomic_load_explicit(&z->fam->state, memory_order_acquire);
	if (st == ZP_PENDING && !atomic_load_explicit(&z->sh->joined, memory_order_relaxed) &&
	    ((atomic_fetch_add_explicit(&z->pend_calls, 1, memory_order_relaxed) & 63) ||
	     zl_now_us() <= z->join_until))
		return;
	pthread_mutex_lock(&z->lock);
	if (atomic_load(&z->pending)) {
		uint32_t want = ZP_PENDING;
		int r = atomic_load(&z->fam->state) == ZP_PENDING ? zp_client_join(z) : 0;
		if (r)
			atomic_compare_exchange_strong(&z->fam->state, &want,
						       r > 0 ? ZP_PROVEN : ZP_GAVE_UP);
		st = atomic_load(&z->fam->state);
		if (st == ZP_PROVEN) {
			atomic_store_explicit(&z->sh->client_ok, 1, memory_order_release);
			switch_tx_once(z);
			if (z->hello_fd >= 0)
				zp_real.close(z->hello_fd);
			z->hello_fd = -1;
			atomic_store(&z->pending, false);
		} else if (st == ZP_GAVE_UP) {
			unswitch(z);
		}
	}
	pthread_mutex_unlock(&z->lock);
}

/* A switch that waits for the other end: the client's proof of the
 * server, or, on the server, the client's word that it proved us. */
void zp_poll_join(struct zsock *z)
{
	if (atomic_load_explicit(&z->tx_ring, memory_order_acquire) || !z->sh)
		return;
	if (z->side == 0) {
		if (atomic_load_explicit(&z->pending, memory_order_acquire))
			client_poll(z);
		return;
	}
	if (atomic_load_explicit(&z->joined_seen, memory_order_acquire) ||
	    !atomic_load_explicit(&z->sh->client_ok, memory_order_acquire))
		return;
	pthread_mutex_lock(&z->lock);
	if (!atomic_load(&z->joined_seen)) {
		if (z->hello_fd >= 0) /* no longer needed for the client's proofs */
			zp_real.close(z->hello_fd);
		z->hello_fd = -1;
		switch_tx_once(z);
		atomic_store_explicit(&z->joined_seen, true, memory_order_release);
		ZL_LOG(ZL_LOG_DEBUG, "preload: accepted fd %d: the client proved us; our sends "
		       "use the ring", z->fd);
	}
	pthread_mutex_unlock(&z->lock);
}

bool zp_give_up(struct zsock *z)
{
	if (!atomic_load(&z->pending))
		return false;
	uint32_t want = ZP_PENDING;
	atomic_compare_exchange_strong(&z->fam->state, &want, ZP_GAVE_UP);
	zp_poll_join(z);
	return atomic_load(&z->fam->state) == ZP_GAVE_UP;
}

/* The peer's side is closed for good: it closed its last copy, or its
 * kernel socket ended after it had switched without a shutdown (once
 * switched it shuts down only its ring: an end of the kernel stream is then
 * its last close, or its death). A peer that shut down before switching
 * ended the kernel stream alive; its death shows in a probe (zp_probe). */
static bool peer_gone(struct zsock *z)
{
	if (!trusted(z))
		return false;
	return atomic_load_explicit(&z->sh->gone[1 - z->side], memory_order_acquire) ||
	       (atomic_load(&z->peer_eof) && rx_switch(z) != ZP_UNLATCHED && !peer_closed(z));
}

/* ---- receiving ----------------------------------------------------------- */

/* Whether what the peer writes in the rings counts yet: a client's rings
 * only after its family proved the server (rendezvous.c); until then
 * both directions are on the kernel stream, and whoever else may hold the
 * memfd can write nothing that is read. */
static inline bool trusted(struct zsock *z)
{
	if (__builtin_expect(atomic_load_explicit(&z->trusted, memory_order_relaxed), 1))
		return true;
	if (!z->fam || atomic_load_explicit(&z->fam->state, memory_order_acquire) != ZP_PROVEN)
		return false;
	atomic_store_explicit(&z->trusted, true, memory_order_relaxed);
	return true;
}

/* The peer broke the protocol (sock.c's top): the connection ends. */
static void lie(struct zsock *z, const char *what)
{
	static struct zl_ratelimit rl;
	atomic_store(&z->lied, true);
	if (atomic_exchange(&z->reset_seen, true))
		return;
	ZL_LOG_RL(&rl, ZL_LOG_WARN, "preload: fd %d: the peer lied (%s): connection reset",
		  z->fd, what);
	zp_real.shutdown(z->fd, SHUT_RDWR);
}

/* The peer reset the connection, or lied: sticky, as the kernel's reset. */
static bool peer_reset(struct zsock *z)
{
	if (atomic_load_explicit(&z->reset_seen, memory_order_acquire))
		return true;
	if (!trusted(z) || !atomic_load_explicit(&z->sh->reset[1 - z->side], memory_order_acquire))
		return false;
	atomic_store(&z->reset_seen, true);
	return true;
}

/* The peer's switch, read once: its kbytes, or ZP_UNLATCHED before it. */
static uint64_t rx_switch(struct zsock *z)
{
	uint64_t kb = atomic_load_explicit(&z->rx_kb, memory_order_acquire);
	if (kb != ZP_UNLATCHED || !trusted(z) ||
	    !atomic_load_explicit(&z->rx->state, memory_order_acquire))
		return kb;
	uint64_t k = atomic_load_explicit(&z->rx->kbytes, memory_order_relaxed);
	if (k == ZP_UNLATCHED)
		k--; /* more than any stream carries: the lie shows at its end */
	if (atomic_compare_exchange_strong(&z->rx_kb, &kb, k))
		kb = k;
	if (kb < z->rx_k)
		lie(z, "it had sent more on the kernel stream than it says");
	return kb;
}

static bool rx_on_kernel(struct zsock *z, uint64_t *left)
{
	uint64_t kb = rx_switch(z);
	if (kb == ZP_UNLATCHED) {
		*left = UINT64_MAX;
		return true;
	}
	*left = kb > z->rx_k ? kb - z->rx_k : 0;
	return *left > 0;
}

/* The peer's end of stream (closed), read once with the tail it ended at. */
static bool peer_closed(struct zsock *z)
{
	if (atomic_load_explicit(&z->closed_seen, memory_order_acquire))
		return true;
	if (!trusted(z) || !atomic_load_explicit(&z->rx->closed, memory_order_acquire))
		return false;
	uint64_t none = ZP_UNLATCHED;
	atomic_compare_exchange_strong(&z->closed_tail, &none,
				       atomic_load_explicit(&z->rx->tail, memory_order_acquire));
	atomic_store_explicit(&z->closed_seen, true, memory_order_release);
	return true;
}

/* Bytes in the ring, or -1: the peer broke the ring (the connection is
 * reset then). */
static int64_t rx_avail(struct zsock *z)
{
	if (!trusted(z))
		return 0;
	/* Another thread of ours may consume meanwhile (a readiness check
	 * beside a read): only a tail read while head stood still proves a
	 * lie; an honest tail is never more than a ring ahead of any head. */
	uint64_t h, t;
	int tries = 0;
	do {
		h = atomic_load_explicit(&z->rx->head, memory_order_acquire);
		t = atomic_load_explicit(&z->rx->tail, memory_order_acquire);
	} while (h != atomic_load_explicit(&z->rx->head, memory_order_acquire) && ++tries < 16);
	if (t - h > z->size) {
		if (tries == 16)
			return 0; /* no still view: nothing for this look */
		lie(z, "its ring's tail");
		return -1;
	}
	if (atomic_load_explicit(&z->closed_seen, memory_order_acquire) &&
	    t != atomic_load_explicit(&z->closed_tail, memory_order_relaxed)) {
		lie(z, "bytes after its end of stream");
		return -1;
	}
	return (int64_t)(t - h);
}

static int64_t tx_room(struct zsock *z)
{
	/* the same with our tail, which another thread of ours may move */
	uint64_t h, t;
	int tries = 0;
	do {
		t = atomic_load_explicit(&z->tx->tail, memory_order_acquire);
		h = atomic_load_explicit(&z->tx->head, memory_order_acquire);
	} while (t != atomic_load_explicit(&z->tx->tail, memory_order_acquire) && ++tries < 16);
	if (t - h > z->size) {
		if (tries == 16)
			return 0; /* no still view: no room for this look */
		lie(z, "its ring's head");
		return -1;
	}
	return (int64_t)(z->size - (t - h));
}

/* Copy between the ring at position pos and the iovecs, from byte off. */
static void ring_copy(uint8_t *ring, uint32_t size, uint64_t pos, const struct iovec *iov,
		      int n, size_t off, size_t len, bool to_ring)
{
	for (int i = 0; i < n && len; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		size_t c = iov[i].iov_len - off;
		if (c > len)
			c = len;
		uint8_t *b = (uint8_t *)iov[i].iov_base + off;
		for (size_t done = 0; done < c;) {
			uint32_t at = (uint32_t)(pos % size);
			size_t k = size - at < c - done ? size - at : c - done;
			if (to_ring)
				memcpy(ring + at, b + done, k);
			else
				memcpy(b + done, ring + at, k);
			done += k;
			pos += k;
		}
		len -= c;
		off = 0;
	}
}

/* The iovecs from byte off, at most max bytes, into tmp (n entries). */
static int iov_sub(const struct iovec *iov, int n, size_t off, size_t max, struct iovec *tmp)
{
	int k = 0;
	for (int i = 0; i < n && max; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		size_t c = iov[i].iov_len - off;
		if (c > max)
			c = max;
		tmp[k].iov_base = (uint8_t *)iov[i].iov_base + off;
		tmp[k++].iov_len = c;
		max -= c;
		off = 0;
	}
	return k;
}

static int64_t deadline_of(struct zsock *z, int flags, bool rx)
{
	if ((flags & MSG_DONTWAIT) || atomic_load_explicit(&z->nonblock, memory_order_relaxed))
		return 0;
	int64_t t = rx ? z->rcvtimeo_us : z->sndtimeo_us;
	return t > 0 ? zl_now_us() + t : ZL_NEVER;
}

/* From the kernel stream, up to max bytes: >0, 0 (its end), -1 (errno). */
static ssize_t rx_kernel(struct zsock *z, const struct iovec *iov, int n, size_t off,
			 uint64_t max, int flags)
{
	struct iovec tmp[64];
	int k = iov_sub(iov, n > 64 ? 64 : n, off, max > SIZE_MAX ? SIZE_MAX : (size_t)max, tmp);
	struct msghdr m = { .msg_iov = tmp, .msg_iovlen = (size_t)k };
	ssize_t r = zp_real.recvmsg(z->fd, &m, (flags & MSG_PEEK) | MSG_DONTWAIT);
	if (r <= 0)
		return r;
	uint64_t left;
	if (!rx_on_kernel(z, &left)) /* switched meanwhile, with all kbytes read */
		left = 0;
	if ((uint64_t)r > left) /* past kbytes: wake-ups, not data */
		r = (ssize_t)left;
	if (!(flags & MSG_PEEK))
		z->rx_k += (uint64_t)r;
	return r;
}

ssize_t zp_recv(struct zsock *z, const struct iovec *iov, int n, int flags)
{
	if (z->xh)
		return zx_recv(z, iov, n, flags);
	size_t total = 0, got = 0;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	if (!total)
		return 0;
	int64_t deadline = deadline_of(z, flags, true);
	bool all = (flags & MSG_WAITALL) && !(flags & MSG_PEEK);
	for (;;) {
		zp_poll_join(z);
		uint64_t left;
		if (rx_on_kernel(z, &left)) {
			ssize_t r = rx_kernel(z, iov, n, got, left < total - got ? left : total - got,
					      flags);
			if (r > 0) {
				got += (size_t)r;
				if (!all || got == total)
					return (ssize_t)got;
				continue;
			}
			if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
				return got ? (ssize_t)got : -1;
			if (r == 0) {
				uint64_t kb = rx_switch(z);
				if (kb == ZP_UNLATCHED)
					return (ssize_t)got; /* the end, before any switch */
				if (z->rx_k < kb)
					lie(z, "its kernel stream ended before its kbytes");
				atomic_store(&z->peer_eof, true);
			}
		}
		if (!rx_on_kernel(z, &left)) {
			int64_t a = rx_avail(z);
			if (a > 0) {
				size_t c = (size_t)a < total - got ? (size_t)a : total - got;
				uint64_t h = atomic_load_explicit(&z->rx->head, memory_order_relaxed);
				ring_copy(z->rxr, z->size, h, iov, n, got, c, false);
				got += c;
				if (flags & MSG_PEEK)
					return (ssize_t)got;
				atomic_store_explicit(&z->rx->head, h + c, memory_order_release);
				NOTIFY_TX(z);
				if (!all || got == total)
					return (ssize_t)got;
				continue;
			}
		}
		/* nothing more now: what came before a reset is read first, as
		 * the kernel hands out its queue before the error */
		if (peer_reset(z)) {
			if (got || z->reset_told)
				return (ssize_t)got;
			z->reset_told = true;
			errno = ECONNRESET;
			return -1;
		}
		if (!rx_on_kernel(z, &left) && (peer_closed(z) || atomic_load(&z->peer_eof))) {
			if (rx_avail(z) > 0)
				continue; /* written before the end */
			return (ssize_t)got;
		}
		if ((got && !all) || z->rd_shut) /* shut for reading: what came, then 0 */
			return (ssize_t)got;
		int r = deadline ? zp_wait_one(z, POLLIN, deadline) : -EAGAIN;
		if (r) {
			errno = r == -ETIMEDOUT ? EAGAIN : -r;
			return got ? (ssize_t)got : -1;
		}
	}
}

/* ---- sending ------------------------------------------------------------- */

ssize_t zp_epipe(int flags)
{
	if (!(flags & MSG_NOSIGNAL))
		pthread_kill(pthread_self(), SIGPIPE);
	errno = EPIPE;
	return -1;
}

/*
 * A send to a peer that reset the connection (reset) or is gone, as the
 * kernel answers it: on TCP a zero-length send and the first send after
 * the peer's close succeed (the peer's kernel then resets us: EPIPE is
 * pending, for the next send or SO_ERROR), the peer's reset is reported
 * once (the one error that recv and SO_ERROR report too), and EPIPE with
 * SIGPIPE after; on a Unix socket every send fails with EPIPE (the reset
 * stays for recv).
 */
static ssize_t send_refused(struct zsock *z, size_t total, int flags, bool reset)
{
	if (reset && !z->is_unix && !z->reset_told) {
		z->reset_told = true;
		errno = ECONNRESET;
		return -1;
	}
	if (z->is_unix || reset || z->gone_sent) {
		if (z->so_err == EPIPE)
			z->so_err = 0;
		return zp_epipe(flags);
	}
	if (total) { /* the bytes are lost, as in the peer's kernel */
		z->gone_sent = true;
		z->so_err = EPIPE;
	}
	return (ssize_t)total;
}

ssize_t zp_send(struct zsock *z, const struct iovec *iov, int n, int flags)
{
	if (z->xh)
		return zx_send(z, iov, n, flags);
	size_t total = 0, sent = 0;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	if (z->wr_shut)
		return zp_epipe(flags);
	int64_t deadline = deadline_of(z, flags, false);
	for (;;) {
		zp_poll_join(z);
		bool ring = atomic_load_explicit(&z->tx_ring, memory_order_acquire);
		if (ring || atomic_load(&z->lied)) { /* (on the kernel stream: its rules) */
			if (peer_reset(z))
				return sent ? (ssize_t)sent : send_refused(z, total, flags, true);
			if (ring && peer_gone(z)) {
				ZL_LOG(ZL_LOG_DEBUG, "preload: fd %d: the peer is gone (%s)", z->fd,
				       atomic_load(&z->sh->gone[1 - z->side]) ? "closed" : "kernel EOF");
				return sent ? (ssize_t)sent : send_refused(z, total, flags, false);
			}
		}
		if (!ring) {
			/* before our switch: the kernel stream, counted exactly */
			pthread_mutex_lock(&z->lock);
			if (atomic_load_explicit(&z->tx_ring, memory_order_relaxed)) {
				pthread_mutex_unlock(&z->lock);
				continue;
			}
			struct iovec tmp[64];
			int k = iov_sub(iov, n > 64 ? 64 : n, sent, total - sent, tmp);
			struct msghdr m = { .msg_iov = tmp, .msg_iovlen = (size_t)k };
			ssize_t r = zp_real.sendmsg(z->fd, &m, flags | MSG_DONTWAIT);
			if (r > 0)
				z->tx_k += (uint64_t)r;
			pthread_mutex_unlock(&z->lock);
			if (r > 0)
				sent += (size_t)r;
			else if (errno != EAGAIN && errno != EWOULDBLOCK)
				return sent ? (ssize_t)sent : -1;
		} else {
			if (!(++z->sends & 63)) { /* notice a peer that died, now and then */
				int64_t now = zl_now_us();
				if (now >= z->next_look) {
					z->next_look = now + 10000;
					zp_drain(z);
				}
			}
			int64_t room = tx_room(z);
			if (room < 0) /* a lie */
				return sent ? (ssize_t)sent : send_refused(z, total, flags, true);
			if ((size_t)room < total - sent)
				atomic_store_explicit(&z->tx_full, true, memory_order_relaxed);
			if (room > 0 && sent < total) {
				size_t c = (size_t)room < total - sent ? (size_t)room : total - sent;
				uint64_t t = atomic_load_explicit(&z->tx->tail, memory_order_relaxed);
				ring_copy(z->txr, z->size, t, iov, n, sent, c, true);
				atomic_store_explicit(&z->tx->tail, t + c, memory_order_release);
				NOTIFY_RX(z);
				sent += c;
			}
		}
		if (sent == total || (sent && !deadline))
			return (ssize_t)sent;
		int r = deadline ? zp_wait_one(z, POLLOUT, deadline) : -EAGAIN;
		if (r == -EPIPE) {
			ZL_LOG(ZL_LOG_DEBUG, "preload: fd %d: the peer died with our ring full", z->fd);
			return sent ? (ssize_t)sent : zp_epipe(flags);
		}
		if (r) {
			errno = r == -ETIMEDOUT ? EAGAIN : -r;
			return sent ? (ssize_t)sent : -1;
		}
	}
}

/* Once our sends use the ring, the kernel socket stays open both ways: it
 * carries the wake-ups, also those the peer needs after our SHUT_WR. */
int zp_shutdown(struct zsock *z, int how)
{
	if (z->xh)
		return zx_shutdown(z, how);
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
		errno = EINVAL;
		return -1;
	}
	zp_poll_join(z);
	pthread_mutex_lock(&z->lock);
	bool ring = atomic_load(&z->tx_ring);
	if (how != SHUT_RD) {
		z->wr_shut = true;
		atomic_store_explicit(&z->tx->closed, 1, memory_order_release);
		NOTIFY_RX(z);
	}
	if (how != SHUT_WR)
		z->rd_shut = true;
	pthread_mutex_unlock(&z->lock);
	if (how == SHUT_RD || ring)
		return zp_real.fcntl(z->fd, F_GETFD) < 0 ? -1 : 0; /* EBADF as the kernel */
	return zp_real.shutdown(z->fd, SHUT_WR);
}

size_t zp_tx_room(struct zsock *z)
{
	if (z->xh)
		return zx_tx_room(z);
	zp_poll_join(z);
	if (!atomic_load_explicit(&z->tx_ring, memory_order_acquire))
		return SIZE_MAX;
	int64_t r = tx_room(z);
	return r > 0 ? (size_t)r : 0;
}

int zp_fionread(struct zsock *z)
{
	if (z->xh)
		return zx_fionread(z);
	uint64_t left;
	int k = 0;
	if (rx_on_kernel(z, &left)) {
		if (zp_real.ioctl(z->fd, FIONREAD, &k) || k < 0)
			k = 0;
		if ((uint64_t)k > left)
			k = (int)left;
		if (left != UINT64_MAX || k)
			return k;
	}
	int64_t a = rx_avail(z);
	return a > 0 ? (int)(a > INT32_MAX ? INT32_MAX : a) : 0;
}

/* ---- readiness ----------------------------------------------------------- */

short zp_ready(struct zsock *z, short events)
{
	if (z->xh)
		return zx_ready(z, events);
	short r = 0;
	uint64_t left;
	zp_poll_join(z);
	bool end = peer_closed(z) || atomic_load(&z->peer_eof);
	if (!rx_on_kernel(z, &left) && (rx_avail(z) != 0 || end))
		r |= POLLIN | (end ? POLLRDHUP : 0);
	if (z->rd_shut)
		r |= POLLIN | POLLRDHUP;
	if (end && (z->wr_shut || (z->is_unix && peer_gone(z))))
		r |= POLLHUP; /* both ways shut, as the kernel says */
	if (z->gone_sent) /* TCP: the peer's kernel reset us */
		r |= POLLHUP | (z->so_err ? POLLERR : 0);
	if (atomic_load_explicit(&z->reset_seen, memory_order_acquire) &&
	    !atomic_load_explicit(&z->tx_ring, memory_order_acquire))
		r |= POLLIN | POLLHUP | (z->reset_told ? 0 : POLLERR); /* a lie, on the kernel */
	if (atomic_load_explicit(&z->tx_ring, memory_order_acquire)) {
		if (peer_reset(z))
			r |= POLLOUT | POLLHUP | (z->reset_told ? 0 : POLLERR); /* until read */
		else if (peer_gone(z))
			r |= POLLOUT;
		else if (tx_room(z) != 0)
			r |= POLLOUT;
	}
	return (short)(r & (events | POLLERR | POLLHUP));
}

int zp_arm(struct zsock *z, short events, short *armed)
{
	if (z->xh)
		return zx_arm(z, events, armed);
	*armed = 0;
	int crowded = atomic_fetch_add(&z->users, 1) ? ZP_CROWDED : 0;
	if (events & POLLIN) {
		atomic_store_explicit(&z->rx->rx_kick, 0, memory_order_relaxed);
		atomic_fetch_add_explicit(&z->rx->rx_sleeping, 1, memory_order_relaxed);
		*armed |= POLLIN;
	}
	if ((events & POLLOUT) && atomic_load_explicit(&z->tx_ring, memory_order_acquire)) {
		atomic_store_explicit(&z->tx->tx_kick, 0, memory_order_relaxed);
		atomic_fetch_add_explicit(&z->tx->tx_sleeping, 1, memory_order_relaxed);
		*armed |= POLLOUT;
	}
	atomic_thread_fence(memory_order_seq_cst);
	/* a client not joined yet: the server's join wakes us too (POLLIN) */
	return (zp_ready(z, events) ? ZP_READY : 0) | crowded;
}

void zp_disarm(struct zsock *z, short armed)
{
	if (z->xh) {
		zx_disarm(z, armed);
		return;
	}
	if (armed & POLLIN)
		atomic_fetch_sub_explicit(&z->rx->rx_sleeping, 1, memory_order_relaxed);
	if (armed & POLLOUT)
		atomic_fetch_sub_explicit(&z->tx->tx_sleeping, 1, memory_order_relaxed);
	atomic_fetch_sub(&z->users, 1);
}

bool zp_rx_on_kernel(struct zsock *z)
{
	if (z->xh)
		return false;
	uint64_t left;
	return rx_on_kernel(z, &left);
}

bool zp_probe(struct zsock *z)
{
	static const char b = 0;
	int err = 0;
	socklen_t l = sizeof(err);
	if (zp_real.send(z->fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 &&
	    (errno == EPIPE || errno == ECONNRESET))
		return true;
	return !zp_real.getsockopt(z->fd, SOL_SOCKET, SO_ERROR, &err, &l) &&
	       (err == EPIPE || err == ECONNRESET);
}

void zp_drain(struct zsock *z)
{
	if (z->xh)
		return; /* the channel drains its own fd when armed */
	uint64_t left;
	if (rx_on_kernel(z, &left))
		return; /* what is there is data */
	if (atomic_load(&z->users) > 0)
		return; /* others of ours sleep on it: the wake-up may be theirs */
	char buf[256];
	for (int i = 0; i < 64; i++) {
		ssize_t r = zp_real.recv(z->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
			atomic_store(&z->peer_eof, true);
			return;
		}
		if (r < (ssize_t)sizeof(buf))
			return;
	}
}

/* ---- exec ------------------------------------------------------------------ */

/*
 * A switched socket without FD_CLOEXEC survives exec only if the new image
 * runs the preload too: its state (and the memfd, inherited for this) is
 * passed in ZL_PRELOAD_FDS, and the new image maps the rings again. For an
 * image without the preload (keep false) such an fd is replaced by an
 * epoll fd, on which every read and write fails with EINVAL: an error,
 * never the wake-up bytes as data.
 */
static struct {
	int fd, saved, mem, side;
} undo[256];
static int nundo;

char *zp_exec_state(bool keep)
{
	size_t cap = 64, len = 0;
	char *s = NULL;
	nundo = 0;
	for (int fd = 0; fd < atomic_load(&table_hi) && nundo < 256; fd++) {
		struct zsock *z = zp_get(fd);
		int fl = z ? zp_real.fcntl(fd, F_GETFD) : -1;
		if (!z || fl < 0 || (fl & FD_CLOEXEC) || zp_give_up(z))
			continue; /* a client not proven is a kernel socket there */
		undo[nundo] = (typeof(undo[0])){ fd, -1, -1, -1 };
		if (!keep) {
			int ep = epoll_create1(0);
			undo[nundo].saved = zp_real.fcntl(fd, F_DUPFD_CLOEXEC, 512);
			if (ep >= 0 && undo[nundo].saved >= 0)
				zp_real.dup3(ep, fd, 0);
			if (ep >= 0)
				zp_real.close(ep);
			nundo++;
			continue;
		}
		char e[160];
		int n;
		if (z->xh) { /* across hosts: its shared state and side connection */
			n = zx_exec_entry(z, fd, e, sizeof(e), &undo[nundo].mem, &undo[nundo].side);
			if (n <= 0)
				continue;
			nundo++;
		} else {
			if (z->mem < 0 || zp_real.fcntl(z->mem, F_SETFD, 0))
				continue;
			undo[nundo++].mem = z->mem;
			n = snprintf(e, sizeof(e), "%d:%d:%d:%u:%llu:%llu:%d:%d;", fd, z->mem, z->side,
				     z->size, (unsigned long long)atomic_load(&z->rx_k),
				     (unsigned long long)atomic_load(&z->tx_k), (int)atomic_load(&z->tx_ring),
				     (int)z->wr_shut);
		}
		if (!s && !(s = malloc(cap)))
			return NULL;
		if (!len)
			len = (size_t)sprintf(s, "ZL_PRELOAD_FDS=");
		if (len + (size_t)n + 1 > cap) {
			char *t = realloc(s, cap = (len + (size_t)n + 1) * 2);
			if (!t)
				break;
			s = t;
		}
		memcpy(s + len, e, (size_t)n + 1);
		len += (size_t)n;
	}
	return s;
}

void zp_exec_failed(void)
{
	for (int i = 0; i < nundo; i++) {
		if (undo[i].mem >= 0)
			zp_real.fcntl(undo[i].mem, F_SETFD, FD_CLOEXEC);
		if (undo[i].side >= 0)
			zp_real.fcntl(undo[i].side, F_SETFD, FD_CLOEXEC);
		if (undo[i].saved >= 0) {
			zp_real.dup3(undo[i].saved, undo[i].fd, 0);
			zp_real.close(undo[i].saved);
		}
	}
	nundo = 0;
}

void zp_exec_adopt(const char *st)
{
	while (st && *st) {
		if (*st == 'X') { /* across hosts (xhost.c) */
			zx_exec_adopt(st + 1);
			st = strchr(st, ';');
			st = st ? st + 1 : NULL;
			continue;
		}
		int fd, mem, side, tx_ring, wr_shut;
		unsigned ring;
		unsigned long long rx_k, tx_k;
		if (sscanf(st, "%d:%d:%d:%u:%llu:%llu:%d:%d;", &fd, &mem, &side, &ring, &rx_k, &tx_k,
			   &tx_ring, &wr_shut) != 8)
			break;
		st = strchr(st, ';');
		st = st ? st + 1 : NULL;
		struct zsock *z = side == 0 || side == 1 ? zp_map(mem, ring, side) : NULL;
		if (!z) {
			ZL_LOG(ZL_LOG_ERROR, "preload: cannot adopt switched fd %d after exec", fd);
			continue;
		}
		z->fd = fd;
		int dom = 0;
		socklen_t dl = sizeof(dom);
		z->is_unix = !zp_real.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &dl) && dom == AF_UNIX;
		z->mem = zp_real.fcntl(mem, F_DUPFD_CLOEXEC, 512);
		zp_real.close(mem);
		z->rx_k = rx_k;
		z->tx_k = tx_k;
		atomic_store(&z->trusted, true); /* a client passes only once proven */
		atomic_store(&z->tx_ring, tx_ring != 0);
		z->wr_shut = wr_shut != 0;
		atomic_store(&z->nonblock, (zp_real.fcntl(fd, F_GETFL) & O_NONBLOCK) != 0);
		zp_adopt(fd, z); /* the program's TCP_NODELAY is lost across exec */
	}
}
