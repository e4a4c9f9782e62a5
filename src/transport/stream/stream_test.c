/* SPDX-License-Identifier: MIT */
/* tcp:// and unix:// specific tests: framing, hostile peers, partial
 * transfers, unix path handling. Every wait is bounded. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "url.h"

#define SEC 1000000
static int failures;
static const char *cur = "";

#define CHECK(c) \
	do { \
		if (!(c)) { \
			fprintf(stderr, "FAIL %s:%d [%s]: %s\n", __FILE__, __LINE__, cur, #c); \
			failures++; \
		} \
	} while (0)
#define CHECK_RC(expr, want) \
	do { \
		int rc_ = (expr); \
		if (rc_ != (want)) { \
			fprintf(stderr, "FAIL %s:%d [%s]: %s = %d (%s), want %s\n", __FILE__, \
				__LINE__, cur, #expr, rc_, zl_strerror(rc_), #want); \
			failures++; \
		} \
	} while (0)

static void msleep(int ms) { poll(NULL, 0, ms); }

static void fill_pattern(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed + (i >> 12));
}

static int check_pattern(const uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (uint8_t)(i * 31 + seed + (i >> 12)))
			return 0;
	return 1;
}

/* A fresh listen URL for transport tr ("tcp" or "unix"). */
static void listen_url(const char *tr, const char *query, char *buf, size_t cap)
{
	static int n;
	if (!strcmp(tr, "tcp"))
		snprintf(buf, cap, "tcp://127.0.0.1:0%s%s", *query ? "?" : "", query);
	else
		snprintf(buf, cap, "unix:///tmp/zl_stream_test.%d.%d%s%s", (int)getpid(), n++,
			 *query ? "?" : "", query);
}

/* ---- connected pairs -------------------------------------------------- */

struct conn_arg {
	char url[600];
	zl_channel *ch;
	int rc;
};

static void *connect_thread(void *p)
{
	struct conn_arg *a = p;
	a->rc = zl_connect(a->url, NULL, 3 * SEC, &a->ch);
	return NULL;
}

/* Listen on tr, connect with cquery appended; *a accepted, *b connected. */
static int make_pair(const char *tr, const char *lquery, const char *cquery, zl_channel **a,
		     zl_channel **b)
{
	char url[512];
	zl_listener *l;
	struct conn_arg ca = { .ch = NULL };
	listen_url(tr, lquery, url, sizeof(url));
	int rc = zl_listen(url, NULL, &l);
	CHECK_RC(rc, 0);
	if (rc)
		return rc;
	zl_listener_url(l, url, sizeof(url));
	snprintf(ca.url, sizeof(ca.url), "%s%s%s", url, *cquery ? "?" : "", cquery);
	pthread_t t;
	pthread_create(&t, NULL, connect_thread, &ca);
	rc = zl_accept(l, 3 * SEC, a);
	pthread_join(t, NULL);
	zl_listener_close(l);
	CHECK_RC(rc, 0);
	CHECK_RC(ca.rc, 0);
	if (rc || ca.rc) {
		if (!rc)
			zl_close(*a);
		if (!ca.rc)
			zl_close(ca.ch);
		return -1;
	}
	*b = ca.ch;
	return 0;
}

/* Echo every message back until the peer goes away. */
static void *echo_loop(zl_channel *ch, int pause_every)
{
	size_t cap = 17 << 20, len;
	uint8_t *buf = malloc(cap);
	for (int i = 1; zl_recv(ch, buf, cap, &len, 5 * SEC) == 0; i++) {
		if (zl_send(ch, buf, len, 5 * SEC))
			break;
		if (pause_every && i % pause_every == 0)
			msleep(2); /* a slow peer: the other side's sends time out */
	}
	free(buf);
	return NULL;
}

static void *echo_thread(void *p) { return echo_loop(p, 0); }
static void *slow_echo_thread(void *p) { return echo_loop(p, 8); }

