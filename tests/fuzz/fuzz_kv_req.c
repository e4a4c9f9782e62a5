/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for zl-kvd's request handling (src/kv/proto.c, exec.c,
 * store.c). The input is a sequence of requests, each framed as
 *   u8 type, u16 len (little-endian), len bytes (fewer at the end)
 * and run in order against one store with a 256 KiB memory limit, so that
 * requests meet earlier keys, resizes and -ENOSPC. Each request is copied
 * to a buffer of exactly its size (ASan sees any read beyond it), and so is
 * each reply. Checks: a request the parser refuses gets -EBADMSG and changes
 * nothing; any other gets a reply that the client's parser accepts, with
 * the status its operation allows; the store's invariants hold at the end.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "exec.h"

struct buf_out {
	struct zl_kvx_out base;
	uint8_t *p;
	size_t len;
};

static void *buf_reserve(struct zl_kvx_out *o_, size_t len)
{
	struct buf_out *o = (struct buf_out *)o_;
	free(o->p);
	o->p = malloc(len);
	o->len = len;
	return o->p;
}

static bool status_ok(int op, int status)
{
	switch (op) {
	case ZL_KVP_GET:
	case ZL_KVP_DEL:
		return !status || status == -ENOENT;
	case ZL_KVP_PUT:
		return !status || status == -ENOSPC;
	case ZL_KVP_CAS:
		return !status || status == -ENOSPC || status == -ESTALE;
	default:
		return !status;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct zl_kvx *x = calloc(1, sizeof(*x));
	if (!x || zl_kvs_create(256 << 10, 0x5eed, &x->store)) {
		free(x);
		return 0;
	}
	zl_kvs_set_step(x->store, 1); /* long drains */
	struct buf_out o = { .base.reserve = buf_reserve };
	while (size >= 3) {
		int type = data[0];
		size_t len = (size_t)data[1] | (size_t)data[2] << 8;
		data += 3;
		size -= 3;
		if (len > size)
			len = size;
		uint8_t *req = malloc(len ? len : 1);
		if (!req)
			break;
		memcpy(req, data, len);
		data += len;
		size -= len;

		struct zl_kvs_stats before, after;
		zl_kvs_stats(x->store, &before);
		struct zl_kvp_req r;
		int prc = zl_kvp_req_parse(type, req, len, &r);
		long n = zl_kvx_exec(x, type, req, len, &o.base);
		if (prc) {
			FUZZ_ASSERT(prc == -EBADMSG && n == -EBADMSG);
			zl_kvs_stats(x->store, &after);
			FUZZ_ASSERT(after.version == before.version && after.keys == before.keys);
		} else {
			FUZZ_ASSERT(n >= ZL_KVP_HDR && (size_t)n == o.len);
			struct zl_kvp_rep rep;
			FUZZ_ASSERT(zl_kvp_rep_parse(type, o.p, o.len, &rep) == 0);
			FUZZ_ASSERT(status_ok(type, rep.status));
			if (type == ZL_KVP_SCAN)
				FUZZ_ASSERT(rep.count <= r.n && (rep.count || !(rep.flags & ZL_KVP_MORE)));
		}
		free(req);
	}
	FUZZ_ASSERT(zl_kvs_check(x->store, NULL) == 0);
	free(o.p);
	zl_kvs_destroy(x->store);
	free(x);
	return 0;
}
