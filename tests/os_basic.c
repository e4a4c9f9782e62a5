/* SPDX-License-Identifier: MIT */
/*
 * The one-sided store through zipline_kv.h: every call's semantics and
 * errors, values from 0 B to 1 MiB, enough writes to go through many
 * regions (the server collects the full ones while we keep going), a
 * second client seeing the first one's writes, and the exact counts of
 * one-sided operations per call that zl_kv_info reports.
 */
#include <errno.h>
#include <stdlib.h>

#include "os_lib.h"

static int scan_fn(const void *k, size_t kl, const void *v, size_t vl, void *arg)
{
	(void)k, (void)kl, (void)v, (void)vl, (void)arg;
	return 0;
}

static int add_one(const void *val, size_t vlen, void *out, size_t cap, size_t *outlen,
		   void *arg)
{
	(void)cap, (void)arg;
	unsigned long n = 0;
	if (val) {
		char tmp[32] = { 0 };
		memcpy(tmp, val, vlen < 31 ? vlen : 31);
		n = strtoul(tmp, NULL, 10);
	}
	*outlen = (size_t)snprintf(out, 32, "%lu", n + 1);
	return 0;
}

static void fill(uint8_t *b, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)((i * 131u) ^ seed);
}

int main(void)
{
	struct ost_server s;
	ost_start(&s, NULL);
	zl_kv *a = ost_connect(&s), *b = ost_connect(&s);
	const void *v;
	size_t vl;
	uint64_t ver, ver2;

	/* absent, put, get, overwrite, delete */
	CHECK_RC(zl_kv_get(a, "k1", 2, &v, &vl, &ver, OST_TMO), -ENOENT);
	CHECK_RC(zl_kv_del(a, "k1", 2, OST_TMO), -ENOENT);
	CHECK_OK(zl_kv_put(a, "k1", 2, "hello", 5, OST_TMO));
	CHECK_OK(zl_kv_get(b, "k1", 2, &v, &vl, &ver, OST_TMO));
	CHECK(vl == 5 && !memcmp(v, "hello", 5) && ver > 0);
	CHECK_OK(zl_kv_put(b, "k1", 2, "", 0, OST_TMO));
	CHECK_OK(zl_kv_get(a, "k1", 2, &v, &vl, &ver2, OST_TMO));
	CHECK(vl == 0 && ver2 != ver);
	CHECK_OK(zl_kv_del(a, "k1", 2, OST_TMO));
	CHECK_RC(zl_kv_get(b, "k1", 2, &v, &vl, NULL, OST_TMO), -ENOENT);
	CHECK_RC(zl_kv_del(b, "k1", 2, OST_TMO), -ENOENT);

	/* cas: 0 = only if absent; a version; stale ones refused */
	CHECK_OK(zl_kv_cas(a, "c", 1, "1", 1, 0, &ver, OST_TMO));
	CHECK_RC(zl_kv_cas(b, "c", 1, "x", 1, 0, NULL, OST_TMO), -ESTALE);
	CHECK_OK(zl_kv_cas(b, "c", 1, "2", 1, ver, &ver2, OST_TMO));
	CHECK_RC(zl_kv_cas(a, "c", 1, "3", 1, ver, NULL, OST_TMO), -ESTALE);
	CHECK_OK(zl_kv_get(a, "c", 1, &v, &vl, &ver, OST_TMO));
	CHECK(ver == ver2 && vl == 1 && *(const char *)v == '2');
	/* after a delete, cas 0 creates again */
	CHECK_OK(zl_kv_del(a, "c", 1, OST_TMO));
	CHECK_RC(zl_kv_cas(a, "c", 1, "4", 1, ver, NULL, OST_TMO), -ESTALE);
	CHECK_OK(zl_kv_cas(a, "c", 1, "4", 1, 0, NULL, OST_TMO));

	/* rmw from two handles, interleaved */
	for (int i = 0; i < 100; i++)
		CHECK_OK(zl_kv_rmw(i % 2 ? a : b, "ctr", 3, add_one, NULL, OST_TMO));
	CHECK_OK(zl_kv_get(a, "ctr", 3, &v, &vl, NULL, OST_TMO));
	CHECK(vl == 3 && !memcmp(v, "100", 3));

	/* what the design cannot do, and bad arguments */
	CHECK_RC(zl_kv_scan(a, NULL, 0, 10, scan_fn, NULL, OST_TMO), -EOPNOTSUPP);
	CHECK_RC(zl_kv_put(a, "", 0, "x", 1, OST_TMO), -EINVAL);
	CHECK_RC(zl_kv_put(a, "k", 1, NULL, 1, OST_TMO), -EINVAL);
	CHECK_RC(zl_kv_put(a, "k", 1, "x", ZL_KV_MAX_VAL + 1, OST_TMO), -EINVAL);
	char big[ZL_KV_MAX_KEY + 1];
	memset(big, 'k', sizeof(big));
	CHECK_RC(zl_kv_get(a, big, sizeof(big), &v, &vl, NULL, OST_TMO), -EINVAL);
	CHECK_OK(zl_kv_put(a, big, ZL_KV_MAX_KEY, "longkey", 7, OST_TMO));
	CHECK_OK(zl_kv_get(b, big, ZL_KV_MAX_KEY, &v, &vl, NULL, OST_TMO));
	CHECK(vl == 7 && !memcmp(v, "longkey", 7));
	zl_kv *bad = NULL;
	CHECK_RC(zl_kv_connect("shm://x?store=other", NULL, OST_TMO, &bad), -EINVAL);

	/* values 0 B .. 1 MiB; 1 MiB does not fit a 1 MiB region with its
	 * header: -EMSGSIZE, nothing written */
	uint8_t *val = malloc(ZL_KV_MAX_VAL);
	CHECK(val);
	size_t sizes[] = { 1, 7, 8, 63, 64, 1000, 4096, 65536, 500000, ZL_KV_MAX_VAL - 64 };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char key[16];
		snprintf(key, sizeof(key), "v%zu", i);
		fill(val, sizes[i], (uint32_t)i);
		CHECK_OK(zl_kv_put(a, key, strlen(key), val, sizes[i], OST_TMO));
		CHECK_OK(zl_kv_get(b, key, strlen(key), &v, &vl, NULL, OST_TMO));
		CHECKF(vl == sizes[i] && !memcmp(v, val, vl), "value of %zu bytes", sizes[i]);
	}
	CHECK_RC(zl_kv_put(a, "huge", 4, val, ZL_KV_MAX_VAL, OST_TMO), -EMSGSIZE);
	CHECK_RC(zl_kv_get(a, "huge", 4, &v, &vl, NULL, OST_TMO), -ENOENT);

	/* 200 MB (scaled) of overwrites of 2000 keys through 64 MiB: regions are
	 * given back and collected while we go on; every key still reads
	 * its last value */
	int rounds = (int)tl_scaled(100);
	for (int round = 0; round < rounds; round++) {
		for (int k = 0; k < 2000; k++) {
			char key[16];
			snprintf(key, sizeof(key), "key%d", k);
			fill(val, 1000, (uint32_t)(round * 7919 + k));
			int rc = zl_kv_put(round % 2 ? a : b, key, strlen(key), val, 1000, OST_TMO);
			CHECKF(rc == 0, "put round %d key %d: %s", round, k, zl_strerror(rc));
		}
	}
	for (int k = 0; k < 2000; k++) {
		char key[16];
		snprintf(key, sizeof(key), "key%d", k);
		fill(val, 1000, (uint32_t)((rounds - 1) * 7919 + k));
		CHECK_OK(zl_kv_get(a, key, strlen(key), &v, &vl, NULL, OST_TMO));
		CHECKF(vl == 1000 && !memcmp(v, val, 1000), "key%d after collections", k);
	}

	/* counts: an uncontended GET of a key at its home slot costs one read
	 * of entries and one of the container (and a round trip each) */
	struct zl_kv_info i0 = { .size = sizeof(i0) }, i1 = { .size = sizeof(i1) };
	CHECK_OK(zl_kv_info(a, &i0));
	CHECK(i0.onesided == 1);
	CHECK_OK(zl_kv_get(a, "v3", 2, &v, &vl, NULL, OST_TMO));
	CHECK_OK(zl_kv_info(a, &i1));
	CHECK(i1.get.calls == i0.get.calls + 1);
	CHECKF(i1.get.reads - i0.get.reads >= 2, "GET reads %llu",
	       (unsigned long long)(i1.get.reads - i0.get.reads));
	CHECK(i1.get.atomics == i0.get.atomics && i1.get.writes == i0.get.writes);
	printf("GET of a 63 B value: %llu reads, %llu probes\n",
	       (unsigned long long)(i1.get.reads - i0.get.reads),
	       (unsigned long long)(i1.get.probes - i0.get.probes));

	free(val);
	zl_kv_close(a);
	zl_kv_close(b);
	ost_stop(&s);
	printf("os_basic: ok\n");
	return 0;
}