static void test_echo(const char *tr, const char *query)
{
	zl_channel *a, *b;
	if (make_pair(tr, query, query, &a, &b))
		return;
	pthread_t t;
	pthread_create(&t, NULL, echo_thread, b);
	static const size_t sizes[] = { 0, 1, 5, 100, 4096, 65531, 65536, 70000, 1 << 20 };
	size_t cap = 2 << 20, len;
	uint8_t *out = malloc(cap), *in = malloc(cap);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		fill_pattern(out, sizes[i], i);
		CHECK_RC(zl_send(a, out, sizes[i], 5 * SEC), 0);
		CHECK_RC(zl_recv(a, in, cap, &len, 5 * SEC), 0);
		CHECK(len == sizes[i] && check_pattern(in, len, i));
	}
	/* a burst of small messages: many frames per recv() */
	for (uint32_t i = 0; i < 300; i++) {
		memset(out, 0, 32);
		memcpy(out, &i, 4);
		CHECK_RC(zl_send(a, out, 32, 5 * SEC), 0);
	}
	for (uint32_t i = 0, got; i < 300; i++) {
		CHECK_RC(zl_recv(a, in, cap, &len, 5 * SEC), 0);
		memcpy(&got, in, 4);
		CHECK(len == 32 && got == i);
	}
	struct zl_channel_info info;
	CHECK_RC(zl_channel_info(a, &info), 0);
	CHECK(!strcmp(info.transport, tr) && info.msgs_sent == 309 && info.msgs_recv == 309);
	zl_close(a);
	pthread_join(t, NULL);
	zl_close(b);
	free(out);
	free(in);
}

/* One thread sends while another receives on the same channel; short send
 * timeouts leave tails pending, which the receiving thread may push. */
struct duplex_arg {
	zl_channel *ch;
	int n, rc;
};

static size_t duplex_size(int i) { return (size_t)(i * 7919) % 300000; }

static void *duplex_sender(void *p)
{
	struct duplex_arg *d = p;
	uint8_t *buf = malloc(300000);
	for (int i = 0; i < d->n && !d->rc; i++) {
		fill_pattern(buf, duplex_size(i), (unsigned)i);
		while ((d->rc = zl_send(d->ch, buf, duplex_size(i), 300)) == -ETIMEDOUT)
			;
	}
	if (!d->rc)
		d->rc = zl_flush(d->ch, 5 * SEC);
	free(buf);
	return NULL;
}

static void test_duplex(const char *tr)
{
	zl_channel *a, *b;
	if (make_pair(tr, "", "", &a, &b))
		return;
	pthread_t te, ts;
	struct duplex_arg d = { .ch = a, .n = 400 };
	uint8_t *in = malloc(300000);
	size_t len;
	pthread_create(&te, NULL, slow_echo_thread, b);
	pthread_create(&ts, NULL, duplex_sender, &d);
	for (int i = 0; i < d.n; i++) {
		int rc = zl_recv(a, in, 300000, &len, 5 * SEC);
		CHECK_RC(rc, 0);
		CHECK(len == duplex_size(i) && check_pattern(in, len, (unsigned)i));
		if (rc)
			break;
	}
	pthread_join(ts, NULL);
	CHECK_RC(d.rc, 0);
	zl_close(a);
	pthread_join(te, NULL);
	zl_close(b);
	free(in);
}

