/* SPDX-License-Identifier: MIT */
/*
 * rdma://HOST:PORT: the ring protocol over RC queue pairs (libibverbs).
 *
 * Setup goes over a TCP side channel, which then stays open as the
 * liveness signal (EOF: the peer closed or died). Each side registers the
 * ring it receives on, a control block the peer writes into, and a local
 * staging mirror of the peer's ring that records are built in.
 *
 * Data path ("Optimizing Network Latency for Transactions", TUM 2018, ch. 3.4):
 *   - one RDMA WRITE per record, IBV_SEND_INLINE when it fits;
 *   - unsignaled WRITEs, every k-th signaled to reclaim send-queue slots;
 *   - the read position goes back lazily as an 8-byte inline WRITE;
 *   - nothing is registered or allocated after setup.
 *
 * Ordering: ibv_query_qp_data_in_order() says whether WRITEs into OUR QP
 * land in address order. Each receiver decides how the sender must write
 * its ring and says so in the handshake:
 *   single  one WRITE per record; the footer lands last. Only where data is
 *           placed in order (order=auto picks it then).
 *   split   one WRITE_WITH_IMM per record (zl_sendv: per run of adjacent
 *           records, the immediate saying how many); the receiver delivers
 *           a record only after its receive completion, which RC reports
 *           only once the data is placed (order=auto picks it otherwise).
 *   split2  a WRITE of [off+8, end), then the 8-byte htag in a second WRITE
 *           (ring layout TAG_FIRST): RC executes WRITEs in order. Twice the
 *           packets of split; kept for comparison.
 * order=single|split|split2 forces one.
 *
 * Wakeups: a side about to sleep WRITEs a flag into the peer's control
 * block; the peer, after its next record (or read-position update), sees
 * the flag and sends a zero-byte WRITE_WITH_IMM that completes on our
 * receive CQ and its completion channel. A flag WRITE and a data WRITE can
 * cross in flight, so a sleeper also re-checks its ring every millisecond:
 * a lost wakeup costs at most 1 ms, never a hang.
 *   A split receiver needs none of that: every record completes on its
 * receive CQ, so it arms by requesting a completion event and writes
 * nothing (ibv_req_notify_cq, then a look at the CQ, then sleep: a record
 * placed after the request raises the event). A sender waiting for room
 * writes its flag with an immediate (IMM_ARM_TX), so that flag, too, wakes
 * a split receiver, which then publishes its read position
 * (ringchan.c: link->rx_self_wake). A sleeping ping-pong then costs one
 * work request per message instead of four (record, read position, flag,
 * wakeup).
 *
 * One-sided access (zl_onesided_ops in internal.h): a device is opened
 * once per process and its protection domain shared by all channels on it,
 * so memory registered once can be opened to many peers. Regions are
 * registered without remote access; a peer gets a type-2 memory window
 * bound to its own queue pair, so its key is useless on any other
 * connection, and a write outside the window fails that peer's QP only.
 * rxe checks a window's accesses against its region's bounds, not the
 * window's: a window must cover its whole region to be a bound there.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <unistd.h>

#include "clock.h"
#include "ringchan.h"
#include "sockutil.h"
#include "verbs_wire.h"

/* RC's retransmission: a try waits 4.096 us << QP_TIMEOUT_EXP (~67 ms),
 * and QP_RETRIES retries follow the first; then the queue pair fails. */
#define QP_TIMEOUT_EXP 14
#define QP_RETRIES 7
#define QP_TIMEOUT_US ((int64_t)4096 * (1 << QP_TIMEOUT_EXP) / 1000)
/* zl_close's wait for its last writes, at most (drain_sq) */
#define DRAIN_CAP_US 10000000

#define SQ_DEPTH 128
#define RQ_DEPTH 512   /* split: one receive per record in flight */
#define RECV_BATCH 32  /* receives given back at once on the message path */
#define IMM_DATA 2     /* immediate data of a record (wakeups send 0 or 1) */
#define IMM_ARM_TX 3   /* a sender's flag: it waits for room */
#define IMM_RECS 0x100 /* | n: n adjacent records in one WRITE (RD_MODE_NIMM) */

enum rd_mode { RD_SINGLE = 0, RD_SPLIT2 = 1, RD_SPLIT = 2 };
static const char *const mode_name[] = { "single", "split2", "split" };
#define SIGNAL_EVERY ZL_RD_SIGNAL_EVERY
_Static_assert(SIGNAL_EVERY <= SQ_DEPTH / 4, "a signaled WR per quarter of the send queue");
#define WANT_INLINE 256
#define SAFETY_SLEEP_US 1000
#define REAP_TIMEOUT_US 2000000
#define OS_RD_ATOM 16  /* READs and atomics in flight (one-sided store) */
#define BATCH_MAX 32   /* records zl_sendv holds before posting them */
#define BATCH_BYTES 65536 /* ... or bytes */



/* Written by the peer through RDMA; read here. */
struct rd_ctl {
	_Alignas(64) _Atomic uint64_t rpos;         /* peer's read position in my tx ring */
	_Atomic uint64_t rpos_check;                /* zl_rpos_check(rpos): see ring.h */
	_Alignas(64) _Atomic uint32_t rx_sleeping;  /* peer's receiver sleeps */
	_Alignas(64) _Atomic uint32_t tx_sleeping;  /* peer's sender waits for room */
	_Alignas(64) uint64_t src[4];               /* sources of small inline WRITEs */
};

struct rd_params {
	char dev[64];
	int port, gid_index; /* gid_index -1: auto */
	int order;           /* -1 auto, else enum rd_mode */
};

/* An open device, shared by this process's channels on it. */
struct rd_dev {
	struct rd_dev *next;
	char name[64];
	pid_t pid; /* a forked child opens its own */
	int refs;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	uint8_t rd_atom;   /* READs and atomics in flight per QP (both ways) */
	bool atomic_glob;  /* its atomics are atomic with the CPU's */
};

struct zl_rmem {
	struct rd_dev *dev;
	struct ibv_mr *mr;
};

struct zl_win {
	struct ibv_mw *mw;
};

struct rd_chan {
	struct zl_ringchan rc;
	int sock, epfd;
	int tfd; /* fd mode: ends a sleep on the fd after SAFETY_SLEEP_US */
	bool t_set;      /* the timer runs or fired and was not read yet */
	bool t_quiet;    /* the timer fired with nothing seen since our arm */
	uint64_t t_seq;  /* rx.seq then */
	struct rd_dev *dev;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *chan;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	struct ibv_mr *ring_mr, *ctl_mr, *stage_mr;
	uint8_t *ring, *stage;
	struct rd_ctl *ctl;
	struct rd_info peer;
	uint64_t key;            /* of our ring */
	uint32_t max_inline;
	uint8_t tx_mode, rx_mode;
	_Atomic uint64_t avail;  /* split: records whose completion we saw */
	atomic_flag rq_lock;
	/* The receive CQ may raise an event: it was armed, or an event waits
	 * on the channel fd. Set before each request, cleared before events
	 * are taken, so it is never set while neither holds. */
	_Atomic bool cq_armed;
	uint32_t recv_owed;      /* receives taken and not yet posted again */
	/* send-queue accounting; the lock lets one thread send while another
	 * receives (both post to the one send queue) */
	atomic_flag lock;
	uint64_t posted, completed;
	uint32_t since_signal;
	uint64_t os_target; /* the last one-sided request posted */
	bool qp_failed;
	/* zl_sendv: records held from batch_begin to batch_end (sending
	 * thread only; posted under the lock) */
	bool batching;
	bool tx_nimm; /* the peer takes IMM_RECS (split) */
	uint32_t nheld, held_bytes;
	struct { uint32_t off, len, n; } held[BATCH_MAX];
	/* verbs counters (zl_channel_info): written by the thread holding the
	 * lock (send queue) or rq_lock (receive CQ), read by any */
	_Atomic uint64_t n_wr, n_post, n_signaled, n_inline, n_bytes, n_scq_polls;
	_Atomic uint64_t n_rcq_polls, n_recv_posts;
};

