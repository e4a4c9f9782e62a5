/* SPDX-License-Identifier: MIT */
/*
 * The ring protocol: variable-size records in a power-of-two ring that the
 * sender fills with one-sided writes and the receiver polls in memory.
 *
 * Record at absolute position P (offset P & mask, 8-byte aligned), layout
 * LEN_FIRST (TAG_FIRST swaps the two header words):
 *
 *   [0]      len word: u32 len | u8 type << 32, upper 24 bits zero
 *   [8]      htag = mix(key ^ seq)
 *   [16]     payload, len bytes, padded to 8
 *   [size-8] ftag = mix(key ^ seq ^ 2^63)
 *
 * seq counts records from 0; key is a random 64-bit value with its top two
 * bits set (zl_ring_key), chosen by the receiver per channel and known only
 * to the two ends; mix is a bijection
 * on 64-bit words with full avalanche (zl_mix64). With line grain (shm)
 * the record is padded further, to 32 bytes when it fits there and to a
 * multiple of 64 otherwise, so that a record shares no cache line with the
 * next one (PAD records stay exact). A record never wraps:
 * when it does not fit before the end of the ring the sender writes a PAD
 * record to the end and starts at offset 0. A tail of fewer than 24 bytes
 * (too short for any record) is skipped by rule, by the sender as soon as
 * it is left and by the receiver when it reaches it.
 *
 * Why a stale or torn record is never delivered. The receiver delivers the
 * record at P only if the htag at P equals htag(seq) AND the ftag at the end
 * computed from its length equals ftag(seq).
 *
 *  1. Tags never repeat. seq grows by one per record and stays below 2^62,
 *     so the inputs key ^ seq (htags, bits 63 and 62 set) and
 *     key ^ seq ^ 2^63 (ftags, bit 63 clear, bit 62 set) of all records are
 *     pairwise distinct and never zero, and mix is a bijection with
 *     mix(0) = 0: no header or footer left from any earlier lap can equal
 *     the tag expected now, and no tag is zero, so memory never written
 *     (zeroed) cannot validate either. The originals zeroed every consumed
 *     byte to get this; nothing is zeroed here and nothing depends on a lap
 *     count.
 *  2. Stale bytes that are not whole tags: payload left from earlier laps,
 *     padding bytes never rewritten, or a fresh payload byte next to seven
 *     bytes of an old tag. Because mix avalanches, tags of neighbouring
 *     records share no structure (with a plain seq ^ key they would share
 *     their high bytes, and one fresh byte over an old tag could complete a
 *     future tag: a test caught exactly that). Any such mixture matches the
 *     expected tag with probability 2^-64, or 2^-56 when one byte of it is
 *     chosen by the application, which never sees the key.
 *  3. Completeness (no torn record):
 *     - shm: the sender stores the len word, payload and ftag, then the htag
 *       with release; the receiver loads the htag with acquire, so a valid
 *       htag makes every earlier store visible. A wrong ftag behind a valid
 *       htag is therefore a protocol violation (tag_last). After a record of
 *       more than two lines, the receiver waits at where the next record's
 *       ftag would be if it had the same size, and looks at the htag only
 *       every 16th poll (zl_ring_rx_wait_ftag): the ftag is stored just
 *       before the htag, so the record is found about as soon, and the
 *       first line is not polled while the sender fills the record. 4 KiB
 *       RTT: 8-10% lower between cores of one cache complex, 1-2% higher on
 *       SMT siblings and 5% across complexes, where the first line then
 *       costs a miss of its own. Only the wait changes; the record is then
 *       checked as always.
 *     - RDMA, in-order placement (LEN_FIRST, one WRITE): bytes land in
 *       address order, so a valid htag means the len word has landed, and a
 *       valid ftag (the last word) means everything has.
 *     - RDMA, no in-order placement (TAG_FIRST): the transport WRITEs
 *       [P+8, end) and then the htag in a second WRITE; RC executes WRITEs
 *       in order, so a valid htag means the record is complete (tag_last).
 *     Tags themselves may be seen torn where a NIC places bytes one by one;
 *     a torn tag only matches when its missing bytes already hold their new
 *     values, i.e. when it is as good as complete. (Read positions need a
 *     check word for this reason: see zl_rpos_check.)
 *  4. Reuse: the sender writes over bytes only below the receiver's
 *     published read position, which moves past a record only after the
 *     receiver consumed it; a peeked record stays intact until consumed.
 *  5. Hostile input: the len word is read once, after the htag validated,
 *     and checked (type known, length <= max payload, record inside the
 *     ring, PAD ending exactly at the ring end) before any other access. A
 *     read position from the receiver must lie between the last one seen
 *     and the write position. Violations return -EPROTO, never an
 *     out-of-bounds access.
 *
 * Lazy read position: the receiver publishes its position every
 * publish_every bytes and whenever it is about to wait
 * (zl_ring_rx_flush_rpos); the sender re-reads it only when its cached
 * value leaves too little room.
 */
