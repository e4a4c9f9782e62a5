/* SPDX-License-Identifier: MIT */
/*
 * zl-kvd wire format, version 1 (docs/kv.md). All integers little-endian.
 *
 * Request (zl_call type = op):          Reply:
 *   0 u8  fmt      ZL_KVP_FMT             0 u8  fmt     ZL_KVP_FMT
 *   1 u8  op       == the call's type     1 u8  op      the request's op
 *   2 u16 flags    SCAN: ZL_KVP_EXCL      2 u16 flags   SCAN: ZL_KVP_MORE
 *   4 u16 klen                            4 i32 status  0 or -errno
 *   6 u16 zero                            8 u32 count   SCAN: records
 *   8 u32 vlen                           12 u32 blen    body bytes
 *  12 u32 n        SCAN: records wanted  16 u64 ver     key version
 *  16 u64 expected CAS: version          24 body: GET value; SCAN records
 *  24 key[klen], value[vlen]                (u32 klen, u32 vlen, key, value);
 *                                           STATS text
 * A message is exactly header + its lengths. Fields an op does not use
 * must be 0; anything else is malformed (-EBADMSG for requests, -EPROTO
 * for replies), so later versions can give them a meaning.
 */
#ifndef ZL_KV_PROTO_H
#define ZL_KV_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "zipline_kv.h"

#define ZL_KVP_FMT 1
#define ZL_KVP_HDR 24
#define ZL_KVP_REC 8 /* scan record header */

enum zl_kvp_op {
	ZL_KVP_GET = 1,
	ZL_KVP_PUT = 2,
	ZL_KVP_DEL = 3,
	ZL_KVP_SCAN = 4,
	ZL_KVP_CAS = 5,
	ZL_KVP_STATS = 6,
	ZL_KVP_NOPS
};

#define ZL_KVP_EXCL 1u /* request: start after the key, not at it */
#define ZL_KVP_MORE 1u /* reply: the scan stopped at the byte budget */
/* Body bytes a scan reply holds beyond its first record: big scans come
 * in pages, which zl_kv_scan continues with ZL_KVP_EXCL. */
#define ZL_KVP_SCAN_BUDGET (1u << 20)
#define ZL_KVP_MAX_REQ (ZL_KVP_HDR + ZL_KV_MAX_KEY + ZL_KV_MAX_VAL)
#define ZL_KVP_MAX_STATS 4096u /* STATS reply text */

struct zl_kvp_req {
	uint8_t op;
	uint16_t flags;
	uint32_t klen, vlen, n;
	uint64_t expected;
	const uint8_t *key, *val; /* into the parsed buffer */
};

struct zl_kvp_rep {
	uint8_t op;
	uint16_t flags;
	int32_t status;
	uint32_t count, blen;
	uint64_t ver;
	const uint8_t *body; /* into the parsed buffer */
};

/* Write r's header (ZL_KVP_HDR bytes) to hdr; key and value follow it. */
void zl_kvp_req_hdr(const struct zl_kvp_req *r, void *hdr);

/* Parse a request that arrived as a call of the given type. The header is
 * read once, into *r; key and val point into buf. 0 or -EBADMSG. */
int zl_kvp_req_parse(int type, const void *buf, size_t len, struct zl_kvp_req *r);

void zl_kvp_rep_hdr(const struct zl_kvp_rep *r, void *hdr);

/* Parse and validate a reply to a request of op (scan records included).
 * 0 or -EPROTO. */
int zl_kvp_rep_parse(int op, const void *buf, size_t len, struct zl_kvp_rep *r);

/* Next scan record from *p (before end): 0, or -EPROTO if it overruns. */
int zl_kvp_rec_next(const uint8_t **p, const uint8_t *end, const uint8_t **key, uint32_t *klen,
		    const uint8_t **val, uint32_t *vlen);

/* Write one scan record header at p. */
void zl_kvp_rec_hdr(void *p, uint32_t klen, uint32_t vlen);

#endif
