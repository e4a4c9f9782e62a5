/* SPDX-License-Identifier: MIT */
/* zl-bench: command line and dispatch. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "zipline.h"
#include "cli.h"
#include "zl-bench.h"
#include "stream.h"

static const char usage_text[] =
	"usage: zl-bench <command> [options]\n"
	"\n"
	"Latency and streaming benchmarks for zipline. Every time printed is a round-trip\n"
	"time (RTT): the client sends one message, an echo server sends it back;\n"
	"stream and stream-compare measure one-way messages/s and GB/s instead.\n"
	"\n"
	"commands:\n"
	"  compare  [--size 8,64,512,4096] [--iters N] [--shm-iters N] [--sock-iters N]\n"
	"           [--csv FILE] [--png FILE] [--ucx]\n"
	"      the floor, shm://, unix://, tcp://, tcp:// with busy-poll and a raw TCP\n"
	"      baseline at each size; prints a table and ratios, writes CSV (default\n"
	"      zl-bench-compare.csv, replaced) and a gnuplot PNG (zl-bench-compare.png).\n"
	"      Default: 200000 round trips for floor/shm, 20000 for sockets; --iters sets\n"
	"      both. --ucx adds ucx_perftest rows via bench/compare-ucx.sh.\n"
	"  pingpong --url URL [--size S[,S...]] [--iters N] [--warmup W] [--csv FILE]\n"
	"           [--zerocopy | --unread] [--server | --client]\n"
	"           [--loop block|poll|arm|poller]\n"
	"      one zipline URL. Forks its own echo server unless --server or --client\n"
	"      is given (one side each, e.g. on two hosts). --zerocopy uses\n"
	"      zl_send_reserve/commit and zl_recv_peek/release on both sides.\n"
	"      --unread: zero-copy, and the echo server answers from its own buffer\n"
	"      with only the bytes the client checks carried over, so the payload\n"
	"      is not read (as ucx_perftest -t ucp_am_lat); give it to both sides.\n"
	"      --loop: how the echo server waits: in zl_recv (block, the default),\n"
	"      poll(2) on zl_channel_fd with empty zl_recv(..., 0) arming (poll),\n"
	"      poll(2) after zl_channel_arm (arm), or in a zl_poller (poller); the\n"
	"      server then prints its system calls, arms and sleeps per round trip.\n"
	"      Default sizes 8,64,512,4096; iters 200000 for shm://, else 20000.\n"
	"  floor    [--iters N] [--warmup W] [--csv FILE]\n"
	"      the hardware limit: one 8-byte atomic in its own cache line bounced\n"
	"      between two processes on two CPUs (default 200000 round trips).\n"
	"  spsc     [--size S[,S...]] [--iters N] [--warmup W] [--csv FILE]\n"
	"      the copying floor: the simplest correct shared-memory ring, no zipline\n"
	"      (fixed slots, a sequence footer, memcpy in and out; default 200000).\n"
	"      --stream [--bytes B] [--runs R]: one-way, as zl-bench stream (the\n"
	"      streaming floor; a 1 MiB ring of fixed slots, every message checked).\n"
	"  blocks   [--size S[,S...]] [--iters N] [--blocks B] [--csv FILE]\n"
	"      floor, spsc, shm:// and shm:// zero-copy in ONE run, in interleaved\n"
	"      blocks whose order rotates, so that a machine changing speed (a\n"
	"      shared VM) changes it for all alike; per method the RTT statistics\n"
	"      and its ratio to the floor with a 95% confidence interval. Default\n"
	"      size 64, 200000 round trips per method in 400 block rounds.\n"
	"  rawtcp   [--size S[,S...]] [--iters N] [--warmup W] [--csv FILE]\n"
	"           [--loop block|epoll]\n"
	"      TCP ping-pong on 127.0.0.1 without zipline (the baseline); the echo\n"
	"      server blocks in read(2), or with --loop epoll reads until EAGAIN and\n"
	"      waits in epoll_wait (the usual event loop).\n"
	"  nto1     --url URL [--clients 1,2,4,8] [--size S] [--iters N] [--warmup W]\n"
	"           [--csv FILE]\n"
	"      N:1: one zl_server thread (forked, on CPU B) and N client threads (on\n"
	"      CPU A), one call in flight each; total requests/s and per-call RTT for\n"
	"      each N, after the 1:1 channel ping-pong at the same size as reference.\n"
	"      Default size 64, iters 200000 for shm://, else 20000.\n"
	"  stream   --url URL [--size S[,S...]] [--iters N] [--bytes B] [--runs R]\n"
	"           [--window W] [--batch B | --zerocopy] [--csv FILE]\n"
	"           [--server | --client]\n"
	"      one-way streaming: the client sends messages of each size, a receiver\n"
	"      (forked, on CPU B; or --server, e.g. on another host) checks every one\n"
	"      (length, sequence number, a word per 64-byte line derived from it) and\n"
	"      counts back; any dropped, duplicated, reordered or torn message fails\n"
	"      the run (exit 1). Per size min(N, B / size) messages (at least 64;\n"
	"      default N 1000000 for shm://, else 200000, B 256m), R runs (default 3):\n"
	"      messages/s and GB/s, median [min-max] of the runs. --window W: at most\n"
	"      W messages in flight (the receiver counts back every W/2; default: as\n"
	"      many as the ring or socket holds). --batch B: B messages per zl_sendv.\n"
	"      --zerocopy: the sender writes each message into the ring\n"
	"      (zl_send_reserve/commit), the receiver checks it there (zl_recv_peek);\n"
	"      both sides need it. Default sizes 8,64,512,4k,64k,1m.\n"
	"  stream-compare [--size ...] [--iters N] [--bytes B] [--runs R] [--window W]\n"
	"           [--batch B] [--csv FILE] [--png FILE]\n"
	"      stream over shm://, unix:// and tcp://, the same framed messages over\n"
	"      raw Unix and TCP sockets (writev), the bare copying ring (spsc, the\n"
	"      floor) and ucx_perftest -t ucp_am_bw / ucp_put_bw on shared memory\n"
	"      (a skip line if it is not installed), runs interleaved; with --batch\n"
	"      B > 1 the zipline and raw methods also run batched. Ratios, CSV\n"
	"      (default zl-bench-stream.csv, replaced) and a PNG (zl-bench-stream.png).\n"
	"  scan     [--impl scalar,sse2,avx2] [--n 16,64,256,1024,4096] [--iters N]\n"
	"           [--csv FILE] [--pin A] [--timer ...]\n"
	"      not a round trip: ns per zl_scan() over N mailbox flags, none set (the\n"
	"      N:1 server's idle poll), median and p99 of N samples (default 20000),\n"
	"      and the SIMD speedups over scalar.\n"
	"\n"
	"common options:\n"
	"  --pin A,B | A | none  client on CPU A, echo server on CPU B (default: the\n"
	"                        first two allowed CPUs, i.e. 0,1; one-sided runs pin\n"
	"                        only when --pin is given)\n"
	"  --timer auto|tsc|clock  per-round-trip clock; auto = rdtscp when the TSC is\n"
	"                        invariant, else clock_gettime(CLOCK_MONOTONIC_RAW)\n"
	"  --timeout SEC         bound on every wait (default 10)\n"
	"  --warmup W            warm-up round trips per size (default iters/10)\n"
	"  --csv FILE            append rows: transport,url,size,iters,median_us,p99_us,\n"
	"                        p999_us,max_us,rt_per_s,timer\n"
	"\n"
	"URLs: shm://NAME, tcp://HOST:PORT (port 0 = any free port), unix:///path;\n"
	"options as a query, e.g. tcp://127.0.0.1:0?busy_poll=1&spin_us=-1\n"
	"Sizes take k/m suffixes (4k = 4096).\n"
	"\n"
	"examples:\n"
	"  zl-bench compare\n"
	"  zl-bench pingpong --url shm://demo --size 64,4k --iters 1000000\n"
	"  hostB$ zl-bench pingpong --server --url tcp://0.0.0.0:7000 --timeout 120\n"
	"  hostA$ zl-bench pingpong --client --url tcp://hostB:7000 --size 64\n"
	"\n"
	"exit status: 0 success, 1 a benchmark or transport failed, 2 usage\n";

/* A usage error: one line naming it, and where the help is (exit 2);
 * with no message, the usage on stderr (no command given). */
