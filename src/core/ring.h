/* SPDX-License-Identifier: MIT */
/*
 * The ring protocol, independent of transport. See ring.c for the record
 * format and the argument why no torn or stale record is ever delivered.
 *
 * A transport supplies three primitives:
 *   - place: push(ctx, off, len) makes stage[off, off+len) visible at the
 *     same offset of the peer's ring. NULL when stage IS the peer's ring
 *     (shm), where the release store of the header tag publishes.
 *   - read local memory: the receiver polls rx->buf, its own memory.
 *   - publish: publish(ctx, rpos) stores the receiver's read position into
 *     the word the sender reads (tx->peer_rpos on the other side).
 */
#ifndef ZL_RING_H
#define ZL_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

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

/* A keyed bijective 64-bit mix (splitmix64's finalizer). */
static inline uint64_t zl_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The header and footer tags of record seq (seq < 2^63). See ring.c. */
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
	/* Where completions, not memory, say that a record has landed (RDMA
	 * WRITE_WITH_IMM): records with seq >= *avail are not looked at.
	 * NULL otherwise. */
	const _Atomic uint64_t *avail;
	bool tag_last;           /* the htag is published after everything else
	                            (shm, TAG_FIRST): a bad footer is then an error */
	void (*publish)(void *ctx, uint64_t rpos);
	void *ctx;
	uint64_t rpos_updates;   /* statistics */
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

/*
 * Reserve a record of len payload bytes and type; *payload points into stage.
 *   0         reserved
 *   -EAGAIN   not enough free space (after re-reading the peer's rpos)
 *   -EMSGSIZE len > zl_ring_max_payload(size)
 *   -EBUSY    a reservation is open
 *   -EPROTO   the peer published an impossible read position
 *   other     an error from push() while writing a PAD record
 */
int zl_ring_tx_reserve(struct zl_ring_tx *tx, uint32_t len, uint8_t type, void **payload);

/* Free bytes the sender may use without re-reading rpos (for wait loops). */
bool zl_ring_tx_has_room(struct zl_ring_tx *tx, uint32_t len, int *err);

/* Publish the open reservation truncated to len bytes.
 *   0, -EINVAL (none open or len too large), or an error from push(). */
int zl_ring_tx_commit(struct zl_ring_tx *tx, uint32_t len);

/* Drop the open reservation without sending anything. */
void zl_ring_tx_abort(struct zl_ring_tx *tx);

/*
 * Look at the next complete record (PAD records are skipped).
 *   0        *payload, *len, *type describe it; it stays until consume
 *   -EAGAIN  no complete record yet
 *   -EPROTO  a record whose htag is valid but whose length or type is
 *            impossible, or (tag_last) whose footer is wrong
 */
int zl_ring_rx_peek(struct zl_ring_rx *rx, const void **payload, uint32_t *len,
		    uint8_t *type);

/* Check the footer of the record returned by the last successful peek.
 * With tag_last, peek leaves this to the caller, who must call it after
 * reading the payload and before using it: 0, or -EPROTO (bad footer).
 * Without tag_last peek has checked it already (0). */
int zl_ring_rx_verify(struct zl_ring_rx *rx);

/* Consume the record returned by the last successful peek. */
void zl_ring_rx_consume(struct zl_ring_rx *rx);

/* Publish the read position now if anything is unpublished (called before
 * the receiver waits, so a sender short of room is never starved). */
void zl_ring_rx_flush_rpos(struct zl_ring_rx *rx);

#endif
