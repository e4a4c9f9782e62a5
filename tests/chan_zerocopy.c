/* SPDX-License-Identifier: MIT */
/*
 * chan_zerocopy SCHEME: zl_send_reserve/commit and zl_recv_peek/release,
 * their error codes, mixing with the copying calls, a full channel, and
 * fragmented messages (peek -> -EMSGSIZE, then zl_recv gets them).
 * One process; the pair is connected with a helper thread, and a thread
 * sends the large fragmented message.
 */
#include "chanlib.h"

#define TMO 5000000

static zl_channel *srv, *cli;
static const char *scheme;
static uint64_t n_recv, b_recv; /* what srv should have received */

static void expect_peek(size_t len, uint64_t id)
{
	const void *p = NULL;
	size_t got = (size_t)-1;
	CHECK_OK(zl_recv_peek(srv, &p, &got, TMO));
	CHECKF(got == len, "peeked %zu bytes, expected %zu", got, len);
	CHECK(p || !len);
	CHECK_PATTERN(p, len, id);
	CHECK_OK(zl_recv_release(srv));
	n_recv++;
	b_recv += len;
}

static void expect_recv(size_t len, uint64_t id)
{
	uint8_t *buf = malloc(len + 1);
	CHECK(buf);
	tl_recv_expect(srv, buf, len + 1, len, id, TMO);
	free(buf);
	n_recv++;
	b_recv += len;
}

static void reserve_commit(void)
{
	void *p = NULL, *q;
	/* reserved, written, not yet visible */
	CHECK_OK(zl_send_reserve(cli, 100, &p));
	CHECK(p);
	tl_fill(p, 100, 1);
	const void *rp;
	size_t len;
	CHECK_RC(zl_recv_peek(srv, &rp, &len, 0), -EAGAIN);
	CHECK_RC(zl_send_reserve(cli, 10, &q), -EBUSY);
	CHECK_RC(zl_send_commit(cli, 101), -EINVAL); /* more than reserved */
	CHECK_OK(zl_send_commit(cli, 50));           /* shorter than reserved */
	CHECK_RC(zl_send_commit(cli, 0), -EINVAL);   /* nothing open any more */
	expect_peek(50, 1);

	/* commit without reserve, reserve of 0 */
	CHECK_RC(zl_send_commit(cli, 0), -EINVAL);
	CHECK_OK(zl_send_reserve(cli, 0, &p));
	CHECK_OK(zl_send_commit(cli, 0));
	expect_peek(0, 0);

	/* sizes: zl_max_inline is the limit */
	size_t mi = zl_max_inline(cli);
	CHECK(mi > 0);
	CHECK_RC(zl_send_reserve(cli, mi + 1, &p), -EMSGSIZE);
	CHECK_OK(zl_send_reserve(cli, mi, &p));
	size_t use = mi <= (1u << 20) ? mi : 4096; /* streams: max_msg-sized */
	tl_fill(p, use, 2);
	CHECK_OK(zl_send_commit(cli, use));
	if (use == mi)
		expect_peek(use, 2); /* the largest message that is inline */
	else
		expect_recv(use, 2);
	CHECK_RC(zl_send_reserve(NULL, 1, &p), -EINVAL);
	CHECK_RC(zl_send_reserve(cli, 1, NULL), -EINVAL);
	CHECK_RC(zl_send_commit(NULL, 1), -EINVAL);
	printf("reserve/commit ok, zl_max_inline %zu\n", mi);
}

