/* SPDX-License-Identifier: MIT */
/*
 * Requests and replies of zl_server: dispatch to handlers, deferral, and
 * replies that never block the serving thread. A reply goes straight into
 * the client's channel when it fits (reserve + commit: one copy); else it
 * is sent with timeout 0, and what does not fit now is queued on the
 * client and pushed out by later rounds. A client has at most K requests
 * open, but a reply queued frees its slot, so a client that never reads
 * could grow its queue without end: once it holds more than max_queued
 * bytes the server takes no more of that client's requests (srv_pause)
 * until the queue has gone out. The queue then holds at most max_queued
 * plus the replies of the K requests already taken. Across clients, once
 * all queues together hold more than max_queued_total, the client with the
 * largest queue is dropped (as Redis's client-output-buffer-limit does):
 * many clients that each stay under max_queued cannot add up to more.
 */
#include <stdlib.h>
#include <string.h>

#include "server.h"

ZL_API int zl_req_type(const zl_req *rq) { return rq ? rq->type : -EINVAL; }

ZL_API const void *zl_req_data(const zl_req *rq, size_t *len)
{
	if (!rq) {
		if (len)
			*len = 0;
		return NULL;
	}
	if (len)
		*len = rq->len;
	return rq->data;
}

ZL_API uint64_t zl_req_client(const zl_req *rq) { return rq ? rq->cl->id : 0; }

zl_channel *zl_req_channel(const zl_req *rq) { return rq->cl->ch; }

void zl_server_on_drop(zl_server *s, void (*fn)(uint64_t client, void *arg), void *arg)
{
	s->on_drop = fn;
	s->on_drop_arg = arg;
}

static bool open_req(const zl_req *rq)
{
	return rq && (rq->state == REQ_BUSY || rq->state == REQ_DEFERRED) && !rq->replied;
}

ZL_API int zl_req_defer(zl_req *rq)
{
	if (!rq || rq->state != REQ_BUSY || rq->replied || rq->reserved)
		return -EINVAL;
	rq->state = REQ_DEFERRED;
	rq->cl->deferred++;
	return 0;
}

/* The request is answered: its slot waits for the next sequence number. */
static void finish(zl_req *rq)
{
	if (rq->state == REQ_DEFERRED)
		rq->cl->deferred--;
	rq->state = REQ_IDLE;
	rq->replied = false;
	rq->reserved = false;
	rq->seq++;
	free(rq->copy);
	rq->copy = NULL;
}

static void list_pending(struct srv_client *cl)
{
	if (!cl->listed_pending) {
		cl->listed_pending = true;
		cl->pnext = cl->srv->pending;
		cl->srv->pending = cl;
	}
}

/* A send may leave bytes inside the channel: a stream's send buffer, the
 * rest of a fragmented ring message. Later rounds push them (zl_flush). */
static void sent(struct srv_client *cl, size_t n)
{
	if (cl->kind == CL_STREAM || n > zl_max_inline(cl->ch))
		list_pending(cl);
}

/* Over max_queued_total: the client holding most of it goes. */
static void drop_biggest(struct zl_server *s)
{
	struct srv_client *big = NULL;
	for (struct srv_client *c = s->clients; c; c = c->next)
		if (!c->dead && (!big || c->queued > big->queued))
			big = c;
	if (!big)
		return;
	srv_drop(big, "its unread replies put all clients over max_queued_total", -ENOBUFS);
}

static int queue_reply(struct srv_client *cl, const uint8_t *msg, size_t n)
{
	struct backlog *b = malloc(sizeof(*b) + n);
	if (!b) {
		srv_drop(cl, "no memory to queue a reply", -ENOMEM);
		return -ENOMEM;
	}
	b->next = NULL;
	b->len = n;
	memcpy(b->buf, msg, n);
	if (cl->bl_tail)
		cl->bl_tail->next = b;
	else
		cl->bl_head = b;
	cl->bl_tail = b;
	cl->queued += n;
	struct zl_server *s = cl->srv;
	s->queued += n;
	list_pending(cl);
	if (cl->queued > s->o.max_queued && !cl->paused)
		srv_pause(cl, true);
	if (s->queued > s->o.max_queued_total)
		drop_biggest(s);
	return cl->dead ? -ECONNRESET : 0;
}

static int send_reply(struct srv_client *cl, const struct srv_rep *h, const void *data,
		      size_t len)
{
	struct zl_server *s = cl->srv;
	size_t n = sizeof(*h) + len;
	if (cl->dead)
		return -ECONNRESET;
	if (!cl->bl_head) {
		uint8_t *p;
		int r = zl_send_reserve(cl->ch, n, (void **)&p);
		if (!r) {
			memcpy(p, h, sizeof(*h));
			if (len)
				memcpy(p + sizeof(*h), data, len);
			r = zl_send_commit(cl->ch, n);
			sent(cl, n);
			return r;
		}
		if (r != -EAGAIN && r != -EMSGSIZE && r != -EBUSY) {
			srv_drop(cl, "reply failed", r);
			return -ECONNRESET;
		}
	}
	if (zl_grow(&s->scratch, &s->scratch_cap, n)) {
		srv_drop(cl, "no memory for a reply", -ENOMEM);
		return -ENOMEM;
	}
	memcpy(s->scratch, h, sizeof(*h));
	if (len)
		memcpy(s->scratch + sizeof(*h), data, len);
	if (cl->bl_head)
		return queue_reply(cl, s->scratch, n);
	int r = zl_send(cl->ch, s->scratch, n, 0);
	if (r == -EAGAIN)
		return queue_reply(cl, s->scratch, n);
	if (r == -EMSGSIZE)
		return r;
	if (r) {
		srv_drop(cl, "reply failed", r);
		return -ECONNRESET;
	}
	sent(cl, n);
	return 0;
}