/* Counters have one writer at a time (under a lock): no locked add. */
static inline void bump(_Atomic uint64_t *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

struct rd_listener {
	struct zl_listener base;
	int fd;
	struct zl_opts opts;
	struct rd_params params;
};

#define RD(rc) ((struct rd_chan *)(rc))

/* ---- devices ----------------------------------------------------------- */

static pthread_mutex_t devs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rd_dev *devs;

static void dev_put(struct rd_dev *d)
{
	pthread_mutex_lock(&devs_lock);
	bool last = --d->refs == 0;
	if (last) {
		struct rd_dev **pp = &devs;
		while (*pp != d)
			pp = &(*pp)->next;
		*pp = d->next;
	}
	pthread_mutex_unlock(&devs_lock);
	if (!last)
		return;
	if (d->pd)
		ibv_dealloc_pd(d->pd);
	ibv_close_device(d->ctx);
	free(d);
}

/* The named device (the first one if unnamed), opened once per process. */
static int dev_get(const char *want, struct rd_dev **out)
{
	int n, r = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n == 0) {
		/* (no device: libibverbs returns NULL, which it cannot free) */
		ZL_LOG(ZL_LOG_ERROR, "rdma: no RDMA devices");
		if (list)
			ibv_free_device_list(list);
		return -ENODEV;
	}
	int i = 0;
	while (i < n && want[0] && strcmp(ibv_get_device_name(list[i]), want))
		i++;
	const char *name = i < n ? ibv_get_device_name(list[i]) : want;
	pthread_mutex_lock(&devs_lock);
	struct rd_dev *d = devs;
	while (d && (strcmp(d->name, name) || d->pid != getpid()))
		d = d->next;
	if (d) {
		d->refs++;
	} else if (i == n || !(d = calloc(1, sizeof(*d)))) {
		r = i == n ? -ENODEV : -ENOMEM;
	} else if (!(d->ctx = ibv_open_device(list[i])) || !(d->pd = ibv_alloc_pd(d->ctx))) {
		if (d->ctx)
			ibv_close_device(d->ctx);
		free(d);
		d = NULL;
		r = -ENODEV;
	} else {
		struct ibv_device_attr a;
		int rd = 1;
		if (!ibv_query_device(d->ctx, &a)) {
			rd = a.max_qp_rd_atom < a.max_qp_init_rd_atom ? a.max_qp_rd_atom
								      : a.max_qp_init_rd_atom;
			d->atomic_glob = a.atomic_cap == IBV_ATOMIC_GLOB;
		}
		d->rd_atom = (uint8_t)(rd < 1 ? 1 : rd > OS_RD_ATOM ? OS_RD_ATOM : rd);
		snprintf(d->name, sizeof(d->name), "%s", name);
		d->pid = getpid();
		d->refs = 1;
		d->next = devs;
		devs = d;
	}
	pthread_mutex_unlock(&devs_lock);
	ibv_free_device_list(list);
	if (r == -ENODEV)
		ZL_LOG(ZL_LOG_ERROR, "rdma: cannot open device '%s'", want[0] ? want : "(any)");
	*out = d;
	return r;
}

/* ---- send queue ---------------------------------------------------------- */

/* Poll send completions; a failed one (peer gone, bad rkey, retries
 * exhausted) fails the channel. */
static int reap(struct rd_chan *v)
{
	struct ibv_wc wc[16];
	int n;
	/* a poll that returned fewer than it could take emptied the CQ: no
	 * second poll to find that out */
	do {
		bump(&v->n_scq_polls, 1);
		n = ibv_poll_cq(v->scq, 16, wc);
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				if (!v->qp_failed)
					ZL_LOG(ZL_LOG_ERROR, "rdma: send completion failed: %s",
					       ibv_wc_status_str(wc[i].status));
				v->qp_failed = true;
			} else if (wc[i].wr_id > v->completed) {
				v->completed = wc[i].wr_id;
			}
		}
	} while (n == 16);
	if (n < 0)
		v->qp_failed = true;
	return v->qp_failed ? -ECONNRESET : 0;
}

static inline void lock(struct rd_chan *v)
{
	while (atomic_flag_test_and_set_explicit(&v->lock, memory_order_acquire))
		zl_cpu_relax();
}

static inline void unlock(struct rd_chan *v)
{
	atomic_flag_clear_explicit(&v->lock, memory_order_release);
}

/* Wait (bounded) for k free send-queue slots. Caller holds the lock. */
static int sq_room(struct rd_chan *v, uint32_t k)
{
	if (v->posted - v->completed + k < SQ_DEPTH)
		return 0;
	/* the signaled completions are usually there already: look before
	 * reading the clock (a system call where the clocksource is HPET) */
	int r = reap(v);
	if (r || v->posted - v->completed + k < SQ_DEPTH)
		return r;
	int64_t deadline = zl_now_us() + REAP_TIMEOUT_US;
	while (v->posted - v->completed + k >= SQ_DEPTH) {
		if ((r = reap(v)))
			return r;
		if (zl_now_us() > deadline) {
			ZL_LOG(ZL_LOG_ERROR, "rdma: send queue stuck for 2 s");
			v->qp_failed = true;
			return -ECONNRESET;
		}
	}
	return 0;
}

/* Post k chained work requests with one ibv_post_send (one doorbell); their
 * wr_ids are set here. Caller holds the lock. */
static int post_chain_locked(struct rd_chan *v, struct ibv_send_wr *wr, uint32_t k)
{
	int r = sq_room(v, k);
	if (r)
		return r;
	uint64_t bytes = 0, inl = 0, sig = 0;
	for (uint32_t i = 0; i < k; i++) {
		wr[i].wr_id = ++v->posted;
		wr[i].next = i + 1 < k ? &wr[i + 1] : NULL;
		bytes += wr[i].num_sge ? wr[i].sg_list->length : 0;
		inl += !!(wr[i].send_flags & IBV_SEND_INLINE);
		sig += !!(wr[i].send_flags & IBV_SEND_SIGNALED);
	}
	struct ibv_send_wr *bad;
	r = ibv_post_send(v->qp, wr, &bad);
	if (r) {
		ZL_LOG(ZL_LOG_ERROR, "rdma: ibv_post_send: %s", strerror(r));
		v->qp_failed = true;
		return -ECONNRESET;
	}
	bump(&v->n_post, 1);
	bump(&v->n_wr, k);
	bump(&v->n_bytes, bytes);
	bump(&v->n_inline, inl);
	bump(&v->n_signaled, sig);
	return 0;
}

static int post_wr_locked(struct rd_chan *v, struct ibv_send_wr *wr)
{
	return post_chain_locked(v, wr, 1);
}

/* Fill one WRITE (or WRITE_WITH_IMM): inline when it fits, signaled every
 * SIGNAL_EVERY work requests (to reclaim send-queue slots). Caller holds the
 * lock. */
static void prep_wr(struct rd_chan *v, struct ibv_send_wr *wr, struct ibv_sge *sge,
		    enum ibv_wr_opcode op, const void *src, uint32_t len, uint32_t lkey,
		    uint64_t raddr, uint32_t rkey, uint32_t imm)
{
	*sge = (struct ibv_sge){ .addr = (uintptr_t)src, .length = len, .lkey = lkey };
	*wr = (struct ibv_send_wr){ 0 };
	wr->sg_list = sge;
	wr->num_sge = len ? 1 : 0;
	wr->opcode = op;
	if (len <= v->max_inline)
		wr->send_flags = IBV_SEND_INLINE;
	if (++v->since_signal >= SIGNAL_EVERY) {
		v->since_signal = 0;
		wr->send_flags |= IBV_SEND_SIGNALED;
	}
	wr->wr.rdma.remote_addr = raddr;
	wr->wr.rdma.rkey = rkey;
	wr->imm_data = htonl(imm);
}

static int post_locked(struct rd_chan *v, enum ibv_wr_opcode op, const void *src, uint32_t len,
		       uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr;
	prep_wr(v, &wr, &sge, op, src, len, lkey, raddr, rkey, imm);
	return post_wr_locked(v, &wr);
}

static int post(struct rd_chan *v, enum ibv_wr_opcode op, const void *src, uint32_t len,
		uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm)
{
	lock(v);
	int r = post_locked(v, op, src, len, lkey, raddr, rkey, imm);
	unlock(v);
	return r;
}

