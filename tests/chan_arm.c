/* SPDX-License-Identifier: MIT */
/*
 * chan_arm SCHEME: zl_channel_arm, the manual-mode contract.
 *   - -EINVAL on NULL; 0 on an empty channel (armed);
 *   - manual mode: once armed, 10,000 empty zl_recv(..., 0) add nothing to
 *     info.arms and info.fences, and on ring transports (shm) nothing to
 *     info.syscalls either (on tcp/unix every empty receive is a read(2));
 *   - the peer sends (20 ms after our go, while we sleep in poll): the fd
 *     polls readable, zl_channel_arm says -EBUSY (again and again) until the
 *     message is received, then 0 again;
 *   - the peer closes (zl_close), or sends one message and dies (SIGKILL):
 *     the fd polls readable, zl_channel_arm says -EBUSY, the message sent
 *     before comes first, then zl_recv says -ECONNRESET (and arm stays
 *     -EBUSY: a receive would not say -EAGAIN).
 * The peer is a forked process driven over a pipe.
 */
#include <poll.h>

#include "chanlib.h"

#define TMO 5000000
#define ROUNDS 5
#define EMPTY_POLLS 10000

static char url[600];
static struct tl_pipe to_child;

/* Commands: 's' send the next message (after 20 ms), 'c' zl_close and
 * exit, 'k' send one more message and die without closing. */
static int peer(void *arg)
{
	(void)arg;
	zl_channel *ch = tl_connect(url, TMO);
	for (uint64_t id = 0;; id++) {
		char c;
		tl_pipe_get(&to_child, &c, 1, 30000);
		tl_sleep_us(20000); /* the parent sleeps in poll(2) by then */
		if (c == 'c') {
			zl_close(ch);
			return T_EXIT_PASS;
		}
		tl_send_pattern(ch, 100 + id, id, TMO);
		if (c == 'k')
			raise(SIGKILL);
	}
}

/* poll(2) the fd until readable; FAIL after 2 s. Returns the wait in us. */
static int64_t wait_readable(int fd, const char *what)
{
	int64_t t0 = tl_now_us(), end = t0 + 2000000;
	for (;;) {
		int64_t left = (end - tl_now_us()) / 1000;
		CHECKF(left > 0, "%s: zl_channel_fd not readable within 2 s", what);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int n = poll(&p, 1, (int)left + 1);
		CHECK(n >= 0 || errno == EINTR);
		if (n > 0)
			return tl_now_us() - t0;
	}
}

static void info_of(zl_channel *ch, struct zl_channel_info *i)
{
	CHECK_OK(zl_channel_info(ch, i));
}

/* Failures of the counter and -EBUSY checks are noted and the test goes on, so that
 * one run shows every broken part of the contract; main fails at the end. */
static int soft_failures;
#define SOFT_CHECK_EQ(got, want)                                                   \
	do {                                                                       \
		uint64_t g_ = (got), w_ = (want);                                  \
		if (g_ != w_) {                                                    \
			fprintf(stderr, "%s:%d: FAIL: %s == %" PRIu64 ", expected %" PRIu64 "\n", \
				__FILE__, __LINE__, #got, g_, w_);                 \
			soft_failures++;                                           \
		}                                                                  \
	} while (0)

/* Armed and empty: EMPTY_POLLS zl_recv(..., 0) cost nothing: no arm, no
 * fence, and on a ring no system call (on tcp/unix every empty receive is
 * a read(2), counted in syscalls: only arms and fences are checked). */
static void manual_mode(zl_channel *ch, bool ring)
{
	struct zl_channel_info a, b;
	uint8_t buf[256];
	size_t len;
	info_of(ch, &a);
	for (int i = 0; i < EMPTY_POLLS; i++)
		CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, 0), -EAGAIN);
	info_of(ch, &b);
	printf("%s: %d empty polls after an arm: +%" PRIu64 " syscalls, +%" PRIu64
	       " arms, +%" PRIu64 " fences\n", a.transport, EMPTY_POLLS, b.syscalls - a.syscalls,
	       b.arms - a.arms, b.fences - a.fences);
	SOFT_CHECK_EQ(b.arms - a.arms, 0);
	SOFT_CHECK_EQ(b.fences - a.fences, 0);
	if (ring)
		SOFT_CHECK_EQ(b.syscalls - a.syscalls, 0);
}

/* Until received, arm keeps saying -EBUSY. */
static void expect_busy(zl_channel *ch, const char *what)
{
	for (int i = 0; i < 3; i++) {
		int rc = zl_channel_arm(ch);
		if (rc != -EBUSY) {
			fprintf(stderr, "%s:%d: FAIL: %s: zl_channel_arm (call %d) = %d (%s), "
				"expected -EBUSY\n", __FILE__, __LINE__, what, i + 1, rc,
				zl_strerror(rc));
			soft_failures++;
			return;
		}
	}
}

