/* SPDX-License-Identifier: MIT */
/*
 * redis://HOST:PORT -- our own small RESP client (no hiredis): one blocking
 * TCP connection per thread, TCP_NODELAY, a timeout on every read and
 * write, one request and one reply at a time (--depth: pipelined, all
 * requests in one write, then the replies). Commands:
 *   read    GET key
 *   update  SET key record
 *   insert  SET key record; with scans also ZADD idx 0 key, sent together
 *           in one write (one round trip, two replies)
 *   scan    ZRANGEBYLEX idx [key + LIMIT 0 n, then MGET of those keys
 *   rmw     GET then SET: two round trips, not atomic (as YCSB's read-
 *           modify-write, which is a read followed by an update)
 * The sorted set "idx" holds every key with score 0, so ZRANGEBYLEX walks
 * them in bytewise order, the order zl_kv_scan uses.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"
#include "ycsb.h"

#define IDX "idx"

struct rd {
	struct conn c;
	int scan_index;
};

static int parse_i64(const char *s, size_t n, int64_t *v)
{
	int neg = n && *s == '-';
	size_t i = (size_t)neg;
	int64_t x = 0;
	if (i == n)
		return -EPROTO;
	for (; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || x > (INT64_MAX - 9) / 10)
			return -EPROTO;
		x = x * 10 + (s[i] - '0');
	}
	*v = neg ? -x : x;
	return 0;
}

/* An error reply "-ERR ..." -> a fatal error with the server's text. */
static int err_reply(struct conn *c, const char *l, size_t n)
{
	int rc = n >= 4 && !memcmp(l, "-OOM", 4) ? -ENOSPC : -EREMOTEIO;
	return conn_fail(c, rc, "redis: %.*s", (int)(n > 121 ? 120 : n - 1), l + 1);
}

/* The header line of a reply of type t ('$', '*', ':') -> its number. */
static int header(struct conn *c, char t, int64_t *v)
{
	const char *l;
	size_t n;
	int rc = conn_line(c, &l, &n);
	if (rc < 0)
		return rc;
	if (n && l[0] == '-')
		return err_reply(c, l, n);
	if (!n || l[0] != t || parse_i64(l + 1, n - 1, v) < 0)
		return conn_fail(c, -EPROTO, "redis: unexpected reply '%.*s'", (int)(n > 60 ? 60 : n), l);
	return 0;
}

static int status_ok(struct conn *c)
{
	const char *l;
	size_t n;
	int rc = conn_line(c, &l, &n);
	if (rc < 0)
		return rc;
	if (n && (l[0] == '+' || l[0] == ':'))
		return 0;
	if (n && l[0] == '-')
		return err_reply(c, l, n);
	return conn_fail(c, -EPROTO, "redis: unexpected reply '%.*s'", (int)(n > 60 ? 60 : n), l);
}

/* A bulk string we only measure: its length, or -ENOENT for nil. */
static int bulk_len(struct conn *c, size_t *len)
{
	int64_t v;
	int rc = header(c, '$', &v);
	if (rc < 0)
		return rc;
	if (v < 0)
		return -ENOENT;
	*len = (size_t)v;
	return conn_skip_data(c, (size_t)v);
}

static int put_bulk(struct conn *c, const void *p, size_t n)
{
	int rc;
	if ((rc = conn_put(c, "$", 1)) < 0 || (rc = conn_put_u64(c, n)) < 0 ||
	    (rc = conn_put(c, "\r\n", 2)) < 0 || (rc = conn_put(c, p, n)) < 0)
		return rc;
	return conn_put(c, "\r\n", 2);
}

static int put_cmd(struct conn *c, int argc, const char *name)
{
	int rc;
	if ((rc = conn_put(c, "*", 1)) < 0 || (rc = conn_put_u64(c, (uint64_t)argc)) < 0 ||
	    (rc = conn_put(c, "\r\n", 2)) < 0)
		return rc;
	return put_bulk(c, name, strlen(name));
}

static int rd_open(const char *addr, const struct be_conf *cf, void **h)
{
	struct rd *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->scan_index = cf->scan_index;
	/* writes: a record, or an MGET of maxscan keys; reads stream values */
	size_t wcap = (cf->recsize + 256) * (size_t)(cf->depth > 1 ? cf->depth : 1) +
		      (size_t)cf->maxscan * (KEY_MAX + 16);
	int rc = conn_open(&r->c, addr, 64 * 1024, wcap, cf->timeout_us);
	*h = r;
	if (rc < 0)
		return rc;
	/* fail early and clearly if this is not a redis server */
	if ((rc = put_cmd(&r->c, 1, "PING")) < 0 || (rc = conn_send(&r->c)) < 0 ||
	    (rc = status_ok(&r->c)) < 0)
		return rc;
	return 0;
}

static void rd_close(void *h)
{
	struct rd *r = h;
	if (r)
		conn_close(&r->c);
	free(r);
}

static const char *rd_error(void *h)
{
	return ((struct rd *)h)->c.err;
}

static int rd_read(void *h, const char *key, size_t klen, size_t *vlen)
{
	struct conn *c = &((struct rd *)h)->c;
	int rc;
	if ((rc = put_cmd(c, 2, "GET")) < 0 || (rc = put_bulk(c, key, klen)) < 0 ||
	    (rc = conn_send(c)) < 0)
		return rc;
	return bulk_len(c, vlen);
}

static int put_set(struct conn *c, const char *key, size_t klen, const void *val, size_t vlen)
{
	int rc;
	if ((rc = put_cmd(c, 3, "SET")) < 0 || (rc = put_bulk(c, key, klen)) < 0)
		return rc;
	return put_bulk(c, val, vlen);
}