/* Post the held records as one chain: one WRITE per run of adjacent
 * records (single), one WRITE_WITH_IMM per run (split: the receiver counts
 * records by their completions, so the immediate says how many; a
 * completion means the whole WRITE is placed), or a data WRITE and a tag
 * WRITE per record (split2). Caller holds the lock. */
static int post_held_locked(struct rd_chan *v)
{
	struct ibv_send_wr wr[2 * BATCH_MAX];
	struct ibv_sge sge[2 * BATCH_MAX];
	uint64_t base = v->peer.ring_addr;
	uint32_t lk = v->stage_mr->lkey, rk = v->peer.ring_rkey, k = 0;
	for (uint32_t i = 0; i < v->nheld; i++) {
		uint32_t off = v->held[i].off, len = v->held[i].len;
		if (v->tx_mode == RD_SINGLE) {
			prep_wr(v, &wr[k], &sge[k], IBV_WR_RDMA_WRITE, v->stage + off, len, lk,
				base + off, rk, 0);
			k++;
		} else if (v->tx_mode == RD_SPLIT) {
			uint32_t n = v->held[i].n;
			prep_wr(v, &wr[k], &sge[k], IBV_WR_RDMA_WRITE_WITH_IMM, v->stage + off, len,
				lk, base + off, rk, n == 1 ? IMM_DATA : IMM_RECS | n);
			k++;
		} else {
			prep_wr(v, &wr[k], &sge[k], IBV_WR_RDMA_WRITE, v->stage + off + 8, len - 8,
				lk, base + off + 8, rk, 0);
			prep_wr(v, &wr[k + 1], &sge[k + 1], IBV_WR_RDMA_WRITE, v->stage + off, 8, lk,
				base + off, rk, 0);
			k += 2;
		}
	}
	v->nheld = 0;
	v->held_bytes = 0;
	return k ? post_chain_locked(v, wr, k) : 0;
}

static int post_held(struct rd_chan *v)
{
	lock(v);
	int r = post_held_locked(v);
	unlock(v);
	return r;
}

static void rd_batch_begin(struct zl_ringchan *rc)
{
	RD(rc)->batching = true;
}

static int rd_batch_end(struct zl_ringchan *rc)
{
	struct rd_chan *v = RD(rc);
	v->batching = false;
	return v->nheld ? post_held(v) : 0;
}

/* Hold a record for post_held_locked (adjacent records merge in single,
 * and in split where the peer counts them: RD_MODE_NIMM). Held records go
 * out once they reach BATCH_BYTES: beyond that, waiting for the batch's
 * last copy before its first byte leaves costs more than a doorbell (64
 * KiB messages in batches of 16 went 18% slower than one by one). */
static int hold(struct rd_chan *v, uint32_t off, uint32_t len)
{
	uint32_t n = v->nheld;
	bool merge = v->tx_mode == RD_SINGLE ||
		     (v->tx_mode == RD_SPLIT && v->tx_nimm && n && v->held[n - 1].n < BATCH_MAX);
	if (n && merge && v->held[n - 1].off + v->held[n - 1].len == off) {
		v->held[n - 1].len += len;
		v->held[n - 1].n++;
	} else {
		int r;
		if (n == BATCH_MAX && (r = post_held(v)))
			return r;
		n = v->nheld;
		v->held[n].off = off;
		v->held[n].len = len;
		v->held[n].n = 1;
		v->nheld = n + 1;
	}
	v->held_bytes += len;
	return v->held_bytes >= BATCH_BYTES ? post_held(v) : 0;
}

/* Place stage[off, off+len) at the same offset of the peer's ring. */
static int rd_push(void *ctx, uint32_t off, uint32_t len)
{
	struct rd_chan *v = ctx;
	if (v->batching)
		return hold(v, off, len);
	uint64_t base = v->peer.ring_addr;
	uint32_t lk = v->stage_mr->lkey, rk = v->peer.ring_rkey;
	if (v->tx_mode == RD_SINGLE)
		return post(v, IBV_WR_RDMA_WRITE, v->stage + off, len, lk, base + off, rk, 0);
	if (v->tx_mode == RD_SPLIT)
		return post(v, IBV_WR_RDMA_WRITE_WITH_IMM, v->stage + off, len, lk, base + off, rk,
			    IMM_DATA);
	/* split2: the data, then the tag, chained: one doorbell */
	struct ibv_send_wr wr[2];
	struct ibv_sge sge[2];
	lock(v);
	prep_wr(v, &wr[0], &sge[0], IBV_WR_RDMA_WRITE, v->stage + off + 8, len - 8, lk,
		base + off + 8, rk, 0);
	prep_wr(v, &wr[1], &sge[1], IBV_WR_RDMA_WRITE, v->stage + off, 8, lk, base + off, rk, 0);
	int r = post_chain_locked(v, wr, 2);
	unlock(v);
	return r;
}

/* A small inline WRITE of n words into the peer's control block. Each use
 * has its own source slots; values written there only ever grow (rpos) or
 * repeat (flags), so a late DMA read would still send a good value. */
static int write_words(struct rd_chan *v, size_t field, const uint64_t *val, int n, int slot,
		       uint32_t imm)
{
	lock(v);
	memcpy(&v->ctl->src[slot], val, sizeof(uint64_t) * (size_t)n);
	int r = post_locked(v, imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
			    &v->ctl->src[slot], 8u * (uint32_t)n, v->ctl_mr->lkey,
			    v->peer.ctl_addr + field, v->peer.ctl_rkey, imm);
	unlock(v);
	return r;
}

/* Request a receive-CQ event; unless always, not while one may still
 * come (cq_armed): the request is a system call on some providers. */
static int arm_cq(struct rd_chan *v, bool always)
{
	if (!always && atomic_load_explicit(&v->cq_armed, memory_order_relaxed))
		return 0;
	atomic_store_explicit(&v->cq_armed, true, memory_order_relaxed);
	return ibv_req_notify_cq(v->rcq, 0) ? -ECONNRESET : 0;
}

/* ---- link operations ----------------------------------------------------- */

static void rd_publish(struct zl_ringchan *rc, uint64_t rpos)
{
	uint64_t pair[2] = { rpos, zl_rpos_check(rpos, rc->rx.key) };
	write_words(RD(rc), offsetof(struct rd_ctl, rpos), pair, 2, 0, 0);
}

static int rd_arm(struct zl_ringchan *rc, enum zl_dir d)
{
	size_t f = d == ZL_DIR_RX ? offsetof(struct rd_ctl, rx_sleeping)
				  : offsetof(struct rd_ctl, tx_sleeping);
	/* the flag is 32 bits; write the whole aligned word around it */
	uint64_t one = 1;
	struct rd_chan *v = RD(rc);
	if (d == ZL_DIR_RX && zl_rc_self_woken(rc)) /* a record wakes us */
		return arm_cq(v, false);
	/* A flag WRITE and the peer's data WRITE can cross in flight, so no
	 * fence makes an arm safe: sleeps end after SAFETY_SLEEP_US to look
	 * again, and in fd mode a timer makes the fd readable then. */
	if (d == ZL_DIR_RX && v->tfd >= 0 && !(v->t_quiet && v->t_seq == rc->rx.seq)) {
		/* Once the timer fired with nothing seen (no completion, no
		 * record) since the last arm, our flag has landed and stays set:
		 * no WRITE of the peer can cross it, and no timer is needed
		 * until something moves (the fd of a quiet channel stays
		 * quiet). */
		struct itimerspec t = { .it_value = { 0, SAFETY_SLEEP_US * 1000 } };
		zl_rc_syscall(rc, 1);
		timerfd_settime(v->tfd, 0, &t, NULL);
		v->t_set = true;
		v->t_quiet = false;
	}
	return write_words(v, f, &one, 1, d == ZL_DIR_RX ? 2 : 3, d == ZL_DIR_TX ? IMM_ARM_TX : 0);
}

static int rd_wake(struct zl_ringchan *rc, enum zl_dir d)
{
	struct rd_chan *v = RD(rc);
	return post(v, IBV_WR_RDMA_WRITE_WITH_IMM, NULL, 0, 0, v->peer.ctl_addr,
		    v->peer.ctl_rkey, (uint32_t)d);
}

/* Post n receives (no buffer: they only take immediate data), chained
 * RECV_BATCH to a provider call. */
