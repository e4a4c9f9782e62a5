/* SPDX-License-Identifier: MIT */
/*
 * kv_store: the zl-kvd store engine (src/kv/store.c) against a reference
 * model, without a server.
 *   edges   key/value length limits, empty and 1 MiB values, versions,
 *           CAS on absent keys, scan order of prefixes and binary keys
 *   model   rounds of random GET/PUT/DEL/CAS/SCAN (10^5+ in all) on fresh
 *           stores whose hash table grows while they run, so operations hit
 *           both tables during a drain; full invariant check every 1000
 *   limit   the same under memory limits: -ENOSPC exactly when a new key
 *           does not fit, never while an update fits, nothing changed by a
 *           failed write, the charge never over the limit
 *   growth  200k keys: each resize is drained over many operations, no
 *           operation migrates more than ZL_KVS_REHASH_STEP slots; deleting
 *           everything gives back all the memory of the entries
 */
#include "kv_model.h"
#include "store.h"

struct ctx {
	struct zl_kvs *s;
	struct model m;
	struct tkey *keys;
	size_t nkeys;
	struct tl_rng r;
	uint8_t *vbuf;
	uint64_t vid, last_ver;
	bool big;
	/* tallies */
	uint64_t ops, in_drain, del_in_drain, nospc, nospc_upd, scans_rec;
};

static uint64_t val_cost(size_t n) { return n ? zl_kvs_alloc_cost(n) : 0; }

static void check_store(struct ctx *c)
{
	const char *why = "";
	int rc = zl_kvs_check(c->s, &why);
	CHECKF(rc == 0, "store invariant broken: %s", why);
	struct zl_kvs_stats st;
	zl_kvs_stats(c->s, &st);
	CHECK_EQ_U64(st.keys, c->m.n);
	uint64_t raw = 0;
	for (size_t i = 0; i < c->m.n; i++)
		raw += c->m.e[i].klen + c->m.e[i].vlen + sizeof(struct zl_kvs_ent);
	CHECKF(st.used >= raw, "charged %" PRIu64 " < raw bytes %" PRIu64, st.used, raw);
}

/* The store's view of key equals the model's. */
static void expect_key(struct ctx *c, const void *key, size_t klen)
{
	const uint8_t *v = NULL;
	size_t vlen = 0;
	uint64_t ver = 0;
	int rc = zl_kvs_get(c->s, key, klen, &v, &vlen, &ver);
	m_check_get(&c->m, key, klen, rc, v, vlen, ver);
}

static void do_write(struct ctx *c, const struct tkey *k, bool cas)
{
	size_t vlen = rand_vlen(&c->r, c->big);
	uint64_t vid = ++c->vid;
	tl_fill(c->vbuf, vlen, vid);
	struct mkey *mk = m_find(&c->m, k->b, k->len);
	uint64_t cur = mk ? mk->ver : 0, expected = cur, ver = 0;
	uint32_t old_vlen = mk ? mk->vlen : 0;
	struct zl_kvs_stats st0, st;
	zl_kvs_stats(c->s, &st0);
	int rc;
	if (cas) {
		uint64_t x = tl_rand_below(&c->r, 10);
		if (x == 0)
			expected = 0;
		else if (x == 1)
			expected = cur + 1 + tl_rand_below(&c->r, 3);
		rc = zl_kvs_cas(c->s, k->b, k->len, c->vbuf, vlen, expected, &ver);
		if (expected != cur) {
			CHECK_RC(rc, -ESTALE);
			return;
		}
	} else {
		rc = zl_kvs_put(c->s, k->b, k->len, c->vbuf, vlen, &ver);
	}
	/* The charge when the store decided: the operation's migration step
	 * may have freed a drained table first. */
	zl_kvs_stats(c->s, &st);
	uint64_t used = st0.used;
	if (st0.old_slots && st.old_slots != st0.old_slots)
		used -= zl_kvs_alloc_cost(st0.old_slots * 16);
	uint64_t room = st.limit ? st.limit - used : UINT64_MAX;
	if (!mk) { /* a new key: -ENOSPC exactly when it does not fit */
		uint64_t need = zl_kvs_entry_cost(c->s, k->b, k->len, vlen);
		if ((st0.keys + 1) * 4 > st0.slots * 3)
			need += zl_kvs_alloc_cost(st0.slots * 2 * 16);
		CHECKF(rc == (need > room ? -ENOSPC : 0), "insert: rc %d, need %" PRIu64
		       ", room %" PRIu64, rc, need, room);
	} else if (rc == -ENOSPC) { /* an update must fit if its value does */
		CHECKF(val_cost(vlen) > room && val_cost(vlen) - val_cost(old_vlen) > room,
		       "update refused: value %zu (was %u), room %" PRIu64, vlen, old_vlen, room);
		c->nospc_upd++;
	} else {
		CHECK_OK(rc);
	}
	if (rc == -ENOSPC) {
		CHECK_EQ_U64(st.used, used);
		c->nospc++;
		expect_key(c, k->b, k->len); /* unchanged */
		return;
	}
	CHECKF(ver > c->last_ver, "version %" PRIu64 " after %" PRIu64, ver, c->last_ver);
	c->last_ver = ver;
	m_put(&c->m, k->b, k->len, vid, vlen, ver);
}

