/* SPDX-License-Identifier: MIT */
/*
 * The zl-kvd client (zipline_kv.h) on zl_client/zl_call. Requests are
 * built in place (header, key, value in one buffer: zl_call takes one);
 * replies are read where zl_call leaves them, so a GET's value is not
 * copied again.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "onesided.h"
#include "proto.h"
#include "url.h"
#include "zipline_kv.h"


struct zl_kv {
	zl_client *cli;
	bool failed;  /* a malformed reply came: every call now -EPROTO */
	uint8_t *buf; /* requests with a value; rmw builds the value in it */
	size_t cap;
	uint8_t small[ZL_KVP_HDR + ZL_KV_MAX_KEY]; /* requests without one */
	uint8_t last[ZL_KV_MAX_KEY]; /* where a paged scan continues */
	struct zl_os *os; /* store=onesided: every call goes there */
	struct zl_kv_opcount get, set, del, batch; /* two-sided counts */
};

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t deadline_of(int64_t timeout_us)
{
	return timeout_us < 0 ? -1 : now_us() + timeout_us;
}

static int64_t left_us(int64_t deadline)
{
	if (deadline < 0)
		return -1;
	int64_t l = deadline - now_us();
	return l > 0 ? l : 0;
}

static bool key_ok(const void *key, size_t klen)
{
	return key && klen >= 1 && klen <= ZL_KV_MAX_KEY;
}

/* Send msg (a request of r->op, header included) and parse the reply.
 * Returns the status in it, or the call's error. */
static int call(zl_kv *kv, uint8_t op, const void *msg, size_t len, struct zl_kvp_rep *rep,
		int64_t timeout_us)
{
	if (kv->failed)
		return -EPROTO;
	const void *p;
	size_t n;
	struct zl_kv_opcount *c = op == ZL_KVP_GET ? &kv->get : op == ZL_KVP_DEL ? &kv->del
				: op == ZL_KVP_SCAN ? NULL : &kv->set;
	if (c)
		c->calls++, c->round_trips++;
	int rc = zl_call(kv->cli, op, msg, len, &p, &n, timeout_us);
	if (rc)
		return rc;
	if (zl_kvp_rep_parse(op, p, n, rep)) {
		ZL_LOG(ZL_LOG_ERROR, "kv: malformed reply to op %u (%zu bytes)", op, n);
		kv->failed = true;
		return -EPROTO;
	}
	return rep->status;
}

/* A request without a value, in kv->small. */
static int call_small(zl_kv *kv, const struct zl_kvp_req *r, const void *key,
		      struct zl_kvp_rep *rep, int64_t timeout_us)
{
	zl_kvp_req_hdr(r, kv->small);
	if (r->klen)
		memcpy(kv->small + ZL_KVP_HDR, key, r->klen);
	return call(kv, r->op, kv->small, ZL_KVP_HDR + r->klen, rep, timeout_us);
}

/* The URL without its store= parameter (the transports refuse unknown
 * keys) into out; *onesided says whether it was store=onesided. 0 or
 * -EINVAL (too long, or another store). */
static int strip_store(const char *url, char *out, size_t cap, bool *onesided)
{
	const char *q = strchr(url, '?');
	size_t n = q ? (size_t)(q - url) : strlen(url);
	*onesided = false;
	if (n >= cap)
		return -EINVAL;
	memcpy(out, url, n);
	out[n] = 0;
	char sep = '?';
	for (const char *p = q ? q + 1 : ""; *p;) {
		const char *e = strchr(p, '&');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (!strncmp(p, "store=", 6)) {
			if (l == 14 && !strncmp(p + 6, "onesided", 8))
				*onesided = true;
			else if (l != 14 || strncmp(p + 6, "twosided", 8))
				return -EINVAL;
		} else {
			if (n + 1 + l >= cap)
				return -EINVAL;
			out[n++] = sep;
			memcpy(out + n, p, l);
			n += l;
			out[n] = 0;
			sep = '&';
		}
		p += l + (e ? 1 : 0);
	}
	return 0;
}

