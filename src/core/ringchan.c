/* SPDX-License-Identifier: MIT */
/*
 * Channel operations over two rings.
 *
 * No lost wake-up (the argument; ringchan.h has the protocol). A receiver
 * about to sleep (R) and a sender (S) each make one store and then one
 * load of the other's location:
 *   R: sleeping = 1; FENCE_R; look at the ring     (arm, then re-check)
 *   S: write the record; FENCE_S; look at sleeping (notify_rx)
 * With a full fence on both sides, at least one of the loads sees the other
 * side's store: either R finds the record and does not sleep, or S finds
 * the flag and wakes R (store buffering is excluded by the fences). The
 * sleep itself cannot miss a wake-up sent after the arm: the wake is a
 * record on a socket (or a completion event), which stays readable until
 * drained, and we drain before we arm, never between arm and sleep.
 *
 * Which fences. A sender runs FENCE_S for every message, a receiver FENCE_R
 * only before it sleeps, so three modes, chosen per direction:
 *  - plain: both are atomic_thread_fence (rdma, or membarrier(2) missing);
 *  - asym (both processes registered for membarrier): FENCE_S is a compiler
 *    barrier and FENCE_R is membarrier(GLOBAL_EXPEDITED), which runs a
 *    full barrier on every CPU running either process. Right for a receiver
 *    that sleeps rarely: the sender pays nothing.
 *  - sym on request: a receiver that sleeps often (an event loop: fd mode
 *    or manual arming) asks the sender to fence every send (sym_req in
 *    memory the sender reads); once the sender has seen the request it
 *    answers (sym_ack) and from its next send on uses a thread fence. Until
 *    the receiver reads the answer it keeps using membarrier, so the
 *    switch is safe: the send during which the sender saw the request
 *    completed before it stored the answer (release), so a receiver that
 *    read the answer (acquire) sees that send's record when it re-checks,
 *    and every later send fences. A membarrier costs 0.6 us when the
 *    sender's CPU idles and ~10 us when it spins; a fence per send costs
 *    tens of nanoseconds.
 * A peer that lies in its answer can only lose wake-ups for its own
 * messages to us (the same as not sending them); every wait has a deadline.
 *
 * Arming only when about to sleep: a blocking call arms at the end of its
 * spin. In fd mode an empty zl_recv(..., 0) arms (the zl_channel_fd
 * contract); once the owner called zl_channel_arm (or zl_poller, or
 * zl_server, through settle) the channel is in manual mode and an empty
 * poll costs nothing: the owner arms right before it sleeps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "ringchan.h"

#define RC(ch) ((struct zl_ringchan *)(ch))
#define ALIVE_EVERY_US 1000  /* liveness check period while waiting */
#define ALIVE_EVERY_OPS 1024 /* ... and every so many sends or empty polls */
#define CLOSE_LINGER_US 100000
/* Spin polls before the first clock read of a wait and between later ones;
 * where the clock is slow (zl_clock_slow) both grow, or the reads would take
 * a large share of a spin: in the Soft-RoCE VM a read costs as much as a
 * thousand polls, and reading at the 64th poll of every wait cost 4% of an
 * RDMA round trip. */
#define CLOCK_FIRST 64
#define CLOCK_EVERY 1024
#define CLOCK_FIRST_SLOW 1024
#define CLOCK_EVERY_SLOW 4096
/* zl_send of messages up to this size, and zl_recv of any whole message,
 * try a short path first: one copy into or out of the ring, none of the
 * fragment, reservation or wait machinery (it cost a third of a 64-byte
 * round trip). Larger sends fill the header's line last (put). */
#define SMALL_MSG (2 * ZL_CACHELINE)
/* Polls zl_recv and zl_recv_peek make on their short paths before the wait
 * policy starts (a few microseconds at most, 8 times as many without PAUSE;
 * not when spin_us is below SMALL_SPIN_MIN_US). */
#define SMALL_POLLS 128
#define SMALL_SPIN_MIN_US 10

typedef int (*cond_fn)(struct zl_ringchan *rc, size_t arg);

/*
 * The two fences of the wakeup protocol. With rc->asym (both processes
 * registered for membarrier), the side that makes progress, which runs for
 * every message, needs only a compiler barrier, and the side about to
 * sleep, which is slow anyway, makes every CPU running either process
 * execute a full barrier (membarrier(2), MEMBARRIER_CMD_GLOBAL_EXPEDITED).
 */
static inline void fast_fence(struct zl_ringchan *rc)
{
	if (rc->asym)
		atomic_signal_fence(memory_order_seq_cst);
	else
		atomic_thread_fence(memory_order_seq_cst);
}

/* The arming side's fence (TX: waiting for room, which is rare). */
static void slow_fence(struct zl_ringchan *rc, uint64_t *fences)
{
	if (rc->asym) {
		(*fences)++;
		zl_rc_syscall(rc, 1);
		if (!zl_membarrier_global())
			return;
	}
	atomic_thread_fence(memory_order_seq_cst);
}

/* FENCE_R: a receiver about to sleep. */
static void rx_fence(struct zl_ringchan *rc)
{
	if (rc->asym && !rc->rx_sym && rc->sym_ack &&
	    atomic_load_explicit(rc->sym_ack, memory_order_acquire))
		rc->rx_sym = true;
	if (rc->rx_sym)
		atomic_thread_fence(memory_order_seq_cst);
	else
		slow_fence(rc, &rc->rx_fences);
}

/* From now on this side sleeps often: ask the sender for FENCE_S per send. */
static void want_sym(struct zl_ringchan *rc)
{
	if (rc->asym && rc->sym_req && !atomic_load_explicit(rc->sym_req, memory_order_relaxed))
		atomic_store_explicit(rc->sym_req, 1, memory_order_relaxed);
}

/* Answer the peer's request (see the top of this file). */
static ZL_NOINLINE void become_sym(struct zl_ringchan *rc)
{
	rc->tx_sym = true;
	atomic_store_explicit(rc->peer_sym_ack, 1, memory_order_release);
}

