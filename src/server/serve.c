/* SPDX-License-Identifier: MIT */
/*
 * The serving loop of zl_server.
 *
 * One round: scan the shm mailbox flags from a rotating start and serve
 * what is set; poll the rings of rdma clients; push out queued replies;
 * every so often (every round when tcp/unix clients exist) look at epoll
 * without waiting, for new clients, channel messages and disconnects; and
 * every sweep_us re-read the slot headers of shm clients.
 *
 * Trust (shm): the flag array is shared by all shm clients (memory is
 * protected per page, and the array must be contiguous), so a rogue client
 * can set or clear anyone's flag. A flag therefore only says where to look:
 * the request is taken from the slot header in the owner's private page,
 * and only if its sequence number is the one expected for that slot. A
 * forged flag costs one check (counted as spurious); a cleared flag delays
 * the request until the sweep, or the owner's doorbell, finds it (counted as
 * recovered). No client can forge or corrupt another client's request.
 *
 * rdma clients write their slots and flags through memory windows bound
 * to their own queue pair, so no client can touch another's; their flags
 * live in a second array (rflags) that shm clients cannot map. A flag is
 * written after its slot (two WRITEs, executed in order by RC), so the
 * header's sequence number is checked as on shm, and there is no sweep
 * (it could read a slot whose WRITE is still landing).
 *
 * Sleeping (eventcount, as ringchan.c): the server sets srv_sleeping in
 * every shm client's page, fences, looks once more, and sleeps in epoll.
 * A client stores its flag, fences, and rings its doorbell if srv_sleeping
 * was set: a wake-up record on its channel's socket, which the server's
 * epoll watches through the channel fd (no fd a client holds is ever one
 * the server reads or writes). With membarrier(2) registered on both
 * sides the client's fence is a compiler barrier and the server's is a
 * global membarrier. rdma clients are armed through their channel (settle:
 * a WRITE into the client's memory) and poke the server after their flag
 * WRITE; a flag still in flight when the server looked once more is found
 * at the latest when the sleep ends, after sweep_us.
 *
 * Channels of ring transports are in manual mode (settled by the
 * acceptor): an empty look costs no system call and asks the peer for
 * nothing. A ring channel is armed before a sleep only while it owes us a
 * message: rdma clients always, a shm client after a doorbell for a large
 * request (bells) or with a fragmented one half in (partial), both of
 * which are also polled every round meanwhile.
 *
 * Fairness and budgets: a client is served at most K requests per look at
 * its channel (more: drained again next round), and while more than
 * max_queued bytes of its replies wait (reply.c) it is paused: its slots
 * announced meanwhile are held and taken once the replies have gone out.
 *
 * Calls reply.c (dispatch, pushing replies) and clients.c (dropping).
 */
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clock.h"
#include "ringchan.h"
#include "server.h"
#include "status.h"

#define EPOLL_US 100 /* between nonblocking epoll looks when only shm clients
                      * are served: a syscall costs more than a round trip */
#define MAX_EVENTS 64

static struct srv_hdr *slot_hdr(struct srv_client *cl, uint32_t k)
{
	return (struct srv_hdr *)(cl->page + SRV_CTL_SIZE + (size_t)k * cl->srv->o.slot_size);
}

static struct srv_page_ctl *page_ctl(struct srv_client *cl)
{
	return (struct srv_page_ctl *)cl->page;
}


static void srv_attach(struct zl_server *s, struct srv_client *cl);

/* Called by the serving thread: attach every client the acceptor queued. */
void srv_take_ready(struct zl_server *s)
{
	/* the signal first: one the acceptor sends after this finds its
	 * client on the list we take next, or stays for the next round (the
	 * other order lost a client queued between the two) */
	srv_drain(s->accept_fd);
	pthread_mutex_lock(&s->lock);
	struct srv_client *cl = s->ready;
	s->ready = NULL;
	pthread_mutex_unlock(&s->lock);
	while (cl) {
		struct srv_client *next = cl->next;
		srv_attach(s, cl);
		cl = next;
	}
}