static int post_recvs(struct rd_chan *v, int n)
{
	struct ibv_recv_wr wr[RECV_BATCH], *bad;
	while (n > 0) {
		int k = n < RECV_BATCH ? n : RECV_BATCH;
		for (int i = 0; i < k; i++)
			wr[i] = (struct ibv_recv_wr){ .next = i + 1 < k ? &wr[i + 1] : NULL };
		if (ibv_post_recv(v->qp, wr, &bad))
			return -ECONNRESET;
		bump(&v->n_recv_posts, 1);
		n -= k;
	}
	return 0;
}

/* Records a receive completion announces: the peer's immediate, so at
 * most BATCH_MAX, and only a count of the peer's own records: one that
 * lies in it garbles no more than its own stream, whose every record is
 * still checked before delivery (ring.h, point 5). */
static uint32_t imm_records(uint32_t imm)
{
	if (imm == IMM_DATA)
		return 1;
	return (imm & ~0xffu) == IMM_RECS && (imm & 0xff) <= BATCH_MAX ? imm & 0xff : 0;
}

/* Take completions off the receive CQ, count the records among them
 * (split) and give the receive slots back a batch at a time (the rest of
 * the RQ_DEPTH stay posted, and a record wakes a sleeper: nothing is owed
 * before a sleep). Returns how many completions there were. Either thread
 * may get here; the other one simply skips. */
static int drain_rcq(struct rd_chan *v)
{
	if (atomic_flag_test_and_set_explicit(&v->rq_lock, memory_order_acquire))
		return 0;
	struct ibv_wc wc[32];
	int n, got = 0;
	uint64_t records = 0;
	while (bump(&v->n_rcq_polls, 1), (n = ibv_poll_cq(v->rcq, 32, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
					ZL_LOG(ZL_LOG_ERROR, "rdma: receive completion failed: %s",
					       ibv_wc_status_str(wc[i].status));
				v->qp_failed = true;
				continue;
			}
			got++;
			records += imm_records(ntohl(wc[i].imm_data));
		}
		if (n < 32)
			break;
	}
	if (records)
		atomic_fetch_add_explicit(&v->avail, records, memory_order_release);
	v->recv_owed += (uint32_t)got;
	if (v->recv_owed >= RECV_BATCH) {
		if (post_recvs(v, (int)v->recv_owed))
			v->qp_failed = true;
		v->recv_owed = 0;
	}
	atomic_flag_clear_explicit(&v->rq_lock, memory_order_release);
	return got;
}

/* split: look for completions only once the next record's header tag is
 * in memory (delivery still waits for the completion; wake completions are
 * taken by rd_drain, rd_sleep and rd_alive). Tags never repeat, so a stale
 * one cannot make us skip a record's completion forever. */
static void rd_progress(struct zl_ringchan *rc)
{
	struct rd_chan *v = RD(rc);
	if (atomic_load_explicit(&v->avail, memory_order_relaxed) > rc->rx.seq ||
	    !zl_ring_rx_tag_seen(&rc->rx))
		return;
	drain_rcq(v);
}

/* Take completion-channel events (at most max) and acknowledge each at
 * once: both the sending and the receiving thread may get here, and
 * ibv_destroy_cq waits for every event to be acknowledged, so a shared
 * count could hang it. */
static int take_events(struct rd_chan *v, int max)
{
	struct ibv_cq *cq;
	void *cq_ctx;
	int n = 0;
	atomic_store_explicit(&v->cq_armed, false, memory_order_relaxed);
	zl_rc_syscall(&v->rc, 1);
	while (n < max && !ibv_get_cq_event(v->chan, &cq, &cq_ctx)) {
		zl_rc_syscall(&v->rc, 1);
		ibv_ack_cq_events(cq, 1);
		n++;
	}
	return n;
}

static int sock_gone(struct rd_chan *v)
{
	struct pollfd p = { .fd = v->sock, .events = POLLIN | POLLRDHUP };
	zl_rc_syscall(&v->rc, 1);
	return poll(&p, 1, 0) > 0 ? -ECONNRESET : 0;
}

/* A self-woken receiver's drain: one look at the channel fd and the side
 * socket. Nothing there: no event came since the last request, which
 * therefore still stands (no new one needed when it arms). An event: take
 * it (one per request; a second, from a request racing the sending
 * thread's sleep, keeps the fd readable for the next look). */
static int drain_self_woken(struct rd_chan *v)
{
	struct pollfd p[2] = {
		{ .fd = v->chan->fd, .events = POLLIN },
		{ .fd = v->sock, .events = POLLIN | POLLRDHUP },
	};
	zl_rc_syscall(&v->rc, 1);
	if (poll(p, 2, 0) > 0 && p[0].revents) {
		take_events(v, 1);
		drain_rcq(v);
	}
	return v->qp_failed || p[1].revents ? -ECONNRESET : 0;
}

static int rd_drain(struct zl_ringchan *rc)
{
	struct rd_chan *v = RD(rc);
	if (zl_rc_self_woken(rc))
		return drain_self_woken(v);
	bool fired = false;
	if (v->t_set) {
		uint64_t n;
		zl_rc_syscall(rc, 1);
		fired = read(v->tfd, &n, sizeof(n)) == (ssize_t)sizeof(n);
		v->t_set = !fired;
	}
	if (take_events(v, INT32_MAX))
		v->t_quiet = false;
	else if (fired) {
		v->t_quiet = true;
		v->t_seq = rc->rx.seq;
	}
	drain_rcq(v);
	arm_cq(v, true);
	drain_rcq(v);
	return v->qp_failed ? -ECONNRESET : sock_gone(v);
}

static int rd_alive(struct zl_ringchan *rc)
{
	struct rd_chan *v = RD(rc);
	lock(v);
	int r = reap(v);
	unlock(v);
	drain_rcq(v);
	return r || v->qp_failed ? -ECONNRESET : sock_gone(v);
}

static int rd_sleep(struct zl_ringchan *rc, enum zl_dir d, int64_t deadline)
{
	struct rd_chan *v = RD(rc);
	if (arm_cq(v, true))
		return -ECONNRESET;
	if (drain_rcq(v))
		return 0; /* a wakeup was already queued */
	int64_t cap = zl_now_us() + SAFETY_SLEEP_US;
	struct pollfd p[2] = {
		{ .fd = v->chan->fd, .events = POLLIN },
		{ .fd = v->sock, .events = POLLIN | POLLRDHUP },
	};
	zl_rc_syscall(rc, 1);
	int n = poll(p, 2, zl_poll_ms(deadline < cap ? deadline : cap));
	if (n > 0 && p[1].revents)
		return -ECONNRESET;
	if (n > 0 && p[0].revents) {
		take_events(v, INT32_MAX);
		drain_rcq(v);
	}
	return rd_alive(rc);
}

static int rd_sock(struct zl_ringchan *rc) { return RD(rc)->sock; }

static int rd_fd(struct zl_ringchan *rc)
{
	struct rd_chan *v = RD(rc);
	if (v->epfd >= 0)
		return v->epfd;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return -errno;
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	struct epoll_event e1 = { .events = EPOLLIN, .data.fd = v->chan->fd };
	struct epoll_event e2 = { .events = EPOLLIN | EPOLLRDHUP, .data.fd = v->sock };
	struct epoll_event e3 = { .events = EPOLLIN, .data.fd = tfd };
	if (tfd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, v->chan->fd, &e1) ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, v->sock, &e2) || epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &e3)) {
		int e = -errno;
		close(ep);
		if (tfd >= 0)
			close(tfd);
		return e;
	}
	arm_cq(v, true);
	v->epfd = ep;
	v->tfd = tfd;
	return ep;
}

static void rd_free(struct rd_chan *v)
{
	if (v->qp)
		ibv_destroy_qp(v->qp);
	if (v->scq)
		ibv_destroy_cq(v->scq);
	if (v->rcq)
		ibv_destroy_cq(v->rcq);
	if (v->chan)
		ibv_destroy_comp_channel(v->chan);
	if (v->ring_mr)
		ibv_dereg_mr(v->ring_mr);
	if (v->ctl_mr)
		ibv_dereg_mr(v->ctl_mr);
	if (v->stage_mr)
		ibv_dereg_mr(v->stage_mr);
	if (v->dev)
		dev_put(v->dev);
	free(v->ring);
	free(v->stage);
	free(v->ctl);
	if (v->epfd >= 0)
		close(v->epfd);
	if (v->tfd >= 0)
		close(v->tfd);
	if (v->sock >= 0)
		close(v->sock);
	free(v);
}

