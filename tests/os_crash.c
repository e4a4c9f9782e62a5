/* SPDX-License-Identifier: MIT */
/*
 * Clients of the one-sided store killed with SIGKILL in the middle of SET
 * and DELETE, N times (1000; a quarter under sanitizers), against an
 * in-process server with a short heartbeat window (150 ms) and small
 * regions (128 of 256 KiB, 2 per client), so the regions of the dead
 * matter: dead sessions (up to ~60 at once here) hold regions until they
 * expire.
 *
 * A survivor (a handle in this process) first writes 200 keys of its own.
 * Then children, each with its own session (connect, HELLO, the memfd),
 * run SET, DELETE (and some GET, checked) on 32 shared keys as fast as
 * they can; once a child says it runs, it is killed after a random 0..2 ms
 * (SLOTS children at once, so connects overlap: a connect takes ~10 ms,
 * mostly waiting for the collector's tick to hand out the memfd, so one
 * at a time would take ~10 s for 1000; 1 in 20 is killed at a random time
 * after fork instead, often inside its connect or HELLO). A "killer"
 * process forked before the server's threads exist forks and kills them
 * (a process with threads cannot fork safely under the sanitizers). The
 * survivor re-checks its keys and rewrites a few every 50 kills (its
 * session expires in between and starts over). Afterwards:
 *   (a) every survivor key reads its exact last value, before and after
 *       the collector has cleaned up;
 *   (b) every shared key is absent or holds an intact value a child wrote
 *       (header: child, seq, key, length; pattern from all four);
 *   (c) after the heartbeat window (plus the collector's 10 ms tick and a
 *       1 s scan): every session has ended, by expiry or because the server
 *       saw its connection end (expired + dropped grew by at least the
 *       kills), no region is held by a client or awaits collection
 *       (regions_free + regions_server + quarantined == all regions: an
 *       idle survivor's expired session keeps its region out of use until
 *       it speaks again), gc_runs grew; and a
 *       raw walk of the table (through the in-process server's own mapping;
 *       nothing added to the library) finds no lock bit, every entry's
 *       container valid for its (slot, tag) and inside a server region,
 *       each key once, no empty slot between a key's home and its slot, and
 *       exactly the keys and counts GET and the STATS scan report.
 */
#include <errno.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "os_lib.h"
#include "os_proto.h"
#if __has_include("os_server.h")
#include "os_server.h" /* the server's state: the raw walk */
#else
#include "server.h"
#endif

#define SLOTS 4   /* children at once */
#define NSURV 200 /* survivor keys */
#define NSHARED 32
#define CMAGIC 0x4f534b21u
#define CHDR 20u
#define HB_US 150000

struct slot {
	_Atomic int running; /* the child is connected and writing */
	_Atomic int in_op;   /* 0 none, 1 SET, 2 DELETE, 3 GET */
	_Atomic uint64_t ops;
};

struct shared {
	char url[640];             /* the server's, once go */
	_Atomic int go, done;      /* done: the killer finished (1 ok, 2 failed) */
	uint32_t n_kills;
	uint64_t seed;
	struct slot slot[SLOTS];
	_Atomic uint64_t sets, dels, gets, enospc, eagain;
	_Atomic int failed;        /* a child found something */
	char msg[512];
	/* the killer's figures */
	_Atomic uint32_t launched, killed, early;
	uint32_t in_op[4], connects;
	uint64_t ops_at_kill;
	int64_t connect_sum, loop_us;
	char kmsg[640]; /* what, status and msg */
};

static struct shared *sh;
static char skey[NSHARED][16];

/* ---- values ---------------------------------------------------------------- */

static uint64_t c_id(uint32_t child, uint32_t seq, uint32_t key, uint32_t len)
{
	return ((uint64_t)child << 40) ^ ((uint64_t)key << 32) ^ ((uint64_t)len << 20) ^ seq;
}

static void c_make(uint8_t *v, uint32_t child, uint32_t seq, uint32_t key, uint32_t len)
{
	uint32_t h[5] = { CMAGIC, child, seq, key, len };
	memcpy(v, h, CHDR);
	tl_fill(v + CHDR, len - CHDR, c_id(child, seq, key, len));
}

