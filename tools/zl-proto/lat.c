/* SPDX-License-Identifier: MIT */
/*
 * The verbs experiments of the TUM latency thesis (ch. 3), the BME latency thesis (ch. 5) and "Network Sockets over RDMA"
 * (inline comparison), between two nodes: node 0 times round trips (or a
 * one-way stream), node 1 echoes. Every point of a sweep gets fresh QPs, so
 * one point's settings cannot leak into the next; both nodes walk the same
 * list of points (it depends on the parameters only) and meet at a barrier
 * around each. Every message carries its sequence number and a fill derived
 * from it; the receiver checks it (for a stream: the last message).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
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
#include "vb.h"

enum op {
	OP_WRITE,    /* RDMA WRITE, receiver polls the trailer in memory */
	OP_WRITE_IMM,/* WRITE_WITH_IMM, receiver polls its CQ */
	OP_SEND,     /* SEND/RECV */
	OP_SEND_MEM, /* SEND, the receiver polls the receive buffer (the BME latency thesis's WRITE-like send/recv) */
	OP_IMM,      /* SEND with no payload, the 4-byte immediate only */
	OP_READ,     /* node 0 READs node 1's slot (node 1 idle) */
	OP_IND_DP,   /* indirect: WRITE data to slot p, then WRITE p */
	OP_IND_PD,   /* indirect: WRITE p first, then the data */
	OP_IND_IMM,  /* indirect: WRITE_WITH_IMM, p in the immediate */
};

struct point {
	const char *variant;
	double x;
	enum ibv_qp_type type;
	enum op op;
	uint32_t size; /* payload bytes */
	int dma, sig, recv_batch, parts, chained, stream, timeout; /* 0: inline where it fits */
};

#define NPOS 16     /* indirect positions */
#define RDEPTH 64   /* receives kept posted */

struct end {
	const struct params *p;
	struct dev *d;
	int me;
	const struct point *pt;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	uint32_t rqpn;
	struct ibv_mr *mr;
	char *buf;
	size_t buflen, slot;
	uint64_t raddr;
	uint32_t rkey, max_inline;
	uint64_t posted, done, last_sig;
	int consumed; /* receives used since the last repost */
	uint32_t rnext; /* next receive buffer (they complete in order) */
};

/* Layout of an end's buffer: rx slot, tx slot, position word, NPOS
 * indirect slots, RDEPTH receive buffers (UD: +40 for the GRH). */
static char *rx(struct end *e) { return e->buf; }
static char *tx(struct end *e) { return e->buf + e->slot; }
static size_t pos_off(struct end *e) { return 2 * e->slot; }
static size_t ind_off(struct end *e, int i) { return 2 * e->slot + 64 + (size_t)i * e->slot; }
static size_t rbuf_off(struct end *e, uint32_t i) { return 2 * e->slot + 64 + (size_t)(NPOS + i) * e->slot; }

__attribute__((format(printf, 2, 3), noreturn)) static void die(struct end *e, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "zl-proto: %s %s x=%g node %d: ", mode_name(e->p->mode), e->pt->variant, e->pt->x,
		e->me);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(NULL);
	_exit(1);
}

/* UD puts the 40-byte GRH before the message in a receive buffer */
static uint32_t grh(const struct end *e) { return e->pt->type == IBV_QPT_UD ? 40 : 0; }

static uint8_t fill_byte(uint64_t seq, uint32_t j) { return (uint8_t)(seq * 151 + j * 11 + 3); }

/* framed as in proto.c: u32 len | u8 mark | 3 pad | payload | u8 mark */
static void build(char *s, uint32_t n, uint64_t seq)
{
	uint8_t mark = (uint8_t)(0x80 | (seq & 0x7f));
	for (uint32_t j = 0; j < n; j++)
		s[8 + j] = (char)fill_byte(seq, j);
	if (n >= 8)
		memcpy(s + 8, &seq, 8);
	s[8 + n] = (char)mark;
	memcpy(s, &n, 4);
	s[4] = (char)mark;
}

