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
 * seq counts records from 0; key is a random 64-bit value chosen by the
 * receiver per channel and known only to the two ends; mix is a bijection
 * on 64-bit words with full avalanche (zl_mix64). A record never wraps:
 * when it does not fit before the end of the ring the sender writes a PAD
 * record to the end and starts at offset 0. A tail of fewer than 24 bytes
 * (too short for any record) is skipped by rule, by the sender as soon as
 * it is left and by the receiver when it reaches it.
 *
 * Why a stale or torn record is never delivered. The receiver delivers the
 * record at P only if the htag at P equals htag(seq) AND the ftag at the end
 * computed from its length equals ftag(seq).
 *
 *  1. Tags never repeat. seq grows by one per record and stays below 2^63,
 *     so the inputs key ^ seq (htags) and key ^ seq ^ 2^63 (ftags) of all
 *     records are pairwise distinct, and mix is a bijection: no header or
 *     footer left from any earlier lap can equal the tag expected now. The
 *     originals zeroed every consumed byte to get this; nothing is zeroed
 *     here and nothing depends on a lap count.
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
 *       htag is therefore a protocol violation (tag_last).
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
#include <errno.h>
#include <string.h>

#include "log.h"
#include "ring.h"

static inline _Atomic uint64_t *word(const uint8_t *base, uint32_t off)
{
	return (_Atomic uint64_t *)(uintptr_t)(base + off);
}

static void layout_offsets(enum zl_ring_layout layout, uint8_t *tag_off, uint8_t *len_off)
{
	*tag_off = layout == ZL_LAYOUT_TAG_FIRST ? 0 : 8;
	*len_off = layout == ZL_LAYOUT_TAG_FIRST ? 8 : 0;
}

void zl_ring_tx_init(struct zl_ring_tx *tx, void *stage, uint32_t size, uint64_t key,
		     const _Atomic uint64_t *peer_rpos,
		     int (*push)(void *, uint32_t, uint32_t), void *ctx)
{
	memset(tx, 0, sizeof(*tx));
	tx->stage = stage;
	tx->size = size;
	tx->mask = size - 1;
	tx->key = key;
	tx->peer_rpos = peer_rpos;
	tx->push = push;
	tx->ctx = ctx;
	tx->htag = zl_ring_htag(key, 0);
	tx->ftag = zl_ring_ftag(key, 0);
	layout_offsets(ZL_LAYOUT_LEN_FIRST, &tx->tag_off, &tx->len_off);
}

void zl_ring_tx_set_layout(struct zl_ring_tx *tx, enum zl_ring_layout layout)
{
	layout_offsets(layout, &tx->tag_off, &tx->len_off);
}

void zl_ring_rx_init(struct zl_ring_rx *rx, const void *buf, uint32_t size, uint64_t key,
		     uint32_t publish_every, void (*publish)(void *, uint64_t), void *ctx)
{
	memset(rx, 0, sizeof(*rx));
	rx->buf = buf;
	rx->size = size;
	rx->mask = size - 1;
	rx->key = key;
	rx->publish_every = publish_every ? publish_every : size / 4;
	rx->htag = zl_ring_htag(key, 0);
	rx->ftag = zl_ring_ftag(key, 0);
	rx->htag_seq = 0;
	rx->publish = publish;
	rx->ctx = ctx;
	layout_offsets(ZL_LAYOUT_LEN_FIRST, &rx->tag_off, &rx->len_off);
}

void zl_ring_rx_set_layout(struct zl_ring_rx *rx, enum zl_ring_layout layout, bool tag_last)
{
	layout_offsets(layout, &rx->tag_off, &rx->len_off);
	rx->tag_last = tag_last;
}

/* ---- sender ------------------------------------------------------------ */

static int refresh_rpos(struct zl_ring_tx *tx)
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
static inline uint32_t bytes_needed(const struct zl_ring_tx *tx, uint32_t rs)
{
	uint32_t rem = tx->size - (uint32_t)(tx->wpos & tx->mask);
	return rs <= rem ? rs : rem + rs;
}

/* Free bytes ahead of wpos. After a skipped tail, wpos - rpos may exceed
 * the ring size by up to 16 bytes that hold no data: that is no room. */
static inline uint64_t room(const struct zl_ring_tx *tx)
{
	uint64_t used = tx->wpos - tx->rpos_cache;
	return used >= tx->size ? 0 : tx->size - used;
}

static bool room_for(struct zl_ring_tx *tx, uint32_t need, int *err)
{
	*err = 0;
	if (room(tx) >= need)
		return true;
	*err = refresh_rpos(tx);
	return !*err && room(tx) >= need;
}

bool zl_ring_tx_has_room(struct zl_ring_tx *tx, uint32_t len, int *err)
{
	*err = 0;
	if (len > zl_ring_max_payload(tx->size)) {
		*err = -EMSGSIZE;
		return false;
	}
	return room_for(tx, bytes_needed(tx, zl_rec_size(len)), err);
}

/* Write the record's header words and footer; the htag goes last with
 * release so that on shm it publishes everything before it. */