#ifndef ZL_RING_H
#define ZL_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <errno.h>
#include <string.h>

#include "clock.h"
#include "log.h"

#define ZL_REC_HDR 16u   /* a len word (u32 len, u8 type, u8[3] zero) and u64 htag */
#define ZL_REC_FTR 8u    /* u64 ftag */
#define ZL_REC_OVERHEAD (ZL_REC_HDR + ZL_REC_FTR)

enum zl_rec_type {
	ZL_REC_MSG = 1,        /* a whole message */
	ZL_REC_FIRST = 2,      /* first fragment; payload starts with u64 total */
	ZL_REC_MID = 3,        /* middle fragment */
	ZL_REC_LAST = 4,       /* last fragment */
	ZL_REC_PAD = 5,        /* filler up to the end of the ring */
	ZL_REC_CLOSE = 6,      /* the sender closed the channel gracefully */
	ZL_REC_TYPE_MAX = 6,
};

/*
 * Where the two header words sit. LEN_FIRST ([len word][htag]) is the
 * default, for shm and for RDMA devices that place a WRITE's data in
 * address order. TAG_FIRST ([htag][len word]) is for RDMA without in-order
 * placement: the transport sends [off+8, off+size) in one WRITE and then the
 * htag alone in a second WRITE.
 */
enum zl_ring_layout { ZL_LAYOUT_LEN_FIRST = 0, ZL_LAYOUT_TAG_FIRST = 1 };

/* Total bytes a record with len payload bytes occupies (8-byte aligned). */
static inline uint32_t zl_rec_size(uint32_t len)
{
	return ZL_REC_OVERHEAD + ((len + 7u) & ~7u);
}

/* Bytes of a record with len payload bytes and this type in a ring with
 * line grain or not. Records of line grain start at multiples of 32, so
 * one of up to 32 bytes stays in one cache line and a larger one starts a
 * line: two records never share a line, and a message's cache lines cross
 * to the receiver once each (a 64-byte message in word grain spans 2.4
 * lines on average, some of them written twice). */
static inline uint32_t zl_ring_rec_bytes(bool lines, uint32_t len, uint8_t type)
{
	uint32_t rs = zl_rec_size(len);
	if (!lines || type == ZL_REC_PAD)
		return rs;
	return rs <= 32 ? 32 : (rs + 63u) & ~63u;
}

/* A keyed bijective 64-bit mix (splitmix64's finalizer). */
static inline uint64_t zl_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The channel key from a random value: the top two bits set keep every
 * tag input away from zero (see the top). */
static inline uint64_t zl_ring_key(uint64_t random) { return random | 3ull << 62; }

/* The header and footer tags of record seq (seq < 2^62): see the top. */
static inline uint64_t zl_ring_htag(uint64_t key, uint64_t seq) { return zl_mix64(key ^ seq); }
static inline uint64_t zl_ring_ftag(uint64_t key, uint64_t seq)
{
	return zl_mix64(key ^ seq ^ (1ull << 63));
}

/* The check word published with a read position over RDMA (a keyed
 * 64-bit mix: a torn mix of two pairs matches with probability 2^-64). */
static inline uint64_t zl_rpos_check(uint64_t rpos, uint64_t key)
{
	return zl_mix64(zl_mix64(rpos ^ key) + 1);
}

/* Largest payload of one record in a ring of the given size. */
static inline uint32_t zl_ring_max_payload(uint32_t ring_size)
{
	return ring_size / 2 - ZL_REC_OVERHEAD;
}

struct zl_ring_tx {
	uint8_t *stage;          /* records are built here */
	uint32_t size, mask;
	uint64_t key;            /* the receiver's random channel key */
	uint64_t wpos;           /* absolute position of the next record */
	uint64_t seq;            /* number of records written */
	uint64_t htag, ftag;     /* tags of record seq, computed ahead */
	uint64_t rpos_cache;     /* last peer read position seen */
	const _Atomic uint64_t *peer_rpos; /* local word the peer publishes into */
	/* Where the peer's NIC writes rpos, an 8-byte WRITE may be seen torn
	 * (rxe copies bytewise); then the peer also writes
	 * zl_rpos_check(rpos, key) next to it and we accept only a matching
	 * pair. NULL where the store is atomic (shm). */
	const _Atomic uint64_t *peer_rpos_check;
	uint8_t tag_off, len_off; /* from the layout */
	bool lines;              /* line grain (zl_ring_rec_bytes) */
	int (*push)(void *ctx, uint32_t off, uint32_t len);
	void *ctx;
	/* open reservation */
	bool open;
	uint32_t res_off, res_len;
	uint8_t res_type;
	uint64_t rpos_reads;     /* statistics */
};

