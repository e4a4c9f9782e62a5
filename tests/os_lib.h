/* SPDX-License-Identifier: MIT */
/*
 * For the one-sided store's tests: a zl_server with the one-sided store
 * (zl_kvos) serving on a thread of this process, on a fresh shm:// URL;
 * clients connect to s->url (store=onesided included). Fork client
 * processes before ost_start: a fork while the server's threads run can
 * leave a child blocked on a lock one of them held (seen in ASan's
 * allocator); children wait for s->url in shared memory.
 */
#ifndef ZL_OS_LIB_H
#define ZL_OS_LIB_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <stddef.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "os_proto.h"
#include "sockutil.h"
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

/* The transport: shm, or rdma when ZL_OS_TEST_SCHEME=rdma (the VM suite:
 * the server listens on ZL_TEST_URL_rdma, clients add
 * ZL_TEST_CONNECT_rdma to the URL it bound). */
static inline bool ost_rdma(void)
{
	const char *e = getenv("ZL_OS_TEST_SCHEME");
	return e && !strcmp(e, "rdma");
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
	char listen[600];
	const char *rurl = getenv("ZL_TEST_URL_rdma"), *rcon = getenv("ZL_TEST_CONNECT_rdma");
	if (ost_rdma() && !rurl)
		SKIP("ZL_OS_TEST_SCHEME=rdma without ZL_TEST_URL_rdma (the VM suite sets it)");
	if (ost_rdma())
		snprintf(listen, sizeof(listen), "%s", rurl);
	else
		snprintf(listen, sizeof(listen), "shm://zlos-%d-%d", (int)getpid(), seq++);
	CHECK_OK(zl_server_create(NULL, &s->srv));
	int rc = zl_kvos_create(s->srv, o ? o : &d, &s->os);
	CHECKF(rc == 0, "zl_kvos_create: %s", zl_strerror(rc));
	rc = zl_server_listen(s->srv, listen, NULL);
	if (rc == -EPROTONOSUPPORT)
		SKIP("%s is not built in", listen);
	CHECKF(rc == 0, "zl_server_listen(%s): %s", listen, zl_strerror(rc));
	CHECK_OK(zl_server_url(s->srv, 0, s->plain, sizeof(s->plain)));
	if (ost_rdma() && rcon) { /* the client's own device and options */
		char *q = strchr(s->plain, '?');
		if (q)
			*q = 0;
		size_t n = strlen(s->plain);
		snprintf(s->plain + n, sizeof(s->plain) - n, "?%s", rcon);
	}
	snprintf(s->url, sizeof(s->url), "%s%sstore=onesided", s->plain,
		 strchr(s->plain, '?') ? "&" : "?");
	CHECK_OK(pthread_create(&s->th, NULL, ost_serve, s));
}

static inline void ost_stop(struct ost_server *s)
{
	zl_server_stop(s->srv);
	CHECK_OK(pthread_join(s->th, NULL));
	zl_kvos_close(s->os);
	zl_server_close(s->srv);
}

/* The server's counters (OS_STATS) through cli, a zl_client connected to
 * s->plain. */
static inline struct os_stats_rep ost_stats(zl_client *cli)
{
	const void *p;
	size_t n;
	struct os_stats_rep r;
	int rc = zl_call(cli, OS_STATS, "", 0, &p, &n, OST_TMO);
	CHECKF(rc == 0 && n == sizeof(r), "STATS: %s, %zu bytes", zl_strerror(rc), n);
	memcpy(&r, p, sizeof(r));
	return r;
}

/* A raw session, as a client that does not play by the rules would open
 * one: HELLO on cli, then the chunk's memfd from the server's abstract
 * socket (as src/onesided/client.c does), mapped with prot. */
