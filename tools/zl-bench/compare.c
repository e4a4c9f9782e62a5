/* SPDX-License-Identifier: MIT */
/*
 * zl-bench compare: every transport, one after the other, at the same
 * sizes, against the hardware floor and a raw TCP baseline. This is the
 * README's demo, so the output explains itself.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zipline.h"
#include "zl-bench.h"

#define MAX_METHODS 12

enum kind { K_FLOOR, K_SPSC, K_ZL, K_RAW, K_UCX };

struct method {
	char label[64];
	char transport[16];
	char url[160];
	enum kind kind;
	uint64_t iters;
	struct result res[ZLB_MAX_SIZES];
	int ok;
	int flat; /* size-independent (floor) */
};

static struct method methods[MAX_METHODS];
static int nmethods;

static struct method *add(enum kind k, const char *label, const char *transport,
			  const char *url, uint64_t iters)
{
	if (nmethods == MAX_METHODS)
		return NULL;
	struct method *m = &methods[nmethods++];
	memset(m, 0, sizeof(*m));
	m->kind = k;
	m->iters = iters;
	snprintf(m->label, sizeof(m->label), "%s", label);
	snprintf(m->transport, sizeof(m->transport), "%s", transport);
	snprintf(m->url, sizeof(m->url), "%s", url);
	return m;
}

static const struct method *find(const char *label)
{
	for (int i = 0; i < nmethods; i++)
		if (!strcmp(methods[i].label, label) && methods[i].ok)
			return &methods[i];
	return NULL;
}

/* Index of the size closest to want (sizes as measured). */
static int size_index(const struct compare_opts *o, size_t want)
{
	int best = 0;
	for (int i = 1; i < o->nsizes; i++) {
		size_t d = o->sizes[i] > want ? o->sizes[i] - want : want - o->sizes[i];
		size_t db = o->sizes[best] > want ? o->sizes[best] - want : want - o->sizes[best];
		if (d < db)
			best = i;
	}
	return best;
}

static const struct result *res_at(const struct method *m, int i)
{
	if (!m)
		return NULL;
	const struct result *r = &m->res[m->flat ? 0 : i];
	return r->valid ? r : NULL;
}

/* ---- UCX, through bench/compare-ucx.sh -------------------------------- */

/* The script lives next to the sources (bench/) or is installed in
 * share/zipline; ZL_BENCH_UCX_SCRIPT overrides both. */
static int find_ucx_script(char *out, size_t cap)
{
	const char *env = getenv("ZL_BENCH_UCX_SCRIPT");
	if (env) {
		snprintf(out, cap, "%s", env);
		return access(out, X_OK) ? -1 : 0;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = 0;
		char *slash = strrchr(exe, '/');
		if (slash)
			*slash = 0;
		/* build tree: <build>/tools/zl-bench; install: <prefix>/bin */
		const char *rel[] = {"/../../bench/compare-ucx.sh", "/../bench/compare-ucx.sh",
				     "/../share/zipline/compare-ucx.sh"};
		for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
			snprintf(out, cap, "%s%s", exe, rel[i]);
			if (!access(out, X_OK))
				return 0;
		}
	}
	snprintf(out, cap, "bench/compare-ucx.sh");
	return access(out, X_OK) ? -1 : 0;
}

/* Split one CSV line in place; empty fields stay empty. */
static int split_csv(char *line, char **f, int max)
{
	int n = 0;
	f[n++] = line;
	for (char *p = line; *p && n < max; p++)
		if (*p == ',') {
			*p = 0;
			f[n++] = p + 1;
		}
	return n;
}

