/* SPDX-License-Identifier: MIT */
/*
 * ring_torn: a slow, out-of-order writer. Records are written BY HAND in the
 * documented format, one byte at a time in random order, and the receiver
 * polls (zl_ring_rx_peek and zl_ring_rx_get) after every single store.
 * It must say -EAGAIN (get: or -ENOMSG) until the record is complete and
 * then deliver exactly the right bytes.
 * Stale records and footers of earlier laps (or of another key), and
 * memory never written, must never validate.
 */
#include "ringlib.h"

#define SIZE 4096u

enum order {
	FTR_THEN_TAG, /* body, footer, htag last (shm; RDMA TAG_FIRST) */
	TAG_THEN_FTR, /* body, htag, footer last (RDMA in-order placement) */
};

struct hw {
	struct rpair p;
	enum zl_ring_layout layout;
	bool tag_last;
	uint64_t pos, seq; /* the hand writer's own position and count */
	struct tl_rng r;
	uint64_t stores, peeks;
};

static void peek_eagain(struct hw *h, const char *what)
{
	const void *rp;
	uint32_t rl;
	uint8_t ty;
	int rc = zl_ring_rx_peek(&h->p.rx, &rp, &rl, &ty);
	h->peeks++;
	CHECKF(rc == -EAGAIN, "%s: peek = %d (%s) before the record is complete (seq %" PRIu64
	       ", pos %" PRIu64 ")", what, rc, zl_strerror(rc), h->seq, h->pos);
	/* the one-step receive too: nothing, and nothing consumed (-ENOMSG
	 * hands a record of another type, seen by its htag, to peek) */
	static uint8_t buf[SIZE];
	uint64_t rpos = h->p.rx.rpos;
	rc = zl_ring_rx_get(&h->p.rx, buf, SIZE, &rl, 1, false);
	CHECKF((rc == -EAGAIN || rc == -ENOMSG) && h->p.rx.rpos == rpos,
	       "%s: get = %d (%s) before the record is complete (seq %" PRIu64 ")", what, rc,
	       zl_strerror(rc), h->seq);
}

/* Store the bytes of src at buf+off..off+n in random order, peeking after
 * every byte; the last byte is not followed by a peek if last_is_final. */
static void store_bytes(struct hw *h, const uint32_t *offs, const uint8_t *vals, uint32_t n,
			bool last_is_final, const char *what)
{
	uint32_t *perm = malloc((n + 1) * sizeof(*perm));
	CHECK(perm);
	for (uint32_t i = 0; i < n; i++)
		perm[i] = i;
	for (uint32_t i = n; i > 1; i--) {
		uint32_t j = (uint32_t)tl_rand_below(&h->r, i);
		uint32_t t = perm[i - 1];
		perm[i - 1] = perm[j];
		perm[j] = t;
	}
	for (uint32_t i = 0; i < n; i++) {
		h->p.buf[offs[perm[i]]] = vals[perm[i]];
		h->stores++;
		if (!(last_is_final && i == n - 1))
			peek_eagain(h, what);
	}
	free(perm);
}

/* Make the 64-bit word at off differ from its final value v in every byte
 * first, so a byte-wise store really passes through torn values. */
static void store_word(struct hw *h, uint32_t off, uint64_t v, bool final, const char *what)
{
	uint32_t offs[8];
	uint8_t vals[8];
	for (int i = 0; i < 8; i++) {
		offs[i] = off + (uint32_t)i;
		vals[i] = (uint8_t)(v >> (8 * i));
		if (h->p.buf[off + i] == vals[i])
			h->p.buf[off + i] ^= 0x5a;
	}
	peek_eagain(h, what);
	store_bytes(h, offs, vals, 8, final, what);
}

/* Write one record of len bytes, torn, and check the receiver. */
static void torn_record(struct hw *h, uint32_t len, uint8_t type, enum order ord,
			const uint8_t *payload)
{
	uint32_t off = (uint32_t)(h->pos & (SIZE - 1));
	uint32_t rs = zl_rec_size(len);
	uint64_t tag = zl_ring_htag(h->p.key, h->seq);
	uint32_t lo = lay_len_off(h->layout), to = lay_tag_off(h->layout);

	peek_eagain(h, "stale record before writing");
	/* body: len word and payload, byte by byte in random order */
	uint32_t n = 8 + (payload ? len : 0); /* a PAD's payload is not written */
	uint32_t *offs = malloc(n * sizeof(*offs));
	uint8_t *vals = malloc(n);
	CHECK(offs && vals);
	uint64_t lw = len_word(len, type);
	for (uint32_t i = 0; i < 8; i++) {
		offs[i] = off + lo + i;
		vals[i] = (uint8_t)(lw >> (8 * i));
	}
	for (uint32_t i = 0; i + 8 < n; i++) {
		offs[8 + i] = off + ZL_REC_HDR + i;
		vals[8 + i] = payload[i];
	}
	store_bytes(h, offs, vals, n, false, "body");
	free(offs);
	free(vals);
	if (ord == FTR_THEN_TAG) {
		store_word(h, off + rs - 8, zl_ring_ftag(h->p.key, h->seq), false, "footer (htag not yet)");
		store_word(h, off + to, tag, true, "htag");
	} else {
		store_word(h, off + to, tag, false, "htag (footer not yet)");
		store_word(h, off + rs - 8, zl_ring_ftag(h->p.key, h->seq), true, "footer");
	}
	h->seq++;
	h->pos += rs;
}

