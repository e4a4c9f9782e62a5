/* SPDX-License-Identifier: MIT */
/*
 * The five protocols of the protocol evaluation paper (table III) over RC QPs, in M:1, 1:M and
 * M:M. Every QP has R request slots and R response slots on both ends (the
 * paper's array of L + V byte elements, requests grouped, then responses).
 * A slot holds a framed message:
 *
 *   u32 len | u8 mark | u8 kind | u16 slot | len bytes | u8 mark
 *
 * which the paper's marker scheme needs when a message arrives by WRITE
 * (the receiver polls memory: both marks set and equal means complete, and
 * it zeroes them after reading); by SEND it arrives in a posted receive
 * buffer and the CQ says when. The message starts with its 16-byte id
 * (requesting node, thread, slot, sequence) and the rest is a fill derived
 * from the id and the sender, so the receiver checks every byte: a lost,
 * duplicated, torn or mixed-up message fails the run.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clock.h"
#include "frame.h"
#include "node.h"
#include "oob.h"
#include "stats.h"
#include "vb.h"

enum { K_REQ = 1, K_RSP = 2 };                 /* message kinds */
enum { W_SEND = 1, W_READ = 2, W_RECV = 3 };   /* wr_id kinds */
#define SIG 8 /* one signaled send in SIG: the SQ is reaped without a CQE each */

struct hdr {
	uint32_t len;
	uint8_t mark, kind;
	uint16_t slot;
};
struct mid {
	uint32_t node;
	uint16_t thread, slot;
	uint64_t seq;
};

struct conn {
	struct link l;
	struct ibv_qp *qp;
	char *req, *rsp;     /* local slot arrays */
	uint64_t rreq, rrsp; /* the peer's */
	uint32_t rkey, rqpn;
	uint64_t posted, done; /* send WRs posted, and known complete */
	uint64_t last_sig;
	/* requester end: what each slot waits for */
	uint64_t next_seq, *seq, *t0;
	uint8_t *busy, *todo; /* todo: built, waits for SQ room */
	int inflight, ntodo;
	uint64_t bad_since; /* a WRITE slot that does not check out yet */
};

struct node;
struct worker {
	struct node *nd;
	int id, requester;
	struct conn *c;
	int nc;
	struct ibv_cq *cq;
	pthread_t th;
	uint64_t msgs;
	struct hist lat;
	uint64_t checked_qp_at;
	int check_next;
	int inject_at; /* the served request that --inject spoils, 0: none */
};

struct node {
	const struct params *p;
	struct dev d;
	int me;
	struct worker *w;
	int nw, nconn;
	char *buf;
	size_t buflen;
	struct ibv_mr *mr;
	size_t Ls, Vs;
	uint32_t sq_depth, max_inline;
	uint64_t start, measure_from, measure_to;
	atomic_int stop;
	atomic_int requesting; /* requester threads still running */
};

static size_t slot_size(uint32_t n) { return ((size_t)n + 9 + 7) & ~(size_t)7; }
static uint32_t salt(int node, int thread) { return (uint32_t)node << 8 | (uint32_t)thread; }

__attribute__((format(printf, 2, 3), noreturn)) static void die(struct worker *w, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "zl-proto: node %d thread %d: ", w->nd->me, w->id);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	fflush(stdout);
	/* the other nodes see the rendezvous close and end too */
	_exit(1);
}

static uint8_t fill_byte(uint64_t seq, uint32_t j, uint32_t s)
{
	return (uint8_t)(seq * 131 + j * 7 + s * 13);
}

static void build(char *slot, uint32_t n, int kind, const struct mid *id, uint32_t s)
{
	struct hdr h = { n, (uint8_t)(0x80 | (id->seq & 0x7f)), (uint8_t)kind, id->slot };
	char *m = slot + sizeof(h);
	memcpy(m, id, sizeof(*id));
	for (uint32_t j = sizeof(*id); j < n; j++)
		m[j] = (char)fill_byte(id->seq, j, s);
	m[n] = (char)h.mark;
	memcpy(slot, &h, sizeof(h));
}

