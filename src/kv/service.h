/* SPDX-License-Identifier: MIT */
/*
 * zl-kvd's service: the store (store.h) and request execution (exec.h) on
 * a zl_server, one request type per operation (proto.h). tools/zl-kvd runs
 * it as a program; the service tests run it on a thread.
 */
#ifndef ZL_KV_SERVICE_H
#define ZL_KV_SERVICE_H

#include <stdint.h>

#include "zipline.h"

struct zl_kvd;

struct zl_kvd_opts {
	uint64_t mem_limit; /* bytes, 0: none (see zl_kvs_create) */
	uint64_t seed;      /* hash key; 0: a random one */
	const struct zl_server_opts *server; /* NULL: defaults, max_req raised
						to hold the largest request and
						slot_size ZL_KVD_SLOT_SIZE */
};

/* zl-kvd's request slots: a put of a 1 KiB value (YCSB's default record,
 * 10 fields of 100 B) with its key and header fits in one, so it needs no
 * doorbell and no second transfer; larger requests follow over the
 * client's channel. */
#define ZL_KVD_SLOT_SIZE 2048

/* Create the store and the server with its handlers. 0, -EINVAL (a
 * server max_req below ZL_KVP_MAX_REQ), -ENOSPC (mem_limit below the empty
 * store), -ENOMEM, or as zl_server_create. */
int zl_kvd_create(const struct zl_kvd_opts *o, struct zl_kvd **out);

/* The server: listen, run, stop and info through the zl_server_* calls. */
zl_server *zl_kvd_server(struct zl_kvd *d);

/* One line of counters, as the STATS request returns: the store, the
 * operations, and the server's zl_server_info. Serving thread only (or
 * while the server does not run). Returns the length. */
size_t zl_kvd_stats(struct zl_kvd *d, char *buf, size_t cap);

/* Close the server and free the store. NULL: no-op. */
void zl_kvd_destroy(struct zl_kvd *d);

#endif