__attribute__((format(printf, 1, 2))) static int usage(const char *fmt, ...)
{
	va_list ap;
	if (!fmt) {
		fputs(usage_text, stderr);
		return 2;
	}
	fprintf(stderr, "zl-bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (zl-bench --help)\n");
	return 2;
}

/* --help: the usage on stdout, exit 0 */
static int help(void)
{
	fputs(usage_text, stdout);
	return 0;
}

/* ---- value parsers ---------------------------------------------------- */

int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	if (!s || !*s || *s == '-')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	unsigned long long mul = 1;
	switch (*end) {
	case 'k': case 'K': mul = 1ull << 10; end++; break;
	case 'm': case 'M': mul = 1ull << 20; end++; break;
	case 'g': case 'G': mul = 1ull << 30; end++; break;
	}
	if (*end || (mul > 1 && v > UINT64_MAX / mul))
		return -1;
	*out = v * mul;
	return 0;
}

int parse_sizes(const char *s, size_t *v, int *n)
{
	char buf[512], *save = NULL;
	if (strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	*n = 0;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		uint64_t x;
		if (*n == ZLB_MAX_SIZES || parse_u64(t, &x) || x > (1ull << 30))
			return -1;
		v[(*n)++] = (size_t)x;
	}
	return *n ? 0 : -1;
}

