/* SPDX-License-Identifier: MIT */
/*
 * Store engine (see store.h, docs/kv.md).
 *
 * Hash index: open addressing with linear probing; a slot holds the key's
 * 64-bit hash and the entry pointer, so probing and migrating rarely touch
 * entries. Deletes use backward shift (no tombstones) in the current table.
 * Growth is incremental: a table twice the size becomes current, the old
 * one is drained ZL_KVS_REHASH_STEP slots per operation, and lookups check
 * both until it is empty. Migrated and deleted slots of the old table become
 * tombstones, never empty, so its probe chains stay intact; nothing is ever
 * inserted into it.
 *
 * Ordered index: a skip list whose tower heights come from the key's hash
 * (p = 1/4): no RNG state, and an entry's size is a function of its key.
 */
#include "store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct slot {
	uint64_t hash;
	struct zl_kvs_ent *e; /* NULL: empty; TOMB: old table only */
};

struct table {
	struct slot *s;
	uint64_t mask; /* slots - 1 */
	uint64_t live;
};

#define TOMB ((struct zl_kvs_ent *)(uintptr_t)1)
#define MIN_SLOTS 64u

struct zl_kvs {
	struct table cur, old; /* old.s != NULL while draining */
	uint64_t cursor;       /* next old slot to migrate */
	uint64_t count, used, limit, seed, clock;
	uint64_t resizes, step_max, step;
	int level; /* highest tower in the list */
	struct zl_kvs_ent *head[ZL_KVS_MAX_HEIGHT];
};

/* ---- hashing ---------------------------------------------------------- */