static const char *verify(const char *s, uint32_t n, uint64_t seq)
{
	uint32_t len;
	memcpy(&len, s, 4);
	if (len != n || (uint8_t)s[4] != (uint8_t)(0x80 | (seq & 0x7f)) || s[8 + n] != s[4])
		return "bad framing or sequence";
	for (uint32_t j = n >= 8 ? 8 : 0; j < n; j++)
		if ((uint8_t)s[8 + j] != fill_byte(seq, j))
			return "payload does not match the sequence";
	if (n >= 8 && memcmp(s + 8, &seq, 8))
		return "sequence does not match";
	return NULL;
}

static uint64_t deadline(const struct end *e) { return mono_ns() + (uint64_t)(e->p->timeout * 1e9); }

static void reap(struct end *e, int block)
{
	uint64_t dl = block ? deadline(e) : 0;
	for (;;) {
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(e->scq, 16, wc);
		if (n < 0)
			die(e, "ibv_poll_cq: %d", n);
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS)
				die(e, "send completion: %s", ibv_wc_status_str(wc[i].status));
			if (wc[i].wr_id > e->done)
				e->done = wc[i].wr_id;
		}
		if (!block || n > 0)
			return;
		if (mono_ns() > dl)
			die(e, "no send completion within %.0f s", e->p->timeout);
	}
}

static void post_recvs(struct end *e, int k)
{
	struct ibv_recv_wr wr[RDEPTH], *bad;
	struct ibv_sge sge[RDEPTH];
	size_t len = e->slot + grh(e);
	for (int i = 0; i < k; i++) {
		uint32_t b = (e->rnext + (uint32_t)i) % RDEPTH;
		sge[i] = (struct ibv_sge){ (uintptr_t)(e->buf + rbuf_off(e, b)), (uint32_t)len, e->mr->lkey };
		wr[i] = (struct ibv_recv_wr){ .wr_id = b, .sg_list = &sge[i], .num_sge = 1,
					      .next = i + 1 < k ? &wr[i + 1] : NULL };
	}
	e->rnext = (e->rnext + (uint32_t)k) % RDEPTH;
	int r = ibv_post_recv(e->qp, wr, &bad);
	if (r)
		die(e, "ibv_post_recv: %s", strerror(r));
}

/* One receive consumed: repost it now (one by one) or when a batch of
 * them is used up (aggregated: one ibv_post_recv for recv_batch WRs). */
static void recv_used(struct end *e)
{
	if (++e->consumed >= e->pt->recv_batch) {
		post_recvs(e, e->consumed);
		e->consumed = 0;
	}
}

static struct ibv_wc wait_recv(struct end *e)
{
	struct ibv_wc wc;
	uint64_t dl = deadline(e);
	unsigned spin = 0;
	for (;;) {
		int n = ibv_poll_cq(e->rcq, 1, &wc);
		if (n < 0)
			die(e, "ibv_poll_cq: %d", n);
		if (n == 1) {
			if (wc.status != IBV_WC_SUCCESS)
				die(e, "receive completion: %s", ibv_wc_status_str(wc.status));
			return wc;
		}
		if (!(++spin & 1023) && mono_ns() > dl)
			die(e, "nothing arrived within %.0f s (the peer died, or a message was lost)", e->p->timeout);
		if (!e->p->busy && !(spin & 63))
			sched_yield();
	}
}

static void wait_mem(struct end *e, const char *s, uint32_t n)
{
	uint64_t dl = deadline(e);
	unsigned spin = 0;
	while (!frame_arrived(s, n)) {
		if (!(++spin & 1023) && mono_ns() > dl)
			die(e, "nothing arrived within %.0f s (the peer died, or a message was lost)", e->p->timeout);
		if (!e->p->busy && !(spin & 63))
			sched_yield();
	}
}

/* A WRITE-side check may see the marks before the rest (rxe does not
 * promise in-order placement): give the bytes a second to settle. */
static void settle(struct end *e, const char *s, uint32_t n, uint64_t seq)
{
	const char *bad;
	uint64_t dl = mono_ns() + 1000000000ull;
	while ((bad = verify(s, n, seq)))
		if (mono_ns() > dl)
			die(e, "message %llu: %s", (unsigned long long)seq, bad);
}

