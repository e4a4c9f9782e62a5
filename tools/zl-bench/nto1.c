/* SPDX-License-Identifier: MIT */
/*
 * zl-bench nto1: one zl_server thread (a forked process on one CPU) and N
 * client threads (this process, on the other CPU), each making calls one
 * at a time. Prints total requests/s and the per-call round-trip
 * percentiles for each N, and first the 1:1 channel ping-pong at the same
 * size over the same transport, with the ratio of one client's calls/s to
 * it. With 2 CPUs, client threads beyond the first share one CPU: they
 * take turns (a waiting client spins spin_us, then sleeps).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zipline.h"
#include "zl-bench.h"

static zl_server *g_srv;

static void on_term(int sig)
{
	(void)sig;
	zl_server_stop(g_srv);
}

static int echo(zl_req *rq, void *arg)
{
	size_t len;
	const void *d = zl_req_data(rq, &len);
	void *p;
	if (zl_reply_reserve(rq, len, &p) == 0) {
		memcpy(p, d, len);
		return zl_reply_commit(rq, len);
	}
	return zl_reply(rq, d, len);
}

static int server_child(void *arg, int wfd)
{
	const struct nto1_opts *o = arg;
	char url[600];
	int rc = pin_self(o->cpu_server);
	if (!rc)
		rc = zl_server_create(NULL, &g_srv);
	if (!rc)
		rc = zl_server_listen(g_srv, o->url, NULL);
	if (!rc)
		rc = zl_server_handle(g_srv, 1, echo, NULL);
	if (!rc)
		rc = zl_server_url(g_srv, 0, url, sizeof(url));
	if (rc) {
		dprintf(wfd, "ERR server setup: %s\n", zl_strerror(rc));
		return 1;
	}
	signal(SIGTERM, on_term);
	dprintf(wfd, "OK %s\n", url);
	close(wfd);
	rc = zl_server_run(g_srv, o->timeout_us * 10);
	zl_server_close(g_srv);
	return rc ? 1 : 0;
}

struct worker {
	const struct nto1_opts *o;
	const char *url;
	pthread_t th;
	_Atomic int *go;
	uint64_t n;
	uint64_t *samples;
	int err;
	const char *what;
};

static void *worker(void *arg)
{
	struct worker *w = arg;
	zl_client *c;
	uint8_t *req = calloc(1, w->o->size + 1);
	w->what = "zl_client_connect";
	w->err = req ? zl_client_connect(w->url, NULL, w->o->timeout_us, &c) : -ENOMEM;
	if (w->err)
		return NULL;
	const void *rep;
	size_t len;
	w->what = "zl_call";
	for (uint64_t i = 0; i < w->o->warmup && !w->err; i++)
		w->err = zl_call(c, 1, req, w->o->size, &rep, &len, w->o->timeout_us);
	atomic_fetch_add(w->go, 1);
	while (atomic_load(w->go) > 0) /* the others are warming up */
		;
	uint64_t prev = timer_now();
	for (uint64_t i = 0; i < w->n && !w->err; i++) {
		memcpy(req, &i, w->o->size < 8 ? w->o->size : 8);
		w->err = zl_call(c, 1, req, w->o->size, &rep, &len, w->o->timeout_us);
		if (!w->err && (len != w->o->size || memcmp(rep, req, len)))
			w->err = -EBADMSG;
		uint64_t now = timer_now();
		w->samples[i] = now - prev;
		prev = now;
	}
	zl_client_close(c);
	free(req);
	return NULL;
}