/* 0 when the slot holds kind with the id *want (want->seq taken from the
 * message when any_seq) and sender s's fill; else what is wrong. */
static const char *check(const char *slot, uint32_t n, int kind, struct mid *want, int any_seq,
			 uint32_t s)
{
	struct hdr h;
	struct mid id;
	const char *m = slot + sizeof(h);
	memcpy(&h, slot, sizeof(h));
	if (h.len != n || h.kind != kind || (uint8_t)m[n] != h.mark || !h.mark)
		return "bad framing";
	memcpy(&id, m, sizeof(id));
	if (any_seq)
		want->seq = id.seq;
	if (id.node != want->node || id.thread != want->thread || id.slot != want->slot ||
	    h.slot != want->slot || id.seq != want->seq)
		return "id does not match";
	if (h.mark != (uint8_t)(0x80 | (id.seq & 0x7f)))
		return "marker does not match the id";
	for (uint32_t j = sizeof(id); j < n; j++)
		if ((uint8_t)m[j] != fill_byte(id.seq, j, s))
			return "payload does not match the id";
	return NULL;
}

static uint64_t wrid(int ci, int kind, uint32_t low) { return (uint64_t)ci << 40 | (uint64_t)kind << 32 | low; }

static void post_recv(struct worker *w, struct conn *c, char *buf, size_t len, uint32_t b)
{
	struct ibv_sge sge = { (uintptr_t)buf, (uint32_t)len, w->nd->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wrid((int)(c - w->c), W_RECV, b), .sg_list = &sge, .num_sge = 1 }, *bad;
	int r = ibv_post_recv(c->qp, &wr, &bad);
	if (r)
		die(w, "ibv_post_recv to node %d: %s", c->l.peer, strerror(r));
}

/* Post one SEND or WRITE of a built slot; -EAGAIN when the SQ is full
 * (the caller keeps it in todo). */
static int post_msg(struct worker *w, struct conn *c, char *src, uint32_t len, int write,
		    uint64_t raddr)
{
	struct node *nd = w->nd;
	if (c->posted - c->done >= nd->sq_depth)
		return -EAGAIN;
	int sig = c->posted - c->last_sig >= SIG - 1 || c->posted - c->done + 1 >= nd->sq_depth / 2;
	struct ibv_sge sge = { (uintptr_t)src, len, nd->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = wrid((int)(c - w->c), W_SEND, (uint32_t)(c->posted + 1)),
		.sg_list = &sge, .num_sge = 1,
		.opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_SEND,
		.send_flags = (sig ? IBV_SEND_SIGNALED : 0) | (len <= nd->max_inline ? IBV_SEND_INLINE : 0),
	}, *bad;
	if (write) {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = c->rkey;
	}
	int r = ibv_post_send(c->qp, &wr, &bad);
	if (r)
		die(w, "ibv_post_send to node %d: %s", c->l.peer, strerror(r));
	c->posted++;
	if (sig)
		c->last_sig = c->posted;
	return 0;
}

static void issue(struct worker *w, struct conn *c, int s)
{
	struct node *nd = w->nd;
	const struct params *p = nd->p;
	if (p->proto == PR_READ) {
		char *dst = c->rsp + (size_t)s * nd->Vs;
		memset(dst, 0, 8); /* a READ that writes nothing must not pass */
		c->busy[s] = 1;
		c->inflight++;
		c->t0[s] = clock_ticks();
		struct ibv_sge sge = { (uintptr_t)dst, p->V + 9, nd->mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = wrid((int)(c - w->c), W_READ, (uint32_t)s), .sg_list = &sge, .num_sge = 1,
			.opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED,
		}, *bad;
		wr.wr.rdma.remote_addr = c->rrsp + (uint64_t)s * nd->Vs;
		wr.wr.rdma.rkey = c->rkey;
		int r = ibv_post_send(c->qp, &wr, &bad);
		if (r)
			die(w, "ibv_post_send (READ) to node %d: %s", c->l.peer, strerror(r));
		return;
	}
	struct mid id = { (uint32_t)nd->me, (uint16_t)w->id, (uint16_t)s, c->next_seq++ };
	char *src = c->req + (size_t)s * nd->Ls;
	build(src, p->L, K_REQ, &id, salt(nd->me, w->id));
	c->seq[s] = id.seq;
	c->busy[s] = 1;
	c->inflight++;
	c->t0[s] = clock_ticks();
	if (post_msg(w, c, src, p->L + 9, proto_req_write(p->proto), c->rreq + (uint64_t)s * nd->Ls)) {
		c->todo[s] = 1;
		c->ntodo++;
	}
}

