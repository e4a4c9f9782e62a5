/* SPDX-License-Identifier: MIT */
/* zl-kvd's service on a zl_server (service.h). */
#include "service.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "exec.h"

struct zl_kvd {
	zl_server *srv;
	struct zl_kvx x;
	uint8_t *scratch; /* replies that do not fit the client's ring now */
	size_t scap;
};

/* A reply under construction: in the client's ring when it fits there
 * (one copy of the value), else in scratch and sent with zl_reply. */
struct out {
	struct zl_kvx_out base;
	struct zl_kvd *d;
	zl_req *req;
	bool in_ring;
};

static void *out_reserve(struct zl_kvx_out *o_, size_t len)
{
	struct out *o = (struct out *)o_;
	void *p;
	if (!zl_reply_reserve(o->req, len, &p)) {
		o->in_ring = true;
		return p;
	}
	struct zl_kvd *d = o->d;
	if (len > d->scap) {
		uint8_t *n = realloc(d->scratch, len);
		if (!n)
			return NULL;
		d->scratch = n;
		d->scap = len;
	}
	return d->scratch;
}

static int handle(zl_req *req, void *arg)
{
	struct zl_kvd *d = arg;
	size_t len;
	const void *data = zl_req_data(req, &len);
	struct out o = { .base.reserve = out_reserve, .d = d, .req = req };
	long n = zl_kvx_exec(&d->x, zl_req_type(req), data, len, &o.base);
	if (n < 0)
		return zl_reply_error(req, (int)n); /* -EBADMSG, -ENOMEM */
	if (o.in_ring)
		return zl_reply_commit(req, (size_t)n);
	int rc = zl_reply(req, d->scratch, (size_t)n);
	if (rc == -EMSGSIZE) /* beyond the client's max_msg */
		rc = zl_reply_error(req, rc);
	return rc;
}

static size_t server_stats(void *arg, char *buf, size_t cap)
{
	struct zl_kvd *d = arg;
	struct zl_server_info in;
	if (zl_server_info(d->srv, &in))
		return 0;
	int k = snprintf(buf, cap,
			 " clients=%" PRIu64 " clients_total=%" PRIu64 " clients_dropped=%" PRIu64
			 " requests=%" PRIu64 " rejected=%" PRIu64 " spurious=%" PRIu64
			 " recovered=%" PRIu64 " sleeps=%" PRIu64,
			 in.clients, in.clients_total, in.clients_dropped, in.requests, in.rejected,
			 in.spurious, in.recovered, in.sleeps);
	return k < 0 ? 0 : (size_t)k >= cap ? cap - 1 : (size_t)k;
}

int zl_kvd_create(const struct zl_kvd_opts *o, struct zl_kvd **out)
{
	if (!o || !out)
		return -EINVAL;
	struct zl_server_opts so;
	zl_server_opts_init(&so);
	if (o->server) {
		so = *o->server;
	} else {
		so.max_req = ZL_KVP_MAX_REQ;
		so.slot_size = ZL_KVD_SLOT_SIZE;
	}
	if (so.max_req < ZL_KVP_MAX_REQ)
		return -EINVAL;
	uint64_t seed = o->seed;
	if (!seed && getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed))
		seed = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ (uintptr_t)&seed;
	struct zl_kvd *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	/* room for any status reply up front: a write, once applied, always
	 * gets its answer */
	d->scap = 4096;
	d->scratch = malloc(d->scap);
	int rc = d->scratch ? zl_kvs_create(o->mem_limit, seed, &d->x.store) : -ENOMEM;
	if (!rc)
		rc = zl_server_create(&so, &d->srv);
	for (int t = ZL_KVP_GET; !rc && t < ZL_KVP_NOPS; t++)
		rc = zl_server_handle(d->srv, t, handle, d);
	if (rc) {
		zl_kvd_destroy(d);
		return rc;
	}
	d->x.stats_extra = server_stats;
	d->x.stats_arg = d;
	*out = d;
	return 0;
}

zl_server *zl_kvd_server(struct zl_kvd *d) { return d ? d->srv : NULL; }

size_t zl_kvd_stats(struct zl_kvd *d, char *buf, size_t cap)
{
	return zl_kvx_stats_text(&d->x, buf, cap);
}

void zl_kvd_destroy(struct zl_kvd *d)
{
	if (!d)
		return;
	zl_server_close(d->srv);
	zl_kvs_destroy(d->x.store);
	free(d->scratch);
	free(d);
}
