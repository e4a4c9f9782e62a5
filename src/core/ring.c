/* SPDX-License-Identifier: MIT */
/* Ring setup; the protocol, its argument and the operations are in ring.h. */
#include <errno.h>
#include <string.h>

#include "ring.h"


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

