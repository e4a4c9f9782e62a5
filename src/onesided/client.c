/* SPDX-License-Identifier: MIT */
/*
 * The one-sided store's client: the session with the server (HELLO,
 * regions, heartbeats over zl_call) and the chunk's access method; the
 * operations themselves are table.c's.
 *
 * Regions and heartbeats (the Falafel thesis, sections 3.3 and 4.2.3). A SET builds
 * its container in the client's own region, bump-allocated, and asks for a
 * new region (giving the full one back) when it does not fit. The server
 * takes a client's regions back when it has not heard a heartbeat for
 * hb_window_us; heartbeats ride on calls (one every window/4), so an idle
 * client simply loses its regions and asks again later. Before it writes
 * a container and again before the CAS that publishes it, the client
 * checks that its lease (last heartbeat sent + window/2, measured on our
 * clock, which can only make it shorter than the server's) still holds,
 * and renews it if not; a session renewed since the SET began fails it
 * (its region may be gone). A process stopped right between a check and
 * the write or CAS resumes into a region the server quarantined (server.c:
 * an expired session's regions are not given out until its client speaks
 * or goes), so it never touches memory someone else was given. The
 * container is built in private memory: no one else's writes into our
 * region can steer the seal. zl_os_close ends the session (BYE).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "internal.h"
#include "onesided.h"
#include "os_proto.h"
#include "os_rdma.h"
#include "sockutil.h"
#include "table.h"
#include "url.h"

struct zl_os {
	zl_client *cli;
	struct os_table t;
	uint8_t *base; /* shm: the chunk mapped here */
	size_t map_len;
	struct os_rdma rd; /* rdma: rd.ch set */
	uint8_t *stage;    /* a SET builds its container here (private) */
	uint8_t *lstage;   /* OS_LANES of OS_LSTAGE: a batch's posted SETs' */
	uint64_t set_session; /* the session the SET under way began in */
	uint64_t session, seq;
	int64_t window_us, hb_sent, next_hb;
	uint64_t deletes; /* since the last heartbeat */
	uint64_t garbage_told;
	bool has_region;
	uint32_t region;
	uint64_t r_off, r_len, r_pos;
	int64_t rpc_timeout;
};

/* Heartbeats and leases on the coarse clock (a few ns instead of tens on
 * every call): it lags by at most a few ms, far inside the lease's margin
 * of window/2 (the window is at least 50 ms). */
static int64_t coarse_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- shm access ------------------------------------------------------------ */

static int shm_read(void *ctx, uint64_t off, void *dst, uint32_t len)
{
	struct zl_os *os = ctx;
	if (off < os->t.g.data_off) {
		/* table words and the cleanup sequence: each an atomic load */
		const uint64_t *src = (const uint64_t *)(os->base + off);
		uint64_t *d = dst;
		for (uint32_t i = 0; i < len / 8; i++)
			d[i] = __atomic_load_n(&src[i], __ATOMIC_ACQUIRE);
		return 0;
	}
	memcpy(dst, os->base + off, len);
	return 0;
}

static int shm_write(void *ctx, uint64_t off, const void *src, uint32_t len)
{
	struct zl_os *os = ctx;
	if (os->base + off != src)
		memcpy(os->base + off, src, len);
	return 0;
}

static int shm_cas(void *ctx, uint64_t off, uint64_t expect, uint64_t desired, uint64_t *old)
{
	struct zl_os *os = ctx;
	uint64_t *w = (uint64_t *)(os->base + off);
	__atomic_compare_exchange_n(w, &expect, desired, false, __ATOMIC_SEQ_CST,
				    __ATOMIC_SEQ_CST);
	*old = expect;
	return 0;
}

static int shm_sync(void *ctx)
{
	(void)ctx;
	return 0;
}

/* ---- session ------------------------------------------------------------- */

static int rpc(struct zl_os *os, int type, const void *req, size_t len, void *rep,
	       size_t replen)
{
	const void *p;
	size_t n;
	int rc = zl_call(os->cli, type, req, len, &p, &n, os->rpc_timeout);
	if (rc)
		return rc;
	if (n != replen) {
		ZL_LOG(ZL_LOG_ERROR, "onesided: reply of %zu bytes to request %d", n, type);
		return -EPROTO;
	}
	memcpy(rep, p, n);
	return 0;
}

