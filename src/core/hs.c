/* SPDX-License-Identifier: MIT */
/*
 * Handshakes side by side, for zl_accept and zl_server's acceptor: a table
 * of connections in their handshake, and one epoll set over the listeners
 * (level-triggered) and every entry (edge-triggered). No entry is ever
 * waited on alone, so a silent or slow peer holds only its own entry, until
 * its listener's handshake_timeout_us. An entry goes through:
 *   RAW   the accepted socket, until the peer's first message is wholly
 *         there (the transport's ready), then finish;
 *   HALF  rdma only: finish has answered and the peer's next message is
 *         awaited (complete);
 *   HELD  with hold, the finished channel stays in the table while its
 *         owner runs its own handshake on it (zl_server's hello).
 * Why edge-triggered entries are enough: ready and complete only peek, so a
 * message still incomplete stays in the socket, and its next bytes make a
 * new edge. An entry's fd leaves the set before finish, which may keep the
 * socket as the channel's, and before it is closed or handed over; events
 * name an entry by slot and generation, so one queued for an entry since
 * gone is ignored.
 * Past max entries a newcomer displaces the oldest entry of the peer (uid
 * on unix-family sockets, else the address) holding the most, so a flood
 * of connections from one peer cannot keep the others out. A timerfd in
 * the set makes the set readable when the next entry expires, so an event
 * loop that only calls zl_accept when zl_listener_fd is readable still
 * drops silent peers in time.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "clock.h"
#include "hs.h"
#include "log.h"

#define MAX_LST 16
#define TAKE 16      /* connections taken per look at a listener */
#define NEV 64       /* events per epoll_wait */
#define ID_LST 0xffffffffu /* generation of listener events; timer: slot too */

enum stage { FREE, RAW, HALF, HELD };

struct ent {
	enum stage st;
	uint32_t gen;
	int fd;             /* what the set watches for this entry */
	int li;             /* listener index */
	void *half;         /* HALF: the transport's state */
	zl_channel *ch;     /* HELD */
	int64_t since, deadline;
	uint64_t peer;
};

struct zl_hs {
	int ep, tfd;
	bool hold;
	unsigned max, n, hint;
	struct ent *e;
	struct { uint64_t peer; uint32_t count, oldest; } *cnt; /* 2 * max */
	struct { zl_listener *l; int64_t hs_us; } lst[MAX_LST];
	int nlst;
	/* events being handled, and entries to look at without an event */
	struct epoll_event ev[NEV + MAX_LST * TAKE + 1];
	int nev, pos;
	int64_t next_expiry, timer_at;
	uint64_t dropped;
};

static uint64_t ev_id(uint32_t gen, uint32_t slot) { return (uint64_t)gen << 32 | slot; }

int zl_hs_new(unsigned max, bool hold, struct zl_hs **out)
{
	if (max < 1 || max > 65536)
		return -EINVAL;
	struct zl_hs *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->max = max;
	h->hold = hold;
	h->next_expiry = h->timer_at = ZL_NEVER;
	h->e = calloc(max, sizeof(*h->e));
	h->cnt = calloc(2 * (size_t)max, sizeof(*h->cnt));
	h->ep = epoll_create1(EPOLL_CLOEXEC);
	h->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	int r = !h->e || !h->cnt ? -ENOMEM : h->ep < 0 || h->tfd < 0 ? -errno : 0;
	struct epoll_event e = { .events = EPOLLIN, .data.u64 = ev_id(ID_LST, ID_LST) };
	if (!r && epoll_ctl(h->ep, EPOLL_CTL_ADD, h->tfd, &e))
		r = -errno;
	if (r) {
		zl_hs_free(h);
		return r;
	}
	*out = h;
	return 0;
}

int zl_hs_fd(const struct zl_hs *h) { return h->ep; }

uint64_t zl_hs_dropped(const struct zl_hs *h) { return h->dropped; }

