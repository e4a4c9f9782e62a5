/* SPDX-License-Identifier: MIT */
/*
 * chan_timeout SCHEME: timeout semantics (0 polls -> -EAGAIN, else
 * -ETIMEDOUT in time) for accept, recv, peek, send into a full channel and
 * wait_writable; a send that timed out delivered nothing; connecting to
 * nobody is refused quickly; a silent client stalls accept only for the
 * handshake timeout.
 */
#include "chanlib.h"

#define MSG 1000
#define TMO 5000000

static char url[600];
static struct tl_pipe to_child, to_parent;
static size_t big_len;

/* elapsed must be in [lo_ms, hi_ms] */
#define CHECK_TIME(t0, lo_ms, hi_ms, what)                                            \
	do {                                                                          \
		int64_t el_ = tl_now_us() - (t0);                                     \
		CHECKF(el_ >= (lo_ms) * 1000 && el_ <= (hi_ms) * 1000,                \
		       "%s took %.1f ms, expected %d..%d ms", what, el_ / 1000.0, lo_ms, hi_ms); \
	} while (0)

static int peer(void *arg)
{
	(void)arg;
	zl_channel *ch = tl_connect(url, TMO);
	struct {
		uint64_t count;
		int big;
	} msg;
	tl_pipe_get(&to_child, &msg, sizeof(msg), 20000);
	uint8_t *buf = malloc(big_len);
	CHECK(buf);
	/* exactly the accepted messages, complete, in order */
	for (uint64_t i = 0; i < msg.count; i++) {
		size_t len = msg.big && i == msg.count - 1 ? big_len : MSG;
		tl_recv_expect(ch, buf, big_len, len, i, TMO);
	}
	size_t len;
	int rc = zl_recv(ch, buf, big_len, &len, 200000);
	CHECKF(rc == -ETIMEDOUT, "an extra message (rc %d, %zu bytes) after the %" PRIu64
	       " accepted ones", rc, len, msg.count);
	tl_pipe_put(&to_parent, "k", 1);
	/* stay until the parent is done */
	rc = zl_recv(ch, buf, big_len, &len, TMO);
	CHECK(rc == -ECONNRESET || rc == 0);
	zl_close(ch);
	free(buf);
	return 0;
}

static void accept_and_connect(const char *scheme, zl_listener *l)
{
	zl_channel *ch = NULL;
	int64_t t0 = tl_now_us();
	CHECK_RC(zl_accept(l, 0, &ch), -EAGAIN);
	CHECK_TIME(t0, 0, 100, "zl_accept(0)");
	t0 = tl_now_us();
	CHECK_RC(zl_accept(l, 20000, &ch), -ETIMEDOUT);
	CHECK_TIME(t0, 20, 200, "zl_accept(20 ms)");

	char dead[600];
	tl_dead_url(scheme, dead, sizeof(dead));
	t0 = tl_now_us();
	CHECK_RC(zl_connect(dead, NULL, 2000000, &ch), -ECONNREFUSED);
	CHECK_TIME(t0, 0, 500, "zl_connect to nobody");
	t0 = tl_now_us();
	CHECK_RC(zl_connect(dead, NULL, 0, &ch), -ECONNREFUSED);
	CHECK_TIME(t0, 0, 500, "zl_connect(0) to nobody");
}

/* A client that connects and never says a word: accept gives up after the
 * listener's handshake timeout (200 ms here), not the default 5 s. */
static void silent_client(const char *scheme)
{
	char u[600];
	zl_listener *l = tl_listen(scheme, "handshake_timeout_us=200000", u, sizeof(u));
	int fd = tl_raw_connect(u);
	zl_channel *ch = NULL;
	int64_t t0 = tl_now_us();
	int rc = zl_accept(l, 100000, &ch);
	CHECKF(rc == -ETIMEDOUT || rc == -EPROTO, "accept with a silent client: %d (%s)", rc,
	       zl_strerror(rc));
	CHECK_TIME(t0, 0, 1000, "zl_accept with a silent client");
	close(fd);
	zl_listener_close(l);
}

