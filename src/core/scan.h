/* SPDX-License-Identifier: MIT */
/*
 * Mailbox-flag scan for the N:1 server: find the non-zero bytes of an array
 * of 1-byte flags (0 = empty, 1..255 = a request of that type is waiting),
 * starting at a rotating position so that no client starves.
 *
 * Memory model: each flag is read once per call with a plain (volatile)
 * load, i.e. a relaxed atomic byte load on x86 (vector loads are atomic per
 * byte). Nothing is cached across calls, so a polling loop sees writes by
 * other threads or a NIC. Seeing a flag does NOT order later reads of the
 * request body: the caller issues atomic_thread_fence(memory_order_acquire)
 * (a compiler barrier on x86) before reading it. Flags are never written.
 */
#ifndef ZL_SCAN_H
#define ZL_SCAN_H

#include <stddef.h>
#include <stdint.h>

enum zl_scan_impl {
	ZL_SCAN_SCALAR, /* one byte per step, any CPU */
	ZL_SCAN_SSE2,   /* 16 flags per compare (x86-64 baseline) */
	ZL_SCAN_AVX2,   /* 32 flags per compare, 64 per idle step */
	/*
	 * OR into impl: the caller declares that flags[0, round_up(n, 64)) is
	 * readable (the allocation is padded to a multiple of 64 bytes; the
	 * server also aligns it to 64 so no load splits a cache line). The SIMD
	 * paths may then read up to that bound; the padding's values are
	 * ignored. Without this flag no byte outside flags[0, n) is ever read
	 * (exact-size allocations are fine, ASan-clean).
	 */
	ZL_SCAN_PADDED = 0x100,
};

/* Best implementation this CPU (and OS: AVX state enabled) supports.
 * Scalar on non-x86-64 builds. */
enum zl_scan_impl zl_scan_best(void);

/* 1 if impl (without ZL_SCAN_PADDED) may be passed to zl_scan here. */
int zl_scan_supported(enum zl_scan_impl impl);

/* "scalar", "sse2", "avx2" (the PADDED bit is ignored). */
const char *zl_scan_name(enum zl_scan_impl impl);

/*
 * Find up to max indices i in [0, n) with flags[i] != 0, visiting positions
 * in the order start, start+1, ..., n-1, 0, ..., start-1, and write them to
 * out[] in that order. Returns the count (0..max). out needs room for
 * min(max, n) entries; max = SIZE_MAX means no limit.
 *
 * Fairness: with start = (last index returned) + 1 on the next call, every
 * waiting client is served before any is served twice. start >= n is taken
 * modulo n (so last + 1 == n is fine). n <= 2^31.
 *
 * impl must be supported by this CPU (zl_scan_supported()): the SIMD paths
 * are not re-checked per call. Unknown values fall back to scalar; on
 * non-x86-64 builds every impl is scalar.
 */
size_t zl_scan(enum zl_scan_impl impl, const uint8_t *flags, size_t n, size_t start,
	       uint32_t *out, size_t max);

#endif
