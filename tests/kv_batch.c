/* SPDX-License-Identifier: MIT */
/*
 * kv_batch SCHEME: zl_kv_batch(3) against zl-kvd's service on SCHEME (shm,
 * tcp, unix); built as os_batch (-DKV_BATCH_ONESIDED), against the
 * one-sided store (shm, or rdma with ZL_OS_TEST_SCHEME=rdma).
 *   - Random batches of GET, PUT and DEL on a few keys (so a batch often
 *     names a key twice) give exactly the results of running them one by
 *     one in array order, as a model says; values 0 B to 64 KiB.
 *   - A GET whose value is longer than its buffer: -EMSGSIZE, the length,
 *     the buffer untouched.
 *   - Bad arguments: -EINVAL with nothing run.
 *   - One-sided: 16 GETs in one batch wait for at most 4 round trips, where
 *     16 single GETs wait for at least 32; 16 PUTs at most 5, where single
 *     PUTs wait for 48 (the pipelining itself).
 *   - zl-kvd: batches that time out leave the handle usable.
 *   - zl-kvd gone: the batch ends with an error, never a hang; every
 *     operation says it failed or did not run.
 */
#ifdef KV_BATCH_ONESIDED
#include "os_lib.h"
#else
#include "kv_lib.h"
#endif

#define NKEYS 24
#define VMAX (64u << 10)
#define TMO 10000000

struct mval {
	bool live;
	uint32_t vlen;
	uint64_t vid, ver;
};

struct bufs {
	uint8_t *val[ZL_KV_MAX_BATCH]; /* PUT values */
	uint8_t *out[ZL_KV_MAX_BATCH]; /* GET buffers */
};

static void key_of(int k, char *buf, size_t *len)
{
	*len = (size_t)snprintf(buf, 16, "bk%d", k);
}

static uint32_t rand_len(struct tl_rng *r)
{
	uint64_t x = tl_rand_below(r, 100);
	return x < 70 ? (uint32_t)tl_rand_below(r, 200) : x < 95 ? (uint32_t)tl_rand_below(r, 5000)
							: (uint32_t)tl_rand_below(r, VMAX + 1);
}

/* Fill ops[0..n) with random operations on the test keys. */
static void make_ops(struct tl_rng *r, struct zl_kv_op *ops, size_t n, char (*keys)[16],
		     int *kidx, uint64_t *vids, struct bufs *b, uint64_t *vid)
{
	for (size_t i = 0; i < n; i++) {
		struct zl_kv_op *o = &ops[i];
		memset(o, 0, sizeof(*o));
		kidx[i] = (int)tl_rand_below(r, NKEYS);
		key_of(kidx[i], keys[i], &o->klen);
		o->key = keys[i];
		uint64_t c = tl_rand_below(r, 10);
		o->op = c < 5 ? ZL_KV_OP_GET : c < 9 ? ZL_KV_OP_PUT : ZL_KV_OP_DEL;
		o->rc = 12345;
		if (o->op == ZL_KV_OP_PUT) {
			o->vlen = rand_len(r);
			vids[i] = ++*vid;
			tl_fill(b->val[i], o->vlen, vids[i]);
			o->val = b->val[i];
		} else if (o->op == ZL_KV_OP_GET) {
			o->buf = b->out[i];
			o->cap = VMAX;
		}
	}
}

/* One random batch, checked against the model in array order. */
static void random_batch(zl_kv *kv, struct tl_rng *r, struct mval *m, struct bufs *b,
			 uint64_t *vid)
{
	struct zl_kv_op ops[ZL_KV_MAX_BATCH];
	char keys[ZL_KV_MAX_BATCH][16];
	int kidx[ZL_KV_MAX_BATCH];
	uint64_t vids[ZL_KV_MAX_BATCH];
	size_t n = 1 + tl_rand_below(r, ZL_KV_MAX_BATCH);
	make_ops(r, ops, n, keys, kidx, vids, b, vid);
	int rc = zl_kv_batch(kv, ops, n, TMO);
	CHECKF(rc == 0, "zl_kv_batch of %zu: %s", n, zl_strerror(rc));
	for (size_t i = 0; i < n; i++) {
		struct zl_kv_op *o = &ops[i];
		struct mval *e = &m[kidx[i]];
		switch (o->op) {
		case ZL_KV_OP_GET:
			if (!e->live) {
				CHECKF(o->rc == -ENOENT, "op %zu of %zu, GET %s: %s, want ENOENT",
				       i, n, keys[i], zl_strerror(o->rc));
				break;
			}
			CHECKF(o->rc == 0, "op %zu of %zu, GET %s: %s", i, n, keys[i],
			       zl_strerror(o->rc));
			CHECK_EQ_U64(o->vlen, e->vlen);
			CHECK_PATTERN(o->buf, o->vlen, e->vid);
			CHECK_EQ_U64(o->version, e->ver);
			break;
		case ZL_KV_OP_PUT:
			CHECKF(o->rc == 0, "op %zu PUT %s: %s", i, keys[i], zl_strerror(o->rc));
			CHECK(o->version != 0 && o->version != e->ver);
			*e = (struct mval){ true, (uint32_t)o->vlen, vids[i], o->version };
			break;
		default:
			CHECKF(o->rc == (e->live ? 0 : -ENOENT), "op %zu DEL %s: %s", i, keys[i],
			       zl_strerror(o->rc));
			e->live = false;
		}
	}
}

