/* SPDX-License-Identifier: MIT */
/*
 * syscalls_test.c - system calls per round trip of a ping-pong, counted
 * exactly (the raw_syscalls:sys_enter tracepoint, per thread, through
 * perf_event_open): a server in one of four styles (read and write) and a
 * blocking client (sendto, and recvfrom with an address), in two
 * processes pinned to different CPUs, 64-byte messages.
 *
 *   syscalls_test tcp4|unix block|poll|select|epoll|epoll-ctl MIN MAX [ROUNDS]
 *
 * The server's wait (poll, select, epoll) also holds its listening
 * socket, a kernel fd that stays quiet, as a real server's does;
 * epoll-ctl also deletes, adds and modifies its registration per round
 * trip to wait for room, as event loops such as Redis's do. After
 * 20,000 round trips of warm-up each side counts its own system calls over
 * ROUNDS round trips (default 100,000) and prints them per round trip;
 * both must lie in [MIN, MAX]. Run plain (the kernel's path: MIN checks
 * that the count works) and under zl-run (MAX: the preload's ring).
 * Exit 0 pass, 1 fail, 2 usage, 77 skip (no tracepoint counting here, or
 * fewer than two CPUs to pin to).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define MSG 64
#define WARM 20000

static int fam;
static const char *style;
static long rounds = 100000;

static int fail(const char *what)
{
	fprintf(stderr, "syscalls_test: %s: %s\n", what, strerror(errno));
	return -1;
}

/* A counter of this thread's system calls, disabled; -1 and a reason in
 * why if the kernel will not count them here. */
static int counter(char *why, size_t cap)
{
	static const char *ids[] = { "/sys/kernel/tracing/events/raw_syscalls/sys_enter/id",
				     "/sys/kernel/debug/tracing/events/raw_syscalls/sys_enter/id" };
	long id = -1;
	for (size_t i = 0; i < sizeof ids / sizeof ids[0] && id < 0; i++) {
		FILE *f = fopen(ids[i], "r");
		if (f) {
			if (fscanf(f, "%ld", &id) != 1)
				id = -1;
			fclose(f);
		}
	}
	if (id < 0) {
		snprintf(why, cap, "raw_syscalls:sys_enter not found (tracefs not mounted?)");
		return -1;
	}
	struct perf_event_attr a = { .type = PERF_TYPE_TRACEPOINT, .size = sizeof a,
				     .config = (uint64_t)id, .disabled = 1 };
	int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		snprintf(why, cap, "perf_event_open: %s (perf_event_paranoid, or not root)",
			 strerror(errno));
	return fd;
}

static int pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	return sched_setaffinity(0, sizeof s, &s);
}

/* read/write (the server), or recvfrom with an address and sendto (the
 * client, as sockperf's) */
static int full(int fd, char *b, size_t n, int rd)
{
	for (size_t d = 0; d < n;) {
		ssize_t r = rd ? read(fd, b + d, n - d) : write(fd, b + d, n - d);
		if (r <= 0)
			return r == 0 ? (errno = EPIPE, -1) : -1;
		d += (size_t)r;
	}
	return 0;
}

static int full_to(int fd, char *b, size_t n, int rd)
{
	for (size_t d = 0; d < n;) {
		struct sockaddr_storage from;
		socklen_t fl = sizeof from;
		ssize_t r = rd ? recvfrom(fd, b + d, n - d, 0, (struct sockaddr *)&from, &fl)
			       : sendto(fd, b + d, n - d, 0, NULL, 0);
		if (r <= 0)
			return r == 0 ? (errno = EPIPE, -1) : -1;
		d += (size_t)r;
	}
	return 0;
}

/* Wait for fd (the connection) in the server's style, with the listener
 * l in the same wait. */
