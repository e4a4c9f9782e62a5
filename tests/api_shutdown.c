/* SPDX-License-Identifier: MIT */
/*
 * api_shutdown: zl_shutdown stops a channel from another thread, on every
 * transport here (shm, unix, tcp; rdma in the VM):
 *  - a thread blocked in zl_recv (an hour's timeout) returns -ESHUTDOWN
 *    within 1 s of the call, whether it sleeps (spin 0) or spins (spin
 *    without end);
 *  - a thread blocked in zl_send on a full ring or socket returns too;
 *  - later calls return -ESHUTDOWN, a second zl_shutdown is a no-op, and
 *    the peer sees the end (-ECONNRESET after what came before);
 *  - zl_close afterwards frees it (ASan: no leak, no use after free).
 *   api_shutdown [SCHEME]   SCHEME: only ZL_TEST_URL_<SCHEME>, connecting
 *   with ZL_TEST_CONNECT_<SCHEME> (tests/vm/rdma-suite.sh: rdma)
 * Exit 0 pass, 1 fail.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zipline.h>

#define HOUR 3600000000LL

static int failures;
#define CHECK(cond, ...) \
	do { \
		if (!(cond)) { \
			fprintf(stderr, "api_shutdown: FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
			failures++; \
			return; \
		} \
	} while (0)

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

struct blocked {
	zl_channel *ch;
	int send; /* block in zl_send (1) or zl_recv (0) */
	double at; /* when it returned (written before rc) */
	_Atomic int rc; /* 1 while it blocks */
};

static void *block(void *arg)
{
	struct blocked *b = arg;
	static char buf[65536];
	size_t len = 0;
	int r;
	if (b->send) {
		do
			r = zl_send(b->ch, buf, sizeof buf, HOUR);
		while (r == 0); /* until the ring or socket is full and it blocks */
	} else {
		r = zl_recv(b->ch, buf, sizeof buf, &len, HOUR);
	}
	b->at = now_s();
	atomic_store(&b->rc, r);
	return NULL;
}

struct acc {
	zl_listener *l;
	zl_channel *ch;
	int rc;
};

static void *accept_one(void *arg)
{
	struct acc *a = arg;
	a->rc = zl_accept(a->l, 5000000, &a->ch);
	return NULL;
}

static int pair(const char *url, int64_t spin_us, zl_channel **c, zl_channel **s)
{
	struct zl_opts o;
	zl_opts_init(&o);
	o.spin_us = spin_us;
	o.ring_size = 65536;
	struct acc a = { 0 };
	int r = zl_listen(url, &o, &a.l);
	if (r)
		return r;
	char real[512];
	zl_listener_url(a.l, real, sizeof real);
	/* the connecting end's own parameters (rdma: its device), as the
	 * channel tests take them: ZL_TEST_CONNECT_<scheme> */
	char env[64];
	snprintf(env, sizeof env, "ZL_TEST_CONNECT_%.*s", (int)strcspn(url, ":"), url);
	const char *extra = getenv(env);
	if (extra && !strchr(real, '?'))
		snprintf(real + strlen(real), sizeof real - strlen(real), "?%s", extra);
	pthread_t t;
	pthread_create(&t, NULL, accept_one, &a);
	r = zl_connect(real, &o, 5000000, c);
	pthread_join(t, NULL);
	zl_listener_close(a.l);
	if (r)
		return r;
	if (a.rc) {
		zl_close(*c);
		return a.rc;
	}
	*s = a.ch;
	return 0;
}

