/* SPDX-License-Identifier: MIT */
/*
 * The client side of the one-sided store's table (table.c): FIND, GET, SET,
 * DELETE over an access method (struct os_io: shm loads and stores, or
 * RDMA READ, WRITE and CAS), without the server.
 */
#ifndef ZL_OS_TABLE_H
#define ZL_OS_TABLE_H

#include <stdint.h>

#include "layout.h"

/*
 * Access to the server's chunk. read, write and cas post an operation;
 * their results (dst filled, *old set, src free again) are there once sync
 * returned 0. shm does everything at once and sync does nothing. Errors:
 * -ECONNRESET (the server is gone) or -EIO.
 */
struct os_io {
	int (*read)(void *ctx, uint64_t off, void *dst, uint32_t len);
	int (*write)(void *ctx, uint64_t off, const void *src, uint32_t len);
	int (*cas)(void *ctx, uint64_t off, uint64_t expect, uint64_t desired, uint64_t *old);
	int (*sync)(void *ctx);
	void *ctx;
};

/* Operations and probes, counted per call type. */
struct os_counts {
	uint64_t ops, reads, writes, cas, syncs, probes, retries;
};

struct os_table {
	struct os_geom g;
	struct os_io io;
	int64_t budget_us;     /* a call that keeps restarting gives up after
	                          this long (-EAGAIN); 0: after one try */
	/* Called at every restart: the client keeps its session alive there
	 * (a long call must not outlive it: on rdma the server then closes
	 * the window). 0, or an error that ends the call. */
	int (*renew)(void *arg);
	void *renew_arg;
	double load;           /* the load factor last heard from the server */
	uint32_t ra_bytes;     /* container bytes read ahead (adapts) */
	struct os_counts get, set, del;
	uint64_t garbage;      /* entries found pointing at no valid container */
	uint64_t garbage_slot; /* the last such slot (the server is told) */
	uint8_t *buf;          /* containers read: ZL_KV_MAX_VAL plus room */
	uint32_t buf_cap;
	uint64_t *ents;        /* entries read ahead, then a spare word */
	uint32_t ents_cap;
	/* containers pre-loaded with the first entries (section 4.3.3) */
	uint8_t *pre;          /* OS_PRELOAD slots of OS_RA_MAX bytes */
	uint64_t pre_w[8];     /* the word each was read for (0: none) */
	uint32_t pre_len[8];
};
#define OS_PRELOAD 8u
#define OS_RA_MAX 4096u

/* Where a container may be written: the caller's region, and what happens
 * before a SET commits. */
struct os_wctx {
	uint64_t off;     /* byte offset of the container in the chunk */
	uint8_t *local;   /* its bytes, built here (registered memory on rdma) */
	uint64_t version; /* written into the container */
	/* Called right before the CAS that publishes: 0 to go on, or an error
	 * (the region's lease ran out). */
	int (*may_commit)(void *arg);
	void *arg;
};

int os_table_init(struct os_table *t, const struct os_geom *g, const struct os_io *io);
void os_table_fini(struct os_table *t);

/* 0 and the value in t->buf (*val, *vlen, *version), -ENOENT, -EBADMSG
 * (the key's entry stayed corrupt), -EAGAIN (kept changing, or locked, for
 * budget_us), or io's errors. */
int os_get(struct os_table *t, const void *key, uint32_t klen, const uint8_t **val,
	   uint32_t *vlen, uint64_t *version);

/* Write key=val through w (the container at w->off, built in w->local), if
 * the key's version is `expected` (UINT64_MAX: any; 0: absent). 0,
 * -ESTALE, -ENOSPC (no free slot), -EAGAIN, may_commit's error, io's. */
int os_set(struct os_table *t, const void *key, uint32_t klen, const void *val,
	   uint32_t vlen, uint64_t expected, const struct os_wctx *w);

/* 0, -ENOENT, -EAGAIN, io's errors. A walk over a full table without the
 * key: -ENOENT from os_get and os_del, -ENOSPC from os_set. */
int os_del(struct os_table *t, const void *key, uint32_t klen);

/* Readahead of entries for a load factor a: Knuth's expected probes for a
 * successful search, 1/2 (1 + 1/(1 - a)), rounded up (section 4.3.3). */
uint32_t os_ra_entries(double a);

#endif
