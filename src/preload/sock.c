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
 * One socket, many holders. Threads and processes (fork, exec) that hold
 * one side see one socket, as the kernel's: its state (where each stream
 * stands, the errors told, O_NONBLOCK, its options) is in the side's own
 * page (struct zp_own, own.c), and each read and each ring write is one
 * step under its locks whenever another thread or process may call too.
 *
 * End of stream: shutdown(SHUT_WR), or the last close in the last process
 * holding the side (procs; a process that exits closes its copies), sets
 * closed after the final tail; the kernel stream's own end (a process
 * killed) is noticed in a drain. Writing to a
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
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "preload.h"
/* ---- the fd table -------------------------------------------------------- */

#define MAX_FDS (1 << 20)
static _Atomic(struct zsock *) *table;
static int table_len;
static _Atomic int table_hi; /* above every fd ever set: scans stop there */
static pthread_once_t table_once = PTHREAD_ONCE_INIT;
static pid_t my_pid; /* the table's process (zp_leave): renewed at fork */
/* per fd: where the socket handed back to the kernel there (unswitch)
 * stood, for epoll's EPOLLET edges across the hand-back */
struct left {
	_Atomic uint64_t rtail; /* the peer's ring tail */
	_Atomic uint32_t wakes; /* own_wakes, and our kernel shutdowns since */
};
static struct left *lefts;

static void table_init(void)
{
	struct rlimit rl;
	rlim_t n = getrlimit(RLIMIT_NOFILE, &rl) ? 1024 : rl.rlim_max;
	if (n == RLIM_INFINITY || n > MAX_FDS)
		n = MAX_FDS;
	my_pid = getpid();
	table = calloc((size_t)n, sizeof(*table));
	lefts = table ? calloc((size_t)n, sizeof(*lefts)) : NULL;
	if (!lefts) {
		free(table);
		table = NULL;
	}
	table_len = table ? (int)n : 0;
}

/* A vfork child (CPython's subprocess, posix_spawn) runs on our memory
 * until it execs or leaves, and closes and dups fds in its own table: what
 * it does must not touch our fd table (its close of a switched socket is
 * not ours). A fork child renews my_pid (zp_atfork_child); a vfork child
 * runs no fork handler. */
bool zp_vforked(void)
{
	return my_pid && (pid_t)syscall(SYS_getpid) != my_pid;
}

void zp_pid_init(void)
{
	my_pid = getpid();
}

bool zp_left_of(int fd, uint64_t *rtail, uint32_t *wakes)
{
	if (!lefts || fd < 0 || fd >= table_len)
		return false;
	*rtail = atomic_load(&lefts[fd].rtail);
	*wakes = atomic_load(&lefts[fd].wakes);
	return true;
}

/* A shutdown of the kernel socket at fd: a wake-up of its waiters, which
 * an epoll set that still watches it through our registration would miss */
void zp_left_wake(int fd)
{
	if (lefts && fd >= 0 && fd < table_len)
		atomic_fetch_add(&lefts[fd].wakes, 1);
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
	zp_pub_socket(fd, z);
	int hi = atomic_load(&table_hi);
	while (fd >= hi && !atomic_compare_exchange_weak(&table_hi, &hi, fd + 1))
		;
}

/*
 * A read that had taken bytes (from the ring, or the kernel stream) and
 * then found the kernel socket's error (its reset): the kernel's own read
 * returns the bytes and leaves the error pending for the next call, but
 * ours took it from the kernel socket. It is held here and reported, once,
 * by the next read, send or SO_ERROR, and shown by poll (POLLERR); the
 * socket stays switched until then (zp_back_done), since the kernel
 * socket no longer knows it.
 */
void zp_hold_kerr(struct zsock *z, int err)
{
	/* the socket's own errors only (a fault in the caller's buffer is
	 * the call's, not the socket's) */
	if (err != ECONNRESET && err != EPIPE && err != ETIMEDOUT && err != EHOSTUNREACH &&
	    err != ENETUNREACH && err != ECONNABORTED)
		return;
	if (err == ECONNRESET && z->sh && zp_peer_reset(z)) {
		/* the reset we play: the same one, told once (reset_told) */
		if (z->o->reset_told)
			return;
	}
	int zero = 0;
	atomic_compare_exchange_strong(&z->o->kerr_held, &zero, err);
}

