/* SPDX-License-Identifier: MIT */
/*
 * Executes zl-kvd requests against a store and builds the replies,
 * independent of how they travel (service.c puts it on a zl_server; the
 * fuzz target calls it directly).
 */
#ifndef ZL_KV_EXEC_H
#define ZL_KV_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "store.h"

struct zl_kvx_counters {
	uint64_t ops[ZL_KVP_NOPS]; /* well-formed requests per op */
	uint64_t notfound, stale, nospc, nomem, malformed;
};

/* Where a reply goes: room for len bytes, written in full before the
 * caller sends it, or NULL if there is none (the request then fails with
 * -ENOMEM). */
struct zl_kvx_out {
	void *(*reserve)(struct zl_kvx_out *o, size_t len);
};

struct zl_kvx {
	struct zl_kvs *store;
	struct zl_kvx_counters c;
	/* Appended to the STATS text (may be NULL): writes at most cap bytes
	 * and returns the length written. */
	size_t (*stats_extra)(void *arg, char *buf, size_t cap);
	void *stats_arg;
	/* scratch: a private copy of the key (the request may live in memory
	 * the client can still write), scan results */
	uint8_t key[ZL_KV_MAX_KEY];
	const struct zl_kvs_ent *scan[ZL_KV_MAX_SCAN];
};

/*
 * Execute one request, a call of `type` with len bytes at req, and write
 * its reply through out. Returns the reply length (> 0), or
 *   -EBADMSG  the request is malformed (nothing was reserved)
 *   -ENOMEM   out had no room
 * Store errors (-ENOENT, -ESTALE, -ENOSPC, -ENOMEM) go into the reply.
 */
long zl_kvx_exec(struct zl_kvx *x, int type, const void *req, size_t len,
		 struct zl_kvx_out *out);

/* One line of "name=value" counters (store, operations, stats_extra),
 * without a newline. Returns the length (truncated to cap - 1). */
size_t zl_kvx_stats_text(struct zl_kvx *x, char *buf, size_t cap);

#endif
