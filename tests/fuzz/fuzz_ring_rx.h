/* SPDX-License-Identifier: MIT */
/*
 * Input format of fuzz_ring_rx (shared with the corpus generator):
 *   [0]      flags: bit 0 ring size 8192 (else 4096), bit 1 layout TAG_FIRST,
 *            bit 2 tag_last, bit 3 line grain, bits 4-7 publish_every selector
 *   [1..2]   u16 buffer size for zl_ring_rx_get (0: the ring size)
 *   [3]      unused
 *   [4..7]   u32 start position of the receiver (rounded down to 8)
 *   [8..15]  u64 key (zl_ring_key: bits 63 and 62 forced)
 *   [16..23] u64 start sequence number (below 2^62)
 *   [24..]   ring contents, placed from the start position on (wrapping);
 *            the rest of the ring is zero
 */
#ifndef ZL_FUZZ_RING_RX_H
#define ZL_FUZZ_RING_RX_H

#define FRX_HDR 24u
#define FRX_F_BIG 1u
#define FRX_F_TAG_FIRST 2u
#define FRX_F_TAG_LAST 4u
#define FRX_F_LINES 8u /* line grain (shm) */

#endif
