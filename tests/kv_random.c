/* SPDX-License-Identifier: MIT */
/*
 * kv_random SCHEME: random GET/PUT/DEL/CAS/RMW/SCAN sequences through a
 * zl-kvd service on one transport, every result compared with the
 * reference model (tests/kv_model.h): values, versions, -ENOENT, -ESTALE,
 * scans record by record (paged ones too: some values are up to 1 MiB).
 * A second run has a memory limit: a write may then fail with -ENOSPC,
 * and the key must read back unchanged.
 */
#include "kv_lib.h"

struct ctx {
	zl_kv *kv;
	struct model m;
	struct tkey *keys;
	size_t nkeys;
	struct tl_rng r;
	uint8_t *vbuf;
	uint64_t vid, ops, nospc, stale, recs;
	bool limited;
};

static void expect_key(struct ctx *c, const void *key, size_t klen)
{
	const void *v = NULL;
	size_t vlen = 0;
	uint64_t ver = 0;
	int rc = zl_kv_get(c->kv, key, klen, &v, &vlen, &ver, KVT_TMO);
	m_check_get(&c->m, key, klen, rc, v, vlen, ver);
}

/* A write whose version the model does not know yet (put returns none):
 * read it back. */
static uint64_t version_of(struct ctx *c, const struct tkey *k)
{
	uint64_t ver;
	CHECK_OK(zl_kv_get(c->kv, k->b, k->len, NULL, NULL, &ver, KVT_TMO));
	return ver;
}

static void do_write(struct ctx *c, const struct tkey *k, int kind)
{
	size_t vlen = rand_vlen(&c->r, true);
	if (c->limited && !tl_rand_below(&c->r, 100))
		vlen = ZL_KV_MAX_VAL; /* more often at the limit */
	uint64_t vid = ++c->vid, ver = 0;
	tl_fill(c->vbuf, vlen, vid);
	struct mkey *mk = m_find(&c->m, k->b, k->len);
	uint64_t cur = mk ? mk->ver : 0, expected = cur;
	int rc;
	if (kind == 0) {
		rc = zl_kv_put(c->kv, k->b, k->len, c->vbuf, vlen, KVT_TMO);
		if (!rc)
			ver = version_of(c, k);
	} else {
		if (!tl_rand_below(&c->r, 5))
			expected = tl_rand_below(&c->r, 2) ? 0 : cur + 1;
		rc = zl_kv_cas(c->kv, k->b, k->len, c->vbuf, vlen, expected, &ver, KVT_TMO);
		if (expected != cur) {
			CHECK_RC(rc, -ESTALE);
			c->stale++;
			return;
		}
	}
	if (rc == -ENOSPC && c->limited) {
		c->nospc++;
		expect_key(c, k->b, k->len);
		return;
	}
	CHECK_OK(rc);
	CHECK(ver > cur);
	m_put(&c->m, k->b, k->len, vid, vlen, ver);
}

/* rmw: append 8 bytes of a counter to the value, up to 64 bytes */
static int rmw_fn(const void *val, size_t vlen, void *out, size_t cap, size_t *outlen, void *arg)
{
	uint64_t x = *(uint64_t *)arg;
	size_t keep = vlen > 56 ? 0 : vlen;
	CHECK(cap >= keep + 8);
	if (keep)
		memcpy(out, val, keep);
	memcpy((uint8_t *)out + keep, &x, 8);
	*outlen = keep + 8;
	return 0;
}

static void do_rmw(struct ctx *c, const struct tkey *k)
{
	/* the model keeps values as patterns: rewrite the key with a pattern
	 * value first, then check what rmw made of it */
	uint64_t vid = ++c->vid;
	size_t vlen = tl_rand_below(&c->r, 60);
	tl_fill(c->vbuf, vlen, vid);
	int rc = zl_kv_put(c->kv, k->b, k->len, c->vbuf, vlen, KVT_TMO);
	if (rc == -ENOSPC && c->limited)
		return;
	CHECK_OK(rc);
	uint64_t x = tl_rand(&c->r);
	rc = zl_kv_rmw(c->kv, k->b, k->len, rmw_fn, &x, KVT_TMO);
	if (rc == -ENOSPC && c->limited) {
		m_put(&c->m, k->b, k->len, vid, vlen, version_of(c, k));
		return;
	}
	CHECK_OK(rc);
	const void *v;
	size_t n;
	uint64_t ver;
	CHECK_OK(zl_kv_get(c->kv, k->b, k->len, &v, &n, &ver, KVT_TMO));
	size_t keep = vlen > 56 ? 0 : vlen;
	CHECK(n == keep + 8 && !memcmp((const uint8_t *)v + keep, &x, 8));
	CHECK(tl_verify(v, keep, vid) == (size_t)-1);
	/* back to a pattern value the model can describe */
	CHECK_OK(zl_kv_cas(c->kv, k->b, k->len, c->vbuf, keep, ver, &ver, KVT_TMO));
	m_put(&c->m, k->b, k->len, vid, keep, ver);
}