int zl_hs_watch(struct zl_hs *h, zl_listener *l, int64_t hs_us)
{
	if (h->nlst >= MAX_LST)
		return -ENOSPC;
	struct epoll_event e = { .events = EPOLLIN, .data.u64 = ev_id(ID_LST, (uint32_t)h->nlst) };
	if (epoll_ctl(h->ep, EPOLL_CTL_ADD, l->ops->fd(l), &e))
		return -errno;
	h->lst[h->nlst].l = l;
	h->lst[h->nlst++].hs_us = hs_us;
	return 0;
}

static int watch(struct zl_hs *h, struct ent *p, int fd)
{
	struct epoll_event e = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET,
				 .data.u64 = ev_id(p->gen, (uint32_t)(p - h->e)) };
	p->fd = fd;
	return fd < 0 ? -EINVAL : epoll_ctl(h->ep, EPOLL_CTL_ADD, fd, &e) ? -errno : 0;
}

static void unwatch(struct zl_hs *h, struct ent *p)
{
	if (p->fd >= 0)
		epoll_ctl(h->ep, EPOLL_CTL_DEL, p->fd, NULL);
	p->fd = -1;
}

/* Look at p again in this round, without an event. */
static void look_again(struct zl_hs *h, struct ent *p)
{
	if (h->nev < (int)(sizeof(h->ev) / sizeof(h->ev[0])))
		h->ev[h->nev++] = (struct epoll_event){ .data.u64 = ev_id(p->gen, (uint32_t)(p - h->e)) };
}

static void release(struct zl_hs *h, struct ent *p)
{
	unwatch(h, p);
	p->st = FREE;
	p->ch = NULL;
	p->half = NULL;
	h->n--;
}

static void drop(struct zl_hs *h, struct ent *p, const char *why, int err)
{
	zl_listener *l = h->lst[p->li].l;
	if (why)
		ZL_LOG(ZL_LOG_WARN, "dropping a new peer in its handshake: %s (%s)", why,
		       zl_strerror(err));
	int fd = p->fd;
	enum stage st = p->st;
	zl_channel *ch = p->ch;
	void *half = p->half;
	release(h, p);
	h->dropped++;
	if (st == RAW)
		close(fd);
	else if (st == HALF)
		l->ops->abort(l, half);
	else if (ch) {
		ch->no_linger = true;
		zl_close(ch);
	}
}

void zl_hs_free(struct zl_hs *h)
{
	if (!h)
		return;
	for (unsigned i = 0; h->e && i < h->max; i++)
		if (h->e[i].st != FREE)
			drop(h, &h->e[i], NULL, 0);
	if (h->ep >= 0)
		close(h->ep);
	if (h->tfd >= 0)
		close(h->tfd);
	free(h->e);
	free(h->cnt);
	free(h);
}

static uint64_t peer_key(int fd)
{
	struct sockaddr_storage a;
	socklen_t len = sizeof(a);
	if (getsockname(fd, (struct sockaddr *)&a, &len))
		return 0;
	if (a.ss_family == AF_UNIX) {
		struct ucred cr;
		len = sizeof(cr);
		return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) ? 0 : 1ull << 32 | cr.uid;
	}
	len = sizeof(a);
	memset(&a, 0, sizeof(a));
	if (getpeername(fd, (struct sockaddr *)&a, &len))
		return 0;
	const uint8_t *b = a.ss_family == AF_INET6
				   ? (const uint8_t *)&((struct sockaddr_in6 *)&a)->sin6_addr
				   : (const uint8_t *)&((struct sockaddr_in *)&a)->sin_addr;
	size_t n = a.ss_family == AF_INET6 ? 16 : 4;
	uint64_t k = 1469598103934665603ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		k = (k ^ b[i]) * 1099511628211ull;
	return k | 1ull << 63;
}