static inline uint64_t ld64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static inline uint64_t mum(uint64_t a, uint64_t b)
{
	__uint128_t r = (__uint128_t)a * b;
	return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* A wyhash-style keyed hash: 16 bytes per multiply. */
static uint64_t hash_key(uint64_t seed, const uint8_t *p, size_t n)
{
	const uint64_t k0 = 0xa0761d6478bd642full, k1 = 0xe7037ed1a0b428dbull,
		       k2 = 0x8ebc6af09c88c6e3ull, k3 = 0x589965cc75374cc3ull;
	uint64_t h = seed ^ mum(seed ^ k0, (uint64_t)n ^ k1);
	while (n > 16) {
		h = mum(ld64(p) ^ k2 ^ h, ld64(p + 8) ^ k3);
		p += 16;
		n -= 16;
	}
	uint64_t a = 0, b = 0;
	if (n >= 8) {
		a = ld64(p);
		b = ld64(p + n - 8);
	} else if (n) {
		memcpy(&a, p, n);
	}
	h = mum(a ^ k2 ^ h, b ^ k3);
	return mum(h ^ k0, seed ^ k1);
}

static inline int height_of(uint64_t hash)
{
	/* two zero bits per extra level from the high half (the table index
	 * uses the low bits) */
	int z = __builtin_ctzll((hash >> 32) | (1ull << 31));
	int h = 1 + z / 2;
	return h > ZL_KVS_MAX_HEIGHT ? ZL_KVS_MAX_HEIGHT : h;
}

/* ---- accounting --------------------------------------------------------- */

uint64_t zl_kvs_alloc_cost(uint64_t n)
{
	if (n >= 128 * 1024)
		return (n + 16 + 4095) & ~4095ull;
	uint64_t c = (n + 8 + 15) & ~15ull;
	return c < 32 ? 32 : c;
}

static inline uint64_t ent_bytes(int height, size_t klen)
{
	return sizeof(struct zl_kvs_ent) + (size_t)height * sizeof(void *) + klen;
}

static inline uint64_t val_cost(size_t vcap) { return vcap ? zl_kvs_alloc_cost(vcap) : 0; }

static inline uint64_t table_cost(uint64_t slots)
{
	return zl_kvs_alloc_cost(slots * sizeof(struct slot));
}

uint64_t zl_kvs_entry_cost(const struct zl_kvs *s, const void *key, size_t klen, size_t vlen)
{
	int h = height_of(hash_key(s->seed, key, klen));
	return zl_kvs_alloc_cost(ent_bytes(h, klen)) + val_cost(vlen);
}

static inline bool over(const struct zl_kvs *s, uint64_t extra)
{
	return s->limit && s->used + extra > s->limit;
}

/* ---- keys --------------------------------------------------------------- */

int zl_kvs_cmp(const void *a, size_t alen, const void *b, size_t blen)
{
	size_t m = alen < blen ? alen : blen;
	int c = m ? memcmp(a, b, m) : 0;
	if (c)
		return c;
	return (alen > blen) - (alen < blen);
}

static inline bool key_eq(const struct zl_kvs_ent *e, uint64_t h, const void *key, size_t klen)
{
	return e->hash == h && e->klen == klen && !memcmp(zl_kvs_key(e), key, klen);
}

static inline bool lens_ok(size_t klen, size_t vlen)
{
	return klen >= 1 && klen <= ZL_KV_MAX_KEY && vlen <= ZL_KV_MAX_VAL;
}

/* ---- hash tables -------------------------------------------------------- */

static struct slot *tab_find(const struct table *t, uint64_t h, const void *key, size_t klen)
{
	if (!t->s)
		return NULL;
	for (uint64_t i = h & t->mask;; i = (i + 1) & t->mask) {
		struct slot *sl = &t->s[i];
		if (!sl->e)
			return NULL;
		if (sl->e != TOMB && sl->hash == h && key_eq(sl->e, h, key, klen))
			return sl;
	}
}

/* Insert into a table without tombstones that has room. */
static void tab_put(struct table *t, uint64_t h, struct zl_kvs_ent *e)
{
	uint64_t i = h & t->mask;
	while (t->s[i].e)
		i = (i + 1) & t->mask;
	t->s[i].hash = h;
	t->s[i].e = e;
	t->live++;
}

/* Backward-shift delete: pull later members of the probe run into the
 * hole when that does not move them before their home slot. */
static void tab_remove(struct table *t, struct slot *sl)
{
	uint64_t i = (uint64_t)(sl - t->s), j = i;
	for (;;) {
		j = (j + 1) & t->mask;
		if (!t->s[j].e)
			break;
		uint64_t k = t->s[j].hash & t->mask;
		bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
		if (!stays) {
			t->s[i] = t->s[j];
			i = j;
		}
	}
	t->s[i].e = NULL;
	t->live--;
}

static void drain_done(struct zl_kvs *s)
{
	s->used -= table_cost(s->old.mask + 1);
	free(s->old.s);
	memset(&s->old, 0, sizeof(s->old));
	s->cursor = 0;
}

/* Migrate up to n slots of the old table. */
static void rehash_step(struct zl_kvs *s, uint64_t n)
{
	if (!s->old.s)
		return;
	uint64_t done = 0;
	while (done < n && s->old.live && s->cursor <= s->old.mask) {
		struct slot *sl = &s->old.s[s->cursor++];
		done++;
		if (sl->e && sl->e != TOMB) {
			tab_put(&s->cur, sl->hash, sl->e);
			sl->e = TOMB;
			s->old.live--;
		}
	}
	if (done > s->step_max)
		s->step_max = done;
	if (!s->old.live)
		drain_done(s);
}

/* Would one more key put the current table over 3/4 full once the old
 * one is drained into it? Then grow first: the current table becomes the
 * old one. */
static bool needs_growth(const struct zl_kvs *s)
{
	return (s->count + 1) * 4 > (s->cur.mask + 1) * 3;
}

static int grow(struct zl_kvs *s)
{
	while (s->old.s) /* only with a step below 2: a drain outpaces inserts */
		rehash_step(s, UINT64_MAX);
	uint64_t n = (s->cur.mask + 1) * 2;
	struct slot *ns = calloc(n, sizeof(*ns)); /* large: fresh zero pages */
	if (!ns)
		return -ENOMEM;
	s->old = s->cur;
	s->cur.s = ns;
	s->cur.mask = n - 1;
	s->cur.live = 0;
	s->cursor = 0;
	s->used += table_cost(n);
	s->resizes++;
	if (!s->old.live)
		drain_done(s);
	return 0;
}

/* The slot holding key, in either table; *t gets its table. */
static struct slot *find(struct zl_kvs *s, uint64_t h, const void *key, size_t klen,
			 struct table **t)
{
	struct slot *sl = tab_find(&s->cur, h, key, klen);
	if (sl) {
		*t = &s->cur;
		return sl;
	}
	*t = &s->old;
	return tab_find(&s->old, h, key, klen);
}

/* ---- skip list ---------------------------------------------------------- */

/* prev[l] gets the link, at level l, after the last entry < key (<= key
 * if excl): where key would be linked in. */
static void sl_find(struct zl_kvs *s, const void *key, size_t klen, bool excl,
		    struct zl_kvs_ent ***prev)
{
	struct zl_kvs_ent **links = s->head;
	for (int l = ZL_KVS_MAX_HEIGHT - 1; l >= s->level; l--)
		prev[l] = &s->head[l];
	for (int l = s->level - 1; l >= 0; l--) {
		struct zl_kvs_ent *n;
		while ((n = links[l])) {
			int c = zl_kvs_cmp(zl_kvs_key(n), n->klen, key, klen);
			if (c > 0 || (c == 0 && !excl))
				break;
			links = n->next;
		}
		prev[l] = &links[l];
	}
}

const struct zl_kvs_ent *zl_kvs_seek(struct zl_kvs *s, const void *start, size_t slen, bool excl)
{
	if (!slen)
		return s->head[0];
	struct zl_kvs_ent **prev[ZL_KVS_MAX_HEIGHT];
	sl_find(s, start, slen, excl, prev);
	return *prev[0];
}

/* ---- operations --------------------------------------------------------- */

int zl_kvs_create(uint64_t mem_limit, uint64_t seed, struct zl_kvs **out)
{
	struct zl_kvs *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->limit = mem_limit;
	s->seed = seed;
	s->step = ZL_KVS_REHASH_STEP;
	s->used = zl_kvs_alloc_cost(sizeof(*s)) + table_cost(MIN_SLOTS);
	if (over(s, 0)) {
		free(s);
		return -ENOSPC;
	}
	s->cur.s = calloc(MIN_SLOTS, sizeof(struct slot));
	if (!s->cur.s) {
		free(s);
		return -ENOMEM;
	}
	s->cur.mask = MIN_SLOTS - 1;
	*out = s;
	return 0;
}

void zl_kvs_destroy(struct zl_kvs *s)
{
	if (!s)
		return;
	for (struct zl_kvs_ent *e = s->head[0], *n; e; e = n) {
		n = e->next[0];
		free(e->val);
		free(e);
	}
	free(s->cur.s);
	free(s->old.s);
	free(s);
}

/* A read or delete: one rehash step, then the key's slot and table.
 * 0, -EINVAL (bad key length) or -ENOENT. */
static int lookup(struct zl_kvs *s, const void *key, size_t klen, struct slot **sl,
		  struct table **t)
{
	if (!lens_ok(klen, 0))
		return -EINVAL;
	rehash_step(s, s->step);
	*sl = find(s, hash_key(s->seed, key, klen), key, klen, t);
	return *sl ? 0 : -ENOENT;
}

int zl_kvs_get(struct zl_kvs *s, const void *key, size_t klen, const uint8_t **val,
	       size_t *vlen, uint64_t *ver)
{
	struct table *t;
	struct slot *sl;
	int rc = lookup(s, key, klen, &sl, &t);
	if (rc)
		return rc;
	if (val)
		*val = sl->e->val;
	if (vlen)
		*vlen = sl->e->vlen;
	if (ver)
		*ver = sl->e->ver;
	return 0;
}

/* Replace the value of an existing entry. */
static int update(struct zl_kvs *s, struct zl_kvs_ent *e, const void *val, size_t vlen)
{
	/* keep the buffer when a new one would cost the same */
	if (vlen <= e->vcap && val_cost(vlen) == val_cost(e->vcap)) {
		if (vlen)
			memcpy(e->val, val, vlen);
	} else {
		uint64_t oldc = val_cost(e->vcap), newc = val_cost(vlen);
		if (newc > oldc && over(s, newc - oldc))
			return -ENOSPC;
		uint8_t *nv = NULL;
		if (vlen && !(nv = malloc(vlen)))
			return -ENOMEM;
		if (vlen)
			memcpy(nv, val, vlen);
		free(e->val);
		e->val = nv;
		e->vcap = (uint32_t)vlen;
		s->used = s->used - oldc + newc;
	}
	e->vlen = (uint32_t)vlen;
	e->ver = ++s->clock;
	return 0;
}

static int insert(struct zl_kvs *s, uint64_t h, const void *key, size_t klen, const void *val,
		  size_t vlen, uint64_t *ver)
{
	int height = height_of(h);
	uint64_t ebytes = ent_bytes(height, klen);
	uint64_t need = zl_kvs_alloc_cost(ebytes) + val_cost(vlen);
	bool g = needs_growth(s);
	/* a growth first finishes a drain still running, freeing that table */
	uint64_t freed = g && s->old.s ? table_cost(s->old.mask + 1) : 0;
	if (g)
		need += table_cost((s->cur.mask + 1) * 2);
	if (s->limit && s->used - freed + need > s->limit)
		return -ENOSPC;
	struct zl_kvs_ent *e = malloc(ebytes);
	uint8_t *v = vlen ? malloc(vlen) : NULL;
	int rc = !e || (vlen && !v) ? -ENOMEM : 0;
	if (!rc && g)
		rc = grow(s);
	if (rc) {
		free(e);
		free(v);
		return rc;
	}
	memset(e, 0, sizeof(*e));
	e->hash = h;
	e->ver = ++s->clock;
	e->val = v;
	e->vlen = e->vcap = (uint32_t)vlen;
	e->klen = (uint16_t)klen;
	e->height = (uint8_t)height;
	memcpy((uint8_t *)zl_kvs_key(e), key, klen);
	if (vlen)
		memcpy(v, val, vlen);

	tab_put(&s->cur, h, e);
	struct zl_kvs_ent **prev[ZL_KVS_MAX_HEIGHT];
	sl_find(s, key, klen, false, prev);
	for (int l = 0; l < height; l++) {
		e->next[l] = *prev[l];
		*prev[l] = e;
	}
	if (height > s->level)
		s->level = height;
	s->count++;
	s->used += zl_kvs_alloc_cost(ebytes) + val_cost(vlen);
	*ver = e->ver;
	return 0;
}

static int write_key(struct zl_kvs *s, const void *key, size_t klen, const void *val, size_t vlen,
		     bool cas, uint64_t expected, uint64_t *ver)
{
	if (!lens_ok(klen, vlen) || (vlen && !val))
		return -EINVAL;
	rehash_step(s, s->step);
	uint64_t h = hash_key(s->seed, key, klen);
	struct table *t;
	struct slot *sl = find(s, h, key, klen, &t);
	uint64_t dummy;
	if (!ver)
		ver = &dummy;
	if (cas && (sl ? sl->e->ver : 0) != expected)
		return -ESTALE;
	if (!sl)
		return insert(s, h, key, klen, val, vlen, ver);
	int rc = update(s, sl->e, val, vlen);
	if (!rc)
		*ver = sl->e->ver;
	return rc;
}

int zl_kvs_put(struct zl_kvs *s, const void *key, size_t klen, const void *val, size_t vlen,
	       uint64_t *ver)
{
	return write_key(s, key, klen, val, vlen, false, 0, ver);
}

int zl_kvs_cas(struct zl_kvs *s, const void *key, size_t klen, const void *val, size_t vlen,
	       uint64_t expected, uint64_t *ver)
{
	return write_key(s, key, klen, val, vlen, true, expected, ver);
}

int zl_kvs_del(struct zl_kvs *s, const void *key, size_t klen)
{
	struct table *t;
	struct slot *sl;
	int rc = lookup(s, key, klen, &sl, &t);
	if (rc)
		return rc;
	struct zl_kvs_ent *e = sl->e;
	if (t == &s->old) {
		sl->e = TOMB;
		if (!--s->old.live)
			drain_done(s);
	} else {
		tab_remove(t, sl);
	}
	struct zl_kvs_ent **prev[ZL_KVS_MAX_HEIGHT];
	sl_find(s, key, klen, false, prev);
	for (int l = 0; l < e->height; l++)
		*prev[l] = e->next[l]; /* *prev[l] == e: keys are unique */
	s->count--;
	s->used -= zl_kvs_alloc_cost(ent_bytes(e->height, e->klen)) + val_cost(e->vcap);
	free(e->val);
	free(e);
	return 0;
}

void zl_kvs_set_step(struct zl_kvs *s, unsigned step) { s->step = step ? step : 1; }

void zl_kvs_stats(const struct zl_kvs *s, struct zl_kvs_stats *st)
{
	st->keys = s->count;
	st->used = s->used;
	st->limit = s->limit;
	st->slots = s->cur.mask + 1;
	st->old_slots = s->old.s ? s->old.mask + 1 : 0;
	st->resizes = s->resizes;
	st->step_max = s->step_max;
	st->version = s->clock;
}

/* ---- invariants (tests) ------------------------------------------------- */

#define BAD(msg) \
	do { \
		if (why) \
			*why = (msg); \
		return -EUCLEAN; \
	} while (0)

static int check_table(const struct zl_kvs *s, const struct table *t, bool old, uint64_t *live,
		       const char **why)
{
	*live = 0;
	if (!t->s)
		return 0;
	for (uint64_t i = 0; i <= t->mask; i++) {
		const struct slot *sl = &t->s[i];
		if (!sl->e)
			continue;
		if (sl->e == TOMB) {
			if (!old)
				BAD("tombstone in the current table");
			continue;
		}
		if (old && i < s->cursor)
			BAD("live slot behind the migration cursor");
		const struct zl_kvs_ent *e = sl->e;
		if (sl->hash != e->hash || e->hash != hash_key(s->seed, zl_kvs_key(e), e->klen))
			BAD("slot hash differs from the key's hash");
		if (tab_find(t, e->hash, zl_kvs_key(e), e->klen) != sl)
			BAD("entry not reachable from its home slot");
		(*live)++;
	}
	if (*live != t->live)
		BAD("table live count wrong");
	return 0;
}

int zl_kvs_check(const struct zl_kvs *s, const char **why)
{
	uint64_t n = 0, used = zl_kvs_alloc_cost(sizeof(*s)) + table_cost(s->cur.mask + 1);
	if (s->old.s)
		used += table_cost(s->old.mask + 1);
	if (s->level < 0 || s->level > ZL_KVS_MAX_HEIGHT)
		BAD("level out of range");
	for (int l = 0; l < ZL_KVS_MAX_HEIGHT; l++) {
		const struct zl_kvs_ent *prev = NULL;
		for (const struct zl_kvs_ent *e = s->head[l]; e; prev = e, e = e->next[l]) {
			if (l >= s->level || e->height <= l)
				BAD("entry linked above its height");
			if (prev && zl_kvs_cmp(zl_kvs_key(prev), prev->klen, zl_kvs_key(e), e->klen) >= 0)
				BAD("skip list out of order");
			if (l)
				continue;
			n++;
			if (e->klen < 1 || e->klen > ZL_KV_MAX_KEY || e->vlen > e->vcap ||
			    e->vcap > ZL_KV_MAX_VAL || (e->vcap && !e->val))
				BAD("entry lengths out of range");
			if (e->height != height_of(e->hash))
				BAD("height differs from the hash");
			if (!e->ver || e->ver > s->clock)
				BAD("version out of range");
			struct table *t;
			if (!find((struct zl_kvs *)s, e->hash, zl_kvs_key(e), e->klen, &t) ||
			    find((struct zl_kvs *)s, e->hash, zl_kvs_key(e), e->klen, &t)->e != e)
				BAD("listed entry missing from the hash index");
			used += zl_kvs_alloc_cost(ent_bytes(e->height, e->klen)) + val_cost(e->vcap);
		}
	}
	if (n != s->count)
		BAD("count differs from the list length");
	uint64_t lc, lo;
	if (check_table(s, &s->cur, false, &lc, why) || check_table(s, &s->old, true, &lo, why))
		return -EUCLEAN;
	if (lc + lo != n)
		BAD("hash index and list hold different numbers of keys");
	if (n * 4 > (s->cur.mask + 1) * 3)
		BAD("current table over its load factor");
	if (used != s->used)
		BAD("memory charge differs from a recount");
	if (s->limit && s->used > s->limit)
		BAD("memory charge over the limit");
	return 0;
}