static void flush_todo(struct worker *w, struct conn *c)
{
	struct node *nd = w->nd;
	const struct params *p = nd->p;
	for (int s = 0; s < p->R && c->ntodo; s++) {
		if (!c->todo[s])
			continue;
		int r = w->requester ? post_msg(w, c, c->req + (size_t)s * nd->Ls, p->L + 9,
						proto_req_write(p->proto), c->rreq + (uint64_t)s * nd->Ls)
				     : post_msg(w, c, c->rsp + (size_t)s * nd->Vs, p->V + 9,
						proto_rsp_write(p->proto), c->rrsp + (uint64_t)s * nd->Vs);
		if (r)
			return;
		c->todo[s] = 0;
		c->ntodo--;
	}
}

/* Which phase is the clock in: 0 warm-up, 1 measuring, 2 over. */
static int phase(const struct node *nd, uint64_t now)
{
	return now < nd->measure_from ? 0 : now < nd->measure_to ? 1 : 2;
}

/* The response for slot s is in buf (the slot itself for WRITE and READ,
 * a receive buffer b for SEND). 1 consumed, 0 not yet (torn WRITE). */
static int got_response(struct worker *w, struct conn *c, int s, char *buf, int b)
{
	struct node *nd = w->nd;
	const struct params *p = nd->p;
	uint64_t t1 = clock_ticks();
	if (s < 0 || s >= p->R || !c->busy[s])
		die(w, "a response from node %d for slot %d that has no request pending (duplicate?)",
		    c->l.peer, s);
	struct mid want = { (uint32_t)nd->me, (uint16_t)w->id, (uint16_t)s, c->seq[s] };
	uint32_t from = salt(c->l.peer, c->l.pthread);
	if (p->proto == PR_READ)
		want = (struct mid){ (uint32_t)c->l.peer, (uint16_t)c->l.pthread, (uint16_t)s, (uint64_t)s };
	const char *bad = check(buf, p->V, K_RSP, &want, 0, from);
	if (bad) {
		/* WRITE: the marks may be placed before the rest (rxe does not
		 * promise in-order placement); give it a second to settle */
		uint64_t now = mono_ns();
		if (b < 0 && p->proto != PR_READ && (!c->bad_since || now - c->bad_since < 1000000000ull)) {
			if (!c->bad_since)
				c->bad_since = now;
			return 0;
		}
		die(w, "response from node %d in slot %d (seq %llu): %s", c->l.peer, s,
		    (unsigned long long)c->seq[s], bad);
	}
	c->bad_since = 0;
	if (phase(nd, mono_ns()) == 1) {
		hist_add(&w->lat, clock_ns(t1 - c->t0[s]));
		w->msgs++;
	}
	c->busy[s] = 0;
	c->inflight--;
	if (b >= 0)
		post_recv(w, c, buf, nd->Vs, (uint32_t)b);
	else if (p->proto != PR_READ)
		frame_unmark(buf, p->V);
	return 1;
}