/* NULL if v is an intact child value of key (child < nchild), else why. */
static const char *c_check(const uint8_t *v, size_t len, uint32_t key, uint32_t nchild,
			   char *why, size_t n)
{
	uint32_t h[5];
	if (len < CHDR) {
		snprintf(why, n, "%zu bytes, shorter than any value written", len);
		return why;
	}
	memcpy(h, v, CHDR);
	if (h[0] != CMAGIC || h[1] >= nchild || h[3] != key || h[4] != len) {
		snprintf(why, n, "header %08x child %u seq %u key %u len %u, read %zu bytes of key %u",
			 h[0], h[1], h[2], h[3], h[4], len, key);
		return why;
	}
	size_t b = tl_verify(v + CHDR, len - CHDR, c_id(h[1], h[2], key, (uint32_t)len));
	if (b != (size_t)-1) {
		snprintf(why, n, "value of child %u seq %u (%zu bytes) corrupt at byte %zu", h[1],
			 h[2], len, b + CHDR);
		return why;
	}
	return NULL;
}

static uint32_t s_len(int i)
{
	return 24 + (uint32_t)(i * 37) % 1500;
}

static uint64_t s_id(int i, uint32_t gen)
{
	return 0x5500000000ull + (uint64_t)i * 65536 + gen;
}

/* ---- the children ---------------------------------------------------------- */

static void child_fail(const char *what, const char *key, const char *detail)
{
	int expect = 0;
	if (atomic_compare_exchange_strong(&sh->failed, &expect, 1))
		snprintf(sh->msg, sizeof(sh->msg), "%s %s: %s", what, key, detail);
	tl_exit(2);
}

static void child(int slot, uint32_t id, uint64_t seed)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	tl_watchdog(30);
	struct slot *me = &sh->slot[slot];
	zl_kv *kv = NULL;
	int rc = zl_kv_connect(sh->url, NULL, OST_TMO, &kv);
	if (rc)
		child_fail("child connect", sh->url, zl_strerror(rc));
	struct tl_rng g = { seed ^ ((uint64_t)id << 20) };
	uint8_t val[1200];
	char why[256];
	uint32_t seq = 0;
	atomic_store(&me->running, 1);
	for (;;) {
		uint32_t k = (uint32_t)tl_rand_below(&g, NSHARED);
		size_t kl = strlen(skey[k]);
		uint64_t p = tl_rand_below(&g, 100);
		if (p < 60) {
			uint32_t len = CHDR + (uint32_t)tl_rand_below(&g, sizeof(val) - CHDR + 1);
			c_make(val, id, ++seq, k, len);
			atomic_store_explicit(&me->in_op, 1, memory_order_relaxed);
			rc = zl_kv_put(kv, skey[k], kl, val, len, OST_TMO);
			atomic_store_explicit(&me->in_op, 0, memory_order_relaxed);
			atomic_fetch_add(&sh->sets, 1);
			if (rc == -ENOSPC)
				atomic_fetch_add(&sh->enospc, 1);
			else if (rc == -EAGAIN)
				atomic_fetch_add(&sh->eagain, 1);
			else if (rc)
				child_fail("child SET", skey[k], zl_strerror(rc));
		} else if (p < 90) {
			atomic_store_explicit(&me->in_op, 2, memory_order_relaxed);
			rc = zl_kv_del(kv, skey[k], kl, OST_TMO);
			atomic_store_explicit(&me->in_op, 0, memory_order_relaxed);
			atomic_fetch_add(&sh->dels, 1);
			if (rc == -EAGAIN)
				atomic_fetch_add(&sh->eagain, 1);
			else if (rc && rc != -ENOENT)
				child_fail("child DELETE", skey[k], zl_strerror(rc));
		} else {
			const void *v;
			size_t vl;
			atomic_store_explicit(&me->in_op, 3, memory_order_relaxed);
			rc = zl_kv_get(kv, skey[k], kl, &v, &vl, NULL, OST_TMO);
			atomic_store_explicit(&me->in_op, 0, memory_order_relaxed);
			atomic_fetch_add(&sh->gets, 1);
			if (rc == -EAGAIN)
				atomic_fetch_add(&sh->eagain, 1);
			else if (rc && rc != -ENOENT)
				child_fail("child GET", skey[k], zl_strerror(rc));
			else if (!rc && c_check(v, vl, k, UINT32_MAX, why, sizeof(why)))
				child_fail("child GET", skey[k], why);
		}
		atomic_fetch_add_explicit(&me->ops, 1, memory_order_relaxed);
	}
}

/* ---- the survivor ---------------------------------------------------------- */