static void post(struct end *e, struct ibv_send_wr *wr, int n)
{
	/* room in the SQ: at most sig unsignaled WRs plus one batch ahead */
	while (e->posted - e->done + (uint64_t)n > (uint64_t)(2 * e->pt->sig * e->pt->parts + 8))
		reap(e, 1);
	for (int i = 0; i < n; i++) {
		e->posted++;
		int sig = e->posted - e->last_sig >= (uint64_t)e->pt->sig;
		wr[i].wr_id = e->posted;
		wr[i].send_flags |= sig ? IBV_SEND_SIGNALED : 0;
		if (sig)
			e->last_sig = e->posted;
		if (!e->pt->dma && wr[i].opcode != IBV_WR_RDMA_READ && wr[i].num_sge &&
		    wr[i].sg_list->length <= e->max_inline)
			wr[i].send_flags |= IBV_SEND_INLINE;
		if (e->ah) {
			wr[i].wr.ud.ah = e->ah;
			wr[i].wr.ud.remote_qpn = e->rqpn;
			wr[i].wr.ud.remote_qkey = 0x11111111u;
		}
	}
	struct ibv_send_wr *bad;
	if (e->pt->chained || n == 1) {
		for (int i = 0; i + 1 < n; i++)
			wr[i].next = &wr[i + 1];
		int r = ibv_post_send(e->qp, wr, &bad);
		if (r)
			die(e, "ibv_post_send: %s", strerror(r));
	} else {
		for (int i = 0; i < n; i++) {
			wr[i].next = NULL;
			int r = ibv_post_send(e->qp, &wr[i], &bad);
			if (r)
				die(e, "ibv_post_send: %s", strerror(r));
		}
	}
	reap(e, 0);
}

static void rdma_wr(struct end *e, struct ibv_send_wr *wr, struct ibv_sge *sge, enum ibv_wr_opcode op,
		    const char *src, uint32_t len, uint64_t roff)
{
	*sge = (struct ibv_sge){ (uintptr_t)src, len, e->mr->lkey };
	*wr = (struct ibv_send_wr){ .sg_list = sge, .num_sge = 1, .opcode = op };
	wr->wr.rdma.remote_addr = e->raddr + roff;
	wr->wr.rdma.rkey = e->rkey;
}

static void send_msg(struct end *e, uint64_t seq)
{
	const struct point *pt = e->pt;
	uint32_t n = pt->size, len = n + 9;
	struct ibv_send_wr wr[8];
	struct ibv_sge sge[8];
	int pos = (int)(seq % NPOS);
	switch (pt->op) {
	case OP_WRITE: {
		build(tx(e), n, seq);
		/* parts > 1: the message in that many WRITEs (the trailer in
		 * the last one), chained in one post or posted one by one */
		uint32_t at = 0;
		for (int k = 0; k < pt->parts; k++) {
			uint32_t l = k + 1 < pt->parts ? len / (uint32_t)pt->parts : len - at;
			rdma_wr(e, &wr[k], &sge[k], IBV_WR_RDMA_WRITE, tx(e) + at, l, at);
			at += l;
		}
		post(e, wr, pt->parts);
		break;
	}
	case OP_WRITE_IMM:
		build(tx(e), n, seq);
		rdma_wr(e, &wr[0], &sge[0], IBV_WR_RDMA_WRITE_WITH_IMM, tx(e), len, 0);
		wr[0].imm_data = htonl((uint32_t)seq);
		post(e, wr, 1);
		break;
	case OP_SEND:
	case OP_SEND_MEM:
		build(tx(e), n, seq);
		sge[0] = (struct ibv_sge){ (uintptr_t)tx(e), len, e->mr->lkey };
		wr[0] = (struct ibv_send_wr){ .sg_list = sge, .num_sge = 1, .opcode = IBV_WR_SEND };
		post(e, wr, 1);
		break;
	case OP_IMM:
		wr[0] = (struct ibv_send_wr){ .num_sge = 0, .opcode = IBV_WR_SEND_WITH_IMM,
					      .imm_data = htonl((uint32_t)seq) };
		post(e, wr, 1);
		break;
	case OP_IND_DP:
	case OP_IND_PD: {
		/* the position word: position and sequence, so a stale one
		 * cannot pass; it lives in tx's spare tail (registered) */
		uint64_t *pw = (uint64_t *)(e->buf + pos_off(e) + 32);
		*pw = seq << 8 | (uint64_t)pos;
		build(tx(e), n, seq);
		struct ibv_send_wr *d = &wr[pt->op == OP_IND_DP ? 0 : 1], *w = &wr[pt->op == OP_IND_DP ? 1 : 0];
		rdma_wr(e, d, &sge[pt->op == OP_IND_DP ? 0 : 1], IBV_WR_RDMA_WRITE, tx(e), len, ind_off(e, pos));
		rdma_wr(e, w, &sge[pt->op == OP_IND_DP ? 1 : 0], IBV_WR_RDMA_WRITE, (char *)pw, 8, pos_off(e));
		post(e, wr, 2);
		break;
	}
	case OP_IND_IMM:
		build(tx(e), n, seq);
		rdma_wr(e, &wr[0], &sge[0], IBV_WR_RDMA_WRITE_WITH_IMM, tx(e), len, ind_off(e, pos));
		wr[0].imm_data = htonl((uint32_t)(seq << 8 | (uint64_t)pos));
		post(e, wr, 1);
		break;
	case OP_READ:
		break;
	}
}

