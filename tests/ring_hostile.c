/* SPDX-License-Identifier: MIT */
/*
 * ring_hostile: records with valid tags but impossible contents must give
 * -EPROTO from zl_ring_rx_peek without any out-of-bounds access (the ring
 * is malloc'ed to exactly its size; run under ASan), the short paths
 * (zl_ring_rx_peek_msg, zl_ring_rx_get) must refuse them and leave them to
 * peek, and a receiver that
 * publishes an impossible read position must give -EPROTO from
 * zl_ring_tx_reserve.
 */
#include "ringlib.h"

#define SIZE 4096u
#define MAXP zl_ring_max_payload(SIZE)

static uint8_t peeked_type; /* of the last record peek accepted */

static int peek(struct rpair *p)
{
	const void *rp;
	uint32_t rl;
	uint8_t ty = 0;
	int rc = zl_ring_rx_peek(&p->rx, &rp, &rl, &ty);
	peeked_type = ty;
	if (rc == 0)
		rc = zl_ring_rx_verify(&p->rx);
	if (rc == 0) {
		CHECK((const uint8_t *)rp >= p->buf && (const uint8_t *)rp + rl <= p->buf + SIZE);
		CHECK(ty >= ZL_REC_MSG && ty <= ZL_REC_TYPE_MAX && ty != ZL_REC_PAD);
	}
	return rc;
}

/* After peek said rc: the short paths take the record only if peek took it
 * and it is a whole message, and otherwise change nothing. */
static void short_paths(struct rpair *p, int rc)
{
	static uint8_t out[SIZE];
	const void *rp = NULL;
	uint32_t n = 0, m = 0;
	uint64_t rpos = p->rx.rpos, seq = p->rx.seq;
	bool ok = rc == 0 && peeked_type == ZL_REC_MSG;
	int a = zl_ring_rx_peek_msg(&p->rx, &rp, &n, 1, false);
	CHECKF(ok ? a == 0 : a == -ENOMSG || a == -EAGAIN, "peek_msg = %d after peek = %d", a, rc);
	CHECK(p->rx.rpos == rpos && p->rx.seq == seq);
	if (a == 0)
		CHECK((const uint8_t *)rp >= p->buf && (const uint8_t *)rp + n <= p->buf + SIZE);
	int b = zl_ring_rx_get(&p->rx, out, SIZE, &m, 1, false);
	CHECKF(ok ? b == 0 : b == -ENOMSG || b == -EAGAIN, "get = %d after peek = %d", b, rc);
	if (b == 0)
		CHECK(m == n && p->rx.seq == seq + 1);
	else
		CHECK(p->rx.rpos == rpos && p->rx.seq == seq);
}

/* Put the receiver at offset k (consuming hand-written records), then write
 * a record with len word lw and valid tags there; expect want. */
static void one(enum zl_ring_layout l, bool tag_last, uint32_t k, uint64_t lw, int want,
		const char *what)
{
	struct rpair p;
	rp_init(&p, SIZE, 0x1234567890abcdefull + k, 0, l, tag_last);
	uint64_t seq = 0;
	while (p.rx.rpos < k) {
		uint32_t left = k - (uint32_t)p.rx.rpos;
		uint32_t rs = left > 2048 ? 1024 : left;
		CHECK(rs >= ZL_REC_OVERHEAD);
		hand_record(p.buf, SIZE, l, (uint32_t)p.rx.rpos, len_word(rs - ZL_REC_OVERHEAD, 1), seq++,
			    p.key, NULL, 0);
		CHECK_OK(peek(&p));
		zl_ring_rx_consume(&p.rx);
	}
	hand_record(p.buf, SIZE, l, k, lw, seq, p.key, NULL, 0);
	int rc = peek(&p);
	CHECKF(rc == want, "%s (layout %d tag_last %d, offset %u, len word %#" PRIx64
	       "): peek = %d (%s), want %d (%s)", what, l, tag_last, k, lw, rc, zl_strerror(rc),
	       want, zl_strerror(want));
	/* asking again gives the same answer and does not move */
	CHECK_RC(peek(&p), want);
	short_paths(&p, want);
	rp_free(&p);
}