static void run_ucx(const struct compare_opts *o, FILE *csv)
{
	char script[PATH_MAX], cmd[PATH_MAX + 256], sizes[256] = "";
	if (find_ucx_script(script, sizeof(script))) {
		printf("note: --ucx: bench/compare-ucx.sh not found (set ZL_BENCH_UCX_SCRIPT); "
		       "skipping UCX\n");
		return;
	}
	for (int i = 0; i < o->nsizes; i++)
		snprintf(sizes + strlen(sizes), sizeof(sizes) - strlen(sizes), "%s%zu",
			 i ? "," : "", o->sizes[i]);
	char pin[64] = "none";
	if (o->cpu_client != ZLB_NO_CPU && o->cpu_server != ZLB_NO_CPU)
		snprintf(pin, sizeof(pin), "%d,%d", o->cpu_client, o->cpu_server);
	snprintf(cmd, sizeof(cmd), "'%s' --sizes %s --iters %llu --sock-iters %llu --pin %s", script,
		 sizes, (unsigned long long)o->shm_iters, (unsigned long long)o->sock_iters, pin);
	printf("\n[UCX] %s\n", cmd);
	printf("      ucx_perftest reports ONE-WAY latency; the rows below are doubled to RTT, "
	       "and its percentiles are over its last 2048 iterations\n");
	fflush(stdout);
	FILE *p = popen(cmd, "r");
	if (!p) {
		printf("note: cannot run %s: %s\n", script, strerror(errno));
		return;
	}
	char line[512];
	while (fgets(line, sizeof(line), p)) {
		char raw[512], *f[12];
		line[strcspn(line, "\r\n")] = 0;
		snprintf(raw, sizeof(raw), "%s", line);
		if (strncmp(line, "ucx", 3) || split_csv(line, f, 12) < 10)
			continue;
		/* transport,url,size,iters,median,p99,p999,max,rt_per_s,timer */
		char label[64];
		snprintf(label, sizeof(label), "UCX %s", f[1]);
		struct method *m = NULL;
		for (int i = 0; i < nmethods; i++)
			if (!strcmp(methods[i].label, label))
				m = &methods[i];
		if (!m && !(m = add(K_UCX, label, f[0], f[1], strtoull(f[3], NULL, 10))))
			continue;
		size_t size = strtoull(f[2], NULL, 10);
		for (int i = 0; i < o->nsizes; i++)
			if (o->sizes[i] == size) {
				struct result *r = &m->res[i];
				r->size = size;
				r->iters = strtoull(f[3], NULL, 10);
				r->median_us = atof(f[4]);
				r->p99_us = atof(f[5]);
				r->p999_us = *f[6] ? atof(f[6]) : NAN;
				r->max_us = *f[7] ? atof(f[7]) : NAN;
				r->rt_per_s = atof(f[8]);
				r->valid = r->median_us > 0;
				m->ok |= r->valid;
				char med[32], p99[32];
				fmt_us(med, sizeof(med), r->median_us);
				fmt_us(p99, sizeof(p99), r->p99_us);
				printf("%-34s %6zu B  RTT median %s us, p99 %s us\n", label, size, med,
				       p99);
			}
		if (csv)
			fprintf(csv, "%s\n", raw);
	}
	int st = pclose(p);
	if (st)
		printf("note: %s exited with status %d; UCX rows may be missing\n", script,
		       WEXITSTATUS(st));
}

/* ---- summary ---------------------------------------------------------- */

static void cell(char *buf, size_t cap, const struct result *r)
{
	char m[20], p[20];
	if (!r) {
		snprintf(buf, cap, "-");
		return;
	}
	fmt_us(m, sizeof(m), r->median_us);
	fmt_us(p, sizeof(p), r->p99_us);
	snprintf(buf, cap, "%s / %s", m, p);
}

static void print_table(const struct compare_opts *o)
{
	char buf[64];
	printf("\nSummary: RTT (round trip) in microseconds, median / p99 -- lower is better\n\n");
	printf("%-36s", "method");
	for (int i = 0; i < o->nsizes; i++) {
		snprintf(buf, sizeof(buf), "%zu B", o->sizes[i]);
		printf(" %16s", buf);
	}
	printf("\n");
	for (int k = 0; k < nmethods; k++) {
		const struct method *m = &methods[k];
		printf("%-36s", m->label);
		if (!m->ok) {
			printf(" %16s\n", m->kind == K_FLOOR && cpu_count() < 2 ? "skipped (1 CPU)"
									 : "FAILED (see above)");
			continue;
		}
		for (int i = 0; i < o->nsizes; i++) {
			if (m->flat && i > 0) {
				printf("  (8-byte counter; the same at every size)");
				break;
			}
			cell(buf, sizeof(buf), res_at(m, i));
			printf(" %16s", buf);
		}
		printf("\n");
	}
	for (int k = 0; k < nmethods; k++)
		if (methods[k].kind == K_UCX) {
			printf("(UCX rows: ucx_perftest's one-way latency x 2; its percentiles cover "
			       "only its last 2048 iterations)\n");
			break;
		}
}

/* "a / b" of medians at size index i, or 0 if either is missing. */
static double ratio(const struct method *a, const struct method *b, int i)
{
	const struct result *ra = res_at(a, i), *rb = res_at(b, i);
	return ra && rb && rb->median_us > 0 ? ra->median_us / rb->median_us : 0;
}

static void fmt_ratio(char *buf, size_t cap, double r)
{
	snprintf(buf, cap, r >= 10 ? "%.0fx" : "%.2fx", r);
}