/* A request in buf (slot s's own for WRITE, receive buffer b for SEND). */
static int got_request(struct worker *w, struct conn *c, char *buf, int b)
{
	struct node *nd = w->nd;
	const struct params *p = nd->p;
	struct hdr h;
	memcpy(&h, buf, sizeof(h));
	int s = h.slot;
	struct mid want = { (uint32_t)c->l.peer, (uint16_t)c->l.pthread, (uint16_t)s, 0 };
	const char *bad = s < p->R ? check(buf, p->L, K_REQ, &want, 1, salt(c->l.peer, c->l.pthread))
				   : "slot out of range";
	if (bad) {
		uint64_t now = mono_ns();
		if (b < 0 && (!c->bad_since || now - c->bad_since < 1000000000ull)) {
			if (!c->bad_since)
				c->bad_since = now;
			return 0;
		}
		die(w, "request from node %d (slot %d): %s", c->l.peer, s, bad);
	}
	c->bad_since = 0;
	if (c->todo[s])
		die(w, "a second request from node %d for slot %d before its response went out", c->l.peer, s);
	char *dst = c->rsp + (size_t)s * nd->Vs;
	struct mid id = want;
	build(dst, p->V, K_RSP, &id, salt(nd->me, w->id));
	/* the receive goes back before the response: the requester may send
	 * its next request as soon as it sees the response */
	if (b >= 0)
		post_recv(w, c, buf, nd->Ls, (uint32_t)b);
	else
		frame_unmark(buf, p->L);
	w->msgs++;
	if (w->inject_at && w->msgs == (uint64_t)w->inject_at) {
		fprintf(stderr, "zl-proto: node %d thread %d: --inject %s on the response to node %d slot %d\n",
			nd->me, w->id, p->inject == IJ_CORRUPT ? "corrupt" : p->inject == IJ_DROP ? "drop" : "dup",
			c->l.peer, s);
		if (p->inject == IJ_CORRUPT)
			dst[8 + 20] ^= 0x5a;
		else if (p->inject == IJ_DROP)
			return 1;
		else if (post_msg(w, c, dst, p->V + 9, proto_rsp_write(p->proto), c->rrsp + (uint64_t)s * nd->Vs))
			die(w, "--inject dup: no room in the SQ");
	}
	if (post_msg(w, c, dst, p->V + 9, proto_rsp_write(p->proto), c->rrsp + (uint64_t)s * nd->Vs)) {
		c->todo[s] = 1;
		c->ntodo++;
	}
	return 1;
}

static int poll_cq(struct worker *w);

static void check_qps(struct worker *w, uint64_t now)
{
	/* a QP in ERR without a CQE (nothing outstanding on it) is seen here;
	 * one query a second per thread costs nothing measurable */
	if (now - w->checked_qp_at < 1000000000ull || !w->nc)
		return;
	w->checked_qp_at = now;
	struct conn *c = &w->c[w->check_next++ % w->nc];
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	if (ibv_query_qp(c->qp, &a, IBV_QP_STATE, &ia) || a.qp_state != IBV_QPS_ERR)
		return;
	/* the error CQE, if there is one, names the cause: it may have
	 * arrived since this loop last polled (poll_cq dies on it) */
	poll_cq(w);
	die(w, "QP %s:%u to node %d thread %d (QP %u) is in state %s with no error completion on this end "
	       "(the QP was the responder of a request it refused, or its peer's CQE says why)",
	    w->nd->d.name, c->qp->qp_num, c->l.peer, c->l.pthread, c->rqpn, qp_state_name(a.qp_state));
}

