/* SPDX-License-Identifier: MIT */
/*
 * kv_malformed SCHEME: broken requests sent with plain zl_call to a zl-kvd
 * service: truncated and overlong messages, a wrong format version, an op
 * that is not the call's type, lengths past the limits or past the
 * message, fields an operation does not use. Each gets -EBADMSG (types
 * without a handler get the server's -EOPNOTSUPP), nothing is written, the
 * server keeps serving this client and others, and its STATS request counts
 * them all.
 */
#include "kv_lib.h"
#include "proto.h"

static uint8_t msg[ZL_KVP_HDR + ZL_KV_MAX_KEY + 64];

static size_t build(int op, size_t klen, size_t vlen, uint32_t n, uint16_t flags, uint64_t exp)
{
	struct zl_kvp_req r = { .op = (uint8_t)op, .klen = (uint32_t)klen, .vlen = (uint32_t)vlen,
				.n = n, .flags = flags, .expected = exp };
	zl_kvp_req_hdr(&r, msg);
	memset(msg + ZL_KVP_HDR, 'k', klen + vlen);
	return ZL_KVP_HDR + klen + vlen;
}

static int call(zl_client *cli, int type, size_t len)
{
	const void *rep;
	size_t rlen;
	return zl_call(cli, type, msg, len, &rep, &rlen, KVT_TMO);
}

/* The STATS line's value of name. */
static uint64_t stat(zl_client *cli, const char *name)
{
	size_t len = build(ZL_KVP_STATS, 0, 0, 0, 0, 0);
	const void *p;
	size_t n;
	CHECK_OK(zl_call(cli, ZL_KVP_STATS, msg, len, &p, &n, KVT_TMO));
	struct zl_kvp_rep rep;
	CHECK_OK(zl_kvp_rep_parse(ZL_KVP_STATS, p, n, &rep));
	char text[ZL_KVP_MAX_STATS + 2], pat[64];
	text[0] = ' '; /* every name follows a space */
	memcpy(text + 1, rep.body, rep.blen);
	text[rep.blen + 1] = 0;
	snprintf(pat, sizeof(pat), " %s=", name);
	const char *at = strstr(text, pat);
	CHECKF(at, "no %s in \"%s\"", name, text);
	return strtoull(at + strlen(pat), NULL, 10);
}

int main(int argc, char **argv)
{
	const char *scheme = kvt_scheme(argc, argv);
	tl_watchdog(120);
	struct kvt_server s;
	kvt_start(&s, scheme, 0);
	zl_kv *kv = kvt_connect(&s);
	CHECK_OK(zl_kv_put(kv, "k", 1, "v", 1, KVT_TMO));
	zl_client *cli;
	CHECK_OK(zl_client_connect(s.url, NULL, KVT_TMO, &cli));

	int nbad = 0;
	size_t len;
#define BAD(type, l) \
	do { \
		CHECK_RC(call(cli, (type), (l)), -EBADMSG); \
		nbad++; \
		const void *v_; \
		size_t n_; \
		CHECK_OK(zl_kv_get(kv, "k", 1, &v_, &n_, NULL, KVT_TMO)); \
		CHECK(n_ == 1 && !memcmp(v_, "v", 1)); \
	} while (0)

	BAD(ZL_KVP_GET, 0);                       /* nothing */
	len = build(ZL_KVP_GET, 1, 0, 0, 0, 0);
	BAD(ZL_KVP_GET, ZL_KVP_HDR - 1);          /* short header */
	BAD(ZL_KVP_GET, len - 1);                 /* key cut */
	BAD(ZL_KVP_GET, len + 1);                 /* a byte too many */
	BAD(ZL_KVP_DEL, len);                     /* op != type */
	msg[0] = ZL_KVP_FMT + 1;
	BAD(ZL_KVP_GET, len);                     /* another format version */
	len = build(ZL_KVP_GET, 1, 0, 0, 0, 0);
	msg[6] = 1;
	BAD(ZL_KVP_GET, len);                     /* reserved bits */
	len = build(ZL_KVP_GET, 0, 0, 0, 0, 0);
	BAD(ZL_KVP_GET, len);                     /* empty key */
	len = build(ZL_KVP_GET, 4, 0, 0, 0, 0);
	msg[4] = 0x01, msg[5] = 0x04;             /* klen 1025 */
	BAD(ZL_KVP_GET, len);
	msg[4] = 0xff, msg[5] = 0x00;             /* klen past the message */
	BAD(ZL_KVP_GET, len);
	len = build(ZL_KVP_PUT, 1, 4, 0, 0, 0);
	memset(msg + 8, 0xff, 4);                 /* vlen wraps */
	BAD(ZL_KVP_PUT, len);
	len = build(ZL_KVP_PUT, 1, 4, 0, 0, 0);
	msg[8] = 1, msg[10] = 0x10;               /* vlen 1 MiB + 1 */
	BAD(ZL_KVP_PUT, len);
	BAD(ZL_KVP_PUT, build(ZL_KVP_PUT, 1, 1, 0, 0, 9)); /* expected on a PUT */
	BAD(ZL_KVP_GET, build(ZL_KVP_GET, 1, 2, 0, 0, 0)); /* value on a GET */
	BAD(ZL_KVP_SCAN, build(ZL_KVP_SCAN, 1, 0, 0, 0, 0));
	BAD(ZL_KVP_SCAN, build(ZL_KVP_SCAN, 1, 0, ZL_KV_MAX_SCAN + 1, 0, 0));
	BAD(ZL_KVP_SCAN, build(ZL_KVP_SCAN, 1, 0, 3, 0x8000, 0));
	BAD(ZL_KVP_STATS, build(ZL_KVP_STATS, 1, 0, 0, 0, 0));
	/* types nobody handles: the server answers them itself */
	CHECK_RC(call(cli, ZL_KVP_NOPS, build(ZL_KVP_GET, 1, 0, 0, 0, 0)), -EOPNOTSUPP);
	CHECK_RC(call(cli, 255, 3), -EOPNOTSUPP);
	/* larger than the server's max_req: refused by the client side */
	uint8_t *huge = calloc(1, 8u << 20);
	CHECK(huge);
	const void *rep;
	size_t rlen;
	CHECK_RC(zl_call(cli, ZL_KVP_PUT, huge, 8u << 20, &rep, &rlen, KVT_TMO), -EMSGSIZE);
	free(huge);

	/* both clients still served; nothing was written */
	CHECK_OK(zl_kv_put(kv, "k2", 2, "w", 1, KVT_TMO));
	CHECK_RC(zl_kv_get(kv, "kkkk", 4, NULL, NULL, NULL, KVT_TMO), -ENOENT);
	CHECK_EQ_U64(stat(cli, "malformed"), nbad);
	CHECK_EQ_U64(stat(cli, "keys"), 2);
	CHECK_EQ_U64(stat(cli, "put"), 2);
	zl_client_close(cli);
	zl_kv_close(kv);
	kvt_stop(&s);
	printf("kv_malformed %s: %d malformed requests refused\n", scheme, nbad);
	return T_EXIT_PASS;
}