/* -EMSGSIZE for a short buffer; -EINVAL with nothing run. */
static void edges(zl_kv *kv)
{
	uint8_t big[300], small[16];
	tl_fill(big, sizeof(big), 7);
	memset(small, 0xa5, sizeof(small));
	CHECK_OK(zl_kv_put(kv, "edge", 4, big, sizeof(big), TMO));
	struct zl_kv_op o[3] = {
		{ .op = ZL_KV_OP_GET, .key = "edge", .klen = 4, .buf = small, .cap = sizeof(small) },
		{ .op = ZL_KV_OP_GET, .key = "edge", .klen = 4 }, /* length and version only */
		{ .op = ZL_KV_OP_GET, .key = "none", .klen = 4 },
	};
	CHECK_OK(zl_kv_batch(kv, o, 3, TMO));
	CHECK_RC(o[0].rc, -EMSGSIZE);
	CHECK_EQ_U64(o[0].vlen, sizeof(big));
	for (size_t i = 0; i < sizeof(small); i++)
		CHECK(small[i] == 0xa5);
	CHECK_RC(o[1].rc, -EMSGSIZE);
	CHECK(o[1].vlen == sizeof(big) && o[1].version == o[0].version);
	CHECK_RC(o[2].rc, -ENOENT);

	struct zl_kv_op bad[4] = {
		{ .op = ZL_KV_OP_DEL, .key = "edge", .klen = 4 },
		{ .op = ZL_KV_OP_PUT, .key = "edge", .klen = 4, .val = NULL, .vlen = 3 },
		{ .op = 9, .key = "edge", .klen = 4 },
		{ .op = ZL_KV_OP_GET, .key = "edge", .klen = 0 },
	};
	for (int k = 1; k < 4; k++) { /* op k bad: nothing runs */
		struct zl_kv_op t[2] = { bad[0], bad[k] };
		CHECK_RC(zl_kv_batch(kv, t, 2, TMO), -EINVAL);
		CHECK_RC(t[0].rc, -ECANCELED);
		CHECK_RC(t[1].rc, -EINVAL);
	}
	struct zl_kv_op many[ZL_KV_MAX_BATCH + 1];
	for (size_t i = 0; i < ZL_KV_MAX_BATCH + 1; i++)
		many[i] = bad[0];
	CHECK_RC(zl_kv_batch(kv, many, ZL_KV_MAX_BATCH + 1, TMO), -EINVAL);
	CHECK_RC(zl_kv_batch(kv, many, 0, TMO), -EINVAL);
	CHECK_RC(zl_kv_batch(NULL, many, 1, TMO), -EINVAL);
	CHECK_RC(zl_kv_batch(kv, NULL, 1, TMO), -EINVAL);
	CHECK_OK(zl_kv_get(kv, "edge", 4, NULL, NULL, NULL, TMO)); /* still there */
}

#ifdef KV_BATCH_ONESIDED
/* Every wait the handle made. */
static uint64_t waits(zl_kv *kv)
{
	struct zl_kv_info i = { .size = sizeof(i) };
	CHECK_OK(zl_kv_info(kv, &i));
	return i.get.round_trips + i.set.round_trips + i.del.round_trips + i.batch.round_trips;
}

/* 16 GETs, then 16 PUTs, of present keys: one batch against one by one,
 * in round trips (exact counts). */