static void write_pad(struct hw *h, uint32_t rem, enum order ord)
{
	if (rem >= ZL_REC_OVERHEAD)
		torn_record(h, rem - ZL_REC_OVERHEAD, ZL_REC_PAD, ord, NULL);
	else
		h->pos += rem; /* skipped by rule */
}

static void run(enum zl_ring_layout layout, bool tag_last, uint64_t seed, int nrec)
{
	struct hw h;
	memset(&h, 0, sizeof(h));
	h.layout = layout;
	h.tag_last = tag_last;
	h.r.s = seed;
	rp_init(&h.p, SIZE, tl_rand(&h.r), 0, layout, tag_last);
	for (uint32_t i = 0; i < SIZE; i++) /* garbage to start with */
		h.p.buf[i] = (uint8_t)tl_rand(&h.r);
	uint8_t payload[SIZE];
	for (int k = 0; k < nrec; k++) {
		uint32_t len = (uint32_t)(tl_rand_below(&h.r, 4) ? tl_rand_below(&h.r, 64)
								  : tl_rand_below(&h.r, 700));
		enum order ord = tag_last ? FTR_THEN_TAG : (enum order)tl_rand_below(&h.r, 2);
		uint32_t rem = SIZE - (uint32_t)(h.pos & (SIZE - 1));
		if (zl_rec_size(len) > rem)
			write_pad(&h, rem, ord);
		for (uint32_t i = 0; i < len; i++)
			payload[i] = (uint8_t)tl_rand(&h.r);
		uint8_t type = (uint8_t)(1 + tl_rand_below(&h.r, 4));
		uint32_t off = (uint32_t)(h.pos & (SIZE - 1));
		torn_record(&h, len, type, ord, payload);

		const void *rp;
		uint32_t rl;
		uint8_t ty;
		if (type == ZL_REC_MSG && k % 2) {
			static uint8_t got[SIZE];
			CHECK_OK(zl_ring_rx_get(&h.p.rx, got, SIZE, &rl, 1, false));
			CHECKF(rl == len && !memcmp(got, payload, len), "record %d: get %u bytes, want %u",
			       k, rl, len);
			zl_ring_rx_flush_rpos(&h.p.rx);
			continue;
		}
		CHECK_OK(zl_ring_rx_peek(&h.p.rx, &rp, &rl, &ty));
		CHECKF(rl == len && ty == type, "record %d: len %u type %u, want %u %u", k, rl, ty, len,
		       type);
		CHECK(rp == h.p.buf + off + ZL_REC_HDR);
		CHECKF(!memcmp(rp, payload, len), "record %d: payload differs", k);
		zl_ring_rx_consume(&h.p.rx);
		zl_ring_rx_flush_rpos(&h.p.rx);
	}
	CHECK(h.p.rx.seq == h.seq);
	printf("layout %s tag_last %d: %d records, %" PRIu64 " byte stores, %" PRIu64
	       " polls, laps %" PRIu64 "\n",
	       layout == ZL_LAYOUT_TAG_FIRST ? "TAG_FIRST" : "LEN_FIRST", tag_last, nrec, h.stores,
	       h.peeks, h.pos / SIZE);
	rp_free(&h.p);
}

/* ---- stale data -------------------------------------------------------- */

static int peek_rc(struct rpair *p)
{
	const void *rp;
	uint32_t rl;
	uint8_t ty;
	int rc = zl_ring_rx_peek(&p->rx, &rp, &rl, &ty);
	return rc ? rc : zl_ring_rx_verify(&p->rx);
}

