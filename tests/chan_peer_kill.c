/* SPDX-License-Identifier: MIT */
/*
 * chan_peer_kill SCHEME: the peer process dies (SIGKILL) or closes.
 *   a) we block in zl_recv(-1): -ECONNRESET within 2 s of the death
 *   b) we block in zl_send(-1) into a full channel: -ECONNRESET or -EPIPE
 *      within 2 s
 *   c) the peer sends 3 messages and zl_close()s: we get all 3, then
 *      -ECONNRESET (also with timeout -1, and again afterwards)
 * A watchdog turns a hang into a failure.
 */
#include <sys/wait.h>

#include "chanlib.h"

#define TMO 5000000
#define MSG 4096

static char url[600];
static struct tl_pipe to_child;

static int peer_die_after_100ms(void *arg)
{
	(void)arg;
	zl_channel *ch = tl_connect(url, TMO);
	(void)ch;
	tl_sleep_us(100000);
	raise(SIGKILL);
	return 1;
}

static int peer_die_on_signal(void *arg)
{
	(void)arg;
	zl_channel *ch = tl_connect(url, TMO);
	(void)ch;
	char c;
	tl_pipe_get(&to_child, &c, 1, 20000); /* the parent has filled the channel */
	tl_sleep_us(100000);
	raise(SIGKILL);
	return 1;
}

static int peer_send3_close(void *arg)
{
	(void)arg;
	zl_channel *ch = tl_connect(url, TMO);
	for (uint64_t i = 0; i < 3; i++)
		tl_send_pattern(ch, 100 * (i + 1), i, TMO);
	zl_close(ch);
	return 0;
}

static void expect_killed(pid_t pid)
{
	int rc = tl_wait_child(pid, 5000);
	CHECKF(rc == 128 + SIGKILL, "peer exit status %d", rc);
}

static zl_channel *start(const char *scheme, int (*fn)(void *), pid_t *pid)
{
	zl_listener *l = tl_listen(scheme, "ring=65536", url, sizeof(url));
	*pid = tl_fork(fn, NULL, 30);
	zl_channel *ch = tl_accept(l, TMO);
	zl_listener_close(l);
	return ch;
}

static void killed_while_receiving(const char *scheme)
{
	pid_t pid;
	zl_channel *ch = start(scheme, peer_die_after_100ms, &pid);
	uint8_t buf[64];
	size_t len;
	int64_t t0 = tl_now_us();
	alarm(10);
	int rc = zl_recv(ch, buf, sizeof(buf), &len, -1);
	alarm(60);
	int64_t dt = tl_now_us() - t0;
	CHECK_RC(rc, -ECONNRESET);
	CHECKF(dt < 2100000, "zl_recv noticed the death after %.0f ms", dt / 1e3);
	CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, 0), -ECONNRESET);
	CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, -1), -ECONNRESET);
	int s = zl_send(ch, buf, 8, 0);
	CHECKF(s == -ECONNRESET || s == -EPIPE, "send to a dead peer: %d", s);
	printf("a) recv(-1) -> -ECONNRESET %.1f ms after start (peer died at ~100 ms)\n", dt / 1e3);
	expect_killed(pid);
	zl_close(ch);
}

static void killed_while_sending(const char *scheme)
{
	tl_pipe_init(&to_child);
	pid_t pid;
	zl_channel *ch = start(scheme, peer_die_on_signal, &pid);
	uint8_t *buf = calloc(1, MSG);
	CHECK(buf);
	uint64_t n = 0;
	int rc;
	while ((rc = zl_send(ch, buf, MSG, 0)) == 0)
		CHECKF(++n < 100000, "the channel never filled up");
	CHECK_RC(rc, -EAGAIN);
	tl_pipe_put(&to_child, "x", 1);
	int64_t t0 = tl_now_us();
	alarm(10);
	do
		rc = zl_send(ch, buf, MSG, -1); /* blocks until the peer is gone */
	while (rc == 0 && ++n < 200000);
	alarm(60);
	int64_t dt = tl_now_us() - t0;
	CHECKF(rc == -ECONNRESET || rc == -EPIPE, "blocked zl_send: %d (%s)", rc, zl_strerror(rc));
	CHECKF(dt < 2100000, "zl_send noticed the death after %.0f ms", dt / 1e3);
	printf("b) send(-1) into a full channel (%" PRIu64 " x %d bytes) -> %s %.1f ms after "
	       "the kill was ordered\n",
	       n, MSG, zl_strerror(rc), dt / 1e3);
	expect_killed(pid);
	zl_close(ch);
	free(buf);
	close(to_child.rd);
	close(to_child.wr);
}

static void graceful_close(const char *scheme)
{
	pid_t pid;
	zl_channel *ch = start(scheme, peer_send3_close, &pid);
	tl_reap_ok(pid, 10000); /* it has closed before we read anything */
	uint8_t buf[1024];
	for (uint64_t i = 0; i < 3; i++)
		tl_recv_expect(ch, buf, sizeof(buf), 100 * (i + 1), i, TMO);
	size_t len;
	alarm(10);
	CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, -1), -ECONNRESET);
	alarm(60);
	CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, 0), -ECONNRESET);
	const void *p;
	CHECK_RC(zl_recv_peek(ch, &p, &len, 0), -ECONNRESET);
	int s = zl_send(ch, buf, 8, TMO);
	CHECKF(s == -ECONNRESET || s == -EPIPE, "send after the peer closed: %d", s);
	printf("c) 3 messages, then -ECONNRESET\n");
	zl_close(ch);
}

int main(int argc, char **argv)
{
	const char *scheme = tl_scheme_arg(argc, argv);
	tl_watchdog(60);
	killed_while_receiving(scheme);
	tl_watchdog(60);
	killed_while_sending(scheme);
	tl_watchdog(60);
	graceful_close(scheme);
	return T_EXIT_PASS;
}