static inline void poll_relax(struct zl_ringchan *rc)
{
	if (!rc->link->poll_hard)
		zl_cpu_relax();
}

static int fail(struct zl_ringchan *rc, int err)
{
	if (!rc->err) {
		rc->err = err;
		ZL_LOG(ZL_LOG_ERROR, "%s channel failed: %s", rc->stats.transport,
		       zl_strerror(err));
	}
	return err;
}

/* Error to report for a call on a channel that cannot carry data. */
static int state_err(struct zl_ringchan *rc)
{
	if (rc->err == -EPROTO) {
		rc->err = -EPIPE; /* report the violation once, then "failed" */
		return -EPROTO;
	}
	return rc->err;
}

/* After publishing our read position: fence against the sender's
 * arm-then-recheck (it waits for room), then wake it if it sleeps. wakeups:
 * the counter of the thread calling (send or receive side). */
static inline bool notify_tx(struct zl_ringchan *rc, uint64_t *wakeups)
{
	fast_fence(rc);
	uint32_t f = atomic_load_explicit(rc->peer_tx_sleeping, memory_order_relaxed);
	if (f && (f = atomic_exchange_explicit(rc->peer_tx_sleeping, 0, memory_order_relaxed)) &&
	    f != ZL_TX_DEMAND) {
		(*wakeups)++;
		rc->link->wake(rc, ZL_DIR_TX);
		return true;
	}
	return false;
}

/* The sending side answers the peer's demand for our read position, after
 * each send and while it waits for room itself: the peer may be waiting
 * for room while our receive side makes no call (two ends both in zl_send
 * would otherwise wait for each other's lazily published positions until
 * their deadlines). It publishes what the receive side has finished with
 * (rx.done) as a maximum, so it never undoes a newer publication of the
 * receive thread. */
static ZL_NOINLINE void rpos_from_tx(struct zl_ringchan *rc)
{
	rc->publish_rpos_max(rc, atomic_load_explicit(&rc->rx.done, memory_order_acquire));
	notify_tx(rc, &rc->stats.wakeups_sent);
}

static inline void serve_rpos_from_tx(struct zl_ringchan *rc)
{
	if (rc->publish_rpos_max &&
	    ZL_UNLIKELY(atomic_load_explicit(rc->peer_tx_sleeping, memory_order_relaxed)))
		rpos_from_tx(rc);
}

/* After a record: fence against the receiver's arm-then-recheck, then wake
 * it if it sleeps. */
static inline void notify_rx(struct zl_ringchan *rc)
{
	if (rc->asym && !rc->tx_sym)
		atomic_signal_fence(memory_order_seq_cst);
	else
		atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(rc->peer_rx_sleeping, memory_order_relaxed) &&
	    atomic_exchange_explicit(rc->peer_rx_sleeping, 0, memory_order_relaxed)) {
		rc->stats.wakeups_sent++;
		rc->link->wake(rc, ZL_DIR_RX);
	}
	if (ZL_UNLIKELY(rc->asym && !rc->tx_sym &&
			atomic_load_explicit(rc->peer_sym_req, memory_order_relaxed)))
		become_sym(rc);
	serve_rpos_from_tx(rc);
}

static void core_publish(void *ctx, uint64_t rpos)
{
	struct zl_ringchan *rc = ctx;
	rc->publish_rpos(rc, rpos);
	rc->rpos_answered = notify_tx(rc, &rc->rx_wakeups_sent);
}

void zl_ringchan_init(struct zl_ringchan *rc, const struct zl_opts *o, uint64_t peer_max_msg,
		      const char *transport)
{
	rc->send_max = peer_max_msg ? peer_max_msg : o->max_msg;
	rc->base.ops = &zl_ringchan_ops;
	atomic_flag_clear(&rc->tx_lock);
	rc->opts = *o;
	rc->rx.publish = core_publish;
	rc->rx.ctx = rc;
	uint32_t mf = zl_ring_max_payload(rc->tx.size) / 2;
	rc->max_frag = mf & ~7u;
	snprintf(rc->stats.transport, sizeof(rc->stats.transport), "%s", transport);
	rc->stats.ring_size = rc->tx.size;
	rc->stats.max_msg = o->max_msg;
	bool slow = zl_clock_slow();
	rc->clock_first = slow ? CLOCK_FIRST_SLOW : CLOCK_FIRST;
	rc->clock_every = slow ? CLOCK_EVERY_SLOW : CLOCK_EVERY;
}

void zl_ringchan_fini(struct zl_ringchan *rc)
{
	free(rc->pend);
	free(rc->asm_buf);
	rc->pend = rc->asm_buf = NULL;
}

/* Place one record without telling the receiver (put, zl_sendv); -EAGAIN
 * when there is no room. FIRST records carry the total message length in
 * their first 8 bytes. */
static int put_rec(struct zl_ringchan *rc, const void *p, uint32_t n, uint8_t type,
		   uint64_t total)
{
	void *dst;
	uint32_t rl = n + (type == ZL_REC_FIRST ? 8u : 0u);
	int r = zl_ring_tx_reserve(&rc->tx, rl, type, &dst);
	if (r)
		return r == -EAGAIN ? r : fail(rc, r);
	if (type == ZL_REC_FIRST) {
		memcpy(dst, &total, 8);
		dst = (uint8_t *)dst + 8;
	}
	/* The receiver spins on the header's cache line: fill the rest of the
	 * record first and that line last, so it crosses to us only once. */
	uintptr_t line_end = ((uintptr_t)dst - 8 - (type == ZL_REC_FIRST ? 8u : 0u)) | (ZL_CACHELINE - 1);
	uint32_t head = line_end + 1 > (uintptr_t)dst ? (uint32_t)(line_end + 1 - (uintptr_t)dst) : 0;
	if (n > 2 * ZL_CACHELINE && n > head) {
		memcpy((uint8_t *)dst + head, (const uint8_t *)p + head, n - head);
		memcpy(dst, p, head);
	} else if (n) {
		memcpy(dst, p, n);
	}
	r = zl_ring_tx_commit(&rc->tx, rl);
	return r ? fail(rc, r) : 0;
}

