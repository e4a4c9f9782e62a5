/* SPDX-License-Identifier: MIT */
/*
 * The one-sided store (after the Falafel thesis, "Memory Management for Concurrent RDMA", KIT 2014): the client behind zl_kv handles
 * opened with store=onesided (client.c), and the server that owns the
 * chunk (server.c, gc.c: zl_kvos_* in zipline_kv.h). The client's
 * interface for src/kv.
 */
#ifndef ZL_ONESIDED_H
#define ZL_ONESIDED_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "zipline.h"
#include "zipline_kv.h"

/* ---- client (zipline_kv.h semantics; see zl_kv_connect(3)) --------------
 * The caller (src/kv/client.c) has checked the arguments. */

struct zl_os;
int zl_os_connect(const char *url, const struct zl_opts *opts, int64_t timeout_us,
		  struct zl_os **out);
void zl_os_close(struct zl_os *os);
/* *val, *vlen, *version are set on success (none may be NULL). */
int zl_os_get(struct zl_os *os, const void *key, size_t klen, const void **val,
	      size_t *vlen, uint64_t *version, int64_t timeout_us);
/* expected: UINT64_MAX any (put), 0 absent, else that version (cas). */
int zl_os_put(struct zl_os *os, const void *key, size_t klen, const void *val,
	      size_t vlen, uint64_t expected, uint64_t *new_version, int64_t timeout_us);
int zl_os_del(struct zl_os *os, const void *key, size_t klen, int64_t timeout_us);
void zl_os_info(const struct zl_os *os, struct zl_kv_info *info);
/* zl_kv_batch (the caller has checked ops). */
int zl_os_batch(struct zl_os *os, struct zl_kv_op *ops, size_t n, int64_t timeout_us);

/* ---- zl_kv_batch's rules, for both stores ----------------------------- */

/* Whether rc is an operation's own outcome (the batch goes on). */
static inline bool zl_kv_op_outcome(int rc)
{
	return rc == 0 || rc == -ENOENT || rc == -EMSGSIZE || rc == -ENOSPC ||
	       rc == -EBADMSG || rc == -EAGAIN || rc == -EOPNOTSUPP;
}

static inline bool zl_kv_same_key(const struct zl_kv_op *a, const struct zl_kv_op *b)
{
	return a->klen == b->klen && !memcmp(a->key, b->key, a->klen);
}

/* Whether ops[j] must see a write of its key among ops[from..j). */
static inline bool zl_kv_after_write(const struct zl_kv_op *ops, size_t from, size_t j)
{
	for (size_t i = from; i < j; i++)
		if (ops[i].op != ZL_KV_OP_GET && zl_kv_same_key(&ops[i], &ops[j]))
			return true;
	return false;
}

/* A GET's result into o: its value copied to o->buf if it fits. */
static inline void zl_kv_op_got(struct zl_kv_op *o, const void *v, size_t n, uint64_t ver)
{
	o->vlen = n;
	o->version = ver;
	o->rc = n > o->cap ? -EMSGSIZE : 0;
	if (!o->rc && n)
		memcpy(o->buf, v, n);
}

/* Mark ops[from..n) as not run. */
static inline void zl_kv_op_cancel(struct zl_kv_op *ops, size_t from, size_t n)
{
	for (size_t i = from; i < n; i++)
		ops[i].rc = -ECANCELED;
}
/* One compare-and-swap of the 8 bytes at chunk offset off, through the
 * handle's access method (the server's own CASes through the device:
 * gc.c). 1 swapped, 0 not (*expect gets the value found), or -errno. */
int zl_os_cas(struct zl_os *os, uint64_t off, uint64_t *expect, uint64_t desired);

#endif
