/* SPDX-License-Identifier: MIT */
/*
 * epoll over sets that mix switched sockets and kernel fds: every
 * registration goes through us and carries the fd as its kernel data (the
 * program's data is kept per (set, fd)), so that events can be
 * translated (wait.c's helpers, wait.h). Level-triggered is the default as
 * in the kernel; a switched socket's EPOLLET reports input only when new
 * bytes came since the last report, output only when room came since;
 * EPOLLONESHOT turns the registration off until EPOLL_CTL_MOD, as in the
 * kernel.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <linux/tcp.h>
#include <stddef.h>
#include <sys/ioctl.h>

#include <linux/sockios.h>

#include "clock.h"
#include "preload.h"
#include "wait.h"

/* ---- epoll ------------------------------------------------------------ */

struct reg {
	bool used, off;  /* off: EPOLLONESHOT fired */
	bool zsock;
	bool kreg;       /* a switched socket's kernel registration (kev) stays
			  * after the program's EPOLL_CTL_DEL, for its next ADD:
			  * an event loop that adds and deletes per request
			  * makes no system call (dropped at close, or when the
			  * kernel reports it) */
	uint32_t events; /* the program's */
	uint32_t kev;    /* registered with the kernel */
	epoll_data_t data;
	uint64_t seen_tail, seen_head; /* EPOLLET: at the last report */
	uint32_t seen_fulls;           /* ... and the sends that found no room */
	uint32_t seen_wakes;           /* ... and our own wake-ups (own_wakes) */
	uint64_t wr_next;              /* ... and (Unix) our first write the peer
					* had not read past (wr_count) */
	int seen_outq;                 /* ... and (Unix, our sends on the kernel
					* stream) its SIOCOUTQ + 1 at the last
					* look (0: not known) */
	uint32_t rep_mask;             /* EPOLLET: what the last report said, */
	uint64_t rep_rcvd;             /* ... and TCP's bytes received then
					* (tcp_rcvd; UINT64_MAX: not known) */
	uint64_t rep_rtail;            /* ... and the peer's ring tail */
	uint8_t rep_tstate;            /* ... and TCP's state (0: not known) */
	bool skip_once;                /* the kernel's report after settle */
	bool seen_eof, seen_any;
	uint32_t seen_state;           /* its ERR and HUP */
};

struct epset {
	pthread_mutex_t lock;
	unsigned settled; /* zp_gave_up when the set last looked for them */
	struct reg *r;   /* by fd */
	int cap;
	int *zfd;        /* the switched sockets in the set */
	int nz, zcap;
	int nskip;       /* registrations with skip_once (settle) */
	struct klook look; /* the kernel's last answer (KLOOK_US) */
};

#define MAX_EP 65536
static struct epset *sets[MAX_EP];
static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;
static int live[1024]; /* the epoll fds with a set, for close and switches */
static _Atomic int nlive;

static struct epset *set_get(int ep, bool make)
{
	if (ep < 0 || ep >= MAX_EP)
		return NULL;
	struct epset *s = __atomic_load_n(&sets[ep], __ATOMIC_ACQUIRE);
	if (s || !make)
		return s;
	pthread_mutex_lock(&sets_lock);
	if (!(s = sets[ep]) && nlive < (int)(sizeof(live) / sizeof(live[0])) &&
	    (s = calloc(1, sizeof(*s)))) {
		pthread_mutex_init(&s->lock, NULL);
		__atomic_store_n(&sets[ep], s, __ATOMIC_RELEASE);
		live[nlive] = ep;
		atomic_fetch_add(&nlive, 1);
	}
	pthread_mutex_unlock(&sets_lock);
	return s;
}

void zp_epoll_close(int fd)
{
	if (!atomic_load(&nlive))
		return;
	pthread_mutex_lock(&sets_lock);
	struct epset *s = set_get(fd, false);
	if (s) {
		__atomic_store_n(&sets[fd], NULL, __ATOMIC_RELEASE);
		for (int i = 0; i < nlive; i++)
			if (live[i] == fd)
				live[i] = live[--nlive];
		free(s->r);
		free(s->zfd);
		pthread_mutex_destroy(&s->lock);
		free(s);
	}
	/* fd leaves every set it was in (the kernel drops it on its last close) */
	for (int i = 0; i < nlive; i++) {
		struct epset *e = sets[live[i]];
		pthread_mutex_lock(&e->lock);
		if (fd < e->cap)
			e->r[fd].kreg = false;
		if (fd < e->cap && e->r[fd].used) {
			e->r[fd].used = false;
			for (int j = 0; j < e->nz; j++)
				if (e->zfd[j] == fd)
					e->zfd[j] = e->zfd[--e->nz];
		}
		pthread_mutex_unlock(&e->lock);
	}
	pthread_mutex_unlock(&sets_lock);
}

