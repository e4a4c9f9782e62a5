/* SPDX-License-Identifier: MIT */
/*
 * scan: zl_scan (mailbox-flag scan) against a trivial reference, for every
 * implementation this CPU supports, with and without ZL_SCAN_PADDED.
 *
 *   - random patterns (densities 0, 1/1000, 1/64, 1/2, all) for n = 0..300
 *     with every start, and n = 4096, 10000, 65553 with random starts;
 *     max = 1, 3 and unlimited; flag values 1..255 (0x80 and up matter to
 *     movemask);
 *   - a single flag at every index for n around vector edges, with starts
 *     at and around vector edges, the flag and n (start >= n wraps);
 *   - fairness: with start = last + 1, the concatenated results walk the
 *     set flags in cyclic order, so each is served exactly once per
 *     round of the set (all set, max = k: every index once per n/k calls).
 *
 * Flag arrays are malloc'ed at exactly n bytes (padded variants: exactly
 * round_up(n, 64), padding filled with non-zero garbage that must be
 * ignored), and out[] at exactly min(max, n) entries: under ASan any read
 * or write past them fails the test.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scan.h"

#define MAXFAIL 20

static unsigned long nfail, nchecks;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint8_t rnd_flag(void) { return (uint8_t)(1 + rnd() % 255); }

static struct {
	int code;
	char name[32];
} impls[8];
static int nimpls;

static void add_impl(enum zl_scan_impl i)
{
	for (int p = 0; p < 2; p++) {
		impls[nimpls].code = (int)i | (p ? ZL_SCAN_PADDED : 0);
		snprintf(impls[nimpls].name, sizeof(impls[0].name), "%s%s", zl_scan_name(i),
			 p ? "+padded" : "");
		nimpls++;
	}
}

/* The obvious definition: positions start, start+1, ... modulo n. */
static size_t ref_scan(const uint8_t *f, size_t n, size_t start, uint32_t *out, size_t max)
{
	size_t k = 0;
	for (size_t j = 0; j < n && k < max; j++) {
		size_t i = (start + j) % n;
		if (f[i])
			out[k++] = (uint32_t)i;
	}
	return k;
}

static size_t padded_len(size_t n) { return (n + 63) & ~(size_t)63; }

/* One flag pattern in the two layouts the implementations are run on. */
struct bufs {
	size_t n;
	uint8_t *exact;  /* n bytes */
	uint8_t *padded; /* round_up(n, 64) bytes, garbage after n */
};

static void bufs_make(struct bufs *b, const uint8_t *pat, size_t n)
{
	b->n = n;
	b->exact = malloc(n ? n : 1);
	b->padded = malloc(padded_len(n) ? padded_len(n) : 1);
	if (!b->exact || !b->padded) {
		perror("malloc");
		exit(1);
	}
	memcpy(b->exact, pat, n);
	memcpy(b->padded, pat, n);
	for (size_t i = n; i < padded_len(n); i++)
		b->padded[i] = rnd_flag();
}

static void bufs_free(struct bufs *b)
{
	free(b->exact);
	free(b->padded);
}

static const char *max_str(size_t max, char *buf)
{
	if (max == SIZE_MAX)
		return "unlimited";
	snprintf(buf, 24, "%zu", max);
	return buf;
}

/* Every implementation agrees with the reference for (start, max). */
static void check(const struct bufs *b, size_t start, size_t max, const char *what)
{
	size_t n = b->n, cap = max < n ? max : n;
	uint32_t want[cap ? cap : 1];
	uint32_t *got = malloc((cap ? cap : 1) * sizeof(uint32_t)); /* exact: ASan */
	size_t nw = ref_scan(b->exact, n, n ? start % n : 0, want, max);
	for (int i = 0; i < nimpls; i++) {
		const uint8_t *f = impls[i].code & ZL_SCAN_PADDED ? b->padded : b->exact;
		size_t ng = zl_scan((enum zl_scan_impl)impls[i].code, f, n, start, got, max);
		nchecks++;
		size_t both = ng < nw ? ng : nw, bad = both; /* first differing entry */
		for (size_t j = 0; bad == both && j < both; j++)
			if (got[j] != want[j])
				bad = j;
		if (ng == nw && bad == both)
			continue;
		if (++nfail <= MAXFAIL) {
			char mb[24];
			fprintf(stderr,
				"FAIL %s: %s n=%zu start=%zu max=%s: got %zu entries, want %zu",
				what, impls[i].name, n, start, max_str(max, mb), ng, nw);
			if (bad < both)
				fprintf(stderr, "; entry %zu is %u, want %u", bad, got[bad],
					want[bad]);
			fprintf(stderr, "\n");
		}
	}
	free(got);
}

