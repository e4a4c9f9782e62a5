/* SPDX-License-Identifier: MIT */
/*
 * zipline key-value client: talks to zl-kvd (tools/zl-kvd) over any
 * zipline transport (shm://, tcp://, unix://, rdma://), on top of
 * zl_client/zl_call (zipline.h).
 *
 * Semantics: zl-kvd applies every request atomically, one at a time, in a
 * single serving thread, so each operation is linearizable. Every key has a
 * version (> 0). Versions come from one counter for the whole store: each
 * successful write gives its key a version larger than any handed out
 * before, so a key that was deleted and created again never repeats one
 * (no ABA). zl_kv_cas writes only if the version is still the one read, so
 * read-modify-write through zl_kv_rmw never loses an update. Plain
 * zl_kv_put is last-writer-wins. A scan of more than about 1 MiB of records
 * comes in several replies: each is a consistent snapshot, the whole scan
 * is not (it may see writes made between replies; keys still come in
 * strictly ascending order, each once).
 *
 * The one-sided store (store=onesided in the URL; docs/onesided.md) has
 * the same calls, served by the clients themselves on the server's memory:
 * each operation is linearizable too, but versions are unique per write
 * without order, and zl_kv_scan gives -EOPNOTSUPP (see zl_kv_connect(3)).
 *
 * Limits: keys 1..ZL_KV_MAX_KEY bytes, values 0..ZL_KV_MAX_VAL bytes.
 *
 * Conventions as zipline.h: 0 or -errno; timeouts in microseconds (0
 * polls, -1 waits forever). A write that fails with -ETIMEDOUT may still
 * be applied later. Errors common to every call:
 *   -EINVAL      NULL handle, bad key or value length
 *   -ETIMEDOUT   no reply in time
 *   -ECONNRESET  the server went away
 *   -EPROTO      a malformed reply (the handle is unusable: every later
 *                call returns -EPROTO)
 *   -EBADMSG     the server rejected the request as malformed
 *   -ENOMEM      out of memory, here or in the server (nothing written)
 *   -EBUSY, -EMSGSIZE and other errors of zl_call
 *
 * Thread safety: a zl_kv handle is used by one thread at a time; open one
 * per thread.
 */
#ifndef ZIPLINE_KV_H
#define ZIPLINE_KV_H

#include <stddef.h>
#include <stdint.h>

#include "zipline.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZL_KV_MAX_KEY 1024u
#define ZL_KV_MAX_VAL (1u << 20)

typedef struct zl_kv zl_kv;

/* Connect to zl-kvd at url. As zl_client_connect. */
int zl_kv_connect(const char *url, const struct zl_opts *opts, int64_t timeout_us,
		  zl_kv **out);

/* Disconnect. NULL: no-op. */
void zl_kv_close(zl_kv *kv);

/*
 * Read a key. *val points at the value in place (zero copy where the
 * transport allows) until the next call on this handle. val, vlen and
 * version may be NULL (to test for the key, or read only its version).
 * Returns 0, or -ENOENT (no such key), or -EMSGSIZE (the value does not
 * fit this client's max_msg).
 */
int zl_kv_get(zl_kv *kv, const void *key, size_t klen, const void **val, size_t *vlen,
	      uint64_t *version, int64_t timeout_us);

/* Insert or update. 0, or -ENOSPC (the server's memory limit is reached;
 * nothing was written). */
int zl_kv_put(zl_kv *kv, const void *key, size_t klen, const void *val, size_t vlen,
	      int64_t timeout_us);

/* Delete. 0 or -ENOENT. */
int zl_kv_del(zl_kv *kv, const void *key, size_t klen, int64_t timeout_us);

/*
 * Compare and swap: write val only if the key's version is `expected`
 * (0: only if the key does not exist). *new_version (may be NULL) gets the
 * version written. 0, -ESTALE (version differs), -ENOSPC.
 */
int zl_kv_cas(zl_kv *kv, const void *key, size_t klen, const void *val, size_t vlen,
	      uint64_t expected, uint64_t *new_version, int64_t timeout_us);

/* Called by zl_kv_rmw with the current value (NULL, 0 if absent); writes
 * the new value to out (cap = ZL_KV_MAX_VAL bytes) and its length to
 * *outlen. Return 0, or a negative errno to abort the rmw with that error.
 * It may run several times (once per attempt) and must not call other
 * functions on the handle. */
typedef int (*zl_kv_modify_fn)(const void *val, size_t vlen, void *out, size_t cap,
			       size_t *outlen, void *arg);

/* Read, modify with fn, write back with zl_kv_cas on the version read
 * (0 if absent); retried on -ESTALE until timeout_us, which bounds the
 * whole call. 0, or fn's error, or as zl_kv_cas (-ETIMEDOUT rather than
 * -ESTALE when the time ran out), or -EINVAL (fn NULL, or *outlen over
 * ZL_KV_MAX_VAL). */
int zl_kv_rmw(zl_kv *kv, const void *key, size_t klen, zl_kv_modify_fn fn, void *arg,
	      int64_t timeout_us);

/* One operation of zl_kv_batch. */
enum { ZL_KV_OP_GET = 1, ZL_KV_OP_PUT = 2, ZL_KV_OP_DEL = 3 };
struct zl_kv_op {
	int op;          /* ZL_KV_OP_* */
	const void *key;
	size_t klen;
	const void *val; /* PUT: the value, vlen bytes */
	size_t vlen;     /* PUT: in; GET: out, the value's length */
	void *buf;       /* GET: the value is copied here (cap bytes; NULL
	                    with cap 0 for its length and version only) */
	size_t cap;
	uint64_t version; /* out: GET the version read, PUT the one written */
	int rc;          /* out: as zl_kv_get, zl_kv_put, zl_kv_del; GET
	                    -EMSGSIZE: the value is longer than cap (vlen
	                    says how long; buf untouched); -ECANCELED: the
	                    batch stopped before this operation */
};
#define ZL_KV_MAX_BATCH 64u