int zp_take_kerr(struct zsock *z)
{
	if (!atomic_load_explicit(&z->o->kerr_held, memory_order_relaxed))
		return 0;
	int e = atomic_exchange(&z->o->kerr_held, 0);
	if (e == ECONNRESET && z->sh && zp_peer_reset(z))
		z->o->reset_told = true; /* (the reset we play) */
	return e;
}

/* kerr, the kernel socket's pending error, or 0 where it is the reset we
 * play (the peer's close with bytes unread also resets the kernel socket:
 * zp_forget) and that reset was told already: one reset, told once. */
int zp_kerr_once(struct zsock *z, int kerr)
{
	if ((kerr != ECONNRESET && kerr != EPIPE) || !z->sh || !zp_peer_reset(z))
		return kerr;
	bool told = z->o->reset_told;
	z->o->reset_told = true;
	return told ? 0 : kerr;
}

/* A call on the kernel socket failed with err: where that is the reset we
 * play (the kernel socket learnt of it too), it has been told. TCP only:
 * a Unix send's EPIPE leaves the reset for a read. */
void zp_kernel_failed(struct zsock *z, int err)
{
	if (!z->is_unix && (err == ECONNRESET || err == EPIPE) && z->sh && zp_peer_reset(z))
		z->o->reset_told = true;
}

/* SO_ERROR of a switched socket (kerr: what the kernel socket says): on
 * one host the peer's reset, once (as the kernel clears a socket's error
 * when it reports it; a read then sees the end of the stream); across
 * hosts xhost.c's. */
int zp_so_error(struct zsock *z, int kerr)
{
	if (z->xh)
		return zx_so_error(z, kerr);
	int held = zp_take_kerr(z); /* (one the kernel socket no longer has) */
	if (held && !kerr)
		return held;
	if ((kerr == ECONNRESET || kerr == EPIPE) && z->sh && zp_peer_reset(z))
		return zp_kerr_once(z, kerr); /* the kernel socket's is the reset we play */
	if (kerr || !z->sh)
		return kerr;
	if (zp_peer_reset(z) && !z->o->reset_told) {
		z->o->reset_told = true;
		return zp_reset_err(z);
	}
	if ((kerr = zp_take_kerr(z)))
		return kerr;
	kerr = z->o->so_err; /* EPIPE after a send to a closed TCP peer */
	z->o->so_err = 0;
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
	z->o->rcvtimeo_us = kernel_timeo(fd, SO_RCVTIMEO);
	z->o->sndtimeo_us = kernel_timeo(fd, SO_SNDTIMEO);
	z->o->app_nodelay = -1;
	if (!z->is_unix && !zp_real.getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &l)) {
		z->o->app_nodelay = v;
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
	if (z->own_fd >= 0)
		zp_real.close(z->own_fd);
	z->mem = z->hello_fd = z->own_fd = -1;
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
	zp_own_free(z->o, true);
	if (z->own_fd >= 0)
		zp_real.close(z->own_fd);
	free(z);
}

/* The kernel socket itself is closed (its own kernel reset it: data met
 * it after both our shutdowns, which it knew once both ways were back). */
static bool kernel_closed(int fd)
{
	struct tcp_info ti;
	socklen_t l = sizeof(ti);
	return !zp_real.getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) && ti.tcpi_state == TCP_CLOSE;
}

/* A TCP socket that a reset (or both FINs) closed sends nothing when it
 * is closed; ours, which played that close, still has a live kernel
 * socket whose unread bytes would make its close a reset the peer's kernel
 * socket never had: they are read first (bounded: 64 MiB). */
static void flush_kernel(int fd)
{
	char buf[16384];
	for (int i = 0; i < 4096; i++)
		if (zp_real.recv(fd, buf, sizeof(buf), MSG_DONTWAIT) <= 0)
			break;
}

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
	if (z->sh && atomic_fetch_sub(&z->o->procs, 1) == 1) {
		/* the last copy of our side: the peer sees the end of the stream,
		 * or a reset if we leave bytes unread (as TCP sends RST), unless
		 * the TCP connection is closed already (both FINs crossed: the
		 * peer's socket is gone from the connection, as after a reset;
		 * or a reset closed ours: a closed socket sends nothing) */
		uint64_t left;
		bool closed = !z->is_unix && ((zp_wr_shut(z) && zp_peer_wr_shut(z)) ||
					      zp_peer_reset(z) || z->o->gone_sent ||
					      kernel_closed(z->fd));
		if (!closed && ((zp_rx_left(z, &left) && zp_fionread(z) > 0) || zp_rx_avail(z) != 0 ||
				(!z->is_unix && zp_linger_abort(z->fd)))) {
			/* (the peer stays switched while its bytes wait on its ring,
			 * zp_back_done: it learns of the reset there) */
			atomic_store_explicit(&z->sh->reset[z->side], 1, memory_order_relaxed);
		} else if (closed) {
			flush_kernel(z->fd); /* its unread bytes would make it reset */
		} else
			zp_drain(z); /* unread wake-ups would make the kernel reset */
		if (!z->o->tx_back) /* (after our way back the kernel's FIN says it) */
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
			atomic_fetch_add(&z->o->procs, d);
		if (first && z->xh)
			zx_fork_count(z, d);
	}
}

