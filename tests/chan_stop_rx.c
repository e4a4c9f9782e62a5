/* SPDX-License-Identifier: MIT */
/*
 * chan_stop_rx SCHEME: a hostile receiver that stops reading (here: a peer
 * process stopped with SIGSTOP, which answers nothing at all, not even a
 * sender's demand for its read position) never makes the sender block
 * beyond its timeout. Once the channel is full: zl_send, zl_sendv and
 * zl_wait_writable with timeout 0 give -EAGAIN at once and with 200 ms
 * -ETIMEDOUT after 200 ms; zl_send_reserve gives -EAGAIN; a message larger
 * than a ring record, sent when the receiver stopped after reading part of
 * the stream, is accepted or refused within its timeout, and a kept rest
 * is then bounded by zl_flush's; zl_close returns within its linger bound.
 */
#include <signal.h>
#include <sys/wait.h>

#include "chanlib.h"

#define TMO 5000000
#define MSG 1000

static char url[600];
static struct tl_pipe to_child, to_parent;

/* Read `n` messages (as told), then stop this process. */
static int reader(void *arg)
{
	(void)arg;
	zl_channel *ch = tl_connect(url, TMO);
	uint64_t n;
	tl_pipe_get(&to_child, &n, sizeof(n), 20000);
	static uint8_t buf[1 << 20];
	size_t len;
	for (uint64_t i = 0; i < n; i++)
		CHECK_OK(zl_recv(ch, buf, sizeof(buf), &len, TMO));
	tl_pipe_put(&to_parent, "r", 1);
	raise(SIGSTOP);
	return 0; /* killed while stopped */
}

/* An upper time bound: only reported in a scaled-down (sanitizer) run. */
static void check_bound(int64_t el_us, int hi_ms, const char *what)
{
	if (el_us <= hi_ms * 1000)
		return;
	if (tl_scaled_down())
		printf("note: %s took %.1f ms (bound %d ms; not checked under sanitizers)\n", what,
		       el_us / 1000.0, hi_ms);
	else
		FAIL("%s took %.1f ms, expected at most %d ms", what, el_us / 1000.0, hi_ms);
}

/* elapsed must be in [lo_ms, hi_ms] */
static void check_time(int64_t t0, int lo_ms, int hi_ms, const char *what, int rc, int want)
{
	int64_t el = tl_now_us() - t0;
	CHECKF(rc == want, "%s returned %d (%s), expected %d", what, rc, zl_strerror(rc), want);
	CHECKF(el >= lo_ms * 1000, "%s took %.1f ms, expected at least %d ms", what, el / 1000.0,
	       lo_ms);
	check_bound(el, hi_ms, what);
}

static void wait_stopped(pid_t pid)
{
	int st;
	CHECK(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st));
}

/* Fill the channel with MSG-byte messages until -EAGAIN. */
static uint64_t fill_up(zl_channel *ch)
{
	static uint8_t m[MSG];
	uint64_t n = 0;
	int rc;
	while ((rc = zl_send(ch, m, MSG, 0)) == 0)
		CHECKF(++n < 100000000, "the channel never filled");
	CHECK_RC(rc, -EAGAIN);
	/* TCP moves what we sent on into the stopped peer's receive buffer
	 * for a while: fill until no room comes within 100 ms */
	while ((rc = zl_send(ch, m, MSG, 100000)) == 0)
		CHECKF(++n < 100000000, "the channel never filled");
	CHECK_RC(rc, -ETIMEDOUT);
	return n;
}

