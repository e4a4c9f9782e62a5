/* SPDX-License-Identifier: MIT */
/* The median of per-block ratios with its confidence interval, for the
 * tools that compare methods or builds in interleaved blocks (zl-bench
 * blocks, bench/ab.c). Header-only: zl-ab builds without zl-bench. */
#ifndef ZLB_MEDIAN_CI_H
#define ZLB_MEDIAN_CI_H

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

static inline int zlb_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Median of v[0..n) (n >= 1; sorted in place) and its distribution-free
 * 95% confidence interval by order statistics: ranks n/2 -+ 0.98 sqrt(n),
 * 1-based, clamped to [1, n]. */
static inline double zlb_median_ci(double *v, size_t n, double *lo, double *hi)
{
	qsort(v, n, sizeof(*v), zlb_cmp_double);
	size_t d = (size_t)ceil(0.98 * sqrt((double)n)), a = n / 2 > d ? n / 2 - d : 1;
	size_t b = n / 2 + 1 + d > n ? n : n / 2 + 1 + d;
	*lo = v[a - 1];
	*hi = v[b - 1];
	return v[(n + 1) / 2 - 1];
}

#endif