int parse_pin(const char *s, int *a, int *b)
{
	if (!strcmp(s, "none")) {
		*a = *b = ZLB_NO_CPU;
		return 0;
	}
	char *end;
	long x = strtol(s, &end, 10), y = x;
	if (end == s || x < 0 || x > 4095)
		return -1;
	if (*end == ',') {
		const char *s2 = end + 1;
		y = strtol(s2, &end, 10);
		if (end == s2 || y < 0 || y > 4095)
			return -1;
	}
	if (*end)
		return -1;
	*a = (int)x;
	*b = (int)y;
	return 0;
}

/* ---- options ---------------------------------------------------------- */

enum {
	O_URL = 1000, O_SIZE, O_ITERS, O_WARMUP, O_PIN, O_CSV, O_ZC, O_UNREAD, O_SERVER, O_CLIENT,
	O_SIZES, O_PNG, O_UCX, O_TIMER, O_TIMEOUT, O_SHM_ITERS, O_SOCK_ITERS, O_HELP,
	O_IMPL, O_N, O_CLIENTS, O_BLOCKS, O_LOOP, O_RUNS, O_WINDOW, O_BATCH, O_BYTES, O_STREAM,
};

static const struct option longopts[] = {
	{"url", required_argument, 0, O_URL},
	{"size", required_argument, 0, O_SIZE},
	{"sizes", required_argument, 0, O_SIZES},
	{"iters", required_argument, 0, O_ITERS},
	{"shm-iters", required_argument, 0, O_SHM_ITERS},
	{"sock-iters", required_argument, 0, O_SOCK_ITERS},
	{"warmup", required_argument, 0, O_WARMUP},
	{"pin", required_argument, 0, O_PIN},
	{"csv", required_argument, 0, O_CSV},
	{"png", required_argument, 0, O_PNG},
	{"zerocopy", no_argument, 0, O_ZC},
	{"unread", no_argument, 0, O_UNREAD},
	{"server", no_argument, 0, O_SERVER},
	{"client", no_argument, 0, O_CLIENT},
	{"ucx", no_argument, 0, O_UCX},
	{"timer", required_argument, 0, O_TIMER},
	{"timeout", required_argument, 0, O_TIMEOUT},
	{"help", no_argument, 0, O_HELP},
	{"impl", required_argument, 0, O_IMPL},
	{"n", required_argument, 0, O_N},
	{"clients", required_argument, 0, O_CLIENTS},
	{"blocks", required_argument, 0, O_BLOCKS},
	{"loop", required_argument, 0, O_LOOP},
	{"runs", required_argument, 0, O_RUNS},
	{"window", required_argument, 0, O_WINDOW},
	{"batch", required_argument, 0, O_BATCH},
	{"bytes", required_argument, 0, O_BYTES},
	{"stream", no_argument, 0, O_STREAM},
	{0, 0, 0, 0},
};