static uint32_t kev_of(const struct reg *g, struct zsock *z)
{
	if (!z)
		return g->events;
	return (uint32_t)zp_kernel_events(z, (short)g->events);
}

static int grow(struct epset *s, int fd)
{
	if (fd < s->cap)
		return 0;
	int cap = s->cap ? s->cap : 64;
	while (cap <= fd)
		cap *= 2;
	struct reg *r = realloc(s->r, (size_t)cap * sizeof(*r));
	if (!r)
		return -1;
	memset(r + s->cap, 0, (size_t)(cap - s->cap) * sizeof(*r));
	s->r = r;
	s->cap = cap;
	return 0;
}

/* fd joins the set's switched sockets; -1 without memory */
static int zfd_add(struct epset *s, int fd)
{
	if (s->nz == s->zcap) {
		int c = s->zcap ? s->zcap * 2 : 16;
		int *p = realloc(s->zfd, (size_t)c * sizeof(*p));
		if (!p)
			return -1;
		s->zfd = p;
		s->zcap = c;
	}
	s->zfd[s->nz++] = fd;
	return 0;
}

int zp_epoll_ctl(int ep, int op, int fd, struct epoll_event *ev)
{
	struct epset *s = set_get(ep, true);
	if (!s || fd < 0 || (op != EPOLL_CTL_DEL && !ev))
		return zp_real.epoll_ctl(ep, op, fd, ev);
	pthread_mutex_lock(&s->lock);
	int rc = -1;
	if (grow(s, fd)) {
		errno = ENOMEM;
		goto out;
	}
	struct reg *g = &s->r[fd];
	struct zsock *z = zp_get(fd);
	if (op == EPOLL_CTL_DEL) {
		if (!g->used && g->kreg) {
			errno = ENOENT; /* (deleted: the program's registration is gone) */
			goto out;
		}
		if (g->used && g->zsock && z && g->kreg) {
			rc = 0; /* (the kernel's registration stays: kreg) */
		} else {
			rc = zp_real.epoll_ctl(ep, op, g->used && g->zsock ? zp_kfd(z, fd) : fd, ev);
			g->kreg = false;
		}
		if (!rc || errno == EBADF || errno == ENOENT) {
			if (g->used && g->zsock)
				for (int j = 0; j < s->nz; j++)
					if (s->zfd[j] == fd)
						s->zfd[j] = s->zfd[--s->nz];
			g->used = false;
		}
		goto out;
	}
	struct reg n = { .used = true, .zsock = z != NULL, .events = ev->events, .data = ev->data };
	n.kev = kev_of(&n, z);
	struct epoll_event k = { .events = n.kev, .data.u64 = (uint64_t)fd };
	if (z && (ev->events & EPOLLEXCLUSIVE))
		k.events |= EPOLLEXCLUSIVE;
	/* a switched socket's kernel registration, kept (kreg): an ADD after
	 * our DEL, or a MOD, changes it only if its kernel events change */
	bool kept = z && g->kreg && g->zsock && !(ev->events & EPOLLEXCLUSIVE) &&
		    (op == EPOLL_CTL_ADD ? !g->used : op == EPOLL_CTL_MOD && g->used);
	if (z && g->kreg && !g->used && op == EPOLL_CTL_MOD) {
		errno = ENOENT; /* (deleted: the program's registration is gone) */
		goto out;
	}
	if (kept && n.kev != g->kev) {
		k.events = n.kev;
		rc = zp_real.epoll_ctl(ep, EPOLL_CTL_MOD, zp_kfd(z, fd), &k);
	} else if (kept) {
		rc = 0;
	} else {
		rc = zp_real.epoll_ctl(ep, op, zp_kfd(z, fd), &k);
	}
	if (rc)
		goto out;
	bool was = g->used && g->zsock;
	*g = n;
	g->kreg = z != NULL;
	if (z && !was && zfd_add(s, fd)) {
		zp_real.epoll_ctl(ep, EPOLL_CTL_DEL, zp_kfd(z, fd), NULL);
		g->used = false;
		errno = ENOMEM;
		rc = -1;
	}
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* fd switched in connect(2) (z is new): a registration the program made
 * before, on the plain socket, now follows z as one made after would
 * (without it the set never looked at z's ring, and across hosts it
 * watched the silent TCP socket instead of zp_kfd). */
void zp_epoll_follow(int fd, struct zsock *z)
{
	if (!atomic_load(&nlive))
		return;
	int kfd = zp_kfd(z, fd);
	pthread_mutex_lock(&sets_lock);
	for (int i = 0; i < nlive; i++) {
		int ep = live[i];
		struct epset *s = sets[ep];
		pthread_mutex_lock(&s->lock);
		struct reg *g = fd < s->cap ? &s->r[fd] : NULL;
		if (g && g->used && !g->zsock && !zfd_add(s, fd)) {
			g->zsock = true;
			g->kev = kev_of(g, z);
			struct epoll_event k = { .events = g->kev, .data.u64 = (uint64_t)fd };
			if (kfd != fd)
				zp_real.epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
			if (zp_real.epoll_ctl(ep, kfd != fd ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, kfd, &k))
				ZL_LOG(ZL_LOG_ERROR, "preload: epoll %d cannot follow fd %d: %s", ep,
				       fd, strerror(errno));
			else
				g->kreg = true;
		}
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_unlock(&sets_lock);
}

/* The kernel registration follows the socket (our switch, its end); each
 * epoll_wait refreshes it before sleeping. */
static void refresh(int ep, struct epset *s, int fd, struct zsock *z, bool crowded)
{
	struct reg *g = &s->r[fd];
	uint32_t kev = kev_of(g, z);
	if (crowded) /* another thread's wake-ups stay unread: do not spin on them */
		kev &= ~(uint32_t)(EPOLLIN | EPOLLRDHUP);
	if (kev == g->kev)
		return;
	struct epoll_event k = { .events = kev, .data.u64 = (uint64_t)fd };
	if (!zp_real.epoll_ctl(ep, EPOLL_CTL_MOD, zp_kfd(z, fd), &k))
		g->kev = kev;
}

/* Linux's TCP states (include/net/tcp_states.h; linux/tcp.h, which has
 * tcp_info's newer fields, does not name them) */
enum { KTCP_CLOSE = 7, KTCP_CLOSE_WAIT = 8, KTCP_LAST_ACK = 9, KTCP_CLOSING = 11 };

/* TCP's bytes received on fd as the kernel counts them (the FIN as one)
 * and its state; UINT64_MAX if not known */
static uint64_t tcp_bytes(int fd, uint8_t *state)
{
	struct tcp_info ti;
	socklen_t tl = sizeof ti;
	if (zp_real.getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) ||
	    tl < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof ti.tcpi_bytes_received)
		return UINT64_MAX;
	*state = ti.tcpi_state;
	return ti.tcpi_bytes_received;
}

/* The peer's FIN came, by the kernel socket's state (a closed one came
 * there after both ends' FINs or after a reset: z's peer tells which) */
static bool fin_came(uint8_t st, struct zsock *z)
{
	return st == KTCP_CLOSE_WAIT || st == KTCP_LAST_ACK || st == KTCP_CLOSING ||
	       (st == KTCP_CLOSE && zp_peer_fin(z) && !zp_peer_reset(z));
}

/* TCP's bytes received on fd (every one, also past an urgent mark, where
 * FIONREAD stops; UINT64_MAX if not known), the peer's FIN left out once
 * it came: the end is an edge of its own (report's eof), and a peer that
 * shut its ring and goes back to the kernel stream sends its FIN only
 * then, which is no new edge. */
static uint64_t tcp_rcvd_of(int fd, struct zsock *z, uint8_t *st)
{
	uint64_t b = tcp_bytes(fd, st);
	return b != UINT64_MAX && b && fin_came(*st, z) ? b - 1 : b;
}

/* Where the input stands, for edges: the peer's data bytes that came, on
 * the ring (its tail) and on the kernel stream (read, or queued: what the
 * kernel got, less the wake-ups the peer sent), one count whichever path
 * carries them, so that moving from one to the other is no edge. While
 * only the ring is used (not kin) the kernel's data were all read. */
static uint64_t in_mark(struct zsock *z, bool kin, uint8_t *kst)
{
	*kst = 0;
	if (z->xh)
		return zx_rx_mark(z);
	uint64_t t = atomic_load_explicit(&z->rx->tail, memory_order_relaxed) +
		     atomic_load_explicit(&z->o->rx_k, memory_order_relaxed);
	if (!kin && zp_ring_only(z))
		return t;
	uint64_t w = zp_trusted(z) ? atomic_load_explicit(&z->rx->wakes, memory_order_relaxed) : 0;
	/* TCP: every byte that came (bytes after an urgent mark are an edge
	 * too), read or not */
	uint64_t rc = z->is_unix ? UINT64_MAX : tcp_rcvd_of(z->fd, z, kst);
	if (rc != UINT64_MAX)
		return t - atomic_load_explicit(&z->o->rx_k, memory_order_relaxed) + rc - w;
	int q = 0;
	if (zp_real.ioctl(z->fd, FIONREAD, &q) || q < 0)
		q = 0;
	/* every kernel byte is queued, read as data or dropped as a wake-up */
	return t + atomic_load_explicit(&z->o->rx_w, memory_order_relaxed) + (uint64_t)q - w;
}

/* Where the output stands, for edges: the bytes the peer took, from the
 * ring and, once our sends are on the kernel stream, from it (sent, less
 * what its queue still holds). */
static uint64_t out_mark(struct zsock *z)
{
	if (z->xh)
		return zx_tx_mark(z);
	uint64_t h = atomic_load_explicit(&z->tx->head, memory_order_relaxed);
	int q = 0;
	if (atomic_load_explicit(&z->o->tx_ring, memory_order_acquire) ||
	    zp_real.ioctl(z->fd, SIOCOUTQ, &q) || q < 0)
		return h;
	return h + atomic_load_explicit(&z->o->tx_k, memory_order_relaxed) - (uint64_t)q;
}

/* Unix: the peer read (its ring head h) past the end of one of our writes
 * since g's last look (the kernel frees that write's buffer, and wakes the writer,
 * only then; not at a read of part of it). When more writes than the
 * ones kept came meanwhile, any read is one (a spurious edge, never a
 * lost one). */
static bool write_freed(struct reg *g, struct zsock *z, uint64_t h)
{
	uint64_t n = atomic_load_explicit(&z->o->wr_count, memory_order_acquire);
	if (!g->seen_any || g->wr_next > n) {
		g->wr_next = n;
		return false;
	}
	bool freed = false;
	for (; g->wr_next < n; g->wr_next++) {
		uint64_t e = atomic_load_explicit(&z->o->wr_ends[g->wr_next % ZP_WR_ENDS],
						  memory_order_relaxed);
		if (e > h)
			break;
		freed = true;
	}
	if (atomic_load_explicit(&z->o->wr_count, memory_order_acquire) - g->wr_next > ZP_WR_ENDS) {
		g->wr_next = atomic_load(&z->o->wr_count); /* (overwritten as we looked) */
		return true; /* (a spurious edge, never a lost one) */
	}
	return freed;
}

/* TCP's bytes received as the kernel counts them (tcp_bytes), now, for a
 * hand-back; without a system call while only the ring is used:
 * the kernel stream then carried the data read before the switch and the
 * peer's wake-ups, all come or on their way. UINT64_MAX: not TCP. */
static uint64_t rcvd_seen(struct zsock *z, uint8_t *st)
{
	*st = 0;
	if (z->xh || z->is_unix)
		return UINT64_MAX;
	if (!zp_ring_only(z))
		return tcp_bytes(z->fd, st);
	return atomic_load_explicit(&z->o->rx_k, memory_order_relaxed) +
	       (zp_trusted(z) ? atomic_load_explicit(&z->rx->wakes, memory_order_relaxed) : 0);
}

/* What came is seen (a report, or a look that found no edge): for a
 * hand-back to the kernel (quiet_since) */
static void seen_now(struct reg *g, struct zsock *z)
{
	g->rep_rcvd = rcvd_seen(z, &g->rep_tstate);
	g->rep_rtail = !z->xh && zp_trusted(z) ? atomic_load_explicit(&z->rx->tail,
								       memory_order_relaxed)
					       : 0;
}

/* The events of the kernel socket at fd now that g asked for */
static uint32_t kernel_now(struct reg *g, int fd)
{
	struct pollfd p = { fd, (short)(g->events & 0xffff), 0 };
	uint32_t now = zp_real.poll(&p, 1, 0) == 1 ? (uint16_t)p.revents : 0;
	return now & (g->events | EPOLLERR | EPOLLHUP);
}

/* A TCP socket handed back to the kernel at fd, now with events now:
 * nothing came since g's last look (no event it lacked, no byte on the
 * ring or the kernel stream, no shutdown of ours, no change of TCP's
 * state, which wakes the socket's waiters: a reset), so the kernel's
 * report of it is no edge. */
static bool quiet_since(struct reg *g, int fd, uint32_t now)
{
	uint64_t rtail;
	uint32_t wakes;
	uint8_t st = 0;
	if (!g->seen_any || g->rep_rcvd == UINT64_MAX || (now & ~g->rep_mask) ||
	    !zp_left_of(fd, &rtail, &wakes) || rtail != g->rep_rtail || wakes != g->seen_wakes)
		return false;
	uint64_t b = tcp_bytes(fd, &st);
	if (g->rep_tstate && st != g->rep_tstate && !(b == g->rep_rcvd + 1 &&
						       (g->rep_mask & EPOLLRDHUP)))
		return false;
	/* (the peer's FIN after its end was told: no new edge) */
	return b == g->rep_rcvd ||
	       (b == g->rep_rcvd + 1 && (g->rep_mask & EPOLLRDHUP) &&
		(st == KTCP_CLOSE_WAIT || st == KTCP_LAST_ACK || st == KTCP_CLOSING || st == KTCP_CLOSE));
}

/*
 * Report a switched socket's events r for registration g, as EPOLLET and
 * EPOLLONESHOT say; 1 if reported. kin: the input is kernel bytes (sent
 * before the switch).
 *
 * EPOLLET as the kernel's: an edge is a wake-up of a kind the registration
 * asked for, and it reports every event the socket has then (after the
 * peer's bytes come, IN and OUT). Kinds: input (new bytes, or the end),
 * output (room freed by the peer's reads: on a Unix socket at each read
 * that passes the end of one of our writes, write_freed;
 * on TCP only after a send found the buffer full since this registration
 * last reported, as TCP wakes writers only then; each epoll set sees its
 * own edge), a new ERR or HUP, which any registration sees, and our
 * own shutdown (the kernel's wakes the socket's waiters, even when it
 * fails with ENOTCONN), and a Unix peer's shutdown and close (each
 * wakes ours, whatever the state).
 * After EPOLL_CTL_ADD or MOD the state then is reported, if any.
 */
static int report(struct reg *g, struct zsock *z, uint32_t r, bool kin, struct epoll_event *out)
{
	r &= g->events | EPOLLERR | EPOLLHUP;
	if (!r || g->off)
		return 0;
	if (g->events & EPOLLET) {
		uint8_t kst;
		uint64_t t = in_mark(z, kin, &kst);
		uint64_t h = out_mark(z);
		/* a reset wakes the socket once, also when its error was read
		 * before this look (the sticky marks of one: ours, played; and
		 * the kernel socket's own, while it carries our input: its
		 * reset, or the peer's FIN that ends it, as TCP_CLOSE) */
		uint32_t state = (r & (EPOLLERR | EPOLLHUP)) |
				 (!z->xh && (z->o->gone_sent || zp_peer_reset(z)) ? 1u << 31 : 0) |
				 (kst == KTCP_CLOSE ? 1u << 30 : 0);
		bool eof = (r & EPOLLRDHUP) != 0;
		/* (bytes that came are an edge for a registration that asked for
		 * input, also when read since: the report says what is now) */
		bool in = (g->events & (EPOLLIN | EPOLLRDHUP)) &&
			  (t != g->seen_tail || (eof && !g->seen_eof));
		uint32_t fulls = atomic_load_explicit(&z->o->tx_fulls, memory_order_relaxed);
		/* (once our sends are on the kernel stream, its queue of them
		 * says, in the memory it charges: it falls when the peer's read
		 * freed one) */
		bool freed = false;
		if (!z->xh && z->is_unix) {
			int q = -1;
			if (!atomic_load(&z->o->tx_ring) && zp_real.ioctl(z->fd, SIOCOUTQ, &q))
				q = -1;
			bool wf = write_freed(g, z, atomic_load_explicit(&z->tx->head,
								   memory_order_acquire));
			freed = wf || (q >= 0 && g->seen_outq && q + 1 < g->seen_outq);
			g->seen_outq = q + 1;
		}
		bool outw = (r & EPOLLOUT) &&
			    (z->xh ? h != g->seen_head
			     : z->is_unix ? freed : h != g->seen_head && fulls != g->seen_fulls);
		uint32_t wakes = atomic_load_explicit(&z->o->own_wakes, memory_order_relaxed);
		if (!z->xh && z->is_unix && zp_trusted(z)) /* (the peer's word: at worst
							   * a spurious edge) */
			wakes += atomic_load_explicit(&z->rx->shut_calls, memory_order_acquire) +
				 atomic_load_explicit(&z->sh->gone[1 - z->side], memory_order_acquire);
		/* (an error read meanwhile is no edge: only what came is) */
		if (g->seen_any && !in && !outw && !(state & ~g->seen_state) && wakes == g->seen_wakes) {
			seen_now(g, z); /* (all that came is seen: for a hand-back) */
			return 0;
		}
		g->seen_wakes = wakes;
		if (outw) /* (the room it waits for is reported once) */
			g->seen_fulls = fulls;
		g->seen_tail = t;
		g->seen_head = h;
		g->seen_eof |= eof;
		g->seen_state = state;
		g->seen_any = true;
		g->rep_mask = r;
		seen_now(g, z);
	}
	if (g->events & EPOLLONESHOT)
		g->off = true;
	out->events = r;
	out->data = g->data;
	return 1;
}

/* Sockets of the set that went back to the kernel (a client that gave up
 * its join: zp_gave_up counts them) are the program's registrations again,
 * as it made them. */
static void settle(int ep, struct epset *s)
{
	unsigned n = atomic_load(&zp_gave_up);
	if (n == s->settled)
		return;
	s->settled = n;
	for (int j = 0; j < s->nz;) {
		int fd = s->zfd[j];
		if (zp_get(fd)) {
			j++;
			continue;
		}
		struct reg *g = &s->r[fd];
		struct epoll_event k = { .events = g->events, .data.u64 = (uint64_t)fd };
		if (g->off) /* a one-shot that fired stays off until EPOLL_CTL_MOD */
			k.events = EPOLLONESHOT;
		/* EPOLLET: the kernel reports what the socket has at a MOD, an
		 * edge the program did not see made; when nothing came since
		 * our last report (no event it lacked then, no byte received,
		 * no shutdown of ours: events that went, as input read since,
		 * are no edge), that one report is not passed on */
		if ((g->events & EPOLLET) && !g->off && g->seen_any && g->rep_rcvd != UINT64_MAX) {
			g->skip_once = quiet_since(g, fd, kernel_now(g, fd));
			s->nskip += g->skip_once;
		}
		if (zp_real.epoll_ctl(ep, EPOLL_CTL_MOD, fd, &k)) { /* EPOLLEXCLUSIVE */
			zp_real.epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
			zp_real.epoll_ctl(ep, EPOLL_CTL_ADD, fd, &k);
		}
		g->zsock = false;
		g->kev = k.events;
		s->zfd[j] = s->zfd[--s->nz];
	}
}

static int scan_ep(struct epset *s, struct epoll_event *evs, int max, bool *hit)
{
	int n = 0;
	for (int j = 0; j < s->nz && n < max; j++) {
		int fd = s->zfd[j];
		struct zsock *z = zp_get(fd);
		if (!z)
			continue;
		bool kin;
		short r = zp_ready_now(z, (short)(s->r[fd].events | POLLRDHUP), &kin);
		if (r && report(&s->r[fd], z, (uint32_t)r, kin, &evs[n])) {
			hit[j] = true;
			n++;
		}
	}
	return n;
}

/* Room for n events from the kernel, past the 256 on the stack: a buffer
 * per thread, grown as callers ask for more (freed when the thread ends). */
static pthread_key_t kbuf_key;
static pthread_once_t kbuf_once = PTHREAD_ONCE_INIT;
static __thread struct epoll_event *kbuf;
static __thread int kbuf_cap;

static void kbuf_make_key(void) { pthread_key_create(&kbuf_key, free); }

static struct epoll_event *kernel_events_buf(int n)
{
	if (n <= kbuf_cap)
		return kbuf;
	struct epoll_event *b = realloc(kbuf, (size_t)n * sizeof(*b));
	if (!b)
		return NULL;
	pthread_once(&kbuf_once, kbuf_make_key);
	pthread_setspecific(kbuf_key, b);
	kbuf = b;
	kbuf_cap = n;
	return b;
}

struct armed {
	struct zsock *z;
	short ev;
};

struct epscan {
	struct epset *s;
};

static bool ep_ready(void *arg)
{
	struct epset *s = ((struct epscan *)arg)->s;
	for (int j = 0; j < s->nz; j++) {
		struct zsock *z = zp_get(s->zfd[j]);
		bool kin;
		if (z && !s->r[s->zfd[j]].off &&
		    zp_ready_now(z, (short)(s->r[s->zfd[j]].events | POLLRDHUP), &kin))
			return true;
	}
	return false;
}

int zp_epoll_wait(int ep, struct epoll_event *evs, int max, int timeout_ms,
		  const sigset_t *mask)
{
	struct epset *s = set_get(ep, false);
	if (!s || max <= 0)
		return zp_real.epoll_pwait(ep, evs, max, timeout_ms, mask);
	int64_t deadline = timeout_ms < 0 ? ZL_NEVER : zl_now_us() + (int64_t)timeout_ms * 1000;
	for (;;) {
		pthread_mutex_lock(&s->lock);
		settle(ep, s);
		bool hb[256], *hit = s->nz <= 256 ? hb : calloc((size_t)s->nz, 1);
		if (!hit) {
			pthread_mutex_unlock(&s->lock);
			errno = ENOMEM;
			return -1;
		}
		memset(hit, 0, s->nz <= 256 ? sizeof(hb) : (size_t)s->nz);
		int n = scan_ep(s, evs, max, hit);
		bool any = s->nz > 0;
		pthread_mutex_unlock(&s->lock);
		struct epscan es = { s };
		if (!n && any && deadline > zl_now_us() && zp_spin(deadline, ep_ready, &es)) {
			pthread_mutex_lock(&s->lock);
			n = scan_ep(s, evs, max, hit);
			pthread_mutex_unlock(&s->lock);
		}
		/* arm, then sleep in the kernel */
		pthread_mutex_lock(&s->lock);
		bool sleep = !n && deadline > zl_now_us(), crowded = false, ready = false, full = false;
		struct armed ab[256], *am = s->nz <= 256 ? ab : calloc((size_t)s->nz, sizeof(*am));
		int na = 0;
		for (int j = 0; j < s->nz && am; j++) {
			int fd = s->zfd[j];
			struct zsock *z = zp_get(fd);
			if (!z)
				continue;
			if (!sleep || s->r[fd].off) {
				refresh(ep, s, fd, z, false);
				continue;
			}
			short ev = (short)((s->r[fd].events & (EPOLLIN | EPOLLOUT)) | POLLIN);
			int a = zp_arm(z, ev, &am[na].ev);
			am[na++].z = z;
			ready |= (a & ZP_READY) != 0;
			crowded |= (a & ZP_CROWDED) || zp_kernel_blind(z);
			full |= zp_full_for(z, (short)(s->r[fd].events & EPOLLOUT));
			refresh(ep, s, fd, z, (a & ZP_CROWDED) != 0);
		}
		pthread_mutex_unlock(&s->lock);
		/* ready meanwhile, or ready with nothing new to report (EPOLLET:
		 * no edge since the last report): then it sleeps, armed, until
		 * the peer's next move, as the kernel's epoll would */
		if (ready) {
			pthread_mutex_lock(&s->lock);
			n = scan_ep(s, evs, max, hit);
			pthread_mutex_unlock(&s->lock);
		}
		int ms = n || !sleep ? 0 : zl_poll_ms(deadline);
		if (crowded && (ms < 0 || ms > 1))
			ms = 1; /* another sleeper's drain may take our wake-up */
		if (full && (ms < 0 || ms > WAIT_OUT_MS))
			ms = WAIT_OUT_MS;
		struct epoll_event kb[256], *kev = kb;
		int room = max - n;
		if (room > 256 && !(kev = kernel_events_buf(room))) {
			kev = kb; /* out of memory: the next call takes the rest */
			room = 256;
		}
		int64_t t0 = zl_now_us();
		pthread_mutex_lock(&s->lock);
		bool look = room > 0 && (!n || !zp_klook_skip(&s->look, 0));
		pthread_mutex_unlock(&s->lock);
		int k = look ? zp_real.epoll_pwait(ep, kev, room, ms, mask) : 0;
		int err = errno;
		if (ms && any)
			zp_slept(t0);
		for (int j = 0; j < na; j++)
			zp_disarm(am[j].z, am[j].ev);
		if (am != ab)
			free(am);
		pthread_mutex_lock(&s->lock);
		if (look) {
			s->look = (struct klook){ .at = t0, .quiet = k >= 0 };
			for (int i = 0; i < k; i++) {
				int fd = (int)kev[i].data.u64;
				s->look.quiet &= zp_kquiet(fd >= 0 && fd < s->cap && s->r[fd].used &&
							s->r[fd].zsock,
							kev[i].events);
			}
		}
		for (int i = 0; i < k; i++) {
			int fd = (int)kev[i].data.u64;
			if (fd >= 0 && fd < s->cap && !s->r[fd].used && s->r[fd].kreg) {
				/* a kept registration the program deleted: the kernel
				 * reports its socket (its end), so it goes now */
				struct zsock *zk = zp_get(fd);
				zp_real.epoll_ctl(ep, EPOLL_CTL_DEL, zk ? zp_kfd(zk, fd) : fd, NULL);
				s->r[fd].kreg = false;
			}
			if (fd < 0 || fd >= s->cap || !s->r[fd].used)
				continue; /* gone since */
			struct reg *g = &s->r[fd];
			struct zsock *z = g->zsock ? zp_get(fd) : NULL;
			if (!z) {
				if (g->off)
					continue;
				if (g->zsock) {
					/* handed back to the kernel during this wait:
					 * the kernel answered our registration, not the
					 * program's (the next wait's settle makes it the
					 * program's): its events now, if an edge */
					uint32_t now = kernel_now(g, fd);
					if (!now || ((g->events & EPOLLET) && quiet_since(g, fd, now)))
						continue;
					if (g->events & EPOLLET) { /* (seen: settle's MOD
								    * report is none) */
						uint32_t w = 0;
						zp_left_of(fd, &g->rep_rtail, &w);
						g->seen_wakes = w;
						g->rep_mask = now;
						g->rep_rcvd = tcp_bytes(fd, &g->rep_tstate);
						g->seen_any = true;
					}
					if (g->events & EPOLLONESHOT)
						g->off = true;
					evs[n].events = now;
					evs[n++].data = g->data;
					continue;
				}
				if (g->skip_once) { /* (settle) */
					g->skip_once = false;
					if (quiet_since(g, fd, kev[i].events))
						continue;
				}
				if (g->events & EPOLLONESHOT)
					g->off = true;
				evs[n].events = kev[i].events;
				evs[n++].data = g->data;
				continue;
			}
			bool dup = false;
			for (int j = 0; j < s->nz; j++)
				if (s->zfd[j] == fd && hit[j])
					dup = true;
			bool kin;
			short r = zp_merged(z, (short)(g->events | POLLRDHUP), (short)kev[i].events, &kin);
			if (!dup && r && report(g, z, (uint32_t)r, kin, &evs[n]))
				n++;
		}
		/* the MOD's report comes at the first wait after it, or not
		 * at all: a later one is an edge */
		if (s->nskip > 0 && look && k >= 0) {
			for (int fd = 0; fd < s->cap; fd++)
				s->r[fd].skip_once = false;
			s->nskip = 0;
		}
		pthread_mutex_unlock(&s->lock);
		if (hit != hb)
			free(hit);
		if (k < 0 && err != EINTR) {
			errno = err;
			return n ? n : -1;
		}
		if (k < 0) {
			errno = EINTR;
			return n ? n : -1;
		}
		if (n || (deadline != ZL_NEVER && zl_now_us() >= deadline))
			return n;
	}
}