/* A heading that says what the ratio means, then one value per size. */
static void ratio_row(const struct compare_opts *o, const char *what, const struct method *a,
		      const struct method *b)
{
	char v[32];
	int any = 0;
	for (int i = 0; i < o->nsizes; i++)
		any |= ratio(a, b, i) > 0;
	if (!any)
		return;
	printf("  %s\n     ", what);
	for (int i = 0; i < o->nsizes; i++) {
		if (ratio(a, b, i))
			fmt_ratio(v, sizeof(v), ratio(a, b, i));
		else
			snprintf(v, sizeof(v), "-");
		printf(i + 1 < o->nsizes ? "  %zu B: %-7s" : "  %zu B: %s", o->sizes[i], v);
	}
	printf("\n");
}

static void print_ratios(const struct compare_opts *o)
{
	char v[32];
	const struct method *fl = find("floor: cache-line ping-pong");
	const struct method *shm = find("zipline shm");
	const struct method *tcp = find("zipline tcp");
	const struct method *bp = find("zipline tcp, busy-poll");
	const struct method *raw = find("raw tcp (baseline)");
	int i64 = size_index(o, 64), i4k = size_index(o, 4096);

	printf("\nWhat the numbers say (ratios of medians):\n");
	if (ratio(shm, fl, i64)) {
		fmt_ratio(v, sizeof(v), ratio(shm, fl, i64));
		printf("  How close zipline shm gets to the hardware (shm / floor at %zu B): %s\n",
		       o->sizes[i64], v);
	}
	ratio_row(o, "What the library costs over a bare copying ring (zipline shm / copying ring):",
		  shm, find("copying ring, no library"));
	const struct result *r = res_at(shm, i4k);
	if (r) {
		char m[20], p[20];
		fmt_us(m, sizeof(m), r->median_us);
		fmt_us(p, sizeof(p), r->p99_us);
		printf("  zipline shm at %zu B: %s us median RTT (p99 %s us)\n", o->sizes[i4k], m, p);
	}
	ratio_row(o, "zipline tcp vs plain blocking TCP (zipline tcp / raw tcp; 1.00 = same, "
		     "below 1 when\n  zipline's short default spin catches the reply before "
		     "it would sleep):", tcp, raw);
	ratio_row(o, "Busy-polling the socket (tcp busy-poll / raw tcp; below 1 = the saved "
		     "wake-up):", bp, raw);
	ratio_row(o, "What shared memory buys over a socket (raw tcp / zipline shm):", raw, shm);
	if (!fl || !shm || !tcp || !bp || !raw)
		printf("  (ratios involving a failed method are left out)\n");
}

/* ---- driver ----------------------------------------------------------- */