int main(int argc, char **argv)
{
	const char *scheme = tl_scheme_arg(argc, argv);
	tl_watchdog(60);
	zl_listener *l = tl_listen(scheme, "ring=65536", url, sizeof(url));
	accept_and_connect(scheme, l);
	silent_client(scheme);

	big_len = 3 * 65536;
	tl_pipe_init(&to_child);
	tl_pipe_init(&to_parent);
	pid_t pid = tl_fork(peer, NULL, 50);
	zl_channel *ch = tl_accept(l, TMO);

	/* receive side: nothing there */
	uint8_t *buf = malloc(big_len);
	CHECK(buf);
	size_t len;
	const void *p;
	int64_t t0 = tl_now_us();
	CHECK_RC(zl_recv(ch, buf, MSG, &len, 0), -EAGAIN);
	CHECK_RC(zl_recv_peek(ch, &p, &len, 0), -EAGAIN);
	CHECK_TIME(t0, 0, 100, "zl_recv(0)");
	for (int i = 0; i < 3; i++) {
		t0 = tl_now_us();
		CHECK_RC(zl_recv(ch, buf, MSG, &len, 20000), -ETIMEDOUT);
		CHECK_TIME(t0, 20, 200, "zl_recv(20 ms)");
	}
	t0 = tl_now_us();
	CHECK_RC(zl_recv_peek(ch, &p, &len, 20000), -ETIMEDOUT);
	CHECK_TIME(t0, 20, 200, "zl_recv_peek(20 ms)");

	/* send side: fill the channel (the peer does not read yet) */
	uint64_t n = 0;
	for (;;) {
		tl_fill(buf, MSG, n);
		int rc = zl_send(ch, buf, MSG, 0);
		if (rc == -EAGAIN)
			break;
		CHECKF(rc == 0, "zl_send(0) while filling: %d (%s)", rc, zl_strerror(rc));
		CHECKF(++n < 1000000, "the channel never filled up");
	}
	/* a stream socket may find room again as the kernel moves data on:
	 * keep going until a bounded send really times out */
	for (int tries = 0;; tries++) {
		tl_fill(buf, MSG, n);
		t0 = tl_now_us();
		int rc = zl_send(ch, buf, MSG, 20000);
		if (rc == 0) {
			n++;
			CHECKF(tries < 1000, "zl_send(20 ms) never timed out");
			continue;
		}
		CHECK_RC(rc, -ETIMEDOUT);
		CHECK_TIME(t0, 20, 200, "zl_send(20 ms) into a full channel");
		break;
	}
	CHECK_RC(zl_send(ch, buf, MSG, 0), -EAGAIN);
	CHECK_RC(zl_wait_writable(ch, MSG, 0), -EAGAIN);
	t0 = tl_now_us();
	CHECK_RC(zl_wait_writable(ch, MSG, 20000), -ETIMEDOUT);
	CHECK_TIME(t0, 20, 200, "zl_wait_writable(20 ms)");
	/* a fragmented message: either not accepted at all, or accepted with
	 * its rest kept for zl_flush */
	tl_fill(buf, big_len, n);
	int rc = zl_send(ch, buf, big_len, 20000);
	CHECKF(rc == 0 || rc == -ETIMEDOUT, "big zl_send: %d (%s)", rc, zl_strerror(rc));
	struct {
		uint64_t count;
		int big;
	} msg = { n + (rc == 0), rc == 0 };
	printf("%s: channel full after %" PRIu64 " x %d bytes; big message %s\n", scheme, n, MSG,
	       rc ? "not accepted" : "accepted (rest pending)");

	tl_pipe_put(&to_child, &msg, sizeof(msg));
	CHECK_OK(zl_flush(ch, TMO));
	char k;
	tl_pipe_get(&to_parent, &k, 1, 20000);
	zl_close(ch);
	tl_reap_ok(pid, 10000);
	zl_listener_close(l);
	free(buf);
	return T_EXIT_PASS;
}
