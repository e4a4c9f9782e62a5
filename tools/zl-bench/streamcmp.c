/* SPDX-License-Identifier: MIT */
/*
 * zl-bench stream-compare: one-way streaming on every transport and its
 * references in ONE run: zipline shm (also zero copy), unix and tcp, the same framed
 * messages over raw Unix and TCP sockets, the bare copying ring (spsc, the
 * floor), and ucx_perftest's ucp_am_bw and ucp_put_bw on shared memory.
 * With --batch B > 1 every zipline and raw method also runs with B
 * messages per send call. Runs are interleaved (run k of every method,
 * in an order that rotates, then run k + 1), so a machine that changes
 * speed changes it for all alike; the spread is over the runs.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gnuplot.h"
#include "stream.h"

enum kind { M_ZL, M_RAW_TCP, M_RAW_UNIX, M_SPSC, M_UCX };

struct method {
	char label[40], url[160];
	enum kind kind;
	const char *test; /* UCX */
	uint32_t batch;
	int zerocopy;
	int ok, skipped;
	struct stream_res res;
};

#define MAX_M 16
static struct method ms[MAX_M];
static int nms;

static struct method *add(enum kind k, const char *label, const char *url, uint32_t batch)
{
	struct method *m = &ms[nms++];
	memset(m, 0, sizeof(*m));
	m->kind = k;
	m->batch = batch;
	m->ok = 1;
	snprintf(m->label, sizeof(m->label), "%s", label);
	snprintf(m->url, sizeof(m->url), "%s", url);
	return m;
}

static const struct method *find(const char *label)
{
	for (int i = 0; i < nms; i++)
		if (!strcmp(ms[i].label, label) && ms[i].ok && !ms[i].skipped)
			return &ms[i];
	return NULL;
}

static void setup(const struct stream_opts *o)
{
	char u[160], l[40];
	int pid = (int)getpid();
	uint32_t b[2] = { 1, o->batch > 1 ? o->batch : 0 };
	for (int k = 0; k < 2 && b[k]; k++) {
		const char *sfx = k ? " batch" : "";
		snprintf(u, sizeof(u), "shm://zlb-stream-%d", pid);
		snprintf(l, sizeof(l), "zipline shm%s", sfx);
		add(M_ZL, l, u, b[k]);
		snprintf(u, sizeof(u), "unix:///tmp/zlb-stream-%d.sock", pid);
		snprintf(l, sizeof(l), "zipline unix%s", sfx);
		add(M_ZL, l, u, b[k]);
		snprintf(l, sizeof(l), "zipline tcp%s", sfx);
		add(M_ZL, l, "tcp://127.0.0.1:0", b[k]);
		snprintf(l, sizeof(l), "raw unix%s", sfx);
		add(M_RAW_UNIX, l, "unix socket, no zipline", b[k]);
		snprintf(l, sizeof(l), "raw tcp%s", sfx);
		add(M_RAW_TCP, l, "tcp 127.0.0.1, no zipline", b[k]);
	}
	snprintf(u, sizeof(u), "shm://zlb-stream-%d", pid);
	add(M_ZL, "zipline shm zerocopy", u, 1)->zerocopy = 1;
	add(M_SPSC, "spsc floor", "bare copying ring", 1);
	add(M_UCX, "ucx am_bw", "ucx_perftest -t ucp_am_bw", 1)->test = "ucp_am_bw";
	add(M_UCX, "ucx put_bw", "ucx_perftest -t ucp_put_bw", 1)->test = "ucp_put_bw";
}

static int run_method(struct method *m, const struct stream_opts *base, int run)
{
	struct stream_opts o = *base;
	o.url = m->url;
	o.batch = m->batch;
	o.zerocopy = m->zerocopy;
	switch (m->kind) {
	case M_ZL: return stream_zl_run(&o, &m->res, run);
	case M_RAW_TCP: return stream_raw_run(&o, 0, &m->res, run);
	case M_RAW_UNIX: return stream_raw_run(&o, 1, &m->res, run);
	case M_SPSC: return stream_spsc_run(&o, &m->res, run);
	case M_UCX: return stream_ucx_run(&o, m->test, &m->res, run);
	}
	return 1;
}

static void ratio(const char *what, const char *a, const char *b, const struct stream_opts *o)
{
	const struct method *x = find(a), *y = find(b);
	if (!x || !y)
		return;
	printf("  %-34s", what);
	for (int s = 0; s < o->nsizes; s++) {
		double l, mx, h, my;
		stream_spread(&x->res, s, &l, &mx, &h);
		stream_spread(&y->res, s, &l, &my, &h);
		if (my > 0)
			printf(" %8.2f", mx / my);
		else
			printf(" %8s", "-");
	}
	printf("\n");
}