static int os_post(struct rd_chan *v, struct ibv_send_wr *wr);

/* Before the queue pair goes, what we posted (the last records, the close
 * record) must have left: destroying a queue pair flushes its send queue,
 * and a process that exits right after zl_close would lose them (as TCP's
 * close does not: the kernel keeps sending). One signaled 0-byte WRITE;
 * RC completes in order, so its completion covers every request before
 * it. We wait for it while the queue makes progress (a completion, of the
 * requests signaled now and then, within the transport's own retry
 * budget, QP_TIMEOUT_US a try and QP_RETRIES retries, after which RC
 * itself fails the queue pair): a fixed bound
 * shorter than a recovery from lost packets would lose the stream's tail
 * on a slow or lossy link. 10 s in all at most (a peer that acknowledges
 * slowly on purpose); not at all for a peer that is gone (its end of the
 * side connection, looked at every millisecond): the WRITE would only
 * retry. */
static void drain_sq(struct rd_chan *v)
{
	/* (nor for a channel closed without lingering: a server dropping a
	 * stuck client must not wait on it) */
	if (!v->qp || v->qp_failed || v->rc.peer_closed || v->rc.err || v->rc.base.no_linger ||
	    sock_gone(v))
		return;
	struct ibv_send_wr wr = { .opcode = IBV_WR_RDMA_WRITE };
	wr.wr.rdma.remote_addr = v->peer.ctl_addr;
	wr.wr.rdma.rkey = v->peer.ctl_rkey;
	if (os_post(v, &wr))
		return;
	const int64_t budget = (QP_RETRIES + 1) * QP_TIMEOUT_US + 100000;
	int64_t start = zl_now_us(), look = start + 1000, deadline = start + budget;
	const int64_t cap = start + DRAIN_CAP_US; /* (a peer that acks slowly) */
	lock(v);
	uint64_t seen = v->completed;
	while (v->completed < v->os_target && !reap(v)) {
		int64_t now = zl_now_us();
		if (v->completed != seen) { /* progress: the budget starts again */
			seen = v->completed;
			deadline = now + budget < cap ? now + budget : cap;
		}
		if (now >= deadline)
			break;
		if (now < start + 1000) {
			zl_cpu_relax(); /* (the usual case: microseconds) */
			continue;
		}
		if (now >= look) {
			if (sock_gone(v))
				break;
			look = now + 1000;
		}
		unlock(v); /* (not held asleep: another thread's look spins on it) */
		usleep(100);
		lock(v);
	}
	unlock(v);
}

static void rd_destroy(struct zl_ringchan *rc)
{
	drain_sq(RD(rc));
	zl_ringchan_fini(rc);
	rd_free(RD(rc));
}

static void rd_info(const struct zl_ringchan *rc, struct zl_channel_info *info)
{
	struct rd_chan *v = RD(rc);
	struct zl_verbs_counts *c = &info->verbs;
	c->wr_posted = atomic_load_explicit(&v->n_wr, memory_order_relaxed);
	c->post_calls = atomic_load_explicit(&v->n_post, memory_order_relaxed);
	c->wr_signaled = atomic_load_explicit(&v->n_signaled, memory_order_relaxed);
	c->wr_inline = atomic_load_explicit(&v->n_inline, memory_order_relaxed);
	c->bytes_posted = atomic_load_explicit(&v->n_bytes, memory_order_relaxed);
	c->send_cq_polls = atomic_load_explicit(&v->n_scq_polls, memory_order_relaxed);
	c->recv_cq_polls = atomic_load_explicit(&v->n_rcq_polls, memory_order_relaxed);
	c->recv_post_calls = atomic_load_explicit(&v->n_recv_posts, memory_order_relaxed);
}

static const struct zl_ring_link_ops rd_link = {
	.name = "rdma",
	.poll_hard = true,
	.arm = rd_arm,
	.wake = rd_wake,
	.sleep = rd_sleep,
	.alive = rd_alive,
	.drain = rd_drain,
	.batch_begin = rd_batch_begin,
	.batch_end = rd_batch_end,
	.info = rd_info,
	.fd = rd_fd,
	.sock = rd_sock,
	.destroy = rd_destroy,
};

/* split: records are announced by receive completions */
static const struct zl_ring_link_ops rd_link_split = {
	.name = "rdma",
	.poll_hard = true,
	.rx_self_wake = true,
	.arm = rd_arm,
	.wake = rd_wake,
	.sleep = rd_sleep,
	.alive = rd_alive,
	.progress = rd_progress,
	.drain = rd_drain,
	.batch_begin = rd_batch_begin,
	.batch_end = rd_batch_end,
	.info = rd_info,
	.fd = rd_fd,
	.sock = rd_sock,
	.destroy = rd_destroy,
};

/* ---- one-sided access ------------------------------------------------------ */

static int reg(struct rd_chan *v, struct ibv_mr **mr, void *addr, size_t len, int access);

static int os_reg(zl_channel *ch, void *addr, size_t len, struct zl_rmem **out)
{
	struct rd_chan *v = RD(ch);
	struct zl_rmem *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	/* no remote access: peers get windows */
	int r = reg(v, &m->mr, addr, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	if (r) {
		free(m);
		return r;
	}
	pthread_mutex_lock(&devs_lock);
	v->dev->refs++;
	pthread_mutex_unlock(&devs_lock);
	m->dev = v->dev;
	*out = m;
	return 0;
}

static void os_dereg(struct zl_rmem *m)
{
	if (!m)
		return;
	ibv_dereg_mr(m->mr);
	dev_put(m->dev);
	free(m);
}

/* Bind a type-2 window on this QP and wait for the bind to complete. */
static int os_win_open(zl_channel *ch, struct zl_rmem *m, void *addr, uint32_t len,
		       int access, struct zl_win **out, struct zl_rwin *desc)
{
	struct rd_chan *v = RD(ch);
	uint8_t *a = addr, *base = m->mr->addr;
	if (m->dev != v->dev)
		return -EXDEV;
	if (a < base || len > m->mr->length || (size_t)(a - base) > m->mr->length - len)
		return -EINVAL;
	struct zl_win *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->mw = ibv_alloc_mw(v->pd, IBV_MW_TYPE_2);
	if (!w->mw) {
		ZL_LOG(ZL_LOG_INFO, "rdma: %s has no type-2 memory windows (%s)",
		       ibv_get_device_name(v->ctx->device), strerror(errno));
		free(w);
		return -EOPNOTSUPP;
	}
	struct ibv_send_wr wr = { .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED };
	wr.bind_mw.mw = w->mw;
	wr.bind_mw.rkey = ibv_inc_rkey(w->mw->rkey);
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){
		.mr = m->mr, .addr = (uintptr_t)addr, .length = len,
		.mw_access_flags = (access & ZL_WIN_WRITE ? IBV_ACCESS_REMOTE_WRITE : 0) |
				   (access & ZL_WIN_READ ? IBV_ACCESS_REMOTE_READ : 0) |
				   (access & ZL_WIN_ATOMIC ? IBV_ACCESS_REMOTE_ATOMIC : 0) };
	lock(v);
	int r = post_wr_locked(v, &wr);
	int64_t deadline = zl_now_us() + REAP_TIMEOUT_US;
	while (!r && v->completed < wr.wr_id) {
		r = reap(v);
		if (!r && zl_now_us() > deadline)
			r = -ETIMEDOUT;
	}
	unlock(v);
	if (r) {
		ZL_LOG(ZL_LOG_ERROR, "rdma: binding a memory window failed (%s)", zl_strerror(r));
		ibv_dealloc_mw(w->mw);
		free(w);
		return -ECONNRESET;
	}
	*desc = (struct zl_rwin){ .addr = (uintptr_t)addr, .rkey = wr.bind_mw.rkey, .len = len };
	*out = w;
	return 0;
}