void zp_fork_prepare(void) { fork_count(1); }

/* A process leaving (_exit, exit): its switched sockets are closed first,
 * as the kernel closes them, so that the last holder's leaving ends the
 * stream on the ring at once (the peer would otherwise learn it from the
 * kernel stream's end, at its next look). TCP delivers what was written
 * before a process left; an rdma channel dies with its process, and with
 * it what it had posted and not yet seen leave: zx_closed waits for that
 * (bounded) and ends the stream. A vfork child shares our memory and our
 * parent's sockets stay its: it closes nothing. */
void zp_leave(void)
{
	if (!table || getpid() != my_pid)
		return;
	/* (with other threads still running, a socket on one host is left to
	 * the kernel's close: closing it under them could hand a thread's
	 * write a reused fd; its peer learns the end from the kernel stream) */
	bool alone = __libc_single_threaded;
	int hi = atomic_load(&table_hi);
	for (int i = 0; i < hi; i++) {
		struct zsock *z = atomic_load_explicit(&table[i], memory_order_relaxed);
		if (z && z->xh) {
			zp_forget(i);
			zp_real.close(i);
		} else if (z && alone) {
			zp_forget(i); /* (its kernel socket closes as the process ends) */
		}
	}
}

void zp_fork_failed(void) { fork_count(-1); }

void zp_atfork_child(void)
{
	my_pid = getpid();
	int hi = atomic_load(&table_hi);
	for (int i = 0; table && i < hi; i++) {
		struct zsock *z = atomic_load_explicit(&table[i], memory_order_relaxed);
		if (z) /* (its own locks are the side's: a holder in the parent
			* holds them for both) */
			pthread_mutex_init(&z->lock, NULL);
		if (z && z->fd == i)
			zp_name_child(z, i); /* offered, not joined yet: we hold it too */
		if (z && z->xh)
			zx_atfork_child(z);
	}
}

/* ---- switching ----------------------------------------------------------- */

/* The client gave up its join: in every fd that names it the socket is a
 * kernel socket again (under z->lock; epoll sets notice, wait.c). */
_Atomic unsigned zp_gave_up;

static void unswitch(struct zsock *z, const char *why)
{
	atomic_store(&z->pending, false);
	atomic_fetch_add(&zp_gave_up, 1);
	zp_join_free(z);
	int hi = atomic_load(&table_hi);
	uint32_t wakes = atomic_load(&z->o->own_wakes);
	uint64_t rtail = z->rx ? atomic_load(&z->rx->tail) : 0;
	for (int i = 0; i < hi; i++) {
		struct zsock *w = z;
		if (atomic_load_explicit(&table[i], memory_order_relaxed) == z) {
			atomic_store(&lefts[i].rtail, rtail);
			atomic_store(&lefts[i].wakes, wakes);
			zp_pub_kernel(i, why);
		}
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
	if (zp_wr_shut(z))
		return; /* the kernel stream carries our end */
	if (atomic_load_explicit(&z->tx->state, memory_order_acquire))
		atomic_store_explicit(&z->o->tx_ring, true, memory_order_release);
	else
		zp_switch_tx(z);
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
			for (int i = 0; i < atomic_load(&table_hi); i++) /* (for zl-ss) */
				if (atomic_load_explicit(&table[i], memory_order_relaxed) == z)
					zp_pub_socket(i, z);
		} else if (st == ZP_GAVE_UP) {
			unswitch(z, "no answer came from the other end");
		}
	}
	pthread_mutex_unlock(&z->lock);
}

/* A switch that waits for the other end: the client's proof of the
 * server, or, on the server, the client's word that it proved us. */