struct zl_ring_rx {
	const uint8_t *buf;      /* the local ring the peer writes into */
	uint32_t size, mask;
	uint64_t key;
	uint64_t rpos;           /* absolute position of the next record */
	uint64_t seq;            /* records consumed */
	uint64_t htag, ftag;     /* the tags expected next, valid if htag_seq == seq */
	uint64_t htag_seq;
	uint64_t published;      /* last read position published */
	uint32_t publish_every;  /* publish after this many consumed bytes */
	uint32_t cur_size;       /* size of the record being peeked, 0 if none */
	uint32_t cur_off;        /* and its offset */
	uint8_t tag_off, len_off; /* from the layout */
	bool lines;              /* line grain (zl_ring_rec_bytes) */
	uint32_t last_rs;        /* size of the last record consumed (0: none) */
	/* Where completions, not memory, say that a record has landed (RDMA
	 * WRITE_WITH_IMM): records with seq >= *avail are not looked at.
	 * NULL otherwise. */
	const _Atomic uint64_t *avail;
	bool tag_last;           /* the htag is published after everything else
	                            (shm, TAG_FIRST): a bad footer is then an error */
	void (*publish)(void *ctx, uint64_t rpos);
	void *ctx;
	uint64_t rpos_updates;   /* statistics */
	/* rpos, for another thread of ours: stored (release) once the
	 * consumed records are no longer read, so it may be published */
	_Atomic uint64_t done;
};

/* Initialise. size must be a power of two >= 4096; key is random.
 * publish_every 0 means size / 4. */
void zl_ring_tx_init(struct zl_ring_tx *tx, void *stage, uint32_t size, uint64_t key,
		     const _Atomic uint64_t *peer_rpos,
		     int (*push)(void *, uint32_t, uint32_t), void *ctx);
void zl_ring_rx_init(struct zl_ring_rx *rx, const void *buf, uint32_t size, uint64_t key,
		     uint32_t publish_every, void (*publish)(void *, uint64_t), void *ctx);

/* Switch layout (before first use). For rx, tag_last says whether the
 * sender publishes the htag last (shm, or RDMA TAG_FIRST). */
void zl_ring_tx_set_layout(struct zl_ring_tx *tx, enum zl_ring_layout layout);
void zl_ring_rx_set_layout(struct zl_ring_rx *rx, enum zl_ring_layout layout, bool tag_last);

/* Pad records to cache lines (zl_ring_rec_bytes); both ends must agree,
 * before first use. */
static inline void zl_ring_tx_set_lines(struct zl_ring_tx *tx, bool lines) { tx->lines = lines; }
static inline void zl_ring_rx_set_lines(struct zl_ring_rx *rx, bool lines) { rx->lines = lines; }

/* ---- the operations: inline, for the hot path (as DPDK's rte_ring.h) ---- */

/* Copy n bytes between a ring and a buffer. Up to 128 bytes this takes a
 * few fixed-size moves, which may overlap, without a call or a loop: the
 * call into the C library's memcpy cost about 3% of a 64-byte round trip. */
static inline void zl_ring_copy(void *dst, const void *src, uint32_t n)
{
#if defined(__SSE2__)
	char *d = dst;
	const char *s = src;
	if (n >= 16 && n <= 128) {
		__m128i a = _mm_loadu_si128((const __m128i *)s);
		__m128i b = _mm_loadu_si128((const __m128i *)(s + n - 16));
		if (n > 32) {
			__m128i c = _mm_loadu_si128((const __m128i *)(s + 16));
			__m128i e = _mm_loadu_si128((const __m128i *)(s + n - 32));
			if (n > 64) {
				__m128i f = _mm_loadu_si128((const __m128i *)(s + 32));
				__m128i g = _mm_loadu_si128((const __m128i *)(s + 48));
				__m128i h = _mm_loadu_si128((const __m128i *)(s + n - 64));
				__m128i i = _mm_loadu_si128((const __m128i *)(s + n - 48));
				_mm_storeu_si128((__m128i *)(d + 32), f);
				_mm_storeu_si128((__m128i *)(d + 48), g);
				_mm_storeu_si128((__m128i *)(d + n - 64), h);
				_mm_storeu_si128((__m128i *)(d + n - 48), i);
			}
			_mm_storeu_si128((__m128i *)(d + 16), c);
			_mm_storeu_si128((__m128i *)(d + n - 32), e);
		}
		_mm_storeu_si128((__m128i *)d, a);
		_mm_storeu_si128((__m128i *)(d + n - 16), b);
		return;
	}
	if (n >= 8 && n < 16) {
		uint64_t a, b;
		memcpy(&a, s, 8);
		memcpy(&b, s + n - 8, 8);
		memcpy(d, &a, 8);
		memcpy(d + n - 8, &b, 8);
		return;
	}
#endif
	memcpy(dst, src, n);
}

