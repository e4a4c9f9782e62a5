/* SPDX-License-Identifier: MIT */
/*
 * srv_mixed SCHEME [CLIENTS [SIZES]]: one zl_server under mixed request sizes
 * (SIZES, e.g. 100,65536, replaces the default mix: to tell classes apart).
 *
 * The serving thread (pinned to one CPU when two are available; the
 * clients to the other, as poll_waiter does) answers with a transformation
 * of the request: a header (type, length, the request's first 8 bytes) and
 * the request's bytes reversed and XORed with the type, through
 * zl_reply_reserve (type 1) or zl_reply (type 2). CLIENTS threads (default
 * 3) each make CALLS calls (20,000, scaled by ZL_TEST_SCALE) with zl_call
 * in a tight loop, sizes drawn at random (seeded, seed printed) from
 * {100 B, 1 KiB, 64 KiB}: with 512-byte slots a 100-byte request travels in
 * a slot, the others over the client's channel announced by a doorbell (on
 * shm a 64 KiB request is also larger than the 64 KiB request ring, so it
 * arrives in fragments). A request starts with a tag unique to its client
 * and call, then a slice at a random offset of the client's random block;
 * every reply is checked byte for byte, so a reply that went to the wrong
 * call or client, or got mixed up, fails.
 *
 * Counters: zl_server_info is read once every client is connected and warm
 * and again when every client has made its CALLS calls (clients that
 * finish early keep calling, checked, until then, so traffic flows through
 * the whole window). While traffic flows the serving thread must not arm
 * client channels or sleep per request: on shm, arms / requests < 0.01
 * and sleeps / requests < 0.01 (report only with a single CPU or under the
 * sanitizers, ZL_TEST_SCALE < 1). tcp and unix only print them (the server
 * waits on epoll for stream clients). At the end the server must have
 * served exactly the calls made, dropped and rejected nobody.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdatomic.h>

#include "srvlib.h"

#define T_OUT 10000000      /* one call */
#define PHASE_US 120000000  /* a wait for every client (start, end) */
#define CALLS 20000
#define WARMUP 200
#define HDR 16
#define MAX_REQ 65536
#define T_RESERVE 1 /* answered through zl_reply_reserve/commit */
#define T_COPY 2    /* answered through zl_reply */


/* ---- the transformation ----------------------------------------------- */

/* Request: 8 bytes id (client << 40 | call), 8 bytes ~id, then a slice of
 * the client's random block. Reply (HDR + len bytes): 0x5a4d0000 | type,
 * len, the request's first 8 bytes, then the request reversed, each byte
 * XOR type. Clients check it against a precomputed reversed block, so a
 * call costs them little more than a memcmp (their think time must stay
 * well under the server's spin_us, or the server rightly sleeps). */
static void reverse_xor(const uint8_t *in, size_t len, uint8_t *out, int type)
{
	uint64_t x = 0x0101010101010101ull * (uint8_t)type;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t v;
		memcpy(&v, in + len - i - 8, 8);
		v = __builtin_bswap64(v) ^ x;
		memcpy(out + i, &v, 8);
	}
	for (; i < len; i++)
		out[i] = in[len - 1 - i] ^ (uint8_t)type;
}

static void reply_hdr(int type, size_t len, const uint8_t *req, uint8_t *out)
{
	uint32_t t = 0x5a4d0000u | (uint32_t)type, l = (uint32_t)len;
	memcpy(out, &t, 4);
	memcpy(out + 4, &l, 4);
	memset(out + 8, 0, 8);
	memcpy(out + 8, req, len < 8 ? len : 8);
}

/* ---- the server ------------------------------------------------------- */

struct server {
	zl_server *srv;
	char url[600];
	struct tl_thread th;
	_Atomic int quit;
	int cpu;
	uint8_t *buf; /* zl_reply's copy */
	uint8_t *copy; /* the request, read once from the client's memory */
	uint64_t reserve_fallbacks; /* type 1 answered by zl_reply (no room) */
};

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	CHECKF(sched_setaffinity(0, sizeof(s), &s) == 0, "cannot pin to cpu%d", cpu);
}

