/* SPDX-License-Identifier: MIT */
/*
 * chan_many SCHEME: 1000 channels at once in one process (a thread accepts
 * while the main thread connects; ?ring=16384), one message each way on
 * every channel, then memory (VmRSS) and fd use per channel, and no fd is
 * left after closing them all.
 */
#include <sys/resource.h>

#include "chanlib.h"

#define N 1000
#define TMO 10000000
#define FDS_PER_PAIR 12

static zl_listener *l;
static zl_channel *srv[N], *cli[N];

static void *acceptor(void *arg)
{
	(void)arg;
	for (int i = 0; i < N; i++) {
		int rc = zl_accept(l, TMO, &srv[i]);
		CHECKF(rc == 0, "accept #%d: %d (%s)", i, rc, zl_strerror(rc));
	}
	return NULL;
}

int main(int argc, char **argv)
{
	const char *scheme = tl_scheme_arg(argc, argv);
	tl_watchdog(110);
	struct rlimit rl;
	CHECK(!getrlimit(RLIMIT_NOFILE, &rl));
	rlim_t need = (rlim_t)N * FDS_PER_PAIR + 64;
	if (rl.rlim_cur < need) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		CHECK(!getrlimit(RLIMIT_NOFILE, &rl));
	}
	if (rl.rlim_cur < need)
		SKIP("RLIMIT_NOFILE is %llu (hard %llu), %d channel pairs need about %llu",
		     (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max, N,
		     (unsigned long long)need);

	char url[600];
	l = tl_listen(scheme, "ring=16384", url, sizeof(url));
	long rss0 = tl_rss_kb();
	int fd0 = tl_fd_count();
	int64_t t0 = tl_now_us();
	struct tl_thread th;
	tl_thread_start(&th, acceptor, NULL);
	for (int i = 0; i < N; i++) {
		int rc = zl_connect(url, NULL, TMO, &cli[i]);
		CHECKF(rc == 0, "connect #%d: %d (%s)", i, rc, zl_strerror(rc));
	}
	tl_thread_join(&th, 60000);
	int64_t t_conn = tl_now_us() - t0;
	long rss1 = tl_rss_kb();
	int fd1 = tl_fd_count();

	/* client i sends i; whichever server channel gets it answers i */
	static bool seen[N];
	for (uint64_t i = 0; i < N; i++)
		tl_send_pattern(cli[i], 64, i, TMO);
	uint8_t buf[64];
	for (int j = 0; j < N; j++) {
		size_t len;
		CHECK_OK(zl_recv(srv[j], buf, sizeof(buf), &len, TMO));
		CHECK(len == 64);
		/* which client's message is it? */
		uint64_t id = N;
		for (uint64_t k = 0; k < N && id == N; k++) {
			uint8_t want[64];
			tl_fill(want, 64, k);
			if (!memcmp(want, buf, 64))
				id = k;
		}
		CHECKF(id < N && !seen[id], "server channel %d got an unknown or repeated message", j);
		seen[id] = true;
		tl_send_pattern(srv[j], 32, 10000 + id, TMO);
	}
	for (uint64_t i = 0; i < N; i++)
		tl_recv_expect(cli[i], buf, sizeof(buf), 32, 10000 + i, TMO);
	long rss2 = tl_rss_kb();
	int64_t t_all = tl_now_us() - t0;

	for (int i = 0; i < N; i++) {
		zl_close(cli[i]);
		zl_close(srv[i]);
	}
	zl_listener_close(l);
	int fd3 = tl_fd_count();
	long rss3 = tl_rss_kb();
	printf("%s: %d channel pairs connected in %.2f s (all traffic done at %.2f s)\n", scheme, N,
	       t_conn / 1e6, t_all / 1e6);
	printf("%s: RSS %ld kB before, %ld kB connected, %ld kB after traffic (%.1f kB per "
	       "pair, %.1f kB per channel end), %ld kB after closing\n",
	       scheme, rss0, rss1, rss2, (rss2 - rss0) / (double)N, (rss2 - rss0) / (2.0 * N),
	       rss3);
	printf("%s: fds %d before, %d with %d pairs open (%.1f per pair), %d after closing\n",
	       scheme, fd0, fd1, N, (fd1 - fd0) / (double)N, fd3);
	CHECKF(fd3 <= fd0, "fd leak: %d fds before, %d after closing everything", fd0, fd3);
	return T_EXIT_PASS;
}