static int poll_cq(struct worker *w)
{
	struct node *nd = w->nd;
	struct ibv_wc wc[32];
	int n = ibv_poll_cq(w->cq, 32, wc);
	if (n < 0)
		die(w, "ibv_poll_cq: %d", n);
	for (int i = 0; i < n; i++) {
		struct conn *c = &w->c[wc[i].wr_id >> 40];
		int kind = (int)(wc[i].wr_id >> 32 & 0xff);
		uint32_t low = (uint32_t)wc[i].wr_id;
		if (wc[i].status != IBV_WC_SUCCESS)
			die(w, "QP %s:%u to node %d thread %d (QP %u): work completion error: %s "
			       "(status %d, vendor error 0x%x, %s)%s",
			    nd->d.name, wc[i].qp_num, c->l.peer, c->l.pthread, c->rqpn,
			    ibv_wc_status_str(wc[i].status), (int)wc[i].status, wc[i].vendor_err,
			    kind == W_SEND ? "SEND/WRITE" : kind == W_READ ? "READ" : "RECV",
			    wc[i].status == IBV_WC_RETRY_EXC_ERR ? ": the peer does not answer (died?)" : "");
		if (kind == W_SEND) {
			c->done = c->posted - (uint32_t)((uint32_t)c->posted - low);
		} else if (kind == W_READ) {
			got_response(w, c, (int)low, c->rsp + (size_t)low * nd->Vs, -1);
			if (!atomic_load_explicit(&nd->stop, memory_order_relaxed) &&
			    phase(nd, mono_ns()) < 2)
				issue(w, c, (int)low);
		} else if (w->requester) {
			char *buf = c->rsp + (size_t)low * nd->Vs;
			struct hdr h;
			memcpy(&h, buf, sizeof(h));
			got_response(w, c, h.slot, buf, (int)low);
			if (phase(nd, mono_ns()) < 2)
				issue(w, c, h.slot);
		} else {
			got_request(w, c, c->req + (size_t)low * nd->Ls, (int)low);
		}
	}
	return n;
}

static void *requester(void *arg)
{
	struct worker *w = arg;
	struct node *nd = w->nd;
	const struct params *p = nd->p;
	int rsp_write = proto_rsp_write(p->proto);
	for (int i = 0; i < w->nc; i++)
		for (int s = 0; s < p->R; s++)
			issue(w, &w->c[i], s);
	uint64_t drain_by = 0;
	for (;;) {
		int work = poll_cq(w), pending = 0;
		uint64_t now = mono_ns();
		int ph = phase(nd, now);
		for (int i = 0; i < w->nc; i++) {
			struct conn *c = &w->c[i];
			if (c->ntodo)
				flush_todo(w, c);
			if (rsp_write)
				for (int s = 0; s < p->R; s++) {
					char *slot = c->rsp + (size_t)s * nd->Vs;
					if (c->busy[s] && frame_arrived(slot, p->V) && got_response(w, c, s, slot, -1)) {
						work++;
						if (ph < 2)
							issue(w, c, s);
					}
				}
			pending += c->inflight;
		}
		if (ph == 2) {
			if (!pending)
				break;
			if (!drain_by)
				drain_by = now + (uint64_t)(p->timeout * 1e9);
			if (now > drain_by)
				die(w, "%d requests got no response within %.0f s after the run (lost)", pending,
				    p->timeout);
		}
		check_qps(w, now);
		if (!work && !p->busy)
			sched_yield();
	}
	atomic_fetch_sub(&nd->requesting, 1);
	return NULL;
}