static void os_win_close(struct zl_win *w)
{
	if (!w)
		return;
	ibv_dealloc_mw(w->mw);
	free(w);
}

static int os_write(zl_channel *ch, struct zl_rmem *m, const void *src, uint32_t len,
		    const struct zl_rwin *dst, uint32_t off)
{
	struct rd_chan *v = RD(ch);
	if (off > dst->len || len > dst->len - off)
		return -EINVAL;
	return post(v, IBV_WR_RDMA_WRITE, src, len, m->mr->lkey, dst->addr + off, dst->rkey, 0);
}

/* One signaled request of the one-sided store; os_sync waits for it. */
static int os_post(struct rd_chan *v, struct ibv_send_wr *wr)
{
	wr->send_flags |= IBV_SEND_SIGNALED;
	lock(v);
	int r = post_wr_locked(v, wr);
	if (!r)
		v->os_target = wr->wr_id;
	unlock(v);
	return r;
}

static int os_read(zl_channel *ch, struct zl_rmem *m, void *dst, uint32_t len,
		   const struct zl_rwin *src, uint64_t off)
{
	if (off > src->len || len > src->len - off || !len)
		return -EINVAL;
	struct ibv_sge sge = { .addr = (uintptr_t)dst, .length = len, .lkey = m->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_READ };
	wr.wr.rdma.remote_addr = src->addr + off;
	wr.wr.rdma.rkey = src->rkey;
	return os_post(RD(ch), &wr);
}

static int os_cas(zl_channel *ch, struct zl_rmem *m, uint64_t *old, const struct zl_rwin *dst,
		  uint64_t off, uint64_t expect, uint64_t swap)
{
	if (off % 8 || off > dst->len || dst->len - off < 8)
		return -EINVAL;
	struct ibv_sge sge = { .addr = (uintptr_t)old, .length = 8, .lkey = m->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_ATOMIC_CMP_AND_SWP };
	wr.wr.atomic.remote_addr = dst->addr + off;
	wr.wr.atomic.compare_add = expect;
	wr.wr.atomic.swap = swap;
	wr.wr.atomic.rkey = dst->rkey;
	return os_post(RD(ch), &wr);
}

static int os_sync(zl_channel *ch)
{
	struct rd_chan *v = RD(ch);
	int r = 0;
	lock(v);
	for (uint32_t spins = 0; !r && v->completed < v->os_target; spins++) {
		r = reap(v);
		if (!r && spins == 1024) { /* the emulator is slow: a deadline then */
			int64_t deadline = zl_now_us() + REAP_TIMEOUT_US;
			while (!r && v->completed < v->os_target) {
				r = reap(v);
				if (!r && zl_now_us() > deadline) {
					ZL_LOG(ZL_LOG_ERROR, "rdma: one-sided request stuck for 2 s");
					v->qp_failed = true;
					r = -ECONNRESET;
				}
			}
		}
	}
	unlock(v);
	return r;
}

static bool os_atomic_glob(zl_channel *ch)
{
	return RD(ch)->dev->atomic_glob;
}

static const struct zl_onesided_ops rd_onesided = {
	.reg = os_reg,
	.dereg = os_dereg,
	.win_open = os_win_open,
	.win_close = os_win_close,
	.write = os_write,
	.read = os_read,
	.cas = os_cas,
	.sync = os_sync,
	.atomic_glob = os_atomic_glob,
};

/* ---- setup ---------------------------------------------------------------- */

static int parse_params(const struct zl_url *u, struct rd_params *p)
{
	memset(p, 0, sizeof(*p));
	p->port = 1;
	p->gid_index = -1;
	p->order = -1;
	for (int i = 0; i < u->nparams; i++) {
		const char *k = u->params[i].key, *val = u->params[i].val;
		char *end;
		long x = strtol(val, &end, 10);
		bool num = *val && !*end;
		if (!strcmp(k, "dev") && strlen(val) < sizeof(p->dev))
			strcpy(p->dev, val);
		else if (!strcmp(k, "port") && num && x >= 1 && x <= 255)
			p->port = (int)x;
		else if (!strcmp(k, "gid_index") && num && x >= 0 && x < 65536)
			p->gid_index = (int)x;
		else if (!strcmp(k, "order") && !strcmp(val, "auto"))
			p->order = -1;
		else if (!strcmp(k, "order") && !strcmp(val, "single"))
			p->order = RD_SINGLE;
		else if (!strcmp(k, "order") && !strcmp(val, "split"))
			p->order = RD_SPLIT;
		else if (!strcmp(k, "order") && !strcmp(val, "split2"))
			p->order = RD_SPLIT2;
		else {
			if (!zl_opts_core_key(k)) {
				ZL_LOG(ZL_LOG_ERROR, "rdma: bad URL option %s=%s", k, val);
				return -EINVAL;
			}
		}
	}
	return 0;
}

