/* SPDX-License-Identifier: MIT */
/*
 * zl_server accepting, on its own thread: new connections, their transport
 * handshake and ours (srv_hello, then srv_welcome with the client's
 * mailbox), up to a client queued on srv->ready for the serving thread
 * (srv_take_ready, serve.c). Calls clients.c only.
 *
 * A new connection is a pending entry until it is a client: first its
 * transport handshake (fd: the raw socket, finished once the peer's first
 * message is wholly there, so finish does not wait on the peer), then our
 * hello (its channel's fd). The acceptor polls every entry; none is ever
 * waited on alone, so a silent or slow peer holds only its own entry, until
 * its handshake_timeout_us. A peer that sent part of a hello is looked at
 * again after a backoff (its fd stays readable). Past max_handshakes
 * entries a newcomer displaces the oldest entry of the peer (uid, or
 * address) holding the most, so a flood of connections cannot keep others
 * out. Ring channels are settled (manual arming) as soon as they exist:
 * a peer cannot make us arm and fence at will.
 */
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "ringchan.h"
#include "server.h"
#include "sockutil.h"

static bool is_transport(zl_channel *ch, const char *name)
{
	struct zl_channel_info ci;
	return !zl_channel_info(ch, &ci) && !strcmp(ci.transport, name);
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
	struct srv_client *cl = srv_client_new(s, ch);
	uint32_t idx = 0;
	uint64_t id = 0;
	int fds[2] = { -1, -1 };
	bool rdma = !shm && ch->os && is_transport(ch, "rdma");
	r = cl ? srv_reserve_client(s, shm || rdma, &idx, &id) : -ENOMEM;
	bool reserved = !r;
	if (!r && shm) {
		cl->kind = CL_MBOX;
		cl->idx = idx;
		r = srv_mbox_setup(s, cl, fds);
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
		r = srv_rmbox_setup(s, cl, &w);
		if (r == -EOPNOTSUPP) { /* requests as ring messages, then */
			srv_rmbox_free(cl, true);
			srv_release_client(s, true, idx, false);
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
			srv_release_client(s, cl->kind == CL_MBOX || cl->kind == CL_RMBOX, idx, true);
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
	srv_kick(s->accept_fd);
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
	} else if (p->fd >= 0)
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
			r = srv_settle(NULL, p->ch, true);
		if (r) {
			pend_drop(s, p, np, "transport handshake failed", r);
			return 1;
		}
	}
	struct srv_hello h;
	size_t n = 0;
	/* ring channels: take the wake-ups that made the fd readable */
	int r = srv_settle(NULL, p->ch, false);
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

void *srv_acceptor(void *arg)
{
	struct zl_server *s = arg;
	struct pollfd *pf = s->pfds;
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
		if (quit)
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
	return NULL;
}