/* The table is full: the peer holding most entries loses its oldest. */
static void displace(struct zl_hs *h)
{
	size_t cap = 2 * (size_t)h->max;
	memset(h->cnt, 0, cap * sizeof(*h->cnt));
	uint32_t best = 0, victim = 0;
	for (uint32_t i = 0; i < h->max; i++) {
		struct ent *p = &h->e[i];
		if (p->st == FREE)
			continue;
		size_t k = (p->peer * 0x9e3779b97f4a7c15ull >> 20) % cap;
		while (h->cnt[k].count && h->cnt[k].peer != p->peer)
			k = (k + 1) % cap; /* cap > entries: a free bucket exists */
		if (!h->cnt[k].count++ || p->since < h->e[h->cnt[k].oldest].since) {
			h->cnt[k].peer = p->peer;
			h->cnt[k].oldest = i;
		}
		if (h->cnt[k].count > best) {
			best = h->cnt[k].count;
			victim = h->cnt[k].oldest;
		}
	}
	drop(h, &h->e[victim], "displaced by newer peers (max_handshakes)", -EUSERS);
}

static void add(struct zl_hs *h, int li, int fd, int64_t now)
{
	if (h->n >= h->max)
		displace(h);
	while (h->e[h->hint].st != FREE)
		h->hint = (h->hint + 1) % h->max;
	struct ent *p = &h->e[h->hint];
	uint32_t gen = p->gen + 1 == ID_LST ? 1 : p->gen + 1;
	*p = (struct ent){ .st = RAW, .gen = gen, .fd = -1, .li = li, .since = now,
			   .deadline = now + h->lst[li].hs_us, .peer = peer_key(fd) };
	h->n++;
	if (p->deadline < h->next_expiry)
		h->next_expiry = p->deadline;
	int r = watch(h, p, fd);
	if (r) {
		p->fd = fd;
		drop(h, p, "cannot watch it", r);
		return;
	}
	look_again(h, p); /* its first message may be there already */
}

static void expire(struct zl_hs *h, int64_t now)
{
	if (now < h->next_expiry)
		return;
	h->next_expiry = ZL_NEVER;
	for (unsigned i = 0; i < h->max; i++) {
		struct ent *p = &h->e[i];
		if (p->st == FREE)
			continue;
		if (now >= p->deadline)
			drop(h, p, "no complete handshake in time", -ETIMEDOUT);
		else if (p->deadline < h->next_expiry)
			h->next_expiry = p->deadline;
	}
}

/* The timer follows the next expiry, so that the set turns readable then;
 * with no handshake left, not at all (no wake-up for nothing). */
static void set_timer(struct zl_hs *h)
{
	if (!h->n)
		h->next_expiry = ZL_NEVER;
	if (h->timer_at == h->next_expiry)
		return;
	struct itimerspec t = { 0 };
	if (h->next_expiry != ZL_NEVER) {
		t.it_value.tv_sec = h->next_expiry / 1000000;
		t.it_value.tv_nsec = h->next_expiry % 1000000 * 1000 + 1;
	}
	if (!timerfd_settime(h->tfd, TFD_TIMER_ABSTIME, &t, NULL))
		h->timer_at = h->next_expiry;
}

/* A finished channel: held, or handed out. */
static int finished(struct zl_hs *h, struct ent *p, zl_channel *ch, struct zl_hs_out *o)
{
	*o = (struct zl_hs_out){ .ch = ch, .id = -1, .fresh = true };
	if (!h->hold) {
		release(h, p);
		return 1;
	}
	p->st = HELD;
	p->ch = ch;
	int r = watch(h, p, zl_channel_fd(ch));
	if (r) {
		drop(h, p, "cannot watch its channel", r);
		*o = (struct zl_hs_out){ .err = r, .id = -1 };
		return 1;
	}
	o->id = (int)(p - h->e);
	return 1;
}

/* A failed step: probes (the peer left) are dropped quietly; other
 * failures are reported. */
static int failed(struct zl_hs *h, struct ent *p, int r, struct zl_hs_out *o)
{
	p->fd = -1; /* finish and complete have closed it */
	p->half = NULL;
	p->st = FREE;
	h->n--;
	h->dropped++;
	if (r == -ECONNRESET || r == -ENOTCONN || r == -EPIPE) {
		ZL_LOG(ZL_LOG_DEBUG, "a new peer left during its handshake");
		return 0;
	}
	ZL_LOG(ZL_LOG_WARN, "a new peer's handshake failed: %s", zl_strerror(r));
	*o = (struct zl_hs_out){ .err = r, .id = -1 };
	return 1;
}

