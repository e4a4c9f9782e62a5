/* SPDX-License-Identifier: MIT */
/*
 * zl-bench scan: the idle cost of the N:1 server's mailbox scan, i.e. one
 * zl_scan() over N flags of which none is set (the whole array is read).
 *
 * zl_scan is internal to libzipline (hidden symbol), so the tool compiles
 * its own copy of src/core/scan.c: the same source and -O2 as the library.
 *
 * One sample = a batch of B back-to-back calls timed together with
 * timer_now() (rdtscp, or CLOCK_MONOTONIC_RAW without an invariant TSC),
 * divided by B; B is chosen so that a batch takes ~2 us, which makes the
 * timer's own cost (~10-30 ns) negligible. Median and p99 over the samples.
 * Calls cannot be hoisted or merged: the flag loads are volatile, an asm
 * barrier "clobbers" the array before every call and each result feeds a
 * sink.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "zl-bench.h"

#include "../../src/core/scan.c"

#define BATCH_NS 2000.0

/* One timed configuration. */
struct scan_res {
	double median_ns, p99_ns;
	uint64_t batch;
};

static uint64_t g_sink;

static inline uint64_t batch_run(int code, const uint8_t *flags, size_t n, size_t start,
				 uint32_t *out, uint64_t calls)
{
	uint64_t acc = 0;
	for (uint64_t i = 0; i < calls; i++) {
		/* "may have written the array": every call must read it again */
		__asm__ volatile("" : : "r"(flags) : "memory");
		acc += zl_scan((enum zl_scan_impl)code, flags, n, start, out, SIZE_MAX);
	}
	return acc;
}

static void measure(int code, const uint8_t *flags, size_t n, size_t start, uint32_t *out,
		    uint64_t samples, uint64_t *ticks, struct scan_res *r)
{
	/* Warm up (caches, branch predictors, AVX power-up) and size the batch. */
	uint64_t calls = 0, t0 = mono_ns(), el;
	do {
		g_sink += batch_run(code, flags, n, start, out, 64);
		calls += 64;
	} while ((el = mono_ns() - t0) < 5 * 1000 * 1000);
	double per_call = (double)el / (double)calls;
	uint64_t b = (uint64_t)(BATCH_NS / per_call);
	if (b < 1)
		b = 1;
	for (uint64_t s = 0; s < samples; s++) {
		uint64_t a = timer_now();
		g_sink += batch_run(code, flags, n, start, out, b);
		ticks[s] = timer_now() - a;
	}
	struct result res;
	stats_compute(ticks, samples, 0, &res);
	r->median_ns = res.median_us * 1000.0 / (double)b;
	r->p99_ns = res.p99_us * 1000.0 / (double)b;
	r->batch = b;
}

static int parse_impls(const char *s, int *v, int *n)
{
	char buf[128], *save = NULL;
	if (strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	*n = 0;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int i;
		for (i = ZL_SCAN_SCALAR; i <= ZL_SCAN_AVX2; i++)
			if (!strcmp(t, zl_scan_name((enum zl_scan_impl)i)))
				break;
		if (i > ZL_SCAN_AVX2 || *n == 3)
			return -1;
		v[(*n)++] = i;
	}
	return *n ? 0 : -1;
}

/* start values timed per N: 0 (one range, aligned) and an unaligned middle
 * one (two ranges, both with partial blocks: what a rotating server sees) */
#define NSTART 2
static size_t start_of(int si, size_t n) { return si == 0 ? 0 : n / 2 + 5; }