static void peek_release(void)
{
	const void *p, *q;
	size_t len, len2;
	CHECK_RC(zl_recv_release(srv), -EINVAL);
	tl_send_pattern(cli, 33, 3, TMO);
	tl_send_pattern(cli, 34, 4, TMO);
	CHECK_OK(zl_recv_peek(srv, &p, &len, TMO));
	CHECK(len == 33);
	CHECK_RC(zl_recv_peek(srv, &q, &len2, 0), -EBUSY);
	CHECK_PATTERN(p, len, 3); /* still intact after the failed peek */
	CHECK_OK(zl_recv_release(srv));
	n_recv++;
	b_recv += 33;
	CHECK_RC(zl_recv_release(srv), -EINVAL);
	expect_peek(34, 4);
	CHECK_RC(zl_recv_peek(srv, &p, &len, 0), -EAGAIN);
	int64_t t0 = tl_now_us();
	CHECK_RC(zl_recv_peek(srv, &p, &len, 20000), -ETIMEDOUT);
	CHECK(tl_now_us() - t0 >= 20000);
	CHECK_RC(zl_recv_peek(NULL, &p, &len, 0), -EINVAL);
	CHECK_RC(zl_recv_peek(srv, NULL, &len, 0), -EINVAL);
	CHECK_RC(zl_recv_peek(srv, &p, NULL, 0), -EINVAL);
	CHECK_RC(zl_recv_release(NULL), -EINVAL);
}

/* copying and zero-copy calls interleaved on both sides keep order */
static void mixed(void)
{
	void *p;
	for (uint64_t b = 0; b < 200; b += 10) { /* batches that fit the ring */
		for (uint64_t i = b; i < b + 10; i++) {
			size_t len = (size_t)(i * 37 % 3000);
			if (i % 3 == 0) {
				tl_send_pattern(cli, len, 100 + i, TMO);
			} else {
				CHECK_OK(zl_send_reserve(cli, len + 10, &p));
				tl_fill(p, len, 100 + i);
				CHECK_OK(zl_send_commit(cli, len));
			}
		}
		for (uint64_t i = b; i < b + 10; i++) {
			size_t len = (size_t)(i * 37 % 3000);
			if (i % 2)
				expect_peek(len, 100 + i);
			else
				expect_recv(len, 100 + i);
		}
	}
}

/* full channel: reserve says -EAGAIN (shm), wait_writable times out, and
 * after draining there is room again */
static void full(void)
{
	enum { M = 1000 };
	uint8_t buf[M];
	uint64_t n = 0, got = 0;
	for (;;) {
		tl_fill(buf, M, 1000 + n);
		int rc = zl_send(cli, buf, M, 0);
		if (rc == -EAGAIN)
			break;
		CHECK_OK(rc);
		CHECK(++n < 1000000);
	}
	void *p;
	int rc = zl_send_reserve(cli, M, &p);
	if (!strcmp(scheme, "shm")) {
		CHECK_RC(rc, -EAGAIN);
	} else if (rc == 0) { /* streams may buffer one reservation */
		tl_fill(p, M, 1000 + n++);
		CHECK_OK(zl_send_commit(cli, M));
	} else {
		CHECK_RC(rc, -EAGAIN);
	}
	CHECK_RC(zl_wait_writable(cli, M, 0), -EAGAIN);
	CHECK_RC(zl_wait_writable(cli, M, 10000), -ETIMEDOUT);
	/* drain; the sender pushes what it kept meanwhile */
	int64_t end = tl_now_us() + TMO;
	while (got < n) {
		size_t len;
		rc = zl_recv(srv, buf, M, &len, 0);
		if (rc == 0) {
			CHECK(len == M);
			CHECK_PATTERN(buf, M, 1000 + got);
			got++;
			n_recv++;
			b_recv += M;
		} else {
			CHECK_RC(rc, -EAGAIN);
			rc = zl_flush(cli, 0);
			CHECK(rc == 0 || rc == -EAGAIN);
			CHECKF(tl_now_us() < end, "drained %" PRIu64 " of %" PRIu64, got, n);
		}
	}
	CHECK_OK(zl_wait_writable(cli, M, TMO));
	CHECK_OK(zl_send_reserve(cli, M, &p));
	tl_fill(p, M, 7);
	CHECK_OK(zl_send_commit(cli, M));
	expect_peek(M, 7);
	printf("full after %" PRIu64 " messages of %d bytes\n", n, M);
}