static void records(enum zl_ring_layout l, bool tag_last)
{
	const int P = -EPROTO;
	/* sanity: a good record passes */
	one(l, tag_last, 0, len_word(100, ZL_REC_MSG), 0, "good record");
	one(l, tag_last, 2000, len_word(MAXP, ZL_REC_MSG), 0, "good max record");

	/* lengths */
	one(l, tag_last, 0, len_word(MAXP + 1, ZL_REC_MSG), P, "len > max payload");
	one(l, tag_last, 0, len_word(MAXP + 8, ZL_REC_MSG), P, "len > max payload (aligned)");
	one(l, tag_last, 0, len_word(SIZE, ZL_REC_MSG), P, "len = ring size");
	one(l, tag_last, 0, len_word(SIZE - 24, ZL_REC_MSG), P, "record = whole ring");
	one(l, tag_last, 0, len_word(0xffffffffu, ZL_REC_MSG), P, "len 2^32-1");
	one(l, tag_last, 0, len_word(0xfffffff9u, ZL_REC_MSG), P, "len wrapping rec_size");
	one(l, tag_last, 4064, len_word(0xffffffffu, ZL_REC_MSG), P, "len 2^32-1 at the end");
	/* crossing the ring end */
	one(l, tag_last, 4000, len_word(200, ZL_REC_MSG), P, "record crosses the end");
	one(l, tag_last, 4000, len_word(73, ZL_REC_MSG), P, "record crosses the end by 8");
	one(l, tag_last, 4000, len_word(72, ZL_REC_MSG), 0, "record ends at the end");
	one(l, tag_last, 4072, len_word(1, ZL_REC_MSG), P, "last 24 bytes, len 1");
	one(l, tag_last, 4072, len_word(0, ZL_REC_MSG), 0, "last 24 bytes, len 0");
	/* types */
	one(l, tag_last, 0, len_word(8, 0), P, "type 0");
	one(l, tag_last, 0, len_word(8, ZL_REC_TYPE_MAX + 1), P, "type max+1");
	one(l, tag_last, 0, len_word(8, 0xff), P, "type 255");
	one(l, tag_last, 0, len_word(8, ZL_REC_MSG) | (1ull << 40), P, "reserved bits set");
	one(l, tag_last, 0, len_word(8, ZL_REC_MSG) | (0xffull << 56), P, "reserved top byte");
	/* PAD must end exactly at the ring end */
	one(l, tag_last, 0, len_word(100, ZL_REC_PAD), P, "PAD in the middle");
	one(l, tag_last, 4000, len_word(96 - 24 - 8, ZL_REC_PAD), P, "PAD short of the end");
	one(l, tag_last, 4000, len_word(96 - 24 + 8, ZL_REC_PAD), P, "PAD beyond the end");
	one(l, tag_last, 3000, len_word(SIZE - 3000 - 24, ZL_REC_PAD), -EAGAIN,
	    "PAD to the end, nothing after");
	one(l, tag_last, 0, len_word(SIZE - 24, ZL_REC_PAD), P, "PAD of a whole ring");
}

/* tag_last: a valid htag with a wrong footer is a violation */
static void bad_footer(enum zl_ring_layout l)
{
	struct rpair p;
	rp_init(&p, SIZE, 77, 0, l, true);
	hand_record(p.buf, SIZE, l, 0, len_word(16, ZL_REC_MSG), 0, p.key, NULL, 0);
	put64(p.buf, 16 + 16, 12345);
	CHECK_RC(peek(&p), -EPROTO);
	short_paths(&p, -EPROTO);
	rp_free(&p);
}

