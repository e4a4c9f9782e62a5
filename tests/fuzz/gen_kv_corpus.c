/* SPDX-License-Identifier: MIT */
/*
 * Writes the seed corpus of fuzz_kv_req (framing in fuzz_kv_req.c):
 *   gen_kv_corpus DIR
 * v_* are sequences of valid requests, made with the real encoder
 * (zl_kvp_req_hdr); b_* hold one broken request each, after a valid PUT.
 * Run it again after a change of the request format.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

static uint8_t in[1 << 20];
static size_t n;
static const char *dir;

/* Frame len bytes of a request as a call of the given type. */
static void frame(int type, const void *req, size_t len)
{
	if (n + 3 + len > sizeof(in) || len > 0xffff) {
		fprintf(stderr, "seed too large\n");
		exit(1);
	}
	in[n] = (uint8_t)type;
	in[n + 1] = (uint8_t)len;
	in[n + 2] = (uint8_t)(len >> 8);
	memcpy(in + n + 3, req, len);
	n += 3 + len;
}

/* A request of op; patch (may be NULL) edits it before framing, and may
 * change its length. */
static void req(int op, const void *key, size_t klen, const void *val, size_t vlen, uint32_t cnt,
		uint16_t flags, uint64_t expected, void (*patch)(uint8_t *, size_t *), int type)
{
	static uint8_t b[ZL_KVP_HDR + 65536];
	struct zl_kvp_req r = { .op = (uint8_t)op, .flags = flags, .klen = (uint32_t)klen,
				.vlen = (uint32_t)vlen, .n = cnt, .expected = expected };
	zl_kvp_req_hdr(&r, b);
	if (klen)
		memcpy(b + ZL_KVP_HDR, key, klen);
	if (vlen)
		memcpy(b + ZL_KVP_HDR + klen, val, vlen);
	size_t len = ZL_KVP_HDR + klen + vlen;
	if (patch)
		patch(b, &len);
	frame(type ? type : op, b, len);
}

#define PUT(k, v) req(ZL_KVP_PUT, k, strlen(k), v, strlen(v), 0, 0, 0, NULL, 0)
#define GET(k) req(ZL_KVP_GET, k, strlen(k), NULL, 0, 0, 0, 0, NULL, 0)
#define DEL(k) req(ZL_KVP_DEL, k, strlen(k), NULL, 0, 0, 0, 0, NULL, 0)
#define CAS(k, v, e) req(ZL_KVP_CAS, k, strlen(k), v, strlen(v), 0, 0, e, NULL, 0)
#define SCAN(k, cnt, fl) req(ZL_KVP_SCAN, k, strlen(k), NULL, 0, cnt, fl, 0, NULL, 0)

static void save(const char *name)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(in, 1, n, f) != n || fclose(f)) {
		perror(path);
		exit(1);
	}
	n = 0;
}