/* Place one record and tell the receiver. */
static int put(struct zl_ringchan *rc, const void *p, uint32_t n, uint8_t type, uint64_t total)
{
	int r = put_rec(rc, p, n, type, total);
	if (!r)
		notify_rx(rc);
	return r;
}

static int check_alive(struct zl_ringchan *rc)
{
	if (!rc->peer_closed && rc->link->alive(rc)) {
		ZL_LOG(ZL_LOG_INFO, "%s peer went away", rc->stats.transport);
		rc->peer_closed = true;
	}
	return rc->peer_closed ? -ECONNRESET : 0;
}

/* The sender short of room raised its flag: give it our read position.
 * Without fences between the two ends (a link without demand: rdma), its
 * flag and our last publication can cross in flight, each missing the
 * other; so a flag that shows up with nothing new to publish still gets a
 * wake-up, once per publication (the sender then sees that publication:
 * the wake-up comes after it on the one connection). */
static inline void serve_rpos_demand(struct zl_ringchan *rc)
{
	if (!atomic_load_explicit(rc->peer_tx_sleeping, memory_order_relaxed))
		return;
	if (rc->rx.published != rc->rx.rpos)
		zl_ring_publish_now(&rc->rx);
	else if (!rc->link->demand && !rc->rpos_answered)
		rc->rpos_answered = notify_tx(rc, &rc->rx_wakeups_sent);
}

/*
 * Deadlines are anchored lazily: a wait that succeeds within its first
 * polls (the common case on a hot channel) never reads the clock. A
 * deadline is 0 (poll once), ZL_NEVER, an absolute zl_now_us() time, or,
 * before anchoring, -timeout - 2.
 */
#define LAZY_MAX (INT64_MAX / 4)

static int64_t deadline_of(int64_t timeout_us)
{
	if (timeout_us == 0)
		return 0;
	if (timeout_us < 0 || timeout_us > LAZY_MAX)
		return ZL_NEVER;
	return -timeout_us - 2;
}

static inline void anchor(int64_t *dl, int64_t now)
{
	if (*dl < 0)
		*dl = now + (-*dl - 2);
}

/* Arm one direction and fence (the first half of FENCE_R or the TX
 * equivalent); 0 or the channel's failure. */
static int arm_dir(struct zl_ringchan *rc, enum zl_dir d)
{
	int r = rc->link->arm(rc, d);
	if (r)
		return fail(rc, r);
	if (d == ZL_DIR_RX) {
		rc->rx_arms++;
		rc->rx_armed = true;
		rx_fence(rc);
	} else {
		rc->stats.arms++;
		slow_fence(rc, &rc->stats.fences);
	}
	return 0;
}

/* Before an RX arm: publish what we consumed, which a sender waiting for
 * room may need while we sleep. Where its TX arm wakes us (rx_self_wake),
 * only when it asks: we wake and publish when it does. */
static inline void rpos_before_sleep(struct zl_ringchan *rc)
{
	if (zl_rc_self_woken(rc))
		serve_rpos_demand(rc);
	else
		zl_ring_rx_flush_rpos(&rc->rx);
}

/* Publish what we consumed (a sleeping receiver owes it), then arm RX. */
static int arm_rx(struct zl_ringchan *rc)
{
	rpos_before_sleep(rc);
	return arm_dir(rc, ZL_DIR_RX);
}

/* The owner arms before it sleeps (zl_channel_arm, zl_poller, zl_server):
 * empty polls no longer arm, and the sender is asked for a fence per send. */
static void enter_manual(struct zl_ringchan *rc)
{
	rc->manual_arm = true;
	want_sym(rc);
}

/* Take pending RX wake-ups; a drain that saw the peer leave marks it. */
static void drain_rx(struct zl_ringchan *rc)
{
	rc->rx_armed = false;
	if (rc->link->drain(rc))
		rc->peer_closed = true;
}

/* Before arming: wake-ups can be pending only if we armed since the last
 * drain (a peer answers an arm), or the fd was seen readable (woken: also
 * records a hostile peer sent unasked, and the peer's end). */
static inline void drain_if_due(struct zl_ringchan *rc, bool woken)
{
	if (woken || rc->rx_armed)
		drain_rx(rc);
}

/*
 * The wait policy: test cond; spin up to spin_us (checking liveness and
 * serving read-position demand now and then); then arm, re-test and sleep
 * until woken; repeat until the deadline.
 */