static void test_api_edges(const char *tr)
{
	zl_channel *a, *b;
	if (make_pair(tr, "max_msg=100000", "max_msg=1000", &a, &b))
		return;
	uint8_t buf[2000] = { 0 };
	size_t len = 0;
	const void *ptr;
	void *w;
	/* -EMSGSIZE keeps the message; peek/release rules */
	CHECK_RC(zl_send(b, buf, 1000, SEC), 0);
	CHECK_RC(zl_send(b, "hello", 5, SEC), 0);
	CHECK_RC(zl_recv(a, buf, 10, &len, SEC), -EMSGSIZE);
	CHECK(len == 1000);
	CHECK_RC(zl_recv(a, buf, 1000, &len, SEC), 0);
	CHECK(len == 1000);
	CHECK_RC(zl_recv_peek(a, &ptr, &len, SEC), 0);
	CHECK(len == 5 && !memcmp(ptr, "hello", 5));
	CHECK_RC(zl_recv(a, buf, sizeof(buf), &len, 0), -EBUSY);
	CHECK_RC(zl_recv_peek(a, &ptr, &len, 0), -EBUSY);
	CHECK_RC(zl_recv_release(a), 0);
	CHECK_RC(zl_recv_release(a), -EINVAL);
	CHECK_RC(zl_recv(a, buf, sizeof(buf), &len, 0), -EAGAIN);
	CHECK_RC(zl_recv(a, buf, sizeof(buf), &len, 20000), -ETIMEDOUT);
	/* the fd contract: after -EAGAIN it turns readable when data comes */
	struct pollfd pfd = { .fd = zl_channel_fd(a), .events = POLLIN };
	CHECK(pfd.fd >= 0 && poll(&pfd, 1, 0) == 0);
	CHECK_RC(zl_send(b, "x", 1, SEC), 0);
	CHECK(poll(&pfd, 1, 2000) == 1);
	CHECK_RC(zl_recv(a, buf, sizeof(buf), &len, 0), 0);
	/* zero-copy send */
	CHECK_RC(zl_send_commit(b, 0), -EINVAL);
	CHECK_RC(zl_send_reserve(b, 100, &w), 0);
	CHECK_RC(zl_send_reserve(b, 100, &w), -EBUSY);
	CHECK_RC(zl_send(b, buf, 1, SEC), -EBUSY);
	memcpy(w, "zero-copy", 9);
	CHECK_RC(zl_send_commit(b, 101), -EINVAL);
	CHECK_RC(zl_send_commit(b, 9), 0);
	CHECK_RC(zl_send_commit(b, 9), -EINVAL);
	CHECK_RC(zl_recv(a, buf, sizeof(buf), &len, SEC), 0);
	CHECK(len == 9 && !memcmp(buf, "zero-copy", 9));
	/* limits: each side sends at most what the other accepts */
	CHECK(zl_max_inline(a) == 1000 && zl_max_inline(b) == 100000);
	CHECK_RC(zl_send(a, buf, 1001, SEC), -EMSGSIZE);
	CHECK_RC(zl_send_reserve(a, 1001, &w), -EMSGSIZE);
	CHECK_RC(zl_wait_writable(a, 1001, 0), -EMSGSIZE);
	CHECK_RC(zl_wait_writable(a, 1000, 0), 0);
	CHECK_RC(zl_flush(a, 0), 0);
	struct zl_channel_info info;
	zl_channel_info(a, &info);
	CHECK(info.max_msg == 100000 && info.ring_size == 0);
	CHECK(!strcmp(tr, "unix") ? info.peer_pid == getpid() : info.peer_pid == -1);
	zl_close(a);
	zl_close(b);
}

/* Peer closes: queued messages first, then -ECONNRESET, on both paths. */
static void test_reset(const char *tr)
{
	zl_channel *a, *b;
	if (make_pair(tr, "", "", &a, &b))
		return;
	uint8_t *big = calloc(1, 100000), buf[64];
	size_t len;
	for (int i = 0; i < 3; i++)
		CHECK_RC(zl_send(b, "msg", 3, SEC), 0);
	CHECK_RC(zl_send(b, big, 100000, SEC), 0); /* fits the socket buffer */
	zl_close(b);
	for (int i = 0; i < 3; i++) {
		CHECK_RC(zl_recv(a, buf, sizeof(buf), &len, SEC), 0);
		CHECK(len == 3);
	}
	CHECK_RC(zl_recv(a, big, 100000, &len, SEC), 0);
	CHECK(len == 100000);
	CHECK_RC(zl_recv(a, buf, sizeof(buf), &len, SEC), -ECONNRESET);
	CHECK_RC(zl_recv(a, buf, sizeof(buf), &len, 0), -ECONNRESET);
	CHECK_RC(zl_send(a, "x", 1, SEC), -ECONNRESET);
	zl_close(a);
	free(big);
}