/* Get the chunk's memfd through the server's abstract socket and map it. */
static int map_shm(struct zl_os *os, const struct os_hello_rep *h)
{
	char name[sizeof(h->sock)];
	memcpy(name, h->sock, sizeof(name));
	if (!memchr(name, 0, sizeof(name)) || !name[0])
		return -EPROTO;
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	size_t k = strlen(name);
	memcpy(a.sun_path + 1, name, k);
	int64_t deadline = zl_now_us() + 5000000;
	int32_t pid;
	int rc = connect(s, (struct sockaddr *)&a,
			 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + k));
	if (rc < 0)
		rc = -errno;
	if (!rc)
		rc = zl_check_peer_uid(s, 0, "onesided server", &pid);
	int fd = -1, nfd = 0;
	char ack[8];
	size_t got = 0;
	if (!rc)
		rc = zl_recv_fds(s, ack, sizeof(ack), &got, &fd, 1, &nfd, deadline);
	close(s);
	if (!rc && nfd != 1)
		rc = -EPROTO;
	if (!rc)
		rc = zl_memfd_check(fd, h->chunk_len);
	if (!rc) {
		void *m = mmap(NULL, h->chunk_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED)
			rc = -errno;
		else
			os->base = m, os->map_len = h->chunk_len;
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

static int hello(struct zl_os *os, struct os_hello_rep *h)
{
	struct os_hello_req q = { .magic = OS_MAGIC, .version = OS_VERSION };
	int64_t sent = coarse_us(); /* the lease runs from before the request */
	int rc = rpc(os, OS_HELLO, &q, sizeof(q), h, sizeof(*h));
	if (rc)
		return rc;
	if (h->magic != OS_MAGIC)
		return -EPROTO;
	if (h->status)
		return h->status < 0 ? h->status : -EPROTO;
	os->session = h->session;
	os->seq = 0;
	os->rd.win.addr = h->raddr; /* rdma: a new session, a new window */
	os->rd.win.rkey = h->rkey;
	ZL_LOG(ZL_LOG_DEBUG, "onesided: session %llu, window key %#x",
	       (unsigned long long)h->session, h->rkey);
	os->t.load = h->load_ppm / 1e6;
	os->window_us = (int64_t)h->hb_window_us;
	os->hb_sent = sent;
	os->next_hb = sent + os->window_us / 4;
	os->has_region = false;
	return 0;
}

static int renew(void *arg);

int zl_os_connect(const char *url, const struct zl_opts *opts, int64_t timeout_us,
		  struct zl_os **out)
{
	const char *plain = url; /* store= already taken off */
	struct zl_url u;
	int rc = zl_url_parse(plain, &u);
	if (rc)
		return -EINVAL;
	bool rdma = !strcmp(u.scheme, "rdma");
	if (strcmp(u.scheme, "shm") && !rdma) {
		ZL_LOG(ZL_LOG_ERROR, "onesided: %s:// is not supported (shm:// and rdma:// are)",
		       u.scheme);
		return -EPROTONOSUPPORT;
	}
	struct zl_os *os = calloc(1, sizeof(*os));
	if (!os)
		return -ENOMEM;
	os->rpc_timeout = timeout_us < 0 ? 5000000 : timeout_us;
	rc = zl_client_connect(plain, opts, timeout_us, &os->cli);
	if (rc) {
		free(os);
		return rc;
	}
	struct os_hello_rep h;
	struct os_geom g = { 0 };
	rc = hello(os, &h);
	if (!rc) {
		g = (struct os_geom){ .chunk_len = h.chunk_len, .table_off = h.table_off,
				      .nslots = h.nslots, .data_off = h.data_off,
				      .data_len = h.data_len, .region_len = h.region_len,
				      .nregions = h.nregions };
		rc = os_geom_check(&g);
	}
	if (!rc && !rdma)
		rc = map_shm(os, &h);
	struct os_io io = { shm_read, shm_write, shm_cas, shm_sync, os };
	if (!rc && !(rc = os_table_init(&os->t, &g, &io))) {
		os->t.load = h.load_ppm / 1e6;
		os->t.renew = renew;
		os->t.renew_arg = os;
	}
	if (!rc && rdma)
		rc = os_rdma_open(&os->rd, zl_client_channel(os->cli), &os->t, h.raddr, h.rkey);
	if (!rc && !(os->stage = rdma ? os->rd.stage : malloc(os_ct_size(ZL_KV_MAX_KEY,
									      ZL_KV_MAX_VAL))))
		rc = -ENOMEM;
	if (!rc && !(os->lstage = rdma ? os->rd.lstage : malloc((size_t)OS_LANES * OS_LSTAGE)))
		rc = -ENOMEM;
	if (rc) {
		ZL_LOG(ZL_LOG_ERROR, "onesided: connect %s: %s", plain, zl_strerror(rc));
		zl_os_close(os);
		return rc;
	}
	*out = os;
	return 0;
}

void zl_os_close(struct zl_os *os)
{
	if (!os)
		return;
	if (os->cli) { /* end the session: its regions are collected now */
		struct os_hb_rep r;
		os->rpc_timeout = 100000;
		(void)rpc(os, OS_BYE, "", 0, &r, sizeof(r));
	}
	if (os->rd.ops) {
		os_rdma_close(&os->rd); /* and the stages */
	} else {
		free(os->stage);
		free(os->lstage);
	}
	os_table_fini(&os->t);
	if (os->base)
		munmap(os->base, os->map_len);
	zl_client_close(os->cli);
	free(os);
}

/* Renew the lease; a session the server let expire starts over. */
static int heartbeat(struct zl_os *os)
{
	struct os_hb_req q = { .deletes = os->deletes };
	if (os->t.garbage != os->garbage_told) {
		q.garbage_slot = os->t.garbage_slot + 1;
		os->garbage_told = os->t.garbage;
	}
	struct os_hb_rep r;
	int64_t sent = coarse_us();
	int rc = rpc(os, OS_HEARTBEAT, &q, sizeof(q), &r, sizeof(r));
	if (rc)
		return rc;
	os->deletes = 0;
	os->t.load = r.load_ppm / 1e6;
	if (r.status == -ENOENT) {
		struct os_hello_rep h;
		return hello(os, &h);
	}
	if (r.status)
		return -EPROTO;
	os->hb_sent = sent;
	os->next_hb = sent + os->window_us / 4;
	return 0;
}

static int maybe_heartbeat(struct zl_os *os)
{
	return coarse_us() >= os->next_hb ? heartbeat(os) : 0;
}

/* table.c's renew: a heartbeat when one is due. A new session (the old
 * one expired) carries on: reads go through its window from now on. */
static int renew(void *arg)
{
	return maybe_heartbeat(arg);
}

/* Before a SET writes its container into our region, and before it
 * publishes it: the session it began in must still be ours (a renewal
 * meanwhile means that region may be someone else's now), and our lease
 * must hold, measured after any heartbeat made here (we may have been
 * stopped inside it). */
static int may_commit(void *arg)
{
	struct zl_os *os = arg;
	for (int k = 0; k < 3; k++) {
		if (os->session != os->set_session)
			return -ENOENT;
		if (coarse_us() < os->hb_sent + os->window_us / 2)
			return 0;
		int rc = heartbeat(os);
		if (rc)
			return rc;
	}
	return -EAGAIN;
}

/* Room for size bytes in our region: a fresh region when it is full;
 * while none is free (the collector is behind), ask again until the
 * call's deadline (-1: none). */
static int reserve_once(struct zl_os *os, uint64_t size);
static int reserve(struct zl_os *os, uint64_t size, int64_t deadline)
{
	for (uint32_t n = 0;; n++) {
		int rc = reserve_once(os, size);
		if (rc != -ENOSPC || (deadline >= 0 && zl_now_us() >= deadline))
			return rc;
		struct timespec ts = { 0, n < 10 ? 100000 : 1000000 };
		nanosleep(&ts, NULL);
	}
}

static int reserve_once(struct zl_os *os, uint64_t size)
{
	if (size > os->t.g.region_len)
		return -EMSGSIZE;
	if (os->has_region && os->r_len - os->r_pos >= size)
		return 0;
	struct os_region_req q = { .release = os->has_region ? os->region : OS_NONE,
				   .want = 1 };
	struct os_region_rep r;
	os->has_region = false;
	int rc = rpc(os, OS_REGION, &q, sizeof(q), &r, sizeof(r));
	if (rc)
		return rc;
	if (r.status == -ENOENT) {
		struct os_hello_rep h;
		return (rc = hello(os, &h)) ? rc : -EAGAIN;
	}
	if (r.status)
		return r.status < 0 && r.status != -EDQUOT ? r.status : -ENOSPC;
	const struct os_geom *g = &os->t.g;
	if (r.region >= g->nregions || r.off != g->data_off + (uint64_t)r.region * g->region_len ||
	    r.len != g->region_len)
		return -EPROTO;
	os->has_region = true;
	os->region = r.region;
	os->r_off = r.off;
	os->r_len = r.len;
	os->r_pos = 0;
	return 0;
}

/* A call's budget for restarts (table.c): its timeout, 1 s for none. */
static void budget(struct zl_os *os, int64_t timeout_us)
{
	os->t.budget_us = timeout_us < 0 ? 1000000 : timeout_us;
}


int zl_os_get(struct zl_os *os, const void *key, size_t klen, const void **val, size_t *vlen,
	      uint64_t *version, int64_t timeout_us)
{
	int rc = maybe_heartbeat(os);
	if (rc)
		return rc;
	const uint8_t *v;
	uint32_t n;
	budget(os, timeout_us);
	rc = os_get(&os->t, key, (uint32_t)klen, &v, &n, version);
	*val = v;
	*vlen = n;
	return rc;
}

int zl_os_put(struct zl_os *os, const void *key, size_t klen, const void *val, size_t vlen,
	      uint64_t expected, uint64_t *new_version, int64_t timeout_us)
{
	int64_t deadline = timeout_us < 0 ? -1 : zl_now_us() + timeout_us;
	budget(os, timeout_us);
	int rc = maybe_heartbeat(os);
	uint64_t size = os_ct_size(klen, vlen);
	/* a new session (expired, or its versions used up) or a region lost
	 * with it sends us round again; three rounds at most */
	for (int attempt = 0; !rc; attempt++) {
		if (attempt == 3)
			return -EAGAIN;
		if (os->seq == UINT32_MAX) {
			struct os_hello_rep h;
			rc = hello(os, &h);
			continue;
		}
		if ((rc = reserve(os, size, deadline)) == -EAGAIN) {
			rc = 0;
			continue;
		}
		if (rc)
			break;
		uint64_t ver = os->session << 32 | ++os->seq;
		uint64_t off = os->r_off + os->r_pos;
		/* built in private memory: nothing touches the region before
		 * the lease is checked, and nobody else's writes there can
		 * steer ours */
		struct os_wctx w = { .off = off, .local = os->stage, .version = ver,
				     .may_commit = may_commit, .arg = os };
		uint64_t session = os->session;
		os->set_session = session;
		rc = os_set(&os->t, key, (uint32_t)klen, val, (uint32_t)vlen, expected, &w);
		if (os->session == session && os->has_region)
			os->r_pos += size; /* written, published or not */
		if (rc == -ENOENT) { /* the session expired under us */
			rc = 0;
			continue;
		}
		if (!rc && new_version)
			*new_version = ver;
		return rc;
	}
	return rc;
}

int zl_os_del(struct zl_os *os, const void *key, size_t klen, int64_t timeout_us)
{
	int rc = maybe_heartbeat(os);
	budget(os, timeout_us);
	if (!rc && !(rc = os_del(&os->t, key, (uint32_t)klen)))
		os->deletes++;
	return rc;
}

/* One operation of a batch, its lane chosen. */
static int batch_one(struct zl_os *os, struct zl_kv_op *o, int64_t timeout_us)
{
	const void *v;
	size_t n;
	uint64_t ver;
	int rc;
	switch (o->op) {
	case ZL_KV_OP_GET:
		if (!(rc = zl_os_get(os, o->key, o->klen, &v, &n, &ver, timeout_us)))
			zl_kv_op_got(o, v, n, ver);
		else
			o->rc = rc;
		return o->rc;
	case ZL_KV_OP_PUT:
		return o->rc = zl_os_put(os, o->key, o->klen, o->val, o->vlen, UINT64_MAX,
					 &o->version, timeout_us);
	default:
		return o->rc = zl_os_del(os, o->key, o->klen, timeout_us);
	}
}

/* A batch's chunk of up to OS_LANES operations: the SETs and DELETEs
 * posted and not yet waited for. */
struct chunk {
	struct zl_kv_op *ops; /* the chunk's first */
	uint32_t n, idx[OS_LANES];
	struct os_post p[OS_LANES];
	uint64_t ver[OS_LANES];
	int64_t deadline;
};

static int64_t left_of(int64_t deadline)
{
	if (deadline < 0)
		return -1;
	int64_t l = deadline - zl_now_us();
	return l > 0 ? l : 0;
}

/* Whether a SET of o can be posted: its container fits a lane's stage and
 * the region as it is (a new region gives the full one back, and a new
 * session quarantines it: not with writes in flight). */
static bool postable(const struct zl_os *os, const struct zl_kv_op *o)
{
	uint64_t size = os_ct_size(o->klen, o->vlen);
	return o->op == ZL_KV_OP_DEL ||
	       (size <= OS_LSTAGE && os->seq < UINT32_MAX && os->has_region &&
		os->r_len - os->r_pos >= size);
}

/* Post c->ops[i], a SET or DELETE: OS_POSTED, OS_UNPOSTED, or its result. */
static int post_one(struct zl_os *os, struct chunk *c, uint32_t i)
{
	struct zl_kv_op *o = &c->ops[i];
	struct os_post *p = &c->p[c->n];
	int rc;
	if (o->op == ZL_KV_OP_DEL) {
		rc = os_del_post(&os->t, o->key, (uint32_t)o->klen, p);
	} else {
		uint64_t size = os_ct_size(o->klen, o->vlen), session = os->session;
		c->ver[c->n] = session << 32 | ++os->seq;
		struct os_wctx w = { .off = os->r_off + os->r_pos,
				     .local = os->lstage + (size_t)i * OS_LSTAGE,
				     .version = c->ver[c->n], .may_commit = may_commit, .arg = os };
		os->set_session = session;
		rc = os_set_post(&os->t, o->key, (uint32_t)o->klen, o->val, (uint32_t)o->vlen, &w, p);
		if (os->session == session && os->has_region)
			os->r_pos += size; /* written, published or not */
		if (rc == -ENOENT)
			rc = OS_UNPOSTED; /* the session expired under us */
	}
	if (rc == OS_POSTED)
		c->idx[c->n++] = i;
	return rc;
}

/* Wait for what is posted; a SET or DELETE whose CAS lost to another
 * change runs again alone. 0, or the first error (in the rc of those it
 * left unknown). */
static int flush(struct zl_os *os, struct chunk *c)
{
	if (!c->n)
		return 0;
	uint32_t n = c->n;
	c->n = 0;
	os->t.batch.syncs++;
	int rc = os->t.io.sync(os->t.io.ctx);
	for (uint32_t k = 0; k < n; k++) {
		struct zl_kv_op *o = &c->ops[c->idx[k]];
		bool del = o->op == ZL_KV_OP_DEL;
		if (rc) {
			o->rc = rc;
		} else if (c->p[k].old == c->p[k].expect) {
			o->rc = 0;
			if (del)
				os->deletes++;
			else
				o->version = c->ver[k];
		} else {
			struct os_counts *cnt = del ? &os->t.del : &os->t.set;
			cnt->ops--; /* counted again as a single call */
			cnt->retries++;
			os_lane(&os->t, c->idx[k], false);
			int r = batch_one(os, o, left_of(c->deadline));
			os_lane(&os->t, 0, false);
			if (!zl_kv_op_outcome(r))
				rc = r;
		}
	}
	return rc;
}

static bool pending_key(const struct chunk *c, const struct zl_kv_op *o)
{
	for (uint32_t k = 0; k < c->n; k++)
		if (zl_kv_same_key(&c->ops[c->idx[k]], o))
			return true;
	return false;
}

/* Operation i of the chunk, its first reads done: GETs (and SETs too large
 * to post) run as single calls from their lanes; SETs and DELETEs are
 * posted, waited for together. 0 or the error that stops the batch. */
static int chunk_op(struct zl_os *os, struct chunk *c, uint32_t i)
{
	struct zl_kv_op *o = &c->ops[i];
	int rc = 0;
	/* the same key in flight, or a SET that may change regions: wait
	 * (and look at the region after: a SET run again there may have
	 * changed it) */
	if (pending_key(c, o) || (o->op == ZL_KV_OP_PUT && !postable(os, o)))
		rc = flush(os, c);
	if (rc)
		return rc;
	bool post = o->op != ZL_KV_OP_GET && postable(os, o);
	os_lane(&os->t, i, !zl_kv_after_write(c->ops, 0, i));
	rc = post ? post_one(os, c, i) : OS_UNPOSTED;
	if (rc == OS_UNPOSTED)
		rc = batch_one(os, o, left_of(c->deadline));
	else if (rc != OS_POSTED)
		o->rc = rc;
	os_lane(&os->t, 0, false);
	return rc == OS_POSTED || zl_kv_op_outcome(rc) ? 0 : rc;
}

int zl_os_batch(struct zl_os *os, struct zl_kv_op *ops, size_t n, int64_t timeout_us)
{
	struct chunk c = { .deadline = timeout_us < 0 ? -1 : zl_now_us() + timeout_us };
	os->t.batch.ops++;
	for (size_t at = 0; at < n; at += OS_LANES) {
		uint32_t m = n - at < OS_LANES ? (uint32_t)(n - at) : OS_LANES;
		struct os_key k[OS_LANES];
		for (uint32_t i = 0; i < m; i++)
			k[i] = (struct os_key){ ops[at + i].key, (uint32_t)ops[at + i].klen };
		c.ops = ops + at;
		int rc = maybe_heartbeat(os);
		if (!rc)
			rc = os_prime(&os->t, k, m);
		if (rc) { /* only reads were sent */
			zl_kv_op_cancel(ops, at, n);
			return rc;
		}
		uint32_t i = 0;
		for (; i < m && !rc; i++) {
			if (c.deadline >= 0 && zl_now_us() >= c.deadline) {
				rc = -ETIMEDOUT;
				break;
			}
			rc = chunk_op(os, &c, i);
		}
		int frc = flush(os, &c); /* what is in flight, even after an error */
		if (!rc)
			rc = frc;
		if (rc) {
			zl_kv_op_cancel(ops, at + i, n);
			return rc;
		}
	}
	return 0;
}

int zl_os_cas(struct zl_os *os, uint64_t off, uint64_t *expect, uint64_t desired)
{
	int rc = maybe_heartbeat(os);
	uint64_t old = 0;
	if (!rc && !(rc = os->t.io.cas(os->t.io.ctx, off, *expect, desired, &old)))
		rc = os->t.io.sync(os->t.io.ctx);
	if (rc)
		return rc;
	bool ok = old == *expect;
	*expect = old;
	return ok;
}

static void count(struct zl_kv_opcount *o, const struct os_counts *c)
{
	*o = (struct zl_kv_opcount){ .calls = c->ops, .reads = c->reads, .writes = c->writes,
				     .atomics = c->cas, .round_trips = c->syncs,
				     .probes = c->probes, .retries = c->retries };
}

void zl_os_info(const struct zl_os *os, struct zl_kv_info *info)
{
	info->onesided = 1;
	count(&info->get, &os->t.get);
	count(&info->set, &os->t.set);
	count(&info->del, &os->t.del);
	info->garbage = os->t.garbage;
	count(&info->batch, &os->t.batch);
}