ZL_API int zl_kv_connect(const char *url, const struct zl_opts *opts, int64_t timeout_us,
			 zl_kv **out)
{
	char plain[ZL_URL_MAX];
	bool onesided;
	if (!url || !out || strip_store(url, plain, sizeof(plain), &onesided))
		return -EINVAL;
	zl_kv *kv = calloc(1, sizeof(*kv));
	if (!kv)
		return -ENOMEM;
	int rc = onesided ? zl_os_connect(plain, opts, timeout_us, &kv->os)
			  : zl_client_connect(plain, opts, timeout_us, &kv->cli);
	if (rc) {
		free(kv);
		return rc;
	}
	*out = kv;
	return 0;
}

ZL_API void zl_kv_close(zl_kv *kv)
{
	if (!kv)
		return;
	zl_os_close(kv->os);
	zl_client_close(kv->cli);
	free(kv->buf);
	free(kv);
}

ZL_API int zl_kv_info(const zl_kv *kv, struct zl_kv_info *info)
{
	if (!kv || !info || info->size < 2 * sizeof(uint32_t))
		return -EINVAL;
	struct zl_kv_info i = { .size = info->size };
	if (kv->os) {
		zl_os_info(kv->os, &i);
	} else {
		i.get = kv->get;
		i.set = kv->set;
		i.del = kv->del;
		i.batch = kv->batch;
	}
	size_t n = info->size < sizeof(i) ? info->size : sizeof(i);
	memcpy(info, &i, n);
	return 0;
}

ZL_API int zl_kv_get(zl_kv *kv, const void *key, size_t klen, const void **val, size_t *vlen,
		     uint64_t *version, int64_t timeout_us)
{
	if (!kv || !key_ok(key, klen))
		return -EINVAL;
	const void *v;
	size_t n;
	uint64_t ver;
	int rc;
	if (kv->os) {
		rc = zl_os_get(kv->os, key, klen, &v, &n, &ver, timeout_us);
	} else {
		struct zl_kvp_req r = { .op = ZL_KVP_GET, .klen = (uint32_t)klen };
		struct zl_kvp_rep rep;
		rc = call_small(kv, &r, key, &rep, timeout_us);
		v = rep.body, n = rep.blen, ver = rep.ver;
	}
	if (rc)
		return rc;
	if (val)
		*val = v;
	if (vlen)
		*vlen = n;
	if (version)
		*version = ver;
	return 0;
}

ZL_API int zl_kv_del(zl_kv *kv, const void *key, size_t klen, int64_t timeout_us)
{
	if (!kv || !key_ok(key, klen))
		return -EINVAL;
	if (kv->os)
		return zl_os_del(kv->os, key, klen, timeout_us);
	struct zl_kvp_req r = { .op = ZL_KVP_DEL, .klen = (uint32_t)klen };
	struct zl_kvp_rep rep;
	return call_small(kv, &r, key, &rep, timeout_us);
}

/* PUT or CAS of the request in kv->buf, whose value (vlen bytes) is
 * already in place after the key. */
static int write_call(zl_kv *kv, uint8_t op, size_t klen, size_t vlen, uint64_t expected,
		      uint64_t *new_version, int64_t timeout_us)
{
	struct zl_kvp_req r = { .op = op, .klen = (uint32_t)klen, .vlen = (uint32_t)vlen,
				.expected = expected };
	zl_kvp_req_hdr(&r, kv->buf);
	struct zl_kvp_rep rep;
	int rc = call(kv, op, kv->buf, ZL_KVP_HDR + klen + vlen, &rep, timeout_us);
	if (!rc && new_version)
		*new_version = rep.ver;
	return rc;
}

