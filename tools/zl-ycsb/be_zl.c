/* SPDX-License-Identifier: MIT */
/*
 * zl://URL -- zl-kvd through the zipline key-value client (zipline_kv.h):
 * the part after "zl://" is a zipline URL (shm://NAME, tcp://HOST:PORT,
 * unix:///path, rdma://...). One zl_kv handle per thread.
 *   read    zl_kv_get      update, insert   zl_kv_put
 *   scan    zl_kv_scan     rmw   zl_kv_rmw (atomic: compare-and-swap)
 *   --depth: reads, updates and inserts together through zl_kv_batch
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ycsb.h"

#include "zipline_kv.h"

struct zh {
	zl_kv *kv;
	int64_t timeout_us;
	uint8_t *bufs; /* depth records: where a batch's reads land */
	size_t recsize;
	char err[160];
};

static int fail(struct zh *z, int rc, const char *what)
{
	snprintf(z->err, sizeof(z->err), "zl-kvd: %s: %s", what, zl_strerror(rc));
	return rc;
}

static int zh_open(const char *addr, const struct be_conf *cf, void **h)
{
	struct zh *z = calloc(1, sizeof(*z));
	if (!z)
		return -ENOMEM;
	*h = z;
	z->timeout_us = cf->timeout_us;
	z->recsize = cf->recsize;
	if (cf->depth > 1 && !(z->bufs = malloc((size_t)cf->depth * (cf->recsize + 1))))
		return -ENOMEM;
	if (cf->recsize > ZL_KV_MAX_VAL || cf->maxscan > ZL_KV_MAX_SCAN) {
		snprintf(z->err, sizeof(z->err), "zl-kvd: records up to %u B, scans up to %u",
			 ZL_KV_MAX_VAL, ZL_KV_MAX_SCAN);
		return -EINVAL;
	}
	uint64_t start = now_ns(), deadline = start + (uint64_t)cf->timeout_us * 1000;
	/* refused or not there yet: the server may still be starting, but a
	 * wrong address is reported within a second */
	uint64_t refused_until = start + (cf->timeout_us < 1000000 ? (uint64_t)cf->timeout_us : 1000000) * 1000;
	int rc;
	for (;;) {
		int64_t left = (int64_t)(deadline - now_ns()) / 1000;
		rc = zl_kv_connect(addr, NULL, left > 0 ? left : 0, &z->kv);
		if ((rc != -ECONNREFUSED && rc != -ENOENT) ||
		    (int64_t)(refused_until - now_ns()) <= 50000000)
			break;
		usleep(50000);
	}
	return rc < 0 ? fail(z, rc, addr) : 0;
}

static double per(uint64_t n, uint64_t calls)
{
	return calls ? (double)n / (double)calls : 0;
}

/* The one-sided operations each call cost (exact counts, not timings). */
static void print_counts(zl_kv *kv)
{
	struct zl_kv_info i = { .size = sizeof(i) };
	if (zl_kv_info(kv, &i) || !i.onesided)
		return;
	const struct zl_kv_opcount *g = &i.get, *s = &i.set;
	printf("zl-ycsb: one-sided operations per call: GET (%llu calls) %.3f reads, %.3f round "
	       "trips, %.3f probes, %.3f retries; SET (%llu calls) %.3f reads, %.3f writes, "
	       "%.3f CAS, %.3f round trips, %.3f retries\n",
	       (unsigned long long)g->calls, per(g->reads, g->calls), per(g->round_trips, g->calls),
	       per(g->probes, g->calls), per(g->retries, g->calls), (unsigned long long)s->calls,
	       per(s->reads, s->calls), per(s->writes, s->calls), per(s->atomics, s->calls),
	       per(s->round_trips, s->calls), per(s->retries, s->calls));
	const struct zl_kv_opcount *b = &i.batch;
	uint64_t ops = g->calls + s->calls + i.del.calls;
	if (b->calls)
		printf("zl-ycsb: batches (%llu, %.2f operations each) shared per operation: "
		       "%.3f reads, %.3f round trips\n",
		       (unsigned long long)b->calls, per(ops, b->calls), per(b->reads, ops),
		       per(b->round_trips, ops));
}

