/* SPDX-License-Identifier: MIT */
/*
 * The copying floor: the simplest correct shared-memory ring, with no
 * library around it (the method of the baseline notes). Two single-producer
 * single-consumer rings of 256 slots, one per direction; a slot is the
 * payload plus an 8-byte sequence footer, rounded up to 64 bytes. The writer
 * copies the payload in and release-stores the footer; the reader spins on
 * the footer (acquire) and copies the payload out, fetching its first line
 * early (see spsc_get in spsc.h). It skips everything a real channel needs
 * (variable sizes, lazy read positions, wakeups, peer checks), so "zipline
 * shm / spsc" is what the library costs over copying.
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

#include "spsc.h"

struct spsc_args {
	struct ring ping, pong;
	size_t size;
	uint64_t total;
	int cpu;
};

static int spsc_child(void *arg, int wfd)
{
	struct spsc_args *a = arg;
	uint8_t *buf = malloc(a->size ? a->size : 1);
	if (!buf || pin_self(a->cpu))
		return 1;
	dprintf(wfd, "OK\n");
	close(wfd);
	for (uint64_t i = 0; i < a->total; i++) {
		if (spsc_get(&a->ping, i, buf, a->size)) {
			fprintf(stderr, "zl-bench spsc: no ping for 1 s; giving up\n");
			return 1;
		}
		spsc_put(&a->pong, i, buf, a->size);
	}
	free(buf);
	return 0;
}

int spsc_run(size_t size, uint64_t iters, uint64_t warmup, int cpu_a, int cpu_b,
	     const struct sink *sink, struct result *res)
{
	int rc = 1;
	if (cpu_count() < 2) {
		fprintf(stderr, "zl-bench spsc: needs two CPUs\n");
		return 1;
	}
	struct spsc_args a = { .size = size, .total = warmup + iters, .cpu = cpu_b };
	size_t slot = (size + 8 + 63) / 64 * 64, len = 2 * SLOTS * slot;
	uint8_t *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	uint64_t *samples = malloc(iters * sizeof(*samples));
	uint8_t *buf = malloc(size ? size : 1);
	if (mem == MAP_FAILED || !samples || !buf) {
		fprintf(stderr, "zl-bench spsc: out of memory\n");
		goto out;
	}
	memset(buf, 0x5a, size);
	a.ping = (struct ring){ mem, slot };
	a.pong = (struct ring){ mem + SLOTS * slot, slot };
	pid_t pid = start_peer(spsc_child, &a, cpu_a, "spsc");
	if (pid < 0)
		goto out;
	pid_t pids[2] = { 0, pid };
	struct load_snap l0, l1;
	uint64_t t0 = 0, prev = 0;
	for (uint64_t i = 0; i < warmup + iters; i++) {
		if (i == warmup) {
			load_snap(&l0, pids, 2);
			t0 = mono_ns();
			prev = timer_now();
		}
		spsc_put(&a.ping, i, buf, size);
		if (spsc_get(&a.pong, i, buf, size)) {
			fprintf(stderr, "zl-bench spsc: no answer for 1 s; giving up\n");
			kill_child(pid);
			goto out;
		}
		if (i >= warmup) {
			uint64_t now = timer_now();
			samples[i - warmup] = now - prev;
			prev = now;
		}
	}
	uint64_t t1 = mono_ns();
	load_snap(&l1, pids, 2);
	int st = reap_child(pid, 5000);
	if (st) {
		explain_status("the spsc child", st);
		goto out;
	}
	res->size = size;
	res->iters = iters;
	report_result(samples, iters, t1 - t0, &l0, &l1, sink, res);
	rc = 0;
out:
	if (mem != MAP_FAILED)
		munmap(mem, len);
	free(samples);
	free(buf);
	return rc;
}