static int write_kv(zl_kv *kv, uint8_t op, const void *key, size_t klen, const void *val,
		    size_t vlen, uint64_t expected, uint64_t *new_version, int64_t timeout_us)
{
	if (!kv || !key_ok(key, klen) || vlen > ZL_KV_MAX_VAL || (!val && vlen))
		return -EINVAL;
	if (kv->os)
		return zl_os_put(kv->os, key, klen, val, vlen,
				 op == ZL_KVP_PUT ? UINT64_MAX : expected, new_version, timeout_us);
	int rc = zl_grow(&kv->buf, &kv->cap, ZL_KVP_HDR + klen + vlen);
	if (rc)
		return rc;
	memcpy(kv->buf + ZL_KVP_HDR, key, klen);
	if (vlen)
		memcpy(kv->buf + ZL_KVP_HDR + klen, val, vlen);
	return write_call(kv, op, klen, vlen, expected, new_version, timeout_us);
}

ZL_API int zl_kv_put(zl_kv *kv, const void *key, size_t klen, const void *val, size_t vlen,
		     int64_t timeout_us)
{
	return write_kv(kv, ZL_KVP_PUT, key, klen, val, vlen, 0, NULL, timeout_us);
}

ZL_API int zl_kv_cas(zl_kv *kv, const void *key, size_t klen, const void *val, size_t vlen,
		     uint64_t expected, uint64_t *new_version, int64_t timeout_us)
{
	return write_kv(kv, ZL_KVP_CAS, key, klen, val, vlen, expected, new_version, timeout_us);
}

ZL_API int zl_kv_rmw(zl_kv *kv, const void *key, size_t klen, zl_kv_modify_fn fn, void *arg,
		     int64_t timeout_us)
{
	if (!kv || !key_ok(key, klen) || !fn)
		return -EINVAL;
	int64_t deadline = deadline_of(timeout_us);
	/* fn writes the new value straight behind the key of the CAS */
	int rc = zl_grow(&kv->buf, &kv->cap, ZL_KVP_HDR + klen + ZL_KV_MAX_VAL);
	if (rc)
		return rc;
	memcpy(kv->buf + ZL_KVP_HDR, key, klen);
	uint8_t *out = kv->buf + ZL_KVP_HDR + klen;
	for (;;) {
		const void *val = NULL;
		size_t vlen = 0, outlen = 0;
		uint64_t ver = 0;
		rc = zl_kv_get(kv, key, klen, &val, &vlen, &ver, left_us(deadline));
		if (rc == -ENOENT) {
			val = NULL;
			vlen = 0;
			ver = 0; /* CAS with 0: only if still absent */
		} else if (rc) {
			return rc;
		}
		rc = fn(val, vlen, out, ZL_KV_MAX_VAL, &outlen, arg);
		if (rc)
			return rc < 0 ? rc : -EINVAL;
		if (outlen > ZL_KV_MAX_VAL)
			return -EINVAL;
		rc = kv->os ? zl_os_put(kv->os, key, klen, out, outlen, ver, NULL,
					left_us(deadline))
			    : write_call(kv, ZL_KVP_CAS, klen, outlen, ver, NULL, left_us(deadline));
		if (rc != -ESTALE)
			return rc;
		if (deadline >= 0 && now_us() >= deadline)
			return -ETIMEDOUT;
	}
}

/* ---- zl_kv_batch ----------------------------------------------------------- */

static bool op_ok(const struct zl_kv_op *o)
{
	if (!key_ok(o->key, o->klen))
		return false;
	switch (o->op) {
	case ZL_KV_OP_GET:
		return o->buf || !o->cap;
	case ZL_KV_OP_PUT:
		return o->vlen <= ZL_KV_MAX_VAL && (o->val || !o->vlen);
	case ZL_KV_OP_DEL:
		return true;
	default:
		return false;
	}
}

