/* SPDX-License-Identifier: MIT */
/*
 * chan_fd SCHEME: zl_channel_fd in a poll() loop. After zl_recv(0) gave
 * -EAGAIN, the fd wakes when the peer sends (50 ms later: poll must return
 * after the send and well before its 2 s timeout) and stays quiet while
 * nothing comes; the peer's death makes it readable and zl_recv then says
 * -ECONNRESET.
 */
#include <poll.h>

#include "chanlib.h"

#define TMO 5000000
#define ROUNDS 5

static char url[600];
static struct tl_pipe to_child, to_parent;

static int peer(void *arg)
{
	(void)arg;
	zl_channel *ch = tl_connect(url, TMO);
	for (uint64_t r = 0; r <= ROUNDS; r++) {
		char c;
		tl_pipe_get(&to_child, &c, 1, 20000);
		tl_sleep_us(50000);
		int64_t t = tl_now_us(); /* CLOCK_MONOTONIC: same clock in both processes */
		tl_send_pattern(ch, 100 + r, r, TMO);
		tl_pipe_put(&to_parent, &t, sizeof(t));
	}
	/* the last message is out: die without closing */
	raise(SIGKILL);
	return 1;
}

/* poll until zl_recv returns something other than -EAGAIN; returns it */
static int wait_fd(zl_channel *ch, int fd, void *buf, size_t cap, size_t *len, int *spurious,
		   int64_t *t_ready)
{
	int64_t end = tl_now_us() + 2000000;
	for (;;) {
		int64_t left = (end - tl_now_us()) / 1000;
		CHECKF(left > 0, "poll on zl_channel_fd: nothing within 2 s");
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int n = poll(&p, 1, (int)left);
		CHECK(n >= 0);
		if (n == 0)
			continue;
		*t_ready = tl_now_us();
		int rc = zl_recv(ch, buf, cap, len, 0);
		if (rc != -EAGAIN)
			return rc;
		(*spurious)++;
	}
}

/* nothing is sent: the fd must not keep polling readable (busy loop) */
static void quiet(zl_channel *ch, int fd, void *buf)
{
	int wake = 0;
	int64_t end = tl_now_us() + 100000;
	while (tl_now_us() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 20) > 0) {
			size_t len;
			CHECK_RC(zl_recv(ch, buf, 1024, &len, 0), -EAGAIN);
			wake++;
		}
	}
	CHECKF(wake <= 2, "fd readable %d times in 100 ms with nothing sent", wake);
}

int main(int argc, char **argv)
{
	const char *scheme = tl_scheme_arg(argc, argv);
	tl_watchdog(60);
	tl_pipe_init(&to_child);
	tl_pipe_init(&to_parent);
	zl_listener *l = tl_listen(scheme, "", url, sizeof(url));
	pid_t pid = tl_fork(peer, NULL, 50);
	zl_channel *ch = tl_accept(l, TMO);
	zl_listener_close(l);
	int fd = zl_channel_fd(ch);
	CHECKF(fd >= 0, "zl_channel_fd = %d (%s)", fd, zl_strerror(fd));
	CHECK(zl_channel_fd(ch) == fd);
	CHECK_RC(zl_channel_fd(NULL), -EINVAL);

	uint8_t buf[1024];
	size_t len;
	int spurious = 0;
	for (uint64_t r = 0; r <= ROUNDS; r++) {
		CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, 0), -EAGAIN);
		if (r == 0)
			quiet(ch, fd, buf);
		int64_t t_go = tl_now_us(), t_ready = 0, t_send;
		tl_pipe_put(&to_child, "g", 1);
		int rc = wait_fd(ch, fd, buf, sizeof(buf), &len, &spurious, &t_ready);
		CHECK_RC(rc, 0);
		CHECK(len == 100 + r);
		CHECK_PATTERN(buf, len, r);
		tl_pipe_get(&to_parent, &t_send, sizeof(t_send), 5000);
		CHECKF(t_ready >= t_send, "round %" PRIu64 ": message seen %.3f ms before it was sent",
		       r, (t_send - t_ready) / 1e3);
		CHECKF(t_ready - t_go < 1000000, "round %" PRIu64 ": woke after %.1f ms", r,
		       (t_ready - t_go) / 1e3);
		printf("round %" PRIu64 ": sent 50 ms after go, poll woke %.3f ms after the send\n", r,
		       (t_ready - t_send) / 1e3);
	}
	/* the peer is dead now (or about to be) */
	int death_spurious = 0;
	int64_t t0 = tl_now_us(), t_ready;
	int rc = wait_fd(ch, fd, buf, sizeof(buf), &len, &death_spurious, &t_ready);
	CHECK_RC(rc, -ECONNRESET);
	printf("peer death: -ECONNRESET after %.1f ms, %d readiness events with -EAGAIN before it; "
	       "%d spurious wakeups in the rounds\n",
	       (tl_now_us() - t0) / 1e3, death_spurious, spurious);
	CHECKF(death_spurious <= 3,
	       "the fd said readable %d times after the peer died while zl_recv(0) kept "
	       "returning -EAGAIN (busy loop)", death_spurious);
	CHECKF(spurious <= 2 * (ROUNDS + 1), "%d spurious wakeups", spurious);
	CHECK(tl_wait_child(pid, 5000) == 128 + SIGKILL);
	zl_close(ch);
	return T_EXIT_PASS;
}
