/* SPDX-License-Identifier: MIT */
/*
 * Mailbox-flag scan (see scan.h). The idle case dominates a polling server:
 * every flag is zero and the whole array is read per poll, so the SIMD paths
 * make "all zero" as cheap as possible and only decode bit masks when a
 * block has a flag set.
 *
 * A call scans two ranges, [start, n) then [0, start). Each range is walked
 * in blocks at multiples of the vector width W counted from flags[0] (so a
 * 64-byte aligned array gets aligned loads whatever start is); bits outside
 * the range are masked off. Reads stay inside [0, R), R = n or, with
 * ZL_SCAN_PADDED, round_up(n, 64):
 *   - a block that begins before the range start begins at >= 0: in bounds;
 *   - a block that would end past R is loaded as the last W bytes before R
 *     (an overlapping load) and its mask shifted into place, so an exact-size
 *     array costs one extra shift, not a scalar tail. This needs R >= W; a
 *     shorter array drops to the next narrower implementation.
 * Vector loads go through volatile pointers so the compiler can neither
 * cache them across calls nor hoist them out of a polling loop, exactly
 * like the scalar path's byte loads.
 */
#include "scan.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* The scalar loop is the reference and the benchmark's baseline: one byte
 * per step. Its loads are volatile, which already rules out vectorising;
 * the attribute makes that explicit. */
#if defined(__GNUC__) && !defined(__clang__)
#define ZL_NO_VECTORIZE __attribute__((optimize("no-tree-vectorize")))
#else
#define ZL_NO_VECTORIZE
#endif

/* Append the positions of the set bits of m (bit k = index base + k) to out
 * until max entries are there; returns the new count. */
static inline size_t emit(uint64_t m, size_t base, uint32_t *out, size_t k, size_t max)
{
	while (m && k < max) {
		out[k++] = (uint32_t)(base + (size_t)__builtin_ctzll(m));
		m &= m - 1;
	}
	return k;
}

ZL_NO_VECTORIZE static size_t range_scalar(const uint8_t *flags, size_t lo, size_t hi,
					   uint32_t *out, size_t k, size_t max)
{
	const volatile uint8_t *f = flags;
	for (size_t i = lo; i < hi; i++) {
		if (f[i]) {
			out[k++] = (uint32_t)i;
			if (k == max)
				break;
		}
	}
	return k;
}

#if defined(__x86_64__)

/* ---- SSE2: 16 flags per block ----------------------------------------- */

__attribute__((target("sse2"))) static inline uint32_t nz16(const uint8_t *p)
{
	__m128i v = *(const volatile __m128i_u *)p;
	return ~(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_setzero_si128())) & 0xffffu;
}

/* Non-zero mask of block [b, b+16), bits outside [lo, hi) cleared. */
__attribute__((target("sse2"))) static inline uint32_t edge16(const uint8_t *f, size_t b,
							      size_t lo, size_t hi, size_t R)
{
	uint32_t m = b + 16 <= R ? nz16(f + b) : nz16(f + R - 16) >> (b + 16 - R);
	if (b < lo)
		m &= ~0u << (lo - b);
	if (hi - b < 16)
		m &= (1u << (hi - b)) - 1;
	return m;
}

__attribute__((target("sse2"))) static size_t range_sse2(const uint8_t *f, size_t lo,
							  size_t hi, size_t R, uint32_t *out,
							  size_t k, size_t max)
{
	size_t b = lo & ~(size_t)15;
	for (; b + 16 <= hi; b += 16) {
		uint32_t m = b < lo ? edge16(f, b, lo, hi, R) : nz16(f + b);
		if (m && (k = emit(m, b, out, k, max)) == max)
			return k;
	}
	if (b < hi)
		k = emit(edge16(f, b, lo, hi, R), b, out, k, max);
	return k;
}

/* ---- AVX2: 32 flags per block, 64 per idle step -------------------------- */

__attribute__((target("avx2"))) static inline __m256i load32(const uint8_t *p)
{
	return *(const volatile __m256i_u *)p;
}

__attribute__((target("avx2"))) static inline uint32_t nzmask32(__m256i v)
{
	return ~(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, _mm256_setzero_si256()));
}