static const size_t maxes[] = {1, 3, SIZE_MAX};
#define NMAXES (sizeof(maxes) / sizeof(maxes[0]))

/* density as 1/den; 0 = none, 1 = all */
static void fill(uint8_t *p, size_t n, unsigned den)
{
	for (size_t i = 0; i < n; i++)
		p[i] = den && rnd() % den == 0 ? rnd_flag() : 0;
}

static void test_random(void)
{
	static const unsigned dens[] = {0, 1000, 64, 2, 1};
	uint8_t *pat = malloc(65553);
	for (size_t n = 0; n <= 300; n++) {
		for (size_t d = 0; d < 5; d++) {
			struct bufs b;
			fill(pat, n, dens[d]);
			bufs_make(&b, pat, n);
			for (size_t s = 0; s < (n ? n : 1); s++)
				for (size_t m = 0; m < NMAXES; m++)
					check(&b, s, maxes[m], "random");
			bufs_free(&b);
		}
	}
	static const size_t big[] = {4096, 10000, 65553};
	for (size_t g = 0; g < 3; g++) {
		size_t n = big[g];
		for (size_t d = 0; d < 5; d++) {
			struct bufs b;
			fill(pat, n, dens[d]);
			bufs_make(&b, pat, n);
			for (int r = 0; r < 60; r++) {
				size_t s = r == 0 ? 0 : r == 1 ? n - 1 : rnd() % n;
				for (size_t m = 0; m < NMAXES; m++)
					check(&b, s, maxes[m], "random-big");
			}
			bufs_free(&b);
		}
	}
	free(pat);
}

static void test_edges(void)
{
	static const size_t ns[] = {1,  2,  3,  7,   8,   15,  16,  17,  31,  32,  33,
				    47, 48, 49, 63,  64,  65,  95,  96,  97,  127, 128,
				    129, 191, 192, 193, 255, 256, 257};
	static const uint8_t vals[] = {1, 0x7f, 0x80, 0xff};
	uint8_t pat[257];
	for (size_t t = 0; t < sizeof(ns) / sizeof(ns[0]); t++) {
		size_t n = ns[t];
		for (size_t idx = 0; idx < n; idx++) {
			memset(pat, 0, n);
			pat[idx] = vals[idx % 4];
			struct bufs b;
			bufs_make(&b, pat, n);
			size_t starts[] = {0,  1,  15, 16,      17,  31,      32,    33, 63,
					   64, 65, idx - 1, idx, idx + 1, n - 1, n,  n + idx,
					   2 * n + 1};
			/* starts >= n (idx - 1 = SIZE_MAX at idx 0 too) wrap modulo n */
			for (size_t s = 0; s < sizeof(starts) / sizeof(starts[0]); s++) {
				check(&b, starts[s], 1, "edge");
				check(&b, starts[s], SIZE_MAX, "edge");
			}
			bufs_free(&b);
		}
	}
}

/* Serve with start = last + 1 in calls of max k; the results
 * concatenated must be the set flags in cyclic order from the first one at
 * or after start0, with every call full (min(k, |set|) entries). */
