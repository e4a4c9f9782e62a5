/* SPDX-License-Identifier: MIT */
/*
 * zl_poller: one waiter over ring channels, stream channels, listeners and
 * foreign fds, level-triggered.
 *
 * Three kinds of items. Ring channels (shm, rdma) are ready when their
 * rings say so, which costs a look at memory; their fds only carry
 * wake-ups and are watched by epoll so that a sleep ends when one comes.
 * Kernel items (fds, listeners) are ready when epoll says so. Stream
 * channels are both: a frame may wait in the channel's buffer, or bytes in
 * the socket.
 *
 * A wait: look at the rings; look at the kernel (epoll_wait without
 * waiting) if there are stream channels or no ring channels, or the wait
 * may not wait and found nothing in the rings, or 64 waits
 * went by without a look (1024 with ring channels only: then the look only
 * notices a peer's end); then spin over the rings for spin_us (a kernel
 * look every KSPIN polls if there are kernel items); then arm every ring
 * channel (ops->arm: ask the peer for a wake-up, fence, look again) and
 * sleep in epoll_wait. So while a ring channel is busy, waits make no
 * system call but the periodic look, and an idle poller sleeps.
 *
 * Kernel readiness is reported only from a fresh look (never remembered
 * from an earlier one): a caller that read a foreign fd dry since must not
 * be told it is readable and block in read(2). A ring channel's fd seen
 * readable is settled at once (its wake-ups taken, its peer looked at), so
 * a dead peer is noticed even while other channels keep the poller busy.
 */
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "clock.h"
#include "internal.h"

#define KLOOK_EVERY 64 /* waits between kernel looks while rings are busy */
/* ... when there are only ring channels: the look only notices a peer's
 * end (a busy poller never sleeps, so never sees it in epoll otherwise) */
#define KLOOK_RINGS_ONLY 1024
#define KSPIN 128      /* polls between kernel looks while spinning */
#define CLOCK_EVERY 64 /* polls between clock reads while spinning */
#define MAX_KEV 64     /* epoll events taken per look */

enum kind { IT_FREE, IT_RING, IT_STREAM, IT_FD };

struct item {
	enum kind kind;
	zl_channel *ch;
	int fd;
	uint32_t events;
	void *user;
	uint64_t gen;     /* == poller gen: reported in this wait, at rep */
	int rep;
	int next_free;
};

struct zl_poller {
	int ep;
	int64_t spin_us;
	struct item *it;
	int cap, free_head;
	int nkernel;         /* items epoll decides for (fds, listeners, streams) */
	int *rings, *streams; /* ids of ring and stream channels */
	int *byfd;            /* the item of each fd, -1: none (an add is O(1)) */
	size_t byfd_cap;
	int nrings, nstreams, rot;
	uint32_t since_klook;
	uint64_t gen;
	struct zl_poller_info info;
};

static bool valid_id(const zl_poller *p, int id)
{
	return p && id >= 0 && id < p->cap && p->it[id].kind != IT_FREE;
}

ZL_API int zl_poller_create(int64_t spin_us, zl_poller **out)
{
	if (!out)
		return -EINVAL;
	zl_poller *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->ep = epoll_create1(EPOLL_CLOEXEC);
	if (p->ep < 0) {
		int e = -errno;
		free(p);
		return e;
	}
	p->spin_us = spin_us < 0 ? 50 : spin_us;
	p->free_head = -1;
	*out = p;
	return 0;
}

ZL_API void zl_poller_destroy(zl_poller *p)
{
	if (!p)
		return;
	close(p->ep);
	free(p->it);
	free(p->rings);
	free(p->streams);
	free(p->byfd);
	free(p);
}

ZL_API int zl_poller_info(const zl_poller *p, struct zl_poller_info *info)
{
	if (!p || !info)
		return -EINVAL;
	*info = p->info;
	return 0;
}

static uint32_t ep_events(const struct item *t)
{
	if (t->kind == IT_RING)
		return EPOLLIN; /* wake-ups and the peer's end */
	return (t->events & ZL_POLLIN ? EPOLLIN : 0) | (t->events & ZL_POLLOUT ? EPOLLOUT : 0);
}

/* A free slot (growing the table), or -ENOMEM. */
static int slot_get(zl_poller *p)
{
	if (p->free_head < 0) {
		int n = p->cap ? p->cap * 2 : 16;
		struct item *it = realloc(p->it, (size_t)n * sizeof(*it));
		int *rings = realloc(p->rings, (size_t)n * sizeof(*rings));
		if (rings)
			p->rings = rings;
		int *streams = realloc(p->streams, (size_t)n * sizeof(*streams));
		if (streams)
			p->streams = streams;
		if (it)
			p->it = it;
		if (!it || !rings || !streams)
			return -ENOMEM;
		/* the new slots, chained in order: the table grows only when all
		 * are taken (each add once doubled it: 20 fds took 400 MB) */
		for (int i = p->cap; i < n; i++)
			p->it[i] = (struct item){ .kind = IT_FREE, .next_free = i + 1 < n ? i + 1 : -1 };
		p->free_head = p->cap;
		p->cap = n;
	}
	int id = p->free_head;
	p->free_head = p->it[id].next_free;
	return id;
}

