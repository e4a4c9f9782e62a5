/* SPDX-License-Identifier: MIT */
/*
 * chan_sendv SCHEME: zl_sendv. Batches of mixed sizes (empty, small, a
 * ring record's worth, fragmented) arrive as separate messages, complete
 * and in order; bad arguments give -EINVAL with nothing sent; a message
 * over the peer's max_msg is refused (-EMSGSIZE first, or after the ones
 * before it were accepted); into a channel nobody reads, a batch is
 * accepted only as far as there is room, the rest gives -EAGAIN (timeout 0)
 * or -ETIMEDOUT within its timeout, and exactly the accepted messages
 * arrive; the sender's counters count messages, not calls.
 */
#include "chanlib.h"

#define TMO 5000000

static uint64_t next_id;

/* Send lens[0..n) as one zl_sendv (all accepted), then receive and check. */
static void batch_roundtrip(zl_channel *tx, zl_channel *rx, const size_t *lens, size_t n)
{
	struct zl_msgvec v[64];
	uint8_t *bufs[64];
	size_t max = 1;
	CHECK(n <= 64);
	for (size_t i = 0; i < n; i++) {
		bufs[i] = malloc(lens[i] ? lens[i] : 1);
		CHECK(bufs[i]);
		tl_fill(bufs[i], lens[i], next_id + i);
		v[i] = (struct zl_msgvec){ bufs[i], lens[i] };
		max = lens[i] > max ? lens[i] : max;
	}
	/* One thread does both sides: never block, or a message whose rest the
	 * sender keeps (a fragmented one, a socket's partial frame) could wait
	 * for our own next send-side call. */
	size_t sent = 0, got = 0;
	uint8_t *rbuf = malloc(max);
	CHECK(rbuf);
	int64_t deadline = tl_now_us() + 20 * 1000000;
	while (got < n) {
		CHECKF(tl_now_us() < deadline, "batch of %zu: %zu sent, %zu received", n, sent, got);
		if (sent < n) {
			int r = zl_sendv(tx, v + sent, n - sent, 0);
			CHECKF(r > 0 || r == -EAGAIN, "zl_sendv: %d", r);
			if (r > 0)
				sent += (size_t)r;
		} else {
			int r = zl_flush(tx, 0);
			CHECKF(r == 0 || r == -EAGAIN, "zl_flush: %d", r);
		}
		while (got < sent) {
			size_t len;
			int r = zl_recv(rx, rbuf, max, &len, 0);
			if (r == -EAGAIN)
				break;
			CHECK_OK(r);
			CHECKF(len == lens[got], "message %zu: %zu bytes, want %zu", got, len,
			       lens[got]);
			CHECK_PATTERN(rbuf, len, next_id + got);
			got++;
		}
	}
	next_id += n;
	free(rbuf);
	for (size_t i = 0; i < n; i++)
		free(bufs[i]);
}

static void arguments(zl_channel *tx, zl_channel *rx)
{
	struct zl_msgvec v[2] = { { "ab", 2 }, { NULL, 3 } };
	CHECK_RC(zl_sendv(NULL, v, 1, 0), -EINVAL);
	CHECK_RC(zl_sendv(tx, NULL, 1, 0), -EINVAL);
	CHECK_RC(zl_sendv(tx, v, 2, 0), -EINVAL); /* nothing of it is sent */
	CHECK_RC(zl_sendv(tx, NULL, 0, 0), 0);
	CHECK_RC(zl_sendv(tx, v, 0, 0), 0);
	char b[8];
	size_t len;
	CHECK_RC(zl_recv(rx, b, sizeof(b), &len, 100000), -ETIMEDOUT);
}

/* The peer accepts at most 4096 bytes (its max_msg). */
static void too_big(const char *scheme)
{
	zl_channel *s, *c;
	tl_pair(scheme, "max_msg=4096", &s, &c);
	static uint8_t big[8192];
	struct zl_msgvec v[3] = { { big, 8 }, { big, 8192 }, { big, 8 } };
	CHECK_RC(zl_sendv(c, v + 1, 2, 0), -EMSGSIZE);
	CHECK_RC(zl_sendv(c, v, 3, 0), 1); /* the first, then the error */
	CHECK_RC(zl_sendv(c, v + 1, 2, 0), -EMSGSIZE);
	char b[16];
	size_t len;
	CHECK_OK(zl_recv(s, b, sizeof(b), &len, TMO));
	CHECK(len == 8);
	CHECK_RC(zl_recv(s, b, sizeof(b), &len, 100000), -ETIMEDOUT);
	zl_close(c);
	zl_close(s);
}