static int handler(zl_req *rq, void *arg)
{
	struct server *s = arg;
	size_t len;
	const uint8_t *d = zl_req_data(rq, &len);
	int type = zl_req_type(rq);
	CHECKF(len <= MAX_REQ, "server: request of %zu B", len);
	/* on shm the request is the client's memory: transform a copy, as a
	 * server that does not trust its clients would */
	memcpy(s->copy, d, len);
	uint8_t *p;
	if (type == T_RESERVE) {
		int r = zl_reply_reserve(rq, HDR + len, (void **)&p);
		if (r == 0) {
			reply_hdr(type, len, s->copy, p);
			reverse_xor(s->copy, len, p + HDR, type);
			r = zl_reply_commit(rq, HDR + len);
			CHECKF(r == 0, "server: zl_reply_commit: %s", zl_strerror(r));
			return 0;
		}
		CHECKF(r == -EAGAIN, "server: zl_reply_reserve(%zu B): %s", HDR + len,
		       zl_strerror(r));
		s->reserve_fallbacks++;
	}
	reply_hdr(type, len, s->copy, s->buf);
	reverse_xor(s->copy, len, s->buf + HDR, type);
	int r = zl_reply(rq, s->buf, HDR + len);
	CHECKF(r == 0, "server: zl_reply(%zu B): %s", HDR + len, zl_strerror(r));
	return 0;
}

static void *serve(void *arg)
{
	struct server *s = arg;
	if (s->cpu >= 0)
		pin(s->cpu);
	while (!atomic_load(&s->quit)) {
		int r = zl_server_run(s->srv, 100000);
		CHECKF(r == 0, "zl_server_run: %s", zl_strerror(r));
	}
	return NULL;
}

static void server_start(struct server *s, const char *scheme, int cpu)
{
	memset(s, 0, sizeof(*s));
	s->cpu = cpu;
	s->buf = malloc(HDR + MAX_REQ);
	s->copy = malloc(MAX_REQ);
	CHECK(s->buf && s->copy);
	struct zl_server_opts o;
	zl_server_opts_init(&o);
	o.slots = 4;
	o.slot_size = 512;      /* 100 B in a slot; 1 KiB, 64 KiB on the channel */
	o.max_req = 1u << 20;   /* room for 64 KiB whatever the default */
	CHECK_OK(zl_server_create(&o, &s->srv));
	char url[600], lurl[600];
	tl_make_url(scheme, NULL, url, sizeof(url));
	int r = zl_server_listen(s->srv, url, NULL);
	if (r == -EPROTONOSUPPORT)
		SKIP("transport %s is not built in", scheme);
	CHECKF(r == 0, "zl_server_listen(%s): %s", url, zl_strerror(r));
	CHECK_OK(zl_server_url(s->srv, 0, lurl, sizeof(lurl)));
	tl_conn_url(scheme, NULL, lurl, s->url, sizeof(s->url));
	CHECK_OK(zl_server_handle(s->srv, T_RESERVE, handler, s));
	CHECK_OK(zl_server_handle(s->srv, T_COPY, handler, s));
	tl_thread_start(&s->th, serve, s);
}

static void server_stop(struct server *s)
{
	atomic_store(&s->quit, 1);
	zl_server_stop(s->srv);
	tl_thread_join(&s->th, 10000);
	zl_server_close(s->srv);
	free(s->buf);
	free(s->copy);
}

/* ---- the clients ------------------------------------------------------ */

static _Atomic int ready, go, finished, stop;
static size_t sizes[8] = { 100, 1024, 65536 };
static size_t nsizes = 3;
#define BLOCK (MAX_REQ + 4096)

struct client {
	const char *url;
	int id, cpu;
	uint64_t seed, calls; /* calls: the timed phase's share */
	struct tl_thread th;
	uint64_t made, per_size[8];
	int64_t worst_us;
	uint8_t *block, *rblock[3]; /* random block; reversed ^ type (1, 2) */
	uint8_t *req;
};

/* Wait (sleeping 100 us at a time) until *v >= want, at most PHASE_US. */
static void await_at_least(_Atomic int *v, int want, const char *what)
{
	int64_t end = tl_now_us() + PHASE_US;
	while (atomic_load(v) < want) {
		CHECKF(tl_now_us() < end, "%s: %d of %d after %d s", what, atomic_load(v), want,
		       PHASE_US / 1000000);
		tl_sleep_us(100);
	}
}

static void bad_reply(struct client *c, int type, size_t len, const uint8_t *rep, size_t n,
		      const char *why)
{
	/* the whole expected reply, for the first wrong byte */
	uint8_t *want = malloc(HDR + MAX_REQ);
	CHECK(want);
	reply_hdr(type, len, c->req, want);
	reverse_xor(c->req, len, want + HDR, type);
	size_t at = 0, m = n < HDR + len ? n : HDR + len;
	while (at < m && rep[at] == want[at])
		at++;
	FAIL("client %d call %" PRIu64 " (type %d, %zu B): %s: reply of %zu B (want %zu), first "
	     "difference at byte %zu", c->id, c->made, type, len, why, n, HDR + len, at);
}

