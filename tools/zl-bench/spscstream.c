/* SPDX-License-Identifier: MIT */
/*
 * The streaming floor: spsc.c's bare copying ring, one way. Fixed slots of
 * the message plus an 8-byte sequence footer (rounded up to 64 bytes),
 * as many as fit in 1 MiB (at least 4), as zipline's default ring holds; the writer copies in and
 * release-stores the footer, the reader spins on the footer, copies out and
 * checks the message as every stream receiver does. The reader gives its
 * position back every quarter of the ring (as zipline's lazy read
 * position), and the writer reads it only when its cached copy says the
 * ring is full. No
 * variable sizes, wake-ups or peer checks: what copying through shared
 * memory costs at least.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stream.h"

#define RING_BYTES (1u << 20) /* zipline's default ring */

struct shared {
	_Alignas(64) _Atomic uint64_t cons; /* messages the reader is done with */
	_Alignas(64) _Atomic uint64_t done; /* the reader's count at the end of a size */
	_Alignas(64) uint8_t slots[];
};

struct geo {
	size_t slot;
	uint64_t nslots;
};

static struct geo geometry(size_t size)
{
	struct geo g = { (size + 8 + 63) / 64 * 64, 0 };
	g.nslots = RING_BYTES / g.slot;
	g.nslots = g.nslots < 4 ? 4 : g.nslots;
	return g;
}

static _Atomic uint64_t *foot(struct shared *sh, struct geo g, uint64_t i)
{
	return (_Atomic uint64_t *)(sh->slots + (i % g.nslots) * g.slot + g.slot - 8);
}

/* Spin until *v >= want (eq: == want); 0, or -1 after timeout_ns. The
 * clock is read only after 1024 polls: a quick answer costs none. */
static int spin_until_ge(_Atomic uint64_t *v, uint64_t want, int eq, uint64_t timeout_ns)
{
	uint64_t deadline = 0;
	for (uint32_t k = 1;; k++) {
		uint64_t x = atomic_load_explicit(v, memory_order_acquire);
		if (eq ? x == want : x >= want)
			return 0;
		zl_cpu_relax();
		if (k & 1023)
			continue;
		uint64_t now = mono_ns();
		if (!deadline)
			deadline = now + timeout_ns;
		else if (now > deadline)
			return -1;
	}
}

static int spin_ge(_Atomic uint64_t *v, uint64_t want, uint64_t timeout_ns)
{
	return spin_until_ge(v, want, 0, timeout_ns);
}

struct sargs {
	const struct stream_opts *o;
	struct shared *sh;
};

static int reader(void *arg, int wfd)
{
	struct sargs *a = arg;
	const struct stream_opts *o = a->o;
	size_t cap = 8;
	for (int s = 0; s < o->nsizes; s++)
		cap = o->sizes[s] > cap ? o->sizes[s] : cap;
	uint8_t *msg = malloc(cap);
	if (!msg || pin_self(o->cpu_rx))
		return 1;
	dprintf(wfd, "OK\n");
	close(wfd);
	uint64_t seq = 1, total = 0;
	for (int s = 0; s < o->nsizes; s++) {
		size_t size = o->sizes[s];
		struct geo g = geometry(size);
		uint64_t n = stream_count(o, size), every = g.nslots / 4;
		for (uint64_t i = 0; i < n; i++, seq++) {
			/* the footer holds the message's global number: wait for
			 * exactly it (under another size's geometry the word may
			 * hold old payload) */
			if (spin_until_ge(foot(a->sh, g, i), seq, 1, (uint64_t)o->timeout_us * 1000)) {
				fprintf(stderr, "zl-bench spsc stream: no message %llu in time\n",
					(unsigned long long)seq);
				return 1;
			}
			memcpy(msg, a->sh->slots + (i % g.nslots) * g.slot, size);
			if (st_check("spsc stream reader", msg, size, size, seq))
				return 1;
			if ((i + 1) % every == 0 || i + 1 == n)
				atomic_store_explicit(&a->sh->cons, i + 1, memory_order_release);
		}
		total += n;
		atomic_store_explicit(&a->sh->done, total, memory_order_release);
		/* the writer resets cons for the next size once it saw done,
		 * before it writes that size's first message */
	}
	free(msg);
	return 0;
}

int stream_spsc_run(const struct stream_opts *o, struct stream_res *r, int run)
{
	size_t len = 0;
	for (int s = 0; s < o->nsizes; s++) {
		struct geo g = geometry(o->sizes[s]);
		len = g.slot * g.nslots > len ? g.slot * g.nslots : len;
	}
	len += sizeof(struct shared);
	struct shared *sh = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
				 -1, 0);
	size_t maxsz = 8;
	for (int s = 0; s < o->nsizes; s++)
		maxsz = o->sizes[s] > maxsz ? o->sizes[s] : maxsz;
	uint8_t *tx = malloc(maxsz);
	int ret = 1;
	if (sh == MAP_FAILED || !tx) {
		fprintf(stderr, "zl-bench spsc stream: out of memory\n");
		goto out;
	}
	struct sargs a = { o, sh };
	pid_t pid = start_peer(reader, &a, o->cpu_tx, "spsc stream");
	if (pid < 0)
		goto out;
	uint64_t seq = 1, total = 0;
	for (int s = 0; s < o->nsizes; s++) {
		size_t size = o->sizes[s];
		struct geo g = geometry(size);
		uint64_t n = stream_count(o, size), t0 = mono_ns(), cons = 0;
		uint64_t dl = (uint64_t)o->timeout_us * 1000;
		memset(tx, 0x5a, size);
		atomic_store_explicit(&sh->cons, 0, memory_order_relaxed);
		for (uint64_t i = 0; i < n; i++, seq++) {
			if (i - cons >= g.nslots) {
				if (spin_ge(&sh->cons, i - g.nslots + 1, dl))
					goto stuck;
				cons = atomic_load_explicit(&sh->cons, memory_order_acquire);
			}
			st_stamp(tx, size, seq);
			memcpy(sh->slots + (i % g.nslots) * g.slot, tx, size);
			atomic_store_explicit(foot(sh, g, i), seq, memory_order_release);
		}
		total += n;
		if (spin_ge(&sh->done, total, dl))
			goto stuck;
		uint64_t ns = mono_ns() - t0;
		r->msgs[s] = n;
		r->mps[s][run] = (double)n * 1e9 / (double)(ns ? ns : 1);
		r->nruns[s] = run + 1;
	}
	ret = 0;
	goto reap;
stuck:
	fprintf(stderr, "zl-bench spsc stream: the reader did not keep up within the timeout\n");
reap:;
	int st = reap_child(pid, ret ? 200 : 5000);
	if (st)
		explain_status("the spsc stream reader", st);
	ret |= st != 0;
out:
	if (sh != MAP_FAILED)
		munmap(sh, len);
	free(tx);
	return ret;
}
