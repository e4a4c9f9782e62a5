/* SPDX-License-Identifier: MIT */
/*
 * kv_ops SCHEME: every zl_kv_* call through a zl-kvd service on one
 * transport, edge by edge: missing keys, empty and 1 MiB values, 1 KiB and
 * binary keys, versions, CAS (0 = absent), read-modify-write (creating a
 * key, fn errors), scans in key order (paged when the records pass the
 * 1 MiB reply budget, stopped early by the callback), argument checks,
 * and -ENOSPC at a server's memory limit with nothing written.
 */
#include "kv_lib.h"

static int append_x(const void *val, size_t vlen, void *out, size_t cap, size_t *outlen, void *arg)
{
	(void)arg;
	CHECK(cap >= ZL_KV_MAX_VAL && vlen < cap);
	if (vlen)
		memcpy(out, val, vlen);
	((uint8_t *)out)[vlen] = 'x';
	*outlen = vlen + 1;
	return 0;
}

static int refuse(const void *val, size_t vlen, void *out, size_t cap, size_t *outlen, void *arg)
{
	(void)val, (void)vlen, (void)out, (void)cap, (void)outlen, (void)arg;
	return -ECANCELED;
}

static void expect_val(zl_kv *kv, const void *k, size_t klen, const void *want, size_t wlen)
{
	const void *v;
	size_t vlen;
	CHECK_OK(zl_kv_get(kv, k, klen, &v, &vlen, NULL, KVT_TMO));
	CHECK_EQ_U64(vlen, wlen);
	CHECK(!wlen || !memcmp(v, want, wlen));
}

static void test_basic(zl_kv *kv)
{
	const void *v = NULL;
	size_t vlen = 99;
	uint64_t ver = 0, v1, v2;
	CHECK_RC(zl_kv_get(kv, "nope", 4, &v, &vlen, &ver, KVT_TMO), -ENOENT);
	CHECK_RC(zl_kv_del(kv, "nope", 4, KVT_TMO), -ENOENT);
	CHECK_OK(zl_kv_put(kv, "k", 1, "hello", 5, KVT_TMO));
	CHECK_OK(zl_kv_get(kv, "k", 1, &v, &vlen, &v1, KVT_TMO));
	CHECK(vlen == 5 && !memcmp(v, "hello", 5) && v1 > 0);
	CHECK_OK(zl_kv_put(kv, "k", 1, "", 0, KVT_TMO)); /* empty value */
	CHECK_OK(zl_kv_get(kv, "k", 1, &v, &vlen, &v2, KVT_TMO));
	CHECK(vlen == 0 && v2 > v1);
	CHECK_OK(zl_kv_get(kv, "k", 1, NULL, NULL, NULL, KVT_TMO)); /* existence */
	CHECK_OK(zl_kv_del(kv, "k", 1, KVT_TMO));
	CHECK_RC(zl_kv_get(kv, "k", 1, &v, &vlen, NULL, KVT_TMO), -ENOENT);

	/* the largest key and value; binary bytes */
	uint8_t key[ZL_KV_MAX_KEY];
	tl_fill(key, sizeof(key), 42);
	uint8_t *big = malloc(ZL_KV_MAX_VAL);
	CHECK(big);
	tl_fill(big, ZL_KV_MAX_VAL, 43);
	CHECK_OK(zl_kv_put(kv, key, sizeof(key), big, ZL_KV_MAX_VAL, KVT_TMO));
	CHECK_OK(zl_kv_get(kv, key, sizeof(key), &v, &vlen, NULL, KVT_TMO));
	CHECK_EQ_U64(vlen, ZL_KV_MAX_VAL);
	CHECK_PATTERN(v, vlen, 43);
	CHECK_OK(zl_kv_del(kv, key, sizeof(key), KVT_TMO));
	CHECK_OK(zl_kv_put(kv, "\0\xff\0", 3, "\0", 1, KVT_TMO));
	expect_val(kv, "\0\xff\0", 3, "\0", 1);
	CHECK_RC(zl_kv_get(kv, "\0\xff", 2, &v, &vlen, NULL, KVT_TMO), -ENOENT);
	CHECK_OK(zl_kv_del(kv, "\0\xff\0", 3, KVT_TMO));

	/* argument checks, before anything is sent */
	CHECK_RC(zl_kv_put(kv, "k", 0, "v", 1, KVT_TMO), -EINVAL);
	CHECK_RC(zl_kv_put(kv, key, ZL_KV_MAX_KEY + 1, "v", 1, KVT_TMO), -EINVAL);
	CHECK_RC(zl_kv_put(kv, "k", 1, big, ZL_KV_MAX_VAL + 1, KVT_TMO), -EINVAL);
	CHECK_RC(zl_kv_put(kv, "k", 1, NULL, 1, KVT_TMO), -EINVAL);
	CHECK_RC(zl_kv_put(NULL, "k", 1, "v", 1, KVT_TMO), -EINVAL);
	CHECK_RC(zl_kv_get(kv, NULL, 1, &v, &vlen, NULL, KVT_TMO), -EINVAL);
	CHECK_RC(zl_kv_del(kv, "k", 0, KVT_TMO), -EINVAL);
	CHECK_RC(zl_kv_cas(kv, "k", 0, "v", 1, 0, NULL, KVT_TMO), -EINVAL);
	CHECK_RC(zl_kv_rmw(kv, "k", 1, NULL, NULL, KVT_TMO), -EINVAL);
	struct kvt_scan sc = { 0 };
	CHECK_RC(zl_kv_scan(kv, "", 0, 0, kvt_scan_cb, &sc, KVT_TMO), -EINVAL);
	CHECK_RC(zl_kv_scan(kv, "", 0, ZL_KV_MAX_SCAN + 1, kvt_scan_cb, &sc, KVT_TMO), -EINVAL);
	CHECK_RC(zl_kv_scan(kv, NULL, 1, 1, kvt_scan_cb, &sc, KVT_TMO), -EINVAL);
	CHECK_RC(zl_kv_scan(kv, "", 0, 1, NULL, &sc, KVT_TMO), -EINVAL);
	CHECK_RC(zl_kv_connect(NULL, NULL, KVT_TMO, NULL), -EINVAL);
	zl_kv_close(NULL);
	free(big);
}

