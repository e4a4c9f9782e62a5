/* SPDX-License-Identifier: MIT */
/*
 * For the one-sided store's tests: a zl_server with the one-sided store
 * (zl_kvos) serving on a thread of this process, on a fresh shm:// URL;
 * clients connect to s->url (store=onesided included). Child processes
 * forked after ost_start may connect too.
 */
#ifndef ZL_OS_LIB_H
#define ZL_OS_LIB_H

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "zipline.h"
#include "zipline_kv.h"

#define OST_TMO 10000000

struct ost_server {
	zl_server *srv;
	zl_kvos *os;
	pthread_t th;
	char url[640];   /* for zl_kv_connect */
	char plain[600]; /* the server's own URL (zl_client_connect) */
};

static void *ost_serve(void *arg)
{
	struct ost_server *s = arg;
	int rc = zl_server_run(s->srv, -1);
	CHECKF(rc == 0, "zl_server_run: %s", zl_strerror(rc));
	return NULL;
}

/* o NULL: defaults, except a 64 MiB data space of 1 MiB regions. */
static inline void ost_start(struct ost_server *s, const struct zl_kvos_opts *o)
{
	static int seq;
	struct zl_kvos_opts d;
	zl_kvos_opts_init(&d);
	d.mem = 64u << 20;
	d.region_len = 1u << 20;
	d.max_regions = 4;
	snprintf(s->plain, sizeof(s->plain), "shm://zlos-%d-%d", (int)getpid(), seq++);
	snprintf(s->url, sizeof(s->url), "%s?store=onesided", s->plain);
	CHECK_OK(zl_server_create(NULL, &s->srv));
	int rc = zl_kvos_create(s->srv, o ? o : &d, &s->os);
	CHECKF(rc == 0, "zl_kvos_create: %s", zl_strerror(rc));
	CHECK_OK(zl_server_listen(s->srv, s->plain, NULL));
	CHECK_OK(pthread_create(&s->th, NULL, ost_serve, s));
}

static inline void ost_stop(struct ost_server *s)
{
	zl_server_stop(s->srv);
	CHECK_OK(pthread_join(s->th, NULL));
	zl_kvos_close(s->os);
	zl_server_close(s->srv);
}

static inline zl_kv *ost_connect(const struct ost_server *s)
{
	zl_kv *kv = NULL;
	int rc = zl_kv_connect(s->url, NULL, OST_TMO, &kv);
	CHECKF(rc == 0, "zl_kv_connect(%s): %s", s->url, zl_strerror(rc));
	return kv;
}

#endif