static inline _Atomic uint64_t *zl_ring_word(const uint8_t *base, uint32_t off)
{
	return (_Atomic uint64_t *)(uintptr_t)(base + off);
}

/* ---- sender ------------------------------------------------------------ */

static inline int zl_ring_refresh_rpos(struct zl_ring_tx *tx)
{
	/* acquire: the receiver's reads of the old bytes happen before we
	 * overwrite them */
	uint64_t r = atomic_load_explicit(tx->peer_rpos, memory_order_acquire);
	tx->rpos_reads++;
	if (tx->peer_rpos_check &&
	    atomic_load_explicit(tx->peer_rpos_check, memory_order_acquire) !=
		    zl_rpos_check(r, tx->key))
		return 0; /* caught mid-update: keep the old value, look again later */
	if (r < tx->rpos_cache || r > tx->wpos) {
		ZL_LOG(ZL_LOG_ERROR, "peer read position %llu outside [%llu, %llu]",
		       (unsigned long long)r, (unsigned long long)tx->rpos_cache,
		       (unsigned long long)tx->wpos);
		return -EPROTO;
	}
	tx->rpos_cache = r;
	return 0;
}

/* Bytes needed at the current position for a record of rs bytes,
 * including the filler up to the ring end when it does not fit. */
static inline uint32_t zl_ring_bytes_needed(const struct zl_ring_tx *tx, uint32_t rs)
{
	uint32_t rem = tx->size - (uint32_t)(tx->wpos & tx->mask);
	return rs <= rem ? rs : rem + rs;
}

/* Free bytes ahead of wpos. After a skipped tail, wpos - rpos may exceed
 * the ring size by up to 16 bytes that hold no data: that is no room. */
static inline uint64_t zl_ring_room(const struct zl_ring_tx *tx)
{
	uint64_t used = tx->wpos - tx->rpos_cache;
	return used >= tx->size ? 0 : tx->size - used;
}

static inline bool zl_ring_room_for(struct zl_ring_tx *tx, uint32_t need, int *err)
{
	*err = 0;
	if (zl_ring_room(tx) >= need)
		return true;
	*err = zl_ring_refresh_rpos(tx);
	return !*err && zl_ring_room(tx) >= need;
}

/* Free bytes the sender may use without re-reading rpos (for wait loops). */
static inline bool zl_ring_tx_has_room(struct zl_ring_tx *tx, uint32_t len, int *err)
{
	*err = 0;
	if (len > zl_ring_max_payload(tx->size)) {
		*err = -EMSGSIZE;
		return false;
	}
	return zl_ring_room_for(tx, zl_ring_bytes_needed(tx, zl_ring_rec_bytes(tx->lines, len,
										  ZL_REC_MSG)),
				err);
}

/* Write the header words and footer of a record of rs bytes (its
 * zl_ring_rec_bytes); the htag goes last with release so that on shm it
 * publishes everything before it. */
static inline int zl_ring_write_record(struct zl_ring_tx *tx, uint32_t off, uint32_t len,
				       uint8_t type, uint32_t rs)
{
	atomic_store_explicit(zl_ring_word(tx->stage, off + tx->len_off),
			      (uint64_t)len | (uint64_t)type << 32, memory_order_relaxed);
	atomic_store_explicit(zl_ring_word(tx->stage, off + rs - 8), tx->ftag, memory_order_relaxed);
	atomic_store_explicit(zl_ring_word(tx->stage, off + tx->tag_off), tx->htag, memory_order_release);
	tx->seq++;
	tx->wpos += rs;
	/* a tail too short for any record is skipped by rule, by both sides;
	 * skip it now so that the receiver's position never passes ours */
	uint32_t rem = tx->size - (uint32_t)(tx->wpos & tx->mask);
	if (rem < ZL_REC_OVERHEAD)
		tx->wpos += rem;
	int r = tx->push ? tx->push(tx->ctx, off, rs) : 0;
	/* the next tags now, off the path from this record to the peer */
	tx->htag = zl_ring_htag(tx->key, tx->seq);
	tx->ftag = zl_ring_ftag(tx->key, tx->seq);
	return r;
}