/*
 * Run n (1..ZL_KV_MAX_BATCH) operations with several in flight at once
 * (zl_kv_batch(3)): on the one-sided store the first reads of up to 16 go
 * out together, and their writes and compare-and-swaps too; on zl-kvd the requests are pipelined over the client's
 * call slots. Operations on the same key take effect in array order;
 * operations on different keys may take effect in any order, as
 * concurrent calls would. timeout_us bounds the whole call.
 * Returns 0 when every operation ran (each one's result in its rc), or
 * -EINVAL (kv or ops NULL, n out of range, or an operation with a bad
 * code, key or value: its rc says -EINVAL, the others -ECANCELED, and
 * nothing ran), or the error that stopped the batch (-ETIMEDOUT,
 * -ECONNRESET, -EPROTO, -ENOMEM, ...): operations whose rc is that error
 * may or may not have taken effect, those with -ECANCELED did not.
 */
int zl_kv_batch(zl_kv *kv, struct zl_kv_op *ops, size_t n, int64_t timeout_us);

/* One record of a scan. Return 0 to continue, non-zero to stop early. */
typedef int (*zl_kv_scan_fn)(const void *key, size_t klen, const void *val, size_t vlen,
			     void *arg);

/*
 * Visit up to n (1..ZL_KV_MAX_SCAN) records in key order (bytewise, shorter
 * first on a tie), starting at the first key >= start; slen 0 (start may be
 * NULL) starts at the smallest key. Returns the number visited (>= 0; the
 * record on which fn stopped counts), or an error, possibly after some
 * records were visited. The pointers are valid during the callback, which
 * must not call other functions on the handle. -EINVAL also for fn NULL,
 * n out of range, slen over ZL_KV_MAX_KEY.
 */
#define ZL_KV_MAX_SCAN 1000u
int zl_kv_scan(zl_kv *kv, const void *start, size_t slen, uint32_t n, zl_kv_scan_fn fn,
	       void *arg, int64_t timeout_us);

/* Counts of one kind of call (zl_kv_info). */
struct zl_kv_opcount {
	uint64_t calls;       /* calls made */
	uint64_t reads;       /* one-sided reads (RDMA READs; copies on shm) */
	uint64_t writes;      /* one-sided writes */
	uint64_t atomics;     /* compare-and-swaps */
	uint64_t round_trips; /* waits: for the NIC's completions, or for a
	                         reply (every call to zl-kvd is one) */
	uint64_t probes;      /* table slots looked at (one-sided) */
	uint64_t retries;     /* restarts: a word changed, a CAS lost */
};

struct zl_kv_info {
	uint32_t size;     /* set to sizeof(struct zl_kv_info) by the caller */
	uint32_t onesided; /* 1: the handle uses the one-sided store */
	struct zl_kv_opcount get, set, del; /* set: put, cas (and rmw's) */
	uint64_t garbage;  /* table entries found pointing at no valid
	                      container (a faulty client wrote them) */
	/* zl_kv_batch: calls; one-sided, the reads and waits of the first
	 * steps it sent for several operations at once (the operations'
	 * own counts have the rest); zl-kvd, the replies waited for */
	struct zl_kv_opcount batch;
};

/* What this handle has done so far. 0, or -EINVAL (NULL, or info->size
 * smaller than the first two fields). Fields past info->size are not
 * written. */
int zl_kv_info(const zl_kv *kv, struct zl_kv_info *info);

/*
 * The one-sided store's server (store=onesided; docs/onesided.md): owns
 * the chunk that clients read and write directly, hands out regions, and
 * runs the collector thread. Its requests are served by srv's serving
 * thread (zl_server_run/poll), on whatever URLs srv listens.
 * Thread safety: create and close from the thread that owns srv, while
 * srv is not serving.
 */
struct zl_kvos_opts {
	uint32_t size;         /* sizeof(struct zl_kvos_opts) */
	uint32_t max_regions;  /* regions one client may hold, 1..16;
	                          default 2 */
	uint64_t mem;          /* data space bytes; default 256 MiB */
	uint64_t region_len;   /* bytes per region, a multiple of 8 and at
	                          least a container of the largest value you
	                          will store; default 4 MiB */
	uint64_t nslots;       /* hash table slots, a power of two, 0: mem /
	                          256 rounded up (at least 1024) */
	int64_t hb_window_us;  /* a client not heard from for this long loses
	                          its regions; default 5 s, at least 50 ms */
	uint32_t max_clients;  /* sessions at once, 1..65536; default 1024 */
	uint32_t reserved[3];
};
typedef struct zl_kvos zl_kvos;

void zl_kvos_opts_init(struct zl_kvos_opts *o);
/* Create the store on srv (opts NULL: defaults). 0, -EINVAL (bad options,
 * or mem under 3 regions), -ENOMEM, or -errno of memfd_create, mmap or the
 * socket that hands out the chunk. */
int zl_kvos_create(zl_server *srv, const struct zl_kvos_opts *opts, zl_kvos **out);
/* Stop the collector and free the store. NULL: no-op. */
void zl_kvos_close(zl_kvos *s);

#ifdef __cplusplus
}
#endif
#endif /* ZIPLINE_KV_H */