static uint32_t gen[NSURV];

static void surv_key(int i, char *k)
{
	snprintf(k, 16, "surv/%03u", (unsigned)i % 1000u);
}

static void surv_put(zl_kv *kv, int i)
{
	char k[16];
	uint8_t v[1600];
	surv_key(i, k);
	tl_fill(v, s_len(i), s_id(i, gen[i]));
	int rc = zl_kv_put(kv, k, strlen(k), v, s_len(i), OST_TMO);
	CHECKF(rc == 0, "survivor SET %s: %s", k, zl_strerror(rc));
}

static void surv_check(zl_kv *kv, const char *when)
{
	for (int i = 0; i < NSURV; i++) {
		char k[16];
		const void *v;
		size_t vl;
		surv_key(i, k);
		int rc = zl_kv_get(kv, k, strlen(k), &v, &vl, NULL, OST_TMO);
		CHECKF(rc == 0, "%s: survivor key %s: %s", when, k, zl_strerror(rc));
		size_t b = vl == s_len(i) ? tl_verify(v, vl, s_id(i, gen[i])) : 0;
		CHECKF(b == (size_t)-1, "%s: survivor key %s: %zu bytes (want %u), wrong at %zu",
		       when, k, vl, s_len(i), b);
	}
}

/* (b): the shared keys; returns how many are present. */
static int shared_check(zl_kv *kv, uint32_t nchild, const char *when)
{
	int present = 0;
	char why[256];
	for (int k = 0; k < NSHARED; k++) {
		const void *v;
		size_t vl;
		int rc = zl_kv_get(kv, skey[k], strlen(skey[k]), &v, &vl, NULL, OST_TMO);
		CHECKF(rc == 0 || rc == -ENOENT, "%s: shared key %s: %s", when, skey[k],
		       zl_strerror(rc));
		if (rc)
			continue;
		present++;
		CHECKF(!c_check(v, vl, (uint32_t)k, nchild, why, sizeof(why)), "%s: shared key %s: %s",
		       when, skey[k], why);
	}
	return present;
}

/* ---- the server's view ----------------------------------------------------- */

static struct os_stats_rep stats(zl_client *c) { return ost_stats(c); }

struct walk {
	uint64_t live, deleted, holes, surv, shared;
	uint32_t free, srv, client, collect, quar;
};

/* A finding of the walk: reported only if the snapshot holds. */
static char wmsg[512];
#define WCHECK(cond, ...)                                                      \
	if (!(cond)) {                                                         \
		if (!wmsg[0])                                                  \
			snprintf(wmsg, sizeof(wmsg), __VA_ARGS__);             \
		continue;                                                      \
	}

/* Walk the quiet table through the server's mapping: a snapshot of every
 * word, its containers checked, then every word read again; if none
 * changed in between, the snapshot is what the table held at one moment.
 * 1: done, 0: a word changed or was locked (the collector's cleanup, which
 * runs after a scan when deletes pile up): try again. */
