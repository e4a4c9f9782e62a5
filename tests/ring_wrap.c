/* SPDX-License-Identifier: MIT */
/*
 * ring_wrap: a 4096-byte ring, every reachable starting offset, many record
 * sizes around the ring end. Checks positions (against a reference model),
 * contents, lengths, types, PAD records and implicit skips, and -EAGAIN when
 * a second record does not fit.
 *
 * Record starts are always lap_start + a sum of record sizes (each >= 24),
 * so offsets 8 and 16 can never hold a record: they are not tested.
 */
#include "ringlib.h"

#define SIZE 4096u
#define MAXP zl_ring_max_payload(SIZE)

static uint64_t next_id;
static unsigned long ncases, npad, nskip, nfull;

/* one record through the pair, ring must be empty before */
static void pass_one(struct rpair *p, uint32_t len)
{
	void *ptr;
	const void *rp;
	uint32_t rl;
	uint8_t ty;
	CHECK_OK(zl_ring_tx_reserve(&p->tx, len, ZL_REC_MSG, &ptr));
	msg_make(ptr, len, next_id);
	CHECK_OK(zl_ring_tx_commit(&p->tx, len));
	CHECK_OK(zl_ring_rx_peek(&p->rx, &rp, &rl, &ty));
	CHECK(rp == ptr && rl == len && ty == ZL_REC_MSG);
	CHECK(!msg_bad(rp, rl, next_id));
	next_id++;
	zl_ring_rx_consume(&p->rx);
}

/* A position with a tail too short for a record moved to the next lap:
 * both sides skip such a tail, the sender may do it early. */
static uint64_t norm(uint64_t pos)
{
	uint32_t rem = SIZE - (uint32_t)(pos & (SIZE - 1));
	return rem < ZL_REC_OVERHEAD ? pos + rem : pos;
}

/* Move both ends to absolute position lap * SIZE + k (ring empty). */
static void advance(struct rpair *p, unsigned lap, uint32_t k)
{
	for (unsigned i = 0; i < lap; i++) {
		pass_one(p, SIZE / 2 - ZL_REC_OVERHEAD);
		pass_one(p, SIZE / 2 - ZL_REC_OVERHEAD);
	}
	if (k >= 48) {
		uint32_t a = (k / 2) & ~7u;
		pass_one(p, a - ZL_REC_OVERHEAD);
		pass_one(p, k - a - ZL_REC_OVERHEAD);
	} else if (k) {
		pass_one(p, k - ZL_REC_OVERHEAD);
	}
	CHECK(norm(p->tx.wpos) == norm((uint64_t)lap * SIZE + k));
	CHECK(norm(p->rx.rpos) == norm(p->tx.wpos));
}

/* Reference model: where a record of rs bytes starts if sent at wpos. */
static uint64_t model_start(uint64_t wpos, uint32_t rs, uint32_t *rem_out)
{
	uint32_t off = (uint32_t)(wpos & (SIZE - 1));
	uint32_t rem = SIZE - off;
	*rem_out = rem;
	return rs <= rem ? wpos : wpos + rem;
}

static void check_pad(struct rpair *p, uint64_t wpos, uint32_t rem, uint64_t seq)
{
	uint32_t off = (uint32_t)(wpos & (SIZE - 1));
	if (rem < ZL_REC_OVERHEAD) {
		nskip++;
		return; /* skipped by rule: nothing written */
	}
	npad++;
	uint64_t tag = zl_ring_htag(p->key, seq);
	CHECKF(get64(p->buf, off) == len_word(rem - ZL_REC_OVERHEAD, ZL_REC_PAD),
	       "PAD len word at %u: %#" PRIx64, off, get64(p->buf, off));
	CHECK(get64(p->buf, off + 8) == tag);
	CHECK(get64(p->buf, SIZE - 8) == zl_ring_ftag(p->key, seq));
}

