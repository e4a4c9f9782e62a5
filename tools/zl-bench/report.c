/* SPDX-License-Identifier: MIT */
/* Human-readable rows and CSV rows, in one format for every method. */
#include <stdio.h>
#include <sys/stat.h>

#include "zl-bench.h"

void fmt_us(char *buf, size_t cap, double us)
{
	/* three significant digits is all a noisy VM supports */
	if (us < 1.0)
		snprintf(buf, cap, "%.3f", us);
	else if (us < 10.0)
		snprintf(buf, cap, "%.2f", us);
	else if (us < 100.0)
		snprintf(buf, cap, "%.1f", us);
	else
		snprintf(buf, cap, "%.0f", us);
}

void fmt_rate(char *buf, size_t cap, double per_s)
{
	if (per_s >= 1e6)
		snprintf(buf, cap, "%.2f M", per_s / 1e6);
	else if (per_s >= 1e3)
		snprintf(buf, cap, "%.1f k", per_s / 1e3);
	else
		snprintf(buf, cap, "%.0f", per_s);
}

void report_setup(int cpu_a, int cpu_b, int both)
{
	char line[256];
	timer_describe(line, sizeof(line));
	printf("%s\n", line);
	describe_pin(line, sizeof(line), cpu_a, cpu_b, both);
	printf("%s\n", line);
}

void report_columns(void)
{
	printf("%8s %11s %9s %9s %9s %5s %14s\n", "size", "RTT median", "p99", "p99.9", "max",
	       "(us)", "round-trips/s");
}

void report_row(const struct result *r)
{
	char m[32], p99[32], p999[32], mx[32], rate[32];
	fmt_us(m, sizeof(m), r->median_us);
	fmt_us(p99, sizeof(p99), r->p99_us);
	fmt_us(p999, sizeof(p999), r->p999_us);
	fmt_us(mx, sizeof(mx), r->max_us);
	fmt_rate(rate, sizeof(rate), r->rt_per_s);
	printf("%8zu %11s %9s %9s %9s %5s %14s\n", r->size, m, p99, p999, mx, "", rate);
	fflush(stdout);
}

FILE *report_csv_open(const char *path, int truncate)
{
	FILE *f = fopen(path, truncate ? "w" : "a");
	if (!f) {
		perror(path);
		return NULL;
	}
	struct stat st;
	if (fstat(fileno(f), &st) == 0 && st.st_size == 0)
		fprintf(f, "transport,url,size,iters,median_us,p99_us,p999_us,max_us,rt_per_s,timer\n");
	return f;
}

void report_csv_row(const struct sink *s, const struct result *r)
{
	if (!s || !s->csv || !r->valid)
		return;
	fprintf(s->csv, "%s,%s,%zu,%llu,%.4f,%.4f,%.4f,%.4f,%.0f,%s\n", s->transport, s->url,
		r->size, (unsigned long long)r->iters, r->median_us, r->p99_us, r->p999_us,
		r->max_us, r->rt_per_s, timer_name());
	fflush(s->csv);
}

/* Finish one measurement: statistics, the table row, the co-tenant load
 * warning and the CSV row. */
void report_result(uint64_t *samples, uint64_t n, uint64_t elapsed_ns,
		   const struct load_snap *l0, const struct load_snap *l1,
		   const struct sink *sink, struct result *r)
{
	stats_compute(samples, n, elapsed_ns, r);
	report_row(r);
	load_check(l0, l1);
	report_csv_row(sink, r);
}
