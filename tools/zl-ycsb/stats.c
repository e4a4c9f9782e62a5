/* SPDX-License-Identifier: MIT */
/* Percentiles (nearest rank over every sample), the table and CSV rows. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ycsb.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static uint64_t rank(const uint64_t *v, uint64_t n, double p)
{
	/* the smallest value with at least p% of the samples <= it */
	uint64_t r = (uint64_t)ceil(p / 100.0 * (double)n);
	r = r < 1 ? 1 : r > n ? n : r;
	return v[r - 1];
}

void lat_stats(uint64_t *v, uint64_t n, uint64_t elapsed_ns, struct lat_stats *s)
{
	memset(s, 0, sizeof(*s));
	s->count = n;
	if (!n)
		return;
	qsort(v, n, sizeof(*v), cmp_u64);
	s->median_us = (double)rank(v, n, 50) / 1e3;
	s->p99_us = (double)rank(v, n, 99) / 1e3;
	s->p999_us = (double)rank(v, n, 99.9) / 1e3;
	s->max_us = (double)v[n - 1] / 1e3;
	s->ops_per_s = elapsed_ns ? (double)n * 1e9 / (double)elapsed_ns : 0;
}

static void fmt_rate(char *b, size_t cap, double r)
{
	if (r >= 1e6)
		snprintf(b, cap, "%.2f M", r / 1e6);
	else if (r >= 1e3)
		snprintf(b, cap, "%.1f k", r / 1e3);
	else
		snprintf(b, cap, "%.0f", r);
}

static void row(const char *name, const struct lat_stats *s, uint64_t nf)
{
	char rate[32];
	fmt_rate(rate, sizeof(rate), s->ops_per_s);
	printf("  %-26s %10llu %9s %9.2f %9.2f %9.2f %9.1f", name, (unsigned long long)s->count,
	       rate, s->median_us, s->p99_us, s->p999_us, s->max_us);
	if (nf != (uint64_t)-1)
		printf(" %9llu", (unsigned long long)nf);
	printf("\n");
}

static void csv_row(FILE *f, const struct opts *o, enum phase ph, const char *op,
		    const struct lat_stats *s)
{
	fprintf(f, "%s,%c,%s,%d,%s,%llu,%.1f,%.3f,%.3f,%.3f,%.3f,%d\n", o->label ? o->label : o->url,
		o->w.name, ph == PHASE_LOAD ? "load" : "run", o->threads, op,
		(unsigned long long)s->count, s->ops_per_s, s->median_us, s->p99_us, s->p999_us,
		s->max_us, o->depth);
}

/* All samples of a phase in one array, for the OVERALL row. */
static int overall(uint64_t *const *v, const uint64_t *n, uint64_t elapsed, struct lat_stats *s)
{
	uint64_t tot = 0, k = 0;
	for (int i = 0; i < OP_N; i++)
		tot += n[i];
	uint64_t *all = malloc((tot ? tot : 1) * sizeof(*all));
	if (!all)
		return -ENOMEM;
	for (int i = 0; i < OP_N; i++)
		if (n[i]) {
			memcpy(all + k, v[i], n[i] * sizeof(*all));
			k += n[i];
		}
	lat_stats(all, tot, elapsed, s);
	free(all);
	return 0;
}

int report_phase(const struct opts *o, struct phase_result *r, struct lat_stats *st)
{
	struct lat_stats ist[OP_N + 1];
	int rc = 0;
	for (int k = 0; k < OP_N; k++) {
		lat_stats(r->samples[k], r->n[k], r->elapsed_ns, &st[k]);
		if (r->throttled)
			lat_stats(r->intended[k], r->n[k], r->elapsed_ns, &ist[k]);
	}
	if (overall(r->samples, r->n, r->elapsed_ns, &st[OP_N]) < 0 ||
	    (r->throttled && overall(r->intended, r->n, r->elapsed_ns, &ist[OP_N]) < 0))
		return -ENOMEM;

	char rate[32];
	fmt_rate(rate, sizeof(rate), st[OP_N].ops_per_s);
	printf("[%s] %llu operations in %.2f s: %s ops/s\n", r->phase == PHASE_LOAD ? "load" : "run",
	       (unsigned long long)st[OP_N].count, (double)r->elapsed_ns / 1e9, rate);
	printf("  %-26s %10s %9s %9s %9s %9s %9s %9s\n", "operation", "count", "ops/s", "median",
	       "p99", "p99.9", "max", "not found");
	for (int k = 0; k < OP_N; k++)
		if (r->n[k])
			row(op_name[k], &st[k], r->notfound[k]);
	row("OVERALL", &st[OP_N], (uint64_t)-1);
	if (r->throttled) {
		char name[48];
		for (int k = 0; k < OP_N; k++)
			if (r->n[k]) {
				snprintf(name, sizeof(name), "INTENDED-%s", op_name[k]);
				row(name, &ist[k], (uint64_t)-1);
			}
		row("INTENDED-OVERALL", &ist[OP_N], (uint64_t)-1);
	}
	printf("  latencies in microseconds, per operation (its request/reply round trips)%s\n",
	       r->throttled ? ";\n  INTENDED-*: from the scheduled start (coordinated omission "
			      "corrected)" : "");
	if (r->badlen)
		printf("  WARNING: %llu values read were not %zu bytes: loaded with other "
		       "--fieldcount/--fieldlength?\n",
		       (unsigned long long)r->badlen, workload_recsize(&o->w));
	fflush(stdout);

	if (!o->csv)
		return 0;
	FILE *f = fopen(o->csv, "a");
	struct stat sb;
	if (!f) {
		rc = -errno;
		perror(o->csv);
		return rc;
	}
	if (fstat(fileno(f), &sb) == 0 && sb.st_size == 0)
		fprintf(f, "backend,workload,phase,threads,op,count,ops_per_s,median_us,p99_us,"
			   "p999_us,max_us,depth\n");
	for (int k = 0; k < OP_N; k++)
		if (r->n[k])
			csv_row(f, o, r->phase, op_name[k], &st[k]);
	csv_row(f, o, r->phase, "OVERALL", &st[OP_N]);
	if (r->throttled) {
		char name[48];
		for (int k = 0; k < OP_N; k++)
			if (r->n[k]) {
				snprintf(name, sizeof(name), "INTENDED-%s", op_name[k]);
				csv_row(f, o, r->phase, name, &ist[k]);
			}
		csv_row(f, o, r->phase, "INTENDED-OVERALL", &ist[OP_N]);
	}
	if (fclose(f) != 0) {
		rc = -errno;
		perror(o->csv);
	}
	return rc;
}
