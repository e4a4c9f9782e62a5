/* SPDX-License-Identifier: MIT */
/*
 * The one-sided store's server: the chunk (a sealed memfd, handed to
 * clients of our uid through an abstract socket), sessions and regions
 * (HELLO, REGION, HEARTBEAT, STATS on a zl_server), and the collector
 * thread (gc.c). Clients are not trusted: requests are taken only at their
 * exact size, a region is given back only by its holder, a client holds at
 * most max_regions, sessions are bounded by max_clients, and two regions
 * always stay for the collector.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "internal.h"
#include "os_server.h"
#include "sockutil.h"


ZL_API void zl_kvos_opts_init(struct zl_kvos_opts *o)
{
	if (!o)
		return;
	*o = (struct zl_kvos_opts){ .size = sizeof(*o), .mem = 256u << 20, .region_len = 4u << 20,
				      .hb_window_us = 5000000, .max_regions = 2,
				      .max_clients = 1024 };
}

static struct os_sess *sess_find(struct zl_kvos *s, uint64_t client)
{
	for (uint32_t i = 0; i < s->o.max_clients; i++)
		if (s->sess[i].client == client)
			return &s->sess[i];
	return NULL;
}

/* A slot for client id's new session: one without a window, or the one
 * whose window is id's own (its expired session's: id is in this call, so
 * it uses the old window no more). Never a slot whose window another
 * client's expired session kept: that client may be reading through it
 * right now, and closing it would fail its queue pair (-ECONNRESET). Such
 * a window goes when its client speaks again or its connection ends. */
static struct os_sess *free_slot(struct zl_kvos *s, uint64_t id)
{
	struct os_sess *any = NULL;
	for (uint32_t i = 0; i < s->o.max_clients; i++) {
		struct os_sess *c = &s->sess[i];
		if (c->client)
			continue;
		if (c->win && c->win_client == id)
			return c;
		if (!c->win && !any)
			any = c;
	}
	return any;
}

void os_sess_drop(struct zl_kvos *s, struct os_sess *c, bool expired)
{
	if (c->win && !expired) {
		s->ops->win_close(c->win);
		c->win = NULL;
	}
	for (uint32_t i = 0; i < c->nheld; i++) {
		s->rstate[c->held[i]] = R_COLLECT;
		s->rquar[c->held[i]] = expired ? c->client : 0;
	}
	c->nheld = 0;
	c->client = 0;
}

/* The client spoke (or its connection ended): whatever it was doing in
 * the regions of its expired session is over, so they may be given out
 * again once collected once more (a late CAS may point into them). */
static void unquarantine(struct zl_kvos *s, uint64_t client)
{
	for (uint32_t r = 0; r < s->g.nregions; r++) {
		if (s->rquar[r] != client)
			continue;
		s->rquar[r] = 0;
		if (s->rstate[r] == R_QUAR)
			s->rstate[r] = R_COLLECT;
	}
}

static const void *req_exact(zl_req *req, size_t want)
{
	size_t n;
	const void *p = zl_req_data(req, &n);
	return n == want ? p : NULL;
}

/* rdma: open the chunk to the client's connection (read, write, CAS),
 * registering it on that connection's device first if it is new. Under
 * mu. */
static int open_window(struct zl_kvos *s, zl_channel *ch, struct os_sess *c,
		       struct os_hello_rep *r)
{
	if (s->g.chunk_len > UINT32_MAX)
		return -EMSGSIZE; /* windows are up to 4 GiB */
	s->ops = ch->os;
	struct zl_rwin d;
	int rc = -EXDEV;
	for (int i = 0; i < 4 && rc == -EXDEV; i++) {
		if (!s->rm[i] && (rc = ch->os->reg(ch, s->base, s->g.chunk_len, &s->rm[i])))
			return rc;
		rc = ch->os->win_open(ch, s->rm[i], s->base, (uint32_t)s->g.chunk_len,
				      ZL_WIN_READ | ZL_WIN_WRITE | ZL_WIN_ATOMIC, &c->win, &d);
	}
	if (rc)
		return rc;
	if (!ch->os->atomic_glob(ch) && !atomic_load(&s->devcas)) {
		/* our CASes through the device from now on: over a connection
		 * of our own to an rdma listener of ours (gc.c makes it) */
		for (int i = 0; i < 8 && !s->loop_url[0]; i++) {
			char u[sizeof(s->loop_url)];
			if (zl_server_url(s->srv, i, u, sizeof(u)))
				break;
			if (!strncmp(u, "rdma://", 7))
				memcpy(s->loop_url, u, sizeof(u));
		}
		ZL_LOG(ZL_LOG_INFO, "onesided: the device's atomics are not atomic with the CPU's "
		       "(no IBV_ATOMIC_GLOB): the server CASes through %s", s->loop_url);
		atomic_store(&s->devcas, true);
	}
	c->ch = ch;
	c->win_client = c->client;
	r->raddr = d.addr;
	r->rkey = d.rkey;
	return 0;
}

