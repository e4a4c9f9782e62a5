/* SPDX-License-Identifier: MIT */
/*
 * zl-bench blocks: the floor, the copying floor, zipline shm:// and UCX
 * side by side in ONE run, in interleaved blocks.
 *
 * A shared VM's host moves its vCPUs around: the floor reads 0.07, 0.13 or
 * 0.27 us from one second to the next, so a ratio of two separate runs is
 * often a ratio of two machines. Here one client and one echo server run
 * every method: blocks of K round trips of floor, spsc, shm (zl_send /
 * zl_recv), shm-zc (reserve/commit, peek/release) and, where built with
 * UCX, ucx (ucx.c), in an order that rotates from block round to block
 * round. A change of speed then hits all methods alike. Reported per
 * method: median, p99, p99.9 and max of all its round trips; per method
 * against the floor (and shm against UCX): the ratio of the medians, and
 * the median over block rounds of the ratio of block means with a
 * distribution-free 95% confidence interval. All times are RTT.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "median_ci.h"
#include "spsc.h"
#include "ucx.h"
#include "zipline.h"

enum { M_FLOOR, M_SPSC, M_SHM, M_ZC, M_UCX, M_N };
static const char *const mname[M_N] = { "floor", "spsc", "shm", "shm-zc", "ucx" };
static const char *const mdesc[M_N] = {
	"one 8-byte atomic in its own cache line (size ignored)",
	"the copying floor: a bare fixed-slot ring, no library",
	"zipline shm://, zl_send / zl_recv",
	"zipline shm://, zl_send_reserve/commit, zl_recv_peek/release",
	"UCX active messages over UCX_TLS=posix, as ucx_perftest -t ucp_am_lat (if built with UCX)",
};
#define TMO_US 1000000 /* per call: a stuck peer ends the run, never hangs it */

struct blk {
	size_t size;
	uint64_t rounds, k;
	_Atomic uint64_t *line;  /* floor: alone in its page */
	struct ring ping, pong;  /* spsc */
	zl_channel *ch;          /* shm, shm-zc */
	struct ucx_xchg *x;      /* ucx: the two worker addresses */
	struct zlb_ucx *ucx;
	int act[M_N], nm;        /* the methods this run has */
	uint8_t *msg, *buf;
	uint64_t seq[M_N];       /* round trips so far, per method, on each side */
	int cpu;                 /* the server's */
	char url[64];
};

/* Method of slot j in block round b: the order rotates. */
static int method_at(const struct blk *s, uint64_t b, int j)
{
	return s->act[(b + (uint64_t)j) % (uint64_t)s->nm];
}

/* After both sides set up UCX or failed to: the methods of this run. */
static void set_methods(struct blk *s, int have_ucx)
{
	s->nm = 0;
	for (int m = 0; m < M_N; m++)
		if (m != M_UCX || have_ucx)
			s->act[s->nm++] = m;
}

/* The server's half of one round trip. 0 or nonzero. */
static int pong(struct blk *s, int m)
{
	uint64_t q = s->seq[m]++;
	size_t len;
	switch (m) {
	case M_FLOOR:
		if (spin_until(s->line, 2 * q + 1))
			return -ETIMEDOUT;
		atomic_store_explicit(s->line, 2 * q + 2, memory_order_release);
		return 0;
	case M_SPSC:
		if (spsc_get(&s->ping, q, s->buf, s->size))
			return -ETIMEDOUT;
		spsc_put(&s->pong, q, s->buf, s->size);
		return 0;
	case M_SHM: {
		int r = zl_recv(s->ch, s->buf, s->size, &len, TMO_US);
		return r ? r : zl_send(s->ch, s->buf, len, TMO_US);
	}
	case M_UCX:
		return ucx_pong(s->ucx);
	default: {
		const void *in;
		void *out;
		int r = zl_recv_peek(s->ch, &in, &len, TMO_US);
		if (r || (r = reserve_bounded(s->ch, len, &out, TMO_US)))
			return r;
		memcpy(out, in, len);
		if ((r = zl_send_commit(s->ch, len)))
			return r;
		return zl_recv_release(s->ch);
	}
	}
}