static zl_channel *session(zl_listener *l, pid_t *pid)
{
	*pid = tl_fork(peer, NULL, 50);
	return tl_accept(l, TMO);
}

int main(int argc, char **argv)
{
	const char *scheme = tl_scheme_arg(argc, argv);
	tl_watchdog(60);
	tl_pipe_init(&to_child);
	CHECK_RC(zl_channel_arm(NULL), -EINVAL);
	zl_listener *l = tl_listen(scheme, "", url, sizeof(url));
	uint8_t buf[1024];
	size_t len;

	/* ---- session 1: messages, manual mode, then the peer closes */
	pid_t pid;
	zl_channel *ch = session(l, &pid);
	struct zl_channel_info info;
	info_of(ch, &info);
	bool ring = info.ring_size != 0;
	/* before any zl_channel_fd: arm makes the fd itself */
	CHECK_RC(zl_channel_arm(ch), 0);
	int fd = zl_channel_fd(ch);
	CHECKF(fd >= 0, "zl_channel_fd = %d (%s)", fd, zl_strerror(fd));
	CHECK_RC(zl_channel_arm(ch), 0); /* still nothing: armed again */
	manual_mode(ch, ring);

	uint64_t id = 0;
	for (; id < ROUNDS; id++) {
		CHECK_RC(zl_channel_arm(ch), 0);
		tl_pipe_put(&to_child, "s", 1);
		int64_t dt = wait_readable(fd, "message");
		expect_busy(ch, "a message waits");
		tl_recv_expect(ch, buf, sizeof(buf), 100 + id, id, 0);
		CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, 0), -EAGAIN);
		CHECK_RC(zl_channel_arm(ch), 0);
		printf("round %" PRIu64 ": fd readable after %.3f ms (the send was 20 ms after go)\n",
		       id, dt / 1e3);
		/* armed, empty again: still free */
		if (id == ROUNDS - 1)
			manual_mode(ch, ring);
	}
	info_of(ch, &info);
	printf("%s: after %d rounds: arms %" PRIu64 ", fences %" PRIu64 ", syscalls %" PRIu64
	       ", sleeps %" PRIu64 "\n", info.transport, ROUNDS, info.arms, info.fences,
	       info.syscalls, info.sleeps);

	CHECK_RC(zl_channel_arm(ch), 0);
	tl_pipe_put(&to_child, "c", 1);
	wait_readable(fd, "peer closed");
	expect_busy(ch, "the peer closed");
	CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, 0), -ECONNRESET);
	expect_busy(ch, "after -ECONNRESET");
	CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, 0), -ECONNRESET);
	tl_reap_ok(pid, 5000);
	zl_close(ch);

	/* ---- session 2: one message, then the peer dies without closing */
	ch = session(l, &pid);
	CHECK_RC(zl_channel_arm(ch), 0);
	fd = zl_channel_fd(ch);
	CHECK(fd >= 0);
	tl_pipe_put(&to_child, "k", 1);
	wait_readable(fd, "message, then death");
	CHECKF(tl_wait_child(pid, 5000) == 128 + SIGKILL, "the peer did not die");
	expect_busy(ch, "a message waits and the peer died");
	tl_recv_expect(ch, buf, sizeof(buf), 100, 0, 0);
	expect_busy(ch, "the peer died");
	CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, 0), -ECONNRESET);
	expect_busy(ch, "after -ECONNRESET");
	zl_close(ch);

	/* ---- session 3: the peer dies while we sleep on the armed fd */
	ch = session(l, &pid);
	CHECK_RC(zl_channel_arm(ch), 0);
	fd = zl_channel_fd(ch);
	CHECK(fd >= 0);
	tl_pipe_put(&to_child, "s", 1);
	wait_readable(fd, "message");
	expect_busy(ch, "a message waits");
	tl_recv_expect(ch, buf, sizeof(buf), 100, 0, 0);
	CHECK_RC(zl_channel_arm(ch), 0);
	kill(pid, SIGKILL);
	CHECKF(tl_wait_child(pid, 5000) == 128 + SIGKILL, "the peer did not die");
	wait_readable(fd, "peer killed");
	expect_busy(ch, "the peer was killed");
	CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, 0), -ECONNRESET);
	zl_close(ch);

	zl_listener_close(l);
	CHECKF(!soft_failures, "%d checks failed (above)", soft_failures);
	return T_EXIT_PASS;
}
