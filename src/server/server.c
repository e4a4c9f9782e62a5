/* SPDX-License-Identifier: MIT */
/*
 * zl_server setup: options, listeners, handlers, counters, and the acceptor
 * thread. Accepting runs on its own thread so that a client stalling in a
 * handshake (transport or ours) never delays the serving thread: finished
 * clients are queued and the serving thread picks them up (srv_attach).
 */
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "ringchan.h"
#include "server.h"
#include "sockutil.h"

ZL_API void zl_server_opts_init(struct zl_server_opts *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->slots = 4;
	o->slot_size = 512;
	o->max_clients = 1024;
	o->max_req = 4u << 20;
	o->spin_us = 50;
	o->sweep_us = 1000;
	o->max_queued = 8u << 20;
	o->max_ring = 4u << 20;
	o->max_handshakes = 64;
}

static int opts_ok(const struct zl_server_opts *o)
{
	return o->slots >= 1 && o->slots <= SRV_MAX_SLOTS && o->slot_size >= 64 &&
	       o->slot_size <= 65536 && o->slot_size % 64 == 0 && o->max_clients >= 1 &&
	       o->max_clients <= 65536 && o->max_req >= 1 && o->max_req <= UINT32_MAX &&
	       o->spin_us >= -1 && o->sweep_us > 0 && o->max_queued > 0 &&
	       o->max_ring >= 4096 && o->max_ring <= (1u << 30) && o->max_handshakes >= 1 &&
	       o->max_handshakes <= 65536;
}

static int ep_add(int ep, int fd, struct ep_tag *t)
{
	struct epoll_event e = { .events = EPOLLIN, .data.ptr = t };
	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) ? -errno : 0;
}

