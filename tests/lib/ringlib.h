/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the ring protocol tests: a tx/rx pair over ONE buffer in one
 * process (shm style: tx.stage == rx.buf, push = NULL, the receiver
 * publishes its read position into a local atomic word), and a hand writer
 * that lays out records byte by byte as the format in ring.c documents.
 */
#ifndef ZL_RINGLIB_H
#define ZL_RINGLIB_H

#include <stdatomic.h>

#include "ring.h"
#include "testlib.h"

struct rpair {
	uint8_t *buf; /* malloc'ed to exactly size bytes (ASan catches overruns) */
	uint32_t size;
	uint64_t key;
	_Atomic uint64_t peer_rpos;
	struct zl_ring_tx tx;
	struct zl_ring_rx rx;
};

static void rp_publish(void *ctx, uint64_t rpos)
{
	atomic_store_explicit((_Atomic uint64_t *)ctx, rpos, memory_order_release);
}

static inline void rp_init(struct rpair *p, uint32_t size, uint64_t key, uint32_t publish_every,
			   enum zl_ring_layout layout, bool tag_last)
{
	memset(p, 0, sizeof(*p));
	p->buf = malloc(size);
	CHECK(p->buf);
	memset(p->buf, 0, size);
	p->size = size;
	p->key = zl_ring_key(key);
	atomic_init(&p->peer_rpos, 0);
	zl_ring_tx_init(&p->tx, p->buf, size, p->key, &p->peer_rpos, NULL, NULL);
	zl_ring_rx_init(&p->rx, p->buf, size, p->key, publish_every, rp_publish, &p->peer_rpos);
	if (layout != ZL_LAYOUT_LEN_FIRST || tag_last) {
		zl_ring_tx_set_layout(&p->tx, layout);
		zl_ring_rx_set_layout(&p->rx, layout, tag_last);
	}
}

static inline void rp_free(struct rpair *p)
{
	free(p->buf);
	p->buf = NULL;
}

/* ---- messages with a sequence number and a checksum -------------------- */

/* A fast checksum (word-wise multiply-xor). */
static inline uint64_t tl_fnv(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ n;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	for (; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* len >= 16: [u64 id][u64 fnv of the rest][pattern]; shorter: pattern. */
static inline void msg_make(void *buf, size_t len, uint64_t id)
{
	uint8_t *p = buf;
	tl_fill(p, len, id);
	if (len >= 16) {
		memcpy(p, &id, 8);
		uint64_t h = tl_fnv(p + 16, len - 16);
		memcpy(p + 8, &h, 8);
	}
}

/* 0 if buf holds message id of length len, else a description. */
static inline const char *msg_bad(const void *buf, size_t len, uint64_t id)
{
	const uint8_t *p = buf;
	if (len >= 16) {
		uint64_t got, h;
		memcpy(&got, p, 8);
		memcpy(&h, p + 8, 8);
		if (got != id)
			return "wrong sequence number (loss, duplicate or reorder)";
		if (h != tl_fnv(p + 16, len - 16))
			return "checksum mismatch";
	}
	/* compare the pattern outside the 16-byte header */
	uint64_t s = id * 0x2545F4914F6CDD1Dull;
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = tl_splitmix(&s);
		if (i < 16 && len >= 16)
			continue;
		size_t n = len - i < 8 ? len - i : 8;
		if (memcmp(p + i, &v, n))
			return "payload bytes corrupt";
	}
	return NULL;
}

/* ---- hand-written records (format of ring.c) --------------------------- */

static inline void put64(uint8_t *buf, uint32_t off, uint64_t v) { memcpy(buf + off, &v, 8); }
static inline uint64_t get64(const uint8_t *buf, uint32_t off)
{
	uint64_t v;
	memcpy(&v, buf + off, 8);
	return v;
}

static inline uint32_t lay_tag_off(enum zl_ring_layout l) { return l == ZL_LAYOUT_TAG_FIRST ? 0 : 8; }
static inline uint32_t lay_len_off(enum zl_ring_layout l) { return l == ZL_LAYOUT_TAG_FIRST ? 8 : 0; }
static inline uint64_t len_word(uint32_t len, uint8_t type) { return (uint64_t)len | (uint64_t)type << 32; }

/* Write a whole record at once (any len/type, even hostile ones). The
 * footer is written only if it lies inside the buffer. */
static inline void hand_record(uint8_t *buf, uint32_t size, enum zl_ring_layout l, uint32_t off,
			       uint64_t lw, uint64_t seq, uint64_t key, const void *payload,
			       uint32_t plen)
{
	uint32_t len = (uint32_t)lw;
	put64(buf, off + lay_len_off(l), lw);
	if (payload && off + ZL_REC_HDR + plen <= size)
		memcpy(buf + off + ZL_REC_HDR, payload, plen);
	uint64_t end = (uint64_t)off + zl_rec_size(len);
	if (len <= size && end <= size)
		put64(buf, (uint32_t)end - 8, zl_ring_ftag(key, seq));
	put64(buf, off + lay_tag_off(l), zl_ring_htag(key, seq));
}

#endif