static void one_call(struct client *c, zl_client *cli, struct tl_rng *r)
{
	int k = (int)tl_rand_below(r, nsizes);
	size_t len = sizes[k];
	int type = tl_rand_below(r, 2) ? T_RESERVE : T_COPY;
	size_t off = tl_rand_below(r, BLOCK - len + 1);
	uint64_t id = ((uint64_t)c->id << 40) | c->made, nid = ~id;
	uint8_t tag[HDR];
	memcpy(tag, &id, 8);
	memcpy(tag + 8, &nid, 8);
	size_t t = len < HDR ? len : HDR;
	memcpy(c->req, tag, t);
	memcpy(c->req + t, c->block + off, len - t);
	const void *rp;
	size_t n;
	int64_t t0 = tl_now_us();
	int rc = zl_call(cli, type, c->req, len, &rp, &n, T_OUT);
	int64_t dt = tl_now_us() - t0;
	CHECKF(rc == 0, "client %d call %" PRIu64 " (type %d, %zu B): %s", c->id, c->made, type,
	       len, zl_strerror(rc));
	const uint8_t *rep = rp;
	if (n != HDR + len)
		bad_reply(c, type, len, rep, n, "length");
	uint8_t h[HDR], rtag[HDR];
	reply_hdr(type, len, c->req, h);
	if (memcmp(rep, h, HDR))
		bad_reply(c, type, len, rep, n, "header");
	/* reversed body: block[off, off+len-t) reversed is rblock[BLOCK-off-(len-t), BLOCK-off) */
	size_t body = len - t;
	if (memcmp(rep + HDR, c->rblock[type] + (BLOCK - off - body), body))
		bad_reply(c, type, len, rep, n, "body");
	reverse_xor(tag, t, rtag, type);
	if (memcmp(rep + HDR + body, rtag, t))
		bad_reply(c, type, len, rep, n, "tag");
	c->worst_us = dt > c->worst_us ? dt : c->worst_us;
	c->per_size[k]++;
	c->made++;
}

static void *client(void *arg)
{
	struct client *c = arg;
	if (c->cpu >= 0)
		pin(c->cpu);
	struct tl_rng r = { .s = c->seed };
	c->block = malloc(BLOCK);
	c->rblock[1] = malloc(BLOCK);
	c->rblock[2] = malloc(BLOCK);
	c->req = malloc(MAX_REQ);
	CHECK(c->block && c->rblock[1] && c->rblock[2] && c->req);
	tl_fill(c->block, BLOCK, c->seed);
	reverse_xor(c->block, BLOCK, c->rblock[1], 1);
	reverse_xor(c->block, BLOCK, c->rblock[2], 2);
	zl_client *cli = tl_client(c->url, T_OUT);
	CHECK(zl_client_slots(cli) == 4);
	for (int i = 0; i < WARMUP; i++)
		one_call(c, cli, &r);
	atomic_fetch_add(&ready, 1);
	await_at_least(&go, 1, "go");
	uint64_t end = c->made + c->calls;
	while (c->made < end)
		one_call(c, cli, &r);
	atomic_fetch_add(&finished, 1);
	/* keep the traffic flowing until every client is through */
	while (!atomic_load(&stop))
		one_call(c, cli, &r);
	zl_client_close(cli);
	free(c->block);
	free(c->rblock[1]);
	free(c->rblock[2]);
	free(c->req);
	return NULL;
}

/* ---- main ------------------------------------------------------------- */

static int cpu_a = -1, cpu_b = -1; /* server, clients */

static void pick_cpus(void)
{
	cpu_set_t s;
	if (sched_getaffinity(0, sizeof(s), &s))
		return;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &s)) {
			if (cpu_a < 0)
				cpu_a = c;
			else if (cpu_b < 0)
				cpu_b = c;
		}
	if (cpu_b < 0)
		cpu_a = -1; /* one CPU: pin nobody */
}