ZL_API int zl_server_create(const struct zl_server_opts *opts, zl_server **out)
{
	struct zl_server_opts o;
	zl_server_opts_init(&o);
	if (!out)
		return -EINVAL;
	if (opts) {
		if (opts->size < offsetof(struct zl_server_opts, reserved))
			return -EINVAL;
		memcpy(&o, opts, offsetof(struct zl_server_opts, reserved));
		o.size = sizeof(o);
	}
	if (!opts_ok(&o))
		return -EINVAL;
	struct zl_server *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->o = o;
	s->ep = s->stop_fd = s->ctl_fd = s->accept_fd = s->flags_fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	s->t_accept.kind = EP_ACCEPT;
	s->t_stop.kind = EP_STOP;
	s->scan_impl = zl_scan_best() | ZL_SCAN_PADDED;
	s->next_id = 1;
	/* the flag array: padded to a page, so SIMD may read past the end */
	s->flags_len = srv_round_up((uint64_t)o.max_clients * o.slots + 64, 4096);
	s->idx_used = calloc(o.max_clients, 1);
	s->pend = calloc(o.max_handshakes, sizeof(*s->pend));
	s->mbox = calloc(o.max_clients, sizeof(*s->mbox));
	s->rflags = aligned_alloc(4096, s->flags_len);
	int r = s->idx_used && s->mbox && s->rflags && s->pend ? 0 : -ENOMEM;
	if (s->rflags)
		memset(s->rflags, 0, s->flags_len);
	if (!r && (s->ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
		r = -errno;
	if (!r && ((s->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
		   (s->ctl_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
		   (s->accept_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0))
		r = -errno;
	if (!r && (s->flags_fd = zl_memfd_sealed("zipline-flags", s->flags_len)) < 0)
		r = s->flags_fd;
	if (!r) {
		s->flags = mmap(NULL, s->flags_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
				s->flags_fd, 0);
		if (s->flags == MAP_FAILED) {
			s->flags = NULL;
			r = -errno;
		}
	}
	if (!r)
		r = ep_add(s->ep, s->accept_fd, &s->t_accept);
	if (!r)
		r = ep_add(s->ep, s->stop_fd, &s->t_stop);
	if (r) {
		zl_server_close(s);
		return r;
	}
	*out = s;
	return 0;
}

/* ---- accepting (the acceptor thread) --------------------------------- */

static void kick(int efd)
{
	uint64_t one = 1;
	ssize_t r = write(efd, &one, sizeof(one));
	(void)r; /* an eventfd at its limit is still readable: nothing lost */
}

void srv_drain(int efd)
{
	uint64_t v;
	while (read(efd, &v, sizeof(v)) > 0)
		;
}

static bool is_transport(zl_channel *ch, const char *name)
{
	struct zl_channel_info ci;
	return !zl_channel_info(ch, &ci) && !strcmp(ci.transport, name);
}

/* Reserve a place for one more client (and a mailbox index). */
static int reserve_client(struct zl_server *s, bool mbox, uint32_t *idx, uint64_t *id)
{
	int r = -EUSERS;
	pthread_mutex_lock(&s->lock);
	if (s->nclients < s->o.max_clients) {
		r = 0;
		if (mbox) {
			uint32_t i = 0;
			while (s->idx_used[i])
				i++; /* nclients < max_clients: a free index exists */
			s->idx_used[i] = 1;
			*idx = i;
		}
		s->nclients++;
		*id = s->next_id++;
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

static void release_client(struct zl_server *s, bool mbox, uint32_t idx, bool client)
{
	pthread_mutex_lock(&s->lock);
	if (mbox)
		s->idx_used[idx] = 0;
	s->nclients -= client;
	pthread_mutex_unlock(&s->lock);
}

static struct srv_client *client_new(struct zl_server *s, zl_channel *ch)
{
	struct srv_client *cl = calloc(1, sizeof(*cl) + s->o.slots * sizeof(struct zl_req));
	if (!cl)
		return NULL;
	cl->srv = s;
	cl->ch = ch;
	for (uint32_t k = 0; k < s->o.slots; k++) {
		cl->req[k].cl = cl;
		cl->req[k].slot = (uint16_t)k;
		cl->req[k].seq = 1;
	}
	return cl;
}

/* The shm mailbox: this client's page; fds[1] for it. */
static int mbox_setup(struct zl_server *s, struct srv_client *cl, int fds[2])
{
	cl->page_len = srv_page_len(s->o.slots, s->o.slot_size);
	fds[0] = s->flags_fd;
	fds[1] = zl_memfd_sealed("zipline-slots", cl->page_len);
	if (fds[1] < 0)
		return fds[1];
	cl->page = mmap(NULL, cl->page_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
			fds[1], 0);
	if (cl->page == MAP_FAILED) {
		cl->page = NULL;
		return -errno;
	}
	return 0;
}

/* The rdma mailbox: this client's slots in our memory, and a window bound
 * to its queue pair over each of its two ranges, its slots and its flags
 * in rflags. Each range is also its own registration: rxe bounds a
 * window's access by its region only, so a window over one region shared
 * by all clients would let a client write past its own flags. The
 * registrations allow no remote access by themselves. -EOPNOTSUPP: the
 * device has no memory windows. */
static int rmbox_setup(struct zl_server *s, struct srv_client *cl, struct srv_welcome *w)
{
	const struct zl_onesided_ops *os = cl->ch->os;
	uint32_t slots_len = s->o.slots * s->o.slot_size;
	uint8_t *flags = s->rflags + (size_t)cl->idx * s->o.slots;
	cl->os = os;
	cl->page_len = srv_page_len(s->o.slots, s->o.slot_size);
	cl->page = aligned_alloc(4096, cl->page_len);
	if (!cl->page)
		return -ENOMEM;
	memset(cl->page, 0, cl->page_len);
	uint8_t *slots = cl->page + SRV_CTL_SIZE;
	struct zl_rwin ds, df;
	int r = os->reg(cl->ch, slots, slots_len, &cl->rm_slots);
	if (!r)
		r = os->reg(cl->ch, flags, s->o.slots, &cl->rm_flags);
	if (!r)
		r = os->win_open(cl->ch, cl->rm_slots, slots, slots_len, &cl->w_slots, &ds);
	if (!r)
		r = os->win_open(cl->ch, cl->rm_flags, flags, s->o.slots, &cl->w_flags, &df);
	if (r)
		return r;
	w->slots_win = (struct srv_rwin){ .addr = ds.addr, .rkey = ds.rkey, .len = ds.len };
	w->flags_win = (struct srv_rwin){ .addr = df.addr, .rkey = df.rkey, .len = df.len };
	w->flags |= SRV_F_RMBOX;
	w->flag_base = cl->idx * s->o.slots;
	return 0;
}

/* Close an rdma client's windows (at once when it is dropped); with all,
 * free its slots too (once no deferred request reads them). */
void srv_rmbox_free(struct srv_client *cl, bool all)
{
	if (!cl->os)
		return;
	cl->os->win_close(cl->w_slots);
	cl->os->win_close(cl->w_flags);
	cl->w_slots = cl->w_flags = NULL;
	if (!all)
		return;
	cl->os->dereg(cl->rm_slots);
	cl->os->dereg(cl->rm_flags);
	cl->rm_slots = cl->rm_flags = NULL;
	free(cl->page);
	cl->page = NULL;
	cl->os = NULL;
}

static int send_welcome(zl_channel *ch, bool shm, const struct srv_welcome *w,
			const int *fds, int nfds)
{
	if (shm)
		return zl_send_fds(zl_shm_sock(ch), w, sizeof(*w), fds, nfds);
	return zl_send(ch, w, sizeof(*w), 0); /* a new channel has room */
}

/* Our handshake with a new channel, whose hello (n bytes, or the error r
 * of receiving it) came; queue the client for the server. */
static void admit(struct zl_server *s, zl_channel *ch, int r, const struct srv_hello *hp,
		  size_t n)
{
	struct srv_hello h = *hp;
	bool shm = is_transport(ch, "shm");
	if (r || n != sizeof(h) || h.magic != SRV_MAGIC || h.size != sizeof(h) ||
	    h.version != SRV_VERSION) {
		CNT_ADD(s, handshakes_failed, 1);
		ZL_LOG(ZL_LOG_WARN, "server: dropping a peer with a bad hello (%s)",
		       r ? zl_strerror(r) : "malformed");
		r = r == -EMSGSIZE || !r ? -EPROTO : r;
		if (r == -EPROTO && n >= 8 && h.magic == SRV_MAGIC) {
			struct srv_welcome w = { .magic = SRV_MAGIC, .version = SRV_VERSION,
						 .size = sizeof(w), .status = -EPROTO };
			send_welcome(ch, shm, &w, NULL, 0);
		}
		zl_close(ch);
		return;
	}
	struct srv_welcome w = { .magic = SRV_MAGIC, .version = SRV_VERSION, .size = sizeof(w),
				 .slots = s->o.slots, .slot_size = s->o.slot_size,
				 .max_req = s->o.max_req };
	struct srv_client *cl = client_new(s, ch);
	uint32_t idx = 0;
	uint64_t id = 0;
	int fds[2] = { -1, -1 };
	bool rdma = !shm && ch->os && is_transport(ch, "rdma");
	r = cl ? reserve_client(s, shm || rdma, &idx, &id) : -ENOMEM;
	bool reserved = !r;
	if (!r && shm) {
		cl->kind = CL_MBOX;
		cl->idx = idx;
		r = mbox_setup(s, cl, fds);
		w.flags = SRV_F_MBOX | (zl_membarrier_register() ? SRV_F_MEMBARRIER : 0);
		w.flag_base = idx * s->o.slots;
		w.flags_len = (uint32_t)s->flags_len;
		w.page_len = (uint32_t)cl->page_len;
		/* the client fences itself unless both sides take membarrier */
		if (!(h.flags & SRV_F_MEMBARRIER) || !(w.flags & SRV_F_MEMBARRIER))
			w.flags &= ~SRV_F_MEMBARRIER;
	} else if (!r && rdma) {
		cl->kind = CL_RMBOX;
		cl->idx = idx;
		r = rmbox_setup(s, cl, &w);
		if (r == -EOPNOTSUPP) { /* requests as ring messages, then */
			srv_rmbox_free(cl, true);
			release_client(s, true, idx, false);
			cl->kind = CL_RING;
			r = 0;
		}
	} else if (!r) {
		cl->kind = is_transport(ch, "rdma") ? CL_RING : CL_STREAM; /* rdma: no one-sided ops */
	}
	w.status = r;
	w.client_id = id;
	int sr = send_welcome(ch, shm, &w, fds, r ? 0 : 2);
	if (fds[1] >= 0)
		close(fds[1]); /* the client has it; we keep the mapping */
	if (!r && sr) {
		ZL_LOG(ZL_LOG_WARN, "server: welcome failed: %s", zl_strerror(sr));
		r = sr;
	}
	if (r) {
		if (reserved)
			release_client(s, cl->kind == CL_MBOX || cl->kind == CL_RMBOX, idx, true);
		if (cl) {
			cl->ch = NULL;
			srv_free_client(cl);
		}
		zl_close(ch);
		return;
	}
	cl->id = id;
	cl->asym = shm && (w.flags & SRV_F_MEMBARRIER);
	pthread_mutex_lock(&s->lock);
	cl->next = s->ready;
	s->ready = cl;
	pthread_mutex_unlock(&s->lock);
	atomic_fetch_add_explicit(&s->n.clients_total, 1, memory_order_relaxed);
	kick(s->accept_fd);
}

/* ---- pending handshakes (the acceptor thread) --------------------------
 *
 * A new connection is a pending entry until it is a client: first its
 * transport handshake (fd: the raw socket, finished once the peer's first
 * message is wholly there, so finish does not wait on the peer), then our
 * hello (its channel's fd). The acceptor polls every entry; none is ever
 * waited on alone, so a silent or slow peer holds only its own entry, until
 * its handshake_timeout_us. Past max_handshakes entries a newcomer
 * displaces the oldest entry of the peer (uid, or address) holding the
 * most, so a flood of connections cannot keep others out.
 */

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
	const uint8_t *p = a.ss_family == AF_INET6 ? (const uint8_t *)&((struct sockaddr_in6 *)&a)->sin6_addr
						  : (const uint8_t *)&((struct sockaddr_in *)&a)->sin_addr;
	size_t n = a.ss_family == AF_INET6 ? 16 : 4;
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h | 1ull << 63;
}

static void pend_drop(struct zl_server *s, struct pend *p, int *np, const char *why, int err)
{
	if (why)
		ZL_LOG(ZL_LOG_WARN, "server: dropping a new client in its handshake: %s (%s)", why,
		       zl_strerror(err));
	CNT_ADD(s, handshakes_failed, 1);
	if (p->ch) {
		p->ch->no_linger = true;
		zl_close(p->ch);
	}
	else if (p->fd >= 0)
		close(p->fd);
	*p = s->pend[--*np]; /* order does not matter */
}

/* The table is full: the peer holding most entries loses its oldest. */
static void pend_displace(struct zl_server *s, int *np)
{
	int victim = 0, most = 0;
	for (int i = 0; i < *np; i++) {
		int c = 0, oldest = i;
		for (int j = 0; j < *np; j++)
			if (s->pend[j].peer == s->pend[i].peer) {
				c++;
				if (s->pend[j].since < s->pend[oldest].since)
					oldest = j;
			}
		if (c > most) {
			most = c;
			victim = oldest;
		}
	}
	pend_drop(s, &s->pend[victim], np, "displaced by newer clients (max_handshakes)",
		  -EUSERS);
}

/* Move entry p on as far as it goes without waiting; 1 when it is done
 * (admitted or dropped: p then holds another entry), else 0. */
static int pend_step(struct zl_server *s, struct pend *p, int *np)
{
	if (!p->ch) {
		int r = p->l->ops->ready(p->l, p->fd);
		if (r == 0) {
			/* part of a hello: the fd stays readable, so it leaves the
			 * poll set and is looked at again after a backoff */
			p->backoff = p->backoff ? p->backoff * 2 : 1000;
			if (p->backoff > 64000)
				p->backoff = 64000;
			p->next_look = zl_now_us() + p->backoff;
			return 0;
		}
		if (r < 0) {
			pend_drop(s, p, np, NULL, r); /* left before its hello: a probe */
			return 1;
		}
		r = p->l->ops->finish(p->l, p->fd, &p->ch);
		p->fd = -1;
		if (r)
			p->ch = NULL;
		else if ((r = zl_channel_fd(p->ch)) >= 0)
			/* ring channels: arm the peer's wake-up once, and from now
			 * on only before sleeping (empty looks no longer arm and
			 * fence, which a peer could otherwise make us do at will) */
			r = p->ch->ops->settle ? p->ch->ops->settle(p->ch, true) : 0;
		if (r) {
			pend_drop(s, p, np, "transport handshake failed", r);
			return 1;
		}
	}
	struct srv_hello h;
	size_t n = 0;
	/* ring channels: take the wake-ups that made the fd readable */
	int r = p->ch->ops->settle ? p->ch->ops->settle(p->ch, false) : 0;
	if (!r)
		r = zl_recv(p->ch, &h, sizeof(h), &n, 0);
	if (r == -EAGAIN)
		return 0;
	zl_channel *ch = p->ch;
	*p = s->pend[--*np];
	admit(s, ch, r, &h, n);
	return 1;
}

static void pend_add(struct zl_server *s, zl_listener *l, int fd, int *np, int64_t now,
		     int64_t hs_us)
{
	if (*np >= (int)s->o.max_handshakes)
		pend_displace(s, np);
	struct pend *p = &s->pend[(*np)++];
	*p = (struct pend){ .l = l, .fd = fd, .since = now, .deadline = now + hs_us,
			    .peer = peer_key(fd) };
	pend_step(s, p, np); /* a hello may be there already */
}

static void *acceptor(void *arg)
{
	struct zl_server *s = arg;
	int cap = SRV_MAX_LISTENERS + 1 + (int)s->o.max_handshakes;
	struct pollfd *pf = calloc((size_t)cap, sizeof(*pf));
	int np = 0;
	zl_listener *l[SRV_MAX_LISTENERS];
	int64_t hs_us[SRV_MAX_LISTENERS];
	for (;;) {
		pthread_mutex_lock(&s->lock);
		bool quit = s->acceptor_quit;
		int n = s->nlst;
		for (int i = 0; i < n; i++) {
			l[i] = s->lst[i];
			hs_us[i] = s->lst_hs_us[i];
		}
		pthread_mutex_unlock(&s->lock);
		if (quit || !pf)
			break;
		int64_t now = zl_now_us(), until = ZL_NEVER;
		for (int i = 0; i < np;) { /* expire, look again, find the next time */
			struct pend *p = &s->pend[i];
			if (now >= p->deadline) {
				pend_drop(s, p, &np, "no complete handshake in time", -ETIMEDOUT);
				continue;
			}
			if (p->next_look && now >= p->next_look) {
				p->next_look = 0;
				if (pend_step(s, p, &np))
					continue;
			}
			int64_t t = p->next_look ? p->next_look : p->deadline;
			if (t < until)
				until = t;
			i++;
		}
		for (int i = 0; i < n; i++)
			pf[i] = (struct pollfd){ .fd = zl_listener_fd(l[i]), .events = POLLIN };
		pf[n] = (struct pollfd){ .fd = s->ctl_fd, .events = POLLIN };
		for (int i = 0; i < np; i++) { /* backing off: fd -1, not polled */
			struct pend *p = &s->pend[i];
			int fd = p->ch ? zl_channel_fd(p->ch) : p->fd;
			pf[n + 1 + i] = (struct pollfd){ .fd = p->next_look ? -1 : fd, .events = POLLIN };
		}
		int m = n + 1 + np;
		if (poll(pf, (nfds_t)m, zl_poll_ms(until)) < 0)
			continue; /* EINTR */
		if (pf[n].revents)
			srv_drain(s->ctl_fd);
		/* entries first: a step may move the last entry into slot i */
		for (int i = np - 1; i >= 0; i--)
			if (pf[n + 1 + i].revents && i < np)
				pend_step(s, &s->pend[i], &np);
		now = zl_now_us();
		for (int i = 0; i < n; i++) {
			for (int k = 0; pf[i].revents && k < 64; k++) {
				int fd = l[i]->ops->take(l[i]);
				if (fd < 0)
					break;
				pend_add(s, l[i], fd, &np, now, hs_us[i]);
			}
		}
	}
	while (np)
		pend_drop(s, &s->pend[0], &np, NULL, 0);
	free(pf);
	return NULL;
}

ZL_API int zl_server_listen(zl_server *s, const char *url, const struct zl_opts *opts)
{
	if (!s || !url)
		return -EINVAL;
	if (s->nlst >= SRV_MAX_LISTENERS) /* only this thread adds listeners */
		return -ENOSPC;
	struct zl_opts o;
	zl_opts_init(&o);
	o.ring_size = 64 * 1024; /* requests mostly travel in slots */
	if (opts) {
		if (opts->size < offsetof(struct zl_opts, reserved))
			return -EINVAL;
		memcpy(&o, opts, offsetof(struct zl_opts, reserved));
	}
	/* the budgets: nothing larger than a request comes in (a stream
	 * buffers a frame as it arrives), no reply ring larger than max_ring */
	uint64_t max_in = s->o.max_req + sizeof(struct srv_hdr);
	if (o.max_msg > max_in)
		o.max_msg = max_in;
	if (o.max_peer_ring > s->o.max_ring)
		o.max_peer_ring = s->o.max_ring;
	zl_listener *l;
	int r = zl_listen(url, &o, &l);
	if (r)
		return r;
	pthread_mutex_lock(&s->lock);
	s->lst_hs_us[s->nlst] = o.handshake_timeout_us;
	s->lst[s->nlst++] = l;
	bool start = !s->acceptor_running;
	pthread_mutex_unlock(&s->lock);
	if (!start) {
		kick(s->ctl_fd);
		return 0;
	}
	r = pthread_create(&s->acceptor, NULL, acceptor, s);
	if (r) {
		pthread_mutex_lock(&s->lock);
		s->nlst--;
		pthread_mutex_unlock(&s->lock);
		zl_listener_close(l);
		return -r;
	}
	s->acceptor_running = true;
	return 0;
}

ZL_API int zl_server_url(const zl_server *s, int i, char *buf, size_t cap)
{
	if (!s || !buf)
		return -EINVAL;
	if (i < 0 || i >= s->nlst)
		return -ENOENT;
	return zl_listener_url(s->lst[i], buf, cap);
}

ZL_API int zl_server_handle(zl_server *s, int type, zl_handler_fn fn, void *arg)
{
	if (!s || type < 1 || type > 255)
		return -EINVAL;
	s->h[type].fn = fn;
	s->h[type].arg = arg;
	return 0;
}

ZL_API void zl_server_stop(zl_server *s)
{
	if (!s)
		return;
	atomic_store_explicit(&s->stop, true, memory_order_release);
	kick(s->stop_fd);
}

ZL_API int zl_server_info(const zl_server *s, struct zl_server_info *info)
{
	if (!s || !info)
		return -EINVAL;
#define GET(f) atomic_load_explicit(&s->n.f, memory_order_relaxed)
	info->clients = GET(clients);
	info->clients_total = GET(clients_total);
	info->clients_dropped = GET(clients_dropped);
	info->requests = GET(requests);
	info->rejected = GET(rejected);
	info->spurious = GET(spurious);
	info->recovered = GET(recovered);
	info->sleeps = GET(sleeps);
	info->paused = GET(paused);
	info->handshakes_failed = GET(handshakes_failed);
	for (int t = 0; t < 256; t++)
		info->per_type[t] = GET(per_type[t]);
#undef GET
	return 0;
}

ZL_API void zl_server_close(zl_server *s)
{
	if (!s)
		return;
	if (s->acceptor_running) {
		pthread_mutex_lock(&s->lock);
		s->acceptor_quit = true;
		pthread_mutex_unlock(&s->lock);
		kick(s->ctl_fd);
		pthread_join(s->acceptor, NULL);
	}
	for (int i = 0; i < s->nlst; i++)
		zl_listener_close(s->lst[i]);
	srv_take_ready(s); /* attach, then drop with everyone else */
	while (s->clients)
		srv_drop(s->clients, NULL, 0);
	for (struct srv_client *cl = s->graves; cl; cl = cl->next)
		cl->deferred = 0; /* open deferred requests die with the server */
	srv_bury(s);
	free(s->rflags);
	if (s->flags)
		munmap(s->flags, s->flags_len);
	int fds[] = { s->flags_fd, s->ep, s->stop_fd, s->ctl_fd, s->accept_fd };
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	pthread_mutex_destroy(&s->lock);
	free(s->idx_used);
	free(s->pend);
	free(s->mbox);
	free(s->big);
	free(s->scratch);
	free(s);
}

/* Called by the serving thread: attach every client the acceptor queued. */
void srv_take_ready(struct zl_server *s)
{
	pthread_mutex_lock(&s->lock);
	struct srv_client *cl = s->ready;
	s->ready = NULL;
	pthread_mutex_unlock(&s->lock);
	srv_drain(s->accept_fd);
	while (cl) {
		struct srv_client *next = cl->next;
		srv_attach(s, cl);
		cl = next;
	}
}

/* The serving thread gives a client's place back (after srv_drop). */
void srv_release(struct zl_server *s, struct srv_client *cl)
{
	release_client(s, cl->kind == CL_MBOX || cl->kind == CL_RMBOX, cl->idx, true);
}
