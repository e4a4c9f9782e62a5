/* SPDX-License-Identifier: MIT */
/*
 * The one-sided store (Falafel, seed 001): the client behind zl_kv handles
 * opened with store=onesided (client.c), and the server that owns the
 * chunk (server.c, gc.c: zl_kvos_* in zipline_kv.h). The client's
 * interface for src/kv.
 */
#ifndef ZL_ONESIDED_H
#define ZL_ONESIDED_H

#include <stddef.h>
#include <stdint.h>

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
/* One compare-and-swap of the 8 bytes at chunk offset off, through the
 * handle's access method (the server's own CASes through the device:
 * gc.c). 1 swapped, 0 not (*expect gets the value found), or -errno. */
int zl_os_cas(struct zl_os *os, uint64_t off, uint64_t *expect, uint64_t desired);

#endif