enum cmd { C_PINGPONG, C_FLOOR, C_COMPARE, C_RAWTCP, C_SCAN, C_NTO1, C_SPSC, C_BLOCKS,
	   C_STREAM, C_STREAM_CMP };

/* Which options each command takes: a usage error beats a silently
 * ignored flag in a benchmark. */
static int allowed(enum cmd c, int opt)
{
	if (c == C_STREAM || c == C_STREAM_CMP) {
		if (opt == O_URL || opt == O_SERVER || opt == O_CLIENT || opt == O_ZC)
			return c == C_STREAM;
		if (opt == O_PNG)
			return c == C_STREAM_CMP;
		return opt == O_SIZE || opt == O_SIZES || opt == O_ITERS || opt == O_BYTES ||
		       opt == O_RUNS || opt == O_WINDOW || opt == O_BATCH || opt == O_CSV ||
		       opt == O_PIN || opt == O_TIMEOUT || opt == O_HELP;
	}
	if (c == C_NTO1)
		return opt == O_URL || opt == O_CLIENTS || opt == O_SIZE || opt == O_ITERS ||
		       opt == O_WARMUP || opt == O_CSV || opt == O_PIN || opt == O_TIMER ||
		       opt == O_TIMEOUT || opt == O_HELP;
	if (c == C_BLOCKS)
		return opt == O_SIZE || opt == O_SIZES || opt == O_ITERS || opt == O_BLOCKS ||
		       opt == O_CSV || opt == O_PIN || opt == O_TIMER || opt == O_HELP;
	if (c == C_SCAN)
		return opt == O_IMPL || opt == O_N || opt == O_ITERS || opt == O_CSV ||
		       opt == O_PIN || opt == O_TIMER || opt == O_HELP;
	switch (opt) {
	case O_PIN: case O_TIMER: case O_TIMEOUT: case O_HELP: case O_ITERS: case O_CSV:
		return 1;
	case O_WARMUP:
		return c != C_COMPARE;
	case O_URL: case O_ZC: case O_UNREAD: case O_SERVER: case O_CLIENT:
		return c == C_PINGPONG;
	case O_LOOP:
		return c == C_PINGPONG || c == C_RAWTCP;
	case O_SIZE: case O_SIZES: /* synonyms */
		return c != C_FLOOR;
	case O_SHM_ITERS: case O_SOCK_ITERS: case O_PNG: case O_UCX:
		return c == C_COMPARE;
	case O_STREAM: case O_RUNS: case O_BYTES:
		return c == C_SPSC;
	}
	return 0;
}