static void test_cas_rmw(zl_kv *kv)
{
	uint64_t v1, v2, ver;
	CHECK_RC(zl_kv_cas(kv, "c", 1, "1", 1, 7, &ver, KVT_TMO), -ESTALE);
	CHECK_OK(zl_kv_cas(kv, "c", 1, "1", 1, 0, &v1, KVT_TMO));
	CHECK_RC(zl_kv_cas(kv, "c", 1, "2", 1, 0, &ver, KVT_TMO), -ESTALE);
	CHECK_RC(zl_kv_cas(kv, "c", 1, "2", 1, v1 + 1, &ver, KVT_TMO), -ESTALE);
	CHECK_OK(zl_kv_cas(kv, "c", 1, "2", 1, v1, &v2, KVT_TMO));
	CHECK(v2 > v1);
	CHECK_OK(zl_kv_get(kv, "c", 1, NULL, NULL, &ver, KVT_TMO));
	CHECK_EQ_U64(ver, v2);
	CHECK_OK(zl_kv_del(kv, "c", 1, KVT_TMO)); /* re-created: a new version */
	CHECK_RC(zl_kv_cas(kv, "c", 1, "3", 1, v2, &ver, KVT_TMO), -ESTALE);
	CHECK_OK(zl_kv_put(kv, "c", 1, "3", 1, KVT_TMO));
	CHECK_OK(zl_kv_get(kv, "c", 1, NULL, NULL, &ver, KVT_TMO));
	CHECK(ver > v2);

	CHECK_OK(zl_kv_rmw(kv, "r", 1, append_x, NULL, KVT_TMO)); /* creates */
	CHECK_OK(zl_kv_rmw(kv, "r", 1, append_x, NULL, KVT_TMO));
	expect_val(kv, "r", 1, "xx", 2);
	CHECK_RC(zl_kv_rmw(kv, "r", 1, refuse, NULL, KVT_TMO), -ECANCELED);
	expect_val(kv, "r", 1, "xx", 2);
	CHECK_OK(zl_kv_del(kv, "r", 1, KVT_TMO));
	CHECK_OK(zl_kv_del(kv, "c", 1, KVT_TMO));
}

