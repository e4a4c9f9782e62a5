/* SPDX-License-Identifier: MIT */
/* zl-proto's histogram, percentiles and report lines
 * (tools/zl-proto/stats.c). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"
#include "testlib.h"

static int fails; /* the table-driven checks count their failures */

/* within 1/64 above the exact value, never below */
static int near(uint64_t got, uint64_t exact)
{
	return got >= exact && (double)got <= (double)exact * (1 + 1.0 / 64) + 1;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int fields(const char *line)
{
	int n = 1;
	for (; *line && *line != '\n'; line++)
		n += *line == ',';
	return n;
}

int main(void)
{
	static struct hist h, a, b;
	hist_init(&h);
	CHECK(hist_pct(&h, 50) == 0);

	/* buckets: monotonic, and each value at most its bucket's top */
	int last = -1;
	for (uint64_t v = 0; v < 5000000; v += 1 + v / 97) {
		int i = hist_bucket(v);
		CHECK(i >= last && i < H_BUCKETS);
		CHECK(hist_bucket_high(i) >= v && near(hist_bucket_high(i), v));
		last = i;
	}
	CHECK(hist_bucket(UINT64_MAX) == H_BUCKETS - 1);

	/* 1..100000: the exact ranks */
	for (uint64_t v = 1; v <= 100000; v++)
		hist_add(&h, v);
	CHECK(h.n == 100000 && h.max == 100000 && h.min == 1);
	CHECK(near(hist_pct(&h, 50), 50000));
	CHECK(near(hist_pct(&h, 99), 99000));
	CHECK(near(hist_pct(&h, 99.9), 99900));
	CHECK(hist_pct(&h, 100) == 100000);
	CHECK(hist_pct(&h, 0.0001) == 1);

	/* random values against a sorted copy; merge equals adding all */
	enum { N = 20000 };
	uint64_t *v = malloc(N * sizeof(*v));
	hist_init(&a);
	hist_init(&b);
	hist_init(&h);
	srand(7);
	for (int i = 0; i < N; i++) {
		v[i] = (uint64_t)rand() % 1000 + ((uint64_t)(rand() % 100 == 0) << 22);
		hist_add(i % 2 ? &a : &b, v[i]);
		hist_add(&h, v[i]);
	}
	hist_merge(&a, &b);
	CHECK(!memcmp(&a, &h, sizeof(h)));
	qsort(v, N, sizeof(*v), cmp);
	double pcts[] = { 50, 90, 99, 99.9, 100 };
	for (int i = 0; i < 5; i++) {
		size_t rank = (size_t)(pcts[i] / 100 * N + 0.999999);
		CHECK(near(hist_pct(&h, pcts[i]), v[rank - 1]));
	}
	free(v);

	/* report: one header, rows with as many fields, the paper's
	 * bandwidth (messages/s x V), empty latency where there is none */
	struct result r = { .mode = "proto", .proto = "read", .pattern = "M:M", .N = 4, .P = 4, .Q = 4,
			    .S = 1, .R = 8, .L = 36, .V = 365, .variant = "-", .nodes = 4, .qps = 6,
			    .seconds = 2, .msgs = 100000, .per_node = 1, .clock = "clock_gettime",
			    .label = "t" };
	hist_init(&r.lat);
	CHECK(result_rate(&r) == 50000);
	CHECK(result_gbps(&r) == 50000.0 * 365 * 8 / 1e9);
	char *buf;
	size_t len;
	FILE *f = open_memstream(&buf, &len);
	report_csv_header(f);
	report_csv_row(f, &r);
	for (int i = 0; i < 1000; i++)
		hist_add(&r.lat, 10000 + (uint64_t)i);
	report_csv_row(f, &r);
	report_text(f, &r);
	fclose(f);
	char *l2 = strchr(buf, '\n') + 1, *l3 = strchr(l2, '\n') + 1, *l4 = strchr(l3, '\n') + 1;
	CHECK(!strncmp(buf, "mode,proto,pattern,", 19));
	CHECK(fields(buf) == 25 && fields(l2) == 25 && fields(l3) == 25);
	CHECK(strstr(l2, ",50000.0,0.146000,0.036500,,,,,clock_gettime,t\n") != NULL);
	/* a percentile is its bucket's top, capped by the maximum: the p50
	 * of 10000..10999 ns (10499) is reported as 10623 ns */
	CHECK(strstr(l3, ",50000.0,0.146000,0.036500,10.62,11.00,11.00,11.00,clock_gettime,t\n") != NULL);
	CHECK(strstr(l4, "read M:M N=4") && strstr(l4, "(0.0365 per node)") && strstr(l4, "p99.9 11.00"));
	if (fails)
		fprintf(stderr, "output was:\n%s", buf);
	free(buf);
	if (fails) {
		fprintf(stderr, "proto_stats: %d checks failed\n", fails);
		return 1;
	}
	printf("proto_stats: OK\n");
	return 0;
}