/* The client's half: send round trip number seq[m] and wait for its echo.
 * 0, a negative error, or 1 when the echo is wrong. */
static int ping(struct blk *s, int m)
{
	uint64_t q = s->seq[m]++;
	size_t len;
	int r;
	memcpy(s->msg, &q, sizeof(q));
	switch (m) {
	case M_FLOOR:
		atomic_store_explicit(s->line, 2 * q + 1, memory_order_release);
		return spin_until(s->line, 2 * q + 2) ? -ETIMEDOUT : 0;
	case M_SPSC:
		spsc_put(&s->ping, q, s->msg, s->size);
		if (spsc_get(&s->pong, q, s->buf, s->size))
			return -ETIMEDOUT;
		return memcmp(s->buf, &q, sizeof(q)) != 0;
	case M_SHM:
		if ((r = zl_send(s->ch, s->msg, s->size, TMO_US)) ||
		    (r = zl_recv(s->ch, s->buf, s->size, &len, TMO_US)))
			return r;
		return len != s->size || memcmp(s->buf, &q, sizeof(q)) != 0;
	case M_UCX:
		return ucx_ping(s->ucx, s->msg, s->size, q);
	default: {
		const void *in;
		void *out;
		if ((r = reserve_bounded(s->ch, s->size, &out, TMO_US)))
			return r;
		memcpy(out, s->msg, s->size);
		if ((r = zl_send_commit(s->ch, s->size)) ||
		    (r = zl_recv_peek(s->ch, &in, &len, TMO_US)))
			return r;
		int bad = len != s->size || memcmp(in, &q, sizeof(q)) != 0;
		r = zl_recv_release(s->ch);
		return r ? r : bad;
	}
	}
}

static int blocks_child(void *arg, int wfd)
{
	struct blk *s = arg;
	zl_listener *l;
	if (pin_self(s->cpu) || zl_listen(s->url, NULL, &l))
		return 1;
	dprintf(wfd, "OK\n");
	close(wfd);
	int r = zl_accept(l, 10 * TMO_US, &s->ch);
	zl_listener_close(l);
	if (!r)
		set_methods(s, !ucx_open(&s->ucx, s->x, 1, s->size));
	for (uint64_t b = 0; !r && b <= s->rounds; b++) /* round 0: warm-up */
		for (int j = 0; !r && j < s->nm; j++)
			for (uint64_t i = 0; !r && i < s->k; i++)
				r = pong(s, method_at(s, b, j));
	if (r)
		fprintf(stderr, "zl-bench blocks: server: %s (%d)\n", zl_strerror(r), r);
	ucx_close(s->ucx);
	zl_close(s->ch);
	return r != 0;
}

static int measure(struct blk *s, uint64_t *samples[M_N], double *bmean[M_N],
		   uint64_t elapsed[M_N])
{
	for (uint64_t b = 0; b <= s->rounds; b++)
		for (int j = 0; j < s->nm; j++) {
			int m = method_at(s, b, j);
			uint64_t *out = b ? samples[m] + (b - 1) * s->k : NULL;
			uint64_t t0 = mono_ns(), prev = timer_now(), sum = 0;
			for (uint64_t i = 0; i < s->k; i++) {
				int r = ping(s, m);
				if (r) {
					fprintf(stderr, "zl-bench blocks: %s: %s\n", mname[m],
						r > 0 ? "an echo came back wrong" : zl_strerror(r));
					return 1;
				}
				uint64_t now = timer_now();
				if (out)
					out[i] = now - prev;
				sum += now - prev;
				prev = now;
			}
			if (b) {
				elapsed[m] += mono_ns() - t0;
				bmean[m][b - 1] = (double)sum / (double)s->k;
			}
		}
	return 0;
}

/* Per block round, method m's block mean over method d's, for the rounds
 * whose floor block mean lies in [lo_us, hi_us): into q, returns how many. */