static int wait_for(struct zl_ringchan *rc, enum zl_dir d, int64_t *dl, cond_fn cond,
		    size_t arg)
{
	int r = cond(rc, arg);
	if (r != -EAGAIN)
		return r;
	/* Read positions are published lazily, so a sender short of room
	 * asks for one before it waits: a demand where the link has one (no
	 * fence: it spins and looks again), else an arm. */
	if (d == ZL_DIR_TX) {
		if (rc->link->demand)
			rc->link->demand(rc);
		else if ((r = arm_dir(rc, d)))
			return r;
		if ((r = cond(rc, arg)) != -EAGAIN)
			return r;
	}
	if (*dl == 0) {
		if (d == ZL_DIR_RX) {
			rpos_before_sleep(rc);
			/* make the fd fire on the next record; in manual mode the
			 * owner drains and arms (zl_channel_arm) before it sleeps */
			if (rc->fd_mode && !rc->manual_arm) {
				drain_if_due(rc, false);
				if ((r = arm_dir(rc, d)))
					return r;
				if ((r = cond(rc, arg)) != -EAGAIN)
					return r;
			}
		}
		/* fd mode: a dead peer keeps the fd readable, so look every time;
		 * in manual mode an empty poll makes no system call: the owner's
		 * arm (its drain) and the fd see the peer's end */
		if (rc->manual_arm)
			return -ETIMEDOUT;
		if (rc->fd_mode || ++rc->ops_since_check >= ALIVE_EVERY_OPS) {
			rc->ops_since_check = 0;
			if (check_alive(rc))
				return cond(rc, arg);
		}
		return -ETIMEDOUT;
	}
	int64_t spin = rc->opts.spin_us, now = 0, spin_end = -1, next_check = 0;
	for (;;) {
		for (uint32_t i = 1;; i++) {
			poll_relax(rc);
			if ((r = cond(rc, arg)) != -EAGAIN)
				return r;
			if (i % 64)
				continue;
			if (d == ZL_DIR_RX)
				serve_rpos_demand(rc);
			else
				serve_rpos_from_tx(rc);
			/* The clock is read rarely: where the clocksource is not the
			 * TSC (an emulator's HPET), a read costs microseconds. */
			if (spin_end >= 0 ? i % rc->clock_every : i < rc->clock_first)
				continue;
			now = zl_now_us();
			if (spin_end < 0) { /* the first look at the clock in this wait */
				anchor(dl, now);
				spin_end = spin < 0 || now + spin > *dl ? *dl : now + spin;
				next_check = now + ALIVE_EVERY_US;
			}
			if (now >= next_check) {
				next_check = now + ALIVE_EVERY_US;
				if (check_alive(rc))
					return cond(rc, arg);
			}
			if (now >= spin_end)
				break;
		}
		if (now >= *dl)
			return -ETIMEDOUT;
		/* publish before the fence: a sender that raised its flag after
		 * our fence then sees our position (the fences order us) */
		if (d == ZL_DIR_RX)
			rpos_before_sleep(rc);
		else
			serve_rpos_from_tx(rc);
		if ((r = arm_dir(rc, d)))
			return r;
		if ((r = cond(rc, arg)) != -EAGAIN)
			return r;
		if (d == ZL_DIR_RX)
			rc->rx_sleeps++;
		else
			rc->stats.sleeps++;
		if (rc->link->sleep(rc, d, *dl)) {
			rc->peer_closed = true;
			return cond(rc, arg);
		}
		now = zl_now_us();
		if (now >= *dl)
			return (r = cond(rc, arg)) != -EAGAIN ? r : -ETIMEDOUT;
		spin_end = spin < 0 || now + spin > *dl ? *dl : now + spin;
	}
}

static inline int timeout_err(int r, int64_t timeout_us)
{
	return r == -ETIMEDOUT && timeout_us == 0 ? -EAGAIN : r;
}

/* ---- sending ------------------------------------------------------------ */

static int tx_room(struct zl_ringchan *rc, size_t len)
{
	if (rc->err)
		return rc->err;
	if (rc->peer_closed)
		return -ECONNRESET;
	int err;
	if (zl_ring_tx_has_room(&rc->tx, (uint32_t)len, &err))
		return 0;
	return err ? fail(rc, err) : -EAGAIN;
}

static inline void tx_lock(struct zl_ringchan *rc)
{
	while (atomic_flag_test_and_set_explicit(&rc->tx_lock, memory_order_acquire))
		zl_cpu_relax();
}

static inline void tx_unlock(struct zl_ringchan *rc)
{
	atomic_flag_clear_explicit(&rc->tx_lock, memory_order_release);
}

/* Push the kept rest of a fragmented message until done or the deadline.
 * Caller holds tx_lock or is the sending thread with pend_active clear. */
static int push_pending(struct zl_ringchan *rc, int64_t *dl)
{
	while (rc->pend) {
		size_t left = rc->pend_len - rc->pend_off;
		uint32_t n = left > rc->max_frag ? rc->max_frag : (uint32_t)left;
		uint8_t type = n == left ? ZL_REC_LAST : ZL_REC_MID;
		int r = put(rc, rc->pend + rc->pend_off, n, type, 0);
		if (r == -EAGAIN && *dl)
			r = wait_for(rc, ZL_DIR_TX, dl, tx_room, n);
		else if (!r) {
			rc->pend_off += n;
			if (rc->pend_off == rc->pend_len) {
				free(rc->pend);
				rc->pend = NULL;
				/* last: once this is seen, the sending thread owns pend
				 * again, so nothing here may touch it afterwards */
				atomic_store_explicit(&rc->pend_active, false, memory_order_release);
				return 0;
			}
			continue;
		}
		if (r)
			return r;
	}
	return 0;
}

static int send_check(struct zl_ringchan *rc)
{
	if (rc->err)
		return state_err(rc);
	if (rc->peer_closed)
		return -ECONNRESET;
	return 0;
}

static int send_fragmented(struct zl_ringchan *rc, const uint8_t *p, size_t len,
			   int64_t *dl)
{
	uint32_t n = rc->max_frag - 8;
	int r;
	while ((r = put(rc, p, n, ZL_REC_FIRST, len)) == -EAGAIN)
		if ((r = wait_for(rc, ZL_DIR_TX, dl, tx_room, rc->max_frag)))
			return r;
	if (r)
		return r;
	size_t off = n;
	while (off < len) {
		size_t left = len - off;
		n = left > rc->max_frag ? rc->max_frag : (uint32_t)left;
		r = put(rc, p + off, n, n == left ? ZL_REC_LAST : ZL_REC_MID, 0);
		if (r == -EAGAIN) {
			r = wait_for(rc, ZL_DIR_TX, dl, tx_room, n);
			if (r == -ETIMEDOUT) { /* accepted: keep the rest */
				rc->pend = malloc(left);
				if (!rc->pend)
					return fail(rc, -ENOMEM);
				memcpy(rc->pend, p + off, left);
				rc->pend_len = left;
				rc->pend_off = 0;
				atomic_store_explicit(&rc->pend_active, true, memory_order_release);
				return 0;
			}
			if (r)
				return r;
			continue;
		}
		if (r)
			return r;
		off += n;
	}
	return 0;
}

static int flush_locked(struct zl_ringchan *rc, int64_t *dl)
{
	tx_lock(rc);
	int r = push_pending(rc, dl);
	tx_unlock(rc);
	return r;
}

/* Whether the short send paths may run: no error, no close, no fragmented
 * send pending. */
static inline bool tx_clear(const struct zl_ringchan *rc)
{
	return !rc->err && !rc->peer_closed &&
	       !atomic_load_explicit(&rc->pend_active, memory_order_acquire);
}

