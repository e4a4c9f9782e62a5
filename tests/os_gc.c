/* SPDX-License-Identifier: MIT */
/*
 * os_gc: the one-sided store's collector under full load loses no live
 * key, and no reader ever gets a moved container's stale bytes.
 *
 * The server (in this process) has an 8 MiB data space of 256 KiB regions
 * and a table of 8192 slots (2048 scaled down), so that clients give full
 * regions back all the time (each is collected: its live containers are
 * copied into the server's regions), the server's own regions are
 * collected in turn, and deleted entries pass nslots/8 between scans (the
 * chain cleanup runs, moving entries to other slots with fresh copies).
 *
 * W writer processes own disjoint keys: STABLE each written once at the
 * start and never again, and CHURN each overwritten, deleted and
 * re-created at random. A value carries (key, writer, seq, length) and a
 * pattern derived from them; seq grows with every write of the writer. A
 * writer also reads its own keys: each must be exactly its last write, or
 * absent if it deleted it last (it is the only one writing them). R reader
 * processes read random keys of every writer: a value must be intact and
 * belong to the key and its writer, stable keys must be there, and per key
 * the seq never goes backwards (a moved copy read after the move, or an
 * old copy of a collected region, would show an older seq). The run lasts
 * RUN_S seconds; meanwhile this process polls the server's OS_STATS.
 * Then: every key reads back exactly its final state (the writers publish
 * it in shared memory), and gc_runs, gc_copied and cleanups were all
 * above 0 while the clients ran.
 *
 * Before the load, the same in slow motion ("walks across a cleanup"), on
 * a server of its own with 1024 slots: table.c's own GET and SET run over
 * the shared chunk (mapped as client.c does) through an os_io that stops
 * the walk right after its first read of entries, until the server's
 * cleanup has rebuilt the chain under it: a slow or descheduled client.
 * The chain: n+1 keys with one home slot (n: the entries one read takes),
 * the first deleted, the last, K, one slot past that first read; the
 * cleanup moves K back by one slot, into the part already read, and
 * empties the slot K left. Then
 *   - a GET of K (never deleted) must return K's value, not -ENOENT;
 *   - a SET of K (the walk paused under table.c's 100 ms ABA bound: it is
 *     started just before a scan) must leave K reading the new value, not
 *     the moved old copy; after a DELETE of K and another cleanup, K must
 *     stay deleted (a second entry for K behind the first would come back).
 * Exit 0 pass, 1 fail.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "layout.h"
#include "os_lib.h"
#include "os_proto.h"
#include "sockutil.h"
#include "table.h"

#define W 3
#define R 2
#define RUN_S 3
#define MAGIC 0x5a4c4743u /* "ZLGC" */
#define MAXV 1024u

static uint32_t stable_n, churn_n, per_w; /* keys per writer */

/* Per process: operations done, and errors tolerated. */
struct pstat {
	atomic_ullong puts, dels, gets, eagain, enospc, absent, stale_checks;
};

/* Shared by all processes (MAP_SHARED, set up before fork). */
struct shared {
	atomic_int url_set; /* children are forked before the server's threads
	                       exist (a fork beside them can inherit a lock one
	                       holds), and wait for its URL here */
	struct ost_server srv;
	atomic_int ready; /* writers done with their first writes */
	atomic_int stop;
	struct pstat st[W + R];
	atomic_ullong final[]; /* per key: seq of its last write, 0 deleted */
};
static struct shared *sh;

static uint32_t owner(uint32_t key) { return key / per_w; }
static bool is_stable(uint32_t key) { return key % per_w < stable_n; }

static void key_name(uint32_t key, char *k, size_t *klen)
{
	*klen = (size_t)snprintf(k, 32, "gc-%u", key);
}

static size_t make_val(uint8_t *v, uint32_t key, uint32_t writer, uint64_t seq)
{
	return ost_make_val(v, MAGIC, MAXV, key, writer, seq);
}

static uint64_t check_val(const char *who, uint32_t key, const void *v, size_t vl)
{
	return ost_check_val(who, MAGIC, MAXV, UINT64_MAX, key, owner(key), v, vl);
}