static int on_hello(zl_req *req, void *arg)
{
	struct zl_kvos *s = arg;
	const struct os_hello_req *q = req_exact(req, sizeof(*q));
	if (!q || q->magic != OS_MAGIC)
		return -EBADMSG;
	struct os_hello_rep r = { .magic = OS_MAGIC, .nregions = s->g.nregions,
				  .chunk_len = s->g.chunk_len, .table_off = s->g.table_off,
				  .nslots = s->g.nslots, .data_off = s->g.data_off,
				  .data_len = s->g.data_len, .region_len = s->g.region_len,
				  .hb_window_us = (uint64_t)s->o.hb_window_us };
	memcpy(r.sock, s->sockname, sizeof(r.sock));
	uint64_t id = zl_req_client(req);
	pthread_mutex_lock(&s->mu);
	unquarantine(s, id);
	struct os_sess *c = sess_find(s, id);
	if (c)
		os_sess_drop(s, c, false); /* a new session starts clean */
	c = free_slot(s, id);
	if (!c) {
		r.status = -EUSERS;
	} else {
		if (c->win) /* our own expired session's, kept until now (gc.c) */
			s->ops->win_close(c->win);
		*c = (struct os_sess){ .client = id, .session = ++s->next_session,
				       .last_hb = zl_now_us() };
		zl_channel *ch = zl_req_channel(req);
		r.status = ch->os ? open_window(s, ch, c, &r) : 0;
		if (r.status)
			c->client = 0;
		r.session = c->session;
		r.load_ppm = s->load_ppm;
	}
	pthread_mutex_unlock(&s->mu);
	return zl_reply(req, &r, sizeof(r));
}

static int on_region(zl_req *req, void *arg)
{
	struct zl_kvos *s = arg;
	const struct os_region_req *q = req_exact(req, sizeof(*q));
	if (!q)
		return -EBADMSG;
	uint32_t release = q->release, want = q->want; /* read once: shm */
	struct os_region_rep r = { .region = OS_NONE };
	pthread_mutex_lock(&s->mu);
	unquarantine(s, zl_req_client(req));
	struct os_sess *c = sess_find(s, zl_req_client(req));
	if (!c) {
		r.status = -ENOENT;
		goto out;
	}
	c->last_hb = zl_now_us();
	for (uint32_t i = 0; release != OS_NONE && i < c->nheld; i++) {
		if (c->held[i] == release) {
			s->rstate[release] = R_COLLECT;
			c->held[i] = c->held[--c->nheld];
			break;
		}
	}
	if (want != 1)
		goto out;
	if (c->nheld >= s->o.max_regions) {
		r.status = -EDQUOT;
		goto out;
	}
	r.status = -ENOSPC;
	for (uint32_t i = 0; s->nfree > RESERVE && i < s->g.nregions; i++) {
		if (s->rstate[i] != R_FREE)
			continue;
		s->rstate[i] = R_CLIENT;
		s->nfree--;
		c->held[c->nheld++] = i;
		r = (struct os_region_rep){ .region = i,
					    .off = s->g.data_off + (uint64_t)i * s->g.region_len,
					    .len = s->g.region_len };
		break;
	}
out:
	pthread_mutex_unlock(&s->mu);
	return zl_reply(req, &r, sizeof(r));
}