static void do_scan(struct ctx *c)
{
	uint8_t start[ZL_KV_MAX_KEY];
	size_t slen;
	uint64_t x = tl_rand_below(&c->r, 10);
	const struct tkey *k = &c->keys[tl_rand_below(&c->r, c->nkeys)];
	if (x < 4 || (x < 7 && k->len == ZL_KV_MAX_KEY)) {
		slen = k->len;
		memcpy(start, k->b, slen);
	} else if (x < 7) { /* a neighbour of a key */
		slen = k->len + 1;
		memcpy(start, k->b, k->len);
		start[k->len] = (uint8_t)tl_rand_below(&c->r, 2);
	} else if (x < 9) {
		slen = 1 + tl_rand_below(&c->r, 20);
		tl_fill(start, slen, tl_rand(&c->r));
	} else {
		slen = 0;
	}
	bool excl = tl_rand_below(&c->r, 2);
	uint32_t n = tl_rand_below(&c->r, 20) ? 1 + (uint32_t)tl_rand_below(&c->r, 30)
					       : 1 + (uint32_t)tl_rand_below(&c->r, ZL_KV_MAX_SCAN);
	size_t i = slen ? m_lower(&c->m, start, slen, excl) : 0;
	const struct zl_kvs_ent *e = zl_kvs_seek(c->s, start, slen, excl);
	for (uint32_t j = 0; j < n; j++, i++, e = zl_kvs_next(e)) {
		if (i == c->m.n) {
			CHECK(e == NULL);
			break;
		}
		CHECKF(e, "scan ended early at record %u of %zu", j, c->m.n - (i - j));
		const struct mkey *mk = &c->m.e[i];
		CHECK(e->klen == mk->klen && !memcmp(zl_kvs_key(e), mk->key, mk->klen));
		CHECK_EQ_U64(e->vlen, mk->vlen);
		CHECK_EQ_U64(e->ver, mk->ver);
		CHECK_PATTERN(e->val, e->vlen, mk->vid);
		c->scans_rec++;
	}
}

static void run_ops(struct ctx *c, uint64_t nops)
{
	for (uint64_t op = 0; op < nops; op++) {
		struct zl_kvs_stats st;
		zl_kvs_stats(c->s, &st);
		bool draining = st.old_slots != 0;
		const struct tkey *k = &c->keys[tl_rand_below(&c->r, c->nkeys)];
		uint64_t x = tl_rand_below(&c->r, 100);
		if (x < 30) {
			expect_key(c, k->b, k->len);
		} else if (x < 60) {
			do_write(c, k, false);
		} else if (x < 75) {
			int rc = zl_kvs_del(c->s, k->b, k->len);
			if (m_find(&c->m, k->b, k->len)) {
				CHECK_OK(rc);
				m_del(&c->m, k->b, k->len);
				c->del_in_drain += draining;
			} else {
				CHECK_RC(rc, -ENOENT);
			}
		} else if (x < 90) {
			do_write(c, k, true);
		} else {
			do_scan(c);
		}
		c->in_drain += draining;
		c->ops++;
		if (op % 1000 == 999)
			check_store(c);
	}
	check_store(c);
}

