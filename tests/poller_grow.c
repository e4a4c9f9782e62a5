/* SPDX-License-Identifier: MIT */
/*
 * poller_grow: a zl_poller takes 2,000 fds (pipes), each added once, and
 * its memory grows with them, not faster: the table doubled on every add
 * (20 pipes took 400 MB, the 23rd add failed with -ENOMEM). Then every
 * fd is reported once it is readable, and deleting them all leaves a
 * poller that still works.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <zipline.h>

#include "proc_util.h"

#define N 2000


#define FAIL(...) \
	do { \
		fprintf(stderr, "poller_grow: " __VA_ARGS__); \
		fputc('\n', stderr); \
		return 1; \
	} while (0)

int main(void)
{
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < 2 * N + 64) {
		rl.rlim_cur = rl.rlim_max < 2 * N + 64 ? rl.rlim_max : 2 * N + 64;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur < 2 * N + 64) {
		printf("skip: RLIMIT_NOFILE %llu is below %d\n", (unsigned long long)rl.rlim_cur,
		       2 * N + 64);
		return 77;
	}
	static int fds[N][2];
	static int ids[N];
	zl_poller *p;
	int rc = zl_poller_create(0, &p);
	if (rc)
		FAIL("zl_poller_create: %s", zl_strerror(rc));
	long before = rss_kb();
	for (int i = 0; i < N; i++) {
		if (pipe(fds[i]))
			FAIL("pipe %d: %s", i, strerror(errno));
		ids[i] = zl_poller_add_fd(p, fds[i][0], ZL_POLLIN, &fds[i]);
		if (ids[i] < 0)
			FAIL("zl_poller_add_fd %d: %s", i, zl_strerror(ids[i]));
	}
	long grew = rss_kb() - before;
	/* an item is tens of bytes: 2,000 of them and their epoll
	 * registrations fit in well under 4 MB */
	if (grew > 4096)
		FAIL("the poller's process grew by %ld kB for %d fds", grew, N);
	for (int i = 0; i < N; i += 7)
		if (write(fds[i][1], "x", 1) != 1)
			FAIL("write: %s", strerror(errno));
	int want = (N + 6) / 7, seen = 0;
	for (int round = 0; round < 100 && seen < want; round++) {
		struct zl_poll_event ev[64];
		int n = zl_poller_wait(p, ev, 64, 1000000);
		if (n < 0)
			FAIL("zl_poller_wait: %s", zl_strerror(n));
		for (int k = 0; k < n; k++) {
			int (*f)[2] = ev[k].user;
			char b;
			if (!(ev[k].events & ZL_POLLIN) || read((*f)[0], &b, 1) != 1)
				FAIL("event %d: events 0x%x", k, ev[k].events);
			seen++;
		}
	}
	if (seen != want)
		FAIL("%d of %d readable fds reported", seen, want);
	for (int i = 0; i < N; i++)
		if ((rc = zl_poller_del(p, ids[i])))
			FAIL("zl_poller_del %d: %s", i, zl_strerror(rc));
	if ((rc = zl_poller_add_fd(p, fds[0][0], ZL_POLLIN, NULL)) < 0)
		FAIL("add after deleting all: %s", zl_strerror(rc));
	zl_poller_destroy(p);
	for (int i = 0; i < N; i++) {
		close(fds[i][0]);
		close(fds[i][1]);
	}
	printf("poller_grow: %d fds added (the process grew by %ld kB), %d readable reported\n", N,
	       grew, seen);
	return 0;
}
