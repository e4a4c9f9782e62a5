/* SPDX-License-Identifier: MIT */
/*
 * zl_server / zl_client over one transport (argv[1]): every request path
 * (in a slot, as a channel message, fragmented), errors, deferral,
 * pipelining, then many clients with random types, sizes and depths: every
 * reply matches its request, none is lost or duplicated.
 * usage: srv_basic SCHEME [CLIENTS]
 */
#include <stdatomic.h>

#include "srvlib.h"

#define T_OUT 20000000

static void single(const char *url)
{
	zl_client *c = tl_client(url, T_OUT);
	CHECK(zl_client_slots(c) == 4);
	static const size_t sizes[] = { 0, 1, 495, 496, 497, 4096, 100000, 1u << 20 };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		for (int type = 1; type <= 2; type++)
			tl_call_check(c, type, sizes[i], i * 2 + (uint64_t)type, T_OUT);
	tl_call_check(c, TL_T_DEFER, 100, 1, T_OUT);
	tl_call_check(c, TL_T_DEFER, 5000, 2, T_OUT);
	const void *rep;
	size_t n;
	CHECK_RC(zl_call(c, TL_T_FAIL, "x", 1, &rep, &n, T_OUT), -EDOM);
	CHECK_RC(zl_call(c, TL_T_NONE, "x", 1, &rep, &n, T_OUT), -EOPNOTSUPP);
	CHECK_RC(zl_call(c, 0, "x", 1, &rep, &n, T_OUT), -EINVAL);
	CHECK_RC(zl_call(c, 256, "x", 1, &rep, &n, T_OUT), -EINVAL);
	CHECK_RC(zl_call(c, 1, NULL, 1, &rep, &n, T_OUT), -EINVAL);
	static uint8_t big[(4u << 20) + 1];
	CHECK_RC(zl_call(c, 1, big, sizeof(big), &rep, &n, T_OUT), -EMSGSIZE);
	tl_call_check(c, 3, 10, 99, T_OUT); /* still usable */

	/* pipelining: K in flight, then -EBUSY */
	uint8_t req[4][300];
	for (int k = 0; k < 4; k++) {
		tl_fill(req[k], sizeof(req[k]), 1000 + (uint64_t)k);
		int tag = zl_call_send(c, 10 + k, req[k], sizeof(req[k]), T_OUT);
		CHECKF(tag >= 0 && tag < 4, "zl_call_send: %d", tag);
	}
	CHECK_RC(zl_call_send(c, 1, "x", 1, T_OUT), -EBUSY);
	CHECK_RC(zl_call(c, 1, "x", 1, &rep, &n, T_OUT), -EBUSY);
	unsigned seen = 0;
	for (int k = 0; k < 4; k++) {
		int tag = -1;
		CHECK_OK(zl_call_recv(c, &tag, &rep, &n, T_OUT));
		CHECK(tag >= 0 && tag < 4 && !(seen & (1u << tag)));
		seen |= 1u << tag;
		CHECK(n == 300);
	}
	int tag;
	CHECK_RC(zl_call_recv(c, &tag, &rep, &n, 0), -EAGAIN);
	CHECK(tag == -1);
	CHECK_RC(zl_call_recv(c, &tag, &rep, &n, 1000), -ETIMEDOUT);
	zl_client_close(c);
}

struct worker {
	const char *url;
	int id, calls;
	struct tl_thread th;
	uint64_t done;
};

static int pick_type(struct tl_rng *r)
{
	for (;;) {
		int t = 1 + (int)tl_rand_below(r, 255);
		if (t != TL_T_FAIL && t != TL_T_NONE && t != TL_T_SLOW)
			return t;
	}
}

static size_t pick_size(struct tl_rng *r)
{
	uint64_t x = tl_rand_below(r, 100);
	if (x < 70)
		return tl_rand_below(r, 497);
	if (x < 97)
		return tl_rand_below(r, 4097);
	return tl_rand_below(r, 200001);
}