static void wait_msg(struct end *e, uint64_t seq)
{
	const struct point *pt = e->pt;
	uint32_t n = pt->size;
	struct ibv_wc wc;
	const char *bad;
	switch (pt->op) {
	case OP_WRITE:
		wait_mem(e, rx(e), n);
		settle(e, rx(e), n, seq);
		frame_unmark(rx(e), n);
		break;
	case OP_WRITE_IMM:
		wc = wait_recv(e);
		if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || ntohl(wc.imm_data) != (uint32_t)seq)
			die(e, "message %llu: wrong completion (opcode %d, imm %u)", (unsigned long long)seq,
			    wc.opcode, ntohl(wc.imm_data));
		if ((bad = verify(rx(e), n, seq)))
			die(e, "message %llu: %s", (unsigned long long)seq, bad);
		frame_unmark(rx(e), n);
		recv_used(e);
		break;
	case OP_SEND:
	case OP_IMM: {
		wc = wait_recv(e);
		char *b = e->buf + rbuf_off(e, (uint32_t)wc.wr_id) + grh(e);
		if (pt->op == OP_IMM) {
			if (!(wc.wc_flags & IBV_WC_WITH_IMM) || ntohl(wc.imm_data) != (uint32_t)seq || wc.byte_len !=
				(pt->type == IBV_QPT_UD ? 40u : 0u))
				die(e, "message %llu: wrong immediate %u or length %u", (unsigned long long)seq,
				    ntohl(wc.imm_data), wc.byte_len);
		} else if ((bad = verify(b, n, seq))) {
			die(e, "message %llu: %s", (unsigned long long)seq, bad);
		}
		recv_used(e);
		break;
	}
	case OP_SEND_MEM: {
		/* receives fill in order: the next one's trailer says the
		 * message is there; once the whole batch is used, its
		 * completions are taken at once and the batch reposted */
		char *b = e->buf + rbuf_off(e, (e->rnext + (uint32_t)e->consumed) % RDEPTH) + grh(e);
		wait_mem(e, b, n);
		settle(e, b, n, seq);
		frame_unmark(b, n);
		if (e->consumed + 1 >= pt->recv_batch)
			for (int i = 0; i <= e->consumed; i++) {
				wc = wait_recv(e);
				if (wc.wr_id != (e->rnext + (uint32_t)i) % RDEPTH || wc.byte_len != n + 9 + grh(e))
					die(e, "message %llu: receive completion %d of the batch is for buffer %llu, "
					    "%u bytes", (unsigned long long)seq, i, (unsigned long long)wc.wr_id,
					    wc.byte_len);
			}
		recv_used(e);
		break;
	}
	case OP_IND_DP:
	case OP_IND_PD: {
		volatile uint64_t *pw = (volatile uint64_t *)(e->buf + pos_off(e));
		uint64_t want = seq << 8 | (seq % NPOS), dl = deadline(e);
		unsigned spin = 0;
		while (*pw != want) {
			if (!(++spin & 1023) && mono_ns() > dl)
				die(e, "position of message %llu never arrived", (unsigned long long)seq);
			if (!e->p->busy && !(spin & 63))
				sched_yield();
		}
		atomic_thread_fence(memory_order_acquire);
		char *s = e->buf + ind_off(e, (int)(seq % NPOS));
		/* position first: the data may still be on its way */
		wait_mem(e, s, n);
		settle(e, s, n, seq);
		frame_unmark(s, n);
		break;
	}
	case OP_IND_IMM: {
		wc = wait_recv(e);
		uint32_t imm = ntohl(wc.imm_data);
		if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || imm != (uint32_t)(seq << 8 | (seq % NPOS)))
			die(e, "message %llu: wrong immediate %u", (unsigned long long)seq, imm);
		char *s = e->buf + ind_off(e, (int)(imm & 0xff));
		if ((bad = verify(s, n, seq)))
			die(e, "message %llu: %s", (unsigned long long)seq, bad);
		frame_unmark(s, n);
		recv_used(e);
		break;
	}
	case OP_READ:
		break;
	}
}