/* The request of o in kv->buf: its length, or -ENOMEM. */
static uint8_t op_code(const struct zl_kv_op *o)
{
	return o->op == ZL_KV_OP_GET ? ZL_KVP_GET : o->op == ZL_KV_OP_PUT ? ZL_KVP_PUT : ZL_KVP_DEL;
}

static int batch_req(zl_kv *kv, const struct zl_kv_op *o, uint8_t *code)
{
	*code = op_code(o);
	size_t vlen = o->op == ZL_KV_OP_PUT ? o->vlen : 0;
	struct zl_kvp_req r = { .op = *code, .klen = (uint32_t)o->klen, .vlen = (uint32_t)vlen };
	int rc = zl_grow(&kv->buf, &kv->cap, ZL_KVP_HDR + o->klen + vlen);
	if (rc)
		return rc;
	zl_kvp_req_hdr(&r, kv->buf);
	memcpy(kv->buf + ZL_KVP_HDR, o->key, o->klen);
	if (vlen)
		memcpy(kv->buf + ZL_KVP_HDR + o->klen, o->val, vlen);
	return (int)(ZL_KVP_HDR + o->klen + vlen);
}

/* Start o on zl-kvd: its tag; -EBUSY when it must wait for the replies in
 * flight (no slot, no room, or a request that must not be sent without
 * the time to finish it); or an error. */
static int batch_send(zl_kv *kv, const struct zl_kv_op *o, bool flying, int64_t deadline)
{
	uint8_t code;
	int len = batch_req(kv, o, &code);
	if (len < 0)
		return len;
	if (flying && zl_call_needs_channel(kv->cli, (size_t)len))
		return -EBUSY;
	int t = zl_call_send(kv->cli, code, kv->buf, (size_t)len, flying ? 0 : left_us(deadline));
	if (flying && (t == -EAGAIN || t == -ETIMEDOUT))
		return -EBUSY;
	if (t >= 0) {
		struct zl_kv_opcount *c = code == ZL_KVP_GET ? &kv->get
					: code == ZL_KVP_DEL ? &kv->del : &kv->set;
		c->calls++;
	}
	return t == -EAGAIN ? -ETIMEDOUT : t;
}

/* A reply for o (the call's result rc, the reply p, n). 0, or -EPROTO. */
static int batch_reply(zl_kv *kv, struct zl_kv_op *o, int rc, const void *p, size_t n)
{
	uint8_t code = op_code(o);
	struct zl_kvp_rep rep;
	if (rc) {
		o->rc = rc; /* the handler's error */
		return 0;
	}
	if (zl_kvp_rep_parse(code, p, n, &rep)) {
		ZL_LOG(ZL_LOG_ERROR, "kv: malformed reply to op %u (%zu bytes)", code, n);
		kv->failed = true;
		return o->rc = -EPROTO;
	}
	if (rep.status)
		o->rc = rep.status;
	else if (code == ZL_KVP_GET)
		zl_kv_op_got(o, rep.body, rep.blen, rep.ver);
	else
		o->rc = 0, o->version = rep.ver;
	return 0;
}

/* Whether ops[j] must wait for an operation in flight (the same key, one
 * of the two a write): zl-kvd may serve a client's slots in any order. */
static bool batch_conflict(const struct zl_kv_op *ops, const int *tags, size_t j)
{
	for (size_t i = 0; i < j; i++)
		if (tags[i] >= 0 && (ops[i].op != ZL_KV_OP_GET || ops[j].op != ZL_KV_OP_GET) &&
		    zl_kv_same_key(&ops[i], &ops[j]))
			return true;
	return false;
}