/* hup: the peer will send nothing more, so a message still incomplete
 * never will be; the step that reads it then fails as it should. */
static int step(struct zl_hs *h, struct ent *p, bool hup, struct zl_hs_out *o)
{
	zl_listener *l = h->lst[p->li].l;
	zl_channel *ch = NULL;
	if (p->st == RAW) {
		int r = l->ops->ready(l, p->fd);
		if (r < 0) {
			drop(h, p, NULL, r); /* it left before its first message: a probe */
			return 0;
		}
		if (r == 0 && !hup)
			return 0;
		int fd = p->fd;
		unwatch(h, p);
		int wfd = -1;
		r = l->ops->finish(l, fd, &ch, &p->half, &wfd);
		if (r == -EINPROGRESS) {
			p->st = HALF;
			if ((r = watch(h, p, wfd))) {
				drop(h, p, "cannot watch it", r);
				return 0;
			}
			look_again(h, p);
			return 0;
		}
		return r ? failed(h, p, r, o) : finished(h, p, ch, o);
	}
	if (p->st == HALF) {
		int r = l->ops->complete(l, p->half, &ch);
		if (r == -EAGAIN && !hup)
			return 0;
		if (r == -EAGAIN) {
			drop(h, p, "hung up in its handshake", -EPROTO);
			*o = (struct zl_hs_out){ .err = -EPROTO, .id = -1 };
			return 1;
		}
		unwatch(h, p);
		return r ? failed(h, p, r, o) : finished(h, p, ch, o);
	}
	*o = (struct zl_hs_out){ .ch = p->ch, .id = (int)(p - h->e) };
	return 1;
}

static int handle(struct zl_hs *h, const struct epoll_event *ev, struct zl_hs_out *o)
{
	uint64_t id = ev->data.u64;
	uint32_t gen = (uint32_t)(id >> 32), slot = (uint32_t)id;
	int64_t now = zl_now_us();
	if (gen == ID_LST && slot == ID_LST) { /* the timer */
		uint64_t n;
		if (read(h->tfd, &n, sizeof(n)) < 0)
			n = 0;
		h->timer_at = ZL_NEVER;
		expire(h, now);
		return 0;
	}
	if (gen == ID_LST) {
		zl_listener *l = h->lst[slot].l;
		for (int k = 0; k < TAKE; k++) {
			int fd = l->ops->take(l);
			if (fd < 0) {
				if (fd != -EAGAIN)
					ZL_LOG(ZL_LOG_WARN, "accept: %s", zl_strerror(fd));
				break;
			}
			add(h, (int)slot, fd, now);
		}
		return 0;
	}
	struct ent *p = &h->e[slot];
	if (slot >= h->max || p->st == FREE || p->gen != gen)
		return 0; /* gone since */
	return step(h, p, ev->events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR), o);
}

int zl_hs_next(struct zl_hs *h, struct zl_hs_out *o)
{
	int r = 0;
	expire(h, zl_now_us());
	for (int round = 0; !r; round++) {
		while (!r && h->pos < h->nev)
			r = handle(h, &h->ev[h->pos++], o);
		if (r || round == 1)
			break;
		int n = epoll_wait(h->ep, h->ev, NEV, 0);
		h->nev = n > 0 ? n : 0;
		h->pos = 0;
		if (!h->nev)
			break;
	}
	set_timer(h);
	return r;
}

int zl_hs_wait(struct zl_hs *h, int64_t deadline)
{
	if (h->pos < h->nev)
		return 0;
	int ms = zl_poll_ms(deadline);
	int n = epoll_wait(h->ep, h->ev, NEV, ms);
	h->nev = n > 0 ? n : 0;
	h->pos = 0;
	if (n == 0 && zl_now_us() >= deadline)
		return -ETIMEDOUT;
	return 0;
}

void zl_hs_release(struct zl_hs *h, int id, const char *why, int err)
{
	if (id < 0 || (unsigned)id >= h->max || h->e[id].st != HELD)
		return;
	if (why) {
		drop(h, &h->e[id], why, err);
		return;
	}
	release(h, &h->e[id]);
}
