/* SPDX-License-Identifier: MIT */
/*
 * A reference model of the key-value store for the kv tests: a sorted
 * array of keys, each with its version and the id and length of its value
 * (the bytes are tl_fill(id), so the model holds no values). Also a pool
 * of test keys: binary, 1..1024 bytes, many sharing prefixes.
 */
#ifndef ZL_KV_MODEL_H
#define ZL_KV_MODEL_H

#include "testlib.h"
#include "zipline_kv.h"

struct mkey {
	uint8_t *key;
	uint16_t klen;
	uint32_t vlen;
	uint64_t vid; /* value bytes: tl_fill(vid) */
	uint64_t ver;
};

struct model {
	struct mkey *e;
	size_t n, cap;
};

static inline int m_cmp(const void *a, size_t al, const void *b, size_t bl)
{
	size_t m = al < bl ? al : bl;
	int c = m ? memcmp(a, b, m) : 0;
	return c ? c : (al > bl) - (al < bl);
}

/* Index of the first key >= key (> key if excl). */
static inline size_t m_lower(const struct model *m, const void *key, size_t klen, bool excl)
{
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = m_cmp(m->e[mid].key, m->e[mid].klen, key, klen);
		if (c < 0 || (excl && c == 0))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static inline struct mkey *m_find(struct model *m, const void *key, size_t klen)
{
	size_t i = m_lower(m, key, klen, false);
	if (i < m->n && !m_cmp(m->e[i].key, m->e[i].klen, key, klen))
		return &m->e[i];
	return NULL;
}

/* Check a read of key (rc, value, version) against the model. */
static inline void m_check_get(struct model *m, const void *key, size_t klen, int rc,
			       const void *v, size_t vlen, uint64_t ver)
{
	struct mkey *mk = m_find(m, key, klen);
	if (!mk) {
		CHECK_RC(rc, -ENOENT);
		return;
	}
	CHECK_OK(rc);
	CHECK_EQ_U64(vlen, mk->vlen);
	CHECK_EQ_U64(ver, mk->ver);
	CHECK_PATTERN(v, vlen, mk->vid);
}

static inline void m_put(struct model *m, const void *key, size_t klen, uint64_t vid,
			 size_t vlen, uint64_t ver)
{
	size_t i = m_lower(m, key, klen, false);
	if (i == m->n || m_cmp(m->e[i].key, m->e[i].klen, key, klen)) {
		if (m->n == m->cap) {
			m->cap = m->cap ? 2 * m->cap : 256;
			m->e = realloc(m->e, m->cap * sizeof(*m->e));
			CHECK(m->e);
		}
		memmove(&m->e[i + 1], &m->e[i], (m->n - i) * sizeof(*m->e));
		m->n++;
		m->e[i].key = malloc(klen);
		CHECK(m->e[i].key);
		memcpy(m->e[i].key, key, klen);
		m->e[i].klen = (uint16_t)klen;
	}
	m->e[i].vid = vid;
	m->e[i].vlen = (uint32_t)vlen;
	m->e[i].ver = ver;
}

static inline void m_del(struct model *m, const void *key, size_t klen)
{
	struct mkey *k = m_find(m, key, klen);
	CHECK(k);
	size_t i = (size_t)(k - m->e);
	free(k->key);
	memmove(&m->e[i], &m->e[i + 1], (m->n - i - 1) * sizeof(*m->e));
	m->n--;
}

static inline void m_free(struct model *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->e[i].key);
	free(m->e);
	memset(m, 0, sizeof(*m));
}

/* ---- test keys ---------------------------------------------------------- */

struct tkey {
	uint8_t *b;
	uint16_t len;
};

/* n keys: random bytes of mostly short lengths (sometimes up to 1024),
 * prefixes of earlier keys, and earlier keys plus one 0x00 or 0xff byte
 * (neighbours in key order). Duplicates are possible and harmless. */
static inline struct tkey *make_keys(struct tl_rng *r, size_t n)
{
	struct tkey *k = calloc(n, sizeof(*k));
	CHECK(k);
	for (size_t i = 0; i < n; i++) {
		uint64_t kind = tl_rand_below(r, 10);
		size_t len;
		uint8_t buf[ZL_KV_MAX_KEY];
		struct tkey *o = i ? &k[tl_rand_below(r, i)] : NULL;
		if (o && kind < 2 && o->len > 1) {
			len = 1 + tl_rand_below(r, o->len - 1u);
			memcpy(buf, o->b, len);
		} else if (o && kind < 3) {
			len = o->len < ZL_KV_MAX_KEY ? o->len + 1u : o->len;
			memcpy(buf, o->b, o->len);
			buf[len - 1] = tl_rand_below(r, 2) ? 0xff : 0x00;
		} else {
			uint64_t l = tl_rand_below(r, 100);
			len = l < 80 ? 1 + tl_rand_below(r, 16)
			    : l < 97 ? 1 + tl_rand_below(r, 200)
			    : l < 99 ? 1 + tl_rand_below(r, ZL_KV_MAX_KEY)
				     : ZL_KV_MAX_KEY;
			tl_fill(buf, len, tl_rand(r));
		}
		k[i].len = (uint16_t)len;
		k[i].b = malloc(len);
		CHECK(k[i].b);
		memcpy(k[i].b, buf, len);
	}
	return k;
}

static inline void free_keys(struct tkey *k, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(k[i].b);
	free(k);
}

/* A value length: mostly small, some empty, rarely big or exactly 1 MiB
 * (when big is set). */
static inline size_t rand_vlen(struct tl_rng *r, bool big)
{
	uint64_t x = tl_rand_below(r, 1000);
	if (x < 50)
		return 0;
	if (x < 700)
		return 1 + tl_rand_below(r, 64);
	if (x < 950)
		return 65 + tl_rand_below(r, 4096 - 64);
	if (x < 998 || !big)
		return 4096 + tl_rand_below(r, 65536);
	return ZL_KV_MAX_VAL;
}

#endif