static int write_record(struct zl_ring_tx *tx, uint32_t off, uint32_t len, uint8_t type)
{
	uint32_t rs = zl_rec_size(len);
	atomic_store_explicit(word(tx->stage, off + tx->len_off),
			      (uint64_t)len | (uint64_t)type << 32, memory_order_relaxed);
	atomic_store_explicit(word(tx->stage, off + rs - 8), tx->ftag, memory_order_relaxed);
	atomic_store_explicit(word(tx->stage, off + tx->tag_off), tx->htag, memory_order_release);
	tx->seq++;
	/* the next tags now, off the path from this store to the peer */
	tx->htag = zl_ring_htag(tx->key, tx->seq);
	tx->ftag = zl_ring_ftag(tx->key, tx->seq);
	tx->wpos += rs;
	/* a tail too short for any record is skipped by rule, by both sides;
	 * skip it now so that the receiver's position never passes ours */
	uint32_t rem = tx->size - (uint32_t)(tx->wpos & tx->mask);
	if (rem < ZL_REC_OVERHEAD)
		tx->wpos += rem;
	return tx->push ? tx->push(tx->ctx, off, rs) : 0;
}

int zl_ring_tx_reserve(struct zl_ring_tx *tx, uint32_t len, uint8_t type, void **payload)
{
	if (tx->open)
		return -EBUSY;
	if (len > zl_ring_max_payload(tx->size))
		return -EMSGSIZE;
	uint32_t rs = zl_rec_size(len);
	int err;
	if (!room_for(tx, bytes_needed(tx, rs), &err))
		return err ? err : -EAGAIN;
	uint32_t off = (uint32_t)(tx->wpos & tx->mask);
	uint32_t rem = tx->size - off;
	if (rs > rem) { /* rem >= 24 here: write_record skips shorter tails */
		err = write_record(tx, off, rem - ZL_REC_OVERHEAD, ZL_REC_PAD);
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

int zl_ring_tx_commit(struct zl_ring_tx *tx, uint32_t len)
{
	if (!tx->open || len > tx->res_len)
		return -EINVAL;
	tx->open = false;
	return write_record(tx, tx->res_off, len, tx->res_type);
}

void zl_ring_tx_abort(struct zl_ring_tx *tx)
{
	tx->open = false;
}

/* ---- receiver ---------------------------------------------------------- */

static void publish(struct zl_ring_rx *rx)
{
	rx->published = rx->rpos;
	rx->rpos_updates++;
	rx->publish(rx->ctx, rx->rpos);
}

void zl_ring_rx_flush_rpos(struct zl_ring_rx *rx)
{
	if (rx->published != rx->rpos)
		publish(rx);
}

static inline void advance(struct zl_ring_rx *rx, uint32_t rs)
{
	rx->rpos += rs;
	rx->seq++; /* the next htag is computed by the next peek, while it waits */
	if (rx->rpos - rx->published >= rx->publish_every)
		publish(rx);
}

int zl_ring_rx_peek(struct zl_ring_rx *rx, const void **payload, uint32_t *len,
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
		if (__builtin_expect(rx->htag_seq != rx->seq, 0)) {
			rx->htag = zl_ring_htag(rx->key, rx->seq);
			rx->ftag = zl_ring_ftag(rx->key, rx->seq);
			rx->htag_seq = rx->seq;
		}
		if (atomic_load_explicit(word(rx->buf, off + rx->tag_off), memory_order_acquire) !=
		    rx->htag)
			return -EAGAIN;
		uint64_t lw = atomic_load_explicit(word(rx->buf, off + rx->len_off),
						   memory_order_relaxed);
		uint32_t n = (uint32_t)lw;
		uint8_t t = (uint8_t)(lw >> 32);
		if ((lw >> 40) || t == 0 || t > ZL_REC_TYPE_MAX ||
		    n > zl_ring_max_payload(rx->size) || zl_rec_size(n) > rem ||
		    (t == ZL_REC_PAD && zl_rec_size(n) != rem)) {
			ZL_LOG(ZL_LOG_ERROR, "record %llu at offset %u: bad length %u or type %u",
			       (unsigned long long)rx->seq, off, n, t);
			return -EPROTO;
		}
		uint32_t rs = zl_rec_size(n);
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
		} else if (rs > 2 * 64) {
			const uint8_t *a = rx->buf + off + 64, *end = rx->buf + off + rs;
			for (int k = 0; a < end && k < 64; a += 64, k++)
				__builtin_prefetch(a);
		}
		if (t == ZL_REC_PAD) {
			rx->cur_size = 0;
			advance(rx, rs);
			continue;
		}
		*payload = rx->buf + off + ZL_REC_HDR;
		*len = n;
		*type = t;
		return 0;
	}
}

int zl_ring_rx_verify(struct zl_ring_rx *rx)
{
	uint32_t off = rx->cur_off, rs = rx->cur_size;
	if (atomic_load_explicit(word(rx->buf, off + rs - 8), memory_order_acquire) == rx->ftag)
		return 0;
	if (!rx->tag_last)
		return -EAGAIN;
	ZL_LOG(ZL_LOG_ERROR, "record %llu at offset %u (%u bytes): bad footer",
	       (unsigned long long)rx->seq, off, rs);
	return -EPROTO;
}

void zl_ring_rx_consume(struct zl_ring_rx *rx)
{
	uint32_t rs = rx->cur_size;
	if (!rs)
		return;
	rx->cur_size = 0;
	advance(rx, rs);
}