static void *responder(void *arg)
{
	struct worker *w = arg;
	struct node *nd = w->nd;
	const struct params *p = nd->p;
	int req_write = proto_req_write(p->proto) && p->proto != PR_READ;
	while (!atomic_load_explicit(&nd->stop, memory_order_acquire)) {
		int work = poll_cq(w);
		for (int i = 0; i < w->nc; i++) {
			struct conn *c = &w->c[i];
			if (c->ntodo)
				flush_todo(w, c);
			if (req_write)
				for (int s = 0; s < p->R; s++) {
					char *slot = c->req + (size_t)s * nd->Ls;
					if (frame_arrived(slot, p->L))
						work += got_request(w, c, slot, -1);
				}
		}
		check_qps(w, mono_ns());
		if (!work && !p->busy)
			sched_yield();
	}
	return NULL;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

uint64_t params_tag(const struct params *p)
{
	int v[] = { p->mode, p->proto, p->pattern, p->N, p->S, p->R, (int)p->L, (int)p->V, p->iters,
		    p->ack_timeout, p->retry, p->rounds };
	double d[] = { p->seconds, p->warmup };
	return fnv(fnv(0xcbf29ce484222325ull, v, sizeof(v)), d, sizeof(d));
}

struct noderes {
	uint64_t msgs, served;
	int32_t qps, pad;
	struct hist lat;
};

static int setup(struct node *nd, struct oob *o)
{
	const struct params *p = nd->p;
	int nl, nthreads, r;
	if ((nl = topo_links(p, nd->me, NULL, 0, &nthreads)) < 0)
		return nl;
	struct link *links = calloc((size_t)nl, sizeof(*links));
	struct ep *eps = calloc((size_t)nl, sizeof(*eps));
	nd->w = calloc((size_t)nthreads, sizeof(*nd->w));
	if (!links || !eps || !nd->w)
		return -ENOMEM;
	topo_links(p, nd->me, links, nl, &nthreads);
	nd->nw = nthreads;
	nd->nconn = nl;
	nd->Ls = slot_size(p->L);
	nd->Vs = slot_size(p->V);
	size_t per = (size_t)p->R * (nd->Ls + nd->Vs);
	nd->buflen = ((size_t)nl * per + 4095) & ~(size_t)4095;
	nd->buf = mmap(NULL, nd->buflen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (nd->buf == MAP_FAILED)
		return -ENOMEM;
	nd->mr = ibv_reg_mr(nd->d.pd, nd->buf, nd->buflen,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!nd->mr) {
		fprintf(stderr, "zl-proto: node %d: ibv_reg_mr %zu bytes: %s (ulimit -l?)\n", nd->me,
			nd->buflen, strerror(errno));
		return -errno;
	}
	nd->sq_depth = (uint32_t)(2 * p->R + 2 * SIG + 8);
	if (nd->sq_depth > (uint32_t)nd->d.attr.max_qp_wr)
		nd->sq_depth = (uint32_t)nd->d.attr.max_qp_wr;
	int rd = nd->d.attr.max_qp_rd_atom < 16 ? nd->d.attr.max_qp_rd_atom : 16;
	struct qp_opts qo = { p->ack_timeout, p->retry, rd > 0 ? rd : 1 };
	/* threads and their conns, in link order (links are grouped by thread) */
	for (int t = 0; t < nthreads; t++) {
		struct worker *w = &nd->w[t];
		w->nd = nd;
		w->id = t;
		hist_init(&w->lat);
		for (int i = 0; i < nl; i++)
			if (links[i].thread == t)
				w->nc++;
		w->c = calloc((size_t)w->nc, sizeof(*w->c));
		if (!w->c)
			return -ENOMEM;
		int cqe = w->nc * (int)(nd->sq_depth + (uint32_t)p->R) + 16;
		if (cqe > nd->d.attr.max_cqe)
			cqe = nd->d.attr.max_cqe;
		if (!(w->cq = ibv_create_cq(nd->d.ctx, cqe, NULL, NULL, 0))) {
			fprintf(stderr, "zl-proto: node %d: ibv_create_cq(%d): %s\n", nd->me, cqe, strerror(errno));
			return -ENOMEM;
		}
	}
	int inl_try[] = { 512, 256, 128, 64, 0 };
	for (int i = 0, k = 0; i < nl; i++) {
		struct worker *w = &nd->w[links[i].thread];
		int ci = 0;
		while (w->c[ci].qp)
			ci++;
		struct conn *c = &w->c[ci];
		w->requester = links[i].requester;
		c->l = links[i];
		c->req = nd->buf + (size_t)i * per;
		c->rsp = c->req + (size_t)p->R * nd->Ls;
		c->seq = calloc((size_t)p->R, 8);
		c->t0 = calloc((size_t)p->R, 8);
		c->busy = calloc((size_t)p->R, 1);
		c->todo = calloc((size_t)p->R, 1);
		if (!c->seq || !c->t0 || !c->busy || !c->todo)
			return -ENOMEM;
		for (; k < 5; k++) {
			c->qp = qp_create(&nd->d, IBV_QPT_RC, w->cq, w->cq, nd->sq_depth, (uint32_t)p->R,
					  (uint32_t)inl_try[k]);
			if (c->qp)
				break;
		}
		if (!c->qp) {
			fprintf(stderr, "zl-proto: node %d: ibv_create_qp (%d of %d): %s\n", nd->me, i + 1, nl,
				strerror(errno));
			return -ENOMEM;
		}
		nd->max_inline = (uint32_t)inl_try[k];
		struct ep *e = &eps[i];
		e->node = (uint16_t)nd->me;
		e->thread = (uint16_t)links[i].thread;
		e->peer = (uint16_t)links[i].peer;
		e->pthread = (uint16_t)links[i].pthread;
		e->requester = (uint32_t)links[i].requester;
		e->rkey = nd->mr->rkey;
		e->addr = (uintptr_t)c->req;
		e->len = per;
		ep_fill(e, &nd->d, c->qp, (uint32_t)lrand48());
	}
	void *all;
	uint32_t lens[P_MAX_NODES];
	if ((r = oob_gather(o, eps, (uint32_t)(nl * sizeof(*eps)), &all, lens, p->timeout, "QP exchange")))
		return r;
	struct ep *rem = all;
	size_t nrem = 0;
	for (int i = 0; i < o->n; i++)
		nrem += lens[i] / sizeof(struct ep);
	/* the links are in the same order as eps: match each to its peer end */
	for (int i = 0, done = 0; i < nd->nw; i++) {
		struct worker *w = &nd->w[i];
		for (int j = 0; j < w->nc; j++, done++) {
			struct conn *c = &w->c[j];
			const struct ep *mine = NULL, *peer = NULL;
			for (int x = 0; x < nl; x++)
				if (eps[x].qpn == c->qp->qp_num)
					mine = &eps[x];
			for (size_t x = 0; x < nrem && !peer; x++)
				if (rem[x].node == c->l.peer && rem[x].thread == c->l.pthread &&
				    rem[x].peer == nd->me && rem[x].pthread == c->l.thread &&
				    rem[x].requester == !c->l.requester)
					peer = &rem[x];
			if (!mine || !peer) {
				fprintf(stderr, "zl-proto: node %d: node %d sent no QP for thread %d\n", nd->me,
					c->l.peer, c->l.thread);
				return -EPROTO;
			}
			if ((r = qp_connect(&nd->d, c->qp, mine, peer, &qo)))
				return r;
			c->rkey = peer->rkey;
			c->rqpn = peer->qpn;
			c->rreq = peer->addr;
			c->rrsp = peer->addr + (uint64_t)p->R * nd->Ls;
			/* receives before the barrier: the first SEND finds one */
			if (c->l.requester && !proto_rsp_write(p->proto) && p->proto != PR_READ)
				for (int s = 0; s < p->R; s++)
					post_recv(w, c, c->rsp + (size_t)s * nd->Vs, nd->Vs, (uint32_t)s);
			if (!c->l.requester && !proto_req_write(p->proto) && p->proto != PR_READ)
				for (int s = 0; s < p->R; s++)
					post_recv(w, c, c->req + (size_t)s * nd->Ls, nd->Ls, (uint32_t)s);
			if (!c->l.requester && p->proto == PR_READ)
				for (int s = 0; s < p->R; s++) {
					struct mid id = { (uint32_t)nd->me, (uint16_t)w->id, (uint16_t)s, (uint64_t)s };
					build(c->rsp + (size_t)s * nd->Vs, p->V, K_RSP, &id, salt(nd->me, w->id));
				}
		}
	}
	free(all);
	free(eps);
	free(links);
	return 0;
}

int proto_run(const struct params *p, int me, const char *devname, int lfd)
{
	struct node nd = { .p = p, .me = me };
	struct oob o;
	int r;
	srand48((long)mono_ns() ^ me);
	if ((r = dev_open(&nd.d, devname, p->ib_port, p->gid_index)))
		return r;
	if ((r = oob_join(&o, me, p->N, p->coord, lfd, params_tag(p), p->timeout)))
		return r;
	if ((r = setup(&nd, &o)))
		return r;
	if ((r = oob_barrier(&o, p->timeout, "ready")))
		return r;
	if (me == 0)
		printf("zl-proto: %d nodes joined; running %g s warm-up + %g s\n", p->N, p->warmup, p->seconds);
	/* --inject: the first responding thread of the first responding node */
	for (int t = 0; t < nd.nw && p->inject && me == (p->pattern == PT_1M ? 1 : 0); t++)
		if (!nd.w[t].requester) {
			nd.w[t].inject_at = 50;
			break;
		}
	nd.start = mono_ns();
	nd.measure_from = nd.start + (uint64_t)(p->warmup * 1e9);
	nd.measure_to = nd.measure_from + (uint64_t)(p->seconds * 1e9);
	for (int t = 0; t < nd.nw; t++)
		if (nd.w[t].requester)
			atomic_fetch_add(&nd.requesting, 1);
	for (int t = 0; t < nd.nw; t++)
		if ((r = pthread_create(&nd.w[t].th, NULL, nd.w[t].requester ? requester : responder, &nd.w[t]))) {
			fprintf(stderr, "zl-proto: pthread_create: %s\n", strerror(r));
			return -r;
		}
	/* a node that dies mid-run may leave no WR of ours outstanding (no
	 * CQE will ever say so): its rendezvous connection closing does */
	while (atomic_load(&nd.requesting) > 0)
		if (oob_watch(&o, 100, "during the run")) {
			fflush(NULL);
			_exit(1);
		}
	for (int t = 0; t < nd.nw; t++)
		if (nd.w[t].requester)
			pthread_join(nd.w[t].th, NULL);
	/* every node's requests answered (or a node failed: it exits and the
	 * gather says which) before the responders stop */
	if ((r = oob_barrier(&o, p->warmup + p->seconds + 2 * p->timeout, "end of run")))
		return r;
	atomic_store(&nd.stop, 1);
	struct noderes mine = { .qps = nd.nconn };
	hist_init(&mine.lat);
	for (int t = 0; t < nd.nw; t++) {
		if (!nd.w[t].requester)
			pthread_join(nd.w[t].th, NULL);
		if (nd.w[t].requester) {
			mine.msgs += nd.w[t].msgs;
			hist_merge(&mine.lat, &nd.w[t].lat);
		} else {
			mine.served += nd.w[t].msgs;
		}
	}
	void *all;
	if ((r = oob_gather(&o, &mine, sizeof(mine), &all, NULL, p->timeout, "results")))
		return r;
	if (me == 0) {
		struct noderes *nr = all;
		struct result res = {
			.mode = "proto", .proto = proto_name(p->proto), .pattern = pattern_name(p->pattern),
			.N = p->N, .P = p->P, .Q = p->Q, .S = p->S, .R = p->R, .L = p->L, .V = p->V,
			.variant = "-", .nodes = p->N, .seconds = p->seconds,
			.per_node = p->pattern == PT_MM, .clock = clock_name(), .label = p->label,
		};
		uint64_t served = 0, answered = 0;
		hist_init(&res.lat);
		for (int i = 0; i < p->N; i++) {
			res.msgs += nr[i].msgs;
			served += nr[i].served;
			hist_merge(&res.lat, &nr[i].lat);
			if (nr[i].qps > res.qps)
				res.qps = nr[i].qps;
		}
		answered = res.lat.n;
		/* READ has no responder CPU; for the others every response a
		 * requester counted was served once: more is impossible */
		if (p->proto != PR_READ && answered > served) {
			fprintf(stderr, "zl-proto: requesters counted %llu responses but responders sent %llu\n",
				(unsigned long long)answered, (unsigned long long)served);
			r = -EPROTO;
		}
		if (!res.msgs) {
			fprintf(stderr, "zl-proto: no response arrived in the measured %.3f s\n", p->seconds);
			r = -EPROTO;
		}
		report_text(stdout, &res);
		if (p->csv[0])
			r = r ? r : result_write_csv(p, &res);
		fflush(stdout);
	}
	free(all);
	oob_close(&o);
	return r;
}