static int on_heartbeat(zl_req *req, void *arg)
{
	struct zl_kvos *s = arg;
	const struct os_hb_req *q = req_exact(req, sizeof(*q));
	if (!q)
		return -EBADMSG;
	uint64_t deletes = q->deletes, garbage = q->garbage_slot;
	struct os_hb_rep r = { 0 };
	pthread_mutex_lock(&s->mu);
	unquarantine(s, zl_req_client(req));
	struct os_sess *c = sess_find(s, zl_req_client(req));
	if (!c) {
		r.status = -ENOENT;
	} else {
		c->last_hb = zl_now_us();
		s->deletes_told += deletes < s->g.nslots ? deletes : s->g.nslots;
		if (garbage && garbage <= s->g.nslots && s->nrepair < OS_REPAIRS)
			s->repair[s->nrepair++] = garbage - 1;
	}
	r.load_ppm = s->load_ppm;
	pthread_mutex_unlock(&s->mu);
	return zl_reply(req, &r, sizeof(r));
}

static int on_bye(zl_req *req, void *arg)
{
	struct zl_kvos *s = arg;
	struct os_hb_rep r = { .status = -ENOENT };
	pthread_mutex_lock(&s->mu);
	unquarantine(s, zl_req_client(req));
	struct os_sess *c = sess_find(s, zl_req_client(req));
	if (c) {
		os_sess_drop(s, c, false);
		r.status = 0;
	}
	pthread_mutex_unlock(&s->mu);
	return zl_reply(req, &r, sizeof(r));
}

/* The client's connection is going: close its window while the queue pair
 * it is bound to still exists, and collect its regions. */
static void on_drop(uint64_t client, void *arg)
{
	struct zl_kvos *s = arg;
	pthread_mutex_lock(&s->mu);
	unquarantine(s, client);
	for (uint32_t i = 0; i < s->o.max_clients; i++) {
		struct os_sess *c = &s->sess[i];
		if (c->client == client) {
			os_sess_drop(s, c, false);
			s->st.dropped++;
		}
		if (c->win && c->win_client == client) {
			s->ops->win_close(c->win);
			c->win = NULL;
		}
	}
	pthread_mutex_unlock(&s->mu);
}

static int on_stats(zl_req *req, void *arg)
{
	struct zl_kvos *s = arg;
	pthread_mutex_lock(&s->mu);
	struct os_stats_rep r = s->st;
	r.regions_free = s->nfree;
	r.regions_client = r.regions_server = r.quarantined = 0;
	for (uint32_t i = 0; i < s->g.nregions; i++) {
		r.regions_client += s->rstate[i] == R_CLIENT;
		r.regions_server += s->rstate[i] == R_SRV_CUR || s->rstate[i] == R_SRV_FULL;
		r.quarantined += s->rstate[i] == R_QUAR || s->rquar[i];
	}
	r.clients = 0;
	for (uint32_t i = 0; i < s->o.max_clients; i++)
		r.clients += s->sess[i].client != 0;
	pthread_mutex_unlock(&s->mu);
	return zl_reply(req, &r, sizeof(r));
}

/* ---- setup ---------------------------------------------------------------- */

static uint64_t pow2_at_least(uint64_t x)
{
	uint64_t p = 1024;
	while (p < x)
		p <<= 1;
	return p;
}

static int make_geom(const struct zl_kvos_opts *o, struct os_geom *g)
{
	if (!o->region_len || o->region_len % OS_UNIT || o->mem < 2 * o->region_len ||
	    o->hb_window_us < 50000 || !o->max_regions || o->max_regions > OS_MAX_HELD ||
	    !o->max_clients || o->max_clients > 65536)
		return -EINVAL;
	if (o->nslots && (o->nslots & (o->nslots - 1)))
		return -EINVAL;
	uint64_t nslots = o->nslots ? o->nslots : pow2_at_least(o->mem / 256);
	uint64_t nregions = o->mem / o->region_len;
	if (nregions < RESERVE + 1 || nregions > UINT32_MAX / 2)
		return -EINVAL;
	g->table_off = 4096;
	g->nslots = nslots;
	g->data_off = (g->table_off + nslots * 8 + 4095) & ~4095ull;
	g->region_len = o->region_len;
	g->nregions = (uint32_t)nregions;
	g->data_len = nregions * o->region_len;
	g->chunk_len = g->data_off + g->data_len;
	return os_geom_check(g) ? -EINVAL : 0;
}

