/* SPDX-License-Identifier: MIT */
/*
 * ab: two builds of libzipline against each other in one run.
 *
 *   ab LIB_A LIB_B [--size S] [--blocks N] [--block-iters K] [--zerocopy] [--csv FILE]
 *
 * Both libraries are loaded into the same processes (dlmopen: each copy
 * has its own globals) and each opens an shm:// channel between a client
 * on cpu0 and an echo server on cpu1. The client then alternates blocks of
 * K round trips on A and on B, in the order AB, BA, AB, ... A machine
 * whose speed changes every few seconds (as a shared VM's does) changes it
 * for both alike, so the per-block ratio B/A stays meaningful where two
 * separate runs are not. Reported: the per-block mean RTT of A and of B,
 * and the median of the block ratios B/A with a distribution-free 95%
 * confidence interval. All times are round trips (RTT).
 *
 * bench/ab.sh builds a git revision's library and runs this against the
 * current build.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zipline.h"
#include "../tools/zl-bench/median_ci.h"

#define TMO_US 1000000 /* no call waits longer: a stuck peer ends the run */

struct lib {
	int (*listen)(const char *, const struct zl_opts *, zl_listener **);
	int (*accept)(zl_listener *, int64_t, zl_channel **);
	int (*connect)(const char *, const struct zl_opts *, int64_t, zl_channel **);
	int (*send)(zl_channel *, const void *, size_t, int64_t);
	int (*recv)(zl_channel *, void *, size_t, size_t *, int64_t);
	int (*reserve)(zl_channel *, size_t, void **);
	int (*commit)(zl_channel *, size_t);
	int (*peek)(zl_channel *, const void **, size_t *, int64_t);
	int (*release)(zl_channel *);
	void (*close)(zl_channel *);
	void (*listener_close)(zl_listener *);
};

static int load(struct lib *l, const char *path)
{
	void *h = dlmopen(LM_ID_NEWLM, path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "ab: %s\n", dlerror());
		return -1;
	}
	void **f[] = { (void **)&l->listen, (void **)&l->accept, (void **)&l->connect,
		       (void **)&l->send, (void **)&l->recv, (void **)&l->reserve,
		       (void **)&l->commit, (void **)&l->peek, (void **)&l->release,
		       (void **)&l->close, (void **)&l->listener_close };
	const char *names[] = { "zl_listen", "zl_accept", "zl_connect", "zl_send", "zl_recv",
				"zl_send_reserve", "zl_send_commit", "zl_recv_peek",
				"zl_recv_release", "zl_close", "zl_listener_close" };
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (!(*f[i] = dlsym(h, names[i]))) {
			fprintf(stderr, "ab: %s: no %s\n", path, names[i]);
			return -1;
		}
	return 0;
}

static int pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	return sched_setaffinity(0, sizeof(s), &s) ? -errno : 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int zerocopy;
static uint8_t msg[1 << 16], buf[1 << 16];

/* zl_send_reserve, retried for up to TMO_US; the clock only once it fails. */
static int reserve(const struct lib *l, zl_channel *ch, size_t len, void **p)
{
	int r = l->reserve(ch, len, p);
	for (uint64_t t0 = now_ns(); r == -EAGAIN; r = l->reserve(ch, len, p))
		if (now_ns() - t0 > TMO_US * 1000ull)
			return -ETIMEDOUT;
	return r;
}

/* One echo: 0, or a negative zipline error. */
static int echo(const struct lib *l, zl_channel *ch)
{
	size_t len;
	if (!zerocopy) {
		int r = l->recv(ch, buf, sizeof(buf), &len, TMO_US);
		return r ? r : l->send(ch, buf, len, TMO_US);
	}
	const void *in;
	void *out;
	int r = l->peek(ch, &in, &len, TMO_US);
	if (r)
		return r;
	if ((r = reserve(l, ch, len, &out)))
		return r;
	memcpy(out, in, len);
	r = l->commit(ch, len);
	return r ? r : l->release(ch);
}

/* One round trip whose message carries ctr: 0, a negative zipline error,
 * or 1 when the echo came back wrong. */
static int ping(const struct lib *l, zl_channel *ch, size_t size, uint64_t ctr)
{
	size_t len;
	int r;
	memcpy(msg, &ctr, sizeof(ctr));
	if (!zerocopy) {
		if ((r = l->send(ch, msg, size, TMO_US)) || (r = l->recv(ch, buf, sizeof(buf), &len,
								       TMO_US)))
			return r;
		return len != size || memcmp(buf, msg, size);
	}
	const void *in;
	void *out;
	if ((r = reserve(l, ch, size, &out)))
		return r;
	memcpy(out, msg, size);
	if ((r = l->commit(ch, size)) || (r = l->peek(ch, &in, &len, TMO_US)))
		return r;
	int bad = len != size || memcmp(in, msg, size);
	r = l->release(ch);
	return r ? r : bad;
}

/* Sorted copy's value at nearest rank p (0 < p <= 100). */
static double rank(const double *sorted, int n, double p)
{
	int k = (int)ceil(p / 100 * n);
	return sorted[k < 1 ? 0 : k > n ? n - 1 : k - 1];
}