static void test_scan(zl_kv *kv)
{
	static const struct { const char *k; size_t n; } keys[] = {
		{ "\x00", 1 }, { "a", 1 }, { "a\x00", 2 }, { "ab", 2 }, { "b", 1 }, { "\xff", 1 },
	};
	const size_t nk = sizeof(keys) / sizeof(keys[0]);
	for (size_t i = nk; i-- > 0;)
		CHECK_OK(zl_kv_put(kv, keys[i].k, keys[i].n, keys[i].k, keys[i].n, KVT_TMO));
	struct kvt_scan sc = { .cap = 64 };
	sc.r = calloc(sc.cap, sizeof(*sc.r));
	CHECK(sc.r);
	CHECK_RC(zl_kv_scan(kv, "", 0, 100, kvt_scan_cb, &sc, KVT_TMO), (int)nk);
	for (size_t i = 0; i < nk; i++)
		CHECK(sc.r[i].klen == keys[i].n && !memcmp(sc.r[i].key, keys[i].k, keys[i].n) &&
		      sc.r[i].vlen == keys[i].n);
	sc.n = 0;
	CHECK_RC(zl_kv_scan(kv, "a", 1, 2, kvt_scan_cb, &sc, KVT_TMO), 2);
	CHECK(sc.r[0].klen == 1 && sc.r[1].klen == 2 && !memcmp(sc.r[1].key, "a\0", 2));
	sc.n = 0;
	CHECK_RC(zl_kv_scan(kv, "aa", 2, 10, kvt_scan_cb, &sc, KVT_TMO), 3); /* ab b \xff */
	sc.n = 0;
	CHECK_RC(zl_kv_scan(kv, "\xff\x00", 2, 10, kvt_scan_cb, &sc, KVT_TMO), 0);
	sc.n = 0;
	sc.stop_at = 2;
	CHECK_RC(zl_kv_scan(kv, "", 0, 10, kvt_scan_cb, &sc, KVT_TMO), 2);
	sc.stop_at = 0;
	for (size_t i = 0; i < nk; i++)
		CHECK_OK(zl_kv_del(kv, keys[i].k, keys[i].n, KVT_TMO));

	/* 12 values of 300 KiB: several 1 MiB reply pages, one scan */
	size_t vl = 300 << 10;
	uint8_t *val = malloc(vl);
	CHECK(val);
	for (int i = 0; i < 12; i++) {
		char k[8];
		snprintf(k, sizeof(k), "p%02d", i);
		tl_fill(val, vl, (uint64_t)i);
		CHECK_OK(zl_kv_put(kv, k, 3, val, vl, KVT_TMO));
	}
	sc.n = 0;
	CHECK_RC(zl_kv_scan(kv, "p", 1, 1000, kvt_scan_cb, &sc, KVT_TMO), 12);
	for (int i = 0; i < 12; i++) {
		char k[8];
		snprintf(k, sizeof(k), "p%02d", i);
		CHECK(sc.r[i].klen == 3 && !memcmp(sc.r[i].key, k, 3) && sc.r[i].vlen == vl);
	}
	sc.n = 0;
	CHECK_RC(zl_kv_scan(kv, "p05", 3, 4, kvt_scan_cb, &sc, KVT_TMO), 4);
	CHECK(!memcmp(sc.r[0].key, "p05", 3) && !memcmp(sc.r[3].key, "p08", 3));
	sc.n = 0;
	sc.stop_at = 5; /* stopped in the second page */
	CHECK_RC(zl_kv_scan(kv, "p", 1, 1000, kvt_scan_cb, &sc, KVT_TMO), 5);
	for (int i = 0; i < 12; i++) {
		char k[8];
		snprintf(k, sizeof(k), "p%02d", i);
		CHECK_OK(zl_kv_del(kv, k, 3, KVT_TMO));
	}
	free(val);
	free(sc.r);
}

static void test_limit(const char *scheme)
{
	struct kvt_server s;
	kvt_start(&s, scheme, 1 << 20);
	zl_kv *kv = kvt_connect(&s);
	uint8_t *val = calloc(1, ZL_KV_MAX_VAL);
	CHECK(val);
	int i, rc = 0;
	for (i = 0; i < 10 && !(rc = zl_kv_put(kv, &i, sizeof(i), val, 200 << 10, KVT_TMO)); i++)
		;
	CHECKF(rc == -ENOSPC && i >= 3, "put %d: %s", i, zl_strerror(rc));
	CHECK_RC(zl_kv_get(kv, &i, sizeof(i), NULL, NULL, NULL, KVT_TMO), -ENOENT);
	CHECK_RC(zl_kv_cas(kv, &i, sizeof(i), val, 200 << 10, 0, NULL, KVT_TMO), -ENOSPC);
	int z = 0;
	CHECK_RC(zl_kv_put(kv, &z, sizeof(z), val, ZL_KV_MAX_VAL, KVT_TMO), -ENOSPC);
	CHECK_OK(zl_kv_put(kv, &z, sizeof(z), "small", 5, KVT_TMO)); /* shrinking fits */
	CHECK_OK(zl_kv_put(kv, &i, sizeof(i), val, 200 << 10, KVT_TMO)); /* room again */
	zl_kv_close(kv);
	kvt_stop(&s);
	free(val);
}

int main(int argc, char **argv)
{
	const char *scheme = kvt_scheme(argc, argv);
	tl_watchdog(120);
	struct kvt_server s;
	kvt_start(&s, scheme, 0);
	zl_kv *kv = kvt_connect(&s);
	test_basic(kv);
	test_cas_rmw(kv);
	test_scan(kv);
	zl_kv_close(kv);
	kvt_stop(&s);
	test_limit(scheme);
	printf("kv_ops %s: OK\n", scheme);
	return T_EXIT_PASS;
}
