/* SPDX-License-Identifier: MIT */
/*
 * memcached://HOST:PORT -- our own small client for memcached's text
 * protocol: one blocking TCP connection per thread, TCP_NODELAY, a timeout
 * on every read and write, one request and one reply at a time (--depth:
 * pipelined, all requests in one write, then the replies).
 *   read    get key
 *   update, insert   set key 0 0 len
 *   rmw     gets key, then cas key 0 0 len unique; retried from the gets
 *           when another client wrote in between (EXISTS)
 *   scan    none: memcached cannot enumerate keys (YCSB's memcached
 *           binding has no scan either), so workload E is n/a
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"
#include "ycsb.h"

struct mc {
	struct conn c;
	int64_t timeout_us;
};

/* "VALUE <key> <flags> <bytes> [<cas>]": the bytes and the cas unique. */
static int parse_value(const char *l, size_t n, size_t *bytes, uint64_t *cas)
{
	char tmp[KEY_MAX + 96];
	if (n >= sizeof(tmp))
		return -EPROTO;
	memcpy(tmp, l, n);
	tmp[n] = 0;
	char *s = tmp + 6, *end; /* after "VALUE " */
	s = strchr(s, ' '); /* skip the key */
	if (!s)
		return -EPROTO;
	strtoul(s, &end, 10); /* flags */
	if (end == s)
		return -EPROTO;
	unsigned long long b = strtoull(end, &s, 10);
	if (s == end)
		return -EPROTO;
	*bytes = (size_t)b;
	if (cas) {
		*cas = strtoull(s, &end, 10);
		if (end == s)
			return -EPROTO;
	}
	return 0;
}

static int bad_reply(struct conn *c, const char *l, size_t n)
{
	int rc = n >= 12 && !memcmp(l, "SERVER_ERROR", 12) && memmem(l, n, "memory", 6) ? -ENOSPC
										     : -EREMOTEIO;
	return conn_fail(c, rc, "memcached: %.*s", (int)(n > 120 ? 120 : n), l);
}

/* Reply to get/gets: a value (its length, and cas if wanted) or a miss. */
static int get_reply(struct conn *c, size_t *vlen, uint64_t *cas)
{
	const char *l;
	size_t n;
	int rc = conn_line(c, &l, &n);
	if (rc < 0)
		return rc;
	if (n == 3 && !memcmp(l, "END", 3))
		return -ENOENT;
	if (n < 6 || memcmp(l, "VALUE ", 6))
		return bad_reply(c, l, n);
	if (parse_value(l, n, vlen, cas) < 0)
		return conn_fail(c, -EPROTO, "memcached: bad VALUE line");
	if ((rc = conn_skip_data(c, *vlen)) < 0 || (rc = conn_line(c, &l, &n)) < 0)
		return rc;
	if (n != 3 || memcmp(l, "END", 3))
		return conn_fail(c, -EPROTO, "memcached: several values for one key");
	return 0;
}

/* "<cmd> key 0 0 len[ cas]\r\n" + value + "\r\n" */
static int put_store(struct conn *c, const char *cmd, const char *key, size_t klen,
		     const void *val, size_t vlen, const uint64_t *cas)
{
	int rc;
	if ((rc = conn_putf(c, "%s %.*s 0 0 %zu", cmd, (int)klen, key, vlen)) < 0)
		return rc;
	if (cas && ((rc = conn_put(c, " ", 1)) < 0 || (rc = conn_put_u64(c, *cas)) < 0))
		return rc;
	if ((rc = conn_put(c, "\r\n", 2)) < 0 || (rc = conn_put(c, val, vlen)) < 0)
		return rc;
	return conn_put(c, "\r\n", 2);
}

/* STORED -> 0, EXISTS -> -ESTALE, NOT_FOUND -> -ENOENT */
static int store_reply(struct conn *c)
{
	const char *l;
	size_t n;
	int rc = conn_line(c, &l, &n);
	if (rc < 0)
		return rc;
	if (n == 6 && !memcmp(l, "STORED", 6))
		return 0;
	if (n == 6 && !memcmp(l, "EXISTS", 6))
		return -ESTALE;
	if (n == 9 && !memcmp(l, "NOT_FOUND", 9))
		return -ENOENT;
	return bad_reply(c, l, n);
}