static int add(zl_poller *p, enum kind kind, zl_channel *ch, int fd, uint32_t events,
	       void *user)
{
	if (!events || (events & ~(ZL_POLLIN | ZL_POLLOUT)) || fd < 0)
		return -EINVAL;
	/* an item already here is found by its fd (its channel's), also one
	 * whose fd was closed before its removal (that stays an error here:
	 * the caller must remove it first) */
	if ((size_t)fd < p->byfd_cap && p->byfd[fd] >= 0)
		return -EEXIST;
	if ((size_t)fd >= p->byfd_cap) {
		size_t n = p->byfd_cap ? p->byfd_cap : 64;
		while (n <= (size_t)fd)
			n *= 2;
		int *b = realloc(p->byfd, n * sizeof(*b));
		if (!b)
			return -ENOMEM;
		for (size_t i = p->byfd_cap; i < n; i++)
			b[i] = -1;
		p->byfd = b;
		p->byfd_cap = n;
	}
	int id = slot_get(p);
	if (id < 0)
		return id;
	struct item *t = &p->it[id];
	*t = (struct item){ .kind = kind, .ch = ch, .fd = fd, .events = events, .user = user };
	struct epoll_event e = { .events = ep_events(t), .data.u32 = (uint32_t)id };
	if (epoll_ctl(p->ep, EPOLL_CTL_ADD, fd, &e)) {
		int err = -errno;
		*t = (struct item){ .kind = IT_FREE, .next_free = p->free_head };
		p->free_head = id;
		return err == -EBADF || err == -EPERM ? -EINVAL : err;
	}
	p->byfd[fd] = id;
	if (kind == IT_RING)
		p->rings[p->nrings++] = id;
	else
		p->nkernel++;
	if (kind == IT_STREAM)
		p->streams[p->nstreams++] = id;
	return id;
}

ZL_API int zl_poller_add_channel(zl_poller *p, zl_channel *ch, uint32_t events, void *user)
{
	if (!p || !ch || !ch->ops->ready)
		return -EINVAL;
	int fd = ch->ops->fd(ch);
	if (fd < 0)
		return fd == -ENOMEM ? fd : -EINVAL;
	int id = add(p, ch->ops->kernel ? IT_STREAM : IT_RING, ch, fd, events, user);
	if (id >= 0 && !ch->ops->kernel && ch->ops->settle)
		ch->ops->settle(ch, false); /* manual mode from now on */
	return id;
}

ZL_API int zl_poller_add_listener(zl_poller *p, zl_listener *l, void *user)
{
	if (!p || !l)
		return -EINVAL;
	return add(p, IT_FD, NULL, zl_listener_fd(l), ZL_POLLIN, user);
}

ZL_API int zl_poller_add_fd(zl_poller *p, int fd, uint32_t events, void *user)
{
	if (!p)
		return -EINVAL;
	return add(p, IT_FD, NULL, fd, events, user);
}

ZL_API int zl_poller_mod(zl_poller *p, int id, uint32_t events)
{
	if (!valid_id(p, id))
		return -ENOENT;
	if (!events || (events & ~(ZL_POLLIN | ZL_POLLOUT)))
		return -EINVAL;
	struct item *t = &p->it[id];
	t->events = events;
	struct epoll_event e = { .events = ep_events(t), .data.u32 = (uint32_t)id };
	return epoll_ctl(p->ep, EPOLL_CTL_MOD, t->fd, &e) ? -errno : 0;
}

/* Remove id from the list a[0..*n) (order does not matter). */
static void drop_id(int *a, int *n, int id)
{
	for (int i = 0; i < *n; i++)
		if (a[i] == id) {
			a[i] = a[--*n];
			return;
		}
}

ZL_API int zl_poller_del(zl_poller *p, int id)
{
	if (!valid_id(p, id))
		return -ENOENT;
	struct item *t = &p->it[id];
	epoll_ctl(p->ep, EPOLL_CTL_DEL, t->fd, NULL); /* fails only if closed */
	if (p->byfd[t->fd] == id)
		p->byfd[t->fd] = -1;
	if (t->kind == IT_RING)
		drop_id(p->rings, &p->nrings, id);
	else
		p->nkernel--;
	if (t->kind == IT_STREAM)
		drop_id(p->streams, &p->nstreams, id);
	*t = (struct item){ .kind = IT_FREE, .next_free = p->free_head };
	p->free_head = id;
	return 0;
}

/* ---- waiting ------------------------------------------------------------ */

/* Report events m of item id (merged with an earlier report in this wait). */
static int report(zl_poller *p, int id, uint32_t m, struct zl_poll_event *ev, int n, int max)
{
	struct item *t = &p->it[id];
	m &= t->events | ZL_POLLERR | ZL_POLLHUP;
	if (!m)
		return n;
	if (t->gen == p->gen) {
		ev[t->rep].events |= m;
		return n;
	}
	if (n == max)
		return n;
	t->gen = p->gen;
	t->rep = n;
	ev[n] = (struct zl_poll_event){ .events = m, .id = id, .user = t->user };
	return n + 1;
}