int compare_run(const struct compare_opts *o)
{
	char url[160];
	int pid = (int)getpid(), failed = 0;
	FILE *csv = report_csv_open(o->csv, 1);
	nmethods = 0;

	add(K_FLOOR, "floor: cache-line ping-pong", "floor", "cacheline", o->shm_iters)->flat = 1;
	add(K_SPSC, "copying ring, no library", "spsc", "scratch", o->shm_iters);
	snprintf(url, sizeof(url), "shm://zlbench-%d", pid);
	add(K_ZL, "zipline shm", "shm", url, o->shm_iters);
	snprintf(url, sizeof(url), "unix:///tmp/zlbench-%d.sock", pid);
	add(K_ZL, "zipline unix", "unix", url, o->sock_iters);
	add(K_ZL, "zipline tcp", "tcp", "tcp://127.0.0.1:0", o->sock_iters);
	add(K_ZL, "zipline tcp, busy-poll", "tcp", "tcp://127.0.0.1:0?busy_poll=1&spin_us=-1",
	    o->sock_iters);
	add(K_RAW, "raw tcp (baseline)", "raw-tcp", "tcp://127.0.0.1:0 (plain socket)",
	    o->sock_iters);

	printf("zl-bench compare: ping-pong round-trip time (RTT) of zipline's transports, the\n"
	       "hardware floor and a plain TCP baseline, one after the other on this machine.\n"
	       "A round trip = the client sends one message of SIZE bytes and the echo server\n"
	       "sends it back; one message in flight; every echo is checked. Lower is better.\n\n");
	int v = zl_version();
	printf("zipline %d.%d.%d; sizes:", v / 10000, v / 100 % 100, v % 100);
	for (int i = 0; i < o->nsizes; i++)
		printf(" %zu", o->sizes[i]);
	printf(" B; %llu round trips per size for floor/shm, %llu for sockets, after 10%% "
	       "warm-up\n",
	       (unsigned long long)o->shm_iters, (unsigned long long)o->sock_iters);
	report_setup(o->cpu_client, o->cpu_server, 1);
	printf("a WARNING after a row means other processes used > 10%% of a CPU meanwhile\n");
	double busy = load_probe(300);
	if (busy > 0.10)
		printf("\nNOTE: before starting, other processes kept ~%.0f%% of a CPU busy. Two "
		       "spinning peers need\nan idle machine: expect noisy results, and rerun "
		       "when it is quiet.\n",
		       100.0 * busy);

	int nbuiltin = nmethods;
	for (int k = 0; k < nbuiltin; k++) {
		struct method *m = &methods[k];
		struct sink sink = {csv, m->transport, m->url};
		uint64_t warm = m->iters / 10;
		printf("\n[%d/%d] %s", k + 1, nbuiltin, m->label);
		if (m->kind == K_ZL)
			printf("   %s", m->url);
		else if (m->kind == K_FLOOR)
			printf("   (the hardware limit: one 8-byte store bouncing between two cores)");
		else if (m->kind == K_RAW)
			printf("   (blocking read/write, TCP_NODELAY, no zipline)");
		else if (m->kind == K_SPSC)
			printf("   (the least a copying shm ring can cost: fixed slots, a footer, "
			       "memcpy in and out)");
		printf("\n");
		if ((m->kind == K_FLOOR || m->kind == K_SPSC) && cpu_count() < 2) {
			printf("skipped: needs two CPUs\n");
			continue;
		}
		report_columns();
		fflush(stdout);
		int rc;
		if (m->kind == K_FLOOR) {
			rc = floor_run(m->iters, warm, o->cpu_client, o->cpu_server, 1, &sink,
				       &m->res[0]);
		} else if (m->kind == K_SPSC) {
			rc = 0;
			for (int i = 0; i < o->nsizes && !rc; i++)
				rc = spsc_run(o->sizes[i], m->iters, warm, o->cpu_client,
					      o->cpu_server, &sink, &m->res[i]);
		} else {
			struct pp_opts p = {
				.url = m->url,
				.nsizes = o->nsizes,
				.iters = m->iters,
				.warmup = warm,
				.cpu_client = o->cpu_client,
				.cpu_server = o->cpu_server,
				.timeout_us = o->timeout_us,
				.mode = PP_BOTH,
				.quiet_header = 1,
			};
			memcpy(p.sizes, o->sizes, sizeof(p.sizes));
			rc = m->kind == K_ZL ? pingpong_run(&p, &sink, m->res)
					     : rawtcp_run(&p, &sink, m->res);
			if (!strncmp(m->url, "unix://", 7))
				unlink(m->url + 7); /* in case the library left it */
		}
		m->ok = rc == 0;
		if (rc) {
			printf("%s: FAILED (the reason is printed above)\n", m->label);
			failed++;
		}
	}
	if (o->ucx)
		run_ucx(o, csv);

	/* The floor again: on a shared VM the whole machine can switch into a
	 * slower mode for minutes (vCPU placement on the host), which no
	 * in-guest load check sees. A changed floor exposes it. */
	struct result again = {0};
	if (methods[0].ok) {
		printf("\n[re-check] floor again, to see whether the machine changed speed during "
		       "the run\n");
		report_columns();
		floor_run(o->shm_iters, o->shm_iters / 10, o->cpu_client, o->cpu_server, 1, NULL,
			  &again);
	}

	print_table(o);
	print_ratios(o);
	if (again.valid && methods[0].res[0].valid) {
		double a = methods[0].res[0].median_us, b = again.median_us;
		char x[20], y[20];
		fmt_us(x, sizeof(x), a);
		fmt_us(y, sizeof(y), b);
		if (a > 1.5 * b || b > 1.5 * a)
			printf("\nNOTE: the floor moved from %s us at the start to %s us at the end: "
			       "the machine changed\nspeed during the run (host scheduling), so rows "
			       "measured at different times\ncompare poorly. Rerun for a consistent "
			       "picture.\n",
			       x, y);
		else
			printf("\nfloor at the start %s us, at the end %s us: the machine kept a steady "
			       "speed\n",
			       x, y);
	}

	if (csv) {
		fclose(csv);
		printf("\nCSV: %s\n", o->csv);
	}
	struct plot_series s[MAX_METHODS];
	int ns = 0;
	for (int k = 0; k < nmethods; k++)
		if (methods[k].ok)
			s[ns++] = (struct plot_series){methods[k].label, methods[k].res,
						       methods[k].flat ? 1 : o->nsizes,
						       methods[k].flat,
						       methods[k].kind == K_RAW || methods[k].kind == K_SPSC ||
							       methods[k].kind == K_UCX};
	if (o->png && ns) {
		int prc = plot_png(o->png, s, ns, o->sizes, o->nsizes);
		if (prc == 0)
			printf("PNG: %s\n", o->png);
		else if (prc < 0)
			printf("note: gnuplot failed; no PNG\n");
	}
	if (failed)
		printf("\n%d method(s) FAILED; exit status 1\n", failed);
	return failed ? 1 : 0;
}