/* Pipelined over the client's call slots. */
static int batch_twosided(zl_kv *kv, struct zl_kv_op *ops, size_t n, int64_t timeout_us)
{
	int64_t deadline = deadline_of(timeout_us);
	int tags[ZL_KV_MAX_BATCH]; /* per op: its call's tag while in flight */
	size_t sent = 0, done = 0;
	int flying = 0, rc = kv->failed ? -EPROTO : 0;
	for (size_t i = 0; i < n; i++)
		tags[i] = -1;
	while (!rc && done < n) {
		while (sent < n && (!flying || !batch_conflict(ops, tags, sent))) {
			int t = batch_send(kv, &ops[sent], flying > 0, deadline);
			if (flying && t == -EBUSY)
				break; /* collect replies first */
			if (t == -EMSGSIZE) { /* nothing sent: the op's own outcome */
				ops[sent++].rc = t;
				done++;
				continue;
			}
			if (t < 0) {
				rc = t;
				break;
			}
			tags[sent++] = t;
			flying++;
		}
		if (rc || !flying)
			continue;
		const void *p;
		size_t len;
		int tag;
		kv->batch.round_trips++;
		int r = zl_call_recv(kv->cli, &tag, &p, &len, left_us(deadline));
		if (tag < 0) {
			rc = r == -EAGAIN ? -ETIMEDOUT : r; /* the time ran out */
			break;
		}
		size_t j = 0;
		while (j < sent && tags[j] != tag)
			j++;
		if (j == sent) { /* not ours: zl_call_recv keeps tags straight */
			rc = -EPROTO;
			break;
		}
		tags[j] = -1;
		flying--;
		done++;
		rc = batch_reply(kv, &ops[j], r, p, len);
	}
	if (rc) { /* in flight: unknown, and given up on; not sent: not run */
		for (size_t i = 0; i < sent; i++)
			if (tags[i] >= 0) {
				ops[i].rc = rc;
				zl_call_abandon(kv->cli, tags[i]);
			}
		zl_kv_op_cancel(ops, sent, n);
	}
	return rc;
}

ZL_API int zl_kv_batch(zl_kv *kv, struct zl_kv_op *ops, size_t n, int64_t timeout_us)
{
	if (!kv || !ops || !n || n > ZL_KV_MAX_BATCH)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!op_ok(&ops[i])) {
			zl_kv_op_cancel(ops, 0, n);
			ops[i].rc = -EINVAL;
			return -EINVAL;
		}
	}
	if (kv->os)
		return zl_os_batch(kv->os, ops, n, timeout_us);
	kv->batch.calls++;
	return batch_twosided(kv, ops, n, timeout_us);
}

ZL_API int zl_kv_scan(zl_kv *kv, const void *start, size_t slen, uint32_t n, zl_kv_scan_fn fn,
		      void *arg, int64_t timeout_us)
{
	if (!kv || slen > ZL_KV_MAX_KEY || (slen && !start) || !n || n > ZL_KV_MAX_SCAN || !fn)
		return -EINVAL;
	if (kv->os)
		return -EOPNOTSUPP; /* a hash table has no key order */
	int64_t deadline = deadline_of(timeout_us);
	struct zl_kvp_req r = { .op = ZL_KVP_SCAN, .klen = (uint32_t)slen };
	uint32_t seen = 0;
	/* A reply holds about 1 MiB of records: continue after the last key
	 * until n records or the end. */
	for (;;) {
		r.n = n - seen;
		struct zl_kvp_rep rep;
		int rc = call_small(kv, &r, start, &rep, left_us(deadline));
		if (rc)
			return rc;
		const uint8_t *p = rep.body, *end = p + rep.blen, *k = NULL, *v;
		uint32_t kl = 0, vl;
		for (uint32_t i = 0; i < rep.count; i++) {
			if (zl_kvp_rec_next(&p, end, &k, &kl, &v, &vl))
				return -EPROTO; /* checked by the parse: changed since */
			seen++;
			if (fn(k, kl, v, vl, arg))
				return (int)seen;
		}
		if (!(rep.flags & ZL_KVP_MORE) || !rep.count || seen >= n)
			return (int)seen;
		memcpy(kv->last, k, kl);
		start = kv->last;
		r.klen = kl;
		r.flags = ZL_KVP_EXCL;
	}
}