static inline uint8_t *ost_map_chunk(zl_client *cli, struct os_hello_rep *h, int prot)
{
	struct os_hello_req q = { .magic = OS_MAGIC, .version = OS_VERSION };
	const void *p;
	size_t n;
	CHECK_OK(zl_call(cli, OS_HELLO, &q, sizeof(q), &p, &n, OST_TMO));
	CHECKF(n == sizeof(*h), "HELLO reply of %zu bytes", n);
	memcpy(h, p, n);
	CHECK(h->magic == OS_MAGIC && h->status == 0);
	CHECK(memchr(h->sock, 0, sizeof(h->sock)) && h->sock[0]);
	int sk = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	CHECK(sk >= 0);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	size_t k = strlen(h->sock);
	memcpy(a.sun_path + 1, h->sock, k);
	CHECK(connect(sk, (struct sockaddr *)&a,
		      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + k)) == 0);
	int fd = -1, nfd = 0;
	char ack[8];
	size_t got;
	CHECK_OK(zl_recv_fds(sk, ack, sizeof(ack), &got, &fd, 1, &nfd, tl_now_us() + 5000000));
	close(sk);
	CHECK(nfd == 1);
	uint8_t *m = mmap(NULL, h->chunk_len, prot, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED);
	close(fd);
	return m;
}

static inline zl_kv *ost_connect(const struct ost_server *s)
{
	zl_kv *kv = NULL;
	int rc = zl_kv_connect(s->url, NULL, OST_TMO, &kv);
	CHECKF(rc == 0, "zl_kv_connect(%s): %s", s->url, zl_strerror(rc));
	return kv;
}

/* ---- values that name their writer (os_gc, os_hostile) --------------------
 * The seq-th value a writer wrote for key: a header, then a pattern seeded
 * by (key, seq), of a length (up to maxv) that also follows from them, so
 * a torn, stale-mixed or foreign value is told from the real one. */
struct ost_vhdr {
	uint32_t magic, key, writer, len;
	uint64_t seq;
};

static inline uint32_t ost_vlen(uint32_t key, uint64_t seq, uint32_t maxv)
{
	uint64_t s = (uint64_t)key << 40 ^ seq;
	return (uint32_t)(sizeof(struct ost_vhdr) +
			  tl_splitmix(&s) % (maxv - sizeof(struct ost_vhdr)));
}

static inline uint64_t ost_pat(uint32_t key, uint64_t seq) { return (uint64_t)key << 40 | seq; }

static inline size_t ost_make_val(uint8_t *v, uint32_t magic, uint32_t maxv, uint32_t key,
				  uint32_t writer, uint64_t seq)
{
	uint32_t len = ost_vlen(key, seq, maxv);
	struct ost_vhdr h = { magic, key, writer, len, seq };
	memcpy(v, &h, sizeof(h));
	tl_fill(v + sizeof(h), len - sizeof(h), ost_pat(key, seq));
	return len;
}

/* The seq (1..max_seq-1) of a value read for key, after checking that it
 * is whole and writer wrote it; fails the process otherwise. */
static inline uint64_t ost_check_val(const char *who, uint32_t magic, uint32_t maxv,
				     uint64_t max_seq, uint32_t key, uint32_t writer,
				     const void *v, size_t vl)
{
	struct ost_vhdr h;
	CHECKF(vl >= sizeof(h), "%s: key %u: a %zu-byte value", who, key, vl);
	memcpy(&h, v, sizeof(h));
	CHECKF(h.magic == magic && h.key == key && h.writer == writer && h.len == vl &&
		       h.seq && h.seq < max_seq && vl == ost_vlen(key, h.seq, maxv),
	       "%s: key %u: bytes its writer did not write: %zu bytes saying magic %#x key %u "
	       "writer %u len %u seq %llu",
	       who, key, vl, h.magic, h.key, h.writer, h.len, (unsigned long long)h.seq);
	size_t bad = tl_verify((const uint8_t *)v + sizeof(h), vl - sizeof(h), ost_pat(key, h.seq));
	CHECKF(bad == (size_t)-1, "%s: key %u seq %llu: wrong byte at %zu of %zu", who, key,
	       (unsigned long long)h.seq, bad + sizeof(h), vl);
	return h.seq;
}

#endif