/*
 * Reserve a record of len payload bytes and type; *payload points into stage.
 *   0         reserved
 *   -EAGAIN   not enough free space (after re-reading the peer's rpos)
 *   -EMSGSIZE len > zl_ring_max_payload(size)
 *   -EBUSY    a reservation is open
 *   -EPROTO   the peer published an impossible read position
 *   other     an error from push() while writing a PAD record
 */
static inline int zl_ring_tx_reserve(struct zl_ring_tx *tx, uint32_t len, uint8_t type,
				     void **payload)
{
	if (tx->open)
		return -EBUSY;
	if (len > zl_ring_max_payload(tx->size))
		return -EMSGSIZE;
	uint32_t rs = zl_ring_rec_bytes(tx->lines, len, type);
	int err;
	if (!zl_ring_room_for(tx, zl_ring_bytes_needed(tx, rs), &err))
		return err ? err : -EAGAIN;
	uint32_t off = (uint32_t)(tx->wpos & tx->mask);
	uint32_t rem = tx->size - off;
	if (rs > rem) { /* rem >= 24 here: write_record skips shorter tails */
		err = zl_ring_write_record(tx, off, rem - ZL_REC_OVERHEAD, ZL_REC_PAD, rem);
		if (err)
			return err;
		off = 0;
	}
	tx->open = true;
	tx->res_off = off;
	tx->res_len = len;
	tx->res_type = type;
	*payload = tx->stage + off + ZL_REC_HDR;
	return 0;
}

/* Whether a record of rs bytes can go at off (the write position) now,
 * without a PAD record or a new read position, and no reservation is open. */
static inline bool zl_ring_tx_fits(const struct zl_ring_tx *tx, uint32_t rs, uint32_t off)
{
	return !tx->open && rs <= tx->size - off && rs <= zl_ring_room(tx);
}

/* zl_ring_tx_reserve of a whole message in one step, when it fits
 * (zl_ring_tx_fits): 0, or -EAGAIN with nothing done, for
 * zl_ring_tx_reserve to take over. len must be at most
 * zl_ring_max_payload(size). */
static inline int zl_ring_tx_reserve_msg(struct zl_ring_tx *tx, uint32_t len, void **payload)
{
	uint32_t rs = zl_ring_rec_bytes(tx->lines, len, ZL_REC_MSG);
	uint32_t off = (uint32_t)(tx->wpos & tx->mask);
	if (!zl_ring_tx_fits(tx, rs, off))
		return -EAGAIN;
	tx->open = true;
	tx->res_off = off;
	tx->res_len = len;
	tx->res_type = ZL_REC_MSG;
	*payload = tx->stage + off + ZL_REC_HDR;
	return 0;
}

/*
 * The common send in one step: copy len bytes from p into a record of this
 * type when no reservation is open, the record fits before the ring end and
 * the cached read position leaves room. -EAGAIN when any of that is not
 * so: nothing was written, and reserve/commit (which re-read the read
 * position and write PAD records) take over. Otherwise 0, or an error from
 * push(). len must be at most zl_ring_max_payload(size).
 */
static inline int zl_ring_tx_put(struct zl_ring_tx *tx, const void *p, uint32_t len, uint8_t type)
{
	uint32_t rs = zl_ring_rec_bytes(tx->lines, len, type);
	uint32_t off = (uint32_t)(tx->wpos & tx->mask);
	if (!zl_ring_tx_fits(tx, rs, off))
		return -EAGAIN;
	if (len) /* p may be NULL then */
		zl_ring_copy(tx->stage + off + ZL_REC_HDR, p, len);
	return zl_ring_write_record(tx, off, len, type, rs);
}

/* Publish the open reservation truncated to len bytes.
 *   0, -EINVAL (none open or len too large), or an error from push(). */
static inline int zl_ring_tx_commit(struct zl_ring_tx *tx, uint32_t len)
{
	if (!tx->open || len > tx->res_len)
		return -EINVAL;
	tx->open = false;
	return zl_ring_write_record(tx, tx->res_off, len, tx->res_type,
				    zl_ring_rec_bytes(tx->lines, len, tx->res_type));
}

/* Drop the open reservation without sending anything. */
static inline void zl_ring_tx_abort(struct zl_ring_tx *tx)
{
	tx->open = false;
}

/* ---- receiver ---------------------------------------------------------- */

