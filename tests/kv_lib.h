/* SPDX-License-Identifier: MIT */
/*
 * For the kv service tests: zl-kvd's service (src/kv/service.h) running
 * in this process on a thread, listening on a fresh URL of one transport.
 * Every service test takes the scheme as argv[1] ("shm", "tcp", "unix").
 */
#ifndef ZL_KV_LIB_H
#define ZL_KV_LIB_H

#include <pthread.h>

#include "kv_model.h"
#include "service.h"
#include "zipline_kv.h"

#define KVT_TMO 10000000 /* 10 s: any call taking longer is a failure */

struct kvt_server {
	struct zl_kvd *d;
	zl_server *srv;
	pthread_t th;
	char url[600];
};

static void *kvt_serve(void *arg)
{
	struct kvt_server *s = arg;
	int rc = zl_server_run(s->srv, -1);
	CHECKF(rc == 0, "zl_server_run: %s", zl_strerror(rc));
	return NULL;
}

static inline const char *kvt_scheme(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s shm|tcp|unix|rdma\n", argv[0]);
		tl_exit(T_EXIT_FAIL);
	}
	return argv[1];
}

/* Start a server on a fresh URL of scheme (exit 77 if the transport is
 * not built in); s->url is where clients connect. */
static inline void kvt_start(struct kvt_server *s, const char *scheme, uint64_t mem_limit)
{
	static int seq;
	char url[600];
	if (!strcmp(scheme, "tcp"))
		snprintf(url, sizeof(url), "tcp://127.0.0.1:0");
	else if (!strcmp(scheme, "unix"))
		snprintf(url, sizeof(url), "unix:///tmp/zlkv-%d-%d.sock", (int)getpid(), seq++);
	else
		snprintf(url, sizeof(url), "%s://zlkv-%d-%d", scheme, (int)getpid(), seq++);
	struct zl_kvd_opts o = { .mem_limit = mem_limit };
	CHECK_OK(zl_kvd_create(&o, &s->d));
	s->srv = zl_kvd_server(s->d);
	int rc = zl_server_listen(s->srv, url, NULL);
	if (rc == -EPROTONOSUPPORT)
		SKIP("transport %s is not built in", scheme);
	CHECKF(rc == 0, "zl_server_listen(%s): %s", url, zl_strerror(rc));
	CHECK_OK(zl_server_url(s->srv, 0, s->url, sizeof(s->url)));
	CHECK_OK(pthread_create(&s->th, NULL, kvt_serve, s));
}

static inline void kvt_stop(struct kvt_server *s)
{
	zl_server_stop(s->srv);
	CHECK_OK(pthread_join(s->th, NULL));
	zl_kvd_destroy(s->d);
}

static inline zl_kv *kvt_connect(const struct kvt_server *s)
{
	zl_kv *kv = NULL;
	int rc = zl_kv_connect(s->url, NULL, KVT_TMO, &kv);
	CHECKF(rc == 0, "zl_kv_connect(%s): %s", s->url, zl_strerror(rc));
	return kv;
}

/* ---- scans into an array ---------------------------------------------- */

struct kvt_rec {
	uint8_t key[ZL_KV_MAX_KEY];
	size_t klen, vlen;
	uint64_t vhash; /* of the value bytes */
	bool vok;       /* the value matched the model's pattern */
};

struct kvt_scan {
	struct kvt_rec *r;
	size_t n, cap, stop_at; /* the callback stops after stop_at (0: never) */
	const struct model *m;  /* if set: values checked against it */
};

static inline int kvt_scan_cb(const void *key, size_t klen, const void *val, size_t vlen,
			      void *arg)
{
	struct kvt_scan *sc = arg;
	CHECK(sc->n < sc->cap);
	struct kvt_rec *r = &sc->r[sc->n++];
	CHECK(klen >= 1 && klen <= ZL_KV_MAX_KEY);
	memcpy(r->key, key, klen);
	r->klen = klen;
	r->vlen = vlen;
	r->vok = false;
	if (sc->m) {
		struct mkey *mk = m_find((struct model *)sc->m, key, klen);
		r->vok = mk && mk->vlen == vlen && tl_verify(val, vlen, mk->vid) == (size_t)-1;
	}
	return sc->stop_at && sc->n == sc->stop_at;
}

#endif
