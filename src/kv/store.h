/* SPDX-License-Identifier: MIT */
/*
 * The in-memory store behind zl-kvd: one entry per key, reachable from a
 * hash index (point operations) and a skip list (ordered scans). See
 * docs/kv.md for the design.
 *
 * Single-threaded: the caller serialises all calls (zl-kvd calls it from
 * its one serving thread). Pointers returned by get/seek/next stay valid
 * until the next call that writes (put, cas, del).
 */
#ifndef ZL_KV_STORE_H
#define ZL_KV_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zipline_kv.h"

#define ZL_KVS_MAX_HEIGHT 16 /* skip list levels; p = 1/4 */
#define ZL_KVS_REHASH_STEP 64 /* old-table slots migrated per operation */

struct zl_kvs;

/* One key. The skip-list links and then the key follow the header in one
 * allocation; the value is a separate allocation (NULL when empty). */
struct zl_kvs_ent {
	uint64_t hash;
	uint64_t ver;
	uint8_t *val;
	uint32_t vlen;
	uint32_t vcap;    /* bytes allocated at val */
	uint16_t klen;
	uint8_t height;   /* links in next[] */
	uint8_t pad[5];
	struct zl_kvs_ent *next[]; /* height links, then klen key bytes */
};

static inline const uint8_t *zl_kvs_key(const struct zl_kvs_ent *e)
{
	return (const uint8_t *)&e->next[e->height];
}

struct zl_kvs_stats {
	uint64_t keys;
	uint64_t used;        /* bytes charged (see zl_kvs_alloc_cost) */
	uint64_t limit;       /* 0: none */
	uint64_t slots;       /* slots of the current hash table */
	uint64_t old_slots;   /* slots of the table being drained, 0 if none */
	uint64_t resizes;     /* table growths started */
	uint64_t step_max;    /* most old slots migrated by one operation */
	uint64_t version;     /* last version handed out */
};

/*
 * Create a store. mem_limit: bytes (0: no limit) above which writes fail
 * with -ENOSPC; seed: keys the hash (use a random one, so that clients
 * cannot aim keys at one bucket). 0, -ENOMEM, or -ENOSPC when the limit
 * does not even hold the empty table.
 */
int zl_kvs_create(uint64_t mem_limit, uint64_t seed, struct zl_kvs **out);
void zl_kvs_destroy(struct zl_kvs *s);

/* Key and value lengths are checked by every call: klen 1..ZL_KV_MAX_KEY,
 * vlen 0..ZL_KV_MAX_VAL, else -EINVAL. */

/* 0 with the value in place and its version (either may be NULL), or
 * -ENOENT. */
int zl_kvs_get(struct zl_kvs *s, const void *key, size_t klen, const uint8_t **val,
	       size_t *vlen, uint64_t *ver);

/* Insert or update. 0 and the new version, or -ENOSPC (over the limit;
 * nothing changed), -ENOMEM (malloc failed; nothing changed), -EINVAL. */
int zl_kvs_put(struct zl_kvs *s, const void *key, size_t klen, const void *val, size_t vlen,
	       uint64_t *ver);

/* Write only if the key's version is `expected` (0: only if absent).
 * As zl_kvs_put, or -ESTALE. */
int zl_kvs_cas(struct zl_kvs *s, const void *key, size_t klen, const void *val, size_t vlen,
	       uint64_t expected, uint64_t *ver);

/* 0 or -ENOENT (or -EINVAL). */
int zl_kvs_del(struct zl_kvs *s, const void *key, size_t klen);

/* First entry with key >= start (> start if excl) in key order: bytewise,
 * the shorter key first when one is a prefix of the other. slen 0 starts
 * at the smallest key. NULL at the end. */
const struct zl_kvs_ent *zl_kvs_seek(struct zl_kvs *s, const void *start, size_t slen,
				     bool excl);
static inline const struct zl_kvs_ent *zl_kvs_next(const struct zl_kvs_ent *e)
{
	return e->next[0];
}

void zl_kvs_stats(const struct zl_kvs *s, struct zl_kvs_stats *st);

/* Tests: migrate `step` old slots per operation instead of
 * ZL_KVS_REHASH_STEP (slower drains overlap more operations). Below 2 a
 * growth can find the previous drain unfinished and completes it at once. */
void zl_kvs_set_step(struct zl_kvs *s, unsigned step);

/* Bytewise order, shorter first on a common prefix (<0, 0, >0). */
int zl_kvs_cmp(const void *a, size_t alen, const void *b, size_t blen);

/* What the store charges for an allocation of n bytes: glibc malloc's
 * footprint (8-byte chunk header, 16-byte granules, 32 bytes at least;
 * page-rounded with a 16-byte header from 128 KiB, where glibc mmaps). */
uint64_t zl_kvs_alloc_cost(uint64_t n);

/* Bytes charged for a key with a value of vlen bytes in store s (the
 * skip-list height comes from the key's hash). Tests use it. */
uint64_t zl_kvs_entry_cost(const struct zl_kvs *s, const void *key, size_t klen, size_t vlen);

/* Verify every invariant (O(n)): order and levels of the skip list, the
 * hash tables, counts and the memory charge recomputed from scratch.
 * 0, or -EUCLEAN with *why (may be NULL) naming the broken one. */
int zl_kvs_check(const struct zl_kvs *s, const char **why);

#endif
