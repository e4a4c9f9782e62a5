/* SPDX-License-Identifier: MIT */
/* zl-proto's TCP rendezvous (tools/zl-proto/oob.c) on the host, with one
 * process per node: the all-gather delivers every node's part in node
 * order; a node that dies, one that never joins and one started with other
 * parameters end the exchange with an error in bounded time, never a hang. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "oob.h"
#include "testlib.h"

#define N 4

static int lfd, port;
static char coord[64];

/* Node me: join, gather "node <me>" (me + 1 copies of the text, so the
 * parts differ in length), check the whole, then what `die_at` says. */
static int node(int me, int die_at_gather, uint64_t tag)
{
	struct oob o;
	char mine[64];
	void *all;
	uint32_t lens[N];
	int r = oob_join(&o, me, N, coord, me ? -1 : lfd, tag, 5);
	if (r) {
		oob_close(&o); /* as the tool's exit would: the others see it */
		return r;
	}
	int n = 0;
	for (int i = 0; i <= me; i++)
		n += snprintf(mine + n, sizeof(mine) - (size_t)n, "n%d", me);
	if (die_at_gather == me)
		_exit(3); /* dies without a word: its socket closes */
	if ((r = oob_gather(&o, mine, (uint32_t)n, &all, lens, 5, "test gather"))) {
		oob_close(&o);
		return r;
	}
	/* node i's part: "n<i>" i + 1 times, in node order */
	size_t at = 0;
	for (int i = 0; i < N; i++) {
		char want[64];
		int k = 0;
		for (int j = 0; j <= i; j++)
			k += snprintf(want + k, sizeof(want) - (size_t)k, "n%d", i);
		if (lens[i] != (uint32_t)k || memcmp((char *)all + at, want, (size_t)k)) {
			oob_close(&o);
			return -EPROTO;
		}
		at += (size_t)k;
	}
	free(all);
	r = oob_barrier(&o, 5, "test barrier");
	oob_close(&o);
	return r;
}

/* Run N nodes (node 0 here after forking 1..N-1); node 0's result. Every
 * child's exit status goes into st[]. */
static int run(int die_at, int absent, uint64_t bad_tag_node, int *st, double *secs)
{
	pid_t pid[N] = { 0 };
	lfd = oob_listen("127.0.0.1:0", &port);
	CHECK(lfd >= 0);
	snprintf(coord, sizeof(coord), "127.0.0.1:%d", port);
	for (int i = 1; i < N; i++) {
		if (i == absent)
			continue;
		pid[i] = fork();
		CHECK(pid[i] >= 0);
		if (!pid[i]) {
			close(lfd);
			int r = node(i, die_at, (uint64_t)i == bad_tag_node ? 99 : 7);
			_exit(r == 0 ? 0 : r == -EPIPE ? 10 : r == -ETIMEDOUT ? 11 : 12);
		}
	}
	uint64_t t0 = mono_ns();
	int r = node(0, die_at, 7);
	*secs = (double)(mono_ns() - t0) / 1e9;
	close(lfd);
	for (int i = 1; i < N; i++) {
		st[i] = -1;
		if (pid[i] > 0) {
			int s;
			waitpid(pid[i], &s, 0);
			st[i] = WIFEXITED(s) ? WEXITSTATUS(s) : 100;
		}
	}
	return r;
}

int main(void)
{
	int st[N];
	double secs;
	clock_init();

	/* all well: every node gets every part */
	CHECK(run(-1, -1, 0, st, &secs) == 0);
	for (int i = 1; i < N; i++)
		CHECKF(st[i] == 0, "node %d: %d", i, st[i]);

	/* node 2 dies before the gather: node 0 names it at once (not after
	 * the 5 s timeout), the others see node 0 go */
	CHECK(run(2, -1, 0, st, &secs) == -EPIPE);
	CHECKF(secs < 3, "took %.1f s to notice", secs);
	CHECK(st[2] == 3);
	CHECK(st[1] == 10 && st[3] == 10);

	/* node 3 never comes: node 0 gives up after its 5 s, the others see
	 * node 0 close */
	CHECK(run(-1, 3, 0, st, &secs) == -ETIMEDOUT);
	CHECKF(secs > 4 && secs < 8, "gave up after %.1f s", secs);
	CHECK(st[1] != 0 && st[2] != 0);

	/* node 1 with other parameters: refused */
	CHECK(run(-1, -1, 1, st, &secs) == -EINVAL);
	CHECK(st[1] != 0);

	/* nobody listens: a joining node gives up after its timeout */
	struct oob o;
	uint64_t t0 = mono_ns();
	CHECK(oob_join(&o, 1, 2, "127.0.0.1:9", -1, 7, 1) == -ETIMEDOUT);
	CHECK(mono_ns() - t0 < 3000000000ull);
	printf("proto_oob: OK\n");
	return 0;
}
