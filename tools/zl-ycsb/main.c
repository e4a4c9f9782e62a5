/* SPDX-License-Identifier: MIT */
/* zl-ycsb: command line, phases, output. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ycsb.h"

#define DEF_RECORDS 100000 /* YCSB's 1,000,000 is --records 1000000 */

static const char usage_text[] =
	"usage: zl-ycsb [options] URL\n"
	"\n"
	"YCSB core workloads A-F against one key-value store. Same keys, values and\n"
	"request sequence (for a --seed) for every backend.\n"
	"\n"
	"URL:\n"
	"  zl://ZIPLINE_URL        zl-kvd through zipline_kv.h, e.g. zl://shm://kv,\n"
	"                          zl://tcp://127.0.0.1:7000, zl://unix:///tmp/kv.sock\n"
	"  redis://HOST:PORT       Redis, RESP protocol\n"
	"  memcached://HOST:PORT   memcached, text protocol (no scans: workload e is n/a)\n"
	"  null://                 no store: the driver's own cost per operation\n"
	"  The redis and memcached clients are our own (no hiredis/libmemcached): small,\n"
	"  blocking, one request at a time (pipelined with --depth), TCP_NODELAY, and\n"
	"  every connect, read and write bounded by --timeout.\n"
	"\n"
	"options:\n"
	"  --workload a..f     YCSB workload (default a):\n"
	"                      a read/update 50/50 zipfian    b read/update 95/5 zipfian\n"
	"                      c read 100 zipfian             d read/insert 95/5 latest\n"
	"                      e scan/insert 95/5 zipfian, scan length uniform 1..100\n"
	"                      f read/read-modify-write 50/50 zipfian\n"
	"  --phase load|run|both  load inserts records 0..N-1; run does the operations\n"
	"                      (default both). Load with the workload you will run\n"
	"                      (redis keeps its scan index only for workload e).\n"
	"  --records N         recordcount (default 100000, a CI-sized 1/10 of YCSB's\n"
	"                      usual 1,000,000)\n"
	"  --ops N             operationcount of the run phase (default 100000)\n"
	"  --fieldcount N      fields per record (default 10)\n"
	"  --fieldlength N     bytes per field (default 100)\n"
	"  --threads N         client threads, one connection each (default 1)\n"
	"  --depth N           operations in flight per thread, 1..64 (default 1): reads,\n"
	"                      updates and inserts go out N at a time (zl:// through\n"
	"                      zl_kv_batch; redis and memcached pipelined), and each is\n"
	"                      charged its whole batch's time; scans and\n"
	"                      read-modify-writes run alone\n"
	"  --target OPS        total ops/s, paced per thread on an absolute schedule;\n"
	"                      also reports INTENDED-* latencies from the scheduled start\n"
	"                      (coordinated omission). Default 0: unthrottled\n"
	"  --seed N            random seed (default 1)\n"
	"  --timeout SEC       bound on connecting and on every operation (default 10)\n"
	"  --csv FILE          append rows: backend,workload,phase,threads,op,count,\n"
	"                      ops_per_s,median_us,p99_us,p999_us,max_us,depth\n"
	"  --png FILE          latency bars per operation (gnuplot; skipped without it;\n"
	"                      --plot FILE is the same)\n"
	"  --label NAME        the CSV backend column (default: the URL)\n"
	"  -q, --quiet         no progress lines (otherwise one every 2 s on stderr)\n"
	"\n"
	"A record is its fields' bytes concatenated (fieldcount x fieldlength bytes,\n"
	"random printable ASCII) stored as one value under \"user\" + FNV-64 hash of\n"
	"the record number (YCSB insertorder=hashed). Reads fetch the whole record;\n"
	"updates and inserts write the whole record (YCSB writeallfields=true).\n"
	"Keys are zipfian (0.99, scrambled as YCSB's ScrambledZipfianGenerator),\n"
	"uniform, or latest (SkewedLatestGenerator) over the loaded and acknowledged\n"
	"keys; run-phase inserts take new keys from record N on (an atomic counter).\n"
	"\n"
	"Latencies are per operation, in microseconds: one request/reply round trip,\n"
	"except redis scan (ZRANGEBYLEX + MGET) and rmw (GET + SET, not atomic) and\n"
	"memcached rmw (gets + cas), which take two. zl:// rmw is zl_kv_rmw (atomic).\n"
	"\n"
	"examples:\n"
	"  zl-ycsb --workload c redis://127.0.0.1:6379\n"
	"  zl-ycsb --workload a --threads 2 --csv out.csv --plot a.png zl://shm://kv\n"
	"  zl-ycsb --workload c --fieldcount 1 --fieldlength 100 memcached://127.0.0.1:11211\n"
	"\n"
	"exit status: 0 success, 1 a failure (reported), 2 usage, 3 the backend cannot\n"
	"run this workload (n/a: memcached and workload e)\n";

