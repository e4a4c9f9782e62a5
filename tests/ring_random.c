/* SPDX-License-Identifier: MIT */
/*
 * ring_random: 10^6 messages of random sizes through a tx/rx pair, each
 * carrying a sequence number and a checksum: no loss, duplication,
 * reordering or corruption.
 *
 *   ring_random           one thread, reserve/commit and peek/consume
 *                         interleaved at random (the ring is often full);
 *                         every -EAGAIN is checked against a model
 *   ring_random threads   a producer and a consumer thread on one buffer,
 *                         bounded spinning (fail after 5 s without progress)
 */
#include <pthread.h>
#include <sched.h>

#include "ringlib.h"

#define NO_PROGRESS_US 5000000

/* random length: mostly small, sometimes up to the maximum */
static uint32_t pick_len(struct tl_rng *r, uint32_t maxp)
{
	switch (tl_rand_below(r, 8)) {
	case 0:
		return (uint32_t)tl_rand_below(r, 17);
	case 1:
		return maxp - (uint32_t)tl_rand_below(r, 9);
	case 2:
	case 3:
		return (uint32_t)tl_rand_below(r, maxp + 1);
	default:
		return (uint32_t)tl_rand_below(r, 257);
	}
}

/* ---- single thread ----------------------------------------------------- */

struct sent {
	uint64_t id;
	uint32_t len;
	uint8_t type;
};

static void set_lines(struct rpair *p, bool lines)
{
	zl_ring_tx_set_lines(&p->tx, lines);
	zl_ring_rx_set_lines(&p->rx, lines);
}