static void zh_close(void *h)
{
	struct zh *z = h;
	if (z && z->kv) {
		print_counts(z->kv);
		zl_kv_close(z->kv);
	}
	if (z)
		free(z->bufs);
	free(z);
}

static const char *zh_error(void *h)
{
	return ((struct zh *)h)->err;
}

static int zh_read(void *h, const char *key, size_t klen, size_t *vlen)
{
	struct zh *z = h;
	const void *v;
	int rc = zl_kv_get(z->kv, key, klen, &v, vlen, NULL, z->timeout_us);
	return rc < 0 && rc != -ENOENT ? fail(z, rc, "get") : rc;
}

static int zh_put(void *h, const char *key, size_t klen, const void *val, size_t vlen)
{
	struct zh *z = h;
	int rc = zl_kv_put(z->kv, key, klen, val, vlen, z->timeout_us);
	return rc < 0 ? fail(z, rc, "put") : rc;
}

struct scan_arg {
	uint32_t n;
};

static int count_one(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
	((struct scan_arg *)arg)->n++;
	return 0;
}

static int zh_scan(void *h, const char *key, size_t klen, uint32_t n, uint32_t *got)
{
	struct zh *z = h;
	struct scan_arg a = {0};
	int rc = zl_kv_scan(z->kv, key, klen, n, count_one, &a, z->timeout_us);
	if (rc < 0)
		return fail(z, rc, "scan");
	*got = (uint32_t)rc;
	return 0;
}

struct rmw_arg {
	const void *val;
	size_t vlen, oldlen;
};

/* The modification: the new record replaces the old one whole
 * (writeallfields=true); we only note what was read. */
static int modify(const void *val, size_t vlen, void *out, size_t cap, size_t *outlen, void *arg)
{
	struct rmw_arg *a = arg;
	if (!val)
		return -ENOENT; /* the key is gone: a failed rmw, as a failed read */
	if (a->vlen > cap)
		return -EMSGSIZE;
	a->oldlen = vlen;
	memcpy(out, a->val, a->vlen);
	*outlen = a->vlen;
	return 0;
}

static int zh_rmw(void *h, const char *key, size_t klen, const void *val, size_t vlen,
		  size_t *oldlen)
{
	struct zh *z = h;
	struct rmw_arg a = {.val = val, .vlen = vlen};
	int rc = zl_kv_rmw(z->kv, key, klen, modify, &a, z->timeout_us);
	*oldlen = a.oldlen;
	return rc < 0 && rc != -ENOENT ? fail(z, rc, "rmw") : rc;
}

static int zh_batch(void *h, struct be_op *ops, int n)
{
	struct zh *z = h;
	struct zl_kv_op o[DEPTH_MAX];
	for (int i = 0; i < n; i++) {
		bool get = ops[i].op == OP_READ;
		o[i] = (struct zl_kv_op){ .op = get ? ZL_KV_OP_GET : ZL_KV_OP_PUT, .key = ops[i].key,
					  .klen = ops[i].klen, .val = ops[i].val,
					  .vlen = get ? 0 : ops[i].vlen,
					  .buf = get ? z->bufs + (size_t)i * (z->recsize + 1) : NULL,
					  .cap = get ? z->recsize + 1 : 0 };
	}
	int rc = zl_kv_batch(z->kv, o, (size_t)n, z->timeout_us);
	if (rc < 0)
		return fail(z, rc, "batch");
	for (int i = 0; i < n; i++) {
		if (o[i].rc < 0 && o[i].rc != -ENOENT)
			return fail(z, o[i].rc, ops[i].op == OP_READ ? "get" : "put");
		ops[i].rc = o[i].rc;
		if (ops[i].op == OP_READ)
			ops[i].vlen = o[i].vlen;
	}
	return 0;
}

const struct backend be_zl = {
	.scheme = "zl://",
	.open = zh_open,
	.close = zh_close,
	.error = zh_error,
	.read = zh_read,
	.update = zh_put,
	.insert = zh_put,
	.scan = zh_scan,
	.rmw = zh_rmw,
	.batch = zh_batch,
	.scan_how = "zl_kv_scan (ordered by the server)",
};