static int chan_drain(struct srv_client *cl);
static int sweep_client(struct srv_client *cl, bool attach, int64_t now);
static int take_slot(struct srv_client *cl, uint32_t k, bool *valid);
static void rflags_look(struct srv_client *cl);

static void srv_attach(struct zl_server *s, struct srv_client *cl)
{
	struct epoll_event e = { .events = EPOLLIN };
	cl->t_chan = (struct ep_tag){ EP_CHAN, cl };
	int fd = zl_channel_fd(cl->ch);
	e.data.ptr = &cl->t_chan;
	int r = fd < 0 ? fd : epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &e) ? -errno : 0;
	cl->next = s->clients;
	cl->prev = NULL;
	if (s->clients)
		s->clients->prev = cl;
	s->clients = cl;
	CNT_ADD(s, clients, 1);
	if (cl->kind == CL_MBOX || cl->kind == CL_RMBOX) {
		s->mbox[cl->idx] = cl;
		if (cl->idx + 1 > s->mbox_hi)
			s->mbox_hi = cl->idx + 1;
	}
	if (cl->kind == CL_MBOX) {
		s->nmbox++;
		s->nmbox_fence += !cl->asym;
	} else if (cl->kind == CL_RMBOX) {
		s->nrmbox++;
	} else if (cl->kind == CL_STREAM) {
		s->nstream++;
	} else {
		s->nring++;
	}
	if (r) {
		srv_drop(cl, "cannot watch the client", r);
		return;
	}
	if (cl->kind == CL_RMBOX) {
		if ((r = srv_settle(s, cl->ch, true)))
			srv_drop(cl, "cannot arm the client", r);
		else
			rflags_look(cl); /* requests sent before we knew the client */
		return;
	}
	chan_drain(cl); /* messages sent before we knew the client */
	if (cl->kind == CL_MBOX)
		sweep_client(cl, true, 0); /* requests sent before we knew the client */
}





/* ---- requests from the mailbox ----------------------------------------- */

/* Take slot k's request if its header holds the expected sequence number.
 * Returns how many requests were served; *valid tells whether the slot
 * really announced something (else the flag was stale or forged). */
static int take_slot(struct srv_client *cl, uint32_t k, bool *valid)
{
	struct zl_server *s = cl->srv;
	struct zl_req *rq = &cl->req[k];
	if (cl->paused) { /* taken when it resumes (srv_pause) */
		cl->held |= 1ull << k;
		*valid = true;
		return 0;
	}
	struct srv_hdr *h = slot_hdr(cl, k);
	uint32_t seq = atomic_load_explicit(&h->seq, memory_order_acquire);
	/* Only the owner writes its page: from here on a bad field is its
	 * own protocol violation. Read each field once. */
	uint8_t fl = *(volatile uint8_t *)&h->flags;
	if (fl & SRV_F_CHAN) { /* a doorbell: the request is a channel message */
		*valid = seq == rq->seq || seq + 1 == rq->seq; /* maybe taken already */
		if (!*valid || rq->state != REQ_IDLE || seq != rq->seq || rq->bell)
			return 0;
		if (cl->kind != CL_STREAM) { /* the message comes after its doorbell */
			rq->bell = true;
			cl->bells++;
			s->nbells++;
		}
		return chan_drain(cl);
	}
	*valid = rq->state == REQ_IDLE && seq == rq->seq;
	if (!*valid)
		return 0;
	uint8_t type = *(volatile uint8_t *)&h->type;
	uint32_t len = *(volatile uint32_t *)&h->len;
	uint16_t slot = *(volatile uint16_t *)&h->slot;
	if (type == 0 || slot != k || len > s->o.slot_size - sizeof(struct srv_hdr)) {
		CNT_ADD(s, rejected, 1);
		srv_drop(cl, "malformed request in its slot", -EPROTO);
		return 0;
	}
	rq->type = type;
	rq->data = (const uint8_t *)(h + 1);
	rq->len = len;
	srv_dispatch(s, rq);
	return 1;
}