/* 16 MiB each way, with a slow reader and short timeouts on both sides:
 * partial sends (pending + flush) and partial receives (parked bytes). */
struct big_arg {
	zl_channel *ch;
	uint8_t *buf;
	size_t len;
	int rc_send, rc_flush;
};

static void *big_sender(void *p)
{
	struct big_arg *a = p;
	int rc;
	while ((rc = zl_send(a->ch, a->buf, a->len, 20000)) == -ETIMEDOUT)
		;
	a->rc_send = rc;
	a->rc_flush = zl_flush(a->ch, 10 * SEC);
	return NULL;
}

static void test_large(const char *tr)
{
	zl_channel *a, *b;
	if (make_pair(tr, "", "", &a, &b))
		return;
	size_t n = 16 << 20, len = 0;
	struct big_arg arg = { .ch = b, .buf = malloc(n), .len = n };
	uint8_t *in = malloc(n);
	fill_pattern(arg.buf, n, 7);
	pthread_t t;
	pthread_create(&t, NULL, big_sender, &arg);
	msleep(100); /* let the sender run into a full socket */
	int rc, spins = 0;
	while ((rc = zl_recv(a, in, n, &len, 2000)) == -ETIMEDOUT && spins++ < 5000)
		;
	CHECK_RC(rc, 0);
	CHECK(len == n && check_pattern(in, n, 7));
	pthread_join(t, NULL);
	CHECK_RC(arg.rc_send, 0);
	CHECK_RC(arg.rc_flush, 0);
	/* back, read with peek and tiny timeouts */
	const void *ptr = NULL;
	arg.ch = a;
	pthread_create(&t, NULL, big_sender, &arg);
	spins = 0;
	while ((rc = zl_recv_peek(b, &ptr, &len, 1000)) == -ETIMEDOUT && spins++ < 20000)
		;
	CHECK_RC(rc, 0);
	CHECK(len == n && ptr && check_pattern(ptr, n, 7));
	CHECK_RC(zl_recv_release(b), 0);
	pthread_join(t, NULL);
	CHECK_RC(arg.rc_send, 0);
	zl_close(a);
	zl_close(b);
	free(arg.buf);
	free(in);
}

/* Fill the socket with timeout-0 sends until -EAGAIN (a frame cut in half
 * counts as sent), then read everything back: none lost, none doubled. */
static void test_backpressure(const char *tr)
{
	zl_channel *a, *b;
	if (make_pair(tr, "", "", &a, &b))
		return;
	static const size_t sizes[] = { 1000, 5000 }; /* copied / iovec send paths */
	uint8_t buf[5000];
	for (int k = 0; k < 2; k++) {
		uint32_t sent = 0, got = 0;
		size_t len;
		int rc;
		while (sent < 100000) {
			memset(buf, (int)sent, sizes[k]);
			memcpy(buf, &sent, 4);
			if ((rc = zl_send(a, buf, sizes[k], 0)) != 0)
				break;
			sent++;
		}
		CHECK_RC(rc, -EAGAIN);
		while (got < sent && zl_recv(b, buf, sizeof(buf), &len, SEC) == 0) {
			uint32_t seq;
			memcpy(&seq, buf, 4);
			CHECK(seq == got && len == sizes[k] && buf[len - 1] == (uint8_t)seq);
			if (seq != got)
				break;
			got++;
			if (got == sent / 2) /* the tail went out with a later call */
				CHECK_RC(zl_flush(a, SEC), 0);
		}
		CHECK(got == sent);
		CHECK_RC(zl_recv(b, buf, sizeof(buf), &len, 0), -EAGAIN);
	}
	zl_close(a);
	zl_close(b);
}

/* A tail left pending by zl_send goes out through zl_recv alone: the peer
 * only answers once it has the whole message. */