/* Send s then t without consuming, then receive both. */
static void one_case(unsigned lap, uint32_t k, uint32_t s, uint32_t t)
{
	struct rpair p;
	rp_init(&p, SIZE, 0x8000123456789abcull ^ ((uint64_t)k << 20) ^ lap, 1, ZL_LAYOUT_LEN_FIRST,
		false);
	advance(&p, lap, k);
	ncases++;
	uint64_t rpos = p.rx.rpos;
	CHECK(atomic_load(&p.peer_rpos) == rpos);

	/* first record: always fits in the empty ring */
	uint32_t rem, rs1 = zl_rec_size(s), rs2 = zl_rec_size(t);
	uint64_t seq0 = p.tx.seq, w0 = p.tx.wpos;
	uint64_t st1 = model_start(w0, rs1, &rem);
	void *ptr1, *ptr2;
	CHECK_OK(zl_ring_tx_reserve(&p.tx, s, ZL_REC_MSG, &ptr1));
	CHECKF(ptr1 == p.buf + (st1 & (SIZE - 1)) + ZL_REC_HDR, "k=%u s=%u: payload at %td", k, s,
	       (uint8_t *)ptr1 - p.buf);
	uint64_t id1 = next_id++;
	msg_make(ptr1, s, id1);
	CHECK_OK(zl_ring_tx_commit(&p.tx, s));
	uint64_t seq1 = seq0;
	if (st1 != w0) {
		check_pad(&p, w0, rem, seq0);
		if (rem >= ZL_REC_OVERHEAD)
			seq1++;
	}
	CHECK(p.tx.seq == seq1 + 1);
	uint64_t w1 = st1 + rs1;
	CHECK(norm(p.tx.wpos) == norm(w1));

	/* second record: fits only if the model says so */
	uint64_t st2 = model_start(w1, rs2, &rem);
	bool fits = st2 + rs2 <= rpos + SIZE;
	uint64_t id2 = next_id++;
	int rc = zl_ring_tx_reserve(&p.tx, t, ZL_REC_LAST, &ptr2);
	if (!fits) {
		nfull++;
		CHECKF(rc == -EAGAIN, "k=%u s=%u t=%u: reserve = %d, model says full", k, s, t, rc);
		CHECK(norm(p.tx.wpos) == norm(w1)); /* nothing written on -EAGAIN */
	} else {
		CHECKF(rc == 0, "k=%u s=%u t=%u: reserve = %d (%s), model says it fits", k, s, t, rc,
		       zl_strerror(rc));
	}

	/* receive the first */
	const void *rp;
	uint32_t rl;
	uint8_t ty;
	CHECK_OK(zl_ring_rx_peek(&p.rx, &rp, &rl, &ty));
	CHECK(rp == ptr1 && rl == s && ty == ZL_REC_MSG);
	CHECK(!msg_bad(rp, rl, id1));
	zl_ring_rx_consume(&p.rx);

	if (!fits) { /* room now: the receiver published its position */
		CHECK_OK(zl_ring_tx_reserve(&p.tx, t, ZL_REC_LAST, &ptr2));
	}
	CHECKF(ptr2 == p.buf + (st2 & (SIZE - 1)) + ZL_REC_HDR, "k=%u s=%u t=%u: 2nd at %td", k, s,
	       t, (uint8_t *)ptr2 - p.buf);
	msg_make(ptr2, t, id2);
	CHECK_OK(zl_ring_tx_commit(&p.tx, t));
	if (st2 != w1)
		check_pad(&p, w1, rem, seq1 + 1);
	CHECK(norm(p.tx.wpos) == norm(st2 + rs2));

	CHECK_OK(zl_ring_rx_peek(&p.rx, &rp, &rl, &ty));
	CHECK(rp == ptr2 && rl == t && ty == ZL_REC_LAST);
	CHECK(!msg_bad(rp, rl, id2));
	/* a second peek returns the same record */
	const void *rp2;
	uint32_t rl2;
	CHECK_OK(zl_ring_rx_peek(&p.rx, &rp2, &rl2, &ty));
	CHECK(rp2 == rp && rl2 == rl);
	zl_ring_rx_consume(&p.rx);
	CHECK_RC(zl_ring_rx_peek(&p.rx, &rp, &rl, &ty), -EAGAIN);
	CHECK(p.rx.seq == p.tx.seq);
	CHECK(norm(p.rx.rpos) == norm(p.tx.wpos));
	/* the receiver publishes before it waits (as the channel does); the
	 * sender must accept that position, even when the ring has a tail of
	 * fewer than 24 bytes that the receiver has skipped already */
	zl_ring_rx_flush_rpos(&p.rx);
	/* make the sender re-read rpos: forget its cached value (any value
	 * <= the real one is legal; wpos - SIZE - 16 always is, as a skipped
	 * tail is at most 16 bytes) */
	p.tx.rpos_cache = p.tx.wpos >= SIZE + 16 ? p.tx.wpos - SIZE - 16 : 0;
	void *ptr3;
	int rc3 = zl_ring_tx_reserve(&p.tx, 8, ZL_REC_MSG, &ptr3);
	CHECKF(rc3 == 0, "k=%u s=%u t=%u: reserve after the receiver published rpos %" PRIu64
	       " (tx wpos %" PRIu64 ") = %d (%s)", k, s, t, atomic_load(&p.peer_rpos), p.tx.wpos,
	       rc3, zl_strerror(rc3));
	zl_ring_tx_abort(&p.tx);
	rp_free(&p);
}

