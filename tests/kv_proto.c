/* SPDX-License-Identifier: MIT */
/*
 * kv_proto: zl-kvd's wire format (src/kv/proto.c). Requests and replies of
 * every operation round-trip; every truncation and every extra byte is
 * refused (-EBADMSG for requests, -EPROTO for replies); so are each
 * unused field set, a wrong format version, an op that is not the call's
 * type, lengths beyond the limits, and scan records that overrun.
 */
#include "proto.h"
#include "testlib.h"

static uint8_t buf[ZL_KVP_HDR + ZL_KV_MAX_KEY + 4096];

static size_t mk_req(const struct zl_kvp_req *r)
{
	zl_kvp_req_hdr(r, buf);
	for (size_t i = 0; i < r->klen + r->vlen; i++)
		buf[ZL_KVP_HDR + i] = (uint8_t)(i * 7);
	return ZL_KVP_HDR + r->klen + r->vlen;
}

/* r encodes to a request that parses back to r, and nothing longer or
 * shorter parses. */
static void req_ok(struct zl_kvp_req r)
{
	size_t len = mk_req(&r);
	struct zl_kvp_req p;
	CHECK_OK(zl_kvp_req_parse(r.op, buf, len, &p));
	CHECK(p.op == r.op && p.flags == r.flags && p.klen == r.klen && p.vlen == r.vlen &&
	      p.n == r.n && p.expected == r.expected);
	CHECK(p.key == buf + ZL_KVP_HDR && p.val == p.key + r.klen);
	for (size_t l = 0; l < len; l++)
		CHECK_RC(zl_kvp_req_parse(r.op, buf, l, &p), -EBADMSG);
	CHECK_RC(zl_kvp_req_parse(r.op, buf, len + 1, &p), -EBADMSG);
	for (int t = 0; t < 256; t++) /* only as its own type */
		if (t != r.op)
			CHECK_RC(zl_kvp_req_parse(t, buf, len, &p), -EBADMSG);
	/* each header byte changed: refused, or still consistent */
	for (int i = 0; i < ZL_KVP_HDR; i++) {
		uint8_t save = buf[i];
		buf[i] ^= 0x41;
		int rc = zl_kvp_req_parse(r.op, buf, len, &p);
		CHECK(rc == -EBADMSG ||
		      (rc == 0 && ZL_KVP_HDR + p.klen + p.vlen == len && i >= 2));
		buf[i] = save;
	}
}

static void req_bad(struct zl_kvp_req r)
{
	size_t len = mk_req(&r);
	struct zl_kvp_req p;
	CHECKF(zl_kvp_req_parse(r.op, buf, len, &p) == -EBADMSG, "op %u klen %u vlen %u n %u", r.op,
	       r.klen, r.vlen, r.n);
}