static void fair_run(const struct bufs *b, const char *name, int code, size_t start0,
		     size_t k)
{
	size_t n = b->n, nset = 0, first = SIZE_MAX;
	const uint8_t *f = code & ZL_SCAN_PADDED ? b->padded : b->exact;
	uint32_t *set = malloc(n * sizeof(uint32_t)), *got = malloc(k * sizeof(uint32_t));
	for (size_t i = 0; i < n; i++)
		if (b->exact[i]) {
			if (first == SIZE_MAX && i >= start0)
				first = nset;
			set[nset++] = (uint32_t)i;
		}
	if (first == SIZE_MAX)
		first = 0; /* wraps to the first set flag */
	size_t want_k = k < nset ? k : nset, pos = 0, start = start0;
	/* Two cycles through the set (all set, k | n: each index exactly once
	 * per n/k calls, twice in all), plus a few calls to cross a wrap. */
	size_t rounds = want_k ? 2 * (nset / want_k) + 3 : 1;
	for (size_t r = 0; r < rounds; r++) {
		size_t ng = zl_scan((enum zl_scan_impl)code, f, n, start, got, k);
		nchecks++;
		int ok = ng == want_k;
		for (size_t j = 0; ok && j < ng; j++, pos++)
			ok = got[j] == set[(first + pos) % nset];
		if (!ok) {
			if (++nfail <= MAXFAIL)
				fprintf(stderr,
					"FAIL fairness: %s n=%zu set=%zu k=%zu start0=%zu: round %zu "
					"(start %zu) returned %zu entries out of cyclic order\n",
					name, n, nset, k, start0, r, start, ng);
			break;
		}
		if (ng)
			start = got[ng - 1] + 1; /* may be n: wraps */
	}
	free(set);
	free(got);
}

static void test_fairness(void)
{
	static const size_t ns[] = {1, 7, 16, 64, 100, 1000, 4099};
	static const size_t ks[] = {1, 3, 16, 64, 5000};
	for (size_t t = 0; t < sizeof(ns) / sizeof(ns[0]); t++) {
		size_t n = ns[t];
		uint8_t *pat = malloc(n);
		for (int sparse = 0; sparse < 2; sparse++) {
			if (sparse)
				fill(pat, n, 8);
			else
				memset(pat, 1, n);
			if (sparse)
				pat[rnd() % n] = rnd_flag(); /* never empty */
			struct bufs b;
			bufs_make(&b, pat, n);
			for (size_t j = 0; j < sizeof(ks) / sizeof(ks[0]); j++) {
				for (int i = 0; i < nimpls; i++) {
					fair_run(&b, impls[i].name, impls[i].code, 0, ks[j]);
					fair_run(&b, impls[i].name, impls[i].code, rnd() % n, ks[j]);
				}
			}
			bufs_free(&b);
		}
		free(pat);
	}
}

static void test_trivial(void)
{
	uint8_t f[4] = {1, 1, 1, 1};
	uint32_t out[4];
	for (int i = 0; i < nimpls; i++) {
		enum zl_scan_impl c = (enum zl_scan_impl)impls[i].code;
		nchecks += 2;
		if (zl_scan(c, NULL, 0, 0, out, 4) != 0 || zl_scan(c, f, 4, 0, out, 0) != 0) {
			nfail++;
			fprintf(stderr, "FAIL trivial: %s: n = 0 or max = 0 must return 0\n",
				impls[i].name);
		}
	}
}

int main(void)
{
	enum zl_scan_impl best = zl_scan_best();
	for (int i = ZL_SCAN_SCALAR; i <= ZL_SCAN_AVX2; i++)
		if (zl_scan_supported((enum zl_scan_impl)i))
			add_impl((enum zl_scan_impl)i);
	printf("scan: best %s; testing", zl_scan_name(best));
	for (int i = 0; i < nimpls; i++)
		printf(" %s", impls[i].name);
	printf("\n");
	if (!zl_scan_supported(best)) {
		fprintf(stderr, "FAIL: zl_scan_best() returned an unsupported impl\n");
		return 1;
	}

	test_trivial();
	test_edges();
	test_fairness();
	test_random();

	printf("scan: %lu checks, %lu failed\n", nchecks, nfail);
	return nfail ? 1 : 0;
}