static void run_single(uint64_t seed, uint32_t size, uint64_t n, bool lines)
{
	struct tl_rng r = { seed };
	struct rpair p;
	uint32_t pubev = (uint32_t[]){ 0, 1, 64, size / 2 }[tl_rand_below(&r, 4)];
	rp_init(&p, size, tl_rand(&r), pubev, ZL_LAYOUT_LEN_FIRST, tl_rand_below(&r, 2));
	set_lines(&p, lines);
	static uint8_t one[65536]; /* a message for zl_ring_tx_put */
	uint32_t maxp = zl_ring_max_payload(size);
	/* in flight fits in size / 24 records */
	uint32_t qcap = size / ZL_REC_OVERHEAD + 1, qh = 0, qt = 0;
	struct sent *q = calloc(qcap, sizeof(*q));
	CHECK(q);
	uint64_t next = 0, got = 0, eagain = 0, aborts = 0, truncs = 0, puts = 0, gets = 0;
	int bias = 50;

	while (got < n) {
		if (tl_rand_below(&r, 1000) == 0)
			bias = 10 + (int)tl_rand_below(&r, 81); /* phases: fill up, drain */
		if (next < n && (int)tl_rand_below(&r, 100) < bias) {
			uint32_t len = pick_len(&r, maxp);
			uint8_t type = (uint8_t)(1 + tl_rand_below(&r, 4)); /* MSG..LAST */
			uint64_t w = p.tx.wpos;
			uint32_t rs = zl_ring_rec_bytes(lines, len, type);
			uint32_t rem = size - (uint32_t)(w & (size - 1));
			uint64_t start = rs <= rem ? w : w + rem;
			if (tl_rand_below(&r, 4) == 0) { /* the one-step send */
				uint64_t cached = p.tx.rpos_cache;
				msg_make(one, len, next);
				int rc = zl_ring_tx_put(&p.tx, one, len, type);
				if (rc == -EAGAIN) {
					CHECKF(rs > rem || w + rs > cached + size,
					       "put: -EAGAIN with room at wpos %" PRIu64, w);
					CHECK(p.tx.wpos == w);
					continue;
				}
				CHECK_OK(rc);
				CHECKF(rs <= rem && p.tx.wpos >= w + rs && p.tx.wpos - (w + rs) < ZL_REC_OVERHEAD,
				       "put: record of %u bytes at %" PRIu64 " moved wpos to %" PRIu64, rs, w,
				       p.tx.wpos);
				CHECK((qt + 1) % qcap != qh);
				q[qt] = (struct sent){ next, len, type };
				qt = (qt + 1) % qcap;
				next++;
				puts++;
				continue;
			}
			void *ptr;
			int rc = zl_ring_tx_reserve(&p.tx, len, type, &ptr);
			uint64_t rpos_now = atomic_load(&p.peer_rpos);
			if (rc == -EAGAIN) {
				eagain++;
				CHECKF(start + rs > rpos_now + size,
				       "-EAGAIN with room: wpos %" PRIu64 " rs %u rpos %" PRIu64, w, rs,
				       rpos_now);
				continue;
			}
			CHECK_OK(rc);
			CHECKF(start + rs <= rpos_now + size, "reserve overwrote unread data");
			CHECK((uint8_t *)ptr == p.buf + (start & (size - 1)) + ZL_REC_HDR);
			/* nothing is visible before commit */
			if (qh == qt) {
				const void *rp;
				uint32_t rl;
				uint8_t ty;
				CHECK_RC(zl_ring_rx_peek(&p.rx, &rp, &rl, &ty), -EAGAIN);
			}
			CHECK_RC(zl_ring_tx_reserve(&p.tx, 0, ZL_REC_MSG, &ptr), -EBUSY);
			uint32_t x = (uint32_t)tl_rand_below(&r, 20);
			if (x == 0) {
				zl_ring_tx_abort(&p.tx);
				aborts++;
				CHECK_RC(zl_ring_tx_commit(&p.tx, 0), -EINVAL);
				continue;
			}
			uint32_t rlen = len;
			if (x == 1 && len) {
				len = (uint32_t)tl_rand_below(&r, len);
				truncs++;
			}
			CHECK_RC(zl_ring_tx_commit(&p.tx, rlen + 1), -EINVAL); /* still open after */
			msg_make(ptr, len, next);
			CHECK_OK(zl_ring_tx_commit(&p.tx, len));
			CHECK((qt + 1) % qcap != qh);
			q[qt] = (struct sent){ next, len, type };
			qt = (qt + 1) % qcap;
			next++;
		} else {
			const void *rp;
			uint32_t rl;
			uint8_t ty;
			if (tl_rand_below(&r, 2)) { /* the one-step receive, when it applies */
				static uint8_t got_buf[1 << 20];
				uint32_t cap = (uint32_t)tl_rand_below(&r, sizeof(got_buf));
				int rc = zl_ring_rx_get(&p.rx, got_buf, cap, &rl, 1, false);
				if (rc == 0) {
					CHECKF(qh != qt, "get delivered a record nobody sent");
					struct sent *e = &q[qh];
					CHECKF(rl == e->len && e->type == ZL_REC_MSG && rl <= cap,
					       "msg %" PRIu64 ": get len %u (cap %u), want %u type %u",
					       e->id, rl, cap, e->len, e->type);
					const char *bad = msg_bad(got_buf, rl, e->id);
					CHECKF(!bad, "msg %" PRIu64 " len %u (get): %s", e->id, rl, bad);
					qh = (qh + 1) % qcap;
					got++;
					gets++;
					continue;
				}
				CHECKF(rc == -EAGAIN ? qh == qt : rc == -ENOMSG,
				       "get = %d with %u records committed", rc,
				       (qt + qcap - qh) % qcap);
			}
			int rc = zl_ring_rx_peek(&p.rx, &rp, &rl, &ty);
			if (rc == -EAGAIN) {
				CHECKF(qh == qt, "peek -EAGAIN with %u records committed",
				       (qt + qcap - qh) % qcap);
				if (tl_rand_below(&r, 2))
					zl_ring_rx_flush_rpos(&p.rx);
				continue;
			}
			CHECK_OK(rc);
			CHECKF(qh != qt, "peek delivered a record nobody sent");
			struct sent *e = &q[qh];
			CHECKF(rl == e->len && ty == e->type, "msg %" PRIu64 ": len %u type %u, want %u %u",
			       e->id, rl, ty, e->len, e->type);
			CHECK((const uint8_t *)rp >= p.buf && (const uint8_t *)rp + rl <= p.buf + size);
			const char *bad = msg_bad(rp, rl, e->id);
			CHECKF(!bad, "msg %" PRIu64 " len %u: %s", e->id, rl, bad);
			zl_ring_rx_consume(&p.rx);
			qh = (qh + 1) % qcap;
			got++;
			if (tl_rand_below(&r, 16) == 0)
				zl_ring_rx_flush_rpos(&p.rx);
		}
	}
	const void *rp;
	uint32_t rl;
	uint8_t ty;
	CHECK_RC(zl_ring_rx_peek(&p.rx, &rp, &rl, &ty), -EAGAIN);
	CHECK(p.rx.seq == p.tx.seq);
	printf("single thread, ring %u, %s grain: %" PRIu64 " msgs (%" PRIu64 " by put, %" PRIu64
	       " by get), %" PRIu64 " full (-EAGAIN), %" PRIu64 " aborts, %" PRIu64
	       " truncated commits, %" PRIu64 " rpos reads\n",
	       size, lines ? "line" : "word", n, puts, gets, eagain, aborts, truncs,
	       p.tx.rpos_reads);
	CHECK(eagain > 0 && puts > 0 && gets > 0);
	free(q);
	rp_free(&p);
}

