/* SPDX-License-Identifier: MIT */
/*
 * The physical floor: the cheapest possible cross-core round trip, one
 * 8-byte counter bouncing between two CPUs' caches. No messaging library
 * can beat it, so "transport / floor" says how much a transport adds.
 *
 * The parent stores an odd value (release) and spins until the child has
 * stored the next even value; the child spins for odd values and answers.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zl-bench.h"

#define STOP UINT64_MAX         /* odd, but never a real ping */
#define GIVE_UP_NS 1000000000ull /* 1 s without progress is a hang */

struct line {
	_Alignas(64) _Atomic uint64_t v;
	char pad[64 - sizeof(uint64_t)]; /* own cache line: no false sharing */
};

struct child_args {
	struct line *l;
	int cpu;
};

static int floor_child(void *arg, int wfd)
{
	struct child_args *a = arg;
	_Atomic uint64_t *v = &a->l->v;
	if (pin_self(a->cpu))
		return 1;
	dprintf(wfd, "OK\n");
	close(wfd);
	uint64_t seen = 0, spins = 0, start = 0;
	for (;;) {
		uint64_t x = atomic_load_explicit(v, memory_order_acquire);
		if (x == STOP)
			return 0;
		if ((x & 1) && x != seen) {
			seen = x;
			atomic_store_explicit(v, x + 1, memory_order_release);
			spins = start = 0;
			continue;
		}
		zl_cpu_relax();
		if ((++spins & 1023) == 0) {
			uint64_t now = mono_ns();
			if (!start)
				start = now;
			else if (now - start > GIVE_UP_NS) {
				fprintf(stderr, "zl-bench floor: no ping for 1 s; giving up\n");
				return 1;
			}
		}
	}
}

/* n round trips; samples == NULL for the warm-up. */
static int bounce(_Atomic uint64_t *v, uint64_t *next, uint64_t n, uint64_t *samples)
{
	uint64_t prev = timer_now();
	for (uint64_t i = 0; i < n; i++) {
		uint64_t x = *next;
		atomic_store_explicit(v, x, memory_order_release);
		if (spin_until(v, x + 1)) {
			fprintf(stderr, "zl-bench floor: no answer for 1 s; giving up\n");
			return -1;
		}
		*next = x + 2;
		uint64_t now = timer_now();
		if (samples)
			samples[i] = now - prev;
		prev = now;
	}
	return 0;
}

int floor_run(uint64_t iters, uint64_t warmup, int cpu_a, int cpu_b, int quiet_header,
	      const struct sink *sink, struct result *res)
{
	int rc = 1;
	if (cpu_count() < 2) {
		/* each spin would last a scheduler time slice: minutes, not ms */
		fprintf(stderr, "zl-bench floor: needs two CPUs; this process may use only one\n");
		return 1;
	}
	uint64_t *samples = malloc(iters * sizeof(*samples));
	struct line *l = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!samples || l == MAP_FAILED) {
		fprintf(stderr, "zl-bench floor: out of memory\n");
		free(samples);
		return 1;
	}
	memset(samples, 0, iters * sizeof(*samples));
	atomic_store(&l->v, 0);

	struct child_args a = {l, cpu_b};
	pid_t pid = start_peer(floor_child, &a, cpu_a, "floor");
	if (pid < 0)
		goto out;
	if (!quiet_header) {
		printf("floor: cache-line ping-pong, RTT (round trip), microseconds: one 8-byte "
		       "atomic in its own cache line, %llu timed round trips after %llu warm-up\n",
		       (unsigned long long)iters, (unsigned long long)warmup);
		report_setup(cpu_a, cpu_b, 1);
		report_columns();
	}

	pid_t pids[2] = {0, pid};
	struct load_snap l0, l1;
	uint64_t next = 1;
	int brc = bounce(&l->v, &next, warmup, NULL);
	load_snap(&l0, pids, 2);
	uint64_t t0 = mono_ns();
	if (!brc)
		brc = bounce(&l->v, &next, iters, samples);
	uint64_t t1 = mono_ns();
	load_snap(&l1, pids, 2);
	atomic_store_explicit(&l->v, STOP, memory_order_release);
	int st = reap_child(pid, 5000);
	if (brc || st) {
		explain_status("the floor child", st);
		goto out;
	}
	res->size = sizeof(uint64_t);
	res->iters = iters;
	report_result(samples, iters, t1 - t0, &l0, &l1, sink, res);
	rc = 0;
out:
	munmap(l, 4096);
	free(samples);
	return rc;
}