/* The short send path: 0 when sent, -EAGAIN for the general path. */
static inline int send_small(struct zl_ringchan *rc, const void *buf, size_t len)
{
	if (len > SMALL_MSG || len > rc->send_max || !tx_clear(rc) ||
	    ++rc->ops_since_check >= ALIVE_EVERY_OPS)
		return -EAGAIN;
	int r = zl_ring_tx_put(&rc->tx, buf, (uint32_t)len, ZL_REC_MSG);
	if (ZL_UNLIKELY(r))
		return r == -EAGAIN ? r : fail(rc, r);
	notify_rx(rc);
	rc->stats.msgs_sent++;
	rc->stats.bytes_sent += len;
	return 0;
}

/* zl_send beyond the short path: fragments, waiting for room, errors. */
static ZL_NOINLINE int send_general(struct zl_ringchan *rc, const void *buf, size_t len,
				    int64_t timeout_us)
{
	int r = send_check(rc);
	if (r)
		return r;
	if (len > rc->send_max)
		return -EMSGSIZE;
	if (ZL_UNLIKELY(++rc->ops_since_check >= ALIVE_EVERY_OPS)) {
		rc->ops_since_check = 0;
		if ((r = check_alive(rc)))
			return r;
	}
	int64_t deadline = deadline_of(timeout_us);
	if (ZL_UNLIKELY(atomic_load_explicit(&rc->pend_active, memory_order_acquire)) &&
	    (r = flush_locked(rc, &deadline)))
		return timeout_err(r, timeout_us);
	/* only now: the receiving thread may hold a reservation while pushing */
	if (rc->tx.open)
		return -EBUSY;
	if (len <= zl_ring_max_payload(rc->tx.size)) {
		while ((r = put(rc, buf, (uint32_t)len, ZL_REC_MSG, 0)) == -EAGAIN)
			if ((r = wait_for(rc, ZL_DIR_TX, &deadline, tx_room, len)))
				return timeout_err(r, timeout_us);
	} else {
		r = send_fragmented(rc, buf, len, &deadline);
	}
	if (!r) {
		rc->stats.msgs_sent++;
		rc->stats.bytes_sent += len;
	}
	return timeout_err(r, timeout_us);
}

static int rc_send(zl_channel *ch, const void *buf, size_t len, int64_t timeout_us)
{
	struct zl_ringchan *rc = RC(ch);
	int r = send_small(rc, buf, len);
	if (ZL_LIKELY(r != -EAGAIN))
		return r;
	return send_general(rc, buf, len, timeout_us);
}

/* Publish the records zl_sendv placed since the last publication: the
 * transport's held pushes, then one wake-up check. */
static int publish_batch(struct zl_ringchan *rc, size_t *held)
{
	int r = rc->link->batch_end ? rc->link->batch_end(rc) : 0;
	if (r)
		return fail(rc, r);
	if (*held)
		notify_rx(rc);
	*held = 0;
	return 0;
}

/* zl_sendv: whole messages that fit now go into the ring one after the
 * other with one publication; one that must wait (or fragment, or meet an
 * error) goes through send_general, after what came before was published. */
static int rc_sendv(zl_channel *ch, const struct zl_msgvec *v, size_t n, int64_t timeout_us)
{
	struct zl_ringchan *rc = RC(ch);
	void (*begin)(struct zl_ringchan *) = rc->link->batch_begin;
	uint32_t maxp = zl_ring_max_payload(rc->tx.size);
	size_t i = 0, held = 0;
	int64_t deadline = 0; /* read from the clock once a message must wait */
	int r = 0;
	/* the receiving thread may push a kept fragment (push_own_pending):
	 * hold nothing while one is pending */
	if (begin && !atomic_load_explicit(&rc->pend_active, memory_order_acquire))
		begin(rc);
	for (; i < n; i++) {
		size_t len = v[i].len;
		/* the liveness check in place: it must not split the batch */
		if (ZL_UNLIKELY(++rc->ops_since_check >= ALIVE_EVERY_OPS)) {
			rc->ops_since_check = 0;
			if ((r = check_alive(rc)))
				break;
		}
		if (ZL_LIKELY(tx_clear(rc) && len <= rc->send_max && len <= maxp)) {
			r = len <= SMALL_MSG
				    ? zl_ring_tx_put(&rc->tx, v[i].buf, (uint32_t)len, ZL_REC_MSG)
				    : -EAGAIN;
			if (r == -EAGAIN) /* re-reads the read position, pads */
				r = put_rec(rc, v[i].buf, (uint32_t)len, ZL_REC_MSG, 0);
			if (!r) {
				held++;
				rc->stats.msgs_sent++;
				rc->stats.bytes_sent += len;
				continue;
			}
			if (r != -EAGAIN) {
				r = fail(rc, r);
				break;
			}
		}
		if ((r = publish_batch(rc, &held)))
			break;
		int64_t t = timeout_us;
		if (timeout_us > 0) {
			int64_t now = zl_now_us();
			if (!deadline)
				deadline = now + timeout_us;
			t = deadline > now ? deadline - now : 0;
		}
		if ((r = send_general(rc, v[i].buf, len, t)))
			break;
		if (begin && !atomic_load_explicit(&rc->pend_active, memory_order_acquire))
			begin(rc);
	}
	int r2 = publish_batch(rc, &held);
	if (!r)
		r = r2;
	return i ? (int)i : r;
}

static int rc_flush(zl_channel *ch, int64_t timeout_us)
{
	struct zl_ringchan *rc = RC(ch);
	if (rc->err)
		return state_err(rc);
	int64_t dl = deadline_of(timeout_us);
	return timeout_err(flush_locked(rc, &dl), timeout_us);
}