static inline void zl_ring_publish_now(struct zl_ring_rx *rx)
{
	rx->published = rx->rpos;
	rx->rpos_updates++;
	rx->publish(rx->ctx, rx->rpos);
}

/* Publish the read position now if anything is unpublished (called before
 * the receiver waits, so a sender short of room is never starved). */
static inline void zl_ring_rx_flush_rpos(struct zl_ring_rx *rx)
{
	if (rx->published != rx->rpos)
		zl_ring_publish_now(rx);
}

/* Whether the last record consumed had at most two lines (or there was
 * none yet): the next one is then likely short too. */
static inline bool zl_ring_rx_short_last(const struct zl_ring_rx *rx)
{
	return rx->last_rs <= 2 * 64;
}

static inline void zl_ring_advance(struct zl_ring_rx *rx, uint32_t rs)
{
	rx->rpos += rs;
	rx->seq++; /* the next htag is computed by the next peek, while it waits */
	rx->last_rs = rs;
	atomic_store_explicit(&rx->done, rx->rpos, memory_order_release);
	if (rx->rpos - rx->published >= rx->publish_every)
		zl_ring_publish_now(rx);
}

static inline int zl_ring_rx_verify(struct zl_ring_rx *rx);

/* The tags expected next, computed once per record (while waiting). */
static inline void zl_ring_rx_expect(struct zl_ring_rx *rx)
{
	if (__builtin_expect(rx->htag_seq != rx->seq, 0)) {
		rx->htag = zl_ring_htag(rx->key, rx->seq);
		rx->ftag = zl_ring_ftag(rx->key, rx->seq);
		rx->htag_seq = rx->seq;
	}
}

/* Whether the header tag of the next record is in memory: only a hint
 * (where completions gate delivery, it says when to look for them), since
 * the rest of the record may still be landing. */
static inline bool zl_ring_rx_tag_seen(struct zl_ring_rx *rx)
{
	uint32_t off = (uint32_t)(rx->rpos & rx->mask);
	if (rx->size - off < ZL_REC_OVERHEAD)
		off = 0;
	zl_ring_rx_expect(rx);
	return atomic_load_explicit(zl_ring_word(rx->buf, off + rx->tag_off),
				    memory_order_relaxed) == rx->htag;
}

/* While the header's line is polled, load the line after it as well, just
 * before each look at the htag: the second line of a longer record (a
 * 64-byte message has two) then crosses from the sender's cache together
 * with the first, not after it. The value is not used; the bytes are read
 * again once the htag is valid. Loading it before the look rather than
 * after a failed one, and not again once the htag is valid, measured 5%
 * faster for 64 bytes and 2-12% for 8 (zl-ab, both orders). Not after a
 * record of more than two lines, when the next one is likely long too:
 * while the sender copies a long record, each such load takes the line away
 * from its stores (4 KiB messages: about 5% slower with it). */
static inline void zl_ring_rx_touch_next_line(const struct zl_ring_rx *rx, uint32_t off)
{
	uint32_t next = (off | 63u) + 1u;
	if (rx->lines && zl_ring_rx_short_last(rx) && next < rx->size)
		zl_touch_line(rx->buf + next);
}

/* Ask for the lines of a long record at once (up to 64 of them) before
 * copying it: the misses then overlap instead of following the copy. */
static inline void zl_ring_rx_prefetch(const struct zl_ring_rx *rx, uint32_t off, uint32_t rs)
{
	if (rs <= 2 * 64)
		return;
	const uint8_t *a = rx->buf + off + 64, *end = rx->buf + off + rs;
	for (int k = 0; a < end && k < 64; a += 64, k++)
		__builtin_prefetch(a);
}

/*
 * Look at the next complete record (PAD records are skipped).
 *   0        *payload, *len, *type describe it; it stays until consume
 *   -EAGAIN  no complete record yet
 *   -EPROTO  a record whose htag is valid but whose length or type is
 *            impossible, or (tag_last) whose footer is wrong
 */