__attribute__((format(printf, 1, 2))) static int usage(const char *fmt, ...)
{
	if (fmt) {
		va_list ap;
		fprintf(stderr, "zl-ycsb: ");
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fprintf(stderr, " (zl-ycsb --help)\n");
		return 2;
	}
	fputs(usage_text, stdout);
	return 0;
}

static int parse_num(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static const struct backend *pick(const char *url, const char **addr)
{
	static const struct backend *all[] = {&be_zl, &be_redis, &be_memcached, &be_null};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		size_t n = strlen(all[i]->scheme);
		if (!strncmp(url, all[i]->scheme, n)) {
			*addr = url + n;
			return all[i];
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (zl_cli_version(argc, argv, "zl-ycsb", zl_version()))
		return 0;
	static const struct option lo[] = {
		{"workload", 1, 0, 'w'}, {"phase", 1, 0, 'p'},    {"records", 1, 0, 'r'},
		{"ops", 1, 0, 'o'},      {"fieldcount", 1, 0, 'F'}, {"fieldlength", 1, 0, 'L'},
		{"threads", 1, 0, 't'},  {"target", 1, 0, 'T'},  {"seed", 1, 0, 's'},
		{"timeout", 1, 0, 'x'},  {"csv", 1, 0, 'c'},     {"png", 1, 0, 'P'},
		{"plot", 1, 0, 'P'}, /* (its first name) */
		{"label", 1, 0, 'l'},    {"quiet", 0, 0, 'q'},   {"url", 1, 0, 'u'},
		{"depth", 1, 0, 'd'},
		{"help", 0, 0, 'h'},     {0, 0, 0, 0}};
	struct opts o = {.threads = 1, .depth = 1, .seed = 1, .timeout_us = 10000000};
	int do_load = 1, do_run = 1, c;
	int64_t v;
	o.w.records = DEF_RECORDS;
	o.w.ops = 100000;
	o.w.fieldcount = 10;
	o.w.fieldlength = 100;
	workload_set(&o.w, 'a');

	opterr = 0; /* our one-line errors below */
	while ((c = getopt_long(argc, argv, "hq", lo, NULL)) != -1) {
		switch (c) {
		case 'w':
			if (strlen(optarg) != 1 || workload_set(&o.w, (char)(optarg[0] | 0x20)) < 0)
				return usage("--workload wants one of a b c d e f");
			break;
		case 'p':
			if (!strcmp(optarg, "load"))
				do_load = 1, do_run = 0;
			else if (!strcmp(optarg, "run"))
				do_load = 0, do_run = 1;
			else if (!strcmp(optarg, "both"))
				do_load = do_run = 1;
			else
				return usage("--phase wants load, run or both");
			break;
		case 'r':
			if (parse_num(optarg, 2, 1ll << 31, &v))
				return usage("--records wants 2..2^31");
			o.w.records = v;
			break;
		case 'o':
			if (parse_num(optarg, 0, 1ll << 40, &v))
				return usage("--ops wants a count");
			o.w.ops = v;
			break;
		case 'F':
			if (parse_num(optarg, 1, 1000, &v))
				return usage("--fieldcount wants 1..1000");
			o.w.fieldcount = (uint32_t)v;
			break;
		case 'L':
			if (parse_num(optarg, 1, 1 << 20, &v))
				return usage("--fieldlength wants 1..1048576");
			o.w.fieldlength = (uint32_t)v;
			break;
		case 't':
			if (parse_num(optarg, 1, 1024, &v))
				return usage("--threads wants 1..1024");
			o.threads = (int)v;
			break;
		case 'd':
			if (parse_num(optarg, 1, DEPTH_MAX, &v))
				return usage("--depth wants 1..%d", DEPTH_MAX);
			o.depth = (int)v;
			break;
		case 'T':
			if (parse_num(optarg, 0, 1000000000, &v))
				return usage("--target wants ops/s (0: unthrottled)");
			o.target = (double)v;
			break;
		case 's':
			if (parse_num(optarg, 0, INT64_MAX, &v))
				return usage("--seed wants a number");
			o.seed = (uint64_t)v;
			break;
		case 'x':
			if (parse_num(optarg, 1, 3600, &v))
				return usage("--timeout wants 1..3600 seconds");
			o.timeout_us = v * 1000000;
			break;
		case 'c': o.csv = optarg; break;
		case 'P': o.plot = optarg; break;
		case 'l': o.label = optarg; break;
		case 'q': o.quiet = 1; break;
		case 'u': o.url = optarg; break;
		case 'h': return usage(NULL);
		default: return usage("bad or incomplete option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		o.url = argv[optind++];
	if (optind < argc)
		return usage("one URL only");
	if (!o.url)
		return usage("no URL");
	if (!(o.be = pick(o.url, &o.addr)) || (!*o.addr && o.be != &be_null))
		return usage("URL '%s': want zl://ZIPLINE_URL, redis://HOST:PORT or "
			     "memcached://HOST:PORT", o.url);
	if (!o.be->read) { /* zl:// without the kv client in this build */
		fprintf(stderr, "zl-ycsb: %s\n", o.be->error(NULL));
		return 1;
	}
	if ((uint64_t)o.w.fieldcount * o.w.fieldlength > (64u << 20))
		return usage("records of more than 64 MiB");
	if (o.depth > 1 && !o.be->batch)
		return usage("--depth: %s cannot have several operations in flight", o.be->scheme);
	if (o.depth > 1 && (uint64_t)o.depth * workload_recsize(&o.w) > (1u << 20))
		return usage("--depth x record size over 1 MiB (a batch is held in memory)");
	if (o.w.prop[OP_SCAN] > 0 && !o.be->scan) {
		printf("zl-ycsb: %s: workload %c: n/a (%s has no scan; YCSB's binding has none "
		       "either)\n", o.url, o.w.name, o.be->scheme);
		return 3;
	}
	if (o.w.prop[OP_SCAN] > 0 && strstr(o.url, "store=onesided")) {
		printf("zl-ycsb: %s: workload %c: n/a (the one-sided store is a hash table: "
		       "no scans)\n", o.url, o.w.name);
		return 3;
	}
	signal(SIGPIPE, SIG_IGN); /* a dead server is an error return, not a signal */

	char desc[160];
	workload_describe(&o.w, desc, sizeof(desc));
	printf("zl-ycsb: %s, workload %c: %s\n", o.url, o.w.name, desc);
	printf("  %lld records of %u field%s x %u B (one %zu-byte value per key), %lld operations, "
	       "%d thread%s, depth %d, %s, seed %llu\n",
	       (long long)o.w.records, o.w.fieldcount, o.w.fieldcount == 1 ? "" : "s",
	       o.w.fieldlength, workload_recsize(&o.w), (long long)o.w.ops, o.threads,
	       o.threads == 1 ? "" : "s", o.depth, o.target > 0 ? "throttled" : "unthrottled",
	       (unsigned long long)o.seed);
	if (o.target > 0)
		printf("  target %.0f ops/s (%.0f per thread)\n", o.target, o.target / o.threads);
	fflush(stdout);

	struct phase_result res[2];
	struct lat_stats st[2][OP_N + 1];
	const struct phase_result *rp[2];
	struct lat_stats *sp[2];
	int np = 0, rc = 0;
	for (int p = 0; p < 2 && !rc; p++) {
		if (!(p == 0 ? do_load : do_run))
			continue;
		if (run_phase(&o, p == 0 ? PHASE_LOAD : PHASE_RUN, &res[np])) {
			rc = 1;
			break;
		}
		if (report_phase(&o, &res[np], st[np]) < 0)
			rc = 1;
		rp[np] = &res[np];
		sp[np] = st[np];
		np++;
	}
	if (!rc && o.plot && np && plot_png(&o, rp, sp, np) == 0)
		printf("plot: %s\n", o.plot);
	for (int p = 0; p < np; p++)
		phase_result_free(&res[p]);
	return rc;
}