/* Scan one flag array (shm's or rdma's) from its rotating start. */
static int scan_flags(struct zl_server *s, uint8_t *flags, enum cl_kind kind, size_t *start)
{
	uint32_t found[64];
	size_t n = s->mbox_hi * (size_t)s->o.slots;
	if (!n)
		return 0;
	size_t m = zl_scan(s->scan_impl, flags, n, *start, found, 64);
	if (!m)
		return 0;
	atomic_thread_fence(memory_order_acquire);
	int served = 0;
	for (size_t i = 0; i < m; i++) {
		uint32_t f = found[i];
		struct srv_client *cl = s->mbox[f / s->o.slots];
		if (!cl && kind == CL_RMBOX)
			continue; /* its client is not attached yet: rflags_look */
		if (!*(volatile uint8_t *)&flags[f])
			continue; /* consumed meanwhile (chan_request) */
		*(volatile uint8_t *)&flags[f] = 0;
		if (!cl)
			continue; /* not attached yet: its first sweep takes it */
		bool valid = false;
		struct zl_req *rq = NULL;
		if (!cl->dead && cl->kind == kind) {
			rq = &cl->req[f % s->o.slots];
			served += take_slot(cl, f % s->o.slots, &valid);
		}
		if (valid || (rq && rq->flag_owed)) {
			rq->flag_owed = false; /* a late honest flag is not forged */
			continue;
		}
		CNT_ADD(s, spurious, 1);
	}
	*start = found[m - 1] + 1;
	return served;
}

static int scan_mbox(struct zl_server *s)
{
	int served = 0;
	if (s->nmbox)
		served += scan_flags(s, s->flags, CL_MBOX, &s->scan_start);
	if (s->nrmbox)
		served += scan_flags(s, s->rflags, CL_RMBOX, &s->rscan_start);
	return served;
}

/* A new rdma client's flags, raised before it was attached. */
static void rflags_look(struct srv_client *cl)
{
	struct zl_server *s = cl->srv;
	uint8_t *f = s->rflags + (size_t)cl->idx * s->o.slots;
	for (uint32_t k = 0; k < s->o.slots && !cl->dead; k++) {
		if (!*(volatile uint8_t *)&f[k])
			continue;
		atomic_thread_fence(memory_order_acquire);
		*(volatile uint8_t *)&f[k] = 0;
		bool valid;
		take_slot(cl, k, &valid);
		if (!valid)
			CNT_ADD(s, spurious, 1);
	}
}

/*
 * Re-read the header of every idle slot whose flag is clear: requests
 * whose flag a rogue cleared. An honest client stores its flag just after
 * its header, but the scheduler may stop it between the two stores for a
 * time slice or more; so a request is taken (and counted as recovered)
 * only when sweeps found it waiting with its flag clear for RECOVER_US:
 * the counter grows with rogues, and a flag a rogue cleared costs its
 * owner that long. A request taken so may still see its own flag land
 * later, which is not counted as forged (flag_owed). At attach, requests
 * sent before we knew the client are taken at once (their flags were
 * dropped unattached).
 */
#define RECOVER_US 10000

static int sweep_client(struct srv_client *cl, bool attach, int64_t now)
{
	struct zl_server *s = cl->srv;
	const uint8_t *f = s->flags + (size_t)cl->idx * s->o.slots;
	int served = 0;
	for (uint32_t k = 0; k < s->o.slots && !cl->dead; k++) {
		struct zl_req *rq = &cl->req[k];
		if (*(const volatile uint8_t *)&f[k])
			continue; /* the scan takes it */
		bool valid;
		if (attach) {
			/* its header may have landed before its flag: the flag,
			 * when it comes, is the client's own (flag_owed) */
			served += take_slot(cl, k, &valid);
			rq->flag_owed = valid;
			continue;
		}
		uint32_t seq = atomic_load_explicit(&slot_hdr(cl, k)->seq, memory_order_acquire);
		if (rq->state != REQ_IDLE || seq != rq->seq) {
			rq->swept = false;
			continue;
		}
		if (!rq->swept || rq->swept_seq != seq) {
			rq->swept = true; /* its flag may be on its way */
			rq->swept_seq = seq;
			rq->swept_at = now;
			continue;
		}
		if (now - rq->swept_at < RECOVER_US && now - rq->swept_at >= 0)
			continue;
		rq->swept = false;
		int got = take_slot(cl, k, &valid);
		served += got;
		rq->flag_owed = valid;
		CNT_ADD(s, recovered, (uint64_t)got);
	}
	return served;
}

