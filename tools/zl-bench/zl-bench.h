/* SPDX-License-Identifier: MIT */
/* zl-bench: shared types and helpers of the benchmark tool. */
#ifndef ZLB_H
#define ZLB_H

#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "timer.h"
#include "zipline.h"
/* the library's spin primitives (zl_cpu_relax, zl_touch_line): the
 * baselines spin as zipline does */
#include "../../src/core/clock.h"

#define ZLB_MAX_SIZES 32
#define ZLB_NO_CPU (-1)

/* ---- results and output (report.c, stats.c) --------------------------- */

/* One measured size of one method. Times are RTT in microseconds. */
struct result {
	size_t size;
	uint64_t iters;
	double median_us, p99_us, p999_us, max_us;
	double rt_per_s; /* iters / elapsed wall time of the timed loop */
	int valid;
};

/* Where finished sizes go: the terminal, and optionally a CSV file. */
struct sink {
	FILE *csv;             /* NULL: no CSV */
	const char *transport; /* CSV "transport" column */
	const char *url;       /* CSV "url" column */
};

/* Sort ticks[0..n) and fill r (size and iters are set by the caller).
 * elapsed_ns is the wall time of the timed loop. */
void stats_compute(uint64_t *ticks, uint64_t n, uint64_t elapsed_ns, struct result *r);

/* Value at nearest rank p (0 < p <= 100) of sorted v[0..n). */
uint64_t stats_rank(const uint64_t *v, uint64_t n, double p);
/* The median of sorted v[0..n) as of grouped data: where the timer counts in
 * steps (this VM's TSC: 10 ns), the samples at the median's step are taken
 * as spread evenly over it. Finer than the step, for ratios of medians. */
double stats_median_grouped(const uint64_t *v, uint64_t n);

void report_columns(void);                 /* the column header line */
/* The timer and CPU placement lines (both: whether this process runs both
 * sides, see describe_pin). */
void report_setup(int cpu_a, int cpu_b, int both);
void report_row(const struct result *r);   /* one size */
void report_csv_row(const struct sink *s, const struct result *r);
struct load_snap;
/* sorts samples */
void report_result(uint64_t *samples, uint64_t n, uint64_t elapsed_ns,
		   const struct load_snap *l0, const struct load_snap *l1,
		   const struct sink *sink, struct result *r);
FILE *report_csv_open(const char *path, int truncate);
/* "6.90 M", "47.1 k": round trips per second for humans. */
void fmt_rate(char *buf, size_t cap, double per_s);
/* 3 significant digits, e.g. 0.112, 20.5, 3012 */
void fmt_us(char *buf, size_t cap, double us);

/* ---- co-tenant load (load.c) ------------------------------------------ */

struct load_snap {
	uint64_t busy;  /* user+nice+system jiffies of all CPUs */
	uint64_t steal; /* jiffies the hypervisor gave to someone else */
	uint64_t own;   /* utime+stime of our processes */
	uint64_t ns;    /* when */
};

/* Snapshot /proc/stat and the CPU time of pids (0 = this process). */
void load_snap(struct load_snap *s, const pid_t *pids, int npids);

/* Print a WARNING to stdout when, between a and b, other processes used
 * more than 10% of a CPU (or the hypervisor stole that much). Returns 1 if
 * a warning was printed. */
int load_check(const struct load_snap *a, const struct load_snap *b);

/* CPUs' worth of time other processes used during ms of our sleeping. */
double load_probe(int ms);

/* ---- processes and CPUs (sys.c) --------------------------------------- */

/* CPUs this process was allowed to use at startup (not after pinning). */
int cpu_count(void);
/* The first two CPUs we may run on (cpu0, cpu1 on a plain machine);
 * -1 if there is only one. */
int default_cpus(int *a, int *b);
/* Pin the calling process to cpu (ZLB_NO_CPU: leave alone). 0 or -errno. */
int pin_self(int cpu);
/* Describe the pinning for the header, e.g. "client cpu0, server cpu1". */
void describe_pin(char *buf, size_t cap, int client_cpu, int server_cpu, int forked);

/* Fork a child that runs fn(arg, wfd) and _exit()s with its return value;
 * wfd is the write end of a pipe whose read end is returned in *rfd. The
 * child dies with the parent (PR_SET_PDEATHSIG). Returns pid or -1. */
pid_t spawn_child(int (*fn)(void *arg, int wfd), void *arg, int *rfd);
/* Read one '\n'-terminated line within timeout_ms; 0, or -1 on EOF,
 * error or timeout. The newline is stripped. */