__attribute__((target("avx2"))) static inline uint32_t edge32(const uint8_t *f, size_t b,
							      size_t lo, size_t hi, size_t R)
{
	uint32_t m = b + 32 <= R ? nzmask32(load32(f + b))
				 : nzmask32(load32(f + R - 32)) >> (b + 32 - R);
	if (b < lo)
		m &= ~0u << (lo - b);
	if (hi - b < 32)
		m &= (1u << (hi - b)) - 1;
	return m;
}

__attribute__((target("avx2"))) static size_t range_avx2(const uint8_t *f, size_t lo,
							  size_t hi, size_t R, uint32_t *out,
							  size_t k, size_t max)
{
	size_t b = lo & ~(size_t)31;
	if (b < lo) { /* the range starts inside a block */
		if ((k = emit(edge32(f, b, lo, hi, R), b, out, k, max)) == max)
			return k;
		b += 32;
	}
	/* Idle fast path: OR two vectors and test once per 64 flags (two loads,
	 * vpor, vptest, branch); decode masks only when something is set. */
	for (; b + 64 <= hi; b += 64) {
		__m256i x = load32(f + b), y = load32(f + b + 32);
		__m256i o = _mm256_or_si256(x, y);
		if (_mm256_testz_si256(o, o))
			continue;
		uint64_t m = nzmask32(x) | (uint64_t)nzmask32(y) << 32;
		if ((k = emit(m, b, out, k, max)) == max)
			return k;
	}
	for (; b < hi && k < max; b += 32)
		k = emit(edge32(f, b, lo, hi, R), b, out, k, max);
	return k;
}

#endif /* __x86_64__ */

/* Indices of non-zero flags in [lo, hi) (lo < hi <= n <= R), appended. */
static size_t range(int impl, const uint8_t *f, size_t lo, size_t hi, size_t R,
		    uint32_t *out, size_t k, size_t max)
{
#if defined(__x86_64__)
	/* The overlapping tail load needs a whole vector of readable bytes. */
	if (impl == ZL_SCAN_AVX2 && R >= 32)
		return range_avx2(f, lo, hi, R, out, k, max);
	if ((impl == ZL_SCAN_AVX2 || impl == ZL_SCAN_SSE2) && R >= 16)
		return range_sse2(f, lo, hi, R, out, k, max);
#else
	(void)impl; /* scalar only */
	(void)R;
#endif
	return range_scalar(f, lo, hi, out, k, max);
}

size_t zl_scan(enum zl_scan_impl impl, const uint8_t *flags, size_t n, size_t start,
	       uint32_t *out, size_t max)
{
	if (!n || !max)
		return 0;
	if (start >= n)
		start %= n;
	int padded = (impl & ZL_SCAN_PADDED) != 0;
	int which = (int)impl & ~ZL_SCAN_PADDED;
	size_t R = padded ? (n + 63) & ~(size_t)63 : n;
	size_t k = range(which, flags, start, n, R, out, 0, max);
	if (k < max && start)
		k = range(which, flags, 0, start, R, out, k, max);
	return k;
}

int zl_scan_supported(enum zl_scan_impl impl)
{
	switch ((int)impl & ~ZL_SCAN_PADDED) {
	case ZL_SCAN_SCALAR:
		return 1;
#if defined(__x86_64__)
	case ZL_SCAN_SSE2:
		return 1; /* part of x86-64 */
	case ZL_SCAN_AVX2:
		/* GCC's check includes OSXSAVE/XCR0, i.e. the OS saves YMM state. */
		__builtin_cpu_init();
		return __builtin_cpu_supports("avx2") != 0;
#endif
	}
	return 0;
}

enum zl_scan_impl zl_scan_best(void)
{
	if (zl_scan_supported(ZL_SCAN_AVX2))
		return ZL_SCAN_AVX2;
	if (zl_scan_supported(ZL_SCAN_SSE2))
		return ZL_SCAN_SSE2;
	return ZL_SCAN_SCALAR;
}

const char *zl_scan_name(enum zl_scan_impl impl)
{
	switch ((int)impl & ~ZL_SCAN_PADDED) {
	case ZL_SCAN_SCALAR: return "scalar";
	case ZL_SCAN_SSE2: return "sse2";
	case ZL_SCAN_AVX2: return "avx2";
	}
	return "?";
}