static void test_requests(void)
{
	for (uint32_t kl = 1; kl <= ZL_KV_MAX_KEY; kl = kl * 4 + 3) {
		req_ok((struct zl_kvp_req){ .op = ZL_KVP_GET, .klen = kl });
		req_ok((struct zl_kvp_req){ .op = ZL_KVP_DEL, .klen = kl });
		req_ok((struct zl_kvp_req){ .op = ZL_KVP_PUT, .klen = kl, .vlen = 0 });
		req_ok((struct zl_kvp_req){ .op = ZL_KVP_PUT, .klen = kl, .vlen = 4096 });
		req_ok((struct zl_kvp_req){ .op = ZL_KVP_CAS, .klen = kl, .vlen = 3,
					    .expected = UINT64_MAX });
		req_ok((struct zl_kvp_req){ .op = ZL_KVP_SCAN, .klen = kl, .n = ZL_KV_MAX_SCAN,
					    .flags = ZL_KVP_EXCL });
	}
	req_ok((struct zl_kvp_req){ .op = ZL_KVP_GET, .klen = ZL_KV_MAX_KEY });
	req_ok((struct zl_kvp_req){ .op = ZL_KVP_SCAN, .klen = 0, .n = 1 });
	req_ok((struct zl_kvp_req){ .op = ZL_KVP_STATS });

	req_bad((struct zl_kvp_req){ .op = 0, .klen = 1 });
	req_bad((struct zl_kvp_req){ .op = ZL_KVP_NOPS, .klen = 1 });
	req_bad((struct zl_kvp_req){ .op = ZL_KVP_GET, .klen = 0 });
	req_bad((struct zl_kvp_req){ .op = ZL_KVP_GET, .klen = ZL_KV_MAX_KEY + 1 });
	req_bad((struct zl_kvp_req){ .op = ZL_KVP_GET, .klen = 1, .vlen = 1 });
	req_bad((struct zl_kvp_req){ .op = ZL_KVP_GET, .klen = 1, .n = 1 });
	req_bad((struct zl_kvp_req){ .op = ZL_KVP_GET, .klen = 1, .expected = 1 });
	req_bad((struct zl_kvp_req){ .op = ZL_KVP_DEL, .klen = 1, .flags = 1 });
	req_bad((struct zl_kvp_req){ .op = ZL_KVP_PUT, .klen = 0, .vlen = 1 });
	req_bad((struct zl_kvp_req){ .op = ZL_KVP_PUT, .klen = 1, .vlen = 1, .expected = 1 });
	req_bad((struct zl_kvp_req){ .op = ZL_KVP_CAS, .klen = 1, .vlen = 1, .n = 2 });
	req_bad((struct zl_kvp_req){ .op = ZL_KVP_SCAN, .klen = 1, .n = 0 });
	req_bad((struct zl_kvp_req){ .op = ZL_KVP_SCAN, .klen = 1, .n = ZL_KV_MAX_SCAN + 1 });
	req_bad((struct zl_kvp_req){ .op = ZL_KVP_SCAN, .klen = 1, .n = 1, .flags = 2 });
	req_bad((struct zl_kvp_req){ .op = ZL_KVP_SCAN, .klen = 1, .n = 1, .vlen = 1 });
	req_bad((struct zl_kvp_req){ .op = ZL_KVP_STATS, .klen = 1 });
	req_bad((struct zl_kvp_req){ .op = ZL_KVP_STATS, .n = 1 });

	/* header fields that no encoder sets */
	struct zl_kvp_req p;
	size_t len = mk_req(&(struct zl_kvp_req){ .op = ZL_KVP_GET, .klen = 2 });
	buf[0] = ZL_KVP_FMT + 1;
	CHECK_RC(zl_kvp_req_parse(ZL_KVP_GET, buf, len, &p), -EBADMSG);
	buf[0] = ZL_KVP_FMT;
	buf[6] = 1; /* reserved */
	CHECK_RC(zl_kvp_req_parse(ZL_KVP_GET, buf, len, &p), -EBADMSG);
	buf[6] = 0;
	buf[1] = ZL_KVP_DEL; /* op differs from the call type */
	CHECK_RC(zl_kvp_req_parse(ZL_KVP_GET, buf, len, &p), -EBADMSG);
	/* a value length that would wrap a 32-bit sum */
	len = mk_req(&(struct zl_kvp_req){ .op = ZL_KVP_PUT, .klen = 1, .vlen = 1 });
	memset(buf + 8, 0xff, 4);
	CHECK_RC(zl_kvp_req_parse(ZL_KVP_PUT, buf, len, &p), -EBADMSG);
	CHECK_RC(zl_kvp_req_parse(ZL_KVP_PUT, buf, 0, &p), -EBADMSG);
}

/* rep with body bytes body[0..blen) parses for op; truncations don't. */
static size_t mk_rep(const struct zl_kvp_rep *r, const void *body)
{
	zl_kvp_rep_hdr(r, buf);
	if (r->blen)
		memcpy(buf + ZL_KVP_HDR, body, r->blen);
	return ZL_KVP_HDR + r->blen;
}

static void rep_ok(int op, struct zl_kvp_rep r, const void *body)
{
	size_t len = mk_rep(&r, body);
	struct zl_kvp_rep p;
	CHECK_OK(zl_kvp_rep_parse(op, buf, len, &p));
	CHECK(p.op == op && p.status == r.status && p.count == r.count && p.blen == r.blen &&
	      p.ver == r.ver && p.flags == r.flags && p.body == buf + ZL_KVP_HDR);
	for (size_t l = 0; l < len; l++)
		CHECK_RC(zl_kvp_rep_parse(op, buf, l, &p), -EPROTO);
	CHECK_RC(zl_kvp_rep_parse(op, buf, len + 1, &p), -EPROTO);
	CHECK_RC(zl_kvp_rep_parse(op == ZL_KVP_GET ? ZL_KVP_DEL : ZL_KVP_GET, buf, len, &p),
		 -EPROTO);
}

static void rep_bad(int op, struct zl_kvp_rep r, const void *body)
{
	size_t len = mk_rep(&r, body);
	struct zl_kvp_rep p;
	CHECK_RC(zl_kvp_rep_parse(op, buf, len, &p), -EPROTO);
}