/* RoCE v2 first, then an IPv4-mapped address. */
static int gid_score(const struct ibv_gid_entry *e)
{
	static const uint8_t v4map[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	return (e->gid_type == IBV_GID_TYPE_ROCE_V2) * 2 + !memcmp(e->gid.raw, v4map, 12);
}

/* A RoCE v2 GID with an IPv4-mapped address, else RoCE v2, else index 0. */
static int pick_gid(struct rd_chan *v, const struct rd_params *p, int tbl_len, union ibv_gid *gid)
{
	int best = -1, best_score = -1;
	/* the valid entries in one call (a query per index was a system call
	 * each: 1,024 of them per connection on rxe) */
	size_t cap = (size_t)tbl_len * 4;
	struct ibv_gid_entry *tbl = p->gid_index < 0 ? calloc(cap, sizeof(*tbl)) : NULL;
	ssize_t n = tbl ? ibv_query_gid_table(v->ctx, tbl, cap, 0) : -1;
	for (ssize_t i = 0; i < n; i++) {
		int score = gid_score(&tbl[i]);
		if (tbl[i].port_num == (uint32_t)p->port && score > best_score) {
			best = (int)tbl[i].gid_index;
			best_score = score;
		}
	}
	free(tbl);
	for (int i = 0; p->gid_index < 0 && n < 0 && i < tbl_len; i++) {
		struct ibv_gid_entry e;
		if (ibv_query_gid_ex(v->ctx, (uint8_t)p->port, (uint32_t)i, &e, 0))
			continue;
		int score = gid_score(&e);
		if (score > best_score) {
			best = i;
			best_score = score;
		}
	}
	int idx = p->gid_index >= 0 ? p->gid_index : best < 0 ? 0 : best;
	if (ibv_query_gid(v->ctx, (uint8_t)p->port, idx, gid))
		return -EINVAL;
	return idx;
}

static int reg(struct rd_chan *v, struct ibv_mr **mr, void *addr, size_t len, int access)
{
	*mr = ibv_reg_mr(v->pd, addr, len, access);
	if (*mr)
		return 0;
	int e = errno;
	struct rlimit rl;
	getrlimit(RLIMIT_MEMLOCK, &rl);
	ZL_LOG(ZL_LOG_ERROR,
	       "rdma: registering %zu bytes failed (%s); RLIMIT_MEMLOCK is %llu bytes: "
	       "raise it (ulimit -l, limits.conf) or use a smaller ring", len, strerror(e),
	       (unsigned long long)rl.rlim_cur);
	return -ENOMEM;
}

static void *alloc_zero(size_t len)
{
	void *p = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
	if (p)
		memset(p, 0, len);
	return p;
}

static int modify_qp(struct rd_chan *v, const struct rd_params *p, int gid_index,
		     enum ibv_mtu mtu, uint32_t my_psn)
{
	struct ibv_qp_attr a = { 0 };
	a.qp_state = IBV_QPS_INIT;
	a.port_num = (uint8_t)p->port;
	/* reads and atomics too: what a peer may touch is still only what
	 * our windows open (the one-sided store's chunk) */
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE |
			    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	if (ibv_modify_qp(v->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					     IBV_QP_ACCESS_FLAGS))
		return -errno;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu < (enum ibv_mtu)v->peer.mtu ? mtu : (enum ibv_mtu)v->peer.mtu;
	a.dest_qp_num = v->peer.qpn;
	a.rq_psn = v->peer.psn;
	a.max_dest_rd_atomic = v->dev->rd_atom;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	memcpy(a.ah_attr.grh.dgid.raw, v->peer.gid, 16);
	a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.dlid = v->peer.lid;
	a.ah_attr.port_num = (uint8_t)p->port;
	if (ibv_modify_qp(v->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -errno;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = QP_TIMEOUT_EXP;
	a.retry_cnt = QP_RETRIES;
	a.rnr_retry = 7;  /* wakeups may briefly find no receive posted */
	a.sq_psn = my_psn;
	a.max_rd_atomic = v->dev->rd_atom;
	if (ibv_modify_qp(v->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					     IBV_QP_MAX_QP_RD_ATOMIC))
		return -errno;
	return 0;
}

static int check_info(const struct rd_info *i, const struct zl_opts *o)
{
	if (i->magic != RD_MAGIC || i->info_size != sizeof(*i)) {
		ZL_LOG(ZL_LOG_ERROR, "rdma: malformed handshake");
		return -EPROTO;
	}
	if (i->version != ZL_PROTO_VERSION) {
		ZL_LOG(ZL_LOG_ERROR, "rdma: peer speaks protocol %u, we speak %u", i->version,
		       ZL_PROTO_VERSION);
		return -EPROTO;
	}
	if (i->status)
		return i->status < 0 && i->status > -4096 ? i->status : -EPROTO;
	if (i->ring_size < 4096 || i->ring_size > (1u << 30) ||
	    (i->ring_size & (i->ring_size - 1)) || (i->mode & ~RD_MODE_NIMM) > RD_SPLIT ||
	    i->mtu < IBV_MTU_256 || i->mtu > IBV_MTU_4096 || i->qpn == 0 || i->qpn > 0xffffff) {
		ZL_LOG(ZL_LOG_ERROR, "rdma: handshake with bad parameters");
		return -EPROTO;
	}
	if (i->ring_size > o->max_peer_ring) { /* we would stage a copy of it */
		ZL_LOG(ZL_LOG_ERROR, "rdma: refusing a peer ring of %u bytes (max_peer_ring %u)",
		       i->ring_size, o->max_peer_ring);
		return -EMSGSIZE;
	}
	return 0;
}

/* Build everything over the connected side channel sock, up to our ready
 * word; the peer's is awaited by the caller, then finish_setup. */
static int setup(struct rd_chan *v, const struct rd_params *p, const struct zl_opts *o,
		 int64_t deadline)
{
	struct ibv_port_attr pa;
	union ibv_gid gid;
	int r = dev_get(p->dev, &v->dev);
	if (r)
		return r;
	v->ctx = v->dev->ctx;
	v->pd = v->dev->pd;
	if (ibv_query_port(v->ctx, (uint8_t)p->port, &pa) || pa.state != IBV_PORT_ACTIVE) {
		ZL_LOG(ZL_LOG_ERROR, "rdma: port %d of %s is not active", p->port,
		       ibv_get_device_name(v->ctx->device));
		return -ENETDOWN;
	}
	int gid_index = pick_gid(v, p, pa.gid_tbl_len, &gid);
	if (gid_index < 0)
		return -EINVAL;
	v->chan = ibv_create_comp_channel(v->ctx);
	if (!v->chan)
		return -ENOMEM;
	fcntl(v->chan->fd, F_SETFL, fcntl(v->chan->fd, F_GETFL) | O_NONBLOCK);
	v->scq = ibv_create_cq(v->ctx, SQ_DEPTH, NULL, NULL, 0);
	v->rcq = ibv_create_cq(v->ctx, RQ_DEPTH + 16, NULL, v->chan, 0);
	if (!v->scq || !v->rcq)
		return -ENOMEM;
	struct ibv_qp_init_attr qa = { .send_cq = v->scq, .recv_cq = v->rcq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = SQ_DEPTH, .max_recv_wr = RQ_DEPTH,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	for (uint32_t want = WANT_INLINE; !v->qp; want /= 4) {
		qa.cap.max_inline_data = want;
		v->qp = ibv_create_qp(v->pd, &qa);
		if (!want)
			break;
	}
	if (!v->qp)
		return -errno ? -errno : -ENOMEM;
	v->max_inline = qa.cap.max_inline_data;

	uint32_t ring_size = o->ring_size;
	v->ring = alloc_zero(ring_size);
	v->ctl = alloc_zero(sizeof(*v->ctl));
	if (!v->ring || !v->ctl)
		return -ENOMEM;
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	if ((r = reg(v, &v->ring_mr, v->ring, ring_size, acc)) ||
	    (r = reg(v, &v->ctl_mr, v->ctl, sizeof(*v->ctl), acc)))
		return r;

	int in_order = ibv_query_qp_data_in_order(v->qp, IBV_WR_RDMA_WRITE, 0);
	uint8_t my_mode = p->order >= 0 ? (uint8_t)p->order
			  : in_order == 1 ? RD_SINGLE : RD_SPLIT;
	uint64_t key;
	uint32_t psn;
	if (getrandom(&key, 8, 0) != 8 || getrandom(&psn, 4, 0) != 4)
		return -EIO;
	key = zl_ring_key(key);
	v->key = key;
	psn &= 0xffffff;

	struct rd_info me = { .magic = RD_MAGIC, .version = ZL_PROTO_VERSION,
			      .info_size = sizeof(me), .qpn = v->qp->qp_num, .psn = psn,
			      .lid = pa.lid, .mtu = (uint8_t)pa.active_mtu,
			      .mode = my_mode | RD_MODE_NIMM,
			      .ring_addr = (uintptr_t)v->ring, .ring_rkey = v->ring_mr->rkey,
			      .ring_size = ring_size, .ctl_addr = (uintptr_t)v->ctl,
			      .ctl_rkey = v->ctl_mr->rkey, .max_inline = v->max_inline,
			      .key = key, .max_msg = o->max_msg };
	memcpy(me.gid, gid.raw, 16);
	if ((r = zl_write_full(v->sock, &me, sizeof(me), deadline)) ||
	    (r = zl_read_full(v->sock, &v->peer, sizeof(v->peer), deadline)))
		return r == -ECONNRESET ? -EPROTO : r;
	if ((r = check_info(&v->peer, o))) {
		uint32_t nak = RD_NAK | (uint32_t)(-r & 0xffff);
		zl_write_full(v->sock, &nak, 4, deadline);
		return r;
	}
	v->tx_mode = v->peer.mode & ~RD_MODE_NIMM;
	v->tx_nimm = v->peer.mode & RD_MODE_NIMM;
	v->rx_mode = my_mode;
	v->stage = alloc_zero(v->peer.ring_size);
	if (!v->stage)
		return -ENOMEM;
	if ((r = reg(v, &v->stage_mr, v->stage, v->peer.ring_size, IBV_ACCESS_LOCAL_WRITE)) ||
	    (r = modify_qp(v, p, gid_index, pa.active_mtu, psn)) || (r = post_recvs(v, RQ_DEPTH)))
		return r;
	/* neither side may WRITE before the other's QP is ready to receive */
	uint32_t ready = RD_MAGIC;
	if ((r = zl_write_full(v->sock, &ready, 4, deadline)))
		return r;

	char gs[INET6_ADDRSTRLEN];
	inet_ntop(AF_INET6, gid.raw, gs, sizeof(gs));
	ZL_LOG(ZL_LOG_INFO,
	       "rdma: %s port %d gid[%d] %s mtu %d inline %u; receive %s (in-order placement: %s), "
	       "send %s", ibv_get_device_name(v->ctx->device), p->port, gid_index, gs,
	       128 << pa.active_mtu, v->max_inline,
	       mode_name[my_mode], in_order == 1 ? "yes" : "no", mode_name[v->tx_mode]);
	return 0;
}

/* The peer's ready word (or its refusal) came: make the channel. */
static int finish_setup(struct rd_chan *v, const struct zl_opts *o, uint32_t theirs)
{
	if (theirs != RD_MAGIC) {
		int e = (theirs & 0xffff0000u) == RD_NAK ? (int)(theirs & 0xffff) : 0;
		return e == EMSGSIZE || e == EPERM || e == EPROTO ? -e : -EPROTO;
	}
	uint8_t my_mode = v->rx_mode;
	struct zl_ringchan *rc = &v->rc;
	rc->link = my_mode == RD_SPLIT ? &rd_link_split : &rd_link;
	zl_ring_tx_init(&rc->tx, v->stage, v->peer.ring_size, v->peer.key, &v->ctl->rpos,
			rd_push, v);
	zl_ring_tx_set_layout(&rc->tx, v->tx_mode == RD_SPLIT2 ? ZL_LAYOUT_TAG_FIRST
							       : ZL_LAYOUT_LEN_FIRST);
	rc->tx.peer_rpos_check = &v->ctl->rpos_check;
	zl_ring_rx_init(&rc->rx, v->ring, o->ring_size, v->key, o->rpos_every, NULL, NULL);
	zl_ring_rx_set_layout(&rc->rx, my_mode == RD_SPLIT2 ? ZL_LAYOUT_TAG_FIRST
							     : ZL_LAYOUT_LEN_FIRST,
			      my_mode != RD_SINGLE);
	if (my_mode == RD_SPLIT)
		rc->rx.avail = &v->avail;
	rc->peer_rx_sleeping = &v->ctl->rx_sleeping;
	rc->peer_tx_sleeping = &v->ctl->tx_sleeping;
	rc->publish_rpos = rd_publish;
	zl_ringchan_init(rc, o, v->peer.max_msg, "rdma");
	rc->base.os = &rd_onesided;
	snprintf(rc->stats.mode, sizeof(rc->stats.mode), "%s", mode_name[my_mode]);
	return 0;
}

static struct rd_chan *chan_new(int sock)
{
	struct rd_chan *v = calloc(1, sizeof(*v));
	if (!v) {
		close(sock);
		return NULL;
	}
	v->sock = sock;
	v->epfd = -1;
	v->tfd = -1;
	atomic_flag_clear(&v->lock);
	atomic_flag_clear(&v->rq_lock);
	return v;
}

static int make_chan(int sock, const struct rd_params *p, const struct zl_opts *o,
		     int64_t deadline, zl_channel **out)
{
	struct rd_chan *v = chan_new(sock);
	if (!v)
		return -ENOMEM;
	uint32_t theirs = 0;
	int r = setup(v, p, o, deadline);
	if (!r)
		r = zl_read_full(v->sock, &theirs, 4, deadline);
	if (!r)
		r = finish_setup(v, o, theirs);
	if (r) {
		rd_free(v);
		return r;
	}
	*out = &v->rc.base;
	return 0;
}

/* ---- listener and connect ----------------------------------------------- */

static int rd_listener_fd(const zl_listener *l) { return ((const struct rd_listener *)l)->fd; }

static int rd_listener_url(const zl_listener *l, char *buf, size_t cap)
{
	char hp[128];
	int r = zl_sock_name(((const struct rd_listener *)l)->fd, hp, sizeof(hp));
	if (r)
		return r;
	int n = snprintf(buf, cap, "rdma://%s", hp);
	return n < 0 || (size_t)n >= cap ? -ENOSPC : 0;
}

static void rd_listener_close(zl_listener *l)
{
	struct rd_listener *rl = (struct rd_listener *)l;
	close(rl->fd);
	free(rl);
}

static int rd_take(zl_listener *l) { return zl_sock_take(((struct rd_listener *)l)->fd, 1); }

static int rd_ready(zl_listener *l, int fd)
{
	(void)l;
	uint32_t magic = RD_MAGIC;
	return zl_sock_ready(fd, sizeof(struct rd_info), &magic, sizeof(magic));
}

/* Answer the peer, then leave its ready word to complete (zl_accept and
 * zl_server never wait for it). */
static int rd_finish(zl_listener *l, int fd, zl_channel **out, void **half, int *wfd)
{
	struct rd_listener *rl = (struct rd_listener *)l;
	struct rd_chan *v = chan_new(fd);
	if (!v)
		return -ENOMEM;
	int r = setup(v, &rl->params, &rl->opts, zl_now_us() + rl->opts.handshake_timeout_us);
	if (r) {
		rd_free(v);
		return r;
	}
	*half = v;
	*wfd = v->sock;
	return -EINPROGRESS;
}

static int rd_complete(zl_listener *l, void *half, zl_channel **out)
{
	struct rd_chan *v = half;
	uint32_t theirs;
	ssize_t n = recv(v->sock, &theirs, 4, MSG_PEEK | MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return -EAGAIN;
	if (n > 0 && n < 4)
		return -EAGAIN;
	int r = n == 4 && recv(v->sock, &theirs, 4, MSG_DONTWAIT) == 4
			? finish_setup(v, &((struct rd_listener *)l)->opts, theirs)
			: -ECONNRESET;
	if (r) {
		rd_free(v);
		return r;
	}
	*out = &v->rc.base;
	return 0;
}

static void rd_abort(zl_listener *l, void *half) { rd_free(half); }

static const struct zl_listener_ops rd_listener_ops = {
	.take = rd_take,
	.ready = rd_ready,
	.finish = rd_finish,
	.complete = rd_complete,
	.abort = rd_abort,
	.fd = rd_listener_fd,
	.url = rd_listener_url,
	.close = rd_listener_close,
};

/* 0 if the device (the first one, unnamed) is there, else -ENODEV: a
 * listener or a connection fails at once on a host without it. */
static int dev_present(const char *want)
{
	int n = 0, found = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n && !found; i++)
		found = !want[0] || !strcmp(ibv_get_device_name(list[i]), want);
	if (list)
		ibv_free_device_list(list);
	if (found)
		return 0;
	ZL_LOG(ZL_LOG_ERROR, "rdma: %s%s", want[0] ? "no RDMA device named " : "no RDMA devices",
	       want);
	return -ENODEV;
}

static int rd_listen(const struct zl_url *u, const struct zl_opts *o, zl_listener **out)
{
	struct rd_params p;
	int r = parse_params(u, &p);
	if (r)
		return r;
	if (!u->port[0])
		return -EINVAL;
	if ((r = dev_present(p.dev)))
		return r;
	struct rd_listener *rl = calloc(1, sizeof(*rl));
	if (!rl)
		return -ENOMEM;
	rl->fd = zl_tcp_listen(u->host, u->port);
	if (rl->fd < 0) {
		r = rl->fd;
		free(rl);
		return r;
	}
	rl->base.ops = &rd_listener_ops;
	rl->opts = *o;
	rl->params = p;
	*out = &rl->base;
	return 0;
}

static int rd_connect(const struct zl_url *u, const struct zl_opts *o, int64_t timeout_us,
		      zl_channel **out)
{
	struct rd_params p;
	int r = parse_params(u, &p);
	if (r)
		return r;
	if (!u->host[0] || !u->port[0])
		return -EINVAL;
	if ((r = dev_present(p.dev)))
		return r;
	int64_t deadline = zl_deadline(timeout_us);
	int s = zl_tcp_connect(u->host, u->port, deadline);
	if (s < 0)
		return s;
	int64_t hs = zl_now_us() + o->handshake_timeout_us;
	return make_chan(s, &p, o, hs < deadline ? hs : deadline, out);
}

const struct zl_transport zl_transport_rdma = {
	.scheme = "rdma",
	.listen = rd_listen,
	.connect = rd_connect,
};

/* The preload's cross-host switch (src/preload/xhost.c, which finds this
 * with dlsym): an rdma channel set up over a TCP connection the caller
 * made and vetted itself, both ends calling this at once (the setup is
 * symmetric). The socket stays the channel's liveness signal, as on an
 * rdma:// connection; it is closed on failure. dev "": the first device. */
ZL_API int zl_rdma_over_socket(int sock, const char *dev, uint32_t ring_size, int64_t timeout_us,
			       zl_channel **out);
ZL_API int zl_rdma_over_socket(int sock, const char *dev, uint32_t ring_size, int64_t timeout_us,
			       zl_channel **out)
{
	struct rd_params p = { .port = 1, .gid_index = -1, .order = -1 };
	struct zl_opts o;
	zl_opts_init(&o);
	o.ring_size = ring_size;
	if (!out || !dev || strlen(dev) >= sizeof(p.dev) || zl_opts_check(&o)) {
		close(sock);
		return -EINVAL;
	}
	strcpy(p.dev, dev);
	return make_chan(sock, &p, &o, zl_deadline(timeout_us), out);
}