static void pipelined(zl_kv *kv)
{
	char keys[16][16];
	struct zl_kv_op o[16];
	uint8_t out[16][64];
	for (int i = 0; i < 16; i++) {
		size_t kl;
		key_of(1000 + i, keys[i], &kl);
		CHECK_OK(zl_kv_put(kv, keys[i], kl, keys[i], kl, TMO));
		o[i] = (struct zl_kv_op){ .op = ZL_KV_OP_GET, .key = keys[i], .klen = kl,
					  .buf = out[i], .cap = sizeof(out[i]) };
	}
	uint64_t w0 = waits(kv);
	for (int i = 0; i < 16; i++)
		CHECK_OK(zl_kv_get(kv, o[i].key, o[i].klen, NULL, NULL, NULL, TMO));
	uint64_t w1 = waits(kv);
	CHECK_OK(zl_kv_batch(kv, o, 16, TMO));
	uint64_t w2 = waits(kv);
	for (int i = 0; i < 16; i++)
		CHECK(o[i].rc == 0 && o[i].vlen == o[i].klen && !memcmp(out[i], keys[i], o[i].klen));
	printf("16 GETs: %llu round trips one by one, %llu in one batch\n",
	       (unsigned long long)(w1 - w0), (unsigned long long)(w2 - w1));
	CHECK(w1 - w0 >= 32);
	CHECK(w2 - w1 <= 4);

	for (int i = 0; i < 16; i++)
		CHECK_OK(zl_kv_put(kv, o[i].key, o[i].klen, "one", 3, TMO));
	uint64_t w3 = waits(kv);
	for (int i = 0; i < 16; i++)
		o[i] = (struct zl_kv_op){ .op = ZL_KV_OP_PUT, .key = keys[i], .klen = o[i].klen,
					  .val = "two", .vlen = 3 };
	CHECK_OK(zl_kv_batch(kv, o, 16, TMO));
	uint64_t w4 = waits(kv);
	for (int i = 0; i < 16; i++) {
		const void *v;
		size_t vl;
		uint64_t ver;
		CHECK(o[i].rc == 0);
		CHECK_OK(zl_kv_get(kv, o[i].key, o[i].klen, &v, &vl, &ver, TMO));
		CHECK(vl == 3 && !memcmp(v, "two", 3) && ver == o[i].version);
	}
	printf("16 PUTs: %llu round trips one by one, %llu in one batch\n",
	       (unsigned long long)(w3 - w2), (unsigned long long)(w4 - w3));
	CHECK(w3 - w2 >= 48);
	CHECK(w4 - w3 <= 5);
}

#else
/* Batches that run out of time leave the handle usable: the calls they
 * gave up on are abandoned, not left open (zl_kv_get would say -EBUSY). */
static void timeouts(zl_kv *kv)
{
	struct zl_kv_op o[32];
	uint8_t out[32][16];
	int seen = 0;
	for (int round = 0; round < 2000 && seen < 20; round++) {
		for (int i = 0; i < 32; i++)
			o[i] = (struct zl_kv_op){ .op = ZL_KV_OP_GET, .key = "edge", .klen = 4,
						  .buf = out[i], .cap = sizeof(out[i]) };
		int rc = zl_kv_batch(kv, o, 32, round % 3); /* 0 to 2 us */
		if (rc == 0)
			continue;
		CHECKF(rc == -ETIMEDOUT, "batch with 2 us: %s", zl_strerror(rc));
		seen++;
		for (int i = 0; i < 32; i++)
			CHECK(o[i].rc == -EMSGSIZE || o[i].rc == -ETIMEDOUT || o[i].rc == -ECANCELED);
		CHECK_OK(zl_kv_get(kv, "edge", 4, NULL, NULL, NULL, TMO));
	}
	printf("%d batches timed out, the handle worked after each\n", seen);
	CHECK(seen > 0);
}

/* The server gone: an error, each operation failed or not run. */
static void server_gone(zl_kv *kv)
{
	struct zl_kv_op o[8];
	for (int i = 0; i < 8; i++)
		o[i] = (struct zl_kv_op){ .op = i % 2 ? ZL_KV_OP_PUT : ZL_KV_OP_GET,
					  .key = "gone", .klen = 4, .val = "x", .vlen = 1 };
	int64_t t0 = tl_now_us();
	int rc = zl_kv_batch(kv, o, 8, 2000000);
	CHECKF(rc < 0, "batch after the server stopped: %s", zl_strerror(rc));
	CHECK(tl_now_us() - t0 < 3000000);
	for (int i = 0; i < 8; i++)
		CHECK(o[i].rc == rc || o[i].rc == -ECANCELED);
}
#endif

int main(int argc, char **argv)
{
	tl_watchdog(280);
	struct tl_rng r = { tl_seed() };
	struct bufs b;
	for (int i = 0; i < (int)ZL_KV_MAX_BATCH; i++) {
		b.val[i] = malloc(VMAX);
		b.out[i] = malloc(VMAX);
		CHECK(b.val[i] && b.out[i]);
	}
#ifdef KV_BATCH_ONESIDED
	(void)argc, (void)argv;
	struct ost_server s;
	ost_start(&s, NULL);
	zl_kv *kv = ost_connect(&s);
#else
	struct kvt_server s;
	kvt_start(&s, kvt_scheme(argc, argv), 0);
	zl_kv *kv = kvt_connect(&s);
#endif
	struct mval m[NKEYS] = { 0 };
	uint64_t vid = 0, rounds = tl_scaled(300);
	for (uint64_t i = 0; i < rounds; i++)
		random_batch(kv, &r, m, &b, &vid);
	printf("%llu random batches agree with the model\n", (unsigned long long)rounds);
	edges(kv);
#ifdef KV_BATCH_ONESIDED
	pipelined(kv);
	zl_kv_close(kv);
	ost_stop(&s);
#else
	/* (a one-sided client on shm still reads the chunk it mapped) */
	timeouts(kv);
	kvt_stop(&s);
	server_gone(kv);
	zl_kv_close(kv);
#endif
	for (int i = 0; i < (int)ZL_KV_MAX_BATCH; i++) {
		free(b.val[i]);
		free(b.out[i]);
	}
	return 0;
}