int scan_run(const char *impl_arg, const char *n_arg, uint64_t samples, const char *csv,
	     int cpu)
{
	int imp[3] = {ZL_SCAN_SCALAR, ZL_SCAN_SSE2, ZL_SCAN_AVX2}, nimp = 3;
	if (impl_arg && parse_impls(impl_arg, imp, &nimp)) {
		fprintf(stderr, "zl-bench: bad --impl '%s' (scalar,sse2,avx2)\n", impl_arg);
		return 2;
	}
	size_t ns[ZLB_MAX_SIZES] = {16, 64, 256, 1024, 4096};
	int nn = 5;
	if (n_arg && parse_sizes(n_arg, ns, &nn)) {
		fprintf(stderr, "zl-bench: bad --n '%s' (e.g. 16,64,1k)\n", n_arg);
		return 2;
	}
	for (int i = 0; i < nn; i++)
		if (ns[i] == 0 || ns[i] > (1u << 30)) {
			fprintf(stderr, "zl-bench: --n values must be 1..1g\n");
			return 2;
		}
	if (!impl_arg) { /* default: what this CPU has */
		int k = 0;
		for (int i = 0; i < nimp; i++)
			if (zl_scan_supported((enum zl_scan_impl)imp[i]))
				imp[k++] = imp[i];
		nimp = k;
	}
	for (int i = 0; i < nimp; i++)
		if (!zl_scan_supported((enum zl_scan_impl)imp[i])) {
			fprintf(stderr, "zl-bench: this CPU does not support %s\n",
				zl_scan_name((enum zl_scan_impl)imp[i]));
			return 1;
		}
	if (cpu != ZLB_NO_CPU && pin_self(cpu)) {
		fprintf(stderr, "zl-bench: cannot pin to cpu%d\n", cpu);
		return 1;
	}
	FILE *cf = NULL;
	if (csv) {
		if (!(cf = fopen(csv, "a"))) {
			perror(csv);
			return 1;
		}
		if (ftell(cf) == 0)
			fprintf(cf, "n,impl,layout,start,batch,samples,median_ns,p99_ns,timer\n");
	}

	char line[256];
	printf("scan: idle cost of one zl_scan() over N mailbox flags, none set (ns per call)\n");
	timer_describe(line, sizeof(line));
	printf("%s\n", line);
	printf("each sample: a batch of calls (~%.0f us) timed as a whole, divided by the batch "
	       "size; %llu samples\n",
	       BATCH_NS / 1000, (unsigned long long)samples);
	printf("scalar: one byte per step (volatile loads), not auto-vectorised "
	       "(optimize(\"no-tree-vectorize\"))\n");
	printf("array 64-byte aligned. exact: malloc'd N bytes, nothing read past N; padded: "
	       "ZL_SCAN_PADDED, readable to round_up(N, 64)\n");
	printf("start 0: one aligned range; start N/2+5: two ranges with partial blocks\n");
	printf("%s\n", cpu == ZLB_NO_CPU ? "not pinned (--pin A to pin)" : "pinned");
	printf("\n%6s %-7s %21s %21s %21s %9s\n", "", "", "exact, start 0", "exact, start N/2+5",
	       "padded, start N/2+5", "");
	printf("%6s %-7s %10s %10s %10s %10s %10s %10s %9s\n", "N", "impl", "median", "p99",
	       "median", "p99", "median", "p99", "x scalar");

	uint64_t *ticks = malloc(samples * sizeof(uint64_t));
	double med[ZLB_MAX_SIZES][3];
	memset(med, 0, sizeof(med));
	int rc = 0;
	struct load_snap l0, l1;
	pid_t self = 0;
	load_snap(&l0, &self, 1);
	for (int ni = 0; ni < nn && !rc; ni++) {
		size_t n = ns[ni], alloc = (n + 63) & ~(size_t)63;
		uint8_t *flags = aligned_alloc(64, alloc);
		uint32_t *out = malloc(n * sizeof(uint32_t));
		if (!flags || !out || !ticks) {
			perror("malloc");
			rc = 1;
		}
		for (int ii = 0; ii < nimp && !rc; ii++) {
			memset(flags, 0, alloc);
			struct scan_res r[3];
			/* (exact, 0), (exact, mid), (padded, mid) */
			measure(imp[ii], flags, n, start_of(0, n), out, samples, ticks, &r[0]);
			measure(imp[ii], flags, n, start_of(1, n), out, samples, ticks, &r[1]);
			measure(imp[ii] | ZL_SCAN_PADDED, flags, n, start_of(1, n), out, samples,
				ticks, &r[2]);
			med[ni][imp[ii]] = r[0].median_ns;
			char x[16] = "";
			if (med[ni][ZL_SCAN_SCALAR] > 0)
				snprintf(x, sizeof(x), "%.1fx",
					 med[ni][ZL_SCAN_SCALAR] / r[0].median_ns);
			printf("%6zu %-7s %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %9s\n", n,
			       zl_scan_name((enum zl_scan_impl)imp[ii]), r[0].median_ns,
			       r[0].p99_ns, r[1].median_ns, r[1].p99_ns, r[2].median_ns,
			       r[2].p99_ns, x);
			fflush(stdout);
			for (int c = 0; cf && c < 3; c++)
				fprintf(cf, "%zu,%s,%s,%zu,%llu,%llu,%.3f,%.3f,%s\n", n,
					zl_scan_name((enum zl_scan_impl)imp[ii]),
					c == 2 ? "padded" : "exact", start_of(c != 0, n),
					(unsigned long long)r[c].batch,
					(unsigned long long)samples, r[c].median_ns, r[c].p99_ns,
					timer_name());
		}
		free(flags);
		free(out);
	}
	load_snap(&l1, &self, 1);
	if (!rc)
		load_check(&l0, &l1);
	free(ticks);
	if (cf)
		fclose(cf);
	if (rc)
		return rc;

	/* Speedups on the median, exact layout, start 0. */
	printf("\nspeedup over scalar (median, exact, start 0):\n%6s %9s %9s\n", "N", "sse2",
	       "avx2");
	for (int ni = 0; ni < nn; ni++) {
		double s = med[ni][ZL_SCAN_SCALAR];
		char a[16] = "-", b[16] = "-";
		if (s > 0 && med[ni][ZL_SCAN_SSE2] > 0)
			snprintf(a, sizeof(a), "%.1fx", s / med[ni][ZL_SCAN_SSE2]);
		if (s > 0 && med[ni][ZL_SCAN_AVX2] > 0)
			snprintf(b, sizeof(b), "%.1fx", s / med[ni][ZL_SCAN_AVX2]);
		printf("%6zu %9s %9s\n", ns[ni], a, b);
	}
	for (int ni = 0; ni < nn; ni++) {
		if (ns[ni] != 1024)
			continue;
		double s = med[ni][ZL_SCAN_SCALAR], v = med[ni][ZL_SCAN_AVX2];
		if (s > 0 && v > 0)
			printf("target: avx2 >= 4x scalar at N = 1024: %.1fx (%.1f ns vs %.1f ns): "
			       "%s\n",
			       s / v, v, s, s / v >= 4.0 ? "met" : "NOT met");
	}
	if (g_sink) { /* every call must have found nothing */
		fprintf(stderr, "zl-bench: scan reported flags in an all-zero array\n");
		return 1;
	}
	return 0;
}