static void full_channel(const char *scheme)
{
	zl_listener *l = tl_listen(scheme, "ring=65536", url, sizeof(url));
	pid_t pid = tl_fork(reader, NULL, 60);
	zl_channel *ch = tl_accept(l, TMO);
	zl_listener_close(l);
	uint64_t zero = 0;
	tl_pipe_put(&to_child, &zero, sizeof(zero));
	char c;
	tl_pipe_get(&to_parent, &c, 1, 20000);
	wait_stopped(pid);
	uint64_t n = fill_up(ch);
	static uint8_t m[MSG];
	struct zl_msgvec v[4] = { { m, MSG }, { m, MSG }, { m, 8 }, { m, 0 } };
	void *p;
	int64_t t0 = tl_now_us();
	check_time(t0, 0, 100, "zl_send(0)", zl_send(ch, m, MSG, 0), -EAGAIN);
	t0 = tl_now_us();
	check_time(t0, 190, 1500, "zl_send(200 ms)", zl_send(ch, m, MSG, 200000), -ETIMEDOUT);
	t0 = tl_now_us();
	check_time(t0, 0, 100, "zl_sendv(0)", zl_sendv(ch, v, 4, 0), -EAGAIN);
	t0 = tl_now_us();
	check_time(t0, 190, 1500, "zl_sendv(200 ms)", zl_sendv(ch, v, 4, 200000), -ETIMEDOUT);
	t0 = tl_now_us();
	check_time(t0, 190, 1500, "zl_wait_writable(200 ms)",
		   zl_wait_writable(ch, MSG, 200000), -ETIMEDOUT);
	t0 = tl_now_us();
	int rc = zl_send_reserve(ch, MSG, &p);
	if ((!strcmp(scheme, "tcp") || !strcmp(scheme, "unix")) && rc != -EAGAIN) {
		/* streams stage a reservation in their own buffer (unless the
		 * rest of a frame is kept there: -EAGAIN): the commit then
		 * keeps it, and only later calls wait */
		CHECK_OK(rc);
		CHECK_OK(zl_send_commit(ch, MSG));
		t0 = tl_now_us();
		check_time(t0, 190, 1500, "zl_flush(200 ms) of a committed reservation",
			   zl_flush(ch, 200000), -ETIMEDOUT);
	} else {
		check_time(t0, 0, 100, "zl_send_reserve", rc, -EAGAIN);
	}
	t0 = tl_now_us();
	zl_close(ch);
	int64_t el = tl_now_us() - t0;
	check_bound(el, 1000, "zl_close");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	printf("full channel (%" PRIu64 " messages of %d B), receiver stopped: every call "
	       "bounded; zl_close %.1f ms\n", n, MSG, el / 1000.0);
}

/* The receiver stops after part of the stream; a fragmented message. */
static void big_message(const char *scheme)
{
	zl_listener *l = tl_listen(scheme, "ring=65536", url, sizeof(url));
	pid_t pid = tl_fork(reader, NULL, 60);
	zl_channel *ch = tl_accept(l, TMO);
	zl_listener_close(l);
	uint64_t half = 10;
	tl_pipe_put(&to_child, &half, sizeof(half));
	static uint8_t m[MSG];
	for (uint64_t i = 0; i < half; i++)
		CHECK_OK(zl_send(ch, m, MSG, TMO));
	char c;
	tl_pipe_get(&to_parent, &c, 1, 20000);
	wait_stopped(pid);
	size_t big = 32 << 20; /* many ring records, more than TCP buffers grow to */
	uint8_t *b = calloc(1, big);
	CHECK(b);
	int64_t t0 = tl_now_us();
	int rc = zl_send(ch, b, big, 200000);
	int64_t el = tl_now_us() - t0;
	/* accepted with its rest kept (0), or refused with nothing sent */
	CHECKF(rc == 0 || rc == -ETIMEDOUT, "zl_send of %zu B: %d (%s)", big, rc,
	       zl_strerror(rc));
	CHECKF(el >= 190000 * (rc == -ETIMEDOUT), "zl_send(200 ms) of %zu B took %.1f ms", big,
	       el / 1000.0);
	check_bound(el, 1500, "zl_send(200 ms) of a big message");
	t0 = tl_now_us();
	int frc = zl_flush(ch, 200000);
	if (rc == 0 && frc)
		check_time(t0, 190, 1500, "zl_flush(200 ms) of the kept rest", frc, -ETIMEDOUT);
	else
		check_time(t0, 0, 1500, "zl_flush", frc, 0);
	t0 = tl_now_us();
	check_time(t0, 190, 1500, "zl_send(200 ms) behind it", zl_send(ch, m, MSG, 200000),
		   -ETIMEDOUT);
	t0 = tl_now_us();
	zl_close(ch);
	el = tl_now_us() - t0;
	check_bound(el, 1000, "zl_close");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	free(b);
	printf("%zu B message to a stopped receiver: %s; every call bounded\n", big,
	       rc ? "refused in time" : "accepted, its rest kept");
}

int main(int argc, char **argv)
{
	const char *scheme = tl_scheme_arg(argc, argv);
	tl_watchdog(120);
	signal(SIGPIPE, SIG_IGN);
	tl_pipe_init(&to_child);
	tl_pipe_init(&to_parent);
	full_channel(scheme);
	big_message(scheme);
	printf("chan_stop_rx %s: ok\n", scheme);
	return 0;
}