static int walk_table(struct zl_kvos *os, struct walk *w)
{
	const struct os_geom *g = &os->g;
	uint64_t mask = g->nslots - 1;
	uint8_t *buf = malloc(os_ct_size(ZL_KV_MAX_KEY, ZL_KV_MAX_VAL));
	uint8_t *rst = malloc(g->nregions);
	uint8_t *seen = calloc(NSURV + NSHARED, 1);
	uint64_t *snap = malloc(g->nslots * 8);
	CHECK(buf && rst && seen && snap);
	memset(w, 0, sizeof(*w));
	wmsg[0] = 0;
	pthread_mutex_lock(&os->mu);
	memcpy(rst, os->rstate, g->nregions);
	pthread_mutex_unlock(&os->mu);
	for (uint32_t r = 0; r < g->nregions; r++) {
		w->free += rst[r] == R_FREE;
		w->srv += rst[r] == R_SRV_CUR || rst[r] == R_SRV_FULL;
		w->client += rst[r] == R_CLIENT;
		w->collect += rst[r] == R_COLLECT;
		w->quar += rst[r] == R_QUAR;
	}
	int ok = 1;
	const _Atomic uint64_t *tab = (const _Atomic uint64_t *)(os->base + g->table_off);
	for (uint64_t i = 0; i < g->nslots; i++)
		snap[i] = atomic_load_explicit(&tab[i], memory_order_acquire);
	for (uint64_t i = 0; ok && i < g->nslots; i++) {
		uint64_t e = snap[i];
		if (os_e_locked(e)) {
			ok = 0;
			break;
		}
		if (os_e_off(e) == OS_OFF_EMPTY)
			continue;
		if (os_e_off(e) == OS_OFF_HOLE) {
			w->holes++;
			continue;
		}
		uint64_t pos = (uint64_t)os_e_off(e) * OS_UNIT;
		int64_t reg = os_region_of(os, pos);
		WCHECK(reg >= 0 && pos + os_ct_size(1, 0) <= g->data_off + g->data_len,
		       "slot %llu: word %016llx points outside the data space",
		       (unsigned long long)i, (unsigned long long)e);
		WCHECK(rst[reg] == R_SRV_CUR || rst[reg] == R_SRV_FULL,
		       "slot %llu: word %016llx points into region %lld in state %u (every "
		       "client has expired: only server regions should hold entries)",
		       (unsigned long long)i, (unsigned long long)e, (long long)reg, rst[reg]);
		memcpy(buf, os->base + pos, OS_CT_HDR);
		uint64_t sz = os_ct_check_hdr((const struct os_ct *)buf, (uint32_t)i, os_e_tag(e));
		WCHECK(sz && pos + sz <= g->data_off + g->data_len,
		       "slot %llu: word %016llx: no valid container header for (slot, tag)",
		       (unsigned long long)i, (unsigned long long)e);
		memcpy(buf + OS_CT_HDR, os->base + pos + OS_CT_HDR, sz - OS_CT_HDR);
		WCHECK(os_ct_check_key(buf) && (os_e_deleted(e) || os_ct_check_all(buf)),
		       "slot %llu: word %016llx: container CRC fails", (unsigned long long)i,
		       (unsigned long long)e);
		const struct os_ct *h = (const struct os_ct *)buf;
		const char *key = (const char *)buf + OS_CT_HDR;
		char ks[32] = "";
		memcpy(ks, key, h->klen < sizeof(ks) - 1 ? h->klen : sizeof(ks) - 1);
		int idx = -1;
		if (h->klen == 8 && !memcmp(key, "surv/", 5))
			idx = atoi(ks + 5);
		else if (h->klen > 6 && !memcmp(key, "crash/", 6))
			idx = NSURV + atoi(ks + 6);
		WCHECK(idx >= 0 && idx < NSURV + NSHARED, "slot %llu: unknown key \"%s\"",
		       (unsigned long long)i, ks);
		WCHECK(!seen[idx]++, "key %s in two slots", ks);
		/* linear probing: no empty slot between its home and here */
		uint64_t home = os_hash(key, h->klen) & mask, p = home;
		while (p != i && os_e_off(snap[p]) != OS_OFF_EMPTY)
			p = (p + 1) & mask;
		WCHECK(p == i, "key %s at slot %llu, but slot %llu after its home %llu is empty",
		       ks, (unsigned long long)i, (unsigned long long)p, (unsigned long long)home);
		if (os_e_deleted(e)) {
			w->deleted++;
		} else {
			w->live++;
			*(idx < NSURV ? &w->surv : &w->shared) += 1;
		}
	}
	for (uint64_t i = 0; ok && i < g->nslots; i++)
		ok = atomic_load_explicit(&tab[i], memory_order_acquire) == snap[i];
	free(buf);
	free(rst);
	free(seen);
	free(snap);
	if (ok && wmsg[0])
		FAIL("table: %s", wmsg);
	return ok;
}

/* ---- the killer ------------------------------------------------------------ */

/* Forked before any thread exists, it forks the children (a process with
 * threads cannot fork safely: a lock another thread holds at that moment,
 * such as the sanitizers' allocator's, stays locked in the child) and
 * kills them. */
struct kid {
	pid_t pid;
	bool early;
	int64_t forked, kill_at; /* us; kill_at 0: not scheduled */
};

static void reap_all(struct kid *kids)
{
	for (int i = 0; i < SLOTS; i++) {
		if (kids[i].pid > 0) {
			kill(kids[i].pid, SIGKILL);
			waitpid(kids[i].pid, NULL, 0);
			kids[i].pid = 0;
		}
	}
}

__attribute__((noreturn)) static void killer_fail(struct kid *kids, const char *what, int st)
{
	reap_all(kids);
	snprintf(sh->kmsg, sizeof(sh->kmsg), "%s (%s %d): %s", what,
		 WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
		 sh->msg);
	atomic_store(&sh->done, 2);
	tl_exit(1);
}