static int rc_reserve(zl_channel *ch, size_t len, void **ptr)
{
	struct zl_ringchan *rc = RC(ch);
	/* the short path, as send_small's */
	if (ZL_LIKELY(tx_clear(rc) && len <= rc->send_max &&
		      len <= zl_ring_max_payload(rc->tx.size) &&
		      !zl_ring_tx_reserve_msg(&rc->tx, (uint32_t)len, ptr)))
		return 0;
	int r = send_check(rc);
	if (r)
		return r;
	if (len > zl_ring_max_payload(rc->tx.size) || len > rc->send_max)
		return -EMSGSIZE;
	if (atomic_load_explicit(&rc->pend_active, memory_order_acquire) &&
	    (r = flush_locked(rc, &(int64_t){ 0 })))
		return r == -ETIMEDOUT ? -EAGAIN : r;
	if (rc->tx.open)
		return -EBUSY;
	r = zl_ring_tx_reserve(&rc->tx, (uint32_t)len, ZL_REC_MSG, ptr);
	return r == -EPROTO ? fail(rc, r) : r;
}

static int rc_commit(zl_channel *ch, size_t len)
{
	struct zl_ringchan *rc = RC(ch);
	if (!rc->tx.open || len > rc->tx.res_len)
		return -EINVAL;
	if (rc->err) {
		zl_ring_tx_abort(&rc->tx);
		return state_err(rc);
	}
	int r = zl_ring_tx_commit(&rc->tx, (uint32_t)len);
	if (r)
		return fail(rc, r);
	notify_rx(rc);
	rc->stats.msgs_sent++;
	rc->stats.bytes_sent += len;
	return 0;
}

static int rc_wait_writable(zl_channel *ch, size_t len, int64_t timeout_us)
{
	struct zl_ringchan *rc = RC(ch);
	if (rc->err)
		return state_err(rc);
	if (len > zl_ring_max_payload(rc->tx.size))
		return -EMSGSIZE;
	int64_t dl = deadline_of(timeout_us);
	return timeout_err(wait_for(rc, ZL_DIR_TX, &dl, tx_room, len),
			   timeout_us);
}

/* ---- receiving ---------------------------------------------------------- */

/* Keep our own fragmented send moving without waiting (from the receiving
 * thread too: a caller waiting for a reply must not deadlock). */
static inline void push_own_pending(struct zl_ringchan *rc)
{
	if (ZL_UNLIKELY(atomic_load_explicit(&rc->pend_active, memory_order_acquire)) &&
	    !atomic_flag_test_and_set_explicit(&rc->tx_lock, memory_order_acquire)) {
		if (atomic_load_explicit(&rc->pend_active, memory_order_relaxed))
			push_pending(rc, &(int64_t){ 0 });
		tx_unlock(rc);
	}
}

static int rx_ready(struct zl_ringchan *rc, size_t unused)
{
	(void)unused;
	if (rc->err)
		return rc->err;
	push_own_pending(rc);
	const void *p;
	uint32_t n;
	uint8_t t;
	if (rc->link->progress)
		rc->link->progress(rc);
	int r = zl_ring_rx_peek(&rc->rx, &p, &n, &t);
	if (!r) { /* keep it for next_record */
		rc->rec_p = p;
		rc->rec_n = n;
		rc->rec_t = t;
	}
	if (r == -EAGAIN && rc->peer_closed)
		return -ECONNRESET;
	return r == -EPROTO ? fail(rc, r) : r;
}

static inline void consume(struct zl_ringchan *rc)
{
	zl_ring_rx_consume(&rc->rx);
	serve_rpos_demand(rc);
}

static int protocol_error(struct zl_ringchan *rc, const char *what)
{
	ZL_LOG(ZL_LOG_ERROR, "%s peer sent %s", rc->stats.transport, what);
	fail(rc, -EPROTO);
	return state_err(rc);
}

/* Wait for the next record and return it. CLOSE is handled here. */
static int next_record(struct zl_ringchan *rc, int64_t *dl, const uint8_t **p,
		       uint32_t *n, uint8_t *t)
{
	int r = wait_for(rc, ZL_DIR_RX, dl, rx_ready, 0);
	if (r)
		return r == -EPROTO ? state_err(rc) : r;
	*p = rc->rec_p;
	*n = rc->rec_n;
	*t = rc->rec_t;
	if (*t == ZL_REC_CLOSE) {
		if (zl_ring_rx_verify(&rc->rx))
			return protocol_error(rc, "a bad footer");
		consume(rc);
		rc->peer_closed = true;
		return -ECONNRESET;
	}
	return 0;
}

static int recv_check(struct zl_ringchan *rc)
{
	if (rc->err)
		return state_err(rc);
	return rc->peeked ? -EBUSY : 0;
}

/* Read the fragments after the first into buf[got, total). */
static int recv_rest(struct zl_ringchan *rc, uint8_t *buf, size_t got, size_t total,
		     int64_t *dl)
{
	while (got < total) {
		const uint8_t *p;
		uint32_t n;
		uint8_t t;
		int r = next_record(rc, dl, &p, &n, &t);
		if (r == -ETIMEDOUT) { /* keep what we have for the next call */
			rc->asm_buf = malloc(total);
			if (!rc->asm_buf)
				return fail(rc, -ENOMEM);
			memcpy(rc->asm_buf, buf, got);
			rc->asm_total = total;
			rc->asm_got = got;
			rc->asm_active = true;
			return r;
		}
		if (r)
			return r;
		if ((t != ZL_REC_MID && t != ZL_REC_LAST) || n > total - got ||
		    (t == ZL_REC_LAST) != (n == total - got))
			return protocol_error(rc, "a bad fragment");
		memcpy(buf + got, p, n);
		if (zl_ring_rx_verify(&rc->rx))
			return protocol_error(rc, "a bad footer");
		consume(rc);
		got += n;
	}
	return 0;
}

/* After a whole message of n bytes was consumed. */
static inline void received(struct zl_ringchan *rc, uint32_t n, size_t *len)
{
	serve_rpos_demand(rc);
	*len = n;
	rc->stats.msgs_recv++;
	rc->stats.bytes_recv += n;
}

/* Copy out the whole message just peeked and consume it: 0, or -EPROTO
 * (bad footer; nothing consumed). buf may be NULL when n is 0. */
static inline int take_msg(struct zl_ringchan *rc, void *buf, const void *p, uint32_t n,
			   size_t *len)
{
	if (n)
		memcpy(buf, p, n);
	if (zl_ring_rx_verify(&rc->rx))
		return -EPROTO;
	zl_ring_rx_consume(&rc->rx);
	received(rc, n, len);
	return 0;
}