/* n clients, iters calls in all. */
static int run_clients(const struct nto1_opts *o, const char *url, int n, pid_t server,
		       FILE *csv, struct result *r)
{
	struct worker *w = calloc((size_t)n, sizeof(*w));
	uint64_t *all = calloc(o->iters, sizeof(*all));
	_Atomic int go = 0;
	int rc = 1;
	if (!w || !all)
		goto out;
	uint64_t per = o->iters / (uint64_t)n, off = 0;
	for (int i = 0; i < n; i++) {
		w[i] = (struct worker){ .o = o, .url = url, .go = &go, .samples = all + off,
					.n = per };
		off += per;
		if (pthread_create(&w[i].th, NULL, worker, &w[i]))
			goto out;
	}
	while (atomic_load(&go) < n) { /* all connected and warm */
		int failed = 0;
		for (int i = 0; i < n; i++)
			failed |= w[i].err != 0;
		if (failed)
			break;
		usleep(100);
	}
	struct load_snap l0, l1;
	pid_t pids[2] = { 0, server };
	load_snap(&l0, pids, 2);
	uint64_t t0 = mono_ns();
	atomic_store(&go, -1);
	for (int i = 0; i < n; i++)
		pthread_join(w[i].th, NULL);
	uint64_t t1 = mono_ns();
	load_snap(&l1, pids, 2);
	for (int i = 0; i < n; i++)
		if (w[i].err) {
			fprintf(stderr, "zl-bench: client %d: %s: %s\n", i, w[i].what,
				zl_strerror(w[i].err));
			goto out;
		}
	stats_compute(all, off, t1 - t0, r);
	r->size = o->size;
	r->iters = off;
	struct result row = *r;
	row.size = (size_t)n; /* the first column counts clients here */
	report_row(&row);
	load_check(&l0, &l1);
	if (csv)
		fprintf(csv, "nto1,%s,%d,%zu,%llu,%.4f,%.4f,%.4f,%.4f,%.1f,%s\n", o->url, n, o->size,
			(unsigned long long)off, r->median_us, r->p99_us, r->p999_us, r->max_us,
			r->rt_per_s, timer_name());
	rc = 0;
out:
	free(all);
	free(w);
	return rc;
}

int nto1_run(const struct nto1_opts *o)
{
	char line[800];
	struct result ref = { 0 }, one = { 0 };
	FILE *csv = o->csv ? report_csv_open(o->csv, 0) : NULL;
	if (o->csv && !csv)
		return 1;
	printf("zl-bench nto1: %s, %zu B requests, %llu calls per client count after %llu "
	       "warm-up each\n", o->url, o->size, (unsigned long long)o->iters,
	       (unsigned long long)o->warmup);
	timer_describe(line, sizeof(line));
	printf("%s\n", line);
	describe_pin(line, sizeof(line), o->cpu_client, o->cpu_server, 1);
	printf("%s; every client thread on the client CPU\n\n", line);

	printf("reference: 1:1 channel ping-pong, same transport and size (RTT)\n");
	report_columns();
	struct pp_opts pp = { .url = o->url, .nsizes = 1, .sizes = { o->size }, .iters = o->iters,
			      .warmup = o->warmup, .cpu_client = o->cpu_client,
			      .cpu_server = o->cpu_server, .timeout_us = o->timeout_us,
			      .mode = PP_BOTH, .quiet_header = 1 };
	struct sink sink = { csv, "nto1-reference", o->url };
	if (pingpong_run(&pp, &sink, &ref))
		return 1;

	int rfd;
	pid_t pid = spawn_child(server_child, (void *)o, &rfd);
	if (pid < 0)
		return 1;
	if (read_line(rfd, line, sizeof(line), (int)(o->timeout_us / 1000)) < 0 ||
	    strncmp(line, "OK ", 3)) {
		fprintf(stderr, "zl-bench: zl_server did not start: %s\n",
			strncmp(line, "ERR ", 4) ? "no answer" : line + 4);
		close(rfd);
		kill_child(pid);
		return 1;
	}
	close(rfd);
	char url[800];
	snprintf(url, sizeof(url), "%s", line + 3);
	if (pin_self(o->cpu_client)) {
		kill_child(pid);
		return 1;
	}
	printf("\nzl_server, one serving thread; per call RTT (one request in flight per "
	       "client)\n%8s %11s %9s %9s %9s %5s %14s\n", "clients", "RTT median", "p99",
	       "p99.9", "max", "(us)", "requests/s");
	int rc = 0;
	for (int i = 0; i < o->nclients && !rc; i++) {
		struct result r;
		rc = run_clients(o, url, o->clients[i], pid, csv, &r);
		if (!rc && o->clients[i] == 1)
			one = r;
	}
	kill(pid, SIGTERM);
	int st = reap_child(pid, 5000);
	if (st)
		explain_status("zl_server", st);
	if (!rc && one.rt_per_s > 0 && ref.rt_per_s > 0)
		printf("\none client through zl_server: %.0f%% of the 1:1 channel's round trips/s\n",
		       100.0 * one.rt_per_s / ref.rt_per_s);
	if (csv)
		fclose(csv);
	return rc || st ? 1 : 0;
}