static int sweep(struct zl_server *s, int64_t now)
{
	int served = 0;
	for (struct srv_client *cl = s->clients, *next; cl; cl = next) {
		next = cl->next;
		if (cl->kind == CL_MBOX)
			served += sweep_client(cl, false, now);
	}
	return served;
}

/* ---- requests as channel messages -------------------------------------- */

static int chan_request(struct srv_client *cl, const uint8_t *p, size_t n)
{
	struct zl_server *s = cl->srv;
	struct srv_hdr h;
	if (n < sizeof(h)) {
		srv_drop(cl, "short request", -EPROTO);
		return 0;
	}
	memcpy(&h, p, sizeof(h));
	struct zl_req *rq = h.slot < s->o.slots ? &cl->req[h.slot] : NULL;
	if (!rq || h.type == 0 || h.len != n - sizeof(h) || h.len > s->o.max_req ||
	    rq->state != REQ_IDLE || h.seq != rq->seq) {
		CNT_ADD(s, rejected, 1);
		srv_drop(cl, "malformed request message", -EPROTO);
		return 0;
	}
	if (rq->bell) {
		rq->bell = false;
		cl->bells--;
		s->nbells--;
	} else if (cl->kind == CL_RMBOX || cl->kind == CL_MBOX) {
		/* Served (after another client doorbell) before the scan took
		 * its own doorbell, which the client wrote before the message,
		 * so it has landed. Consume it now, before the reply lets the
		 * client write the slot again: a late flag could otherwise
		 * announce a slot whose WRITE is still landing (rdma), and
		 * would be counted as spurious. */
		uint8_t *f = cl->kind == CL_RMBOX ? s->rflags : s->flags;
		*(volatile uint8_t *)&f[(size_t)cl->idx * s->o.slots + h.slot] = 0;
	}
	rq->type = h.type;
	rq->data = p + sizeof(h);
	rq->len = h.len;
	srv_dispatch(s, rq);
	/* the bytes go with the peek's release, or the next big request */
	if (rq->state == REQ_DEFERRED) {
		rq->copy = malloc(rq->len ? rq->len : 1);
		if (!rq->copy) {
			zl_reply_error(rq, -ENOMEM);
			return 1;
		}
		memcpy(rq->copy, rq->data, rq->len);
		rq->data = rq->copy;
	}
	return 1;
}

/* Serve the messages waiting on a client's channel, at most K per call so
 * that one client cannot hold the thread. If it stops at K, more may wait
 * in the channel's buffer, where epoll cannot see them: the client is
 * marked to be drained again next round. A client whose fragmented message
 * is half in is polled every round too (partial), and armed before the
 * server sleeps: ring channels are in manual mode (the acceptor settled
 * them), so an empty look does not ask the peer for a wake-up. */
static int chan_drain(struct srv_client *cl)
{
	struct zl_server *s = cl->srv;
	int served = 0;
	bool more = !cl->paused, partial = false;
	for (uint32_t i = 0; i < s->o.slots && !cl->dead && !cl->paused; i++) {
		if (cl->kind == CL_RMBOX && !cl->bells) {
			more = false; /* the rest waits for its doorbells */
			break;
		}
		const void *p;
		size_t n;
		bool peeked = true;
		int r = zl_recv_peek(cl->ch, &p, &n, 0);
		if (r == -EMSGSIZE) { /* fragmented: assemble it */
			peeked = false;
			r = zl_grow(&s->big, &s->big_cap, n);
			if (!r)
				r = zl_recv(cl->ch, s->big, s->big_cap, &n, 0);
			p = s->big;
		}
		if (r == -EAGAIN) {
			more = false;
			/* a fragmented message half in a ring (epoll sees streams) */
			partial = !peeked && cl->ch->ops->settle;
			break;
		}
		if (r) {
			srv_drop(cl, "channel failed", r);
			return served;
		}
		served += chan_request(cl, p, n);
		if (peeked && cl->ch)
			zl_recv_release(cl->ch);
	}
	if (more != cl->more && !cl->dead) {
		cl->more = more;
		s->nmore += more ? 1 : -1;
	}
	if (partial != cl->partial && !cl->dead && !cl->paused) {
		cl->partial = partial;
		s->npartial += partial ? 1 : -1;
	}
	return served;
}