/* ---- processes ------------------------------------------------------------ */

static const struct ost_server *srv;

static pid_t spawn(int (*fn)(int), int arg)
{
	fflush(NULL);
	pid_t parent = getpid(), pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(T_EXIT_FAIL);
		tl_watchdog(90);
		for (int64_t end = tl_now_us() + 60000000; !atomic_load(&sh->url_set);
		     tl_sleep_us(1000))
			CHECKF(tl_now_us() < end, "no server after 60 s");
		srv = &sh->srv; /* its URLs */
		tl_exit(fn(arg));
	}
	return pid;
}

static int writer(int w)
{
	char who[16];
	snprintf(who, sizeof(who), "writer %d", w);
	zl_kv *kv = ost_connect(srv);
	struct tl_rng rng = { 0x5eed0000ull + (uint64_t)w * 7919 + (uint64_t)getpid() };
	uint8_t *val = malloc(MAXV);
	uint64_t *model = calloc(per_w, sizeof(uint64_t));
	CHECK(val && model);
	uint64_t seq = 0;
	uint32_t base = (uint32_t)w * per_w;
	struct pstat *st = &sh->st[w];
	/* every key once: the stable ones for good */
	for (uint32_t j = 0; j < per_w; j++) {
		char k[32];
		size_t kl;
		key_name(base + j, k, &kl);
		size_t vl = make_val(val, base + j, (uint32_t)w, ++seq);
		int rc = zl_kv_put(kv, k, kl, val, vl, OST_TMO);
		CHECKF(rc == 0, "%s: first put of key %u: %s", who, base + j, zl_strerror(rc));
		model[j] = seq;
		atomic_store(&sh->final[base + j], seq);
		st->puts++;
	}
	atomic_fetch_add(&sh->ready, 1);
	while (!atomic_load(&sh->stop)) {
		uint32_t j = stable_n + (uint32_t)tl_rand_below(&rng, churn_n);
		uint32_t key = base + j, r = (uint32_t)tl_rand_below(&rng, 100);
		if (r < 8) /* now and then a stable key, which must not move back */
			j = (uint32_t)tl_rand_below(&rng, stable_n), key = base + j, r = 99;
		char k[32];
		size_t kl;
		key_name(key, k, &kl);
		int rc;
		if (r < 45) {
			size_t vl = make_val(val, key, (uint32_t)w, ++seq);
			rc = zl_kv_put(kv, k, kl, val, vl, OST_TMO);
			if (!rc) {
				model[j] = seq;
				atomic_store(&sh->final[key], seq);
				st->puts++;
			}
		} else if (r < 70) {
			rc = zl_kv_del(kv, k, kl, OST_TMO);
			if (!rc) {
				CHECKF(model[j], "%s: deleted key %u, which it had deleted", who, key);
				model[j] = 0;
				atomic_store(&sh->final[key], 0);
				st->dels++;
			} else if (rc == -ENOENT) {
				CHECKF(!model[j], "%s: key %u (seq %llu) absent for its delete", who,
				       key, (unsigned long long)model[j]);
				rc = 0;
			}
		} else {
			const void *v;
			size_t vl;
			rc = zl_kv_get(kv, k, kl, &v, &vl, NULL, OST_TMO);
			if (!rc) {
				CHECKF(model[j], "%s: key %u, deleted, reads back", who, key);
				uint64_t got = check_val(who, key, v, vl);
				CHECKF(got == model[j],
				       "%s: key %u reads seq %llu, its last write was seq %llu", who,
				       key, (unsigned long long)got, (unsigned long long)model[j]);
				st->gets++;
			} else if (rc == -ENOENT) {
				CHECKF(!model[j], "%s: key %u (last write seq %llu) is gone", who, key,
				       (unsigned long long)model[j]);
				st->gets++;
				rc = 0;
			}
		}
		if (rc == -EAGAIN) {
			st->eagain++;
		} else if (rc == -ENOSPC) {
			st->enospc++;
			tl_sleep_us(1000);
		} else {
			CHECKF(rc == 0, "%s: key %u, op %u: %s", who, key, r, zl_strerror(rc));
		}
	}
	zl_kv_close(kv);
	free(val);
	free(model);
	return 0;
}

