/* SPDX-License-Identifier: MIT */
/* Percentiles by nearest rank over the raw per-round-trip samples. */
#include <math.h>
#include <stdlib.h>

#include "zl-bench.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

uint64_t stats_rank(const uint64_t *v, uint64_t n, double p)
{
	/* nearest rank: the smallest value with at least p% of samples <= it */
	uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)n);
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return v[rank - 1];
}

void stats_compute(uint64_t *ticks, uint64_t n, uint64_t elapsed_ns, struct result *r)
{
	r->valid = 0;
	if (!n)
		return;
	qsort(ticks, n, sizeof(*ticks), cmp_u64);
	/* Calibrate once, after the loop: the TSC span since startup is
	 * longest now, so the frequency estimate is at its best. */
	double us = timer_ns_per_tick() / 1000.0;
	r->median_us = (double)stats_rank(ticks, n, 50.0) * us;
	r->p99_us = (double)stats_rank(ticks, n, 99.0) * us;
	r->p999_us = (double)stats_rank(ticks, n, 99.9) * us;
	r->max_us = (double)ticks[n - 1] * us;
	r->rt_per_s = elapsed_ns ? (double)n * 1e9 / (double)elapsed_ns : 0.0;
	r->valid = 1;
}

double stats_median_grouped(const uint64_t *v, uint64_t n)
{
	if (!n)
		return 0;
	/* the timer's step: the smallest gap between distinct values */
	uint64_t q = 0;
	for (uint64_t i = 1; i < n; i++)
		if (v[i] != v[i - 1] && (!q || v[i] - v[i - 1] < q))
			q = v[i] - v[i - 1];
	uint64_t m = stats_rank(v, n, 50.0), below = 0, at = 0;
	for (uint64_t i = 0; i < n; i++) {
		below += v[i] < m;
		at += v[i] == m;
	}
	if (q <= 1 || !at)
		return (double)m;
	/* the samples read m spread evenly over [m - q/2, m + q/2) */
	return (double)m - (double)q / 2 + (double)q * ((double)n / 2 - (double)below) / (double)at;
}