/* ---- the loop ---------------------------------------------------------- */

static int handle_events(struct zl_server *s, int timeout_ms)
{
	struct epoll_event ev[MAX_EVENTS];
	int n = epoll_wait(s->ep, ev, MAX_EVENTS, timeout_ms);
	int served = 0;
	for (int i = 0; i < n; i++) {
		struct ep_tag *t = ev[i].data.ptr;
		if (t->kind == EP_ACCEPT) {
			srv_take_ready(s);
		} else if (t->kind == EP_STOP) {
			srv_drain(s->stop_fd);
		} else if (t->kind == EP_CHAN && !t->cl->dead) {
			/* a message, a poke or a shm doorbell: ring channels take
			 * their wake-ups here (manual mode), chan_drain reads an
			 * rdma mailbox client's messages only after their doorbell,
			 * and the scan that follows finds mailbox requests */
			int r = srv_settle(s, t->cl->ch, false);
			if (r)
				srv_drop(t->cl, "channel failed", r);
			else
				served += chan_drain(t->cl);
		}
	}
	return served;
}

/* Slots a paused client announced; the scan took their flags. */
static int take_held(struct srv_client *cl)
{
	uint64_t held = cl->held; /* taking one may pause it again */
	int served = 0;
	cl->held = 0;
	for (uint32_t k = 0; k < cl->srv->o.slots && !cl->dead; k++) {
		bool valid;
		if (held & (1ull << k))
			served += take_slot(cl, k, &valid);
	}
	return served;
}

/* Channels found by polling: rdma rings, and channels left with messages
 * buffered by chan_drain. */
static int poll_chans(struct zl_server *s)
{
	int served = 0;
	for (struct srv_client *cl = s->clients, *next; cl; cl = next) {
		next = cl->next;
		if (cl->held && !cl->paused) /* announced while it was paused */
			served += take_held(cl);
		if (cl->kind == CL_RING || cl->more || cl->bells || cl->partial)
			served += chan_drain(cl);
	}
	return served;
}

static int round_once(struct zl_server *s, int64_t now)
{
	int served = scan_mbox(s);
	if (s->nring || s->nmore || s->nbells || s->npartial)
		served += poll_chans(s);
	if (s->pending)
		srv_push_pending(s);
	if (s->nstream || now >= s->next_epoll) {
		served += handle_events(s, 0);
		if (now != INT64_MIN)
			s->next_epoll = now + EPOLL_US;
	}
	if (now >= s->next_sweep) {
		served += sweep(s, now);
		s->next_sweep = now + s->o.sweep_us;
	}
	return served;
}

static void set_sleeping(struct zl_server *s, uint32_t v)
{
	for (struct srv_client *cl = s->clients, *next; cl; cl = next) {
		next = cl->next;
		if (cl->kind == CL_MBOX) {
			atomic_store_explicit(&page_ctl(cl)->srv_sleeping, v,
					      memory_order_relaxed);
		}
		/* ring channels owing us a message are armed: an rdma mailbox
		 * or ring client always, a shm client while it has rung a
		 * doorbell for a message (or one is half in) */
		if ((cl->kind == CL_RMBOX || cl->kind == CL_RING || cl->bells || cl->partial) &&
		    v) {
			int r = srv_settle(s, cl->ch, true);
			if (r)
				srv_drop(cl, "cannot arm the client", r);
		}
	}
}

/* The counters, copied to the status page (zl-ss) at most every
 * ZL_STATUS_EVERY_US of the serving thread's clock reads, and before it
 * sleeps: never per request. */