static void test_recv_pushes(const char *tr)
{
	zl_channel *a, *b;
	if (make_pair(tr, "", "", &a, &b))
		return;
	size_t n = 16 << 20, len = 0;
	uint8_t *out = malloc(n), *in = malloc(n);
	fill_pattern(out, n, 3);
	CHECK_RC(zl_send(a, out, n, 10000), 0); /* nobody reads: partial */
	pthread_t t;
	pthread_create(&t, NULL, echo_thread, b);
	CHECK_RC(zl_recv(a, in, n, &len, 10 * SEC), 0);
	CHECK(len == n && check_pattern(in, n, 3));
	zl_close(a);
	pthread_join(t, NULL);
	zl_close(b);
	free(out);
	free(in);
}

/* ---- hostile peers ------------------------------------------------------ */

static int raw_connect(const char *zurl)
{
	struct zl_url u;
	if (zl_url_parse(zurl, &u))
		return -1;
	int fd = -1;
	if (!strcmp(u.scheme, "unix")) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		if (strlen(u.path) >= sizeof(sa.sun_path))
			return -1;
		memcpy(sa.sun_path, u.path, strlen(u.path));
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
			close(fd);
			return -1;
		}
		return fd;
	}
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	if (getaddrinfo(u.host, u.port, &hints, &res))
		return -1;
	fd = socket(res->ai_family, SOCK_STREAM, 0);
	if (connect(fd, res->ai_addr, res->ai_addrlen)) {
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

static void hello(uint8_t h[16], uint16_t ver)
{
	uint64_t max = 1ull << 30;
	memcpy(h, "ZLST", 4);
	memcpy(h + 4, &ver, 2); /* the test hosts are little-endian */
	memset(h + 6, 0, 2);
	memcpy(h + 8, &max, 8);
}

/* A raw peer: connect, write `len` bytes, then linger (up to 2 s) until the
 * other side closes, or close at once. */
struct raw_arg {
	char url[600];
	const void *data;
	size_t len;
	int linger;
};

static void *raw_peer(void *p)
{
	struct raw_arg *a = p;
	int fd = raw_connect(a->url);
	if (fd < 0)
		return NULL;
	if (a->len && send(fd, a->data, a->len, MSG_NOSIGNAL) < 0)
		perror("raw send");
	char sink[256];
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	while (a->linger && poll(&pfd, 1, 2000) == 1 && recv(fd, sink, sizeof(sink), 0) > 0)
		;
	close(fd);
	return NULL;
}

/* Accept one raw peer that sends data; returns zl_accept's result. */
static int accept_raw(zl_listener *l, const void *data, size_t len, int linger,
		      int64_t timeout, zl_channel **out)
{
	struct raw_arg ra = { .data = data, .len = len, .linger = linger };
	zl_listener_url(l, ra.url, sizeof(ra.url));
	pthread_t t;
	pthread_create(&t, NULL, raw_peer, &ra);
	int rc = zl_accept(l, timeout, out);
	if (!rc)
		zl_close(*out);
	pthread_join(t, NULL);
	return rc;
}

static void test_hostile_handshake(const char *tr)
{
	char url[600];
	zl_listener *l;
	zl_channel *ch;
	uint8_t h[16];
	listen_url(tr, "handshake_timeout_us=300000", url, sizeof(url));
	CHECK_RC(zl_listen(url, NULL, &l), 0);
	CHECK_RC(accept_raw(l, "GET / HTTP/1.1\r\n\r\n", 18, 1, 2 * SEC, &ch), -EPROTO);
	hello(h, 99);
	CHECK_RC(accept_raw(l, h, 16, 1, 2 * SEC, &ch), -EPROTO);       /* bad version */
	CHECK_RC(accept_raw(l, "ZLST\1", 5, 0, 2 * SEC, &ch), -EPROTO); /* cut short */
	CHECK_RC(accept_raw(l, "ZL", 2, 1, 2 * SEC, &ch), -ETIMEDOUT);  /* stalls */
	CHECK_RC(accept_raw(l, NULL, 0, 0, 300000, &ch), -ETIMEDOUT);   /* probe: dropped */
	hello(h, ZL_PROTO_VERSION);
	CHECK_RC(accept_raw(l, h, 16, 0, 2 * SEC, &ch), 0);
	zl_listener_close(l);
}

/* A raw server answering connect with a bad hello. */
struct raw_srv {
	int lfd;
	const void *data;
	size_t len;
};

static void *raw_server(void *p)
{
	struct raw_srv *s = p;
	struct pollfd pfd = { .fd = s->lfd, .events = POLLIN };
	if (poll(&pfd, 1, 3000) != 1)
		return NULL;
	int fd = accept(s->lfd, NULL, NULL);
	send(fd, s->data, s->len, MSG_NOSIGNAL);
	char sink[64];
	pfd.fd = fd;
	while (poll(&pfd, 1, 2000) == 1 && recv(fd, sink, sizeof(sink), 0) > 0)
		;
	close(fd);
	return NULL;
}

static void test_hostile_server(const char *tr)
{
	char url[600];
	zl_listener *l;
	listen_url(tr, "", url, sizeof(url));
	CHECK_RC(zl_listen(url, NULL, &l), 0);
	zl_listener_url(l, url, sizeof(url));
	/* answer on the listener's socket ourselves, without zl_accept */
	struct raw_srv s = { .lfd = dup(l->ops->fd(l)), .data = "\x7f" "ELF garbage....", .len = 16 };
	pthread_t t;
	pthread_create(&t, NULL, raw_server, &s);
	zl_channel *ch;
	CHECK_RC(zl_connect(url, NULL, 2 * SEC, &ch), -EPROTO);
	pthread_join(t, NULL);
	close(s.lfd);
	zl_listener_close(l);
}

/* A bad frame length, then fuzz-ish garbage after a valid hello. */
static void test_bad_frames(const char *tr)
{
	char url[600];
	zl_listener *l;
	zl_channel *ch;
	uint8_t msg[16 + 8 + 4096], buf[4096];
	size_t len;
	listen_url(tr, "max_msg=4096", url, sizeof(url));
	CHECK_RC(zl_listen(url, NULL, &l), 0);
	zl_listener_url(l, url, sizeof(url));
	hello(msg, ZL_PROTO_VERSION);
	/* a good 4-byte frame, then 5000 > max_msg */
	memcpy(msg + 16, "\4\0\0\0abcd\x88\x13\0\0", 12);
	struct raw_arg ra = { .data = msg, .len = 28, .linger = 1 };
	snprintf(ra.url, sizeof(ra.url), "%s", url);
	pthread_t t;
	pthread_create(&t, NULL, raw_peer, &ra);
	CHECK_RC(zl_accept(l, 2 * SEC, &ch), 0);
	CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, SEC), 0);
	CHECK(len == 4 && !memcmp(buf, "abcd", 4));
	CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, SEC), -EPROTO);
	CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, SEC), -EPIPE);
	CHECK_RC(zl_send(ch, buf, 1, SEC), -EPIPE);
	zl_close(ch);
	pthread_join(t, NULL);

	unsigned seed = 12345;
	for (int round = 0; round < 40; round++) {
		size_t n = 16 + (size_t)(rand_r(&seed) % 4096);
		for (size_t i = 16; i < n; i++)
			msg[i] = (uint8_t)rand_r(&seed);
		if (round & 1) /* mostly-plausible lengths */
			for (size_t i = 16; i + 4 < n; i += 4 + (size_t)(rand_r(&seed) % 64))
				memcpy(msg + i, &(uint32_t){ (uint32_t)(rand_r(&seed) % 80) }, 4);
		ra.len = n;
		ra.linger = 0;
		pthread_create(&t, NULL, raw_peer, &ra);
		int rc = zl_accept(l, 2 * SEC, &ch), msgs = 0;
		CHECK_RC(rc, 0);
		if (rc) {
			pthread_join(t, NULL);
			continue;
		}
		const void *p;
		while (msgs++ < 10000) {
			if (round & 2) {
				rc = zl_recv_peek(ch, &p, &len, SEC);
				if (!rc)
					zl_recv_release(ch);
			} else {
				rc = zl_recv(ch, buf, sizeof(buf), &len, SEC);
			}
			if (rc)
				break;
		}
		CHECK(rc == -EPROTO || rc == -ECONNRESET);
		zl_close(ch);
		pthread_join(t, NULL);
	}
	zl_listener_close(l);
}

