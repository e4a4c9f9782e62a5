/* SPDX-License-Identifier: MIT */
/*
 * UCX's streaming figures for stream-compare: ucx_perftest -t ucp_am_bw
 * (active messages, the receiver's callback takes each one without copying
 * or checking it) and -t ucp_put_bw (one-sided puts into the peer's buffer,
 * the same bytes overwritten, no receiver at all) over shared memory
 * (UCX_TLS=posix,self unless UCX_TLS is set), server pinned like our
 * receiver and client like our sender, the same message counts. Its
 * overall_mr column is messages per second. Each process is killed at
 * --timeout.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stream.h"

static int on_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[4096], *save = NULL;
	snprintf(buf, sizeof(buf), "%s", path ? path : "/usr/bin:/bin");
	for (char *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		char p[4200];
		snprintf(p, sizeof(p), "%s/%s", d, prog);
		if (!access(p, X_OK))
			return 1;
	}
	return 0;
}

/* Start argv pinned to cpu, stdout to out_fd (-1: /dev/null). */
static pid_t launch(char *const argv[], int cpu, int out_fd)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	int null = open("/dev/null", O_WRONLY);
	dup2(out_fd >= 0 ? out_fd : null, 1);
	dup2(null, 2);
	setenv("UCX_TLS", "posix,self", 0);
	if (pin_self(cpu))
		_exit(126);
	execvp(argv[0], argv);
	_exit(127);
}

/* Read fd to EOF (at most cap - 1 bytes) until deadline; 0 or -1. */
static int slurp(int fd, char *buf, size_t cap, uint64_t deadline)
{
	size_t n = 0;
	for (;;) {
		uint64_t now = mono_ns();
		if (now >= deadline)
			return -1;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int r = poll(&p, 1, (int)((deadline - now) / 1000000) + 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		ssize_t k = read(fd, buf + n, cap - 1 - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		n += (size_t)k;
		if (n == cap - 1)
			break;
	}
	buf[n] = 0;
	return 0;
}

/* The overall_mr of the last CSV line (iterations,...,overall_mr). */
static double parse_mr(const char *out)
{
	const char *line = NULL;
	for (const char *p = out; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
		const char *q = p + strspn(p, " "); /* large counts are padded */
		if (*q >= '0' && *q <= '9')
			line = q;
	}
	if (!line)
		return 0;
	int field = 0;
	for (const char *p = line; *p && *p != '\n'; p++)
		if (*p == ',' && ++field == 7)
			return strtod(p + 1, NULL);
	return 0;
}

/* One ucx_perftest pair; messages/s, or 0 on failure. */
static double one(const struct stream_opts *o, const char *test, size_t size, uint64_t n)
{
	for (int attempt = 0; attempt < 3; attempt++) {
		char port[16], sz[32], cnt[32], warm[32];
		snprintf(port, sizeof(port), "%d", 20000 + (int)(mono_ns() / 1000 % 30000));
		snprintf(sz, sizeof(sz), "%zu", size);
		snprintf(cnt, sizeof(cnt), "%llu", (unsigned long long)n);
		snprintf(warm, sizeof(warm), "%llu", (unsigned long long)(n / 10));
		char *srv[] = { "ucx_perftest", "-p", port, NULL };
		char *cli[] = { "ucx_perftest", "127.0.0.1", "-p", port, "-t", (char *)test, "-s", sz,
				"-n", cnt, "-w", warm, "-f", "-v", NULL };
		pid_t s = launch(srv, o->cpu_rx, -1), c = -1;
		double mr = 0;
		int pfd[2];
		uint64_t dl = mono_ns() + (uint64_t)o->timeout_us * 1000;
		for (int k = 0; k < 10 && s > 0 && !mr; k++) { /* the server needs a moment */
			usleep(100000);
			if (pipe(pfd))
				break;
			c = launch(cli, o->cpu_tx, pfd[1]);
			close(pfd[1]);
			char out[8192];
			if (c > 0 && !slurp(pfd[0], out, sizeof(out), dl))
				mr = parse_mr(out);
			close(pfd[0]);
			if (c > 0)
				kill_child(c);
			if (waitpid(s, NULL, WNOHANG) == s) {
				s = -1;
				break;
			}
		}
		kill_child(s);
		if (mr > 0)
			return mr;
	}
	return 0;
}

int stream_ucx_run(const struct stream_opts *o, const char *test, struct stream_res *r, int run)
{
	if (!on_path("ucx_perftest"))
		return 3;
	int ok = 0;
	for (int s = 0; s < o->nsizes; s++) {
		uint64_t n = stream_count(o, o->sizes[s]);
		double mr = one(o, test, o->sizes[s], n);
		if (mr <= 0) { /* UCX is a reference: leave the size out, go on */
			fprintf(stderr, "zl-bench stream-compare: ucx_perftest -t %s -s %zu failed; "
					"no figure for this size in run %d\n",
				test, o->sizes[s], run + 1);
			continue;
		}
		r->msgs[s] = n;
		r->mps[s][r->nruns[s]++] = mr;
		ok++;
	}
	return ok ? 0 : 1;
}