static int reply(zl_req *rq, int status, const void *buf, size_t len)
{
	if (!open_req(rq) || rq->reserved || (!buf && len) || status > 0)
		return -EINVAL;
	struct srv_rep h = { .seq = rq->seq, .slot = rq->slot, .status = status };
	int r = send_reply(rq->cl, &h, buf, len);
	if (r == -EMSGSIZE)
		return r; /* the request stays open: answer it another way */
	finish(rq);
	return r;
}

ZL_API int zl_reply(zl_req *rq, const void *buf, size_t len) { return reply(rq, 0, buf, len); }

ZL_API int zl_reply_error(zl_req *rq, int err)
{
	return err < 0 && err > -4096 ? reply(rq, err, NULL, 0) : -EINVAL;
}

ZL_API int zl_reply_reserve(zl_req *rq, size_t len, void **ptr)
{
	if (!open_req(rq) || rq->reserved || !ptr)
		return -EINVAL;
	struct srv_client *cl = rq->cl;
	if (cl->dead)
		return -ECONNRESET;
	if (cl->bl_head)
		return -EAGAIN; /* replies queued before this one go first */
	uint8_t *p;
	int r = zl_send_reserve(cl->ch, sizeof(struct srv_rep) + len, (void **)&p);
	if (r == -EBUSY)
		r = -EAGAIN; /* another reply's reservation, or a fragment, is open */
	if (r)
		return r;
	rq->reserved = true;
	rq->rsv = p;
	*ptr = p + sizeof(struct srv_rep);
	return 0;
}

ZL_API int zl_reply_commit(zl_req *rq, size_t len)
{
	if (!open_req(rq) || !rq->reserved)
		return -EINVAL;
	struct srv_rep h = { .seq = rq->seq, .slot = rq->slot };
	memcpy(rq->rsv, &h, sizeof(h));
	int r = zl_send_commit(rq->cl->ch, sizeof(h) + len);
	if (r == -EINVAL)
		return r; /* len larger than reserved: still open */
	if (r) { /* the channel failed: the reservation is gone */
		srv_drop(rq->cl, "reply failed", r);
		finish(rq);
		return -ECONNRESET;
	}
	sent(rq->cl, sizeof(h) + len);
	finish(rq);
	return 0;
}

void srv_dispatch(struct zl_server *s, zl_req *rq)
{
	rq->state = REQ_BUSY;
	zl_handler_fn fn = s->h[rq->type].fn;
	if (!fn) {
		CNT_ADD(s, rejected, 1);
		zl_reply_error(rq, -EOPNOTSUPP);
		return;
	}
	CNT_ADD(s, requests, 1);
	CNT_ADD(s, per_type[rq->type], 1);
	int r = fn(rq, s->h[rq->type].arg);
	if (rq->state != REQ_BUSY)
		return; /* answered or deferred */
	if (rq->reserved) { /* an uncommitted reservation: send it empty */
		int st = r < 0 && r > -4096 ? r : r < 0 ? -EIO : 0;
		struct srv_rep h = { .seq = rq->seq, .slot = rq->slot, .status = st };
		memcpy(rq->rsv, &h, sizeof(h));
		zl_send_commit(rq->cl->ch, sizeof(h));
		finish(rq);
	} else if (r < 0 && r > -4096) {
		zl_reply_error(rq, r);
	} else {
		zl_reply(rq, NULL, 0);
	}
}

/* Push out queued replies of every client on the pending list. */
void srv_push_pending(struct zl_server *s)
{
	struct srv_client **pp = &s->pending;
	while (*pp) {
		struct srv_client *cl = *pp;
		int r = zl_flush(cl->ch, 0);
		while (!r && cl->bl_head) {
			struct backlog *b = cl->bl_head;
			r = zl_send(cl->ch, b->buf, b->len, 0);
			if (r)
				break;
			cl->bl_head = b->next;
			if (!cl->bl_head)
				cl->bl_tail = NULL;
			cl->queued -= b->len;
			s->queued -= b->len;
			free(b);
			r = zl_flush(cl->ch, 0); /* the send may have kept a tail */
		}
		if (r && r != -EAGAIN) {
			srv_drop(cl, "reply failed", r); /* unlinks cl from pending */
			continue;
		}
		if (!r && !cl->bl_head) { /* all gone out */
			*pp = cl->pnext;
			cl->listed_pending = false;
			if (cl->paused)
				srv_pause(cl, false);
			continue;
		}
		pp = &cl->pnext;
	}
}
