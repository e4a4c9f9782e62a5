/* SPDX-License-Identifier: MIT */
/*
 * null:// -- no store: every operation succeeds at once. Measures the
 * driver's own cost per operation (key choice, value, timing), the ceiling
 * any backend is measured under.
 */
#include <stddef.h>

#include "ycsb.h"

static int nu_open(const char *addr, const struct be_conf *cf, void **h)
{
	static const struct be_conf *conf;
	conf = cf;
	*h = (void *)&conf;
	return 0;
}

static void nu_close(void *h)
{
}

static const char *nu_error(void *h)
{
	return "";
}

static int nu_read(void *h, const char *key, size_t klen, size_t *vlen)
{
	*vlen = (*(const struct be_conf **)h)->recsize;
	return 0;
}

static int nu_write(void *h, const char *key, size_t klen, const void *val, size_t vlen)
{
	return 0;
}

static int nu_scan(void *h, const char *key, size_t klen, uint32_t n, uint32_t *got)
{
	*got = n;
	return 0;
}

static int nu_rmw(void *h, const char *key, size_t klen, const void *val, size_t vlen,
		  size_t *oldlen)
{
	return nu_read(h, key, klen, oldlen);
}

static int nu_batch(void *h, struct be_op *ops, int n)
{
	for (int i = 0; i < n; i++)
		ops[i].rc = ops[i].op == OP_READ ? nu_read(h, ops[i].key, ops[i].klen, &ops[i].vlen)
						 : 0;
	return 0;
}

const struct backend be_null = {
	.scheme = "null://",
	.open = nu_open,
	.close = nu_close,
	.error = nu_error,
	.read = nu_read,
	.update = nu_write,
	.insert = nu_write,
	.scan = nu_scan,
	.rmw = nu_rmw,
	.batch = nu_batch,
	.scan_how = "none needed",
};