static void print_dist(const char *name, double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), zlb_cmp_double);
	printf("  %-4s median %.4f  p99 %.4f  p99.9 %.4f  max %.4f\n", name, rank(v, n, 50),
	       rank(v, n, 99), rank(v, n, 99.9), v[n - 1]);
}

static int usage(void)
{
	fprintf(stderr, "usage: ab LIB_A LIB_B [--size S] [--blocks N] [--block-iters K] "
			"[--zerocopy] [--csv FILE]\n");
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "size", required_argument, 0, 's' },
					      { "blocks", required_argument, 0, 'n' },
					      { "block-iters", required_argument, 0, 'k' },
					      { "zerocopy", no_argument, 0, 'z' },
					      { "csv", required_argument, 0, 'c' },
					      { 0, 0, 0, 0 } };
	size_t size = 64;
	int blocks = 2000, k = 500, c;
	const char *csv = NULL;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's': size = strtoul(optarg, NULL, 0); break;
		case 'n': blocks = atoi(optarg); break;
		case 'k': k = atoi(optarg); break;
		case 'z': zerocopy = 1; break;
		case 'c': csv = optarg; break;
		default: return usage();
		}
	}
	if (argc - optind != 2 || size < sizeof(uint64_t) || size > sizeof(msg) || blocks < 10 ||
	    k < 1)
		return usage();
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		printf("ab: needs two CPUs\n");
		return 77;
	}
	struct lib L[2];
	const char *path[2] = { argv[optind], argv[optind + 1] };
	char url[2][64];
	zl_listener *ls[2];
	int r;
	for (int i = 0; i < 2; i++) {
		if (load(&L[i], path[i]))
			return 1;
		snprintf(url[i], sizeof(url[i]), "shm://zl-ab-%d-%d", (int)getpid(), i);
		if ((r = L[i].listen(url[i], NULL, &ls[i]))) {
			fprintf(stderr, "ab: zl_listen: %d\n", r);
			return 1;
		}
	}
	pid_t parent = getpid(), pid = fork();
	if (pid < 0)
		return 1;
	if (!pid) { /* the echo server */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent || pin(1))
			_exit(1);
		zl_channel *ch[2];
		for (int i = 0; i < 2; i++)
			if (L[i].accept(ls[i], 5 * TMO_US, &ch[i]))
				_exit(1);
		for (int b = 0; b <= blocks; b++)
			for (int j = 0; j < 2; j++) {
				int w = j ^ (b & 1);
				for (int i = 0; i < k; i++)
					if ((r = echo(&L[w], ch[w]))) {
						fprintf(stderr, "ab: echo: %d\n", r);
						_exit(1);
					}
			}
		for (int i = 0; i < 2; i++)
			L[i].close(ch[i]);
		_exit(0);
	}
	zl_channel *ch[2] = { NULL, NULL };
	double *t[2] = { calloc((size_t)blocks, sizeof(double)),
			 calloc((size_t)blocks, sizeof(double)) };
	double *q = calloc((size_t)blocks, sizeof(double));
	int ret = 1;
	if (!t[0] || !t[1] || !q || pin(0))
		goto out;
	for (int i = 0; i < 2; i++)
		if ((r = L[i].connect(url[i], NULL, 5 * TMO_US, &ch[i]))) {
			fprintf(stderr, "ab: zl_connect: %d\n", r);
			goto out;
		}
	uint64_t ctr = 0;
	/* block 0 of each is warm-up */
	for (int b = 0; b <= blocks; b++)
		for (int j = 0; j < 2; j++) {
			int w = j ^ (b & 1);
			uint64_t t0 = now_ns();
			for (int i = 0; i < k; i++)
				if ((r = ping(&L[w], ch[w], size, ++ctr))) {
					fprintf(stderr, "ab: %s\n",
						r > 0 ? "an echo came back wrong" : "a round trip failed");
					goto out;
				}
			if (b)
				t[w][b - 1] = (double)(now_ns() - t0) / k / 1000;
		}
	FILE *f = csv ? fopen(csv, "w") : NULL;
	if (f)
		fprintf(f, "block,a_rtt_us,b_rtt_us\n");
	int faster = 0;
	for (int b = 0; b < blocks; b++) {
		q[b] = t[1][b] / t[0][b];
		faster += q[b] < 1;
		if (f)
			fprintf(f, "%d,%.5f,%.5f\n", b + 1, t[0][b], t[1][b]);
	}
	if (f)
		fclose(f);
	double lo, hi, med = zlb_median_ci(q, (size_t)blocks, &lo, &hi);
	printf("ab: shm:// %zu B, %s, %d blocks of %d round trips each, A and B alternating\n",
	       size, zerocopy ? "zero-copy" : "copy", blocks, k);
	printf("  A = %s\n  B = %s\n", path[0], path[1]);
	printf("per-block mean RTT (round trip), microseconds:\n");
	print_dist("A", t[0], blocks);
	print_dist("B", t[1], blocks);
	printf("B/A per block: median %.3f (95%% CI %.3f-%.3f), B faster in %d of %d blocks\n",
	       med, lo, hi, faster, blocks);
	ret = 0;
out:
	for (int i = 0; i < 2; i++)
		if (ch[i])
			L[i].close(ch[i]);
	int st;
	if (ret)
		kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	free(t[0]);
	free(t[1]);
	free(q);
	return ret;
}