/* Nobody reads: batches of 1000-byte messages fill the channel. */
static void full(const char *scheme)
{
	zl_channel *s, *c;
	tl_pair(scheme, "ring=65536", &s, &c);
	enum { N = 64, LEN = 1000 };
	static uint8_t bufs[N][LEN];
	struct zl_msgvec v[N];
	uint64_t accepted = 0;
	int r;
	for (int round = 0;; round++) {
		CHECKF(round < 100000, "zl_sendv kept accepting: %" PRIu64 " messages", accepted);
		for (int i = 0; i < N; i++) {
			tl_fill(bufs[i], LEN, accepted + (uint64_t)i);
			v[i] = (struct zl_msgvec){ bufs[i], LEN };
		}
		r = zl_sendv(c, v, N, 0);
		if (r < 0)
			break;
		CHECK(r >= 1 && r <= N);
		accepted += (uint64_t)r;
	}
	CHECK_RC(r, -EAGAIN);
	/* a timeout bounds the call: -ETIMEDOUT in time, nothing sent (a TCP
	 * socket's buffer may still grow: then what it took is accepted) */
	int64_t t0, el;
	for (int round = 0;; round++) {
		CHECKF(round < 1000, "zl_sendv(200 ms) kept accepting");
		for (int i = 0; i < N; i++)
			tl_fill(bufs[i], LEN, accepted + (uint64_t)i);
		t0 = tl_now_us();
		r = zl_sendv(c, v, N, 200000);
		el = tl_now_us() - t0;
		if (r < 0)
			break;
		accepted += (uint64_t)r;
	}
	CHECK_RC(r, -ETIMEDOUT);
	CHECKF(el >= 190000 && el < 3000000, "zl_sendv(200 ms) took %.1f ms", el / 1000.0);
	struct zl_channel_info ci;
	CHECK_OK(zl_channel_info(c, &ci));
	CHECK_EQ_U64(ci.msgs_sent, accepted);
	CHECK_EQ_U64(ci.bytes_sent, accepted * LEN);
	uint8_t b[LEN];
	size_t len;
	int64_t deadline = tl_now_us() + 20 * 1000000;
	for (uint64_t i = 0; i < accepted;) {
		CHECKF(tl_now_us() < deadline, "%" PRIu64 " of %" PRIu64 " accepted arrived", i,
		       accepted);
		r = zl_flush(c, 0); /* a partial frame's rest, kept by the sender */
		CHECKF(r == 0 || r == -EAGAIN, "zl_flush: %d", r);
		r = zl_recv(s, b, sizeof(b), &len, 0);
		if (r == -EAGAIN)
			continue;
		CHECK_OK(r);
		CHECK(len == LEN);
		CHECK_PATTERN(b, len, i);
		i++;
	}
	CHECK_RC(zl_recv(s, b, sizeof(b), &len, 100000), -ETIMEDOUT);
	zl_close(c);
	zl_close(s);
}

int main(int argc, char **argv)
{
	const char *scheme = tl_scheme_arg(argc, argv);
	tl_watchdog(120);
	zl_channel *s, *c;
	tl_pair(scheme, "ring=65536", &s, &c);
	arguments(c, s);
	const size_t mixed[] = { 0, 1, 8, 64, 100, 0, 4096, 20000, 200000, 7, 64, 32767 };
	batch_roundtrip(c, s, mixed, sizeof(mixed) / sizeof(mixed[0]));
	size_t small[64];
	for (int i = 0; i < 64; i++)
		small[i] = (size_t)(i * 37) % 200;
	for (int k = 0; k < 200; k++)
		batch_roundtrip(c, s, small, 1 + (size_t)k % 64);
	/* and the other direction at once */
	batch_roundtrip(s, c, mixed, sizeof(mixed) / sizeof(mixed[0]));
	zl_close(c);
	zl_close(s);
	too_big(scheme);
	full(scheme);
	printf("chan_sendv %s: ok\n", scheme);
	return 0;
}