static void killer(int64_t budget_us)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	tl_watchdog(170);
	for (int64_t t = tl_now_us(); !atomic_load(&sh->go); tl_sleep_us(1000))
		if (tl_now_us() - t > 60000000)
			tl_exit(1);
	struct tl_rng g = { sh->seed ^ 0x4b494c4cull };
	struct kid kids[SLOTS] = { 0 };
	const uint32_t n_kills = sh->n_kills;
	uint32_t launched = 0, killed = 0, early = 0;
	int64_t t0 = tl_now_us();
	while (killed + early < n_kills) {
		int64_t now = tl_now_us();
		if (now - t0 > budget_us)
			break;
		for (int i = 0; i < SLOTS; i++) {
			struct kid *c = &kids[i];
			struct slot *sl = &sh->slot[i];
			if (!c->pid) {
				if (launched >= n_kills)
					continue;
				atomic_store(&sl->running, 0);
				atomic_store(&sl->in_op, 0);
				atomic_store(&sl->ops, 0);
				*c = (struct kid){ .early = tl_rand_below(&g, 20) == 0,
						   .forked = tl_now_us() };
				c->pid = fork();
				if (c->pid < 0)
					killer_fail(kids, "fork", 0);
				if (!c->pid)
					child(i, launched, sh->seed);
				if (c->early)
					c->kill_at = c->forked + 1 + (int64_t)tl_rand_below(&g, 3000);
				atomic_store(&sh->launched, ++launched);
				continue;
			}
			int st = 0;
			if (waitpid(c->pid, &st, WNOHANG) == c->pid) {
				c->pid = 0;
				killer_fail(kids, "a child exited by itself", st);
			}
			if (!c->kill_at) {
				if (atomic_load(&sl->running)) {
					/* within 2 ms of its start, so that kills land
					 * in calls; where calls are slower than that (the
					 * emulated VM) and 8 kills left no SET and DELETE
					 * done, within 50 ms */
					bool slow = killed >= 8 &&
						    !(atomic_load(&sh->sets) > atomic_load(&sh->enospc) &&
						      atomic_load(&sh->dels));
					c->kill_at = now + (int64_t)tl_rand_below(&g, slow ? 50001 : 2001);
					sh->connect_sum += now - c->forked;
					sh->connects++;
				} else if (now - c->forked > 20000000) {
					killer_fail(kids, "a child did not connect in 20 s", 0);
				}
			}
			if (c->kill_at && now >= c->kill_at) {
				int op = atomic_load(&sl->in_op);
				bool ran = atomic_load(&sl->running);
				kill(c->pid, SIGKILL);
				if (waitpid(c->pid, &st, 0) != c->pid)
					killer_fail(kids, "waitpid", 0);
				c->pid = 0;
				if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
					killer_fail(kids, "a child exited by itself", st);
				if (c->early && !ran) {
					atomic_store(&sh->early, ++early);
				} else {
					sh->in_op[op & 3]++;
					sh->ops_at_kill += atomic_load(&sl->ops);
					atomic_store(&sh->killed, ++killed);
				}
			}
		}
		tl_sleep_us(20);
	}
	reap_all(kids);
	sh->loop_us = tl_now_us() - t0;
	atomic_store(&sh->done, 1);
	tl_exit(0);
}

