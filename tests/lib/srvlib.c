/* SPDX-License-Identifier: MIT */
#include <stdatomic.h>

#include "srvlib.h"

void tl_echo(int type, const void *in, size_t len, void *out)
{
	const uint8_t *i = in;
	uint8_t *o = out;
	for (size_t k = 0; k < len; k++)
		o[k] = i[k] ^ (uint8_t)type;
}

static int echo(zl_req *rq, void *arg)
{
	struct tl_srv *t = arg;
	size_t len;
	const void *d = zl_req_data(rq, &len);
	int type = zl_req_type(rq);
	void *p;
	if (type % 2 == 0 && zl_reply_reserve(rq, len, &p) == 0) {
		tl_echo(type, d, len, p);
		return zl_reply_commit(rq, len);
	}
	if (len > t->cap) {
		free(t->buf);
		t->cap = len;
		t->buf = malloc(len);
		CHECK(t->buf);
	}
	tl_echo(type, d, len, t->buf);
	int r = zl_reply(rq, t->buf, len);
	CHECKF(r == 0 || r == -ECONNRESET, "zl_reply: %s", zl_strerror(r));
	return 0;
}

static int slow(zl_req *rq, void *arg)
{
	struct tl_srv *t = arg;
	int64_t end = tl_now_us() + t->busy_us;
	while (tl_now_us() < end)
		;
	return echo(rq, arg);
}

static int defer(zl_req *rq, void *arg)
{
	struct tl_srv *t = arg;
	CHECK(t->ndeferred < 4096);
	CHECK_OK(zl_req_defer(rq));
	CHECK_RC(zl_req_defer(rq), -EINVAL);
	t->deferred[t->ndeferred++] = rq;
	return 0;
}

static int fail(zl_req *rq, void *arg) { return -EDOM; }

static void *serve(void *arg)
{
	struct tl_srv *t = arg;
	while (!atomic_load(&t->quit)) {
		int r = zl_server_poll(t->srv, 20000);
		CHECKF(r >= 0 || r == -ECANCELED, "zl_server_poll: %s", zl_strerror(r));
		int n = t->ndeferred;
		t->ndeferred = 0;
		for (int i = 0; i < n; i++)
			echo(t->deferred[i], t);
	}
	return NULL;
}

void tl_srv_start(struct tl_srv *t, const char *scheme, const char *params,
		  const struct zl_server_opts *o)
{
	memset(t, 0, sizeof(*t));
	CHECK_OK(zl_server_create(o, &t->srv));
	char url[600], lurl[600];
	tl_make_url(scheme, params, url, sizeof(url));
	int r = zl_server_listen(t->srv, url, NULL);
	if (r == -EPROTONOSUPPORT)
		SKIP("transport %s is not built in", scheme);
	CHECKF(r == 0, "zl_server_listen(%s): %s", url, zl_strerror(r));
	CHECK_OK(zl_server_url(t->srv, 0, lurl, sizeof(lurl)));
	tl_conn_url(scheme, params, lurl, t->url, sizeof(t->url));
	for (int ty = 1; ty < 256; ty++)
		CHECK_OK(zl_server_handle(t->srv, ty, echo, t));
	CHECK_OK(zl_server_handle(t->srv, TL_T_DEFER, defer, t));
	CHECK_OK(zl_server_handle(t->srv, TL_T_FAIL, fail, t));
	CHECK_OK(zl_server_handle(t->srv, TL_T_SLOW, slow, t));
	CHECK_OK(zl_server_handle(t->srv, TL_T_NONE, NULL, NULL));
	CHECK_RC(zl_server_handle(t->srv, 0, echo, t), -EINVAL);
	CHECK_RC(zl_server_handle(t->srv, 256, echo, t), -EINVAL);
	tl_thread_start(&t->th, serve, t);
}

void tl_srv_stop(struct tl_srv *t)
{
	atomic_store(&t->quit, 1);
	zl_server_stop(t->srv);
	tl_thread_join(&t->th, 10000);
	zl_server_close(t->srv);
	free(t->buf);
}

zl_client *tl_client(const char *url, int64_t timeout_us)
{
	zl_client *c = NULL;
	int r = zl_client_connect(url, NULL, timeout_us, &c);
	CHECKF(r == 0, "zl_client_connect(%s): %s", url, zl_strerror(r));
	return c;
}

void tl_call_check(zl_client *c, int type, size_t len, uint64_t id, int64_t timeout_us)
{
	uint8_t *req = malloc(len + 1), *want = malloc(len + 1);
	CHECK(req && want);
	tl_fill(req, len, id);
	tl_echo(type, req, len, want);
	const void *rep;
	size_t n;
	int r = zl_call(c, type, req, len, &rep, &n, timeout_us);
	CHECKF(r == 0, "zl_call(type %d, %zu B): %s", type, len, zl_strerror(r));
	CHECKF(n == len && !memcmp(rep, want, len), "reply of %zu B (want %zu) differs", n, len);
	free(req);
	free(want);
}

static void *honest(void *arg)
{
	struct tl_honest *h = arg;
	zl_client *c = tl_client(h->url, 10000000);
	struct tl_rng r = { .s = (uint64_t)h->id * 7919 };
	while (!atomic_load(h->stop)) {
		size_t len = tl_rand_below(&r, 600);
		int64_t t0 = tl_now_us();
		tl_call_check(c, 1 + (int)tl_rand_below(&r, 4), len, h->calls + ((uint64_t)h->id << 40),
			      10000000);
		int64_t dt = tl_now_us() - t0;
		h->worst_us = dt > h->worst_us ? dt : h->worst_us;
		h->slow += dt > TL_SLOW_US;
		h->calls++;
	}
	zl_client_close(c);
	return NULL;
}

void tl_honest_start(struct tl_honest *h, int n, const char *url, _Atomic int *stop)
{
	for (int i = 0; i < n; i++) {
		h[i] = (struct tl_honest){ .url = url, .id = i + 1, .stop = stop };
		tl_thread_start(&h[i].th, honest, &h[i]);
	}
}

int64_t tl_honest_join(struct tl_honest *h, int n, uint64_t *calls, uint64_t *slow)
{
	int64_t worst = 0;
	*calls = 0;
	*slow = 0;
	for (int i = 0; i < n; i++) {
		tl_thread_join(&h[i].th, 30000);
		CHECKF(h[i].calls > 0, "honest client %d made no call", i);
		*calls += h[i].calls;
		*slow += h[i].slow;
		worst = h[i].worst_us > worst ? h[i].worst_us : worst;
	}
	return worst;
}

void tl_check_latency(const char *what, int64_t bound_us, int64_t worst_us, uint64_t slow)
{
	printf("%s: %" PRIu64 " calls over %" PRId64 " us (at most %d allowed), worst %" PRId64
	       " us\n", what, slow, bound_us, TL_SLOW_MAX, worst_us);
	if (tl_scaled_down())
		return;
	CHECKF(slow <= TL_SLOW_MAX && worst_us < TL_SLOW_NEVER_US,
	       "%s: %" PRIu64 " calls over %" PRId64 " us, worst %" PRId64 " us", what, slow,
	       bound_us, worst_us);
}