static void round_run(struct ctx *c, uint64_t limit, size_t nkeys, uint64_t nops, bool big,
		      unsigned step)
{
	CHECK_OK(zl_kvs_create(limit, tl_rand(&c->r), &c->s));
	zl_kvs_set_step(c->s, step);
	c->last_ver = 0;
	c->nkeys = nkeys;
	c->keys = make_keys(&c->r, nkeys);
	c->big = big;
	run_ops(c, nops);
	/* whatever is left reads back, then deleting all of it */
	for (size_t i = 0; i < nkeys; i++)
		expect_key(c, c->keys[i].b, c->keys[i].len);
	while (c->m.n) {
		struct mkey *mk = &c->m.e[tl_rand_below(&c->r, c->m.n)];
		CHECK_OK(zl_kvs_del(c->s, mk->key, mk->klen));
		m_del(&c->m, mk->key, mk->klen);
	}
	check_store(c);
	CHECK(zl_kvs_seek(c->s, NULL, 0, false) == NULL);
	zl_kvs_destroy(c->s);
	free_keys(c->keys, nkeys);
	m_free(&c->m);
}

static void test_edges(struct tl_rng *r)
{
	struct zl_kvs *s;
	CHECK_RC(zl_kvs_create(100, 1, &s), -ENOSPC); /* not even the table */
	CHECK_OK(zl_kvs_create(0, tl_rand(r), &s));
	uint8_t *big = malloc(ZL_KV_MAX_VAL + 1);
	CHECK(big);
	uint8_t k[ZL_KV_MAX_KEY + 1];
	memset(k, 0xab, sizeof(k));
	const uint8_t *v;
	size_t vlen;
	uint64_t ver, v1, v2;
	CHECK_RC(zl_kvs_put(s, k, 0, "x", 1, &ver), -EINVAL);
	CHECK_RC(zl_kvs_put(s, k, ZL_KV_MAX_KEY + 1, "x", 1, &ver), -EINVAL);
	CHECK_RC(zl_kvs_put(s, k, 1, big, ZL_KV_MAX_VAL + 1, &ver), -EINVAL);
	CHECK_RC(zl_kvs_get(s, k, 0, &v, &vlen, &ver), -EINVAL);
	CHECK_RC(zl_kvs_del(s, k, ZL_KV_MAX_KEY + 1), -EINVAL);
	CHECK_RC(zl_kvs_cas(s, k, 0, "", 0, 0, &ver), -EINVAL);
	/* the longest key, the largest value, an empty value */
	tl_fill(big, ZL_KV_MAX_VAL, 7);
	CHECK_OK(zl_kvs_put(s, k, ZL_KV_MAX_KEY, big, ZL_KV_MAX_VAL, &v1));
	CHECK_OK(zl_kvs_get(s, k, ZL_KV_MAX_KEY, &v, &vlen, &ver));
	CHECK(vlen == ZL_KV_MAX_VAL && ver == v1);
	CHECK_PATTERN(v, vlen, 7);
	CHECK_OK(zl_kvs_put(s, k, ZL_KV_MAX_KEY, NULL, 0, &v2));
	CHECK(v2 > v1);
	CHECK_OK(zl_kvs_get(s, k, ZL_KV_MAX_KEY, &v, &vlen, NULL));
	CHECK(vlen == 0);
	/* CAS: 0 means absent */
	CHECK_RC(zl_kvs_cas(s, "c", 1, "1", 1, 5, &ver), -ESTALE);
	CHECK_OK(zl_kvs_cas(s, "c", 1, "1", 1, 0, &v1));
	CHECK_RC(zl_kvs_cas(s, "c", 1, "2", 1, 0, &ver), -ESTALE);
	CHECK_RC(zl_kvs_cas(s, "c", 1, "2", 1, v1 + 1, &ver), -ESTALE);
	CHECK_OK(zl_kvs_cas(s, "c", 1, "2", 1, v1, &v2));
	CHECK(v2 > v1);
	CHECK_OK(zl_kvs_get(s, "c", 1, &v, &vlen, &ver));
	CHECK(vlen == 1 && v[0] == '2' && ver == v2);
	/* a deleted and re-created key never reuses a version (no ABA) */
	CHECK_OK(zl_kvs_del(s, "c", 1));
	CHECK_RC(zl_kvs_del(s, "c", 1), -ENOENT);
	CHECK_RC(zl_kvs_cas(s, "c", 1, "3", 1, v2, &ver), -ESTALE);
	CHECK_OK(zl_kvs_put(s, "c", 1, "3", 1, &ver));
	CHECK(ver > v2);
	/* order: bytewise, a prefix first, binary bytes */
	static const struct { const char *k; size_t n; } order[] = {
		{ "\x00", 1 }, { "\x00\x00", 2 }, { "\x01", 1 }, { "a", 1 }, { "a\x00", 2 },
		{ "a\x00\xff", 3 }, { "ab", 2 }, { "b", 1 }, { "c", 1 }, { "\xff", 1 },
		{ "\xff\xff", 2 },
	};
	size_t no = sizeof(order) / sizeof(order[0]);
	CHECK_OK(zl_kvs_del(s, k, ZL_KV_MAX_KEY));
	for (size_t i = no; i-- > 0;)
		if (strcmp(order[i].k, "c"))
			CHECK_OK(zl_kvs_put(s, order[i].k, order[i].n, "", 0, &ver));
	const struct zl_kvs_ent *e = zl_kvs_seek(s, NULL, 0, false);
	for (size_t i = 0; i < no; i++, e = zl_kvs_next(e))
		CHECK(e && e->klen == order[i].n && !memcmp(zl_kvs_key(e), order[i].k, e->klen));
	CHECK(e == NULL);
	e = zl_kvs_seek(s, "a", 1, true);
	CHECK(e && e->klen == 2 && !memcmp(zl_kvs_key(e), "a\x00", 2));
	e = zl_kvs_seek(s, "a", 1, false);
	CHECK(e && e->klen == 1);
	e = zl_kvs_seek(s, "aa", 2, false);
	CHECK(e && e->klen == 2 && !memcmp(zl_kvs_key(e), "ab", 2));
	CHECK(zl_kvs_seek(s, "\xff\xff", 2, true) == NULL);
	const char *why = "";
	CHECKF(zl_kvs_check(s, &why) == 0, "%s", why);
	zl_kvs_destroy(s);
	free(big);
}