/* ---- addressing --------------------------------------------------------- */

static void test_addresses(void)
{
	zl_listener *l, *l2;
	zl_channel *ch;
	char url[600], path[200];
	cur = "addresses";
	CHECK_RC(zl_listen("tcp://127.0.0.1:0?bogus=1", NULL, &l), -EINVAL);
	CHECK_RC(zl_listen("unix://relative/path", NULL, &l), -EINVAL);
	CHECK_RC(zl_connect("tcp://127.0.0.1", NULL, SEC, &ch), -EINVAL);
	/* refused: a port nobody listens on, a path that does not exist */
	CHECK_RC(zl_listen("tcp://127.0.0.1:0", NULL, &l), 0);
	zl_listener_url(l, url, sizeof(url));
	zl_listener_close(l);
	CHECK_RC(zl_connect(url, NULL, SEC, &ch), -ECONNREFUSED);
	snprintf(path, sizeof(path), "/tmp/zl_stream_test.%d.addr", (int)getpid());
	snprintf(url, sizeof(url), "unix://%s", path);
	unlink(path);
	CHECK_RC(zl_connect(url, NULL, SEC, &ch), -ECONNREFUSED);
	/* a stale socket file is reclaimed, a live one is not */
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	strcpy(sa.sun_path, path);
	CHECK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	close(fd);
	CHECK(access(path, F_OK) == 0);
	CHECK_RC(zl_listen(url, NULL, &l), 0);
	CHECK_RC(zl_listen(url, NULL, &l2), -EADDRINUSE);
	/* the liveness probe must not disturb the live listener */
	CHECK_RC(zl_accept(l, 50000, &ch), -ETIMEDOUT);
	char got[600];
	CHECK_RC(zl_listener_url(l, got, sizeof(got)), 0);
	CHECK(!strcmp(got, url));
	CHECK_RC(zl_listener_url(l, got, 5), -ENOSPC);
	zl_listener_close(l);
	CHECK(access(path, F_OK) != 0); /* unlinked on close */
	/* never unlink something that is not a socket */
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	close(fd);
	CHECK_RC(zl_listen(url, NULL, &l), -EADDRINUSE);
	CHECK(access(path, F_OK) == 0);
	unlink(path);
	/* IPv6 literal, if the host has ::1 */
	if (zl_listen("tcp://[::1]:0", NULL, &l) == 0) {
		zl_listener_url(l, url, sizeof(url));
		CHECK(!strncmp(url, "tcp://[::1]:", 12));
		zl_listener_close(l);
	}
}

int main(void)
{
	signal(SIGPIPE, SIG_DFL); /* the library must never raise it */
	static const char *const trs[] = { "tcp", "unix" };
	char name[64];
	for (int i = 0; i < 2; i++) {
		const char *tr = trs[i];
#define RUN(fn, ...) \
	do { \
		snprintf(name, sizeof(name), "%s %s", #fn, tr); \
		cur = name; \
		fn(__VA_ARGS__); \
	} while (0)
		RUN(test_echo, tr, "");
		RUN(test_echo, tr, "busy_poll=1&spin_us=1000");
		RUN(test_echo, tr, "busy_poll=1&spin_us=-1");
		RUN(test_duplex, tr);
		RUN(test_api_edges, tr);
		RUN(test_reset, tr);
		RUN(test_large, tr);
		RUN(test_recv_pushes, tr);
		RUN(test_backpressure, tr);
		RUN(test_hostile_handshake, tr);
		RUN(test_hostile_server, tr);
		RUN(test_bad_frames, tr);
	}
	test_addresses();
	if (failures) {
		fprintf(stderr, "stream_test: %d failure(s)\n", failures);
		return 1;
	}
	printf("stream_test: all passed\n");
	return 0;
}
