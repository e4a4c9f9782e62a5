/* SPDX-License-Identifier: MIT */
/* zl-kvd: the zipline key-value server, and a client mode for its stats. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "proto.h"
#include "service.h"
#include "zl-kvd.h"

static const char usage_text[] =
	"usage: zl-kvd --listen URL [--listen URL ...] [options]\n"
	"       zl-kvd --stats URL\n"
	"\n"
	"Serves an in-memory key-value store on every URL: GET, PUT, DELETE, SCAN\n"
	"(keys in order) and CAS (compare-and-swap on per-key versions). Clients use\n"
	"zipline_kv.h (zl_kv_connect). Keys 1..1024 bytes, values 0..1 MiB.\n"
	"\n"
	"server options:\n"
	"  --listen URL        shm://NAME, tcp://HOST:PORT (port 0: any free one),\n"
	"                      unix:///path, rdma://HOST:PORT; up to 8 of them\n"
	"  --mem-limit BYTES   writes that would take the store over BYTES (keys,\n"
	"                      values, per-key overhead and the index, as malloc\n"
	"                      charges them) fail with -ENOSPC; suffixes k, m, g\n"
	"                      (powers of 1024). Default: no limit\n"
	"  --stats-every SEC   print a stats line to stderr every SEC seconds\n"
	"  --slots K           requests in flight per client (zl_server, default 4)\n"
	"  --slot-size BYTES   bytes per request slot, 64..65536, a multiple of 64;\n"
	"                      default 2048: a put of a 1 KiB value (YCSB's default\n"
	"                      record) fits, larger requests follow over the channel\n"
	"  --max-clients N     default 1024\n"
	"  --spin-us US        idle spin of the serving thread before it sleeps\n"
	"                      (default 50; -1 never sleeps)\n"
	"  -q, --quiet         no start-up lines and no final stats line\n"
	"\n"
	"one-sided store (docs/onesided.md): clients connect with store=onesided in\n"
	"the URL and GET, PUT, DELETE and CAS by reading and writing the server's\n"
	"memory themselves (shm:// for now); SCAN is not offered.\n"
	"  --onesided          serve the one-sided store instead; --mem-limit is then\n"
	"                      its data space (default 256m); --stats-every and the\n"
	"                      final stats line are the two-sided store's only\n"
	"  --os-region BYTES   region size, the largest container (default 4m)\n"
	"  --os-slots N        hash table slots, a power of two (default mem/256)\n"
	"  --os-heartbeat-ms MS  a silent client loses its regions after MS, at\n"
	"                      least 50 (default 5000)\n"
	"  --os-max-regions N  regions per client (default 2)\n"
	"\n"
	"On start it prints \"listening URL\" per listener to stdout (with the port\n"
	"actually bound). SIGTERM or SIGINT stop it cleanly: it prints a final\n"
	"\"zl-kvd: exit ...\" stats line to stderr and exits 0.\n"
	"\n"
	"--stats URL asks the server at URL for its counters (a STATS request, so it\n"
	"works on a running server from anywhere the URL reaches) and prints one\n"
	"line of name=value pairs (with store=onesided in the URL: the one-sided\n"
	"store's collector counters instead):\n"
		"  keys mem limit      keys stored, bytes charged, the limit (0: none)\n"
	"  slots draining resizes  hash table size, old table being drained, growths\n"
	"  get put del scan cas stats  requests per operation\n"
	"  notfound stale nospc nomem  -ENOENT, -ESTALE, -ENOSPC, -ENOMEM replies\n"
	"  malformed           requests refused with -EBADMSG\n"
	"  clients ... sleeps  the server's zl_server_info counters\n"
	"Same line as the periodic and final ones. Exit 0, or 1 on an error.\n";

static zl_server *g_srv;
static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
	zl_server_stop(g_srv); /* async-signal-safe */
}

static void on_log(enum zl_log_level level, const char *msg, void *arg)
{
	(void)arg;
	static const char *names[] = { "error", "warn", "info", "debug" };
	fprintf(stderr, "zl-kvd: %s: %s\n", names[level & 3], msg);
}

static int parse_u64(const char *s, uint64_t *out, bool suffix)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -1;
	unsigned shift = 0;
	if (suffix && *end) {
		const char *sfx = strchr("kKmMgG", *end);
		if (!sfx || end[1])
			return -1;
		shift = (unsigned)((sfx - "kKmMgG") / 2 + 1) * 10;
		end++;
	}
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