/* The receiver published a position just before a short tail (it skips
 * the tail only when it looks for the next record), then the sender fills
 * the next lap up to that position + SIZE, again ending before a short
 * tail: wpos - rpos is then SIZE + tail, and the ring is FULL. */
static void full_after_tail(uint32_t tail)
{
	struct rpair p;
	rp_init(&p, SIZE, 0x8000000000000777ull + tail, 1, ZL_LAYOUT_LEN_FIRST, false);
	const uint32_t lens[2] = { 2048 - 24, 2048 - tail - 24 };
	void *ptr;
	const void *rp;
	uint32_t rl;
	uint8_t ty;
	for (int i = 0; i < 2; i++)
		pass_one(&p, lens[i]); /* consumed: rpos published before the tail */
	CHECK(atomic_load(&p.peer_rpos) == SIZE - tail);
	for (int i = 0; i < 2; i++) {
		CHECK_OK(zl_ring_tx_reserve(&p.tx, lens[i], ZL_REC_MSG, &ptr));
		msg_make(ptr, lens[i], 500 + i);
		CHECK_OK(zl_ring_tx_commit(&p.tx, lens[i]));
	}
	for (uint32_t len = 0; len <= MAXP; len += 8)
		CHECKF(zl_ring_tx_reserve(&p.tx, len, ZL_REC_MSG, &ptr) == -EAGAIN,
		       "tail %u: reserve(%u) succeeded in a full ring", tail, len);
	for (int i = 0; i < 2; i++) {
		CHECK_OK(zl_ring_rx_peek(&p.rx, &rp, &rl, &ty));
		CHECK(rl == lens[i] && !msg_bad(rp, rl, 500 + i));
		zl_ring_rx_consume(&p.rx);
	}
	CHECK_OK(zl_ring_tx_reserve(&p.tx, MAXP, ZL_REC_MSG, &ptr));
	rp_free(&p);
}

static void add(uint32_t *v, int *n, int64_t len)
{
	if (len < 0 || len > MAXP)
		return;
	for (int i = 0; i < *n; i++)
		if (v[i] == (uint32_t)len)
			return;
	v[(*n)++] = (uint32_t)len;
}

int main(void)
{
	CHECK(MAXP == 2024);
	full_after_tail(8);
	full_after_tail(16);
	for (unsigned lap = 0; lap < 2; lap++) {
		for (uint32_t k = 0; k < SIZE; k += 8) {
			if (k == 8 || k == 16)
				continue; /* unreachable as a record start */
			int64_t r = SIZE - k; /* bytes left before the ring end */
			uint32_t sizes[32];
			int ns = 0;
			const int64_t fixed[] = { 0, 1, 7, 8, 9, 15, 16, 17, MAXP - 1, MAXP };
			for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
				add(sizes, &ns, fixed[i]);
			add(sizes, &ns, r - 24);      /* lands exactly at the end */
			add(sizes, &ns, r - 24 - 8);  /* leaves 8 */
			add(sizes, &ns, r - 24 - 16); /* leaves 16 */
			add(sizes, &ns, r - 24 - 24); /* leaves 24: room for a PAD */
			add(sizes, &ns, r - 24 - 32);
			add(sizes, &ns, r - 24 - 7);  /* rounds up to the end */
			add(sizes, &ns, r - 24 + 1);  /* one byte too many */
			for (int i = 0; i < ns; i++) {
				uint32_t s = sizes[i];
				uint32_t after = (uint32_t)((k + zl_rec_size(s) <= SIZE ? k + zl_rec_size(s)
											 : zl_rec_size(s)) & (SIZE - 1));
				int64_t r2 = SIZE - after;
				uint32_t ts[8];
				int nt = 0;
				add(ts, &nt, 0);
				add(ts, &nt, 8);
				add(ts, &nt, MAXP);
				add(ts, &nt, r2 - 24);
				add(ts, &nt, r2 - 24 + 8);
				for (int j = 0; j < nt; j++)
					one_case(lap, k, s, ts[j]);
			}
		}
	}
	printf("ring_wrap: %lu cases, %lu PAD records, %lu implicit skips, %lu full-ring -EAGAIN\n",
	       ncases, npad, nskip, nfull);
	CHECK(npad > 0 && nskip > 0 && nfull > 0);
	return T_EXIT_PASS;
}