static int listen_side(struct zl_kvos *s)
{
	uint8_t rnd[8];
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		return -EIO;
	snprintf(s->sockname, sizeof(s->sockname), "zipline-os/%d-%02x%02x%02x%02x%02x%02x%02x%02x",
		 (int)getpid(), rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	s->lsock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->lsock < 0)
		return -errno;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	size_t k = strlen(s->sockname);
	memcpy(a.sun_path + 1, s->sockname, k);
	if (bind(s->lsock, (struct sockaddr *)&a,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + k)) < 0 ||
	    listen(s->lsock, 64) < 0)
		return -errno;
	return 0;
}

ZL_API int zl_kvos_create(zl_server *srv, const struct zl_kvos_opts *opts, zl_kvos **out)
{
	struct zl_kvos_opts o;
	zl_kvos_opts_init(&o);
	if (opts && opts->size < sizeof(o))
		return -EINVAL;
	if (opts)
		o = *opts;
	struct os_geom g = { 0 };
	if (!srv || !out || make_geom(&o, &g))
		return -EINVAL;
	struct zl_kvos *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->srv = srv;
	s->o = o;
	s->g = g;
	s->memfd = s->lsock = -1;
	s->base = MAP_FAILED;
	pthread_mutex_init(&s->mu, NULL);
	s->rstate = calloc(g.nregions, 1);
	s->rents = calloc(g.nregions, sizeof(uint64_t));
	s->rcopied = calloc(g.nregions, sizeof(uint64_t));
	s->rquar = calloc(g.nregions, sizeof(uint64_t));
	s->sess = calloc(o.max_clients, sizeof(*s->sess));
	s->buf = malloc(os_ct_size(ZL_KV_MAX_KEY, ZL_KV_MAX_VAL));
	s->nfree = g.nregions;
	int rc = 0;
	if (!s->rstate || !s->rents || !s->rcopied || !s->rquar || !s->sess || !s->buf)
		rc = -ENOMEM;
	if (!rc && (s->memfd = zl_memfd_sealed("zipline-onesided", g.chunk_len)) < 0)
		rc = s->memfd;
	if (!rc) {
		s->base = mmap(NULL, g.chunk_len, PROT_READ | PROT_WRITE, MAP_SHARED, s->memfd, 0);
		if (s->base == MAP_FAILED)
			rc = -errno;
	}
	if (!rc)
		rc = listen_side(s);
	if (!rc) {
		zl_server_handle(srv, OS_HELLO, on_hello, s);
		zl_server_handle(srv, OS_REGION, on_region, s);
		zl_server_handle(srv, OS_HEARTBEAT, on_heartbeat, s);
		zl_server_handle(srv, OS_STATS, on_stats, s);
		zl_server_handle(srv, OS_BYE, on_bye, s);
		zl_server_on_drop(srv, on_drop, s);
		rc = -pthread_create(&s->thr, NULL, os_collector, s);
	}
	if (rc) {
		ZL_LOG(ZL_LOG_ERROR, "onesided: server setup: %s", zl_strerror(rc));
		s->thr = 0;
		zl_kvos_close(s);
		return rc;
	}
	ZL_LOG(ZL_LOG_INFO, "onesided: %u regions of %llu bytes, %llu slots, heartbeat %lld us",
	       g.nregions, (unsigned long long)g.region_len, (unsigned long long)g.nslots,
	       (long long)o.hb_window_us);
	*out = s;
	return 0;
}

ZL_API void zl_kvos_close(zl_kvos *s)
{
	if (!s)
		return;
	if (s->thr) {
		atomic_store(&s->stop, true);
		pthread_join(s->thr, NULL);
	}
	for (int t = OS_HELLO; t <= OS_BYE; t++)
		zl_server_handle(s->srv, t, NULL, NULL);
	zl_server_on_drop(s->srv, NULL, NULL);
	for (uint32_t i = 0; s->sess && i < s->o.max_clients; i++)
		if (s->sess[i].win)
			s->ops->win_close(s->sess[i].win);
	for (int i = 0; i < 4; i++)
		if (s->rm[i])
			s->ops->dereg(s->rm[i]);
	if (s->base != MAP_FAILED)
		munmap(s->base, s->g.chunk_len);
	if (s->memfd >= 0)
		close(s->memfd);
	if (s->lsock >= 0)
		close(s->lsock);
	pthread_mutex_destroy(&s->mu);
	free(s->rstate);
	free(s->rents);
	free(s->rcopied);
	free(s->rquar);
	free(s->sess);
	free(s->buf);
	free(s);
}