static void do_scan(struct ctx *c, struct kvt_scan *sc)
{
	const struct tkey *k = &c->keys[tl_rand_below(&c->r, c->nkeys)];
	size_t slen = tl_rand_below(&c->r, 8) ? k->len : 0;
	uint32_t n = tl_rand_below(&c->r, 10) ? 1 + (uint32_t)tl_rand_below(&c->r, 20)
					      : 1 + (uint32_t)tl_rand_below(&c->r, ZL_KV_MAX_SCAN);
	sc->n = 0;
	sc->m = &c->m;
	int got = zl_kv_scan(c->kv, k->b, slen, n, kvt_scan_cb, sc, KVT_TMO);
	size_t i = slen ? m_lower(&c->m, k->b, slen, false) : 0;
	size_t want = c->m.n - i < n ? c->m.n - i : n;
	CHECKF(got >= 0 && (size_t)got == want, "scan of %u returned %d, expected %zu", n, got, want);
	for (size_t j = 0; j < want; j++) {
		const struct mkey *mk = &c->m.e[i + j];
		const struct kvt_rec *r = &sc->r[j];
		CHECK(r->klen == mk->klen && !memcmp(r->key, mk->key, mk->klen));
		CHECKF(r->vok, "scan record %zu: value differs", j);
	}
	c->recs += want;
}

static void run(const char *scheme, uint64_t limit, uint64_t nops, struct tl_rng *rng)
{
	struct kvt_server s;
	kvt_start(&s, scheme, limit);
	struct ctx c = { .r = { tl_rand(rng) }, .limited = limit != 0 };
	c.kv = kvt_connect(&s);
	c.nkeys = 800;
	c.keys = make_keys(&c.r, c.nkeys);
	c.vbuf = malloc(ZL_KV_MAX_VAL);
	struct kvt_scan sc = { .cap = ZL_KV_MAX_SCAN };
	sc.r = malloc(sc.cap * sizeof(*sc.r));
	CHECK(c.vbuf && sc.r);
	for (uint64_t op = 0; op < nops; op++) {
		const struct tkey *k = &c.keys[tl_rand_below(&c.r, c.nkeys)];
		uint64_t x = tl_rand_below(&c.r, 100);
		if (x < 30) {
			expect_key(&c, k->b, k->len);
		} else if (x < 55) {
			do_write(&c, k, 0);
		} else if (x < 70) {
			int rc = zl_kv_del(c.kv, k->b, k->len, KVT_TMO);
			if (m_find(&c.m, k->b, k->len)) {
				CHECK_OK(rc);
				m_del(&c.m, k->b, k->len);
			} else {
				CHECK_RC(rc, -ENOENT);
			}
		} else if (x < 85) {
			do_write(&c, k, 1);
		} else if (x < 90) {
			do_rmw(&c, k);
		} else {
			do_scan(&c, &sc);
		}
		c.ops++;
	}
	for (size_t i = 0; i < c.nkeys; i++)
		expect_key(&c, c.keys[i].b, c.keys[i].len);
	printf("%s, limit %" PRIu64 ": %" PRIu64 " ops, %zu keys at the end, %" PRIu64
	       " -ESTALE, %" PRIu64 " -ENOSPC, %" PRIu64 " scanned records\n",
	       scheme, limit, c.ops, c.m.n, c.stale, c.nospc, c.recs);
	if (limit)
		CHECK(c.nospc > 0);
	zl_kv_close(c.kv);
	kvt_stop(&s);
	free(sc.r);
	free(c.vbuf);
	free_keys(c.keys, c.nkeys);
	m_free(&c.m);
}

int main(int argc, char **argv)
{
	const char *scheme = kvt_scheme(argc, argv);
	tl_watchdog(300);
	struct tl_rng r = { tl_seed() };
	run(scheme, 0, tl_scaled(20000), &r);
	run(scheme, 1536 << 10, tl_scaled(8000), &r);
	printf("kv_random %s: OK\n", scheme);
	return T_EXIT_PASS;
}