/* Polls the short receive paths make before the wait policy starts. */
static inline uint32_t small_polls(const struct zl_ringchan *rc, int64_t timeout_us)
{
	if (!timeout_us || rc->opts.spin_us < SMALL_SPIN_MIN_US)
		return 1;
	return rc->link->poll_hard ? 8 * SMALL_POLLS : SMALL_POLLS;
}

/* Whether the short receive paths may run: no error, no peeked record, no
 * half-assembled message, no close, no fragmented send of ours pending. */
static inline bool rx_clear(const struct zl_ringchan *rc)
{
	return !rc->err && !rc->peeked && !rc->asm_active && !rc->peer_closed &&
	       !atomic_load_explicit(&rc->pend_active, memory_order_acquire);
}

/* The short receive path: a whole message that is there or arrives within
 * SMALL_POLLS polls (zl_ring_rx_get). 0 when received, -EAGAIN for the
 * general path, which looks at the same record again. */
static inline int recv_small(struct zl_ringchan *rc, void *buf, size_t cap, size_t *len,
			     int64_t timeout_us)
{
	if (!rx_clear(rc))
		return -EAGAIN;
	uint32_t polls = small_polls(rc, timeout_us);
	uint32_t c = cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap, n;
	int r;
	void (*progress)(struct zl_ringchan *) = rc->link->progress;
	/* the transport's progress, where there is one, goes before every look */
	do {
		if (progress)
			progress(rc);
		r = zl_ring_rx_get(&rc->rx, buf, c, &n, progress ? 1 : polls,
				   !rc->link->poll_hard);
	} while (r == -EAGAIN && progress && --polls);
	if (r)
		return -EAGAIN;
	received(rc, n, len);
	return 0;
}

/* zl_recv beyond the short path: fragments, waiting, errors. */
static ZL_NOINLINE int recv_general(struct zl_ringchan *rc, void *buf, size_t cap, size_t *len,
				    int64_t timeout_us)
{
	int r = recv_check(rc);
	if (r)
		return r;
	int64_t deadline = deadline_of(timeout_us);
	size_t total, got;
	if (rc->asm_active) {
		total = rc->asm_total;
		if (total > cap) {
			*len = total;
			return -EMSGSIZE;
		}
		got = rc->asm_got;
		if (got)
			memcpy(buf, rc->asm_buf, got);
		free(rc->asm_buf);
		rc->asm_buf = NULL;
		rc->asm_active = false;
	} else {
		const uint8_t *p;
		uint32_t n;
		uint8_t t;
		if ((r = next_record(rc, &deadline, &p, &n, &t)))
			return timeout_err(r, timeout_us);
		if (t == ZL_REC_MSG) {
			if (n > cap) {
				*len = n;
				return -EMSGSIZE;
			}
			return take_msg(rc, buf, p, n, len) ? protocol_error(rc, "a bad footer")
							    : 0;
		}
		if (t != ZL_REC_FIRST || n < 8)
			return protocol_error(rc, "a fragment out of order");
		uint64_t tot;
		memcpy(&tot, p, 8);
		if (tot > rc->opts.max_msg || tot <= n - 8)
			return protocol_error(rc, "a message beyond max_msg");
		if (tot > cap) {
			*len = (size_t)tot;
			return -EMSGSIZE;
		}
		total = (size_t)tot;
		got = n - 8;
		if (got)
			memcpy(buf, p + 8, got);
		if (zl_ring_rx_verify(&rc->rx))
			return protocol_error(rc, "a bad footer");
		consume(rc);
	}
	r = recv_rest(rc, buf, got, total, &deadline);
	if (r)
		return timeout_err(r, timeout_us);
	*len = total;
	rc->stats.msgs_recv++;
	rc->stats.bytes_recv += total;
	return 0;
}

static int rc_recv(zl_channel *ch, void *buf, size_t cap, size_t *len, int64_t timeout_us)
{
	struct zl_ringchan *rc = RC(ch);
	if (ZL_LIKELY(!recv_small(rc, buf, cap, len, timeout_us)))
		return 0;
	return recv_general(rc, buf, cap, len, timeout_us);
}

/* The short peek path, as recv_small: a whole message that is there or
 * arrives within a bounded number of polls. 0 when peeked, -EAGAIN for the
 * general path, which looks at the same record again. */
static inline int peek_small(struct zl_ringchan *rc, const void **ptr, size_t *len,
			     int64_t timeout_us)
{
	if (!rx_clear(rc))
		return -EAGAIN;
	uint32_t polls = small_polls(rc, timeout_us), n;
	void (*progress)(struct zl_ringchan *) = rc->link->progress;
	int r;
	do {
		if (progress)
			progress(rc);
		r = zl_ring_rx_peek_msg(&rc->rx, ptr, &n, progress ? 1 : polls,
					!rc->link->poll_hard);
	} while (r == -EAGAIN && progress && --polls);
	if (r)
		return -EAGAIN;
	rc->peeked = true;
	rc->peek_len = n;
	*len = n;
	return 0;
}

static int rc_peek(zl_channel *ch, const void **ptr, size_t *len, int64_t timeout_us)
{
	struct zl_ringchan *rc = RC(ch);
	if (ZL_LIKELY(!peek_small(rc, ptr, len, timeout_us)))
		return 0;
	int r = recv_check(rc);
	if (r)
		return r;
	if (rc->asm_active) {
		*len = rc->asm_total;
		return -EMSGSIZE;
	}
	const uint8_t *p;
	uint32_t n;
	uint8_t t;
	int64_t dl = deadline_of(timeout_us);
	if ((r = next_record(rc, &dl, &p, &n, &t)))
		return timeout_err(r, timeout_us);
	if (t == ZL_REC_FIRST) {
		/* the total is the peer's word: check it before a caller sizes a
		 * buffer by it */
		uint64_t tot = 0;
		if (n >= 8)
			memcpy(&tot, p, 8);
		if (n < 8 || tot > rc->opts.max_msg || tot <= n - 8)
			return protocol_error(rc, "a message beyond max_msg");
		*len = (size_t)tot;
		return -EMSGSIZE;
	}
	if (t != ZL_REC_MSG)
		return protocol_error(rc, "a fragment out of order");
	if (zl_ring_rx_verify(&rc->rx))
		return protocol_error(rc, "a bad footer");
	rc->peeked = true;
	rc->peek_len = n;
	*ptr = p;
	*len = n;
	return 0;
}

