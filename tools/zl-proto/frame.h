/* SPDX-License-Identifier: MIT */
/* The framing both the protocols and the experiments use for a message
 * that arrives by RDMA WRITE (the protocol evaluation paper section III, the BME latency thesis fig. 23):
 *
 *   u32 len | u8 mark | 3 bytes | len bytes | u8 mark
 *
 * The receiver polls memory: both marks set and equal means the message is
 * there; it zeroes them after reading. */
#ifndef ZL_PROTO_FRAME_H
#define ZL_PROTO_FRAME_H

#include <stdatomic.h>
#include <stdint.h>

#define FRAME_EXTRA 9 /* header and trailing mark */

static inline int frame_arrived(const char *slot, uint32_t n)
{
	const volatile uint8_t *v = (const volatile uint8_t *)slot;
	uint8_t mark = v[4];
	if (!mark || v[8 + n] != mark)
		return 0;
	atomic_thread_fence(memory_order_acquire);
	return 1;
}

static inline void frame_unmark(char *slot, uint32_t n)
{
	slot[4] = 0;
	slot[8 + n] = 0;
}

#endif
