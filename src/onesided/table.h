/* SPDX-License-Identifier: MIT */
/*
 * The client side of the one-sided store's table (table.c): FIND, GET, SET,
 * DELETE over an access method (struct os_io: shm loads and stores, or
 * RDMA READ, WRITE and CAS), without the server.
 */
#ifndef ZL_OS_TABLE_H
#define ZL_OS_TABLE_H

#include <stdbool.h>
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

#define OS_PRELOAD 8u
#define OS_RA_MAX 4096u
#define OS_LANES 16u /* calls whose first steps go out together (os_prime) */

/* What one call's walk reads: the entries, then a spare word; the
 * containers pre-loaded with the first entries (section 4.3.3). */
struct os_lane {
	uint64_t *ents;
	uint8_t *pre;          /* OS_PRELOAD slots of OS_RA_MAX bytes */
	uint64_t pre_w[OS_PRELOAD]; /* the word each was read for (0: none) */
	uint32_t pre_len[OS_PRELOAD];
	uint64_t home;         /* primed: the walk's first step is read */
	uint32_t n;            /* (n entries from slot home) */
	bool primed;
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
	struct os_counts batch; /* os_prime's reads and waits */
	uint64_t garbage;      /* entries found pointing at no valid container */
	uint64_t garbage_slot; /* the last such slot (the server is told) */
	uint8_t *buf;          /* containers read: ZL_KV_MAX_VAL plus room */
	uint32_t buf_cap;
	uint32_t ents_cap;     /* entries per lane (plus the spare word) */
	uint64_t *ents_all;    /* the lanes' entries, one allocation */
	uint8_t *pre_all;      /* the lanes' pre-loaded containers */
	struct os_lane lane[OS_LANES];
	struct os_lane *ln;    /* the current call's */
	int64_t primed_at;     /* when os_prime read */
};
#define OS_ENTS_BYTES(t) ((size_t)OS_LANES * ((t)->ents_cap + 1) * sizeof(uint64_t))
#define OS_PRE_BYTES ((size_t)OS_LANES * OS_PRELOAD * OS_RA_MAX)

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

/*
 * Pipelined calls (section 4.3): the first step of n calls' walks (key i's
 * entries into lane i, then the containers they point at) goes out for
 * all of them together, in two round trips. Before each of those calls,
 * os_lane(t, i, true) makes it start from what lane i read: a call that
 * still finds the words it read completes with no further round trip; one
 * that finds them changed starts over as if it had read them late (a CAS
 * on a changed word fails; absence is proven on fresh reads). A call that
 * must see an earlier call of the same batch (the same key written
 * before it) takes its lane unprimed. os_lane(t, 0, false) returns to
 * single calls. n is 1..OS_LANES; 0, or io's errors.
 */
struct os_key {
	const void *key;
	uint32_t klen;
};
int os_prime(struct os_table *t, const struct os_key *k, uint32_t n);
void os_lane(struct os_table *t, uint32_t i, bool primed);

/*
 * A batch's SETs and DELETEs, posted without waiting: the walk (from the
 * call's lane), the container's write and the CAS that publishes it go
 * out, and the caller waits once for several (io.sync). The call took
 * effect if p->old == p->expect then; if not (another change won), run it
 * again as a single call. Returns OS_POSTED; OS_UNPOSTED (not sent: run it
 * as a single call); or the call's result (-ENOENT: DELETE of an absent
 * key, and as os_set and os_del). The container is built in w->local and
 * must stay there until the wait.
 */
#define OS_LSTAGE 4096u /* a batch's SET: containers up to this size */
enum { OS_POSTED = 1, OS_UNPOSTED = 2 };
struct os_post {
	uint64_t expect, old;
};
int os_set_post(struct os_table *t, const void *key, uint32_t klen, const void *val,
		uint32_t vlen, const struct os_wctx *w, struct os_post *p);
int os_del_post(struct os_table *t, const void *key, uint32_t klen, struct os_post *p);

/* Readahead of entries for a load factor a: Knuth's expected probes for a
 * successful search, 1/2 (1 + 1/(1 - a)), rounded up (section 4.3.3). */
uint32_t os_ra_entries(double a);

#endif
