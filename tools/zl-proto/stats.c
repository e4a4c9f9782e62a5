/* SPDX-License-Identifier: MIT */
#include <math.h>
#include <string.h>

#include "stats.h"

void hist_init(struct hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

int hist_bucket(uint64_t ns)
{
	if (ns < H_EXACT)
		return (int)ns;
	int msb = 63 - __builtin_clzll(ns); /* >= 7 */
	int shift = msb - 6;
	return H_EXACT + (msb - 7) * H_SUB + (int)((ns >> shift) - H_SUB);
}

uint64_t hist_bucket_high(int i)
{
	if (i < H_EXACT)
		return (uint64_t)i;
	int msb = (i - H_EXACT) / H_SUB + 7, sub = (i - H_EXACT) % H_SUB;
	int shift = msb - 6;
	uint64_t low = (uint64_t)(H_SUB + sub) << shift;
	return low + ((1ull << shift) - 1);
}

void hist_add(struct hist *h, uint64_t ns)
{
	h->b[hist_bucket(ns)]++;
	h->n++;
	h->sum += ns;
	if (ns > h->max)
		h->max = ns;
	if (ns < h->min)
		h->min = ns;
}

void hist_merge(struct hist *d, const struct hist *s)
{
	for (int i = 0; i < H_BUCKETS; i++)
		d->b[i] += s->b[i];
	d->n += s->n;
	d->sum += s->sum;
	if (s->max > d->max)
		d->max = s->max;
	if (s->min < d->min)
		d->min = s->min;
}

uint64_t hist_pct(const struct hist *h, double pct)
{
	if (!h->n)
		return 0;
	/* the smallest value with at least ceil(pct% of n) values at or below */
	uint64_t rank = (uint64_t)ceil(pct / 100.0 * (double)h->n - 1e-9), seen = 0;
	if (rank < 1)
		rank = 1;
	if (rank > h->n)
		rank = h->n;
	for (int i = 0; i < H_BUCKETS; i++) {
		seen += h->b[i];
		if (seen >= rank) {
			uint64_t v = hist_bucket_high(i);
			if (v > h->max)
				v = h->max;
			if (v < h->min)
				v = h->min;
			return v;
		}
	}
	return h->max;
}

double result_rate(const struct result *r)
{
	return r->seconds > 0 ? (double)r->msgs / r->seconds : 0;
}

double result_gbps(const struct result *r)
{
	return result_rate(r) * r->V * 8 / 1e9;
}

void report_csv_header(FILE *f)
{
	fputs("mode,proto,pattern,N,P,Q,S,R,L,V,variant,x,nodes,qps,seconds,msgs,msgs_per_s,"
	      "gbps,gbps_per_node,p50_us,p99_us,p999_us,max_us,clock,label\n",
	      f);
}

static double us(uint64_t ns) { return (double)ns / 1e3; }

void report_csv_row(FILE *f, const struct result *r)
{
	double g = result_gbps(r);
	fprintf(f, "%s,%s,%s,%d,%d,%d,%d,%d,%u,%u,%s,%g,%d,%d,%.3f,%llu,%.1f,%.6f,%.6f,", r->mode,
		r->proto, r->pattern, r->N, r->P, r->Q, r->S, r->R, r->L, r->V, r->variant, r->x,
		r->nodes, r->qps, r->seconds, (unsigned long long)r->msgs, result_rate(r), g,
		r->per_node && r->nodes ? g / r->nodes : g);
	if (r->lat.n)
		fprintf(f, "%.2f,%.2f,%.2f,%.2f,", us(hist_pct(&r->lat, 50)), us(hist_pct(&r->lat, 99)),
			us(hist_pct(&r->lat, 99.9)), us(r->lat.max));
	else
		fputs(",,,,", f);
	fprintf(f, "%s,%s\n", r->clock, r->label ? r->label : "");
}

void report_text(FILE *f, const struct result *r)
{
	double g = result_gbps(r);
	if (!strcmp(r->mode, "proto"))
		fprintf(f, "%s %s N=%d P=%d Q=%d S=%d R=%d L=%u V=%u: %d QPs, ", r->proto, r->pattern,
			r->N, r->P, r->Q, r->S, r->R, r->L, r->V, r->qps);
	else
		fprintf(f, "%s %s x=%g V=%u: ", r->mode, r->variant, r->x, r->V);
	fprintf(f, "%llu msgs in %.3f s, %.0f msgs/s, %.4f Gbit/s", (unsigned long long)r->msgs,
		r->seconds, result_rate(r), g);
	if (r->per_node && r->nodes)
		fprintf(f, " (%.4f per node)", g / r->nodes);
	if (r->lat.n)
		fprintf(f, "; latency p50 %.2f p99 %.2f p99.9 %.2f max %.2f us", us(hist_pct(&r->lat, 50)),
			us(hist_pct(&r->lat, 99)), us(hist_pct(&r->lat, 99.9)), us(r->lat.max));
	fprintf(f, " [clock: %s]\n", r->clock);
}
