/* SPDX-License-Identifier: MIT */
/* zl-proto: the protocol evaluation paper's RDMA message-passing protocols and the verbs latency
 * experiments of seeds 000, 003 and 004. See docs/man/zl-proto.1. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "clock.h"
#include "node.h"
#include "oob.h"

int result_write_csv(const struct params *p, const struct result *r)
{
	if (!strcmp(p->csv, "-")) {
		report_csv_header(stdout);
		report_csv_row(stdout, r);
		return 0;
	}
	struct stat st;
	int fresh = stat(p->csv, &st) || st.st_size == 0;
	FILE *f = fopen(p->csv, "a");
	if (!f) {
		fprintf(stderr, "zl-proto: %s: %s\n", p->csv, strerror(errno));
		return -errno;
	}
	if (fresh || p->csv_header)
		report_csv_header(f);
	report_csv_row(f, r);
	return fclose(f) ? -errno : 0;
}

/* Entry i % count of the comma list (empty list: the first device). */
static void dev_of(const char *list, int i, char *out, size_t n)
{
	int count = 1;
	for (const char *c = list; *c; c++)
		count += *c == ',';
	i %= count;
	while (i-- > 0)
		list = strchr(list, ',') + 1;
	size_t len = strcspn(list, ",");
	snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), list);
}

static int run_node(const struct params *p, int me, int lfd)
{
	char dev[64];
	dev_of(p->devs, me, dev, sizeof(dev));
	return p->mode == MD_PROTO ? proto_run(p, me, dev, lfd) : lat_run(p, me, dev, lfd);
}

static void stop_all(pid_t *pid, int n)
{
	for (int i = 0; i < n; i++)
		if (pid[i] > 0)
			kill(pid[i], SIGTERM);
	/* two seconds to go, then SIGKILL: nothing outlives the run */
	uint64_t dl = mono_ns() + 2000000000ull;
	for (int left = 1; left;) {
		left = 0;
		for (int i = 0; i < n; i++)
			if (pid[i] > 0) {
				if (waitpid(pid[i], NULL, WNOHANG) == pid[i])
					pid[i] = 0;
				else
					left = 1;
			}
		if (left && mono_ns() > dl) {
			for (int i = 0; i < n; i++)
				if (pid[i] > 0) {
					kill(pid[i], SIGKILL);
					waitpid(pid[i], NULL, 0);
					pid[i] = 0;
				}
			break;
		}
		if (left)
			usleep(10000);
	}
}

/* --local: node i is child i; node 0 gets the listener made here, so the
 * port is free and known before anyone connects. */
static int run_local(struct params *p)
{
	int port, n = p->N;
	int lfd = oob_listen(p->coord[0] ? p->coord : "127.0.0.1:0", &port);
	if (lfd < 0)
		return 1;
	if (!p->coord[0])
		snprintf(p->coord, sizeof(p->coord), "127.0.0.1:%d", port);
	pid_t pid[P_MAX_NODES] = { 0 };
	fflush(NULL);
	for (int i = 0; i < n; i++) {
		pid[i] = fork();
		if (pid[i] < 0) {
			perror("zl-proto: fork");
			stop_all(pid, i);
			return 1;
		}
		if (!pid[i]) {
			if (i)
				close(lfd);
			int r = run_node(p, i, i ? -1 : lfd);
			fflush(NULL);
			_exit(r == 77 ? 77 : r ? 1 : 0);
		}
	}
	close(lfd);
	double limit = p->mode == MD_PROTO ? p->warmup + p->seconds + 3 * p->timeout + 10
					   : 20 * p->timeout + 60;
	uint64_t t0 = mono_ns(), dl = t0 + (uint64_t)(limit * 1e9);
	int left = n, rc = 0;
	while (left) {
		int st;
		pid_t w = waitpid(-1, &st, WNOHANG);
		if (w > 0) {
			int i = 0;
			while (i < n && pid[i] != w)
				i++;
			if (i == n)
				continue;
			pid[i] = 0;
			left--;
			if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
				rc = rc ? rc : 77; /* skipped, with the reason printed */
				continue;
			}
			if (!WIFEXITED(st) || WEXITSTATUS(st)) {
				if (WIFSIGNALED(st))
					fprintf(stderr, "zl-proto: node %d was killed by signal %d; stopping the others\n",
						i, WTERMSIG(st));
				else
					fprintf(stderr, "zl-proto: node %d failed (exit %d); stopping the others\n", i,
						WEXITSTATUS(st));
				rc = 1;
				break;
			}
			continue;
		}
		uint64_t now = mono_ns();
		if (p->kill_node >= 0 && pid[p->kill_node] > 0 &&
		    now - t0 >= (uint64_t)(p->kill_after * 1e9)) {
			fprintf(stderr, "zl-proto: --kill: killing node %d\n", p->kill_node);
			kill(pid[p->kill_node], SIGKILL);
			p->kill_node = -1;
		}
		if (now > dl) {
			fprintf(stderr, "zl-proto: the run did not end within %.0f s; stopping it\n", limit);
			rc = 1;
			break;
		}
		usleep(20000);
	}
	stop_all(pid, n);
	return rc;
}

int main(int argc, char **argv)
{
	struct params p;
	char err[256];
	if (zl_cli_version(argc, argv, "zl-proto", ZL_VERSION_NUM))
		return 0; /* (verbs only: it does not link the library) */
	int r = params_parse(&p, argc, argv, err, sizeof(err));
	if (r == 1) {
		params_usage(stdout);
		return 0;
	}
	if (r) {
		fprintf(stderr, "zl-proto: %s (zl-proto --help)\n", err);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	clock_init();
	if (p.local)
		return run_local(&p);
	r = run_node(&p, p.node, -1);
	return r == 77 ? 77 : r ? 1 : 0;
}