/* node 0's READ round trip: node 1's rx slot holds message 1 for good */
static void read_once(struct end *e)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	char *dst = rx(e);
	memset(dst, 0, e->pt->size + 9);
	rdma_wr(e, &wr, &sge, IBV_WR_RDMA_READ, dst, e->pt->size + 9, 0);
	uint64_t want = e->posted + 1;
	/* always signaled: the CQE is how the reader knows */
	wr.send_flags = IBV_SEND_SIGNALED;
	post(e, &wr, 1);
	uint64_t dl = deadline(e);
	while (e->done < want) {
		reap(e, 0);
		if (mono_ns() > dl)
			die(e, "READ did not complete within %.0f s", e->p->timeout);
	}
	const char *bad = verify(dst, e->pt->size, 1);
	if (bad)
		die(e, "READ: %s", bad);
}

/* What a point leaves at 0 is the default: RC, every WR signaled, one
 * receive posted per call, the message in one WR, the ACK timeout given. */
static void fix(struct point *pt, const struct params *p)
{
	if (!pt->type)
		pt->type = IBV_QPT_RC;
	if (!pt->sig)
		pt->sig = 1;
	if (!pt->recv_batch)
		pt->recv_batch = 1;
	if (!pt->parts)
		pt->parts = 1;
	if (!pt->timeout)
		pt->timeout = p->ack_timeout;
}