/* Up to a random depth in flight; every reply checked against its tag. */
static void *worker(void *arg)
{
	struct worker *w = arg;
	struct tl_rng r = { .s = tl_seed() + (uint64_t)w->id };
	zl_client *c = tl_client(w->url, T_OUT);
	int k = zl_client_slots(c);
	struct {
		int type;
		size_t len;
		uint64_t id;
		bool busy;
	} slot[64] = { 0 };
	uint8_t *buf = malloc(200001), *want = malloc(200001);
	CHECK(buf && want);
	int sent = 0, inflight = 0;
	uint64_t seq = 0;
	while (w->done < (uint64_t)w->calls) {
		int depth = 1 + (int)tl_rand_below(&r, (uint64_t)k);
		while (inflight < depth && sent < w->calls) {
			int type = pick_type(&r);
			size_t len = pick_size(&r);
			uint64_t id = ((uint64_t)w->id << 32) | seq++;
			tl_fill(buf, len, id);
			int tag = zl_call_send(c, type, buf, len, T_OUT);
			CHECKF(tag >= 0 && tag < k && !slot[tag].busy, "zl_call_send: %d", tag);
			slot[tag].type = type;
			slot[tag].len = len;
			slot[tag].id = id;
			slot[tag].busy = true;
			inflight++;
			sent++;
		}
		int tag;
		const void *rep;
		size_t n;
		int rc = zl_call_recv(c, &tag, &rep, &n, T_OUT);
		CHECKF(rc == 0, "client %d: zl_call_recv: %s", w->id, zl_strerror(rc));
		CHECKF(tag >= 0 && tag < k && slot[tag].busy, "reply for tag %d not in flight", tag);
		tl_fill(buf, slot[tag].len, slot[tag].id);
		tl_echo(slot[tag].type, buf, slot[tag].len, want);
		CHECKF(n == slot[tag].len && !memcmp(rep, want, n),
		       "client %d: reply of %zu B (want %zu) differs", w->id, n, slot[tag].len);
		slot[tag].busy = false;
		inflight--;
		w->done++;
	}
	free(buf);
	free(want);
	zl_client_close(c);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *scheme = tl_scheme_arg(argc, argv);
	int nclients = argc > 2 ? atoi(argv[2]) : 64;
	const char *sc = getenv("ZL_TEST_SCALE");
	double scale = sc ? atof(sc) : 1.0;
	tl_watchdog(240);
	struct tl_srv s;
	tl_srv_start(&s, scheme, NULL, NULL);
	single(s.url);

	int calls = (int)(400 * scale) + 10;
	struct worker *w = calloc((size_t)nclients, sizeof(*w));
	CHECK(w);
	int64_t t0 = tl_now_us();
	for (int i = 0; i < nclients; i++) {
		w[i] = (struct worker){ .url = s.url, .id = i, .calls = calls };
		tl_thread_start(&w[i].th, worker, &w[i]);
	}
	for (int i = 0; i < nclients; i++)
		tl_thread_join(&w[i].th, 200000);
	int64_t t1 = tl_now_us();

	/* the server saw each request exactly once */
	struct zl_server_info info;
	for (int i = 0; i < 1000; i++) { /* disconnects land asynchronously */
		CHECK_OK(zl_server_info(s.srv, &info));
		if (info.clients == 0)
			break;
		tl_sleep_us(10000);
	}
	uint64_t singles = 2 * 8 + 2 + 1 + 1 + 4; /* handled calls in single() */
	uint64_t want = singles + (uint64_t)nclients * (uint64_t)calls;
	CHECKF(info.requests == want, "server served %" PRIu64 ", clients made %" PRIu64,
	       info.requests, want);
	CHECK(info.clients == 0 && info.clients_total == (uint64_t)nclients + 1);
	CHECK(info.clients_dropped == 0);
	CHECK(info.rejected == 1 && info.per_type[TL_T_FAIL] == 1);
	/* rdma: a flag is consumed before its reply goes out, so an honest
	 * client never announces a slot twice (serve.c) */
	if (!strcmp(scheme, "rdma"))
		CHECKF(info.spurious == 0, "%" PRIu64 " spurious flags", info.spurious);
	/* honest clients only: the counters of a rogue's traces stay 0 */
	CHECKF(info.spurious == 0 && info.recovered == 0,
	       "honest clients counted as %" PRIu64 " spurious flags, %" PRIu64 " recovered",
	       info.spurious, info.recovered);
	printf("%s: %d clients x %d calls in %.2f s, %" PRIu64 " requests served, "
	       "%" PRIu64 " sleeps, %" PRIu64 " spurious, %" PRIu64 " recovered\n",
	       scheme, nclients, calls, (double)(t1 - t0) / 1e6, info.requests, info.sleeps,
	       info.spurious, info.recovered);
	tl_srv_stop(&s);
	free(w);
	return 0;
}