static void test_growth(struct tl_rng *r)
{
	uint64_t n = tl_scaled(200000);
	struct zl_kvs *s;
	CHECK_OK(zl_kvs_create(0, tl_rand(r), &s));
	struct zl_kvs_stats st, st0;
	zl_kvs_stats(s, &st0);
	uint64_t drain_ops = 0, drains = 0, checks = 0, ver;
	bool was = false;
	for (uint64_t i = 0; i < n; i++) {
		CHECK_OK(zl_kvs_put(s, &i, sizeof(i), &i, sizeof(i), &ver));
		zl_kvs_stats(s, &st);
		bool now = st.old_slots != 0;
		drains += now && !was;
		drain_ops += now;
		was = now;
		/* reads during a drain find keys in either table */
		uint64_t j = tl_rand_below(r, i + 1);
		const uint8_t *v;
		size_t vlen;
		CHECK_OK(zl_kvs_get(s, &j, sizeof(j), &v, &vlen, NULL));
		CHECK(vlen == 8 && !memcmp(v, &j, 8));
		if (now && st.old_slots >= 8192 && checks < 6 && i % 2048 == 0) {
			const char *why = "";
			CHECKF(zl_kvs_check(s, &why) == 0, "mid-drain: %s", why);
			checks++;
		}
	}
	zl_kvs_stats(s, &st);
	printf("growth: %" PRIu64 " keys, %" PRIu64 " slots, %" PRIu64 " resizes, %" PRIu64
	       " drains over %" PRIu64 " operations, at most %" PRIu64 " slots per op\n",
	       n, st.slots, st.resizes, drains, drain_ops, st.step_max);
	CHECK(st.step_max <= ZL_KVS_REHASH_STEP);
	CHECK(st.resizes >= 10 && drains == st.resizes);
	/* draining an old table of S slots takes about S / STEP operations
	 * (two per iteration here: the put and the get both migrate) */
	uint64_t min_ops = 0;
	for (uint64_t sl = st.slots / 2; sl >= 64; sl /= 2)
		min_ops += sl / ZL_KVS_REHASH_STEP / 4;
	CHECKF(drain_ops >= min_ops, "drains took %" PRIu64 " ops, expected >= %" PRIu64,
	       drain_ops, min_ops);
	/* delete in a random order; every entry's charge comes back */
	uint64_t *perm = malloc(n * sizeof(*perm));
	CHECK(perm);
	for (uint64_t i = 0; i < n; i++)
		perm[i] = i;
	for (uint64_t i = n - 1; i > 0; i--) {
		uint64_t j = tl_rand_below(r, i + 1), t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	for (uint64_t i = 0; i < n; i++)
		CHECK_OK(zl_kvs_del(s, &perm[i], sizeof(perm[i])));
	free(perm);
	zl_kvs_stats(s, &st);
	CHECK_EQ_U64(st.keys, 0);
	CHECK_EQ_U64(st.used - zl_kvs_alloc_cost(st.slots * 16),
		     st0.used - zl_kvs_alloc_cost(st0.slots * 16));
	const char *why = "";
	CHECKF(zl_kvs_check(s, &why) == 0, "%s", why);
	zl_kvs_destroy(s);
}

int main(void)
{
	tl_watchdog(600);
	struct tl_rng r = { tl_seed() };
	int64_t t0 = tl_now_us();
	test_edges(&r);

	struct ctx c = { .r = { tl_rand(&r) } };
	c.vbuf = malloc(ZL_KV_MAX_VAL);
	CHECK(c.vbuf);
	static const size_t pools[] = { 300, 3000, 12000 };
	uint64_t per = tl_scaled(15000);
	/* 135k operations, big values in some; slow drains in most, so that
	 * many operations meet a table being drained (step 1: the next growth
	 * can come before the drain is done) */
	static const unsigned steps[] = { ZL_KVS_REHASH_STEP, 2, 1 };
	for (int i = 0; i < 9; i++)
		round_run(&c, 0, pools[i % 3], per, i >= 6, steps[i / 3]);
	printf("model: %" PRIu64 " ops (%" PRIu64 " during a drain, %" PRIu64
	       " deletes there), %" PRIu64 " scanned records\n",
	       c.ops, c.in_drain, c.del_in_drain, c.scans_rec);
	CHECK(c.in_drain > 1000 && c.del_in_drain > 100);

	uint64_t ops0 = c.ops;
	static const uint64_t limits[] = { 64 << 10, 1 << 20, 4 << 20, 24 << 20 };
	for (int i = 0; i < 4; i++)
		round_run(&c, limits[i], pools[i % 3], per, i >= 2, steps[i % 3]);
	printf("limit: %" PRIu64 " ops, %" PRIu64 " refused with -ENOSPC (%" PRIu64
	       " updates)\n", c.ops - ops0, c.nospc, c.nospc_upd);
	CHECK(c.nospc > 0);
	free(c.vbuf);

	test_growth(&r);
	printf("kv_store: OK in %.1f s\n", (double)(tl_now_us() - t0) / 1e6);
	return T_EXIT_PASS;
}