/* The points of p's mode; n gets their count. */
static int points(const struct params *p, struct point *pt, int max)
{
	int n = 0;
	uint32_t V = p->V;
#define PT(...)                                                                                     \
	do {                                                                                        \
		if (n < max) {                                                                      \
			pt[n] = (struct point){ __VA_ARGS__ };                                      \
			fix(&pt[n], p);                                                             \
		}                                                                                   \
		n++;                                                                                \
	} while (0)
	static const uint32_t sizes[] = { 16, 64, 256, 1024, 4096 };
	static const uint32_t isizes[] = { 8, 16, 32, 64, 128, 256, 512, 1024 };
	switch (p->mode) {
	case MD_QPTYPE:
		/* x: 1 RC, 2 UC, 3 UD (one axis for the plot) */
		PT(.variant = "rc", .x = 1, .op = OP_IMM, .size = 0);
		PT(.variant = "uc", .x = 2, .op = OP_IMM, .type = IBV_QPT_UC, .size = 0);
		PT(.variant = "ud", .x = 3, .op = OP_IMM, .type = IBV_QPT_UD, .size = 0);
		break;
	case MD_NOTIFY:
		for (int i = 0; i < 5; i++) {
			PT(.variant = "write-poll", .x = sizes[i], .op = OP_WRITE, .size = sizes[i]);
			PT(.variant = "write-imm", .x = sizes[i], .op = OP_WRITE_IMM, .size = sizes[i]);
			PT(.variant = "send-recv", .x = sizes[i], .op = OP_SEND, .size = sizes[i]);
			PT(.variant = "read", .x = sizes[i], .op = OP_READ, .size = sizes[i]);
		}
		break;
	case MD_INDIRECT:
		for (int i = 0; i < 4; i += 1) {
			uint32_t s = sizes[i];
			PT(.variant = "data-then-pos", .x = s, .op = OP_IND_DP, .size = s);
			PT(.variant = "pos-then-data", .x = s, .op = OP_IND_PD, .size = s);
			PT(.variant = "write-imm", .x = s, .op = OP_IND_IMM, .size = s);
		}
		break;
	case MD_CHAIN:
		for (int k = 2; k <= 8; k *= 2) {
			PT(.variant = "chained", .x = k, .op = OP_WRITE, .size = V, .parts = k, .chained = 1);
			PT(.variant = "unchained", .x = k, .op = OP_WRITE, .size = V, .parts = k);
		}
		break;
	case MD_SIGNAL:
		for (int k = 1; k <= 64; k *= 2)
			PT(.variant = "stream", .x = k, .op = OP_WRITE, .size = V, .sig = k, .stream = 1);
		break;
	case MD_INLINE:
		for (int i = 0; i < 8; i++) {
			PT(.variant = "inline", .x = isizes[i], .op = OP_WRITE, .size = isizes[i]);
			PT(.variant = "dma", .x = isizes[i], .op = OP_WRITE, .size = isizes[i], .dma = 1);
		}
		break;
	case MD_RECVPOST:
		PT(.variant = "one-by-one", .x = 1, .op = OP_SEND, .size = V);
		PT(.variant = "aggregated", .x = 16, .op = OP_SEND, .size = V, .recv_batch = 16);
		break;
	case MD_WRITELIKE:
		/* UD (messages up to the MTU, 1024 on rxe over veth): CQ
		 * polled per message, or memory polled and the CQ drained
		 * once all RDEPTH receives are used; both repost RDEPTH at once */
		for (int i = 0; i < 4; i++) {
			uint32_t s = i < 3 ? sizes[i] : 512;
			PT(.variant = "send-recv", .x = s, .type = IBV_QPT_UD, .op = OP_SEND, .size = s,
			   .recv_batch = RDEPTH);
			PT(.variant = "write-like", .x = s, .type = IBV_QPT_UD, .op = OP_SEND_MEM, .size = s,
			   .recv_batch = RDEPTH);
		}
		break;
	case MD_ACK:
		for (int t = 8; t <= 16; t += 2)
			PT(.variant = "loss", .x = t, .op = OP_WRITE, .size = 64, .timeout = t);
		break;
	default:
		break;
	}
#undef PT
	return n;
}

struct xchg {
	uint32_t ok, qpn, psn, rkey;
	uint64_t addr;
	uint16_t lid;
	uint8_t gid[16];
	char why[96];
};

/* Make this end's QP for the point; 0, or -errno with why filled (the
 * device does not do it: the point is skipped on both nodes). */
