/* SPDX-License-Identifier: MIT */
/*
 * zl_server accepting, on its own thread: new connections, their transport
 * handshake and ours (srv_hello, then srv_welcome with the client's
 * mailbox), up to a client queued on srv->ready for the serving thread
 * (srv_take_ready, serve.c). Calls clients.c only.
 *
 * A new connection is an entry of the core's handshake table (hs.c, held
 * mode) until it is a client: first its transport handshake, run side by
 * side with every other's, then our hello on its channel. No entry is ever
 * waited on alone, so a silent or slow peer holds only its own entry, until
 * its handshake_timeout_us; past max_handshakes entries a newcomer
 * displaces the oldest entry of the peer (uid, or address) holding the
 * most. Ring channels are settled (manual arming) as soon as they exist:
 * a peer cannot make us arm and fence at will.
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hs.h"
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

/* A held channel (its transport handshake done) turned readable, or has
 * just been finished (fresh): take our hello, if it is all there. */
static void step(struct zl_server *s, const struct zl_hs_out *o)
{
	zl_channel *ch = o->ch;
	int r = 0;
	/* ring channels: arm the peer's wake-up once, and from now on only
	 * before sleeping (empty looks no longer arm and fence, which a peer
	 * could otherwise make us do at will) */
	if (o->fresh && (r = srv_settle(NULL, ch, true))) {
		zl_hs_release(s->hs, o->id, "transport handshake failed", r);
		return;
	}
	struct srv_hello h;
	size_t n = 0;
	/* ring channels: take the wake-ups that made the fd readable */
	r = srv_settle(NULL, ch, false);
	if (!r)
		r = zl_recv(ch, &h, sizeof(h), &n, 0);
	if (r == -EAGAIN)
		return;
	zl_hs_release(s->hs, o->id, NULL, 0);
	admit(s, ch, r, &h, n);
}

void *srv_acceptor(void *arg)
{
	struct zl_server *s = arg;
	int nw = 0; /* listeners watched */
	uint64_t dropped = 0;
	for (;;) {
		pthread_mutex_lock(&s->lock);
		bool quit = s->acceptor_quit;
		for (; nw < s->nlst; nw++)
			if (zl_hs_watch(s->hs, s->lst[nw], s->lst_hs_us[nw]))
				ZL_LOG(ZL_LOG_ERROR, "server: cannot watch listener %d", nw);
		pthread_mutex_unlock(&s->lock);
		if (quit)
			break;
		struct zl_hs_out o;
		while (zl_hs_next(s->hs, &o))
			if (o.ch)
				step(s, &o);
		uint64_t d = zl_hs_dropped(s->hs);
		CNT_ADD(s, handshakes_failed, d - dropped);
		dropped = d;
		struct pollfd pf[2] = { { .fd = zl_hs_fd(s->hs), .events = POLLIN },
					{ .fd = s->ctl_fd, .events = POLLIN } };
		if (poll(pf, 2, -1) > 0 && pf[1].revents)
			srv_drain(s->ctl_fd);
	}
	return NULL;
}