static uint64_t ratios(const struct blk *s, double *bmean[M_N], int m, int d, double lo_us,
		       double hi_us, double *q)
{
	double us = timer_ns_per_tick() / 1000.0;
	uint64_t n = 0;
	for (uint64_t b = 0; b < s->rounds; b++) {
		double f = bmean[M_FLOOR][b] * us;
		if (f >= lo_us && f < hi_us)
			q[n++] = bmean[m][b] / bmean[d][b];
	}
	return n;
}

static int has(const struct blk *s, int m)
{
	for (int i = 0; i < s->nm; i++)
		if (s->act[i] == m)
			return 1;
	return 0;
}

static void report(struct blk *s, uint64_t *samples[M_N], double *bmean[M_N],
		   uint64_t elapsed[M_N], const struct sink *sink)
{
	struct result res[M_N];
	double gm[M_N], us = timer_ns_per_tick() / 1000.0;
	uint64_t n = s->rounds * s->k;
	printf("%-7s ", "method");
	report_columns();
	for (int i = 0; i < s->nm; i++) {
		int m = s->act[i];
		res[m].size = m == M_FLOOR ? sizeof(uint64_t) : s->size;
		res[m].iters = n;
		stats_compute(samples[m], n, elapsed[m], &res[m]); /* sorts */
		gm[m] = stats_median_grouped(samples[m], n) * us;
		printf("%-7s ", mname[m]);
		report_row(&res[m]);
		struct sink one = *sink;
		one.transport = mname[m];
		report_csv_row(&one, &res[m]);
	}
	printf("against the floor: ratio of the medians (and of the medians as grouped data, "
	       "finer than the timer's step), and the median over %llu block rounds of block "
	       "mean / floor block mean [95%% CI]\n",
	       (unsigned long long)s->rounds);
	printf("  floor   median %.4f us, as grouped data %.4f us\n", res[M_FLOOR].median_us,
	       gm[M_FLOOR]);
	double *q = malloc(s->rounds * sizeof(*q)), lo, hi, med;
	for (int i = 1; q && i < s->nm; i++) {
		int m = s->act[i];
		med = zlb_median_ci(q, ratios(s, bmean, m, M_FLOOR, 0, INFINITY, q), &lo, &hi);
		printf("  %-7s %5.2f (%.3f; %.4f us)   %5.2f [%.2f-%.2f]\n", mname[m],
		       res[m].median_us / res[M_FLOOR].median_us, gm[m] / gm[M_FLOOR], gm[m], med,
		       lo, hi);
	}
	/* The ratios differ between the host's placements of the two vCPUs
	 * (same core's siblings, same cache complex, another one), which the
	 * floor's level tells apart: the same per level. */
	static const double edge[] = { 0, 0.1, 0.2, 0.4, INFINITY };
	for (int g = 0; q && g < 4; g++) {
		uint64_t nq = ratios(s, bmean, M_FLOOR, M_FLOOR, edge[g], edge[g + 1], q);
		if (nq < 10 || nq * 20 < s->rounds || nq == s->rounds)
			continue;
		printf("  rounds with the floor in [%.1f, %.1f) us: %llu;", edge[g], edge[g + 1],
		       (unsigned long long)nq);
		for (int i = 1; i < s->nm; i++) {
			int m = s->act[i];
			med = zlb_median_ci(q, ratios(s, bmean, m, M_FLOOR, edge[g], edge[g + 1], q), &lo,
					&hi);
			printf(" %s %.2f [%.2f-%.2f]", mname[m], med, lo, hi);
		}
		printf("\n");
	}
	if (q && has(s, M_UCX)) {
		printf("against UCX: shm / ucx and shm-zc / ucx, as above\n");
		for (int m = M_SHM; m <= M_ZC; m++) {
			med = zlb_median_ci(q, ratios(s, bmean, m, M_UCX, 0, INFINITY, q), &lo, &hi);
			printf("  %-7s %5.2f (%.3f)   %5.2f [%.2f-%.2f]\n", mname[m],
			       res[m].median_us / res[M_UCX].median_us, gm[m] / gm[M_UCX], med, lo,
			       hi);
		}
	}
	free(q);
}