/* ---- two threads ------------------------------------------------------- */

struct mt {
	struct rpair p;
	uint64_t n, seed;
	uint32_t maxp;
	_Atomic int failed;
};

static void *producer(void *arg)
{
	struct mt *m = arg;
	struct tl_rng r = { m->seed };
	int64_t last = tl_now_us();
	uint64_t spins = 0;
	for (uint64_t i = 0; i < m->n; i++) {
		uint32_t len = pick_len(&r, m->maxp);
		void *ptr;
		int rc;
		while ((rc = zl_ring_tx_reserve(&m->p.tx, len, ZL_REC_MSG, &ptr)) == -EAGAIN) {
			if (atomic_load(&m->failed))
				return NULL;
			if ((++spins & 255) == 0) {
				sched_yield();
				if (tl_now_us() - last > NO_PROGRESS_US)
					FAIL("producer: no room for 5 s at msg %" PRIu64, i);
			}
		}
		CHECK_OK(rc);
		msg_make(ptr, len, i);
		CHECK_OK(zl_ring_tx_commit(&m->p.tx, len));
		last = tl_now_us();
	}
	return NULL;
}

static void run_threads(uint64_t seed, uint32_t size, uint64_t n, bool lines)
{
	static struct mt m;
	memset(&m, 0, sizeof(m));
	rp_init(&m.p, size, seed * 3 + 1, 0, ZL_LAYOUT_LEN_FIRST, true);
	set_lines(&m.p, lines);
	m.n = n;
	m.seed = seed;
	/* lengths as for a 4 KiB ring: many records per lap, bounded time */
	m.maxp = zl_ring_max_payload(4096);
	pthread_t th;
	CHECK(pthread_create(&th, NULL, producer, &m) == 0);

	struct tl_rng r = { seed }; /* same stream: knows every length */
	int64_t last = tl_now_us();
	uint64_t spins = 0, bytes = 0;
	for (uint64_t i = 0; i < n; i++) {
		uint32_t want = pick_len(&r, m.maxp);
		const void *rp;
		uint32_t rl;
		uint8_t ty;
		int rc;
		while ((rc = zl_ring_rx_peek(&m.p.rx, &rp, &rl, &ty)) == -EAGAIN) {
			zl_ring_rx_flush_rpos(&m.p.rx);
			if ((++spins & 255) == 0) {
				sched_yield();
				if (tl_now_us() - last > NO_PROGRESS_US) {
					atomic_store(&m.failed, 1);
					FAIL("consumer: nothing for 5 s at msg %" PRIu64, i);
				}
			}
		}
		CHECK_OK(rc);
		CHECKF(rl == want && ty == ZL_REC_MSG, "msg %" PRIu64 ": len %u want %u", i, rl, want);
		const char *bad = msg_bad(rp, rl, i);
		CHECKF(!bad, "msg %" PRIu64 " len %u: %s", i, rl, bad);
		bytes += rl;
		zl_ring_rx_consume(&m.p.rx);
		last = tl_now_us();
	}
	CHECK(pthread_join(th, NULL) == 0);
	printf("two threads, ring %u, %s grain: %" PRIu64 " msgs, %" PRIu64 " bytes, %" PRIu64
	       " rpos reads, %" PRIu64 " rpos updates\n",
	       size, lines ? "line" : "word", n, bytes, m.p.tx.rpos_reads, m.p.rx.rpos_updates);
	rp_free(&m.p);
}

int main(int argc, char **argv)
{
	tl_watchdog(120);
	uint64_t seed = tl_seed();
	uint64_t n = tl_scaled(1000000);
	if (argc > 1 && !strcmp(argv[1], "threads")) {
		run_threads(seed, 4096, n / 2, true);
		run_threads(seed + 1, 65536, n / 2, false);
	} else {
		run_single(seed, 4096, n / 4, false);
		run_single(seed + 3, 4096, n / 4, true);
		run_single(seed + 1, 8192, n / 4, seed & 1);
		run_single(seed + 2, 65536, n / 4, !(seed & 1));
	}
	return T_EXIT_PASS;
}
