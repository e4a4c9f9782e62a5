/* SPDX-License-Identifier: MIT */
/*
 * poller_scale: one zl_poller holds 100,000 fds (eventfds) and 1,000
 * channels (unix://) at once; adding them grows the process by less than
 * 64 MiB (the poller's items and table: at most 664 bytes per item), adding
 * and deleting cost O(1) (the last tenth of the adds costs no more than
 * 4x the first tenth), and exactly the items made ready are reported,
 * each once, with ZL_POLLIN.
 *
 *   poller_scale [FDS [CHANNELS]]   (defaults 100000 1000)
 *
 * Where RLIMIT_NOFILE cannot be raised that far (a container without
 * CAP_SYS_RESOURCE), it runs with the fds the limit leaves and says so.
 * Exit 0 pass, 1 fail, 77 skip (fewer than 10,000 fds possible).
 * Bounded: every wait has a timeout; the accepting thread gives up after
 * 30 s.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <zipline.h>

#include "proc_util.h"

#define FAIL(...) \
	do { \
		fprintf(stderr, "poller_scale: " __VA_ARGS__); \
		fputc('\n', stderr); \
		exit(1); \
	} while (0)


static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int nch;
static zl_listener *lis;
static zl_channel **srv;

static void *acceptor(void *arg)
{
	(void)arg;
	for (int i = 0; i < nch; i++) {
		int r = zl_accept(lis, 30000000, &srv[i]);
		if (r)
			FAIL("zl_accept %d: %s", i, zl_strerror(r));
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int nfd = argc > 1 ? atoi(argv[1]) : 100000;
	nch = argc > 2 ? atoi(argv[2]) : 1000;
	if (nfd < 10 || nch < 10 || argc > 3) {
		fprintf(stderr, "usage: poller_scale [FDS >= 10 [CHANNELS >= 10]]\n");
		return 2;
	}
	rlim_t need = (rlim_t)nfd + 3 * (rlim_t)nch + 256;
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < need) {
		struct rlimit want = { need, rl.rlim_max > need ? rl.rlim_max : need };
		if (setrlimit(RLIMIT_NOFILE, &want)) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
			getrlimit(RLIMIT_NOFILE, &rl);
			long room = (long)rl.rlim_cur - 3 * nch - 256;
			if (room < 10000) {
				printf("skip: RLIMIT_NOFILE %llu leaves fewer than 10,000 fds\n",
				       (unsigned long long)rl.rlim_cur);
				return 77;
			}
			printf("poller_scale: RLIMIT_NOFILE %llu (not raised to %llu: %s): %ld fds "
			       "instead of %d\n", (unsigned long long)rl.rlim_cur,
			       (unsigned long long)need, strerror(errno), room, nfd);
			nfd = (int)room;
		}
	}
	int *fds = calloc((size_t)nfd, sizeof(*fds)), *ids = calloc((size_t)nfd, sizeof(*ids));
	int *cids = calloc((size_t)nch, sizeof(*cids));
	zl_channel **cli = calloc((size_t)nch, sizeof(*cli));
	srv = calloc((size_t)nch, sizeof(*srv));
	char *seen = calloc((size_t)(nfd + nch), 1);
	if (!fds || !ids || !cids || !cli || !srv || !seen)
		FAIL("out of memory");

	/* the channels first (their memory is not the poller's, but counts) */
	char url[128];
	snprintf(url, sizeof url, "unix:///tmp/zl-poller-scale-%d.sock", (int)getpid());
	int r = zl_listen(url, NULL, &lis);
	if (r)
		FAIL("zl_listen %s: %s", url, zl_strerror(r));
	pthread_t th;
	if (pthread_create(&th, NULL, acceptor, NULL))
		FAIL("pthread_create");
	for (int i = 0; i < nch; i++)
		if ((r = zl_connect(url, NULL, 5000000, &cli[i])))
			FAIL("zl_connect %d: %s", i, zl_strerror(r));
	pthread_join(th, NULL);

	zl_poller *p;
	if ((r = zl_poller_create(0, &p)))
		FAIL("zl_poller_create: %s", zl_strerror(r));
	for (int i = 0; i < nfd; i++)
		if ((fds[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
			FAIL("eventfd %d: %s", i, strerror(errno));
	long before = rss_kb();
	double t0 = now_s(), first = 0, last = 0;
	for (int i = 0; i < nfd; i++) {
		if (i == nfd / 10)
			first = now_s() - t0;
		if (i == nfd - nfd / 10)
			last = now_s();
		if ((ids[i] = zl_poller_add_fd(p, fds[i], ZL_POLLIN, (void *)(intptr_t)i)) < 0)
			FAIL("zl_poller_add_fd %d: %s", i, zl_strerror(ids[i]));
	}
	last = now_s() - last;
	for (int i = 0; i < nch; i++)
		if ((cids[i] = zl_poller_add_channel(p, cli[i], ZL_POLLIN,
						     (void *)(intptr_t)(nfd + i))) < 0)
			FAIL("zl_poller_add_channel %d: %s", i, zl_strerror(cids[i]));
	long grew = rss_kb() - before;
	if (grew * 1024 > 664L * (nfd + nch))
		FAIL("the process grew by %ld kB for %d fds and %d channels (over 664 bytes "
		     "per item: 64 MiB for 101,000)", grew, nfd, nch);
	if (last > 4 * first + 0.01)
		FAIL("the last tenth of the adds took %.3f s, the first %.3f s: not O(1)", last,
		     first);

	/* make every 97th fd and every 10th channel ready */
	int want = 0;
	for (int i = 0; i < nfd; i += 97, want++)
		if (eventfd_write(fds[i], 1))
			FAIL("eventfd_write: %s", strerror(errno));
	for (int i = 0; i < nch; i += 10, want++)
		if ((r = zl_send(srv[i], "x", 1, 1000000)))
			FAIL("zl_send %d: %s", i, zl_strerror(r));
	int got = 0;
	for (double end = now_s() + 10; got < want && now_s() < end;) {
		struct zl_poll_event ev[256];
		int n = zl_poller_wait(p, ev, 256, 100000);
		if (n == -ETIMEDOUT)
			continue;
		if (n < 0)
			FAIL("zl_poller_wait: %s", zl_strerror(n));
		for (int k = 0; k < n; k++) {
			intptr_t u = (intptr_t)ev[k].user;
			if (u < 0 || u >= nfd + nch || !(ev[k].events & ZL_POLLIN))
				FAIL("an event for %ld, events 0x%x", (long)u, ev[k].events);
			if (u < nfd ? u % 97 : (u - nfd) % 10)
				FAIL("item %ld reported, but it was not made ready", (long)u);
			if (seen[u]++)
				FAIL("item %ld reported again after it was taken", (long)u);
			if (u < nfd) {
				eventfd_t v;
				if (eventfd_read(fds[u], &v))
					FAIL("eventfd_read: %s", strerror(errno));
			} else {
				char b[8];
				size_t len = 0;
				if ((r = zl_recv(cli[u - nfd], b, sizeof b, &len, 0)) || len != 1)
					FAIL("zl_recv %ld: %s", (long)(u - nfd), zl_strerror(r));
			}
			got++;
		}
	}
	if (got != want)
		FAIL("%d of %d ready items reported within 10 s", got, want);
	struct zl_poll_event ev[8];
	if ((r = zl_poller_wait(p, ev, 8, 0)) != -EAGAIN)
		FAIL("a wait after taking everything: %d, want -EAGAIN", r);

	double d0 = now_s();
	for (int i = 0; i < nfd; i++)
		if ((r = zl_poller_del(p, ids[i])))
			FAIL("zl_poller_del %d: %s", i, zl_strerror(r));
	for (int i = 0; i < nch; i++)
		if ((r = zl_poller_del(p, cids[i])))
			FAIL("zl_poller_del channel %d: %s", i, zl_strerror(r));
	double del = now_s() - d0;
	zl_poller_destroy(p);
	for (int i = 0; i < nfd; i++)
		close(fds[i]);
	for (int i = 0; i < nch; i++) {
		zl_close(cli[i]);
		zl_close(srv[i]);
	}
	zl_listener_close(lis);
	unlink(url + strlen("unix://"));
	printf("poller_scale: %d fds and %d channels in one poller: the process grew by %ld kB; "
	       "adds %.0f ns each (first tenth %.3f s, last tenth %.3f s); %d ready items "
	       "reported exactly; deletes %.0f ns each\n",
	       nfd, nch, grew, (first + last) / (nfd / 5) * 1e9, first, last, want,
	       del / (nfd + nch) * 1e9);
	free(fds);
	free(ids);
	free(cids);
	free(cli);
	free(srv);
	free(seen);
	return 0;
}