void srv_publish(struct zl_server *s, int64_t now)
{
	struct zl_status_slot *st = s->st_slot >= 0 ? zl_status_slot(s->st_slot) : NULL;
	if (!st) {
		s->st_next = INT64_MAX; /* (ZL_STATUS=0, or no page) */
		return;
	}
	s->st_next = (now ? now : zl_now_us()) + ZL_STATUS_EVERY_US;
	uint64_t v[ZL_SC_N];
#define GET(f) atomic_load_explicit(&s->n.f, memory_order_relaxed)
	v[ZL_SC_CLIENTS] = GET(clients);
	v[ZL_SC_ACCEPTED] = GET(clients_total);
	v[ZL_SC_DROPPED] = GET(clients_dropped);
	v[ZL_SC_REQUESTS] = GET(requests);
	v[ZL_SC_REJECTED] = GET(rejected);
	v[ZL_SC_SPURIOUS] = GET(spurious);
	v[ZL_SC_RECOVERED] = GET(recovered);
	v[ZL_SC_HS_FAILED] = GET(handshakes_failed);
#undef GET
	zl_status_begin(st);
	for (int i = 0; i < ZL_SC_N; i++)
		atomic_store_explicit(&st->ctr[i], v[i], memory_order_relaxed);
	zl_status_end(st);
}

/* Sleep in epoll until something happens or the deadline. */
static int sleep_until(struct zl_server *s, int64_t deadline)
{
	set_sleeping(s, 1);
	/* our fence pairs with the fence of clients that fence themselves;
	 * membarrier forces one on the others (they use a compiler barrier) */
	atomic_thread_fence(memory_order_seq_cst);
	if (s->nmbox > s->nmbox_fence)
		zl_membarrier_global();
	int served = round_once(s, zl_now_us());
	if (!served && !s->pending && !s->nmore && !atomic_load_explicit(&s->stop, memory_order_acquire)) {
		CNT_ADD(s, sleeps, 1);
		srv_publish(s, 0);
		int64_t until = s->next_sweep < deadline ? s->next_sweep : deadline;
		/* with no shm client, nothing needs a sweep: sleep to the deadline */
		if (!s->mbox_hi)
			until = deadline;
		served = handle_events(s, zl_poll_ms(until));
	}
	set_sleeping(s, 0);
	return served;
}

/* Serve until the deadline or a stop; with once, return as soon as a round
 * served something (zl_server_poll). The clock costs more than an idle
 * round, so it is read every 64th (INT64_MIN tells round_once not to
 * consider the sweep); the spin window restarts after work. */
static int serve(struct zl_server *s, int64_t timeout_us, bool once)
{
	int64_t now = zl_now_us();
	int64_t deadline = zl_deadline(timeout_us);
	int64_t spin_end = s->o.spin_us < 0 ? deadline : now + s->o.spin_us;
	bool worked = false;
	for (uint32_t i = 0;; i++) {
		if (atomic_load_explicit(&s->stop, memory_order_acquire)) {
			atomic_store_explicit(&s->stop, false, memory_order_relaxed);
			return -ECANCELED;
		}
		/* after work the clock is cheap next to what a round did */
		now = (i & 63) == 0 || worked ? zl_now_us() : INT64_MIN;
		if (now != INT64_MIN && worked) {
			worked = false;
			spin_end = s->o.spin_us < 0 ? deadline : now + s->o.spin_us;
		}
		if (now != INT64_MIN && now >= s->st_next)
			srv_publish(s, now);
		int served = round_once(s, now);
		if (!served && now != INT64_MIN && now >= spin_end && timeout_us != 0 &&
		    now < deadline)
			served = sleep_until(s, deadline);
		if (s->graves)
			srv_bury(s);
		if (served && once)
			return served;
		worked |= served > 0;
		if (timeout_us == 0 || (now != INT64_MIN && now >= deadline))
			return 0;
		if (!served)
			zl_cpu_relax();
	}
}

ZL_API int zl_server_poll(zl_server *s, int64_t timeout_us)
{
	return s ? serve(s, timeout_us, true) : -EINVAL;
}

ZL_API int zl_server_run(zl_server *s, int64_t timeout_us)
{
	if (!s)
		return -EINVAL;
	int r = serve(s, timeout_us, false);
	return r == -ECANCELED ? 0 : r;
}