int main(int argc, char **argv)
{
	const char *scheme = tl_scheme_arg(argc, argv);
	int nclients = argc > 2 ? atoi(argv[2]) : 3;
	CHECK(nclients >= 1 && nclients <= 16);
	if (argc > 3) { /* SIZES: e.g. 100,65536 (to tell the size classes apart) */
		nsizes = 0;
		for (char *p = argv[3]; *p && nsizes < 8; p += *p == ',') {
			char *e;
			unsigned long v = strtoul(p, &e, 0);
			CHECKF(e != p && v >= 1 && v <= MAX_REQ, "bad size list %s", argv[3]);
			sizes[nsizes++] = v;
			p = e;
		}
		CHECK(nsizes > 0);
	}
	char sz[128] = "";
	for (size_t k = 0; k < nsizes; k++)
		snprintf(sz + strlen(sz), sizeof(sz) - strlen(sz), "%s%zu", k ? ", " : "", sizes[k]);
	tl_watchdog(280);
	uint64_t seed = tl_seed();
	uint64_t calls = tl_scaled(CALLS);
	pick_cpus();
	bool two = cpu_b >= 0, shm = !strcmp(scheme, "shm");
	bool enforce = shm && two && !tl_scaled_down();
	printf("%s: %d clients x %" PRIu64 " calls of {%s} B; server on cpu%d, clients on cpu%d%s\n",
	       scheme, nclients, calls, sz, cpu_a, cpu_b,
	       !shm ? " (counters report only: stream clients are waited for in epoll)"
	       : !two ? " (one CPU: counters report only)"
	       : tl_scaled_down() ? " (scaled down: counters report only)" : "");

	struct server s;
	server_start(&s, scheme, cpu_a);
	struct client *c = calloc((size_t)nclients, sizeof(*c));
	CHECK(c);
	for (int i = 0; i < nclients; i++) {
		c[i] = (struct client){ .url = s.url, .id = i + 1, .cpu = cpu_b,
					.seed = seed + 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1),
					.calls = calls };
		tl_thread_start(&c[i].th, client, &c[i]);
	}
	await_at_least(&ready, nclients, "clients connected and warm");

	struct zl_server_info i0, i1, i2;
	CHECK_OK(zl_server_info(s.srv, &i0));
	int64_t t0 = tl_now_us();
	atomic_store(&go, 1);
	await_at_least(&finished, nclients, "clients through their calls");
	CHECK_OK(zl_server_info(s.srv, &i1));
	int64_t t1 = tl_now_us();
	atomic_store(&stop, 1);
	uint64_t made = 0, per_size[8] = { 0 };
	int64_t worst = 0;
	for (int i = 0; i < nclients; i++) {
		tl_thread_join(&c[i].th, 30000);
		made += c[i].made;
		for (size_t k = 0; k < nsizes; k++)
			per_size[k] += c[i].per_size[k];
		worst = c[i].worst_us > worst ? c[i].worst_us : worst;
	}

	/* every call served once; nobody dropped or rejected */
	for (int i = 0; i < 1000; i++) { /* disconnects land asynchronously */
		CHECK_OK(zl_server_info(s.srv, &i2));
		if (i2.clients == 0)
			break;
		tl_sleep_us(10000);
	}
	CHECKF(i2.requests == made, "server served %" PRIu64 ", clients made %" PRIu64,
	       i2.requests, made);
	CHECKF(i2.clients == 0 && i2.clients_total == (uint64_t)nclients,
	       "%" PRIu64 " clients left, %" PRIu64 " accepted", i2.clients, i2.clients_total);
	CHECKF(i2.clients_dropped == 0 && i2.rejected == 0 && i2.paused == 0,
	       "%" PRIu64 " dropped, %" PRIu64 " rejected, %" PRIu64 " paused",
	       i2.clients_dropped, i2.rejected, i2.paused);

	double req = (double)(i1.requests - i0.requests);
	CHECK(req > 0);
	uint64_t arms = i1.arms - i0.arms, sleeps = i1.sleeps - i0.sleeps;
	double dt = (double)(t1 - t0);
	char per[256] = "";
	for (size_t k = 0; k < nsizes; k++)
		snprintf(per + strlen(per), sizeof(per) - strlen(per), "%s%" PRIu64 " x %zu B",
			 k ? ", " : "", per_size[k], sizes[k]);
	printf("%s: %" PRIu64 " calls checked (%s), worst call %.3f ms\n", scheme, made, per,
	       worst / 1e3);
	printf("%s: timed phase: %.0f requests in %.3f s (%.2f us each): %" PRIu64 " arms "
	       "(%.5f per request), %" PRIu64 " sleeps (%.5f per request); %" PRIu64
	       " spurious, %" PRIu64 " recovered\n",
	       scheme, req, dt / 1e6, dt / req, arms, (double)arms / req, sleeps,
	       (double)sleeps / req, i1.spurious - i0.spurious, i1.recovered - i0.recovered);
	int bad = 0;
	if ((double)arms / req >= 0.01) {
		fprintf(stderr, "%s: arms / requests = %.5f, want < 0.01%s\n", scheme,
			(double)arms / req, enforce ? "" : " (report only)");
		bad += enforce;
	}
	if ((double)sleeps / req >= 0.01) {
		fprintf(stderr, "%s: sleeps / requests = %.5f, want < 0.01%s\n", scheme,
			(double)sleeps / req, enforce ? "" : " (report only)");
		bad += enforce;
	}
	server_stop(&s);
	printf("%s: %" PRIu64 " type-1 replies through zl_reply (no room to reserve)\n", scheme,
	       s.reserve_fallbacks);
	free(c);
	if (bad)
		FAIL("%s: the serving thread armed or slept per request under load", scheme);
	return 0;
}