static int query_stats(const char *url)
{
	zl_client *cli;
	int rc = zl_client_connect(url, NULL, 5000000, &cli);
	if (rc) {
		fprintf(stderr, "zl-kvd: connect %s: %s\n", url, zl_strerror(rc));
		return 1;
	}
	uint8_t req[ZL_KVP_HDR];
	struct zl_kvp_req r = { .op = ZL_KVP_STATS };
	zl_kvp_req_hdr(&r, req);
	const void *p;
	size_t n;
	struct zl_kvp_rep rep;
	rc = zl_call(cli, ZL_KVP_STATS, req, sizeof(req), &p, &n, 5000000);
	if (!rc && (zl_kvp_rep_parse(ZL_KVP_STATS, p, n, &rep) || rep.status))
		rc = rep.status ? rep.status : -EPROTO;
	if (rc)
		fprintf(stderr, "zl-kvd: stats from %s: %s\n", url, zl_strerror(rc));
	else
		printf("%.*s\n", (int)rep.blen, (const char *)rep.body);
	zl_client_close(cli);
	return rc ? 1 : 0;
}

static void print_stats(struct zl_kvd *d, const char *what)
{
	char line[ZL_KVP_MAX_STATS];
	size_t n = zl_kvd_stats(d, line, sizeof(line));
	fprintf(stderr, "zl-kvd: %s %.*s\n", what, (int)n, line);
}

static void stop_all(struct zl_kvd *d, zl_kvos *os)
{
	if (d) {
		zl_kvd_destroy(d);
		return;
	}
	zl_kvos_close(os);
	zl_server_close(g_srv);
}