void zp_poll_join(struct zsock *z)
{
	if (atomic_load_explicit(&z->o->tx_ring, memory_order_acquire)) {
		if (atomic_load_explicit(&z->o->peer_back, memory_order_relaxed)) {
			pthread_mutex_lock(&z->lock); /* the peer went back: we follow */
			zp_switch_back(z);
			pthread_mutex_unlock(&z->lock);
		}
		return;
	}
	if (!z->sh)
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

/* Both directions back on the kernel stream and the peer's ring and
 * wake-ups consumed: the socket is a kernel socket again, here (and in
 * each process of ours when it gets here). */
/* Our reading side's shutdown is the kernel's too once both directions
 * are back on the kernel stream (TCP: a peer's data after both our
 * shutdowns resets; Unix: its sends fail). Before, the ring's wake-ups
 * come through the kernel socket, which a kernel SHUT_RD would make always
 * readable (and, on TCP after our FIN, reset by them). */
void zp_kernel_rd_shut(struct zsock *z)
{
	if (z->o->rd_shut && !atomic_load(&z->o->krd_shut) && z->o->tx_back && zp_rx_back(z)) {
		atomic_store(&z->o->krd_shut, true);
		zp_real.shutdown(z->fd, SHUT_RD);
		if (z->rx)
			atomic_store_explicit(&z->rx->krd_shut, 1, memory_order_release);
	}
}

void zp_back_done(struct zsock *z)
{
	if (!z->o->tx_back || atomic_load(&z->o->back_done))
		return;
	/* a reset we play for the kernel (the peer's, or ours after sending to
	 * a closed peer) stays ours to report: the kernel socket knows nothing
	 * of it */
	if (z->o->gone_sent || z->o->so_err || z->o->kerr_held || (z->sh && zp_peer_reset(z)))
		return;
	/* the peer's SHUT_RD that its kernel socket does not know yet (its
	 * sends were still on the ring then): our sends keep looking at it;
	 * and our bytes still on the ring: a close of the peer's with them
	 * unread is a reset that only the rings tell (its kernel socket
	 * holds nothing of ours) */
	if (z->tx && zp_trusted(z) &&
	    ((atomic_load_explicit(&z->tx->rd_shut, memory_order_acquire) &&
	      !atomic_load_explicit(&z->tx->krd_shut, memory_order_acquire)) ||
	     atomic_load_explicit(&z->tx->head, memory_order_acquire) !=
		     atomic_load_explicit(&z->tx->back_tail, memory_order_acquire)))
		return;
	pthread_mutex_lock(&z->lock);
	if (!atomic_load(&z->o->back_done) && z->refs > 0) {
		atomic_store(&z->o->back_done, true);
		ZL_LOG(ZL_LOG_DEBUG, "preload: fd %d: back on the kernel stream both ways", z->fd);
		zp_kernel_rd_shut(z);
		unswitch(z, "went back to the kernel (fd passing or urgent data)");
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

/* ---- readiness ----------------------------------------------------------- */

short zp_ready(struct zsock *z, short events)
{
	if (z->xh)
		return zx_ready(z, events);
	short r = 0;
	uint64_t left;
	zp_poll_join(z);
	bool end = zp_peer_closed(z) || atomic_load(&z->o->peer_eof);
	if (!zp_rx_left(z, &left) && (zp_rx_avail(z) != 0 || end))
		r |= POLLIN | (end ? POLLRDHUP : 0);
	if (z->o->rd_shut || (atomic_load(&z->o->peer_eof) && zp_rx_back(z)))
		r |= POLLIN | POLLRDHUP; /* (the end of the peer's stream after its way
					  * back: kernel_events asks the kernel no
					  * more for it) */
	bool wr_shut = __atomic_load_n(&z->o->wr_shut, __ATOMIC_ACQUIRE); /* (another thread's) */
	if ((end || z->o->rd_shut) &&
	    (wr_shut || (z->is_unix && (zp_peer_gone(z) || zp_peer_rd_shut(z)))))
		r |= POLLHUP; /* both ways shut, as the kernel says */
	if (wr_shut && !z->is_unix)
		r |= POLLOUT; /* (TCP: a send fails at once; a Unix socket waits for room) */
	if (z->o->gone_sent) /* TCP: the peer's kernel reset us: closed both ways */
		r |= POLLIN | POLLRDHUP | POLLOUT | POLLHUP | (z->o->so_err ? POLLERR : 0);
	if (zp_peer_reset(z)) /* (or a lie): closed both ways, the error until read */
		r |= POLLIN | POLLRDHUP | POLLOUT | POLLHUP | (z->o->reset_told ? 0 : POLLERR) |
		     (zp_peer_urg_reset(z) ? POLLPRI : 0);
	else if (atomic_load_explicit(&z->o->tx_ring, memory_order_acquire)) {
		if (zp_peer_gone(z) || zp_peer_rd_shut(z))
			r |= POLLOUT; /* (a send fails at once) */
		else if (zp_tx_free(z) != 0)
			r |= POLLOUT;
	}
	if (z->o->kerr_held)
		r |= POLLERR;
	return (short)(r & (events | POLLERR | POLLHUP));
}

int zp_arm(struct zsock *z, short events, short *armed)
{
	if (z->xh)
		return zx_arm(z, events, armed);
	*armed = 0;
	atomic_fetch_add(&z->users, 1);
	int crowded = atomic_fetch_add(&z->o->sleepers, 1) ? ZP_CROWDED : 0;
	if (events & POLLIN) {
		atomic_store_explicit(&z->rx->rx_kick, 0, memory_order_relaxed);
		atomic_fetch_add_explicit(&z->rx->rx_sleeping, 1, memory_order_relaxed);
		*armed |= POLLIN;
	}
	if ((events & POLLOUT) && atomic_load_explicit(&z->o->tx_ring, memory_order_acquire)) {
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
	atomic_fetch_sub(&z->o->sleepers, 1);
	atomic_fetch_sub(&z->users, 1);
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
			/* the rings' memfd and the side's own (every stream position,
			 * flag and option is there: the new image is one more holder
			 * of the same socket) */
			if (z->mem < 0 || z->own_fd < 0 || zp_real.fcntl(z->mem, F_SETFD, 0))
				continue;
			undo[nundo].mem = z->mem;
			if (zp_real.fcntl(z->own_fd, F_SETFD, 0)) {
				zp_real.fcntl(z->mem, F_SETFD, FD_CLOEXEC);
				continue;
			}
			undo[nundo++].side = z->own_fd;
			n = snprintf(e, sizeof(e), "%d:%d:%d:%d:%u;", fd, z->mem, z->own_fd, z->side,
				     z->size);
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
	struct { int mem, own; struct zsock *z; } seen[64]; /* fds that named one socket */
	int nseen = 0;
	while (st && *st) {
		if (*st == 'X') { /* across hosts (xhost.c) */
			zx_exec_adopt(st + 1);
			st = strchr(st, ';');
			st = st ? st + 1 : NULL;
			continue;
		}
		int fd, mem, own, side;
		unsigned ring;
		if (sscanf(st, "%d:%d:%d:%d:%u;", &fd, &mem, &own, &side, &ring) != 5)
			break;
		st = strchr(st, ';');
		st = st ? st + 1 : NULL;
		struct zsock *z = NULL;
		for (int i = 0; i < nseen && !z; i++)
			if (seen[i].mem == mem)
				z = seen[i].z;
		if (z) { /* a dup of one before it */
			zp_set(fd, z);
			continue;
		}
		z = side == 0 || side == 1 ? zp_map(mem, ring, side, own) : NULL;
		if (!z) {
			ZL_LOG(ZL_LOG_ERROR, "preload: cannot adopt switched fd %d after exec", fd);
			continue;
		}
		z->fd = fd;
		int dom = 0;
		socklen_t dl = sizeof(dom);
		z->is_unix = !zp_real.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &dl) && dom == AF_UNIX;
		z->mem = zp_real.fcntl(mem, F_DUPFD_CLOEXEC, 512);
		z->own_fd = zp_real.fcntl(own, F_DUPFD_CLOEXEC, 512);
		atomic_store(&z->trusted, true); /* a client passes only once proven */
		zp_set(fd, z); /* (its options are in its own state, and on its kernel
				* socket since its switch) */
		if (nseen < 64) {
			seen[nseen++] = (typeof(seen[0])){ mem, own, z };
		} else {
			zp_real.close(mem);
			zp_real.close(own);
		}
	}
	for (int i = 0; i < nseen; i++) { /* inherited; dups of them kept */
		zp_real.close(seen[i].mem);
		zp_real.close(seen[i].own);
	}
}
