/* SPDX-License-Identifier: MIT */
/*
 * kv_concurrent SCHEME: several client threads, each with its own zl_kv,
 * on one zl-kvd service.
 *   disjoint  each thread runs random operations on keys under its own
 *             prefix and keeps its own model; since the server applies
 *             requests one at a time and nobody else touches those keys,
 *             every result (values, versions, scans within the prefix)
 *             must match the model exactly.
 *   shared    every thread increments shared counters through zl_kv_rmw
 *             (get, add one, CAS on the version read, retried on -ESTALE).
 *             Semantics (zipline_kv.h, docs/kv.md): each request is
 *             linearizable, and a CAS succeeds only if no write came
 *             between its read and itself, so no increment is lost: the
 *             final counts equal the number of increments exactly. Plain
 *             zl_kv_put is last-writer-wins and would lose updates here.
 */
#include <stdatomic.h>

#include "kv_lib.h"

#define NTHREADS 4
#define NCOUNTERS 3

static struct kvt_server srv;
static uint64_t nops, nincs;
static _Atomic uint64_t retries;

struct worker {
	int id;
	uint64_t seed;
	uint64_t incs[NCOUNTERS];
};

/* Keys of thread id: its prefix byte, then a test key. */
static void own_key(int id, const struct tkey *k, uint8_t *out, size_t *len)
{
	out[0] = (uint8_t)('A' + id);
	size_t n = k->len < ZL_KV_MAX_KEY ? k->len : ZL_KV_MAX_KEY - 1;
	memcpy(out + 1, k->b, n);
	*len = n + 1;
}

static void disjoint(struct worker *w, zl_kv *kv)
{
	struct tl_rng r = { w->seed };
	struct model m = { 0 };
	size_t nkeys = 300;
	struct tkey *keys = make_keys(&r, nkeys);
	uint8_t *vbuf = malloc(1 << 16), key[ZL_KV_MAX_KEY];
	struct kvt_scan sc = { .cap = 64, .m = &m };
	sc.r = malloc(sc.cap * sizeof(*sc.r));
	CHECK(vbuf && sc.r);
	uint64_t vid = (uint64_t)w->id << 40;
	for (uint64_t op = 0; op < nops; op++) {
		size_t klen;
		own_key(w->id, &keys[tl_rand_below(&r, nkeys)], key, &klen);
		struct mkey *mk = m_find(&m, key, klen);
		uint64_t x = tl_rand_below(&r, 10), ver;
		if (x < 3) {
			const void *v;
			size_t vlen;
			int rc = zl_kv_get(kv, key, klen, &v, &vlen, &ver, KVT_TMO);
			if (!mk) {
				CHECK_RC(rc, -ENOENT);
				continue;
			}
			CHECK_OK(rc);
			CHECK(vlen == mk->vlen && ver == mk->ver);
			CHECK_PATTERN(v, vlen, mk->vid);
		} else if (x < 7) {
			size_t vlen = tl_rand_below(&r, 1 << 16);
			tl_fill(vbuf, vlen, ++vid);
			uint64_t expected = mk ? mk->ver : 0;
			CHECK_OK(zl_kv_cas(kv, key, klen, vbuf, vlen, expected, &ver, KVT_TMO));
			m_put(&m, key, klen, vid, vlen, ver);
		} else if (x < 9) {
			int rc = zl_kv_del(kv, key, klen, KVT_TMO);
			CHECK_RC(rc, mk ? 0 : -ENOENT);
			if (mk)
				m_del(&m, key, klen);
		} else { /* scan inside the prefix */
			uint32_t n = 1 + (uint32_t)tl_rand_below(&r, 40);
			sc.n = 0;
			int got = zl_kv_scan(kv, key, klen, n, kvt_scan_cb, &sc, KVT_TMO);
			CHECK(got >= 0);
			size_t i = m_lower(&m, key, klen, false), j = 0;
			for (; j < (size_t)got && sc.r[j].key[0] == key[0]; j++, i++) {
				CHECK(i < m.n && sc.r[j].klen == m.e[i].klen &&
				      !memcmp(sc.r[j].key, m.e[i].key, m.e[i].klen) && sc.r[j].vok);
			}
			/* the prefix ended where the model ends, unless n ran out */
			CHECK(j == (size_t)got ? (j == n || i == m.n) : i == m.n);
		}
	}
	/* leave nothing behind */
	while (m.n) {
		CHECK_OK(zl_kv_del(kv, m.e[0].key, m.e[0].klen, KVT_TMO));
		m_del(&m, m.e[0].key, m.e[0].klen);
	}
	m_free(&m);
	free_keys(keys, nkeys);
	free(sc.r);
	free(vbuf);
}

