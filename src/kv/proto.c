/* SPDX-License-Identifier: MIT */
/* zl-kvd wire format (proto.h): encode, and validate every length against
 * the bytes actually received. */
#include "proto.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

static inline uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static inline uint32_t ld32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t ld64(const uint8_t *p) { return ld32(p) | (uint64_t)ld32(p + 4) << 32; }

static inline void st16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void st32(uint8_t *p, uint32_t v)
{
	st16(p, (uint16_t)v);
	st16(p + 2, (uint16_t)(v >> 16));
}

static inline void st64(uint8_t *p, uint64_t v)
{
	st32(p, (uint32_t)v);
	st32(p + 4, (uint32_t)(v >> 32));
}

void zl_kvp_req_hdr(const struct zl_kvp_req *r, void *hdr)
{
	uint8_t *h = hdr;
	h[0] = ZL_KVP_FMT;
	h[1] = r->op;
	st16(h + 2, r->flags);
	st16(h + 4, (uint16_t)r->klen);
	st16(h + 6, 0);
	st32(h + 8, r->vlen);
	st32(h + 12, r->n);
	st64(h + 16, r->expected);
}

int zl_kvp_req_parse(int type, const void *buf, size_t len, struct zl_kvp_req *r)
{
	uint8_t h[ZL_KVP_HDR];
	if (len < ZL_KVP_HDR)
		return -EBADMSG;
	/* one read of the header: on shm the client can rewrite it under us */
	memcpy(h, buf, ZL_KVP_HDR);
	r->op = h[1];
	r->flags = ld16(h + 2);
	r->klen = ld16(h + 4);
	r->vlen = ld32(h + 8);
	r->n = ld32(h + 12);
	r->expected = ld64(h + 16);
	r->key = (const uint8_t *)buf + ZL_KVP_HDR;
	r->val = r->key + r->klen;
	if (h[0] != ZL_KVP_FMT || r->op != type || ld16(h + 6))
		return -EBADMSG;
	if (r->klen > ZL_KV_MAX_KEY || r->vlen > ZL_KV_MAX_VAL ||
	    len != (size_t)ZL_KVP_HDR + r->klen + r->vlen)
		return -EBADMSG;
	bool has_val = r->op == ZL_KVP_PUT || r->op == ZL_KVP_CAS;
	if (!has_val && r->vlen)
		return -EBADMSG;
	if (r->op != ZL_KVP_SCAN && (r->flags || r->n))
		return -EBADMSG;
	if (r->op != ZL_KVP_CAS && r->expected)
		return -EBADMSG;
	switch (r->op) {
	case ZL_KVP_GET:
	case ZL_KVP_PUT:
	case ZL_KVP_DEL:
	case ZL_KVP_CAS:
		return r->klen ? 0 : -EBADMSG;
	case ZL_KVP_SCAN: /* klen 0: from the first key */
		if (r->flags & ~ZL_KVP_EXCL || !r->n || r->n > ZL_KV_MAX_SCAN)
			return -EBADMSG;
		return 0;
	case ZL_KVP_STATS:
		return r->klen ? -EBADMSG : 0;
	default:
		return -EBADMSG;
	}
}

void zl_kvp_rep_hdr(const struct zl_kvp_rep *r, void *hdr)
{
	uint8_t *h = hdr;
	h[0] = ZL_KVP_FMT;
	h[1] = r->op;
	st16(h + 2, r->flags);
	st32(h + 4, (uint32_t)r->status);
	st32(h + 8, r->count);
	st32(h + 12, r->blen);
	st64(h + 16, r->ver);
}

void zl_kvp_rec_hdr(void *p, uint32_t klen, uint32_t vlen)
{
	st32(p, klen);
	st32((uint8_t *)p + 4, vlen);
}

int zl_kvp_rec_next(const uint8_t **p, const uint8_t *end, const uint8_t **key, uint32_t *klen,
		    const uint8_t **val, uint32_t *vlen)
{
	const uint8_t *q = *p;
	if ((size_t)(end - q) < ZL_KVP_REC)
		return -EPROTO;
	uint32_t kl = ld32(q), vl = ld32(q + 4);
	q += ZL_KVP_REC;
	if (kl < 1 || kl > ZL_KV_MAX_KEY || vl > ZL_KV_MAX_VAL || (size_t)(end - q) < (size_t)kl + vl)
		return -EPROTO;
	*key = q;
	*klen = kl;
	*val = q + kl;
	*vlen = vl;
	*p = q + kl + vl;
	return 0;
}

int zl_kvp_rep_parse(int op, const void *buf, size_t len, struct zl_kvp_rep *r)
{
	const uint8_t *h = buf;
	if (len < ZL_KVP_HDR)
		return -EPROTO;
	r->op = h[1];
	r->flags = ld16(h + 2);
	r->status = (int32_t)ld32(h + 4);
	r->count = ld32(h + 8);
	r->blen = ld32(h + 12);
	r->ver = ld64(h + 16);
	r->body = h + ZL_KVP_HDR;
	if (h[0] != ZL_KVP_FMT || r->op != op || len != (size_t)ZL_KVP_HDR + r->blen)
		return -EPROTO;
	if (r->status > 0 || r->status < -4095)
		return -EPROTO;
	if (op != ZL_KVP_SCAN && (r->flags || r->count))
		return -EPROTO;
	if (r->status) /* errors carry nothing else */
		return r->flags || r->count || r->blen || r->ver ? -EPROTO : 0;
	switch (op) {
	case ZL_KVP_GET:
		return r->ver && r->blen <= ZL_KV_MAX_VAL ? 0 : -EPROTO;
	case ZL_KVP_PUT:
	case ZL_KVP_CAS:
		return r->ver && !r->blen ? 0 : -EPROTO;
	case ZL_KVP_DEL:
		return !r->ver && !r->blen ? 0 : -EPROTO;
	case ZL_KVP_STATS:
		return !r->ver && r->blen <= ZL_KVP_MAX_STATS ? 0 : -EPROTO;
	case ZL_KVP_SCAN: {
		if (r->ver || r->flags & ~ZL_KVP_MORE || r->count > ZL_KV_MAX_SCAN)
			return -EPROTO;
		const uint8_t *p = r->body, *end = p + r->blen, *k, *v;
		uint32_t kl, vl;
		for (uint32_t i = 0; i < r->count; i++)
			if (zl_kvp_rec_next(&p, end, &k, &kl, &v, &vl))
				return -EPROTO;
		return p == end ? 0 : -EPROTO;
	}
	default:
		return -EPROTO;
	}
}
