/* SPDX-License-Identifier: MIT */
/*
 * pair_util.h - the connected pair and the case runner of the preload's
 * rule suites (rules_test.c, holders_test.c; header only, after
 * sem_util.h): a listener, a connected end c and its accepted end s that
 * have exchanged a byte each way (so that under the preload both
 * directions switched), bounded poll helpers, and main's loop over the
 * cases with a 20 s watchdog each.
 */
#ifndef ZL_PAIR_UTIL_H
#define ZL_PAIR_UTIL_H

#include <arpa/inet.h>
#include <signal.h>

static int g_fam;
static char g_dir[64];

/* ---- the pair ------------------------------------------------------------ */

static int pair_open(struct ctx *x)
{
	memset(&x->la, 0, sizeof x->la);
	if (x->fam == AF_INET) {
		struct sockaddr_in *a = (void *)&x->la;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		x->lalen = sizeof *a;
	} else if (x->fam == AF_INET6) {
		struct sockaddr_in6 *a = (void *)&x->la;
		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		x->lalen = sizeof *a;
	} else {
		struct sockaddr_un *a = (void *)&x->la;
		a->sun_family = AF_UNIX;
		snprintf(a->sun_path, sizeof a->sun_path, "%s/sock", g_dir);
		unlink(a->sun_path);
		x->lalen = sizeof *a;
	}
	x->lfd = socket(x->fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(x->lfd >= 0, "socket: %s", errname(errno));
	CHECK(!bind(x->lfd, (struct sockaddr *)&x->la, x->lalen) && !listen(x->lfd, 16),
	      "listener: %s", errname(errno));
	x->lalen = sizeof x->la;
	getsockname(x->lfd, (struct sockaddr *)&x->la, &x->lalen);
	x->c = socket(x->fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(x->c >= 0 && !connect(x->c, (struct sockaddr *)&x->la, x->lalen), "connect: %s",
	      errname(errno));
	x->s = accept4(x->lfd, NULL, NULL, SOCK_CLOEXEC);
	CHECK(x->s >= 0, "accept: %s", errname(errno));
	/* a byte each way and one more: each end made a call after the other's
	 * proof, so both directions switched (under the preload) */
	char b;
	EXPECT_RET(write(x->c, "a", 1), 1);
	TRY(read_full(x->s, &b, 1, "warm-up"));
	EXPECT_RET(write(x->s, "b", 1), 1);
	TRY(read_full(x->c, &b, 1, "warm-up"));
	EXPECT_RET(write(x->c, "c", 1), 1);
	TRY(read_full(x->s, &b, 1, "warm-up"));
	return 0;
}

static void pair_close(struct ctx *x)
{
	close_fd(&x->c);
	close_fd(&x->s);
	close_fd(&x->lfd);
}

static int poll1(int fd, short ev, int ms, unsigned *rev)
{
	struct pollfd p = { fd, ev, 0 };
	int r = poll(&p, 1, ms);
	CHECK(r >= 0, "poll: %s", errname(errno));
	*rev = r ? (unsigned)p.revents : 0;
	return r;
}

#define EV_MASK (POLLIN | POLLOUT | POLLERR | POLLHUP | POLLRDHUP)

/* Waits (bounded) until fd reports all of ev. */
static int wait_for(int fd, unsigned ev, const char *what)
{
	unsigned got = 0;
	for (double end = now_ms() + IO_WAIT_MS; now_ms() < end;) {
		TRY(poll1(fd, (short)ev, 10, &got));
		if ((got & ev) == ev)
			return 0;
	}
	return failf("%s: poll says %s, want %s", what, evname(got & EV_MASK), evname(ev));
}

static int so_error(int fd, int *err)
{
	socklen_t l = sizeof *err;
	CHECK(!getsockopt(fd, SOL_SOCKET, SO_ERROR, err, &l), "SO_ERROR: %s", errname(errno));
	return 0;
}

/* ---- the runner ------------------------------------------------------------ */

struct test {
	const char *name;
	int (*fn)(struct ctx *);
};

static void on_alarm(int sig)
{
	(void)sig;
	static const char m[] = "watchdog: a case still runs after 20 s\n";
	ssize_t w = write(2, m, sizeof m - 1);
	(void)w;
	_exit(1);
}

static int pair_main(int argc, char **argv, const char *prog, const struct test *tests, size_t n)
{
	const char *fam = argc >= 2 ? argv[1] : "";
	g_fam = !strcmp(fam, "tcp4") ? AF_INET : !strcmp(fam, "tcp6") ? AF_INET6
		: !strcmp(fam, "unix") ? AF_UNIX : 0;
	if (!g_fam || argc > 3) {
		fprintf(stderr, "usage: %s tcp4|tcp6|unix [case-name-substring]\n", prog);
		return 2;
	}
	int probe = socket(g_fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe < 0) {
		printf("skip: %s sockets: %s\n", fam, errname(errno));
		return 77;
	}
	close(probe);
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGALRM, on_alarm);
	snprintf(g_dir, sizeof g_dir, "/tmp/%s.XXXXXX", prog);
	if (!mkdtemp(g_dir)) {
		perror("mkdtemp");
		return 1;
	}
	int failed = 0, ran = 0;
	for (size_t i = 0; i < n; i++) {
		if (argc == 3 && !strstr(tests[i].name, argv[2]))
			continue;
		struct ctx x = { .fam = g_fam, .lfd = -1, .c = -1, .s = -1 };
		g_msg[0] = 0;
		alarm(20);
		int r = pair_open(&x);
		if (r == 0)
			r = tests[i].fn(&x);
		alarm(0);
		pair_close(&x);
		ran++;
		if (r == CASE_PASS)
			printf("ok %s\n", tests[i].name);
		else if (r == CASE_SKIP)
			printf("skip %s: %s\n", tests[i].name, g_msg);
		else
			printf("FAIL %s: %s\n", tests[i].name, g_msg[0] ? g_msg : "failed");
		failed += r == CASE_FAIL;
	}
	char p[128];
	snprintf(p, sizeof p, "%s/sock", g_dir);
	unlink(p);
	rmdir(g_dir);
	if (!ran) {
		fprintf(stderr, "%s: no case matches '%s'\n", prog, argv[2]);
		return 2;
	}
	return failed ? 1 : 0;
}

#endif