static inline int zl_ring_rx_peek(struct zl_ring_rx *rx, const void **payload, uint32_t *len,
		    uint8_t *type)
{
	for (;;) {
		uint32_t off = (uint32_t)(rx->rpos & rx->mask);
		uint32_t rem = rx->size - off;
		if (rem < ZL_REC_OVERHEAD) {
			rx->rpos += rem;
			continue;
		}
		if (rx->avail && atomic_load_explicit(rx->avail, memory_order_acquire) <= rx->seq)
			return -EAGAIN;
		zl_ring_rx_expect(rx);
		zl_ring_rx_touch_next_line(rx, off);
		if (atomic_load_explicit(zl_ring_word(rx->buf, off + rx->tag_off), memory_order_acquire) !=
		    rx->htag)
			return -EAGAIN;
		uint64_t lw = atomic_load_explicit(zl_ring_word(rx->buf, off + rx->len_off),
						   memory_order_relaxed);
		uint32_t n = (uint32_t)lw;
		uint8_t t = (uint8_t)(lw >> 32);
		if ((lw >> 40) || t == 0 || t > ZL_REC_TYPE_MAX ||
		    n > zl_ring_max_payload(rx->size) || zl_ring_rec_bytes(rx->lines, n, t) > rem ||
		    (t == ZL_REC_PAD && zl_rec_size(n) != rem)) {
			ZL_LOG(ZL_LOG_ERROR, "record %llu at offset %u: bad length %u or type %u",
			       (unsigned long long)rx->seq, off, n, t);
			return -EPROTO;
		}
		uint32_t rs = zl_ring_rec_bytes(rx->lines, n, t);
		rx->cur_off = off;
		rx->cur_size = rs;
		/* Where the htag is published last, the record is complete now
		 * and its footer only guards against a hostile peer: the caller
		 * checks it with zl_ring_rx_verify once it has read the payload
		 * (and with it the footer's cache line), saving a dependent miss. */
		if (!rx->tag_last || t == ZL_REC_PAD) {
			int r = zl_ring_rx_verify(rx);
			if (r) {
				rx->cur_size = 0;
				return r;
			}
		} else {
			zl_ring_rx_prefetch(rx, off, rs);
		}
		if (t == ZL_REC_PAD) {
			rx->cur_size = 0;
			zl_ring_advance(rx, rs);
			continue;
		}
		*payload = rx->buf + off + ZL_REC_HDR;
		*len = n;
		*type = t;
		return 0;
	}
}

/* Check the footer of the record returned by the last successful peek.
 * With tag_last, peek leaves this to the caller, who must call it after
 * reading the payload and before using it: 0, or -EPROTO (bad footer).
 * Without tag_last peek has checked it already (0). */
static inline int zl_ring_rx_verify(struct zl_ring_rx *rx)
{
	uint32_t off = rx->cur_off, rs = rx->cur_size;
	if (atomic_load_explicit(zl_ring_word(rx->buf, off + rs - 8), memory_order_acquire) == rx->ftag)
		return 0;
	if (!rx->tag_last)
		return -EAGAIN;
	ZL_LOG(ZL_LOG_ERROR, "record %llu at offset %u (%u bytes): bad footer",
	       (unsigned long long)rx->seq, off, rs);
	return -EPROTO;
}

/* After a long record: wait, up to *polls polls, for the next one's ftag
 * where the last one's size puts it, looking at the htag only on every 16th
 * poll and the last one (see 3. at the top). false when the polls ran out;
 * true when either tag is there (the caller then checks the record). */
static inline bool zl_ring_rx_wait_ftag(const struct zl_ring_rx *rx, uint32_t off,
					const _Atomic uint64_t *tag, uint32_t *polls, bool relax)
{
	const _Atomic uint64_t *ft = zl_ring_word(rx->buf, off + rx->last_rs - 8);
	for (uint32_t k = 1;; k++) {
		if (atomic_load_explicit(ft, memory_order_acquire) == rx->ftag)
			return true;
		if ((!(k & 15) || *polls == 1) &&
		    atomic_load_explicit(tag, memory_order_acquire) == rx->htag)
			return true;
		if (!--*polls)
			return false;
		if (relax)
			zl_cpu_relax();
	}
}

/*
 * Poll for the next record up to polls times (with PAUSE between polls if
 * relax) until it is a whole message (ZL_REC_MSG) of at most cap bytes
 * that is complete: then *off, *len and *rs (its offset, payload length
 * and size) describe it and 0 is returned. Where the htag is not published
 * last (RDMA in-order), the footer says that the record is complete and is
 * read here; with tag_last the caller checks it (zl_ring_rx_msg_ok).
 *   -EAGAIN  no complete record yet
 *   -ENOMSG  a record (or a tail to skip) for peek, which also says what
 *            is wrong with a bad one: another type, or larger than cap.
 * The checks are peek's, narrowed to what the short paths accept.
 */