static int mc_open(const char *addr, const struct be_conf *cf, void **h)
{
	struct mc *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	*h = m;
	m->timeout_us = cf->timeout_us;
	size_t wcap = (cf->recsize + KEY_MAX + 128) * (size_t)(cf->depth > 1 ? cf->depth : 1);
	int rc = conn_open(&m->c, addr, 64 * 1024, wcap, cf->timeout_us);
	if (rc < 0)
		return rc;
	/* fail early and clearly if this is not a memcached server */
	const char *l;
	size_t n;
	if ((rc = conn_put(&m->c, "version\r\n", 9)) < 0 || (rc = conn_send(&m->c)) < 0 ||
	    (rc = conn_line(&m->c, &l, &n)) < 0)
		return rc;
	if (n < 8 || memcmp(l, "VERSION ", 8))
		return bad_reply(&m->c, l, n);
	return 0;
}

static void mc_close(void *h)
{
	struct mc *m = h;
	if (m)
		conn_close(&m->c);
	free(m);
}

static const char *mc_error(void *h)
{
	return ((struct mc *)h)->c.err;
}

static int mc_get(struct conn *c, const char *cmd, const char *key, size_t klen, size_t *vlen,
		  uint64_t *cas)
{
	int rc;
	if ((rc = conn_putf(c, "%s %.*s\r\n", cmd, (int)klen, key)) < 0 || (rc = conn_send(c)) < 0)
		return rc;
	return get_reply(c, vlen, cas);
}

static int mc_read(void *h, const char *key, size_t klen, size_t *vlen)
{
	return mc_get(&((struct mc *)h)->c, "get", key, klen, vlen, NULL);
}

static int mc_set(void *h, const char *key, size_t klen, const void *val, size_t vlen)
{
	struct conn *c = &((struct mc *)h)->c;
	int rc;
	if ((rc = put_store(c, "set", key, klen, val, vlen, NULL)) < 0 || (rc = conn_send(c)) < 0)
		return rc;
	rc = store_reply(c);
	return rc == -ENOENT || rc == -ESTALE ? conn_fail(c, -EPROTO, "memcached: odd set reply")
					      : rc;
}

static int mc_rmw(void *h, const char *key, size_t klen, const void *val, size_t vlen,
		  size_t *oldlen)
{
	struct mc *m = h;
	struct conn *c = &m->c;
	uint64_t deadline = now_ns() + (uint64_t)m->timeout_us * 1000;
	for (;;) {
		uint64_t cas;
		int rc = mc_get(c, "gets", key, klen, oldlen, &cas);
		if (rc < 0)
			return rc;
		if ((rc = put_store(c, "cas", key, klen, val, vlen, &cas)) < 0 ||
		    (rc = conn_send(c)) < 0)
			return rc;
		rc = store_reply(c);
		if (rc != -ESTALE) /* 0, -ENOENT (deleted since), or fatal */
			return rc;
		if (now_ns() > deadline)
			return conn_fail(c, -ETIMEDOUT, "memcached: cas kept failing");
	}
}

/* Pipelined: every command in one write, then the replies in order. */
static int mc_batch(void *h, struct be_op *ops, int n)
{
	struct conn *c = &((struct mc *)h)->c;
	int rc = 0;
	for (int i = 0; i < n && rc >= 0; i++)
		rc = ops[i].op == OP_READ
			     ? conn_putf(c, "get %.*s\r\n", (int)ops[i].klen, ops[i].key)
			     : put_store(c, "set", ops[i].key, ops[i].klen, ops[i].val, ops[i].vlen,
					 NULL);
	if (rc < 0 || (rc = conn_send(c)) < 0)
		return rc;
	for (int i = 0; i < n; i++) {
		rc = ops[i].op == OP_READ ? get_reply(c, &ops[i].vlen, NULL) : store_reply(c);
		if (rc < 0 && (rc != -ENOENT || ops[i].op != OP_READ))
			return rc == -ENOENT || rc == -ESTALE
				       ? conn_fail(c, -EPROTO, "memcached: odd set reply")
				       : rc;
		ops[i].rc = rc;
	}
	return 0;
}

const struct backend be_memcached = {
	.scheme = "memcached://",
	.open = mc_open,
	.close = mc_close,
	.error = mc_error,
	.read = mc_read,
	.update = mc_set,
	.insert = mc_set,
	.scan = NULL,
	.rmw = mc_rmw,
	.batch = mc_batch,
	.scan_how = "none (workload E is n/a)",
};