static void print_ratios(const struct stream_opts *o)
{
	printf("\nratios of median messages/s (above 1: the first is faster)\n  %-34s", "size");
	for (int s = 0; s < o->nsizes; s++)
		printf(" %8zu", o->sizes[s]);
	printf("\n");
	ratio("zipline shm / spsc floor", "zipline shm", "spsc floor", o);
	ratio("zipline shm / ucx am_bw", "zipline shm", "ucx am_bw", o);
	ratio("zipline shm / ucx put_bw", "zipline shm", "ucx put_bw", o);
	ratio("zipline shm zerocopy / ucx am_bw", "zipline shm zerocopy", "ucx am_bw", o);
	ratio("zipline shm zerocopy / spsc floor", "zipline shm zerocopy", "spsc floor", o);
	ratio("zipline unix / raw unix", "zipline unix", "raw unix", o);
	ratio("zipline tcp / raw tcp", "zipline tcp", "raw tcp", o);
	ratio("zipline shm batch / zipline shm", "zipline shm batch", "zipline shm", o);
	ratio("zipline shm batch / ucx am_bw", "zipline shm batch", "ucx am_bw", o);
	ratio("zipline unix batch / zipline unix", "zipline unix batch", "zipline unix", o);
	ratio("zipline tcp batch / zipline tcp", "zipline tcp batch", "zipline tcp", o);
	ratio("zipline unix batch / raw unix batch", "zipline unix batch", "raw unix batch", o);
	ratio("zipline tcp batch / raw tcp batch", "zipline tcp batch", "raw tcp batch", o);
}

static void plot(const char *path, const struct stream_opts *o)
{
	FILE *g;
	if (gnuplot_open(&g))
		return;
	static const char *colors[MAX_M] = { "#1b9e77", "#d95f02", "#7570b3", "#e7298a",
					     "#66a61e", "#e6ab02", "#a6761d", "#666666",
					     "#1f78b4", "#b2df8a", "#fb9a99", "#cab2d6",
					     "#000000", "#ff7f00", "#6a3d9a", "#b15928" };
	fprintf(g, "set terminal pngcairo noenhanced size 1200,700 font 'sans,11'\n"
		   "set output '%s'\nset logscale xy\nset grid\nset key outside right\n"
		   "set xlabel 'message size (bytes)'\nset ylabel 'GB/s, median of the runs'\n"
		   "set title 'zipline one-way streaming by message size -- higher is better'\n",
		path);
	for (int k = 0; k < nms; k++) {
		fprintf(g, "$d%d << EOD\n", k);
		for (int s = 0; s < o->nsizes; s++) {
			double l, m, h;
			stream_spread(&ms[k].res, s, &l, &m, &h);
			if (ms[k].ok && !ms[k].skipped && m > 0)
				fprintf(g, "%zu %g\n", o->sizes[s], m * (double)o->sizes[s] / 1e9);
		}
		fprintf(g, "EOD\n");
	}
	fprintf(g, "plot ");
	for (int k = 0, n = 0; k < nms; k++) {
		if (!ms[k].ok || ms[k].skipped)
			continue;
		int ref = ms[k].kind != M_ZL;
		fprintf(g, "%s$d%d using 1:2 with linespoints lw 2 dt %s pt %d lc rgb '%s' title '%s'",
			n++ ? ", \\\n  " : "", k, ref ? "(7,4)" : "1", ref ? 6 : 7, colors[k % MAX_M],
			ms[k].label);
	}
	fprintf(g, "\n");
	if (pclose(g) == 0)
		printf("wrote %s\n", path);
}

int stream_compare_run(const struct stream_opts *o, const char *csv, const char *png)
{
	setup(o);
	printf("zl-bench stream-compare: one-way streaming, every method in one run\n");
	printf("sender cpu%d, receiver cpu%d; %d interleaved run(s) per method, in rotating order\n",
	       o->cpu_tx, o->cpu_rx, o->runs);
	printf("per size min(%llu, %llu B / size) messages (at least 64); window %u (0: the ring or "
	       "socket buffer); batch %u for the '... batch' rows\n",
	       (unsigned long long)o->iters, (unsigned long long)o->bytes, o->window, o->batch);
	printf("zipline, raw and spsc receivers check every message; UCX's do not look at the "
	       "data (am_bw: a callback per message; put_bw: no receiver at all)\n");
	fflush(stdout);
	for (int run = 0; run < o->runs; run++) {
		for (int i = 0; i < nms; i++) {
			struct method *m = &ms[(i + run) % nms];
			if (!m->ok || m->skipped)
				continue;
			int r = run_method(m, o, run);
			if (r == 3) {
				printf("skip: %s: ucx_perftest is not installed (apt-get install "
				       "ucx-utils)\n", m->label);
				m->skipped = 1;
			} else if (r) {
				fprintf(stderr, "zl-bench stream-compare: %s failed in run %d\n",
					m->label, run + 1);
				m->ok = 0;
				if (m->kind != M_UCX)
					return 1; /* a check failed or a wait timed out */
			}
		}
		printf("run %d of %d done\n", run + 1, o->runs);
		fflush(stdout);
	}
	printf("\n");
	stream_print_header();
	for (int i = 0; i < nms; i++)
		if (ms[i].ok && !ms[i].skipped)
			stream_print_rows(ms[i].label, o, &ms[i].res);
	print_ratios(o);
	FILE *f = fopen(csv, "w");
	if (f) {
		fprintf(f, "method,url,size,msgs,window,batch,run,msgs_per_s,gb_per_s\n");
		for (int i = 0; i < nms; i++) {
			struct stream_opts so = *o;
			so.batch = ms[i].batch;
			if (ms[i].ok && !ms[i].skipped)
				stream_csv(f, ms[i].label, ms[i].url, &so, &ms[i].res);
		}
		fclose(f);
		printf("wrote %s\n", csv);
	} else {
		perror(csv);
	}
	if (png)
		plot(png, o);
	return 0;
}