static void one(const char *url, int64_t spin_us, int send)
{
	zl_channel *c = NULL, *s = NULL;
	int r = pair(url, spin_us, &c, &s);
	CHECK(!r, "%s: the pair: %s", url, zl_strerror(r));
	if (!send) { /* something before, which the peer must still get */
		r = zl_send(c, "before", 6, 1000000);
		CHECK(!r, "%s: send before: %s", url, zl_strerror(r));
		char b[16];
		size_t len = 0;
		r = zl_recv(s, b, sizeof b, &len, 1000000);
		CHECK(!r && len == 6, "%s: recv before: %s", url, zl_strerror(r));
	}
	struct blocked b = { .ch = c, .send = send, .rc = 1 };
	pthread_t t;
	pthread_create(&t, NULL, block, &b);
	usleep(100000); /* it is blocked by now */
	double t0 = now_s();
	CHECK(zl_shutdown(c) == 0, "zl_shutdown");
	for (int i = 0; i < 500 && atomic_load(&b.rc) == 1; i++) /* 5 s at most */
		usleep(10000);
	if (atomic_load(&b.rc) == 1) {
		fprintf(stderr, "api_shutdown: FAIL %s spin %lld %s: the blocked call did not "
			"return within 5 s of zl_shutdown\n", url, (long long)spin_us,
			send ? "zl_send" : "zl_recv");
		exit(1); /* (the thread still blocks: nothing more to try safely) */
	}
	pthread_join(t, NULL);
	double took = b.at - t0;
	int brc = atomic_load(&b.rc);
	CHECK(brc == -ESHUTDOWN, "%s spin %lld %s: the blocked call returned %s", url,
	      (long long)spin_us, send ? "zl_send" : "zl_recv", zl_strerror(brc));
	CHECK(took < 1.0, "%s spin %lld: the blocked call returned %.3f s after zl_shutdown", url,
	      (long long)spin_us, took);
	char buf[16];
	size_t len;
	CHECK(zl_send(c, "x", 1, 0) == -ESHUTDOWN, "send after shutdown");
	CHECK(zl_recv(c, buf, sizeof buf, &len, 0) == -ESHUTDOWN, "recv after shutdown");
	CHECK(zl_flush(c, 0) == -ESHUTDOWN, "flush after shutdown");
	CHECK(zl_wait_writable(c, 1, 0) == -ESHUTDOWN, "zl_wait_writable after shutdown");
	CHECK(zl_recv(c, buf, sizeof buf, NULL, 0) == -EINVAL, "an argument error stays -EINVAL");
	CHECK(zl_shutdown(c) == 0, "a second zl_shutdown");
	/* the peer: what came before (send case: ring bytes), then the end */
	for (double end = now_s() + 5;;) {
		static char big[65536];
		r = zl_recv(s, big, sizeof big, &len, 100000);
		if (r == -ECONNRESET)
			break;
		CHECK(r == 0 || r == -ETIMEDOUT, "%s: the peer's recv: %s", url, zl_strerror(r));
		CHECK(now_s() < end, "%s: the peer does not see the end within 5 s", url);
	}
	zl_close(c);
	zl_close(s);
	printf("ok %s spin %lld %s: -ESHUTDOWN %.1f ms after zl_shutdown\n", url,
	       (long long)spin_us, send ? "zl_send" : "zl_recv", took * 1e3);
}

int main(int argc, char **argv)
{
	if (argc > 1) { /* api_shutdown SCHEME: its ZL_TEST_URL_<scheme> only (rdma, in the VM) */
		char env[64];
		snprintf(env, sizeof env, "ZL_TEST_URL_%s", argv[1]);
		const char *url = getenv(env);
		if (!url) {
			fprintf(stderr, "api_shutdown: %s is not set\n", env);
			return 2;
		}
		one(url, 0, 0);
		one(url, -1, 0);
		one(url, 0, 1);
		return failures ? 1 : 0;
	}
	char shm[64];
	snprintf(shm, sizeof shm, "shm://zl-api-shutdown-%d", (int)getpid());
	char unx[128];
	snprintf(unx, sizeof unx, "unix:///tmp/zl-api-shutdown-%d.sock", (int)getpid());
	const char *urls[] = { shm, unx, "tcp://127.0.0.1:0" };
	for (int u = 0; u < 3; u++) {
		one(urls[u], 0, 0);   /* asleep in zl_recv */
		one(urls[u], -1, 0);  /* spinning in zl_recv */
		one(urls[u], 0, 1);   /* asleep in zl_send, the ring or socket full */
		if (u == 1)
			unlink(unx + strlen("unix://"));
	}
	if (zl_shutdown(NULL) != -EINVAL) {
		fprintf(stderr, "api_shutdown: FAIL zl_shutdown(NULL) is not -EINVAL\n");
		failures++;
	}
	return failures ? 1 : 0;
}
