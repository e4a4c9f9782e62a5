/* SPDX-License-Identifier: MIT */
/* Latency histograms, percentiles and the report lines (CSV and text).
 * Pure code: tests/proto_stats.c checks it on any host. */
#ifndef ZL_PROTO_STATS_H
#define ZL_PROTO_STATS_H

#include <stdint.h>
#include <stdio.h>

/* Log-linear buckets: exact below 128 ns, then 64 per power of two, so a
 * percentile is within 1/64 (1.6%) of the true value; fixed size, so nodes
 * can send theirs to node 0 as bytes and be merged there. */
#define H_EXACT 128
#define H_SUB 64
#define H_BUCKETS (H_EXACT + (64 - 7) * H_SUB)

struct hist {
	uint64_t n, sum, max, min;
	uint64_t b[H_BUCKETS];
};

void hist_init(struct hist *h);
void hist_add(struct hist *h, uint64_t ns);
void hist_merge(struct hist *d, const struct hist *s);
/* The value at percentile pct (0 < pct <= 100): the upper end of its
 * bucket, never above the maximum seen; 0 for an empty histogram. */
uint64_t hist_pct(const struct hist *h, double pct);
int hist_bucket(uint64_t ns);
uint64_t hist_bucket_high(int i);

/* One result row: a protocol run (mode "proto") or one point of a verbs
 * experiment (variant and x say which). */
struct result {
	const char *mode, *proto, *pattern;
	int N, P, Q, S, R;
	uint32_t L, V;
	const char *variant; /* experiment: e.g. "rc", "write-imm"; proto: "-" */
	double x;            /* experiment: the swept value (size, interval, ...) */
	int nodes, qps;
	double seconds;      /* measured time */
	uint64_t msgs;       /* responses checked (or round trips) */
	int per_node;        /* M:M: bandwidth is also given per node */
	struct hist lat;     /* request-response latency, ns; n == 0: none */
	const char *clock;
	const char *label;
};

double result_rate(const struct result *r);
/* bandwidth in Gbit/s: messages/s x V (the paper's definition) */
double result_gbps(const struct result *r);
void report_csv_header(FILE *f);
void report_csv_row(FILE *f, const struct result *r);
void report_text(FILE *f, const struct result *r);

#endif
