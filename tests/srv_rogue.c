/* SPDX-License-Identifier: MIT */
/*
 * shm: a rogue client attacks the mailbox while honest clients call.
 * The flag array is the one memory all shm clients share (see
 * src/server/serve.c), so the rogue finds it in its own mappings and, for
 * a second, sets and clears every flag, forges request types, and rings
 * its doorbell. It cannot reach another client's slots: those pages are
 * not mapped in its process, which the test checks. Then it writes a
 * malformed request into its own slot and must be dropped.
 * The honest clients must get every reply right, within ROGUE_BOUND_US
 * (a cleared flag waits at most 10 ms and one sweep), and the
 * server must count the forged flags and the recovered requests.
 */
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "srvlib.h"

#define T_OUT 10000000
#define ROGUE_BOUND_US TL_SLOW_US /* what tl_honest counts as slow */

/* Find the mappings of a memfd by name in /proc/self/maps. */
static int find_maps(const char *name, uint8_t **addr, size_t *len, int max)
{
	FILE *f = fopen("/proc/self/maps", "r");
	CHECK(f);
	char line[512];
	int n = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;
		if (!strstr(line, name) || sscanf(line, "%lx-%lx", &a, &b) != 2)
			continue;
		if (n < max) {
			addr[n] = (uint8_t *)a;
			len[n] = b - a;
		}
		n++;
	}
	fclose(f);
	return n;
}

/* Forked before the server exists, so that it inherits no mapping: it
 * learns the URL through a pipe. */
static int rogue(void *arg)
{
	struct tl_pipe *p = arg;
	char url[600];
	tl_pipe_get(p, url, sizeof(url), 30000);
	zl_client *c = tl_client(url, T_OUT);
	tl_call_check(c, 1, 10, 1, T_OUT); /* a normal client so far */
	uint8_t *fl[4], *sl[4];
	size_t fll[4], sll[4];
	CHECKF(find_maps("zipline-flags", fl, fll, 4) == 1, "flag array not mapped once");
	/* our own slots only: nobody else's page is in this process */
	CHECKF(find_maps("zipline-slots", sl, sll, 4) == 1, "more than our own slot page");
	struct tl_rng r = { .s = 42 };
	int64_t end = tl_now_us() + 1000000;
	while (tl_now_us() < end) {
		for (size_t i = 0; i < 4096 && i < fll[0]; i++) {
			uint64_t x = tl_rand(&r);
			atomic_store_explicit((_Atomic uint8_t *)&fl[0][i],
					      (x & 3) == 0 ? (uint8_t)(x >> 8) : 0,
					      memory_order_relaxed);
		}
	}
	/* a malformed request in our own slot 0: the next sequence number,
	 * type 0, a length beyond the slot */
	uint8_t *slot0 = sl[0] + 64;
	uint32_t seq;
	memcpy(&seq, slot0, 4);
	seq++;
	memset(slot0 + 4, 0, 12);
	uint32_t len = 1u << 30;
	memcpy(slot0 + 8, &len, 4);
	atomic_store_explicit((_Atomic uint32_t *)slot0, seq, memory_order_release);
	memset(fl[0], 1, fll[0] < 256 ? fll[0] : 256);
	/* the server drops us (give it a few sweeps: a call now would reuse
	 * slot 0); the next call fails, it does not hang */
	tl_sleep_us(50000);
	const void *rep;
	size_t n;
	int rc = 0;
	for (int i = 0; i < 100 && rc != -ECONNRESET; i++) {
		rc = zl_call(c, 1, "x", 1, &rep, &n, 100000);
		tl_sleep_us(10000);
	}
	CHECKF(rc == -ECONNRESET, "rogue's call after the malformed request: %s", zl_strerror(rc));
	zl_client_close(c);
	return 0;
}

int main(void)
{
	tl_watchdog(120);
	struct tl_pipe p;
	tl_pipe_init(&p);
	pid_t pid = tl_fork(rogue, &p, 60);
	struct tl_srv s;
	tl_srv_start(&s, "shm", NULL, NULL);
	_Atomic int stop = 0;
	struct tl_honest h[3];
	tl_honest_start(h, 3, s.url, &stop);
	char url[600] = { 0 };
	snprintf(url, sizeof(url), "%s", s.url);
	tl_pipe_put(&p, url, sizeof(url));
	tl_reap_ok(pid, 30000);
	atomic_store(&stop, 1);
	uint64_t calls, slow;
	int64_t worst = tl_honest_join(h, 3, &calls, &slow);
	struct zl_server_info info;
	CHECK_OK(zl_server_info(s.srv, &info));
	printf("honest: %" PRIu64 " calls, worst %" PRId64 " us; server: %" PRIu64
	       " spurious flags, %" PRIu64 " recovered, %" PRIu64 " dropped\n", calls, worst,
	       info.spurious, info.recovered, info.clients_dropped);
	CHECK(info.spurious > 0 && info.clients_dropped == 1);
	tl_check_latency("honest calls", ROGUE_BOUND_US, worst, slow);
	zl_client *after = tl_client(s.url, T_OUT); /* still serving */
	tl_call_check(after, 1, 10, 5, T_OUT);
	zl_client_close(after);
	tl_srv_stop(&s);
	return 0;
}