/* patches for the broken requests */
static void p_trunc_hdr(uint8_t *b, size_t *len) { (void)b; *len = 10; }
static void p_fmt(uint8_t *b, size_t *len) { (void)len; b[0] = 2; }
static void p_reserved(uint8_t *b, size_t *len) { (void)len; b[6] = 1; }
static void p_klen_over(uint8_t *b, size_t *len) { (void)len; b[4] = 0xff; b[5] = 0x00; }
static void p_klen_huge(uint8_t *b, size_t *len) { (void)len; b[4] = 0x01; b[5] = 0x04; }
static void p_vlen_huge(uint8_t *b, size_t *len) { (void)len; b[8] = 1; b[10] = 0x10; }
static void p_vlen_wrap(uint8_t *b, size_t *len) { (void)len; memset(b + 8, 0xff, 4); }
static void p_extra(uint8_t *b, size_t *len) { b[(*len)++] = 'x'; }
static void p_short(uint8_t *b, size_t *len) { (void)b; (*len)--; }
static void p_only_hdr(uint8_t *b, size_t *len) { (void)b; *len = ZL_KVP_HDR; }

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen_kv_corpus DIR\n");
		return 2;
	}
	dir = argv[1];
	static uint8_t key[ZL_KV_MAX_KEY], val[60000];
	for (size_t i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)(i * 37 + 11);
	for (size_t i = 0; i < sizeof(val); i++)
		val[i] = (uint8_t)(i * 13);

	PUT("k", "value");
	GET("k");
	GET("missing");
	save("v_put_get");

	PUT("e", "");
	GET("e");
	PUT("e", "now longer");
	PUT("e", "");
	save("v_empty_value");

	CAS("c", "1", 0);
	CAS("c", "2", 0);
	CAS("c", "2", 1);
	CAS("c", "3", 1);
	GET("c");
	save("v_cas");

	PUT("d", "x");
	DEL("d");
	DEL("d");
	GET("d");
	save("v_del");

	PUT("b", "2");
	PUT("a", "1");
	PUT("ab", "3");
	PUT("c", "4");
	SCAN("", 10, 0);
	SCAN("a", 2, ZL_KVP_EXCL);
	SCAN("zz", 5, 0);
	SCAN("a", ZL_KV_MAX_SCAN, 0);
	save("v_scan");

	req(ZL_KVP_PUT, "\x00\xff\x00", 3, "\x00", 1, 0, 0, 0, NULL, 0);
	req(ZL_KVP_PUT, "\x00", 1, "z", 1, 0, 0, 0, NULL, 0);
	req(ZL_KVP_PUT, key, ZL_KV_MAX_KEY, "long key", 8, 0, 0, 0, NULL, 0);
	req(ZL_KVP_GET, key, ZL_KV_MAX_KEY, NULL, 0, 0, 0, 0, NULL, 0);
	req(ZL_KVP_SCAN, "\x00", 1, NULL, 0, 3, 0, 0, NULL, 0);
	save("v_binary_keys");

	for (int i = 0; i < 6; i++) { /* past the 256 KiB limit: -ENOSPC */
		char k[8];
		snprintf(k, sizeof(k), "big%d", i);
		req(ZL_KVP_PUT, k, strlen(k), val, sizeof(val), 0, 0, 0, NULL, 0);
	}
	DEL("big0");
	req(ZL_KVP_PUT, "big9", 4, val, sizeof(val), 0, 0, 0, NULL, 0);
	SCAN("big", 10, 0);
	save("v_mem_limit");

	for (int i = 0; i < 120; i++) { /* two table growths */
		char k[8];
		snprintf(k, sizeof(k), "g%03d", i);
		PUT(k, k);
		if (i % 7 == 0)
			DEL(k);
	}
	SCAN("g", 50, 0);
	save("v_growth");

	req(ZL_KVP_STATS, NULL, 0, NULL, 0, 0, 0, 0, NULL, 0);
	save("v_stats");

	/* broken: one each, after a valid PUT */
	struct {
		const char *name;
		int op, type;
		size_t klen, vlen;
		uint32_t cnt;
		uint16_t flags;
		uint64_t exp;
		void (*patch)(uint8_t *, size_t *);
	} bad[] = {
		{ "b_empty", ZL_KVP_GET, 0, 1, 0, 0, 0, 0, NULL }, /* replaced below */
		{ "b_trunc_hdr", ZL_KVP_GET, 0, 1, 0, 0, 0, 0, p_trunc_hdr },
		{ "b_only_hdr", ZL_KVP_PUT, 0, 3, 4, 0, 0, 0, p_only_hdr },
		{ "b_fmt", ZL_KVP_GET, 0, 1, 0, 0, 0, 0, p_fmt },
		{ "b_reserved", ZL_KVP_GET, 0, 1, 0, 0, 0, 0, p_reserved },
		{ "b_type_mismatch", ZL_KVP_GET, ZL_KVP_DEL, 1, 0, 0, 0, 0, NULL },
		{ "b_type_unknown", 7, 0, 1, 0, 0, 0, 0, NULL },
		{ "b_type_255", 255, 0, 0, 0, 0, 0, 0, NULL },
		{ "b_klen_over", ZL_KVP_GET, 0, 4, 0, 0, 0, 0, p_klen_over },
		{ "b_klen_1025", ZL_KVP_GET, 0, 4, 0, 0, 0, 0, p_klen_huge },
		{ "b_vlen_huge", ZL_KVP_PUT, 0, 1, 4, 0, 0, 0, p_vlen_huge },
		{ "b_vlen_wrap", ZL_KVP_PUT, 0, 1, 4, 0, 0, 0, p_vlen_wrap },
		{ "b_extra_byte", ZL_KVP_DEL, 0, 1, 0, 0, 0, 0, p_extra },
		{ "b_short_value", ZL_KVP_PUT, 0, 1, 4, 0, 0, 0, p_short },
		{ "b_get_empty_key", ZL_KVP_GET, 0, 0, 0, 0, 0, 0, NULL },
		{ "b_get_with_value", ZL_KVP_GET, 0, 1, 3, 0, 0, 0, NULL },
		{ "b_put_expected", ZL_KVP_PUT, 0, 1, 1, 0, 0, 5, NULL },
		{ "b_scan_n0", ZL_KVP_SCAN, 0, 1, 0, 0, 0, 0, NULL },
		{ "b_scan_n1001", ZL_KVP_SCAN, 0, 1, 0, ZL_KV_MAX_SCAN + 1, 0, 0, NULL },
		{ "b_scan_flag", ZL_KVP_SCAN, 0, 1, 0, 5, 2, 0, NULL },
		{ "b_get_flag", ZL_KVP_GET, 0, 1, 0, 0, ZL_KVP_EXCL, 0, NULL },
		{ "b_stats_key", ZL_KVP_STATS, 0, 1, 0, 0, 0, 0, NULL },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		PUT("k", "v");
		if (i == 0)
			frame(ZL_KVP_GET, NULL, 0); /* zero bytes */
		else
			req(bad[i].op, key, bad[i].klen, val, bad[i].vlen, bad[i].cnt, bad[i].flags,
			    bad[i].exp, bad[i].patch, bad[i].type);
		GET("k");
		save(bad[i].name);
	}
	return 0;
}