/* every len word value class at every offset: no crash, no OOB */
static void sweep(enum zl_ring_layout l, bool tag_last)
{
	const uint64_t lens[] = { 0, 1, 8, 9, 100, MAXP, MAXP + 1, 2048, 4072, 4073, 4096, 8192,
				  0x7fffffff, 0x80000000u, 0xfffffff0u, 0xffffffffu };
	for (uint32_t k = 0; k < SIZE; k += 8) {
		if (k == 8 || k == 16)
			continue;
		for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
			for (uint64_t t = 0; t < 8; t++) {
				struct rpair p;
				rp_init(&p, SIZE, k * 131 + i, 0, l, tag_last);
				/* jump straight to offset k: the rx follows the writer's
				 * records; here we fake one record of size k */
				if (k) {
					if (k < ZL_REC_OVERHEAD) {
						rp_free(&p);
						continue;
					}
					if (k - ZL_REC_OVERHEAD > MAXP) {
						/* two records */
						uint32_t a = (k / 2) & ~7u;
						hand_record(p.buf, SIZE, l, 0, len_word(a - 24, 1), 0, p.key,
							    NULL, 0);
						hand_record(p.buf, SIZE, l, a, len_word(k - a - 24, 1), 1,
							    p.key, NULL, 0);
						CHECK_OK(peek(&p));
						zl_ring_rx_consume(&p.rx);
					} else {
						hand_record(p.buf, SIZE, l, 0, len_word(k - 24, 1), 0, p.key,
							    NULL, 0);
					}
					CHECK_OK(peek(&p));
					zl_ring_rx_consume(&p.rx);
				}
				if (SIZE - k >= ZL_REC_OVERHEAD) {
					hand_record(p.buf, SIZE, l, k, len_word((uint32_t)lens[i], (uint8_t)t),
						    p.rx.seq, p.key, NULL, 0);
				}
				int rc = peek(&p);
				CHECK(rc == 0 || rc == -EAGAIN || rc == -EPROTO);
				short_paths(&p, rc);
				rp_free(&p);
			}
	}
}

/* A receiver publishing impossible read positions. */
static void hostile_rpos(void)
{
	struct rpair p;
	void *ptr;
	rp_init(&p, SIZE, 5, 0, ZL_LAYOUT_LEN_FIRST, false);
	/* fill the ring: 4 records of 1024 bytes, nothing consumed */
	for (int i = 0; i < 4; i++) {
		CHECK_OK(zl_ring_tx_reserve(&p.tx, 1000, ZL_REC_MSG, &ptr));
		CHECK_OK(zl_ring_tx_commit(&p.tx, 1000));
	}
	CHECK_RC(zl_ring_tx_reserve(&p.tx, 0, ZL_REC_MSG, &ptr), -EAGAIN);
	/* ahead of the write position */
	atomic_store(&p.peer_rpos, p.tx.wpos + 8);
	CHECK_RC(zl_ring_tx_reserve(&p.tx, 0, ZL_REC_MSG, &ptr), -EPROTO);
	int err = 0;
	CHECK(!zl_ring_tx_has_room(&p.tx, 0, &err));
	CHECK_RC(err, -EPROTO);
	atomic_store(&p.peer_rpos, UINT64_MAX);
	CHECK_RC(zl_ring_tx_reserve(&p.tx, 0, ZL_REC_MSG, &ptr), -EPROTO);
	/* a legal position, then one going backwards */
	atomic_store(&p.peer_rpos, 2048);
	CHECK_OK(zl_ring_tx_reserve(&p.tx, 1000, ZL_REC_MSG, &ptr));
	CHECK_OK(zl_ring_tx_commit(&p.tx, 1000));
	CHECK_OK(zl_ring_tx_reserve(&p.tx, 1000, ZL_REC_MSG, &ptr));
	CHECK_OK(zl_ring_tx_commit(&p.tx, 1000));
	atomic_store(&p.peer_rpos, 1024);
	CHECK_RC(zl_ring_tx_reserve(&p.tx, 1000, ZL_REC_MSG, &ptr), -EPROTO);
	atomic_store(&p.peer_rpos, 0);
	CHECK_RC(zl_ring_tx_reserve(&p.tx, 1000, ZL_REC_MSG, &ptr), -EPROTO);
	/* nothing was overwritten: wpos did not move */
	CHECK(p.tx.wpos == 6 * 1024);
	rp_free(&p);
}

int main(void)
{
	for (int l = 0; l < 2; l++)
		for (int tl = 0; tl < 2; tl++) {
			records((enum zl_ring_layout)l, tl);
			sweep((enum zl_ring_layout)l, tl);
		}
	bad_footer(ZL_LAYOUT_LEN_FIRST);
	bad_footer(ZL_LAYOUT_TAG_FIRST);
	hostile_rpos();
	printf("ring_hostile: ok\n");
	return T_EXIT_PASS;
}