/* The key into the sorted set of all keys (scans walk it). */
static int put_zadd(struct conn *c, const char *key, size_t klen)
{
	int rc;
	if ((rc = put_cmd(c, 4, "ZADD")) < 0 || (rc = put_bulk(c, IDX, strlen(IDX))) < 0 ||
	    (rc = put_bulk(c, "0", 1)) < 0)
		return rc;
	return put_bulk(c, key, klen);
}

static int rd_update(void *h, const char *key, size_t klen, const void *val, size_t vlen)
{
	struct conn *c = &((struct rd *)h)->c;
	int rc;
	if ((rc = put_set(c, key, klen, val, vlen)) < 0 || (rc = conn_send(c)) < 0)
		return rc;
	return status_ok(c);
}

static int rd_insert(void *h, const char *key, size_t klen, const void *val, size_t vlen)
{
	struct rd *r = h;
	struct conn *c = &r->c;
	int rc;
	if (!r->scan_index)
		return rd_update(h, key, klen, val, vlen);
	if ((rc = put_set(c, key, klen, val, vlen)) < 0 || (rc = put_zadd(c, key, klen)) < 0 ||
	    (rc = conn_send(c)) < 0)
		return rc;
	if ((rc = status_ok(c)) < 0)
		return rc;
	return status_ok(c);
}

static int rd_scan(void *h, const char *key, size_t klen, uint32_t n, uint32_t *got)
{
	struct conn *c = &((struct rd *)h)->c;
	char start[KEY_MAX + 1], num[16];
	int64_t k, i;
	int rc;
	start[0] = '[';
	memcpy(start + 1, key, klen);
	int nl = snprintf(num, sizeof(num), "%u", n);
	if ((rc = put_cmd(c, 7, "ZRANGEBYLEX")) < 0 || (rc = put_bulk(c, IDX, strlen(IDX))) < 0 ||
	    (rc = put_bulk(c, start, klen + 1)) < 0 || (rc = put_bulk(c, "+", 1)) < 0 ||
	    (rc = put_bulk(c, "LIMIT", 5)) < 0 || (rc = put_bulk(c, "0", 1)) < 0 ||
	    (rc = put_bulk(c, num, (size_t)nl)) < 0 || (rc = conn_send(c)) < 0)
		return rc;
	if ((rc = header(c, '*', &k)) < 0)
		return rc;
	if (k > n)
		return conn_fail(c, -EPROTO, "redis: ZRANGEBYLEX returned %lld > %u keys",
				 (long long)k, n);
	*got = 0;
	if (k <= 0)
		return 0;
	/* MGET the keys as they arrive: no copy of the key list */
	if ((rc = put_cmd(c, (int)k + 1, "MGET")) < 0)
		return rc;
	for (i = 0; i < k; i++) {
		int64_t len;
		const char *d;
		if ((rc = header(c, '$', &len)) < 0)
			return rc;
		if (len < 0 || len > KEY_MAX || (rc = conn_data(c, (size_t)len, &d)) < 0)
			return len < 0 || len > KEY_MAX ? conn_fail(c, -EPROTO, "redis: bad key in index")
							: rc;
		if ((rc = put_bulk(c, d, (size_t)len)) < 0)
			return rc;
	}
	if ((rc = conn_send(c)) < 0 || (rc = header(c, '*', &i)) < 0)
		return rc;
	if (i != k)
		return conn_fail(c, -EPROTO, "redis: MGET returned %lld of %lld values", (long long)i,
				 (long long)k);
	for (i = 0; i < k; i++) {
		size_t vlen;
		rc = bulk_len(c, &vlen);
		if (rc == 0)
			(*got)++;
		else if (rc != -ENOENT) /* nil: deleted since; not expected */
			return rc;
	}
	return 0;
}

static int rd_rmw(void *h, const char *key, size_t klen, const void *val, size_t vlen,
		  size_t *oldlen)
{
	int rc = rd_read(h, key, klen, oldlen);
	if (rc < 0)
		return rc;
	return rd_update(h, key, klen, val, vlen);
}

/* Pipelined: every command in one write, then the replies in order. */
static int rd_batch(void *h, struct be_op *ops, int n)
{
	struct rd *r = h;
	struct conn *c = &r->c;
	int rc = 0;
	for (int i = 0; i < n && rc >= 0; i++) {
		struct be_op *o = &ops[i];
		if (o->op == OP_READ) {
			if ((rc = put_cmd(c, 2, "GET")) >= 0)
				rc = put_bulk(c, o->key, o->klen);
		} else if ((rc = put_set(c, o->key, o->klen, o->val, o->vlen)) >= 0 &&
			   o->op == OP_INSERT && r->scan_index) {
			rc = put_zadd(c, o->key, o->klen);
		}
	}
	if (rc < 0 || (rc = conn_send(c)) < 0)
		return rc;
	for (int i = 0; i < n; i++) {
		struct be_op *o = &ops[i];
		if (o->op == OP_READ) {
			rc = bulk_len(c, &o->vlen);
		} else if ((rc = status_ok(c)) >= 0 && o->op == OP_INSERT && r->scan_index) {
			rc = status_ok(c);
		}
		if (rc < 0 && rc != -ENOENT)
			return rc;
		o->rc = rc;
	}
	return 0;
}

const struct backend be_redis = {
	.scheme = "redis://",
	.open = rd_open,
	.close = rd_close,
	.error = rd_error,
	.read = rd_read,
	.update = rd_update,
	.insert = rd_insert,
	.scan = rd_scan,
	.rmw = rd_rmw,
	.batch = rd_batch,
	.scan_how = "ZRANGEBYLEX on a sorted set of the keys, then MGET",
};