/* Look at every ring channel's memory, from a rotating start. */
static int look_rings(zl_poller *p, struct zl_poll_event *ev, int n, int max)
{
	int k = p->nrings;
	for (int i = 0; i < k && n < max; i++) {
		int id = p->rings[(p->rot + i) % k];
		struct item *t = &p->it[id];
		n = report(p, id, t->ch->ops->ready(t->ch, t->events), ev, n, max);
	}
	if (k)
		p->rot = (p->rot + 1) % k;
	return n;
}

static uint32_t from_epoll(uint32_t e)
{
	return (e & EPOLLIN ? ZL_POLLIN : 0) | (e & EPOLLOUT ? ZL_POLLOUT : 0) |
	       (e & EPOLLERR ? ZL_POLLERR : 0) | (e & EPOLLHUP ? ZL_POLLHUP : 0);
}

/* One epoll_wait (timeout_ms 0: a look). Ring channels seen are settled,
 * stream channels add their buffers' readiness, fds report as they are.
 * The new count of events, or -errno. */
static int look_kernel(zl_poller *p, struct zl_poll_event *ev, int n, int max,
		       int timeout_ms)
{
	struct epoll_event kev[MAX_KEV];
	int k = epoll_wait(p->ep, kev, MAX_KEV, timeout_ms);
	if (k < 0)
		return -errno;
	p->since_klook = 0;
	for (int i = 0; i < k; i++) {
		int id = (int)kev[i].data.u32;
		struct item *t = &p->it[id];
		if (t->kind == IT_RING) {
			t->ch->ops->settle(t->ch, false); /* its state shows in ready */
			n = report(p, id, t->ch->ops->ready(t->ch, t->events), ev, n, max);
		} else {
			uint32_t m = from_epoll(kev[i].events);
			if (t->kind == IT_STREAM)
				m |= t->ch->ops->ready(t->ch, t->events);
			n = report(p, id, m, ev, n, max);
		}
	}
	/* stream frames already buffered show in no socket */
	for (int i = 0; i < p->nstreams && n < max; i++) {
		struct item *t = &p->it[p->streams[i]];
		n = report(p, p->streams[i], t->ch->ops->ready(t->ch, t->events), ev, n, max);
	}
	return n;
}

/* Arm every ring channel before a sleep; events of those already ready. */
static int arm_rings(zl_poller *p, struct zl_poll_event *ev, int n, int max)
{
	for (int i = 0; i < p->nrings && n < max; i++) {
		struct item *t = &p->it[p->rings[i]];
		int m = t->ch->ops->arm(t->ch, t->events, false);
		p->info.arms++;
		if (m > 0)
			n = report(p, p->rings[i], (uint32_t)m, ev, n, max);
	}
	return n;
}

static int done(zl_poller *p, int n)
{
	p->info.events += (uint64_t)n;
	return n;
}

ZL_API int zl_poller_wait(zl_poller *p, struct zl_poll_event *ev, int max, int64_t timeout_us)
{
	if (!p || !ev || max <= 0)
		return -EINVAL;
	p->info.waits++;
	p->gen++;
	int n = look_rings(p, ev, 0, max);
	/* with ring channels, an empty first look goes on to the spin, which
	 * looks at the kernel every KSPIN polls: no system call per wait */
	uint32_t every = p->nkernel ? KLOOK_EVERY : KLOOK_RINGS_ONLY;
	if (p->nstreams || !p->nrings || (!n && !timeout_us) || ++p->since_klook >= every) {
		p->info.kernel_looks++;
		if ((n = look_kernel(p, ev, n, max, 0)) < 0)
			return n;
	}
	if (n)
		return done(p, n);
	if (!timeout_us)
		return -EAGAIN;
	int64_t now = zl_now_us();
	int64_t dl = timeout_us < 0 ? ZL_NEVER : now + timeout_us;
	for (;;) {
		int64_t spin_end = now + p->spin_us < dl ? now + p->spin_us : dl;
		for (uint32_t i = 1; now < spin_end; i++) {
			zl_cpu_relax();
			if ((n = look_rings(p, ev, 0, max)))
				return done(p, n);
			if (p->nkernel && (!p->nrings || i % KSPIN == 0)) {
				p->info.kernel_looks++;
				if ((n = look_kernel(p, ev, 0, max, 0)))
					return n < 0 ? n : done(p, n);
			}
			if (!p->nrings || i % CLOCK_EVERY == 0)
				now = zl_now_us();
		}
		if (now >= dl)
			return -ETIMEDOUT;
		if ((n = arm_rings(p, ev, 0, max)))
			return done(p, n);
		p->info.sleeps++;
		if ((n = look_kernel(p, ev, 0, max, zl_poll_ms(dl))))
			return n < 0 ? n : done(p, n);
		now = zl_now_us();
		if (now >= dl)
			return -ETIMEDOUT;
		p->gen++;
	}
}
