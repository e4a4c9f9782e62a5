/* SPDX-License-Identifier: MIT */
/* CPUs, pinning and child processes. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stdatomic.h>

#include "zl-bench.h"

/* The CPUs we were started on. Remembered on first use (main() asks
 * before pinning anything), because pinning shrinks our own mask later. */
static const cpu_set_t *start_set(void)
{
	static cpu_set_t set;
	static int have;
	if (!have) {
		if (sched_getaffinity(0, sizeof(set), &set) < 0) {
			CPU_ZERO(&set);
			long n = sysconf(_SC_NPROCESSORS_ONLN);
			for (long c = 0; c < n && c < CPU_SETSIZE; c++)
				CPU_SET(c, &set);
		}
		have = 1;
	}
	return &set;
}

int cpu_count(void)
{
	int n = CPU_COUNT(start_set());
	return n > 0 ? n : 1;
}

int default_cpus(int *a, int *b)
{
	const cpu_set_t *set = start_set();
	int n = 0, cpus[2];
	for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
		if (CPU_ISSET(c, set))
			cpus[n++] = c;
	if (n < 2)
		return -1;
	*a = cpus[0];
	*b = cpus[1];
	return 0;
}

int pin_self(int cpu)
{
	if (cpu == ZLB_NO_CPU)
		return 0;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0) {
		int e = errno;
		fprintf(stderr, "zl-bench: cannot pin to cpu%d: %s\n", cpu, strerror(e));
		return -e;
	}
	return 0;
}

void describe_pin(char *buf, size_t cap, int client_cpu, int server_cpu, int forked)
{
	char c[32] = "unpinned", s[32] = "unpinned";
	if (client_cpu != ZLB_NO_CPU)
		snprintf(c, sizeof(c), "cpu%d", client_cpu);
	if (server_cpu != ZLB_NO_CPU)
		snprintf(s, sizeof(s), "cpu%d", server_cpu);
	if (forked)
		snprintf(buf, cap, "pinning: client %s, server %s%s", c, s,
			 client_cpu == ZLB_NO_CPU && cpu_count() < 2 ? " (only one CPU)" : "");
	else if (client_cpu != ZLB_NO_CPU || server_cpu != ZLB_NO_CPU)
		snprintf(buf, cap, "pinning: this side on %s", client_cpu != ZLB_NO_CPU ? c : s);
	else
		snprintf(buf, cap, "pinning: none (--pin A pins this side to CPU A)");
}

pid_t spawn_child(int (*fn)(void *arg, int wfd), void *arg, int *rfd)
{
	int p[2];
	if (pipe(p) < 0) {
		perror("pipe");
		return -1;
	}
	fflush(NULL); /* or buffered output would be printed twice */
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		close(p[0]);
		/* never outlive the parent, even if it is killed */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		int rc = fn(arg, p[1]);
		fflush(NULL);
		_exit(rc);
	}
	close(p[1]);
	*rfd = p[0];
	return pid;
}

int read_line(int fd, char *buf, size_t cap, int timeout_ms)
{
	size_t n = 0;
	struct timespec t0;
	buf[0] = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (n + 1 < cap) {
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		long used = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
		if (used >= timeout_ms) {
			buf[n] = 0;
			return -1;
		}
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int r = poll(&pfd, 1, (int)(timeout_ms - used));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			buf[n] = 0;
			return -1;
		}
		ssize_t k = read(fd, buf + n, 1); /* byte by byte: only one short line */
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			buf[n] = 0;
			return -1;
		}
		if (buf[n] == '\n') {
			buf[n] = 0;
			return 0;
		}
		n++;
	}
	buf[n] = 0;
	return -1;
}

int reap_child(pid_t pid, int timeout_ms)
{
	int status;
	for (int waited = 0;; waited++) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return -1;
		if (waited >= timeout_ms) {
			fprintf(stderr, "zl-bench: child %d did not exit within %d ms; killing it\n",
				(int)pid, timeout_ms);
			kill(pid, SIGKILL);
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
			return -2;
		}
		struct timespec d = {0, 1000 * 1000};
		nanosleep(&d, NULL);
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return -1;
}

void kill_child(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

void explain_status(const char *who, int st)
{
	if (st > 128)
		fprintf(stderr, "zl-bench: %s died from signal %d\n", who, st - 128);
	else if (st > 0)
		fprintf(stderr, "zl-bench: %s exited with status %d\n", who, st);
	else if (st == -1)
		fprintf(stderr, "zl-bench: %s: waitpid failed\n", who);
}

/* Fork fn as a pinned peer that answers "OK" once ready, then pin this
 * process to cpu. The child's pid, or -1 (reported) if either failed. */
pid_t start_peer(int (*fn)(void *arg, int wfd), void *arg, int cpu, const char *who)
{
	int rfd;
	char line[64];
	pid_t pid = spawn_child(fn, arg, &rfd);
	if (pid < 0)
		return -1;
	int ready = read_line(rfd, line, sizeof(line), 10000) == 0 && !strcmp(line, "OK");
	close(rfd);
	if (!ready || pin_self(cpu)) {
		fprintf(stderr, "zl-bench %s: the child did not start\n", who);
		kill_child(pid);
		return -1;
	}
	return pid;
}

/* Spin until *v == want (acquire). The clock is read only every 1024 spins
 * and only after the first 1024, so a quick answer costs no clock read.
 * 0, or -1 after a second without it: a peer that hangs must not hang us. */
int spin_until(_Atomic uint64_t *v, uint64_t want)
{
	return spin_until_touch(v, want, NULL);
}

int spin_until_touch(_Atomic uint64_t *v, uint64_t want, const void *touch)
{
	uint64_t spins = 0, start = 0;
	while (atomic_load_explicit(v, memory_order_acquire) != want) {
		if (touch)
			zl_touch_line(touch);
		zl_cpu_relax();
		if ((++spins & 1023) == 0) {
			uint64_t now = mono_ns();
			if (!start)
				start = now;
			else if (now - start > 1000000000ull)
				return -1;
		}
	}
	return 0;
}

/* ---- bounded zero-copy reservation ------------------------------------ */

/* zl_send_reserve never waits; wait for room with a bound. The deadline is
 * only computed once room is short, to keep the clock out of the fast path. */
int reserve_bounded(zl_channel *ch, size_t len, void **p, int64_t timeout_us)
{
	uint64_t deadline = 0;
	for (;;) {
		int rc = zl_send_reserve(ch, len, p);
		if (rc != -EAGAIN)
			return rc;
		if (!deadline)
			deadline = mono_ns() + (uint64_t)timeout_us * 1000;
		else if (mono_ns() > deadline)
			return -ETIMEDOUT;
		rc = zl_wait_writable(ch, len, timeout_us);
		if (rc)
			return rc;
	}
}