static void test_replies(void)
{
	rep_ok(ZL_KVP_GET, (struct zl_kvp_rep){ .op = ZL_KVP_GET, .blen = 5, .ver = 9 }, "hello");
	rep_ok(ZL_KVP_GET, (struct zl_kvp_rep){ .op = ZL_KVP_GET, .ver = 1 }, NULL);
	rep_ok(ZL_KVP_GET, (struct zl_kvp_rep){ .op = ZL_KVP_GET, .status = -ENOENT }, NULL);
	rep_ok(ZL_KVP_PUT, (struct zl_kvp_rep){ .op = ZL_KVP_PUT, .ver = 3 }, NULL);
	rep_ok(ZL_KVP_PUT, (struct zl_kvp_rep){ .op = ZL_KVP_PUT, .status = -ENOSPC }, NULL);
	rep_ok(ZL_KVP_CAS, (struct zl_kvp_rep){ .op = ZL_KVP_CAS, .status = -ESTALE }, NULL);
	rep_ok(ZL_KVP_DEL, (struct zl_kvp_rep){ .op = ZL_KVP_DEL }, NULL);
	rep_ok(ZL_KVP_STATS, (struct zl_kvp_rep){ .op = ZL_KVP_STATS, .blen = 3 }, "k=1");

	uint8_t recs[64];
	zl_kvp_rec_hdr(recs, 2, 3);
	memcpy(recs + 8, "abxyz", 5);
	zl_kvp_rec_hdr(recs + 13, 1, 0);
	recs[21] = 'c';
	rep_ok(ZL_KVP_SCAN, (struct zl_kvp_rep){ .op = ZL_KVP_SCAN, .count = 2, .blen = 22,
						 .flags = ZL_KVP_MORE }, recs);
	rep_ok(ZL_KVP_SCAN, (struct zl_kvp_rep){ .op = ZL_KVP_SCAN }, NULL);
	/* count and records disagree, or a record overruns */
	rep_bad(ZL_KVP_SCAN, (struct zl_kvp_rep){ .op = ZL_KVP_SCAN, .count = 1, .blen = 22 }, recs);
	rep_bad(ZL_KVP_SCAN, (struct zl_kvp_rep){ .op = ZL_KVP_SCAN, .count = 3, .blen = 22 }, recs);
	rep_bad(ZL_KVP_SCAN, (struct zl_kvp_rep){ .op = ZL_KVP_SCAN, .count = 2, .blen = 21 }, recs);
	zl_kvp_rec_hdr(recs + 13, 0, 1); /* empty key */
	rep_bad(ZL_KVP_SCAN, (struct zl_kvp_rep){ .op = ZL_KVP_SCAN, .count = 2, .blen = 22 }, recs);
	zl_kvp_rec_hdr(recs + 13, 1, 0xffffffffu); /* wraps */
	rep_bad(ZL_KVP_SCAN, (struct zl_kvp_rep){ .op = ZL_KVP_SCAN, .count = 2, .blen = 22 }, recs);
	rep_bad(ZL_KVP_SCAN, (struct zl_kvp_rep){ .op = ZL_KVP_SCAN, .flags = 2 }, NULL);
	/* statuses and fields that do not belong */
	rep_bad(ZL_KVP_GET, (struct zl_kvp_rep){ .op = ZL_KVP_GET, .status = 1, .ver = 1 }, NULL);
	rep_bad(ZL_KVP_GET, (struct zl_kvp_rep){ .op = ZL_KVP_GET, .status = -5000 }, NULL);
	rep_bad(ZL_KVP_GET, (struct zl_kvp_rep){ .op = ZL_KVP_GET }, NULL); /* version 0 */
	rep_bad(ZL_KVP_GET, (struct zl_kvp_rep){ .op = ZL_KVP_GET, .status = -ENOENT, .ver = 2 },
		NULL);
	rep_bad(ZL_KVP_GET, (struct zl_kvp_rep){ .op = ZL_KVP_GET, .ver = 1, .count = 1 }, NULL);
	rep_bad(ZL_KVP_PUT, (struct zl_kvp_rep){ .op = ZL_KVP_PUT, .ver = 1, .blen = 1 }, "x");
	rep_bad(ZL_KVP_DEL, (struct zl_kvp_rep){ .op = ZL_KVP_DEL, .ver = 1 }, NULL);
	rep_bad(ZL_KVP_DEL, (struct zl_kvp_rep){ .op = ZL_KVP_DEL, .flags = 1 }, NULL);
	size_t len = mk_rep(&(struct zl_kvp_rep){ .op = ZL_KVP_DEL }, NULL);
	buf[0] = ZL_KVP_FMT + 1;
	struct zl_kvp_rep p;
	CHECK_RC(zl_kvp_rep_parse(ZL_KVP_DEL, buf, len, &p), -EPROTO);
}

int main(void)
{
	test_requests();
	test_replies();
	printf("kv_proto: OK\n");
	return T_EXIT_PASS;
}