static int rc_release(zl_channel *ch)
{
	struct zl_ringchan *rc = RC(ch);
	if (!rc->peeked)
		return -EINVAL;
	rc->peeked = false;
	rc->stats.msgs_recv++;
	rc->stats.bytes_recv += rc->peek_len;
	consume(rc);
	return 0;
}

/* ---- the rest ---------------------------------------------------------- */

static int rc_sock(zl_channel *ch)
{
	struct zl_ringchan *rc = RC(ch);
	return rc->link->sock ? rc->link->sock(rc) : -1;
}

static int rc_fd(zl_channel *ch)
{
	struct zl_ringchan *rc = RC(ch);
	int fd = rc->link->fd(rc);
	if (fd >= 0) {
		rc->fd_mode = true;
		want_sym(rc); /* an event loop sleeps often */
	}
	return fd;
}

static size_t rc_max_inline(const zl_channel *ch)
{
	const struct zl_ringchan *rc = (const struct zl_ringchan *)ch;
	size_t m = zl_ring_max_payload(rc->tx.size);
	return m < rc->send_max ? m : (size_t)rc->send_max;
}

static void rc_info(const zl_channel *ch, struct zl_channel_info *info)
{
	const struct zl_ringchan *rc = (const struct zl_ringchan *)ch;
	int32_t pid = info->peer_pid;
	*info = rc->stats;
	if (!info->peer_pid)
		info->peer_pid = pid;
	info->wakeups_sent += rc->rx_wakeups_sent;
	info->sleeps += rc->rx_sleeps;
	info->arms += rc->rx_arms;
	info->fences += rc->rx_fences;
	info->syscalls = atomic_load_explicit(&rc->syscalls, memory_order_relaxed);
	info->rpos_updates = rc->rx.rpos_updates;
	info->rpos_reads = rc->tx.rpos_reads;
	if (rc->link->info)
		rc->link->info(rc, info);
}

static void rc_close(zl_channel *ch)
{
	struct zl_ringchan *rc = RC(ch);
	if (!rc->err && !rc->peer_closed && !ch->no_linger) {
		/* flush what we accepted, then tell the peer in band so it reads
		 * everything before it sees the end */
		int64_t deadline = zl_now_us() + CLOSE_LINGER_US;
		zl_ring_tx_abort(&rc->tx);
		int r = flush_locked(rc, &deadline);
		while (!r && (r = put(rc, NULL, 0, ZL_REC_CLOSE, 0)) == -EAGAIN)
			r = wait_for(rc, ZL_DIR_TX, &deadline, tx_room, 0);
	}
	rc->link->destroy(rc);
}

/* Readiness without a system call (zl_poller, zl_channel_arm). */
static uint32_t rc_ready(zl_channel *ch, uint32_t events)
{
	struct zl_ringchan *rc = RC(ch);
	uint32_t m = 0;
	if (rc->err)
		return ZL_POLLERR | (events & (ZL_POLLIN | ZL_POLLOUT));
	if (events & ZL_POLLIN) {
		serve_rpos_demand(rc);
		if (rc->peeked || rx_ready(rc, 0) != -EAGAIN)
			m |= ZL_POLLIN;
	}
	if (rc->peer_closed)
		m |= ZL_POLLHUP | (events & ZL_POLLIN);
	if (events & ZL_POLLOUT) {
		push_own_pending(rc);
		if (!atomic_load_explicit(&rc->pend_active, memory_order_acquire) &&
		    tx_room(rc, ZL_POLL_WRITABLE) != -EAGAIN)
			m |= ZL_POLLOUT;
	}
	return m;
}

/* Before a sleep on the fd: take the wake-ups (if woken), then arm for
 * events unless something is ready already. The ready mask, or 0 armed. */
static int rc_arm(zl_channel *ch, uint32_t events, bool woken)
{
	struct zl_ringchan *rc = RC(ch);
	enter_manual(rc);
	drain_if_due(rc, woken);
	uint32_t m = rc_ready(ch, events);
	if (m)
		return (int)m;
	int r = events & ZL_POLLIN ? arm_rx(rc) : 0;
	if (!r && (events & ZL_POLLOUT))
		arm_dir(rc, ZL_DIR_TX);
	return (int)rc_ready(ch, events);
}

/* Take pending wakeups and look at the peer; with arm, have the peer poke
 * us after its next one-sided write (the owner is about to sleep). */
static int rc_settle(zl_channel *ch, bool arm)
{
	struct zl_ringchan *rc = RC(ch);
	enter_manual(rc);
	if (rc->err)
		return rc->err;
	drain_rx(rc);
	if (rc->peer_closed)
		return -ECONNRESET;
	if (arm)
		rc->rx_pokes = true;
	return arm ? arm_rx(rc) : 0;
}

static int rc_poke(zl_channel *ch)
{
	struct zl_ringchan *rc = RC(ch);
	if (rc->err)
		return rc->err;
	notify_rx(rc);
	return 0;
}

const struct zl_chan_ops zl_ringchan_ops = {
	.send = rc_send,
	.recv = rc_recv,
	.flush = rc_flush,
	.sendv = rc_sendv,
	.reserve = rc_reserve,
	.commit = rc_commit,
	.peek = rc_peek,
	.release = rc_release,
	.wait_writable = rc_wait_writable,
	.fd = rc_fd,
	.sock = rc_sock,
	.max_inline = rc_max_inline,
	.info = rc_info,
	.close = rc_close,
	.settle = rc_settle,
	.poke = rc_poke,
	.ready = rc_ready,
	.arm = rc_arm,
};