static int open_end(struct end *e, struct xchg *x)
{
	const struct point *pt = e->pt;
	e->slot = ((size_t)pt->size + 9 + 40 + 63) & ~(size_t)63;
	e->buflen = (rbuf_off(e, RDEPTH) + 4095) & ~(size_t)4095;
	e->buf = mmap(NULL, e->buflen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (e->buf == MAP_FAILED)
		return -ENOMEM;
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	e->mr = ibv_reg_mr(e->d->pd, e->buf, e->buflen, acc);
	e->scq = ibv_create_cq(e->d->ctx, 1024, NULL, NULL, 0);
	e->rcq = ibv_create_cq(e->d->ctx, 1024, NULL, NULL, 0);
	if (!e->mr || !e->scq || !e->rcq) {
		snprintf(x->why, sizeof(x->why), "memory or CQ: %s", strerror(errno));
		return -ENOMEM;
	}
	uint32_t depth = (uint32_t)(2 * pt->sig * pt->parts + 16);
	int inl_try[] = { 1024, 512, 256, 128, 64, 0 };
	for (int k = 0; k < 6 && !e->qp; k++) {
		e->qp = qp_create(e->d, pt->type, e->scq, e->rcq, depth, RDEPTH, (uint32_t)inl_try[k]);
		e->max_inline = (uint32_t)inl_try[k];
	}
	if (!e->qp) {
		snprintf(x->why, sizeof(x->why), "%s cannot create a %s QP (%s)", e->d->name, pt->variant,
			 strerror(errno));
		return -EOPNOTSUPP;
	}
	x->ok = 1;
	x->qpn = e->qp->qp_num;
	x->psn = (uint32_t)lrand48() & 0xffffff;
	x->rkey = e->mr->rkey;
	x->addr = (uintptr_t)e->buf;
	x->lid = e->d->port.lid;
	memcpy(x->gid, e->d->gid.raw, 16);
	return 0;
}

static void close_end(struct end *e)
{
	if (e->ah)
		ibv_destroy_ah(e->ah);
	if (e->qp)
		ibv_destroy_qp(e->qp);
	if (e->scq)
		ibv_destroy_cq(e->scq);
	if (e->rcq)
		ibv_destroy_cq(e->rcq);
	if (e->mr)
		ibv_dereg_mr(e->mr);
	if (e->buf && e->buf != MAP_FAILED)
		munmap(e->buf, e->buflen);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void emit(const struct params *p, struct result *r)
{
	report_text(stdout, r);
	if (p->csv[0])
		result_write_csv(p, r);
}

/* One point: ping-pong (or stream) between the two ends. Node 0 reports. */
static int run_point(const struct params *p, struct end *e, struct oob *o)
{
	const struct point *pt = e->pt;
	int iters = p->iters, warm = iters / 10 < 10 ? 10 : iters / 10, r;
	uint64_t *rtt = NULL;
	if (e->me == 0 && !(rtt = calloc((size_t)iters, sizeof(*rtt))))
		return -ENOMEM;
	if (pt->op == OP_SEND || pt->op == OP_SEND_MEM || pt->op == OP_IMM || pt->op == OP_WRITE_IMM ||
	    pt->op == OP_IND_IMM)
		post_recvs(e, RDEPTH);
	if (pt->op == OP_READ && e->me == 1)
		build(rx(e), pt->size, 1);
	if ((r = oob_barrier(o, p->timeout, "point start")))
		return r;
	struct result res = { .mode = mode_name(p->mode), .proto = "-", .pattern = "-", .N = 2, .P = 1,
			      .Q = 1, .S = 1, .R = 1, .L = 0, .V = pt->size, .variant = pt->variant,
			      .x = pt->x, .nodes = 2, .qps = 1, .clock = clock_name(), .label = p->label };
	hist_init(&res.lat);
	if (pt->stream) {
		/* node 0 WRITEs iters messages into node 1's rx slot, signaled
		 * every sig; node 1 checks the last one */
		uint64_t total = (uint64_t)iters * 20;
		if (e->me == 0) {
			uint64_t t0 = mono_ns();
			for (uint64_t s = 1; s <= total; s++) {
				struct ibv_send_wr wr;
				struct ibv_sge sge;
				build(tx(e), pt->size, s);
				rdma_wr(e, &wr, &sge, IBV_WR_RDMA_WRITE, tx(e), pt->size + 9, 0);
				if (s == total) /* the last one signaled: it ends the clock */
					e->last_sig = e->posted + 1 - (uint64_t)pt->sig;
				post(e, &wr, 1);
			}
			uint64_t dl = deadline(e);
			while (e->done < e->posted) {
				reap(e, 0);
				if (mono_ns() > dl)
					die(e, "the stream did not complete within %.0f s", p->timeout);
			}
			res.seconds = (double)(mono_ns() - t0) / 1e9;
			res.msgs = total;
		} else {
			/* inline sends reuse tx at once: only the last is whole */
			uint64_t dl = deadline(e);
			while (verify(rx(e), pt->size, total))
				if (mono_ns() > dl)
					die(e, "the last message of the stream never arrived whole");
		}
	} else if (pt->op == OP_READ) {
		if (e->me == 0) {
			uint64_t t0 = mono_ns();
			for (int i = 0; i < warm + iters; i++) {
				uint64_t a = clock_ticks();
				read_once(e);
				if (i >= warm)
					rtt[i - warm] = clock_ns(clock_ticks() - a);
			}
			res.seconds = (double)(mono_ns() - t0) / 1e9;
		}
	} else {
		uint64_t t0 = mono_ns();
		for (int i = 0; i < warm + iters; i++) {
			uint64_t seq = (uint64_t)i + 1;
			if (e->me == 0) {
				uint64_t a = clock_ticks();
				send_msg(e, seq);
				wait_msg(e, seq);
				if (i >= warm)
					rtt[i - warm] = clock_ns(clock_ticks() - a);
			} else {
				wait_msg(e, seq);
				send_msg(e, seq);
			}
		}
		res.seconds = (double)(mono_ns() - t0) / 1e9;
	}
	if (e->me == 0 && !pt->stream) {
		for (int i = 0; i < iters; i++)
			hist_add(&res.lat, rtt[i]);
		res.msgs = (uint64_t)(warm + iters);
	}
	if ((r = oob_barrier(o, p->timeout, "point end")))
		return r;
	if (e->me == 0) {
		emit(p, &res);
		if (p->mode == MD_ACK) {
			/* retransmission delay: the round trips well above the
			 * typical one (the BME latency thesis fig. 30) minus the typical one */
			double formula = 4.096 * (double)(1ull << pt->timeout) * 1e3; /* ns */
			uint64_t base = hist_pct(&res.lat, 50), thr = base + 2000000; /* 2 ms: the VM's own tail */
			if ((uint64_t)(formula / 2) > thr - base)
				thr = base + (uint64_t)(formula / 2);
			qsort(rtt, (size_t)iters, sizeof(*rtt), cmp_u64);
			int k = 0;
			while (k < iters && rtt[k] <= thr)
				k++;
			struct result f = res, m = res;
			hist_init(&f.lat);
			hist_init(&m.lat);
			f.variant = "formula";
			hist_add(&f.lat, (uint64_t)formula);
			m.variant = "retransmit";
			for (int i = k; i < iters; i++)
				hist_add(&m.lat, rtt[i] - base);
			f.msgs = 1;
			m.msgs = (uint64_t)(iters - k);
			emit(p, &f);
			if (m.lat.n)
				emit(p, &m);
			else
				printf("ack x=%d: no round trip above %.2f ms: no loss hit (is netem on?)\n", pt->timeout,
				       (double)thr / 1e6);
		}
	}
	free(rtt);
	return 0;
}

int lat_run(const struct params *p, int me, const char *devname, int lfd)
{
	struct dev d;
	struct oob o;
	struct point pts[64];
	int n = points(p, pts, 64), r, skipped = 0;
	srand48((long)mono_ns() ^ me);
	if ((r = dev_open(&d, devname, p->ib_port, p->gid_index)))
		return r;
	if ((r = oob_join(&o, me, 2, p->coord, lfd, params_tag(p), p->timeout)))
		return r;
	/* rounds pass over all points in turn: a slow spell of the emulator
	 * (or a loaded host) then hits one round of a point, not all */
	for (int k = 0; k < n * p->rounds && !r; k++) {
		int i = k % n;
		struct end e = { .p = p, .d = &d, .me = me, .pt = &pts[i] };
		struct xchg x = { 0 };
		void *all;
		open_end(&e, &x);
		if ((r = oob_gather(&o, &x, sizeof(x), &all, NULL, p->timeout, "QP exchange")))
			break;
		struct xchg *xs = all, *peer = &xs[1 - me];
		if (!xs[0].ok || !xs[1].ok) {
			if (me == 0)
				printf("SKIP %s %s: %s\n", mode_name(p->mode), pts[i].variant,
				       xs[0].ok ? xs[1].why : xs[0].why);
			skipped++;
		} else {
			struct ep mine = { .qpn = x.qpn, .psn = x.psn }, rem = { .qpn = peer->qpn, .psn = peer->psn,
										  .lid = peer->lid };
			memcpy(rem.gid, peer->gid, 16);
			struct qp_opts qo = { pts[i].timeout, p->retry, 1 };
			e.raddr = peer->addr;
			e.rkey = peer->rkey;
			e.rqpn = peer->qpn;
			if ((r = qp_connect(&d, e.qp, &mine, &rem, &qo)))
				break;
			if (pts[i].type == IBV_QPT_UD && !(e.ah = ah_create(&d, &rem))) {
				fprintf(stderr, "zl-proto: ibv_create_ah: %s\n", strerror(errno));
				r = -errno;
				break;
			}
			r = run_point(p, &e, &o);
		}
		free(all);
		close_end(&e);
	}
	if (!r && skipped == n * p->rounds) {
		if (me == 0)
			printf("zl-proto: --mode %s: every point skipped\n", mode_name(p->mode));
		r = 77;
	}
	oob_close(&o);
	dev_close(&d);
	return r;
}