int main(int argc, char **argv)
{
	if (zl_cli_version(argc, argv, "zl-kvd", zl_version()))
		return 0;
	enum { O_LISTEN = 256, O_MEM, O_EVERY, O_SLOTS, O_SLOT_SIZE, O_CLIENTS, O_SPIN, O_STATS,
	       O_OS, O_OS_REGION, O_OS_SLOTS, O_OS_HB, O_OS_MAXREG };
	static const struct option lo[] = {
		{ "listen", required_argument, NULL, O_LISTEN },
		{ "mem-limit", required_argument, NULL, O_MEM },
		{ "stats-every", required_argument, NULL, O_EVERY },
		{ "slots", required_argument, NULL, O_SLOTS },
		{ "slot-size", required_argument, NULL, O_SLOT_SIZE },
		{ "max-clients", required_argument, NULL, O_CLIENTS },
		{ "spin-us", required_argument, NULL, O_SPIN },
		{ "stats", required_argument, NULL, O_STATS },
		{ "onesided", no_argument, NULL, O_OS },
		{ "os-region", required_argument, NULL, O_OS_REGION },
		{ "os-slots", required_argument, NULL, O_OS_SLOTS },
		{ "os-heartbeat-ms", required_argument, NULL, O_OS_HB },
		{ "os-max-regions", required_argument, NULL, O_OS_MAXREG },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *urls[8], *stats_url = NULL;
	int nurls = 0, quiet = 0, onesided = 0, spin_set = 0;
	struct zl_kvos_opts oo;
	zl_kvos_opts_init(&oo);
	uint64_t mem = 0, every = 0, v;
	struct zl_server_opts so;
	zl_server_opts_init(&so);
	so.max_req = ZL_KVP_MAX_REQ;
	so.slot_size = ZL_KVD_SLOT_SIZE;
	int c, li = 0;
	opterr = 0; /* our one-line errors below */
	while ((c = getopt_long(argc, argv, "qh", lo, &li)) != -1) {
		switch (c) {
		case O_LISTEN:
			if (nurls == 8) {
				fprintf(stderr, "zl-kvd: at most 8 --listen\n");
				return 2;
			}
			urls[nurls++] = optarg;
			break;
		case O_MEM:
			if (parse_u64(optarg, &mem, true))
				goto bad;
			break;
		case O_EVERY:
			if (parse_u64(optarg, &every, false) || every > 86400)
				goto bad;
			break;
		case O_SLOTS:
			if (parse_u64(optarg, &v, false) || v > 64)
				goto bad;
			so.slots = (uint32_t)v;
			break;
		case O_SLOT_SIZE:
			if (parse_u64(optarg, &v, false) || v < 64 || v > 65536 || v % 64)
				goto bad;
			so.slot_size = (uint32_t)v;
			break;
		case O_CLIENTS:
			if (parse_u64(optarg, &v, false) || v > 65536)
				goto bad;
			so.max_clients = (uint32_t)v;
			break;
		case O_SPIN:
			spin_set = 1;
			if (!strcmp(optarg, "-1"))
				so.spin_us = -1;
			else if (!parse_u64(optarg, &v, false) && v <= 10000000)
				so.spin_us = (int64_t)v;
			else
				goto bad;
			break;
		case O_STATS:
			stats_url = optarg;
			break;
		case O_OS:
			onesided = 1;
			break;
		case O_OS_REGION:
			if (parse_u64(optarg, &oo.region_len, true))
				goto bad;
			break;
		case O_OS_SLOTS:
			if (parse_u64(optarg, &oo.nslots, false))
				goto bad;
			break;
		case O_OS_HB:
			if (parse_u64(optarg, &v, false) || v < 50 || v > 86400000)
				goto bad;
			oo.hb_window_us = (int64_t)v * 1000;
			break;
		case O_OS_MAXREG:
			if (parse_u64(optarg, &v, false) || !v || v > 16)
				goto bad;
			oo.max_regions = (uint32_t)v;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		default:
			fprintf(stderr, "zl-kvd: bad or incomplete option '%s' (zl-kvd --help)\n",
				argv[optind - 1]);
			return 2;
		}
	}
	if (optind < argc || (!nurls && !stats_url) || (nurls && stats_url)) {
		fprintf(stderr, "zl-kvd: %s (zl-kvd --help)\n",
			optind < argc ? "unexpected argument" : "want --listen URL or --stats URL, not both");
		return 2;
	}
	if (!getenv("ZL_LOG"))
		zl_set_log(on_log, NULL, ZL_LOG_WARN);
	if (stats_url)
		return strstr(stats_url, "store=onesided") ? kvd_os_stats(stats_url)
							   : query_stats(stats_url);

	struct zl_kvd *d = NULL;
	zl_kvos *os = NULL;
	int rc;
	if (onesided) {
		/* the server only answers control requests (sessions, regions,
		 * heartbeats): no idle spin unless asked for, and a slower sweep
		 * for lost doorbells (a spin per sweep cost 3% of a CPU beside a
		 * client doing GETs; 0.2% now: bench/onesided.sh) */
		if (!spin_set)
			so.spin_us = 0;
		so.sweep_us = 100000;
		if (mem)
			oo.mem = mem;
		oo.max_clients = so.max_clients;
		rc = zl_server_create(&so, &g_srv);
		if (!rc && (rc = zl_kvos_create(g_srv, &oo, &os)))
			zl_server_close(g_srv);
	} else {
		struct zl_kvd_opts ko = { .mem_limit = mem, .server = &so };
		rc = zl_kvd_create(&ko, &d);
		if (!rc)
			g_srv = zl_kvd_server(d);
	}
	if (rc) {
		fprintf(stderr, "zl-kvd: start: %s\n", zl_strerror(rc));
		return 1;
	}
	for (int i = 0; i < nurls; i++) {
		char url[600];
		rc = zl_server_listen(g_srv, urls[i], NULL);
		if (!rc)
			rc = zl_server_url(g_srv, i, url, sizeof(url));
		if (rc) {
			fprintf(stderr, "zl-kvd: listen %s: %s\n", urls[i], zl_strerror(rc));
			stop_all(d, os);
			return 1;
		}
		if (!quiet)
			printf("listening %s\n", url);
	}
	fflush(stdout);
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	while (!g_stop) {
		rc = zl_server_run(g_srv, every ? (int64_t)every * 1000000 : -1);
		if (rc) {
			fprintf(stderr, "zl-kvd: serve: %s\n", zl_strerror(rc));
			break;
		}
		if (every && !g_stop && d)
			print_stats(d, "stats");
	}
	if (!quiet && d)
		print_stats(d, "exit");
	stop_all(d, os);
	return rc ? 1 : 0;
bad:
	fprintf(stderr, "zl-kvd: bad value '%s' for --%s (zl-kvd --help)\n", optarg, lo[li].name);
	return 2;
}