int blocks_run(size_t size, uint64_t iters, uint64_t nblocks, int cpu_a, int cpu_b,
	       const struct sink *sink)
{
	if (cpu_count() < 2) {
		fprintf(stderr, "zl-bench blocks: needs two CPUs\n");
		return 1;
	}
	struct blk s = { .size = size, .rounds = nblocks, .k = iters / nblocks, .cpu = cpu_b };
	if (s.size < sizeof(uint64_t) || s.k < 1) {
		fprintf(stderr, "zl-bench blocks: size must be >= 8 and iters >= blocks\n");
		return 1;
	}
	size_t slot = (size + 8 + 63) / 64 * 64, len = 4096 + 2 * SLOTS * slot;
	size_t xoff = len;
	len += (sizeof(struct ucx_xchg) + 4095) / 4096 * 4096;
	uint8_t *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	uint64_t *samples[M_N] = { 0 }, elapsed[M_N] = { 0 }, n = s.rounds * s.k;
	double *bmean[M_N] = { 0 };
	int rc = 1, ok = mem != MAP_FAILED;
	s.msg = calloc(1, size);
	s.buf = calloc(1, size);
	for (int m = 0; m < M_N; m++) {
		samples[m] = calloc(n, sizeof(uint64_t));
		bmean[m] = calloc(s.rounds, sizeof(double));
		ok = ok && samples[m] && bmean[m];
	}
	if (!ok || !s.msg || !s.buf) {
		fprintf(stderr, "zl-bench blocks: out of memory\n");
		goto out;
	}
	s.line = (_Atomic uint64_t *)mem;
	s.x = (struct ucx_xchg *)(mem + xoff);
	s.ping = (struct ring){ mem + 4096, slot };
	s.pong = (struct ring){ mem + 4096 + SLOTS * slot, slot };
	snprintf(s.url, sizeof(s.url), "shm://zl-bench-blocks-%d", (int)getpid());
	pid_t pid = start_peer(blocks_child, &s, cpu_a, "blocks");
	if (pid < 0)
		goto out;
	int r = zl_connect(s.url, NULL, 10 * TMO_US, &s.ch);
	if (r) {
		fprintf(stderr, "zl-bench blocks: zl_connect(%s): %s\n", s.url, zl_strerror(r));
		kill_child(pid);
		goto out;
	}
	set_methods(&s, !ucx_open(&s.ucx, s.x, 0, size));
	pid_t pids[2] = { 0, pid };
	struct load_snap l0, l1;
	load_snap(&l0, pids, 2);
	r = measure(&s, samples, bmean, elapsed);
	load_snap(&l1, pids, 2);
	ucx_close(s.ucx);
	zl_close(s.ch);
	int st = reap_child(pid, 5000);
	if (r || st) {
		explain_status("the blocks server", st);
		goto out;
	}
	printf("\n%zu B: %llu block rounds of %llu round trips per method\n", size,
	       (unsigned long long)s.rounds, (unsigned long long)s.k);
	report(&s, samples, bmean, elapsed, sink);
	load_check(&l0, &l1);
	rc = 0;
out:
	for (int m = 0; m < M_N; m++) {
		free(samples[m]);
		free(bmean[m]);
	}
	free(s.msg);
	free(s.buf);
	if (mem != MAP_FAILED)
		munmap(mem, len);
	return rc;
}

void blocks_header(uint64_t iters, uint64_t nblocks, int cpu_a, int cpu_b)
{
	printf("blocks: methods in interleaved blocks in one run (the order rotates), RTT (round "
	       "trip), microseconds; %llu round trips per method and size in %llu block "
	       "rounds\n",
	       (unsigned long long)iters, (unsigned long long)nblocks);
	for (int m = 0; m < M_N; m++)
		printf("  %-7s %s\n", mname[m], mdesc[m]);
	report_setup(cpu_a, cpu_b, 1);
}