struct big {
	size_t len;
	uint64_t id;
};

static void *big_sender(void *arg)
{
	struct big *b = arg;
	tl_send_pattern(cli, b->len, b->id, TMO);
	return NULL;
}

/* a fragmented message: peek says -EMSGSIZE with its size; zl_recv gets it */
static void fragmented(void)
{
	size_t mi = zl_max_inline(srv);
	if (mi > (8u << 20)) {
		printf("fragmented: skipped (%s has no fragments below max_msg)\n", scheme);
		return;
	}
	struct big b = { 3 * mi + 5, 42 };
	struct tl_thread th;
	tl_thread_start(&th, big_sender, &b);
	const void *p;
	size_t len = 0;
	CHECK_RC(zl_recv_peek(srv, &p, &len, TMO), -EMSGSIZE);
	CHECK_EQ_U64(len, b.len);
	len = 0;
	CHECK_RC(zl_recv_peek(srv, &p, &len, 0), -EMSGSIZE); /* still there */
	CHECK_EQ_U64(len, b.len);
	uint8_t *buf = malloc(b.len);
	CHECK(buf);
	len = 0;
	CHECK_RC(zl_recv(srv, buf, b.len - 1, &len, TMO), -EMSGSIZE);
	CHECK_EQ_U64(len, b.len);
	tl_recv_expect(srv, buf, b.len, b.len, 42, TMO);
	n_recv++;
	b_recv += b.len;
	tl_thread_join(&th, 10000);

	/* partially received (a receive timed out in the middle): peek still
	 * says -EMSGSIZE, and zl_recv completes it */
	b.len = 2 * mi + 100;
	b.id = 43;
	tl_fill(buf, b.len, b.id);
	int rc = zl_send(cli, buf, b.len, 0); /* accepted, rest kept */
	CHECKF(rc == 0 || rc == -EAGAIN, "zl_send(0) of %zu bytes: %d", b.len, rc);
	if (rc == 0) {
		uint8_t *rb = calloc(1, b.len);
		CHECK(rb);
		rc = zl_recv(srv, rb, b.len, &len, 0);
		if (rc == -EAGAIN) {
			len = 0;
			CHECK_RC(zl_recv_peek(srv, &p, &len, 0), -EMSGSIZE);
			CHECK_EQ_U64(len, b.len);
			int64_t end = tl_now_us() + TMO;
			while ((rc = zl_recv(srv, rb, b.len, &len, 0)) == -EAGAIN) {
				int f = zl_flush(cli, 0);
				CHECK(f == 0 || f == -EAGAIN);
				CHECK(tl_now_us() < end);
			}
		}
		CHECK_OK(rc);
		CHECK_EQ_U64(len, b.len);
		CHECK_PATTERN(rb, len, 43);
		n_recv++;
		b_recv += b.len;
		free(rb);
	}
	free(buf);
	printf("fragmented messages of %zu and %zu bytes ok\n", 3 * mi + 5, 2 * mi + 100);
}

int main(int argc, char **argv)
{
	scheme = tl_scheme_arg(argc, argv);
	tl_watchdog(60);
	tl_pair(scheme, "ring=65536", &srv, &cli);
	reserve_commit();
	peek_release();
	mixed();
	full();
	fragmented();
	struct zl_channel_info in;
	CHECK_OK(zl_channel_info(srv, &in));
	CHECKF(in.msgs_recv == n_recv && in.bytes_recv == b_recv,
	       "receiver counted %" PRIu64 " messages / %" PRIu64 " bytes, expected %" PRIu64
	       " / %" PRIu64,
	       in.msgs_recv, in.bytes_recv, n_recv, b_recv);
	zl_close(cli);
	zl_close(srv);
	return T_EXIT_PASS;
}
