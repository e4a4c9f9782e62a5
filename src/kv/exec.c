/* SPDX-License-Identifier: MIT */
/* Request execution for zl-kvd (exec.h). */
#include "exec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* A reply without a body: the status of a write, or any error. */
static long reply_status(struct zl_kvx *x, uint8_t op, int status, uint64_t ver,
			 struct zl_kvx_out *out)
{
	switch (status) {
	case 0:
		break;
	case -ENOENT:
		x->c.notfound++;
		break;
	case -ESTALE:
		x->c.stale++;
		break;
	case -ENOSPC:
		x->c.nospc++;
		break;
	default:
		x->c.nomem++;
		break;
	}
	uint8_t *p = out->reserve(out, ZL_KVP_HDR);
	if (!p)
		return -ENOMEM;
	struct zl_kvp_rep h = { .op = op, .status = status, .ver = status ? 0 : ver };
	zl_kvp_rep_hdr(&h, p);
	return ZL_KVP_HDR;
}

static long exec_get(struct zl_kvx *x, const struct zl_kvp_req *r, struct zl_kvx_out *out)
{
	const uint8_t *v;
	size_t vlen;
	uint64_t ver;
	int rc = zl_kvs_get(x->store, x->key, r->klen, &v, &vlen, &ver);
	if (rc)
		return reply_status(x, r->op, rc, 0, out);
	uint8_t *p = out->reserve(out, ZL_KVP_HDR + vlen);
	if (!p)
		return -ENOMEM;
	struct zl_kvp_rep h = { .op = r->op, .blen = (uint32_t)vlen, .ver = ver };
	zl_kvp_rep_hdr(&h, p);
	if (vlen)
		memcpy(p + ZL_KVP_HDR, v, vlen);
	return (long)(ZL_KVP_HDR + vlen);
}

static long exec_scan(struct zl_kvx *x, const struct zl_kvp_req *r, struct zl_kvx_out *out)
{
	const struct zl_kvs_ent *e = zl_kvs_seek(x->store, x->key, r->klen, r->flags & ZL_KVP_EXCL);
	uint32_t n = 0;
	size_t body = 0;
	for (; e && n < r->n; e = zl_kvs_next(e)) {
		size_t rec = ZL_KVP_REC + e->klen + e->vlen;
		if (n && body + rec > ZL_KVP_SCAN_BUDGET)
			break;
		x->scan[n++] = e;
		body += rec;
	}
	uint8_t *p = out->reserve(out, ZL_KVP_HDR + body);
	if (!p)
		return -ENOMEM;
	struct zl_kvp_rep h = { .op = r->op, .count = n, .blen = (uint32_t)body,
				.flags = n < r->n && e ? ZL_KVP_MORE : 0 };
	zl_kvp_rep_hdr(&h, p);
	uint8_t *q = p + ZL_KVP_HDR;
	for (uint32_t i = 0; i < n; i++) {
		e = x->scan[i];
		zl_kvp_rec_hdr(q, e->klen, e->vlen);
		q += ZL_KVP_REC;
		memcpy(q, zl_kvs_key(e), e->klen);
		q += e->klen;
		if (e->vlen)
			memcpy(q, e->val, e->vlen);
		q += e->vlen;
	}
	return (long)(ZL_KVP_HDR + body);
}

static long exec_stats(struct zl_kvx *x, const struct zl_kvp_req *r, struct zl_kvx_out *out)
{
	char text[ZL_KVP_MAX_STATS];
	size_t n = zl_kvx_stats_text(x, text, sizeof(text));
	uint8_t *p = out->reserve(out, ZL_KVP_HDR + n);
	if (!p)
		return -ENOMEM;
	struct zl_kvp_rep h = { .op = r->op, .blen = (uint32_t)n };
	zl_kvp_rep_hdr(&h, p);
	memcpy(p + ZL_KVP_HDR, text, n);
	return (long)(ZL_KVP_HDR + n);
}

long zl_kvx_exec(struct zl_kvx *x, int type, const void *req, size_t len,
		 struct zl_kvx_out *out)
{
	struct zl_kvp_req r;
	if (zl_kvp_req_parse(type, req, len, &r)) {
		x->c.malformed++;
		return -EBADMSG;
	}
	x->c.ops[r.op]++;
	/* the store hashes, compares and copies the key several times: give
	 * it bytes the client cannot change in between */
	memcpy(x->key, r.key, r.klen);
	uint64_t ver = 0;
	int rc;
	switch (r.op) {
	case ZL_KVP_GET:
		return exec_get(x, &r, out);
	case ZL_KVP_PUT:
		rc = zl_kvs_put(x->store, x->key, r.klen, r.val, r.vlen, &ver);
		return reply_status(x, r.op, rc, ver, out);
	case ZL_KVP_CAS:
		rc = zl_kvs_cas(x->store, x->key, r.klen, r.val, r.vlen, r.expected, &ver);
		return reply_status(x, r.op, rc, ver, out);
	case ZL_KVP_DEL:
		return reply_status(x, r.op, zl_kvs_del(x->store, x->key, r.klen), 0, out);
	case ZL_KVP_SCAN:
		return exec_scan(x, &r, out);
	default: /* ZL_KVP_STATS; the parser let nothing else through */
		return exec_stats(x, &r, out);
	}
}

size_t zl_kvx_stats_text(struct zl_kvx *x, char *buf, size_t cap)
{
	struct zl_kvs_stats s;
	zl_kvs_stats(x->store, &s);
	const struct zl_kvx_counters *c = &x->c;
	int k = snprintf(buf, cap,
			 "keys=%" PRIu64 " mem=%" PRIu64 " limit=%" PRIu64 " slots=%" PRIu64
			 " draining=%" PRIu64 " resizes=%" PRIu64 " get=%" PRIu64 " put=%" PRIu64
			 " del=%" PRIu64 " scan=%" PRIu64 " cas=%" PRIu64 " stats=%" PRIu64
			 " notfound=%" PRIu64 " stale=%" PRIu64 " nospc=%" PRIu64 " nomem=%" PRIu64
			 " malformed=%" PRIu64,
			 s.keys, s.used, s.limit, s.slots, s.old_slots, s.resizes,
			 c->ops[ZL_KVP_GET], c->ops[ZL_KVP_PUT], c->ops[ZL_KVP_DEL],
			 c->ops[ZL_KVP_SCAN], c->ops[ZL_KVP_CAS], c->ops[ZL_KVP_STATS], c->notfound,
			 c->stale, c->nospc, c->nomem, c->malformed);
	size_t n = k < 0 ? 0 : (size_t)k >= cap ? cap - 1 : (size_t)k;
	if (x->stats_extra && n + 1 < cap)
		n += x->stats_extra(x->stats_arg, buf + n, cap - n);
	return n;
}