int read_line(int fd, char *buf, size_t cap, int timeout_ms);
int spin_until(_Atomic uint64_t *v, uint64_t want);
/* The same, loading the line at touch (if not NULL) on every spin. */
int spin_until_touch(_Atomic uint64_t *v, uint64_t want, const void *touch);
pid_t start_peer(int (*fn)(void *arg, int wfd), void *arg, int cpu, const char *who);
/* Wait up to timeout_ms for pid to exit, then SIGKILL it. Returns its
 * exit status (0..255), 128+signal, -2 if we had to kill it, or -1. */
int reap_child(pid_t pid, int timeout_ms);
/* SIGKILL and reap. */
void kill_child(pid_t pid);
/* Say how a child ended if that was not a clean exit 0. */
void explain_status(const char *who, int st);

/* zl_send_reserve, waiting (zl_wait_writable) up to timeout_us for room;
 * the clock is read only once room is short. */
int reserve_bounded(zl_channel *ch, size_t len, void **p, int64_t timeout_us);

/* ---- argument parsing helpers (main.c) --------------------------------- */

int parse_u64(const char *s, uint64_t *out);         /* with k/m/g suffix */
int parse_sizes(const char *s, size_t *v, int *n);   /* "8,64,4k" */
int parse_pin(const char *s, int *a, int *b);        /* "A,B" | "A" | "none" */

/* ---- subcommands ------------------------------------------------------ */

enum pp_mode { PP_BOTH, PP_SERVER, PP_CLIENT };
/* How the echo server waits (--loop): in zl_recv; poll(2) on zl_channel_fd
 * (arming by empty zl_recv(..., 0)); poll(2) after zl_channel_arm; in a
 * zl_poller. rawtcp: blocking read(2), or epoll for any other. */
enum pp_loop { LOOP_BLOCK, LOOP_POLL, LOOP_ARM, LOOP_POLLER };

struct pp_opts {
	const char *url;
	size_t sizes[ZLB_MAX_SIZES];
	int nsizes;
	uint64_t iters, warmup;
	int cpu_client, cpu_server;
	int zerocopy;
	int unread; /* zero-copy, and the echo server does not read the payload */
	int64_t timeout_us;
	enum pp_mode mode;
	enum pp_loop loop;
	int quiet_header; /* compare prints its own headers */
};

/* zipline ping-pong; res[i] for sizes[i]. 0, or 1 on failure (reported). */
int pingpong_run(const struct pp_opts *o, const struct sink *sink, struct result *res);

/* Same knobs, raw blocking TCP sockets on 127.0.0.1 (url is ignored). */
int rawtcp_run(const struct pp_opts *o, const struct sink *sink, struct result *res);

/* Cache-line ping-pong; fills one result with size 8. */
int floor_run(uint64_t iters, uint64_t warmup, int cpu_a, int cpu_b, int quiet_header,
	      const struct sink *sink, struct result *res);

/* Methods in interleaved blocks (blocks.c): the header once, then a run per size. */
void blocks_header(uint64_t iters, uint64_t nblocks, int cpu_a, int cpu_b);
int blocks_run(size_t size, uint64_t iters, uint64_t nblocks, int cpu_a, int cpu_b,
	       const struct sink *sink);

/* The copying floor (spsc.c): a bare fixed-slot ring at one size. */
int spsc_run(size_t size, uint64_t iters, uint64_t warmup, int cpu_a, int cpu_b,
	     const struct sink *sink, struct result *res);

struct compare_opts {
	size_t sizes[ZLB_MAX_SIZES];
	int nsizes;
	uint64_t shm_iters, sock_iters;
	int cpu_client, cpu_server;
	int64_t timeout_us;
	const char *csv, *png;
	int ucx;
};

int compare_run(const struct compare_opts *o);

struct nto1_opts {
	const char *url;
	size_t size;
	int clients[ZLB_MAX_SIZES];
	int nclients;
	uint64_t iters, warmup;
	int cpu_client, cpu_server;
	int64_t timeout_us;
	const char *csv;
};

/* N clients against one zl_server thread (nto1.c). 0 or 1. */
int nto1_run(const struct nto1_opts *o);

/* Idle cost of the mailbox scan (scan.c); impl_arg/n_arg NULL = defaults,
 * cpu ZLB_NO_CPU = not pinned. 0, 1 failure, 2 usage. */
int scan_run(const char *impl_arg, const char *n_arg, uint64_t samples, const char *csv,
	     int cpu);

/* gnuplot (plot.c). Methods are rows, one result per size. */
struct plot_series {
	const char *label;
	const struct result *res;
	int n;
	int flat; /* size-independent (floor): draw a horizontal line */
	int ref;  /* a reference (baseline, UCX), not zipline: dashed */
};
/* 0 ok, 1 gnuplot missing (note printed), -1 gnuplot failed */
int plot_png(const char *path, const struct plot_series *s, int ns, const size_t *sizes,
	     int nsizes);

#endif