/* ---- the test -------------------------------------------------------------- */

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tl_watchdog(180);
	uint64_t seed = tl_seed();
	struct tl_rng g = { seed };
	const uint32_t n_kills = (uint32_t)tl_scaled(1000);
	const int64_t budget_us = 60000000; /* the kills stop here at the latest */
	for (int k = 0; k < NSHARED; k++)
		snprintf(skey[k], sizeof(skey[k]), "crash/%d", k);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	sh->n_kills = n_kills;
	sh->seed = seed;
	fflush(NULL);
	pid_t kpid = fork();
	CHECK(kpid >= 0);
	if (!kpid)
		killer(budget_us);

	struct zl_kvos_opts o;
	zl_kvos_opts_init(&o);
	o.mem = 32u << 20;
	o.region_len = 256u << 10;
	o.max_regions = 2;
	o.nslots = 1024;
	o.hb_window_us = HB_US;
	struct ost_server s;
	ost_start(&s, &o);
	const uint32_t nregions = (uint32_t)(o.mem / o.region_len);
	zl_client *sc = NULL;
	CHECK_OK(zl_client_connect(s.plain, NULL, OST_TMO, &sc));

	zl_kv *sv = ost_connect(&s);
	for (int i = 0; i < NSURV; i++)
		surv_put(sv, i);
	surv_check(sv, "before the kills");
	struct os_stats_rep st0 = stats(sc);
	printf("before: %llu regions free of %u, %llu server, %llu sessions\n",
	       (unsigned long long)st0.regions_free, nregions,
	       (unsigned long long)st0.regions_server, (unsigned long long)st0.clients);

	/* the kills; the survivor checks its keys, rewrites a few, and looks
	 * at the sessions every 50 */
	snprintf(sh->url, sizeof(sh->url), "%s", s.url);
	atomic_store(&sh->go, 1);
	uint32_t next = 50, max_sessions = 0, surv_rounds = 0;
	int64_t t0 = tl_now_us();
	for (;;) {
		int st = 0;
		if (waitpid(kpid, &st, WNOHANG) == kpid) {
			CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0 && atomic_load(&sh->done) == 1,
			       "the killer failed: %s", sh->kmsg[0] ? sh->kmsg : "(no message)");
			break;
		}
		CHECKF(tl_now_us() - t0 < budget_us + 30000000, "the killer hangs");
		if (atomic_load(&sh->killed) + atomic_load(&sh->early) >= next) {
			next += 50;
			surv_check(sv, "during the kills");
			for (int j = 0; j < 5; j++) {
				int i2 = (int)tl_rand_below(&g, NSURV);
				gen[i2]++;
				surv_put(sv, i2);
			}
			struct os_stats_rep sr = stats(sc);
			if (sr.clients > max_sessions)
				max_sessions = (uint32_t)sr.clients;
			surv_rounds++;
		}
		tl_sleep_us(1000);
	}
	uint32_t killed = sh->killed, early = sh->early, launched = sh->launched;
	uint32_t *in_op = sh->in_op;
	int64_t loop_us = sh->loop_us;
	struct os_stats_rep st1 = stats(sc);
	printf("%u kills (%u while in SET, %u in DELETE, %u in GET, %u between calls; %.1f calls "
	       "per child) + %u early (connecting) in %.2f s: %.2f ms per kill, connect %.2f ms "
	       "on average; %u survivor rounds\n",
	       killed, in_op[1], in_op[2], in_op[3], in_op[0],
	       killed ? (double)sh->ops_at_kill / killed : 0.0, early, (double)loop_us / 1e6,
	       (double)loop_us / 1e3 / (killed + early ? killed + early : 1),
	       sh->connects ? (double)sh->connect_sum / sh->connects / 1e3 : 0.0, surv_rounds);
	printf("children: %llu SET (%llu -ENOSPC), %llu DELETE, %llu GET, %llu -EAGAIN; up to %u "
	       "sessions at once; right after: %llu regions free, %llu sessions\n",
	       (unsigned long long)sh->sets, (unsigned long long)sh->enospc,
	       (unsigned long long)sh->dels, (unsigned long long)sh->gets,
	       (unsigned long long)sh->eagain, max_sessions, (unsigned long long)st1.regions_free,
	       (unsigned long long)st1.clients);
	CHECKF(killed + early == n_kills, "only %u of %u kills in %.0f s", killed + early, n_kills,
	       (double)budget_us / 1e6);
	CHECKF(sh->sets > sh->enospc && sh->dels, "the children wrote nothing");

	/* (a), (b) at once */
	surv_check(sv, "right after the kills");
	int present = shared_check(sv, launched, "right after the kills");

	/* (c) every session expires (the survivor's too: it stays idle), the
	 * collector takes their regions back */
	int64_t w0 = tl_now_us();
	struct os_stats_rep st2;
	for (;;) {
		st2 = stats(sc);
		bool quiet = st2.clients == 0 &&
			     st2.regions_free + st2.regions_server + st2.quarantined == nregions &&
			     st2.expired + st2.dropped >= st0.expired + st0.dropped + killed;
		if (quiet)
			break;
		CHECKF(tl_now_us() - w0 < HB_US + 5000000,
		       "%.1f s after the kills: %llu sessions, %llu regions free + %llu server of "
		       "%u, %llu expired + dropped (want >= %llu)",
		       (double)(tl_now_us() - w0) / 1e6, (unsigned long long)st2.clients,
		       (unsigned long long)st2.regions_free, (unsigned long long)st2.regions_server,
		       nregions, (unsigned long long)(st2.expired + st2.dropped),
		       (unsigned long long)(st0.expired + st0.dropped + killed));
		tl_sleep_us(10000);
	}
	int64_t settle_us = tl_now_us() - w0;
	CHECKF(st2.gc_runs > st1.gc_runs || st2.gc_runs > st0.gc_runs, "no collection ran");
	/* a scan after all that, for its counts */
	uint64_t scans = st2.scans;
	while ((st2 = stats(sc)).scans < scans + 1) {
		CHECKF(tl_now_us() - w0 < HB_US + 8000000, "no scan in %.1f s",
		       (double)(tl_now_us() - w0) / 1e6);
		tl_sleep_us(20000);
	}
	struct walk wk;
	int tries = 0;
	while (!walk_table(s.os, &wk)) {
		CHECKF(++tries < 100, "the table kept changing (locked) for 2 s");
		tl_sleep_us(20000);
	}
	printf("after %.2f s: %llu regions free (%llu before the kills), %llu server regions, "
	       "%llu sessions; expired %llu -> %llu, dropped %llu -> %llu, collections %llu -> "
	       "%llu (%llu copies), "
	       "cleanups %llu, holes %llu\n",
	       (double)settle_us / 1e6, (unsigned long long)st2.regions_free,
	       (unsigned long long)st0.regions_free, (unsigned long long)st2.regions_server,
	       (unsigned long long)st2.clients, (unsigned long long)st0.expired,
	       (unsigned long long)st2.expired, (unsigned long long)st0.dropped,
	       (unsigned long long)st2.dropped, (unsigned long long)st0.gc_runs,
	       (unsigned long long)st2.gc_runs, (unsigned long long)st2.gc_copied,
	       (unsigned long long)st2.cleanups, (unsigned long long)st2.gc_holes);
	printf("table: %llu live (%llu survivor, %llu shared), %llu deleted, %llu holes; regions "
	       "%u free, %u server, %u client, %u collecting, %u quarantined\n",
	       (unsigned long long)wk.live, (unsigned long long)wk.surv,
	       (unsigned long long)wk.shared, (unsigned long long)wk.deleted,
	       (unsigned long long)wk.holes, wk.free, wk.srv, wk.client, wk.collect, wk.quar);
	CHECKF(wk.client == 0 && wk.collect == 0 && wk.free == st2.regions_free &&
		       wk.free + wk.srv + wk.quar == nregions,
	       "regions: %u free, %u server, %u client, %u collecting, %u quarantined of %u",
	       wk.free, wk.srv, wk.client, wk.collect, wk.quar, nregions);
	CHECKF(wk.surv == NSURV, "%llu survivor keys live in the table",
	       (unsigned long long)wk.surv);
	CHECKF(wk.shared == (uint64_t)present, "%llu shared keys live in the table, GET found %d",
	       (unsigned long long)wk.shared, present);
	/* the scan's counts (a cleanup right after it may have removed deleted
	 * entries since) */
	CHECKF(st2.live == wk.live && st2.deleted >= wk.deleted && st2.holes >= wk.holes,
	       "the scan counted %llu live, %llu deleted, %llu holes",
	       (unsigned long long)st2.live, (unsigned long long)st2.deleted,
	       (unsigned long long)st2.holes);
	/* dead clients never publish what they did not finish */
	CHECKF(wk.holes == 0 && st2.gc_holes == 0, "%llu holes (%llu made): garbage entries",
	       (unsigned long long)wk.holes, (unsigned long long)st2.gc_holes);

	/* (a), (b) again, after the collector moved everything */
	surv_check(sv, "after the collections");
	CHECKF(shared_check(sv, launched, "after the collections") == present,
	       "shared keys changed while no one wrote");
	struct zl_kv_info info = { .size = sizeof(info) };
	CHECK_OK(zl_kv_info(sv, &info));
	CHECKF(info.garbage == 0, "the survivor met %llu garbage entries",
	       (unsigned long long)info.garbage);

	zl_kv_close(sv);
	zl_client_close(sc);
	ost_stop(&s);
	munmap(sh, sizeof(*sh));
	printf("os_crash: ok\n");
	return 0;
}