static int wait_in(int ep, int l, int fd)
{
	if (!strcmp(style, "poll")) {
		struct pollfd p[2] = { { l, POLLIN, 0 }, { fd, POLLIN, 0 } };
		do
			if (poll(p, 2, 5000) <= 0)
				return -1;
		while (!(p[1].revents & POLLIN));
	} else if (!strcmp(style, "select")) {
		fd_set r;
		do {
			FD_ZERO(&r);
			FD_SET(l, &r);
			FD_SET(fd, &r);
			struct timeval tv = { 5, 0 };
			if (select((l > fd ? l : fd) + 1, &r, NULL, NULL, &tv) <= 0)
				return -1;
		} while (!FD_ISSET(fd, &r));
	} else if (!strncmp(style, "epoll", 5)) {
		struct epoll_event e[2];
		int n, hit;
		do {
			if ((n = epoll_wait(ep, e, 2, 5000)) <= 0)
				return -1;
			hit = 0;
			for (int i = 0; i < n; i++)
				hit |= e[i].data.fd == fd;
		} while (!hit);
	}
	return 0;
}

/* epoll-ctl: as event loops that watch for room only while they have a
 * reply (Redis's ae): delete, add for EPOLLOUT, wait, and back */
static int ctl_out(int ep, int fd)
{
	struct epoll_event e = { .events = EPOLLOUT, .data.fd = fd }, o;
	if (epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL) || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) ||
	    epoll_wait(ep, &o, 1, 5000) != 1 || o.data.fd != fd || !(o.events & EPOLLOUT))
		return -1;
	return 0;
}

static int ctl_in(int ep, int fd)
{
	struct epoll_event e = { .events = EPOLLIN, .data.fd = fd };
	return epoll_ctl(ep, EPOLL_CTL_MOD, fd, &e);
}

static int serve(int l, int fd, uint64_t *calls)
{
	char b[MSG];
	int ep = -1;
	if (!strncmp(style, "epoll", 5)) {
		struct epoll_event e = { .events = EPOLLIN };
		ep = epoll_create1(EPOLL_CLOEXEC);
		e.data.fd = l;
		if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, l, &e))
			return fail("epoll");
		e.data.fd = fd;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e))
			return fail("epoll_ctl");
	}
	char why[160];
	int c = counter(why, sizeof why);
	bool ctl = !strcmp(style, "epoll-ctl");
	for (long i = 0; i < WARM + rounds; i++) {
		if (i == WARM && ioctl(c, PERF_EVENT_IOC_ENABLE, 0))
			return fail("PERF_EVENT_IOC_ENABLE");
		if (wait_in(ep, l, fd) || full(fd, b, MSG, 1) || (ctl && ctl_out(ep, fd)) ||
		    full(fd, b, MSG, 0) || (ctl && ctl_in(ep, fd)))
			return fail("server round trip");
	}
	ioctl(c, PERF_EVENT_IOC_DISABLE, 0);
	if (read(c, calls, sizeof *calls) != sizeof *calls)
		return fail("read the counter");
	return 0;
}