static int reader(int i)
{
	char who[16];
	snprintf(who, sizeof(who), "reader %d", i);
	zl_kv *kv = ost_connect(srv);
	uint32_t nkeys = W * per_w;
	uint64_t *last = calloc(nkeys, sizeof(uint64_t));
	CHECK(last);
	struct tl_rng rng = { 0x7ead0000ull + (uint64_t)i * 104729 + (uint64_t)getpid() };
	struct pstat *st = &sh->st[W + i];
	while (atomic_load(&sh->ready) < W)
		tl_sleep_us(1000);
	while (!atomic_load(&sh->stop)) {
		uint32_t key = (uint32_t)tl_rand_below(&rng, nkeys);
		char k[32];
		size_t kl;
		key_name(key, k, &kl);
		const void *v;
		size_t vl;
		int rc = zl_kv_get(kv, k, kl, &v, &vl, NULL, OST_TMO);
		if (!rc) {
			uint64_t seq = check_val(who, key, v, vl);
			CHECKF(seq >= last[key],
			       "%s: key %u went back from seq %llu to seq %llu (a stale copy)", who,
			       key, (unsigned long long)last[key], (unsigned long long)seq);
			if (last[key])
				st->stale_checks++;
			last[key] = seq;
		} else if (rc == -ENOENT) {
			CHECKF(!is_stable(key), "%s: stable key %u is gone", who, key);
			st->absent++;
		} else if (rc == -EAGAIN) {
			st->eagain++;
		} else {
			FAIL("%s: get of key %u: %s", who, key, zl_strerror(rc));
		}
		st->gets++;
	}
	zl_kv_close(kv);
	free(last);
	return 0;
}

/* ---- walks across a cleanup (slow motion) ---------------------------------- */

static void stats(zl_client *cli, struct os_stats_rep *out);

/* A raw session: HELLO on cli, the chunk's memfd from the server's abstract
 * socket (as client.c's map_shm), mapped read-write. */

static struct {
	uint8_t *base;
	uint64_t table_off, table_end, data_off;
	zl_client *cli;
	bool armed;       /* stop after the next read of entries */
	int64_t pause_us; /* for at most this long */
	bool cleaned;     /* a cleanup ran while the walk was stopped */
	uint32_t first_len;
} wk;

static uint64_t cleanups_now(void)
{
	struct os_stats_rep r;
	stats(wk.cli, &r);
	return r.cleanups;
}

static int wk_read(void *ctx, uint64_t off, void *dst, uint32_t len)
{
	(void)ctx;
	if (off >= wk.data_off) {
		memcpy(dst, wk.base + off, len);
		return 0;
	}
	const uint64_t *src = (const uint64_t *)(wk.base + off);
	uint64_t *d = dst;
	for (uint32_t i = 0; i < len / 8; i++)
		d[i] = __atomic_load_n(&src[i], __ATOMIC_ACQUIRE);
	if (off < wk.table_off || off >= wk.table_end)
		return 0; /* not entries */
	if (!wk.first_len)
		wk.first_len = len;
	if (wk.armed) {
		wk.armed = false;
		uint64_t c0 = cleanups_now();
		int64_t end = tl_now_us() + wk.pause_us;
		while (!(wk.cleaned = cleanups_now() != c0) && tl_now_us() < end)
			tl_sleep_us(1000);
	}
	return 0;
}

static int wk_write(void *ctx, uint64_t off, const void *src, uint32_t len)
{
	(void)ctx;
	if (wk.base + off != src)
		memcpy(wk.base + off, src, len);
	return 0;
}