__attribute__((always_inline)) /* twice on the fast paths: GCC would not inline it */
static inline int zl_ring_rx_poll_msg(struct zl_ring_rx *rx, uint32_t cap, uint32_t polls,
				      bool relax, uint32_t *off_out, uint32_t *len, uint32_t *rs_out)
{
	uint32_t off = (uint32_t)(rx->rpos & rx->mask), rem = rx->size - off, n, rs;
	if (rem < ZL_REC_OVERHEAD)
		return -ENOMSG;
	zl_ring_rx_expect(rx);
	const _Atomic uint64_t *tag = zl_ring_word(rx->buf, off + rx->tag_off), *avail = rx->avail;
	const uint64_t htag = rx->htag, seq = rx->seq;
	if (!zl_ring_rx_short_last(rx) && rx->last_rs <= rem && !avail &&
	    !zl_ring_rx_wait_ftag(rx, off, tag, &polls, relax))
		return -EAGAIN;
	for (;;) {
		for (;;) {
			/* before each look at the htag: see touch_next_line */
			zl_ring_rx_touch_next_line(rx, off);
			if (!(avail && atomic_load_explicit(avail, memory_order_acquire) <= seq) &&
			    atomic_load_explicit(tag, memory_order_acquire) == htag)
				break;
			if (!--polls)
				return -EAGAIN;
			if (relax)
				zl_cpu_relax();
		}
		uint64_t lw = atomic_load_explicit(zl_ring_word(rx->buf, off + rx->len_off),
						   memory_order_relaxed);
		n = (uint32_t)lw;
		if ((lw >> 32) != ZL_REC_MSG || n > cap || n > zl_ring_max_payload(rx->size))
			return -ENOMSG;
		rs = zl_ring_rec_bytes(rx->lines, n, ZL_REC_MSG);
		if (rs > rem)
			return -ENOMSG;
		if (rx->tag_last || atomic_load_explicit(zl_ring_word(rx->buf, off + rs - 8),
							 memory_order_acquire) == rx->ftag)
			break;
		if (!--polls) /* RDMA: the rest of the record is still landing */
			return -EAGAIN;
	}
	*off_out = off;
	*len = n;
	*rs_out = rs;
	return 0;
}

/* After zl_ring_rx_poll_msg: whether the footer of the record at off of
 * rs bytes checks, where the htag is published last (tag_last; checked
 * already otherwise). Called after reading the payload, whose last line
 * holds the footer: the load then does not wait for a line of its own. */
static inline bool zl_ring_rx_msg_ok(const struct zl_ring_rx *rx, uint32_t off, uint32_t rs)
{
	return !rx->tag_last || atomic_load_explicit(zl_ring_word(rx->buf, off + rs - 8),
						     memory_order_acquire) == rx->ftag;
}

/*
 * The common receive in one step: zl_ring_rx_poll_msg, then copy the
 * message to buf, check its footer, consume it and set *len.
 *   0        received
 *   -EAGAIN  no complete record yet
 *   -ENOMSG  as zl_ring_rx_poll_msg, or a bad footer. Nothing was consumed.
 */
static inline int zl_ring_rx_get(struct zl_ring_rx *rx, void *buf, uint32_t cap, uint32_t *len,
				 uint32_t polls, bool relax)
{
	uint32_t off, n, rs;
	int r = zl_ring_rx_poll_msg(rx, cap, polls, relax, &off, &n, &rs);
	if (r)
		return r;
	if (n) { /* buf may be NULL then */
		zl_ring_rx_prefetch(rx, off, rs);
		zl_ring_copy(buf, rx->buf + off + ZL_REC_HDR, n);
	}
	if (!zl_ring_rx_msg_ok(rx, off, rs))
		return -ENOMSG;
	zl_ring_advance(rx, rs);
	*len = n;
	return 0;
}

/*
 * The common peek in one step: zl_ring_rx_poll_msg, and the record's
 * footer checked; it stays until zl_ring_rx_consume. Nothing is
 * prefetched: the caller may read only part of it.
 *   0, -EAGAIN, or -ENOMSG (as zl_ring_rx_get)
 */
static inline int zl_ring_rx_peek_msg(struct zl_ring_rx *rx, const void **payload,
				      uint32_t *len, uint32_t polls, bool relax)
{
	uint32_t off, n, rs;
	int r = zl_ring_rx_poll_msg(rx, UINT32_MAX, polls, relax, &off, &n, &rs);
	if (r)
		return r;
	if (!zl_ring_rx_msg_ok(rx, off, rs))
		return -ENOMSG;
	rx->cur_off = off;
	rx->cur_size = rs;
	*payload = rx->buf + off + ZL_REC_HDR;
	*len = n;
	return 0;
}

/* Consume the record returned by the last successful peek. */
static inline void zl_ring_rx_consume(struct zl_ring_rx *rx)
{
	uint32_t rs = rx->cur_size;
	if (!rs)
		return;
	rx->cur_size = 0;
	zl_ring_advance(rx, rs);
}

#endif