static void stale(bool tag_last)
{
	struct rpair p;
	uint64_t key = 0x9abcdef012345678ull;
	rp_init(&p, SIZE, key, 0, ZL_LAYOUT_LEN_FIRST, tag_last);
	key = p.key;
	uint8_t pl[64];
	memset(pl, 0x11, sizeof(pl));

	/* never-written memory: zeros, ones */
	CHECK_RC(peek_rc(&p), -EAGAIN);
	memset(p.buf, 0xff, SIZE);
	CHECK_RC(peek_rc(&p), -EAGAIN);

	/* lap 0: 64 records of 40 + 24 bytes, consumed */
	for (uint64_t s = 0; s < 64; s++)
		hand_record(p.buf, SIZE, ZL_LAYOUT_LEN_FIRST, (uint32_t)s * 64, len_word(40, ZL_REC_MSG),
			    s, key, pl, 40);
	for (int i = 0; i < 64; i++) {
		const void *rp;
		uint32_t rl;
		uint8_t ty;
		CHECK_OK(zl_ring_rx_peek(&p.rx, &rp, &rl, &ty));
		CHECK(rl == 40);
		zl_ring_rx_consume(&p.rx);
	}
	/* lap 1 expects seq 64 at offset 0; lap 0's seq 0 is still there */
	CHECK(p.rx.rpos == SIZE && p.rx.seq == 64);
	CHECK_RC(peek_rc(&p), -EAGAIN);
	/* a complete record of an older seq, of a future seq, of another key */
	const uint64_t bad_seqs[] = { 0, 1, 63, 65, 64 + (1ull << 62), 64 ^ (1ull << 63) };
	for (size_t i = 0; i < sizeof(bad_seqs) / sizeof(bad_seqs[0]); i++) {
		hand_record(p.buf, SIZE, ZL_LAYOUT_LEN_FIRST, 0, len_word(8, ZL_REC_MSG), bad_seqs[i],
			    key, pl, 8);
		CHECKF(peek_rc(&p) == -EAGAIN, "a record with seq %" PRIu64 " validated at seq 64",
		       bad_seqs[i]);
	}
	hand_record(p.buf, SIZE, ZL_LAYOUT_LEN_FIRST, 0, len_word(8, ZL_REC_MSG), 64,
		    key ^ 0x100, pl, 8);
	CHECK_RC(peek_rc(&p), -EAGAIN);
	/* header and footer of two different records (tags swapped) */
	put64(p.buf, 8, zl_ring_ftag(key, 64));
	put64(p.buf, 24 + 8 - 8, zl_ring_htag(key, 64));
	CHECK_RC(peek_rc(&p), -EAGAIN);

	/* the right htag, but the footer is the one of the record that was
	 * there a lap ago (same length, seq 0) */
	hand_record(p.buf, SIZE, ZL_LAYOUT_LEN_FIRST, 0, len_word(40, ZL_REC_MSG), 0, key, pl, 40);
	put64(p.buf, 0, len_word(40, ZL_REC_MSG));
	put64(p.buf, 8, zl_ring_htag(key, 64)); /* new htag, old footer (seq 0) stays */
	CHECK(get64(p.buf, 56) == zl_ring_ftag(key, 0));
	CHECK_RC(peek_rc(&p), tag_last ? -EPROTO : -EAGAIN);
	/* footer of the right seq but another key */
	put64(p.buf, 56, zl_ring_ftag(key ^ 0x40, 64));
	CHECK_RC(peek_rc(&p), tag_last ? -EPROTO : -EAGAIN);
	if (!tag_last) {
		/* split record: footer never written, many polls */
		for (int i = 0; i < 100; i++)
			CHECK_RC(peek_rc(&p), -EAGAIN);
		/* now the footer lands */
		put64(p.buf, 56, zl_ring_ftag(key, 64));
		const void *rp;
		uint32_t rl;
		uint8_t ty;
		CHECK_OK(zl_ring_rx_peek(&p.rx, &rp, &rl, &ty));
		CHECK(rl == 40 && rp == p.buf + 16 && !memcmp(rp, pl, 40));
	}
	rp_free(&p);
}

/* Memory never written (zero) must not validate at any seq, even at the
 * one where the key's low bits and seq cancel out (no tag is zero). */
static void zeroed(uint64_t seed)
{
	struct tl_rng r = { .s = seed };
	static uint8_t got[SIZE];
	for (int i = 0; i < 64; i++) {
		uint64_t raw = tl_rand(&r) & ((1ull << 62) - 1);
		struct rpair p;
		rp_init(&p, SIZE, raw, 0, i & 1 ? ZL_LAYOUT_TAG_FIRST : ZL_LAYOUT_LEN_FIRST, i & 2);
		p.rx.seq = raw;
		uint32_t n;
		CHECKF(peek_rc(&p) == -EAGAIN, "zeroed memory validated at seq %" PRIu64, raw);
		CHECKF(zl_ring_rx_get(&p.rx, got, SIZE, &n, 1, false) == -EAGAIN,
		       "zeroed memory taken at seq %" PRIu64, raw);
		rp_free(&p);
	}
}

int main(void)
{
	uint64_t seed = tl_seed();
	int n = (int)tl_scaled(3000);
	run(ZL_LAYOUT_LEN_FIRST, false, seed, n);
	run(ZL_LAYOUT_LEN_FIRST, true, seed + 1, n);
	run(ZL_LAYOUT_TAG_FIRST, true, seed + 2, n);
	run(ZL_LAYOUT_TAG_FIRST, false, seed + 3, n);
	stale(false);
	stale(true);
	zeroed(seed + 4);
	return T_EXIT_PASS;
}