static int wk_cas(void *ctx, uint64_t off, uint64_t expect, uint64_t desired, uint64_t *old)
{
	(void)ctx;
	__atomic_compare_exchange_n((uint64_t *)(wk.base + off), &expect, desired, false,
				    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	*old = expect;
	return 0;
}

static int wk_sync(void *ctx)
{
	(void)ctx;
	return 0;
}

#define WK_SLOTS 1024u

/* n+1 keys named prefix-* with one home slot in [lo, lo+100): the first
 * deleted; then more deleted entries than nslots/8 elsewhere, so that the
 * next scan cleans. keys[n] is K. Returns the home slot. */
static uint64_t wk_chain(zl_kv *kv, const char *prefix, uint32_t n, char (*keys)[32],
			 uint64_t lo)
{
	uint32_t nk = 0;
	uint64_t home = 0, mask = WK_SLOTS - 1;
	for (int i = 0; nk < n + 1; i++) {
		char k[32];
		snprintf(k, sizeof(k), "%s-%d", prefix, i);
		uint64_t hh = os_hash(k, strlen(k)) & mask;
		if (nk ? hh != home : hh < lo || hh >= lo + 100)
			continue;
		home = hh;
		memcpy(keys[nk++], k, sizeof(k));
	}
	for (uint32_t i = 0; i < nk; i++)
		CHECK_OK(zl_kv_put(kv, keys[i], strlen(keys[i]), "old", 3, OST_TMO));
	CHECK_OK(zl_kv_del(kv, keys[0], strlen(keys[0]), OST_TMO));
	for (int i = 0, m = 0; m < (int)WK_SLOTS / 8 + 40; i++) {
		char k[32];
		snprintf(k, sizeof(k), "%s-fill-%d", prefix, i);
		uint64_t hh = os_hash(k, strlen(k)) & mask;
		if (hh >= 100 && hh < 800)
			continue;
		CHECK_OK(zl_kv_put(kv, k, strlen(k), "f", 1, OST_TMO));
		CHECK_OK(zl_kv_del(kv, k, strlen(k), OST_TMO));
		m++;
	}
	return home;
}

/* Wait for the next cleanup (at most 5 s); false if none came. */
static bool wk_next_cleanup(void)
{
	uint64_t c0 = cleanups_now();
	int64_t end = tl_now_us() + 5000000;
	while (cleanups_now() == c0)
		if (tl_now_us() > end)
			return false;
		else
			tl_sleep_us(2000);
	return true;
}

/* Returns the number of wrong results (printed). */
static int walks_across_cleanup(void)
{
	struct zl_kvos_opts o;
	zl_kvos_opts_init(&o);
	o.mem = 4u << 20;
	o.region_len = 256u << 10;
	o.nslots = WK_SLOTS;
	struct ost_server s;
	ost_start(&s, &o);
	zl_kv *kv = ost_connect(&s);
	CHECK_OK(zl_client_connect(s.plain, NULL, OST_TMO, &wk.cli));
	struct os_hello_rep h;
	wk.base = ost_map_chunk(wk.cli, &h, PROT_READ | PROT_WRITE);
	wk.data_off = h.data_off;
	wk.table_off = h.table_off;
	wk.table_end = h.table_off + h.nslots * 8;
	CHECK(h.nslots == WK_SLOTS);
	struct os_region_req rq = { .release = OS_NONE, .want = 1 };
	const void *p;
	size_t n;
	CHECK_OK(zl_call(wk.cli, OS_REGION, &rq, sizeof(rq), &p, &n, OST_TMO));
	struct os_region_rep rr;
	CHECK(n == sizeof(rr));
	memcpy(&rr, p, n);
	CHECK(rr.status == 0);
	uint64_t rpos = 0;

	struct os_geom g = { .chunk_len = h.chunk_len, .table_off = h.table_off,
			     .nslots = h.nslots, .data_off = h.data_off, .data_len = h.data_len,
			     .region_len = h.region_len, .nregions = h.nregions };
	struct os_io io = { wk_read, wk_write, wk_cas, wk_sync, NULL };
	struct os_table t;
	CHECK_OK(os_table_init(&t, &g, &io));
	t.load = 0;
	t.budget_us = 30000000; /* above the pause below */
	const uint8_t *v;
	uint32_t vl;
	uint64_t ver;
	CHECK_RC(os_get(&t, "x", 1, &v, &vl, &ver), -ENOENT);
	uint32_t nch = wk.first_len / 8; /* entries one read takes */
	CHECK(nch >= 1 && nch < 60);
	char keys[64][32];
	int bad = 0;
	const void *kvv;
	size_t kvl;

	/* a GET stopped across the cleanup */
	uint64_t home = wk_chain(kv, "g", nch, keys, 200);
	const char *K = keys[nch];
	wk.armed = true;
	/* the pause ends with the cleanup; 20 s bounds it where a cleanup is
	 * slow (the emulated VM took more than 5 s once in two runs) */
	wk.pause_us = 20000000;
	int rc = os_get(&t, K, (uint32_t)strlen(K), &v, &vl, &ver);
	CHECKF(wk.cleaned, "no cleanup ran within 20 s (%u deleted entries, %u slots)",
	       WK_SLOTS / 8 + 41, WK_SLOTS);
	if (rc || vl != 3 || memcmp(v, "old", 3)) {
		fprintf(stderr,
			"walk across a cleanup: GET of %s (home %llu, slot %llu, never deleted) "
			"stopped after its first read of %u entries while the cleanup ran: %s\n",
			K, (unsigned long long)home, (unsigned long long)(home + nch), nch,
			rc ? zl_strerror(rc) : "a wrong value");
		bad++;
	} else {
		printf("walk across a cleanup: GET of a key moved back into the part read: ok\n");
	}

	/* a SET stopped across the cleanup, under the ABA bound */
	bool done = false;
	for (int attempt = 0; attempt < 4 && !done; attempt++) {
		char prefix[8];
		snprintf(prefix, sizeof(prefix), "s%d", attempt);
		struct os_stats_rep r0, r1;
		stats(wk.cli, &r0);
		do {
			tl_sleep_us(1000);
			stats(wk.cli, &r1);
		} while (r1.scans == r0.scans);
		int64_t t_scan = tl_now_us(); /* the next one: 1 s (+ a 10 ms tick) on */
		home = wk_chain(kv, prefix, nch, keys, 300 + 100 * (uint64_t)attempt);
		K = keys[nch];
		int64_t wait = t_scan + 1000000 - 25000 - tl_now_us();
		if (wait > 0)
			tl_sleep_us(wait);
		wk.armed = true;
		wk.pause_us = 80000;
		struct os_wctx w = { .off = rr.off + rpos, .local = wk.base + rr.off + rpos,
				     .version = 1000 + (uint64_t)attempt };
		rpos += os_ct_size(strlen(K), 3);
		rc = os_set(&t, K, (uint32_t)strlen(K), "new", 3, UINT64_MAX, &w);
		CHECKF(rc == 0, "SET of %s: %s", K, zl_strerror(rc));
		if (!wk.cleaned)
			continue; /* the cleanup did not come in time: again, on new keys */
		done = true;
		int bad0 = bad;
		rc = zl_kv_get(kv, K, strlen(K), &kvv, &kvl, NULL, OST_TMO);
		if (rc || kvl != 3 || memcmp(kvv, "new", 3)) {
			fprintf(stderr,
				"walk across a cleanup: SET of %s (\"old\" -> \"new\", stopped "
				"after its first read of %u entries while the cleanup ran) "
				"returned 0, then GET: %s%.*s%s\n",
				K, nch, rc ? zl_strerror(rc) : "\"", rc ? 0 : (int)kvl,
				rc ? "" : (const char *)kvv, rc ? "" : "\"");
			bad++;
		}
		CHECK_OK(zl_kv_del(kv, K, strlen(K), OST_TMO));
		CHECK_RC(zl_kv_get(kv, K, strlen(K), &kvv, &kvl, NULL, OST_TMO), -ENOENT);
		wk_chain(kv, "z", 0, keys, 900); /* deletes enough for the next cleanup */
		CHECK(wk_next_cleanup());
		rc = zl_kv_get(kv, K, strlen(K), &kvv, &kvl, NULL, OST_TMO);
		if (rc != -ENOENT) {
			fprintf(stderr,
				"walk across a cleanup: %s, deleted, is back after the next "
				"cleanup: %s%.*s%s\n",
				K, rc ? zl_strerror(rc) : "\"", rc ? 0 : (int)kvl,
				rc ? "" : (const char *)kvv, rc ? "" : "\"");
			bad++;
		}
		if (bad == bad0)
			printf("walk across a cleanup: SET: ok\n");
	}
	if (!done)
		printf("walk across a cleanup: SET: the cleanup never came within the walk's "
		       "80 ms stop (4 tries): not checked\n");
	os_table_fini(&t);
	munmap(wk.base, h.chunk_len);
	zl_client_close(wk.cli);
	zl_kv_close(kv);
	ost_stop(&s);
	return bad;
}

/* ---- this process ---------------------------------------------------------- */

static void stats(zl_client *cli, struct os_stats_rep *out)
{
	*out = ost_stats(cli);
}

static void print_stats(const char *when, const struct os_stats_rep *s)
{
	printf("%s: gc_runs %llu gc_copied %llu gc_holes %llu cleanups %llu cleanup_moved %llu "
	       "scans %llu live %llu deleted %llu holes %llu regions free %llu server %llu "
	       "expired %llu\n",
	       when, (unsigned long long)s->gc_runs, (unsigned long long)s->gc_copied,
	       (unsigned long long)s->gc_holes, (unsigned long long)s->cleanups,
	       (unsigned long long)s->cleanup_moved, (unsigned long long)s->scans,
	       (unsigned long long)s->live, (unsigned long long)s->deleted,
	       (unsigned long long)s->holes, (unsigned long long)s->regions_free,
	       (unsigned long long)s->regions_server, (unsigned long long)s->expired);
}

int main(void)
{
	tl_watchdog(150);
	bool scaled = tl_scaled_down();
	uint64_t nslots = scaled ? 2048 : 8192;
	stable_n = scaled ? 40 : 150;
	churn_n = scaled ? 210 : 850;
	per_w = stable_n + churn_n;
	uint32_t nkeys = W * per_w;
	size_t shlen = sizeof(struct shared) + nkeys * sizeof(atomic_ullong);
	sh = mmap(NULL, shlen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);

	int wrong = walks_across_cleanup();

	struct zl_kvos_opts o;
	zl_kvos_opts_init(&o);
	o.mem = 8u << 20;
	o.region_len = 256u << 10;
	o.nslots = nslots;
	o.max_regions = 2;
	o.hb_window_us = 2000000;
	pid_t pids[W + R];
	for (int w = 0; w < W; w++)
		pids[w] = spawn(writer, w);
	for (int i = 0; i < R; i++)
		pids[W + i] = spawn(reader, i);
	static struct ost_server s;
	ost_start(&s, &o);
	srv = &s;
	sh->srv = s;
	atomic_store(&sh->url_set, 1);
	printf("%u writers, %u readers, %u keys each (%u stable), %llu slots, %llu MiB of %llu "
	       "KiB regions, %d s\n",
	       W, R, per_w, stable_n, (unsigned long long)nslots,
	       (unsigned long long)(o.mem >> 20), (unsigned long long)(o.region_len >> 10), RUN_S);

	zl_client *cli;
	CHECK_OK(zl_client_connect(s.plain, NULL, OST_TMO, &cli));
	int64_t t0 = tl_now_us();
	while (atomic_load(&sh->ready) < W) {
		CHECKF(tl_now_us() - t0 < 60000000, "writers not ready after 60 s");
		for (int k = 0; k < W + R; k++) {
			int st;
			CHECKF(waitpid(pids[k], &st, WNOHANG) == 0, "process %d ended early", k);
		}
		tl_sleep_us(2000);
	}
	struct os_stats_rep st0, st1;
	stats(cli, &st0);
	print_stats("after the first writes", &st0);
	int64_t start = tl_now_us(), end = start + RUN_S * 1000000ll;
	bool died = false;
	while (tl_now_us() < end && !died) {
		tl_sleep_us(100000);
		for (int k = 0; k < W + R && !died; k++) {
			int st;
			died = waitpid(pids[k], &st, WNOHANG) != 0;
			if (died) {
				fprintf(stderr, "process %d (%s) ended early: %s %d\n", k,
					k < W ? "writer" : "reader",
					WIFEXITED(st) ? "exit" : "signal",
					WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
				pids[k] = 0;
			}
		}
	}
	stats(cli, &st1); /* while everyone still runs */
	atomic_store(&sh->stop, 1);
	int fails = died;
	for (int k = 0; k < W + R; k++) {
		if (!pids[k])
			continue;
		int st = -1;
		int64_t dl = tl_now_us() + 30000000;
		pid_t r;
		while ((r = waitpid(pids[k], &st, WNOHANG)) == 0 && tl_now_us() < dl)
			tl_sleep_us(2000);
		if (r == 0) {
			kill(pids[k], SIGKILL);
			waitpid(pids[k], &st, 0);
			fprintf(stderr, "process %d did not stop within 30 s\n", k);
			fails++;
		} else if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "process %d (%s): %s %d\n", k, k < W ? "writer" : "reader",
				WIFEXITED(st) ? "exit" : "signal",
				WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			fails++;
		}
	}
	if (fails)
		FAIL("%d of %d processes failed", fails, W + R);

	uint64_t puts = 0, dels = 0, wgets = 0, rgets = 0, eagain = 0, enospc = 0, absent = 0,
		 checks = 0;
	for (int k = 0; k < W + R; k++) {
		puts += sh->st[k].puts;
		dels += sh->st[k].dels;
		*(k < W ? &wgets : &rgets) += sh->st[k].gets;
		eagain += sh->st[k].eagain;
		enospc += sh->st[k].enospc;
		absent += sh->st[k].absent;
		checks += sh->st[k].stale_checks;
	}
	double secs = (double)(tl_now_us() - start) / 1e6;
	printf("%.1f s: %llu puts, %llu deletes, %llu writer gets, %llu reader gets (%llu absent, "
	       "%llu seq order checks), %llu -EAGAIN, %llu -ENOSPC\n",
	       secs, (unsigned long long)puts, (unsigned long long)dels,
	       (unsigned long long)wgets, (unsigned long long)rgets, (unsigned long long)absent,
	       (unsigned long long)checks, (unsigned long long)eagain,
	       (unsigned long long)enospc);
	print_stats("at the end of the load", &st1);

	/* every key: exactly its final state */
	zl_kv *kv = ost_connect(&s);
	uint64_t live = 0;
	for (uint32_t key = 0; key < nkeys; key++) {
		char k[32];
		size_t kl;
		key_name(key, k, &kl);
		uint64_t want = atomic_load(&sh->final[key]);
		const void *v;
		size_t vl;
		int rc = zl_kv_get(kv, k, kl, &v, &vl, NULL, OST_TMO);
		if (!want) {
			CHECKF(rc == -ENOENT, "key %u, deleted last, reads: %s", key, zl_strerror(rc));
			continue;
		}
		CHECKF(rc == 0, "key %u (last write seq %llu%s) reads: %s", key,
		       (unsigned long long)want, is_stable(key) ? ", stable" : "",
		       zl_strerror(rc));
		uint64_t got = check_val("final", key, v, vl);
		CHECKF(got == want, "key %u reads seq %llu, its last write was seq %llu", key,
		       (unsigned long long)got, (unsigned long long)want);
		live++;
	}
	printf("all %u keys read back their final state (%llu live)\n", nkeys,
	       (unsigned long long)live);
	CHECKF(st1.gc_runs > 0, "no GC run during the load");
	CHECKF(st1.gc_copied > 0, "GC copied no container during the load");
	CHECKF(st1.cleanups > 0, "no table cleanup during the load");
	CHECKF(st1.gc_holes == 0, "%llu entries of honest clients became holes",
	       (unsigned long long)st1.gc_holes);
	zl_kv_close(kv);
	zl_client_close(cli);
	ost_stop(&s);
	munmap(sh, shlen);
	if (wrong)
		FAIL("%d wrong results of walks across a cleanup (above)", wrong);
	printf("os_gc: ok\n");
	return 0;
}