static int incr(const void *val, size_t vlen, void *out, size_t cap, size_t *outlen, void *arg)
{
	(void)arg;
	uint64_t n = 0;
	CHECK(vlen == 0 || vlen == 8);
	if (vlen)
		memcpy(&n, val, 8);
	n++;
	memcpy(out, &n, 8);
	*outlen = 8;
	atomic_fetch_add(&retries, 1); /* calls; minus the increments later */
	return 0;
}

static void shared(struct worker *w, zl_kv *kv)
{
	struct tl_rng r = { w->seed ^ 0xc0ffee };
	for (uint64_t i = 0; i < nincs; i++) {
		int c = (int)tl_rand_below(&r, NCOUNTERS);
		char key[16];
		snprintf(key, sizeof(key), "counter%d", c);
		CHECK_OK(zl_kv_rmw(kv, key, strlen(key), incr, NULL, KVT_TMO));
		w->incs[c]++;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	zl_kv *kv = kvt_connect(&srv);
	disjoint(w, kv);
	shared(w, kv);
	zl_kv_close(kv);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *scheme = kvt_scheme(argc, argv);
	tl_watchdog(300);
	struct tl_rng r = { tl_seed() };
	nops = tl_scaled(4000);
	nincs = tl_scaled(1500);
	kvt_start(&srv, scheme, 0);
	struct worker w[NTHREADS] = { 0 };
	pthread_t th[NTHREADS];
	for (int i = 0; i < NTHREADS; i++) {
		w[i].id = i;
		w[i].seed = tl_rand(&r);
		CHECK_OK(pthread_create(&th[i], NULL, worker_main, &w[i]));
	}
	for (int i = 0; i < NTHREADS; i++)
		CHECK_OK(pthread_join(th[i], NULL));

	zl_kv *kv = kvt_connect(&srv);
	uint64_t total = 0;
	for (int c = 0; c < NCOUNTERS; c++) {
		uint64_t want = 0, got = 0;
		for (int i = 0; i < NTHREADS; i++)
			want += w[i].incs[c];
		char key[16];
		snprintf(key, sizeof(key), "counter%d", c);
		const void *v;
		size_t vlen;
		int rc = zl_kv_get(kv, key, strlen(key), &v, &vlen, NULL, KVT_TMO);
		if (want) {
			CHECK_OK(rc);
			CHECK(vlen == 8);
			memcpy(&got, v, 8);
		} else {
			CHECK_RC(rc, -ENOENT);
		}
		CHECKF(got == want, "counter%d = %" PRIu64 ", %" PRIu64 " increments", c, got, want);
		total += want;
	}
	/* the disjoint phase cleaned up: only the counters are left */
	struct kvt_scan sc = { .cap = 16 };
	sc.r = malloc(sc.cap * sizeof(*sc.r));
	CHECK(sc.r);
	CHECK_RC(zl_kv_scan(kv, "", 0, 16, kvt_scan_cb, &sc, KVT_TMO), NCOUNTERS);
	free(sc.r);
	zl_kv_close(kv);
	kvt_stop(&srv);
	printf("kv_concurrent %s: %d threads x %" PRIu64 " ops on own keys, %" PRIu64
	       " increments of %d shared counters, %" PRIu64 " CAS retries\n",
	       scheme, NTHREADS, nops, total, NCOUNTERS, atomic_load(&retries) - total);
	return T_EXIT_PASS;
}