int main(int argc, char **argv)
{
	cpu_count(); /* remember the CPUs we may use before anything is pinned */
	if (zl_cli_version(argc, argv, "zl-bench", zl_version()))
		return 0;
	if (argc < 2)
		return usage(NULL);
	const char *name = argv[1];
	enum cmd cmd;
	if (!strcmp(name, "pingpong"))
		cmd = C_PINGPONG;
	else if (!strcmp(name, "floor"))
		cmd = C_FLOOR;
	else if (!strcmp(name, "compare"))
		cmd = C_COMPARE;
	else if (!strcmp(name, "rawtcp"))
		cmd = C_RAWTCP;
	else if (!strcmp(name, "spsc"))
		cmd = C_SPSC;
	else if (!strcmp(name, "scan"))
		cmd = C_SCAN;
	else if (!strcmp(name, "nto1"))
		cmd = C_NTO1;
	else if (!strcmp(name, "blocks"))
		cmd = C_BLOCKS;
	else if (!strcmp(name, "stream"))
		cmd = C_STREAM;
	else if (!strcmp(name, "stream-compare"))
		cmd = C_STREAM_CMP;
	else if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help"))
		return help();
	else
		return usage("unknown command '%s'", name);

	const char *url = NULL, *csv = NULL, *png = "zl-bench-compare.png", *sizes_arg = NULL;
	const char *impl_arg = NULL, *n_arg = NULL, *clients_arg = NULL;
	uint64_t iters = 0, warmup = UINT64_MAX, shm_iters = 0, sock_iters = 0, timeout_s = 10;
	uint64_t nblocks = 400, runs = 3, window = 0, batch = 1, bytes = 256u << 20;
	int stream_mode = 0, png_given = 0, pin_given = 0, cpu_a = 0, cpu_b = 1, zc = 0, unread = 0, ucx = 0;
	enum pp_mode mode = PP_BOTH;
	enum pp_loop loop = LOOP_BLOCK;
	enum timer_kind tk = TIMER_AUTO;

	/* options follow the command word */
	int ac = argc - 1, opt;
	char **av = argv + 1;
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(ac, av, "h", longopts, NULL)) != -1) {
		if (opt == 'h')
			opt = O_HELP;
		if (opt == '?' || opt == ':')
			return usage("bad or incomplete option '%s'", av[optind - 1]);
		if (!allowed(cmd, opt)) {
			const char *oname = "?";
			for (const struct option *lo = longopts; lo->name; lo++)
				if (lo->val == opt)
					oname = lo->name;
			return usage("option '--%s' does not apply to this command", oname);
		}
		switch (opt) {
		case O_HELP:
			return help();
		case O_URL: url = optarg; break;
		case O_SIZE: case O_SIZES: sizes_arg = optarg; break;
		case O_ITERS:
			if (parse_u64(optarg, &iters) || !iters)
				return usage("bad --iters '%s'", optarg);
			break;
		case O_SHM_ITERS:
			if (parse_u64(optarg, &shm_iters) || !shm_iters)
				return usage("bad --shm-iters '%s'", optarg);
			break;
		case O_SOCK_ITERS:
			if (parse_u64(optarg, &sock_iters) || !sock_iters)
				return usage("bad --sock-iters '%s'", optarg);
			break;
		case O_WARMUP:
			if (parse_u64(optarg, &warmup))
				return usage("bad --warmup '%s'", optarg);
			break;
		case O_PIN:
			if (parse_pin(optarg, &cpu_a, &cpu_b))
				return usage("bad --pin '%s' (want A,B or A or none)", optarg);
			pin_given = 1;
			break;
		case O_CSV: csv = optarg; break;
		case O_IMPL: impl_arg = optarg; break;
		case O_N: n_arg = optarg; break;
		case O_CLIENTS: clients_arg = optarg; break;
		case O_BLOCKS:
			if (parse_u64(optarg, &nblocks) || nblocks < 10 || nblocks > 1000000)
				return usage("bad --blocks '%s' (10..1000000)", optarg);
			break;
		case O_PNG: png = optarg; png_given = 1; break;
		case O_RUNS:
			if (parse_u64(optarg, &runs) || !runs || runs > ST_MAX_RUNS)
				return usage("bad --runs '%s' (1..%d)", optarg, ST_MAX_RUNS);
			break;
		case O_WINDOW:
			if (parse_u64(optarg, &window) || window > (1u << 30))
				return usage("bad --window '%s'", optarg);
			break;
		case O_BATCH:
			if (parse_u64(optarg, &batch) || !batch || batch > ST_MAX_BATCH)
				return usage("bad --batch '%s' (1..%d)", optarg, ST_MAX_BATCH);
			break;
		case O_BYTES:
			if (parse_u64(optarg, &bytes) || !bytes)
				return usage("bad --bytes '%s'", optarg);
			break;
		case O_LOOP: {
			static const char *const names[] = {"block", "poll", "arm", "poller"};
			int k = 0;
			while (k < 4 && strcmp(optarg, names[k]))
				k++;
			if (k == 4 && cmd == C_RAWTCP && !strcmp(optarg, "epoll"))
				k = LOOP_POLL;
			if (k == 4)
				return usage("bad --loop '%s' (block, poll, arm or poller; rawtcp: "
					     "block or epoll)", optarg);
			loop = (enum pp_loop)k;
			break;
		}
		case O_ZC: zc = 1; break;
		case O_STREAM: stream_mode = 1; break;
		case O_UNREAD: zc = unread = 1; break;
		case O_UCX: ucx = 1; break;
		case O_SERVER:
		case O_CLIENT:
			if (mode != PP_BOTH)
				return usage("%s", "--server and --client exclude each other");
			mode = opt == O_SERVER ? PP_SERVER : PP_CLIENT;
			break;
		case O_TIMER:
			if (!strcmp(optarg, "auto"))
				tk = TIMER_AUTO;
			else if (!strcmp(optarg, "tsc"))
				tk = TIMER_TSC;
			else if (!strcmp(optarg, "clock"))
				tk = TIMER_CLOCK;
			else
				return usage("bad --timer '%s' (auto, tsc or clock)", optarg);
			break;
		case O_TIMEOUT:
			if (parse_u64(optarg, &timeout_s) || !timeout_s || timeout_s > 86400)
				return usage("bad --timeout '%s' (seconds, 1..86400)", optarg);
			break;
		}
	}
	if (optind < ac)
		return usage("unexpected argument '%s'", av[optind]);

	/* Pinning: both peers on one CPU would measure the scheduler. */
	if (!pin_given) {
		if (mode != PP_BOTH || default_cpus(&cpu_a, &cpu_b))
			cpu_a = cpu_b = ZLB_NO_CPU;
	} else if (mode == PP_SERVER) {
		cpu_a = ZLB_NO_CPU;
	} else if (mode == PP_CLIENT) {
		cpu_b = ZLB_NO_CPU;
	}
	if (pin_given && mode == PP_BOTH && cmd != C_SCAN && cpu_a != ZLB_NO_CPU &&
	    cpu_a == cpu_b)
		fprintf(stderr, "zl-bench: note: client and server share cpu%d; the numbers will "
				"include scheduler wake-ups\n", cpu_a);

	signal(SIGPIPE, SIG_IGN); /* a dead peer must be an error, not a kill */
	if (timer_init(tk))
		return 1;
	if (cmd == C_SCAN) /* one process, one CPU: --pin A (B is ignored) */
		return scan_run(impl_arg, n_arg, iters ? iters : 20000, csv,
				pin_given ? cpu_a : ZLB_NO_CPU);
	int64_t timeout_us = (int64_t)timeout_s * 1000000;

	size_t sizes[ZLB_MAX_SIZES] = {8, 64, 512, 4096};
	int nsizes = 4;
	if (sizes_arg && parse_sizes(sizes_arg, sizes, &nsizes))
		return usage("bad size list '%s' (e.g. 8,64,4k; at most 32, each <= 1g)", sizes_arg);

	if (cmd == C_STREAM || cmd == C_STREAM_CMP || (cmd == C_SPSC && stream_mode)) {
		if (cmd == C_STREAM && !url)
			return usage("%s", "stream needs --url");
		if (zc && batch > 1)
			return usage("%s", "--zerocopy sends one message at a time: no --batch");
		if (!sizes_arg) {
			static const size_t def[] = {8, 64, 512, 4096, 65536, 1 << 20};
			memcpy(sizes, def, sizeof(def));
			nsizes = 6;
		}
		struct stream_opts so = {
			.url = url,
			.nsizes = nsizes,
			.iters = iters ? iters
				       : (url && strncmp(url, "shm:", 4) ? 200000 : 1000000),
			.bytes = bytes,
			.runs = (int)runs,
			.window = (uint32_t)window,
			.batch = (uint32_t)batch,
			.zerocopy = zc,
			.cpu_tx = cpu_a,
			.cpu_rx = cpu_b,
			.timeout_us = timeout_us,
			.mode = mode,
		};
		memcpy(so.sizes, sizes, sizeof(so.sizes));
		if (cmd == C_SPSC)
			return stream_spsc_cmd(&so, csv);
		if (cmd == C_STREAM)
			return stream_run(&so, csv);
		return stream_compare_run(&so, csv ? csv : "zl-bench-stream.csv",
					  png_given ? png : "zl-bench-stream.png");
	}

	FILE *csvf = NULL;
	if (csv && cmd != C_COMPARE && cmd != C_NTO1 && !(csvf = report_csv_open(csv, 0)))
		return 1;

	int rc;
	switch (cmd) {
	case C_FLOOR: {
		if (!iters)
			iters = 200000;
		struct sink sink = {csvf, "floor", "cacheline"};
		struct result r;
		if (cpu_a == ZLB_NO_CPU && cpu_count() >= 2)
			printf("note: not pinned; with both sides on one CPU this measures the "
			       "scheduler, not the cache\n");
		rc = floor_run(iters, warmup == UINT64_MAX ? iters / 10 : warmup, cpu_a, cpu_b, 0,
			       &sink, &r);
		break;
	}
	case C_SPSC: {
		if (!iters)
			iters = 200000;
		if (warmup == UINT64_MAX)
			warmup = iters / 10;
		struct sink sink = {csvf, "spsc", "fixed-slot-ring"};
		printf("spsc: the copying floor, RTT (round trip), microseconds: a fixed-slot ring "
		       "per direction, memcpy in, sequence footer, memcpy out; %llu timed round "
		       "trips per size after %llu warm-up\n",
		       (unsigned long long)iters, (unsigned long long)warmup);
		report_setup(cpu_a, cpu_b, 1);
		report_columns();
		rc = 0;
		for (int i = 0; i < nsizes && !rc; i++) {
			struct result r;
			rc = spsc_run(sizes[i], iters, warmup, cpu_a, cpu_b, &sink, &r);
		}
		break;
	}
	case C_BLOCKS: {
		if (!iters)
			iters = 200000;
		if (iters < nblocks)
			return usage("%s", "blocks needs --iters >= --blocks");
		if (!sizes_arg)
			sizes[0] = 64, nsizes = 1;
		struct sink sink = {csvf, "", "blocks"};
		blocks_header(iters, nblocks, cpu_a, cpu_b);
		rc = 0;
		for (int i = 0; i < nsizes && !rc; i++)
			rc = blocks_run(sizes[i], iters, nblocks, cpu_a, cpu_b, &sink);
		break;
	}
	case C_PINGPONG:
	case C_RAWTCP: {
		if (cmd == C_PINGPONG && !url)
			return usage("%s", "pingpong needs --url");
		struct pp_opts o = {
			.url = cmd == C_PINGPONG ? url : "tcp://127.0.0.1:0",
			.nsizes = nsizes,
			.iters = iters ? iters : (!strncmp(url ? url : "", "shm:", 4) ? 200000 : 20000),
			.cpu_client = cpu_a,
			.cpu_server = cpu_b,
			.zerocopy = zc,
			.unread = unread,
			.timeout_us = timeout_us,
			.mode = mode,
			.loop = loop,
		};
		if (loop != LOOP_BLOCK && zc)
			return usage("%s", "--loop other than block echoes by copy: no --zerocopy");
		o.warmup = warmup == UINT64_MAX ? o.iters / 10 : warmup;
		memcpy(o.sizes, sizes, sizeof(o.sizes));
		struct result res[ZLB_MAX_SIZES];
		char scheme[16] = "zipline", method[32];
		sscanf(o.url, "%15[a-z0-9]", scheme);
		static const char *const suffix[] = {"", "+poll", "+arm", "+poller"};
		if (cmd == C_RAWTCP)
			snprintf(method, sizeof(method), "raw-tcp%s", loop ? "+epoll" : "");
		else
			snprintf(method, sizeof(method), "%s%s", scheme, suffix[loop]);
		struct sink sink = {csvf, method,
				    cmd == C_RAWTCP ? "tcp://127.0.0.1:0 (plain socket)" : o.url};
		if (cmd == C_RAWTCP) {
			printf("raw tcp (baseline): TCP ping-pong on 127.0.0.1, TCP_NODELAY, no zipline; "
			       "echo server: %s\nRTT (round trip), microseconds: %llu timed round trips per "
			       "size after %llu warm-up\n",
			       loop == LOOP_BLOCK ? "blocking read/write" : "epoll, read until EAGAIN",
			       (unsigned long long)o.iters, (unsigned long long)o.warmup);
			report_setup(cpu_a, cpu_b, 1);
			report_columns();
			rc = rawtcp_run(&o, &sink, res);
		} else {
			rc = pingpong_run(&o, &sink, res);
		}
		break;
	}
	case C_COMPARE: {
		struct compare_opts o = {
			.nsizes = nsizes,
			.shm_iters = shm_iters ? shm_iters : iters ? iters : 200000,
			.sock_iters = sock_iters ? sock_iters : iters ? iters : 20000,
			.cpu_client = cpu_a,
			.cpu_server = cpu_b,
			.timeout_us = timeout_us,
			.csv = csv ? csv : "zl-bench-compare.csv",
			.png = png,
			.ucx = ucx,
		};
		memcpy(o.sizes, sizes, sizeof(o.sizes));
		rc = compare_run(&o);
		break;
	}
	case C_NTO1: {
		if (!url)
			return usage("%s", "nto1 needs --url");
		size_t cl[ZLB_MAX_SIZES] = {1, 2, 4, 8};
		int ncl = 4;
		if (clients_arg && parse_sizes(clients_arg, cl, &ncl))
			return usage("bad --clients '%s' (e.g. 1,2,4)", clients_arg);
		if (sizes_arg && nsizes != 1)
			return usage("%s", "nto1 takes one --size");
		struct nto1_opts o = {
			.url = url,
			.size = sizes_arg ? sizes[0] : 64,
			.nclients = ncl,
			.iters = iters ? iters : (!strncmp(url, "shm:", 4) ? 200000 : 20000),
			.cpu_client = cpu_a,
			.cpu_server = cpu_b,
			.timeout_us = timeout_us,
			.csv = csv,
		};
		o.warmup = warmup == UINT64_MAX ? o.iters / 10 : warmup;
		for (int i = 0; i < ncl; i++) {
			if (cl[i] < 1 || cl[i] > 1024)
				return usage("bad client count %zu (1..1024)", cl[i]);
			o.clients[i] = (int)cl[i];
		}
		rc = nto1_run(&o);
		break;
	}
	default:
		rc = 2;
	}
	if (csvf)
		fclose(csvf);
	return rc;
}
