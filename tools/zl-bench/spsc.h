/* SPDX-License-Identifier: MIT */
/* The copying floor's ring (spsc.c), also run by blocks.c. */
#ifndef ZLB_SPSC_H
#define ZLB_SPSC_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "zl-bench.h"

#define SLOTS 256

struct ring {
	uint8_t *base;
	size_t slot; /* bytes per slot, a multiple of 64 */
};

static inline _Atomic uint64_t *footer(const struct ring *r, uint64_t seq)
{
	return (_Atomic uint64_t *)(r->base + (seq % SLOTS) * r->slot + r->slot - 8);
}

static inline void spsc_put(const struct ring *r, uint64_t seq, const void *p, size_t n)
{
	memcpy(r->base + (seq % SLOTS) * r->slot, p, n);
	atomic_store_explicit(footer(r, seq), seq + 1, memory_order_release);
}

/* 0, or -1 after a second without the message. With two-line slots the
 * reader also loads the first line while it spins on the footer, as
 * zipline's receiver loads a record's second line, so that both lines cross
 * in one round of misses (64 B: 0.17-0.18 against 0.19-0.21 us here). With
 * longer slots it does not: the writer is still filling that line, and at
 * 4 KiB the load cost 5-10%, as did prefetching the whole slot. */
static inline int spsc_get(const struct ring *r, uint64_t seq, void *p, size_t n)
{
	const uint8_t *s = r->base + (seq % SLOTS) * r->slot;
	if (spin_until_touch(footer(r, seq), seq + 1, r->slot == 128 ? s : NULL))
		return -1;
	memcpy(p, s, n);
	return 0;
}

#endif
