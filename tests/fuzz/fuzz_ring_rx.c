/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the input is the contents of a receive ring (format in
 * fuzz_ring_rx.h). zl_ring_rx_get (every other step) and
 * zl_ring_rx_peek/consume run until -EAGAIN, -EPROTO or a bound; every
 * delivered record must lie inside the ring. The ring and get's buffer are
 * malloc'ed to exactly their sizes so ASan sees any overrun.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "fuzz_ring_rx.h"
#include "ring.h"

static _Atomic uint64_t published;
volatile uint64_t fuzz_sink; /* keeps the payload reads */

static void publish(void *ctx, uint64_t rpos)
{
	(void)ctx;
	atomic_store_explicit(&published, rpos, memory_order_relaxed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < FRX_HDR)
		return 0;
	uint8_t flags = data[0];
	uint32_t rsize = flags & FRX_F_BIG ? 8192 : 4096;
	uint32_t start;
	uint64_t key, seq;
	memcpy(&start, data + 4, 4);
	memcpy(&key, data + 8, 8);
	memcpy(&seq, data + 16, 8);
	start &= ~7u;
	key = zl_ring_key(key);
	seq &= (1ull << 62) - 1;

	uint32_t cap = (uint32_t)data[1] | (uint32_t)data[2] << 8;
	if (!cap)
		cap = rsize;
	uint8_t *ring = calloc(1, rsize), *got = malloc(cap);
	if (!ring || !got) {
		free(ring);
		free(got);
		return 0;
	}
	size_t n = size - FRX_HDR;
	if (n > rsize)
		n = rsize;
	for (size_t i = 0; i < n; i++)
		ring[(start + i) & (rsize - 1)] = data[FRX_HDR + i];

	struct zl_ring_rx rx;
	uint32_t pubev = (uint32_t)(flags >> 4) * 64; /* 0: default */
	zl_ring_rx_init(&rx, ring, rsize, key, pubev > rsize / 2 ? 0 : pubev, publish, NULL);
	if (flags & (FRX_F_TAG_FIRST | FRX_F_TAG_LAST))
		zl_ring_rx_set_layout(&rx, flags & FRX_F_TAG_FIRST ? ZL_LAYOUT_TAG_FIRST
								 : ZL_LAYOUT_LEN_FIRST,
				      flags & FRX_F_TAG_LAST);
	zl_ring_rx_set_lines(&rx, flags & FRX_F_LINES);
	/* start anywhere: as if start bytes and seq records were consumed */
	rx.rpos = start;
	rx.published = start;
	rx.seq = seq;

	uint64_t sum = 0;
	for (uint32_t i = 0; i < 2 * rsize / ZL_REC_OVERHEAD + 4; i++) {
		const void *p;
		uint32_t len;
		uint8_t type;
		if (!(i & 1)) {
			uint64_t rpos = rx.rpos;
			int rg = zl_ring_rx_get(&rx, got, cap, &len, 1, false);
			if (rg == 0) {
				FUZZ_ASSERT(len <= cap && len <= zl_ring_max_payload(rsize));
				FUZZ_ASSERT(rx.rpos > rpos && rx.rpos - start <= 3ull * rsize);
				for (uint32_t j = 0; j < len; j++)
					sum += got[j];
				continue;
			}
			FUZZ_ASSERT((rg == -EAGAIN || rg == -ENOMSG) && rx.rpos == rpos);
			if (rg == -EAGAIN) { /* then peek finds nothing either */
				FUZZ_ASSERT(zl_ring_rx_peek(&rx, &p, &len, &type) == -EAGAIN);
				break;
			}
		}
		int rc = zl_ring_rx_peek(&rx, &p, &len, &type);
		if (rc == 0)
			rc = zl_ring_rx_verify(&rx);
		if (rc == -EAGAIN || rc == -EPROTO)
			break;
		FUZZ_ASSERT(rc == 0);
		const uint8_t *b = p;
		FUZZ_ASSERT(b >= ring + ZL_REC_HDR && b + len + ZL_REC_FTR <= ring + rsize);
		FUZZ_ASSERT(len <= zl_ring_max_payload(rsize));
		FUZZ_ASSERT(type >= ZL_REC_MSG && type <= ZL_REC_TYPE_MAX && type != ZL_REC_PAD);
		for (uint32_t j = 0; j < len; j++)
			sum += b[j];
		/* a second peek sees the same record */
		const void *p2;
		uint32_t len2;
		uint8_t type2;
		FUZZ_ASSERT(zl_ring_rx_peek(&rx, &p2, &len2, &type2) == 0);
		FUZZ_ASSERT(p2 == p && len2 == len && type2 == type);
		zl_ring_rx_consume(&rx);
		if (i & 1)
			zl_ring_rx_flush_rpos(&rx);
		FUZZ_ASSERT(rx.rpos - start <= 2ull * rsize + rsize);
	}
	zl_ring_rx_flush_rpos(&rx);
	free(got);
	free(ring);
	fuzz_sink = sum;
	return 0;
}