static int client(const struct sockaddr *a, socklen_t al, uint64_t *calls)
{
	char b[MSG] = "ping";
	int s = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	if (s < 0 || connect(s, a, al))
		return fail("connect");
	if (fam != AF_UNIX)
		setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	char why[160];
	int c = counter(why, sizeof why);
	for (long i = 0; i < WARM + rounds; i++) {
		if (i == WARM && ioctl(c, PERF_EVENT_IOC_ENABLE, 0))
			return fail("PERF_EVENT_IOC_ENABLE");
		if (full_to(s, b, MSG, 0) || full_to(s, b, MSG, 1))
			return fail("client round trip");
	}
	ioctl(c, PERF_EVENT_IOC_DISABLE, 0);
	if (read(c, calls, sizeof *calls) != sizeof *calls)
		return fail("read the counter");
	close(s);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 5 || argc > 6 ||
	    (strcmp(argv[1], "tcp4") && strcmp(argv[1], "unix")) ||
	    (strcmp(argv[2], "block") && strcmp(argv[2], "poll") && strcmp(argv[2], "select") &&
	     strcmp(argv[2], "epoll") && strcmp(argv[2], "epoll-ctl"))) {
		fprintf(stderr, "usage: syscalls_test tcp4|unix block|poll|select|epoll|epoll-ctl "
				"MIN MAX [ROUNDS]\n");
		return 2;
	}
	fam = !strcmp(argv[1], "unix") ? AF_UNIX : AF_INET;
	style = argv[2];
	double min = atof(argv[3]), max = atof(argv[4]);
	if (argc == 6 && (rounds = atol(argv[5])) <= 0) {
		fprintf(stderr, "syscalls_test: ROUNDS must be positive\n");
		return 2;
	}
	char why[160];
	int probe = counter(why, sizeof why);
	if (probe < 0) {
		printf("skip: cannot count system calls: %s\n", why);
		return 77;
	}
	close(probe);
	cpu_set_t cpus;
	if (sched_getaffinity(0, sizeof cpus, &cpus) || CPU_COUNT(&cpus) < 2) {
		printf("skip: needs two CPUs to pin the busy-polling peers apart\n");
		return 77;
	}
	int cpu[2], k = 0;
	for (int i = 0; i < CPU_SETSIZE && k < 2; i++)
		if (CPU_ISSET(i, &cpus))
			cpu[k++] = i;

	struct sockaddr_storage ss = { 0 };
	socklen_t al;
	char dir[] = "/tmp/zl-sc-XXXXXX";
	if (fam == AF_UNIX) {
		struct sockaddr_un *u = (void *)&ss;
		if (!mkdtemp(dir)) {
			fail("mkdtemp");
			return 1;
		}
		u->sun_family = AF_UNIX;
		snprintf(u->sun_path, sizeof u->sun_path, "%s/s", dir);
		al = sizeof *u;
	} else {
		struct sockaddr_in *in = (void *)&ss;
		in->sin_family = AF_INET;
		in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		al = sizeof *in;
	}
	int l = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0 || bind(l, (void *)&ss, al) || listen(l, 4) || getsockname(l, (void *)&ss, &al)) {
		fail("listen");
		return 1;
	}
	int up[2];
	if (pipe2(up, O_CLOEXEC)) {
		fail("pipe");
		return 1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		fail("fork");
		return 1;
	}
	if (pid == 0) {
		uint64_t calls = 0;
		close(l);
		close(up[0]);
		alarm(120);
		int rc = pin(cpu[1]) || client((void *)&ss, al, &calls) ? 1 : 0;
		if (write(up[1], &calls, sizeof calls) != sizeof calls)
			rc = 1;
		_exit(rc);
	}
	close(up[1]);
	alarm(120);
	uint64_t sc = 0, cc = 0;
	int rc = 1, one = 1;
	int fd = pin(cpu[0]) ? -1 : accept4(l, NULL, NULL, SOCK_CLOEXEC);
	if (fd >= 0 && fam != AF_UNIX)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (fd >= 0 && !serve(l, fd, &sc) && read(up[0], &cc, sizeof cc) == sizeof cc)
		rc = 0;
	if (fd >= 0)
		close(fd);
	int st = 0;
	if (rc)
		kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		rc = 1;
	if (fam == AF_UNIX) {
		unlink(((struct sockaddr_un *)&ss)->sun_path);
		rmdir(dir);
	}
	if (rc) {
		printf("FAIL: %s %s: the ping-pong did not complete\n", argv[1], style);
		return 1;
	}
	double s = (double)sc / (double)rounds, c = (double)cc / (double)rounds;
	printf("%s %s: system calls per round trip (64 B each way, %ld round trips): "
	       "server %.4f, client %.4f (bounds %g..%g)\n",
	       argv[1], style, rounds, s, c, min, max);
	if (s < min || s > max || c < min || c > max) {
		printf("FAIL: outside the bounds\n");
		return 1;
	}
	return 0;
}
