/* SPDX-License-Identifier: MIT */
/*
 * reset_test.c - the kernel's EPIPE and reset rules for stream sockets:
 * sends after the peer's close or shutdown, a close with bytes unread (a
 * reset), the order in which queued bytes, the end of the stream and the
 * error come, and who is told the error once. Each case is named after
 * the rule; it asserts what Linux does, runs plain and preloaded
 * (sem_run.sh) and must print the same transcript both ways.
 *
 *   reset_test tcp4|tcp6|unix [case-name-substring]
 *
 * Each case gets a fresh pair (listener, connected c, accepted s) that
 * first exchanges a byte each way (pair_util.h), so that under the preload
 * both directions have switched before the rule is tried. stdout: "ok
 * NAME", "FAIL NAME: why" or "skip NAME: why" per case. Exit 0 all passed,
 * 1 a case failed, 77 the family is unavailable, 2 usage. Bounds: a 20 s
 * watchdog per case, IO_WAIT_MS per wait.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "sem_util.h"
#include "pair_util.h"
#pragma GCC diagnostic pop

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>

/* After the peer's normal close, TCP lets zero-length sends and the first
 * send succeed (the peer's kernel then resets: EPIPE, and SO_ERROR says
 * so once); a Unix socket fails every send with EPIPE. */
static int case_send_after_close(struct ctx *x)
{
	char b[8];
	int err;
	close_fd(&x->s);
	TRY(wait_for(x->c, POLLIN | POLLRDHUP, "the peer's close"));
	if (x->fam == AF_UNIX) {
		EXPECT_ERR(send(x->c, "", 0, MSG_NOSIGNAL), EPIPE);
		EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), EPIPE);
		EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), EPIPE);
		EXPECT_RET(recv(x->c, b, sizeof b, MSG_DONTWAIT), 0);
		return 0;
	}
	EXPECT_RET(send(x->c, "", 0, MSG_NOSIGNAL), 0);
	EXPECT_RET(send(x->c, "", 0, MSG_NOSIGNAL), 0);
	EXPECT_RET(send(x->c, "a", 1, MSG_NOSIGNAL), 1);
	TRY(wait_for(x->c, POLLIN | POLLOUT | POLLHUP | POLLERR, "the peer's kernel's reset"));
	TRY(so_error(x->c, &err));
	CHECK(err == EPIPE, "SO_ERROR after the reset: %s, want EPIPE", errname(err));
	TRY(so_error(x->c, &err));
	CHECK(err == 0, "SO_ERROR again: %s, want 0", errname(err));
	EXPECT_ERR(send(x->c, "", 0, MSG_NOSIGNAL), EPIPE);
	EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), EPIPE);
	EXPECT_RET(recv(x->c, b, sizeof b, MSG_DONTWAIT), 0);
	return 0;
}

/* A Unix peer's shutdown(SHUT_RD) fails our sends with EPIPE (its kernel
 * marks our side shut for sending); our reading side stays open, and
 * poll says HUP once we shut ours too. TCP tells the sender nothing. */
static int case_peer_shut_rd(struct ctx *x)
{
	char b[8];
	if (x->fam != AF_UNIX) {
		EXPECT_RET(shutdown(x->s, SHUT_RD), 0);
		EXPECT_RET(send(x->c, "a", 1, MSG_NOSIGNAL), 1);
		return 0;
	}
	EXPECT_RET(shutdown(x->s, SHUT_RD), 0);
	EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), EPIPE);
	EXPECT_ERR(send(x->c, "", 0, MSG_NOSIGNAL), EPIPE);
	EXPECT_RET(send(x->s, "back", 4, MSG_NOSIGNAL), 4);
	TRY(wait_for(x->c, POLLIN, "the bytes of the side that still sends"));
	EXPECT_RET(recv(x->c, b, sizeof b, MSG_DONTWAIT), 4);
	struct pollfd p = { x->c, POLLIN | POLLOUT | POLLRDHUP, 0 };
	EXPECT_RET(poll(&p, 1, 0), 1);
	CHECK(!(p.revents & POLLHUP), "HUP before our own shutdown: 0x%x", (unsigned)p.revents);
	EXPECT_RET(shutdown(x->c, SHUT_RD), 0);
	p.revents = 0;
	EXPECT_RET(poll(&p, 1, 0), 1);
	CHECK(p.revents & POLLHUP, "no HUP with both ways shut: 0x%x", (unsigned)p.revents);
	return 0;
}

struct shut_later {
	int fd;
};

/* Fill x->c's way to the peer until a send would block (*filled: the
 * bytes, if asked), then give its blocking sends a 5 s bound, far above
 * the waits of the cases that use it. */
static int fill_c(struct ctx *x, long *filled)
{
	static char chunk[1 << 16];
	int fl = fcntl(x->c, F_GETFL);
	CHECK(fl >= 0 && !fcntl(x->c, F_SETFL, fl | O_NONBLOCK), "fcntl: %s", errname(errno));
	ssize_t k;
	for (int i = 0; i < 4096 && (k = send(x->c, chunk, sizeof chunk, MSG_NOSIGNAL)) > 0; i++)
		if (filled)
			*filled += k;
	CHECK(errno == EAGAIN, "filling: %s, want EAGAIN", errname(errno));
	CHECK(!fcntl(x->c, F_SETFL, fl), "fcntl: %s", errname(errno));
	struct timeval tv = { 5, 0 };
	CHECK(!setsockopt(x->c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv), "SO_SNDTIMEO: %s",
	      errname(errno));
	return 0;
}

static void *shut_rd_later(void *arg)
{
	struct shut_later *l = arg;
	usleep(100 * 1000);
	shutdown(l->fd, SHUT_RD);
	return NULL;
}

/* A sender blocked on a full Unix socket wakes with EPIPE when the peer
 * shuts its reading side (the kernel wakes it); TCP: skipped (the sender
 * is told nothing). */
static int case_peer_shut_rd_wakes_sender(struct ctx *x)
{
	if (x->fam != AF_UNIX)
		return 0;
	static char big[1 << 16];
	TRY(fill_c(x, NULL));
	struct shut_later l = { x->s };
	pthread_t t;
	CHECK(!pthread_create(&t, NULL, shut_rd_later, &l), "pthread_create");
	errno = 0;
	ssize_t r = send(x->c, big, sizeof big, MSG_NOSIGNAL);
	int e = errno;
	pthread_join(t, NULL);
	CHECK(r < 0 && e == EPIPE, "blocked send: %zd %s, want -1 EPIPE", r, errname(e));
	return 0;
}

static void *shut_wr_later(void *arg)
{
	struct shut_later *l = arg;
	usleep(100 * 1000);
	shutdown(l->fd, SHUT_WR);
	return NULL;
}

/* A sender blocked on a full socket wakes with EPIPE when another thread
 * of its process shuts the sending side (the kernel wakes it), and
 * nothing of its send reaches the peer, which reads what came before,
 * then the end of the stream. */
static int case_own_shut_wr_wakes_sender(struct ctx *x)
{
	static char big[1 << 16], sink[1 << 16];
	long filled = 0;
	TRY(fill_c(x, &filled));
	struct shut_later l = { x->c };
	pthread_t t;
	CHECK(!pthread_create(&t, NULL, shut_wr_later, &l), "pthread_create");
	errno = 0;
	ssize_t r = send(x->c, big, sizeof big, MSG_NOSIGNAL);
	int e = errno;
	pthread_join(t, NULL);
	CHECK(r < 0 && e == EPIPE, "blocked send: %zd %s, want -1 EPIPE", r, errname(e));
	long got = 0;
	for (;;) {
		TRY(wait_for(x->s, POLLIN, "the sender's bytes"));
		ssize_t n = recv(x->s, sink, sizeof sink, MSG_DONTWAIT);
		CHECK(n >= 0, "reading: %s after %ld of %ld bytes", errname(errno), got, filled);
		if (!n)
			break;
		got += n;
	}
	CHECK(got == filled, "the peer read %ld bytes, %ld were sent", got, filled);
	return 0;
}

/* ... and so does a splice blocked on the full socket. */
static int case_own_shut_wr_wakes_splice(struct ctx *x)
{
	static char big[1 << 16];
	int p[2];
	TRY(fill_c(x, NULL));
	CHECK(!pipe2(p, O_CLOEXEC), "pipe: %s", errname(errno));
	CHECK(write(p[1], big, 4096) == 4096, "pipe write: %s", errname(errno));
	struct shut_later l = { x->c };
	pthread_t t;
	CHECK(!pthread_create(&t, NULL, shut_wr_later, &l), "pthread_create");
	errno = 0;
	ssize_t r = splice(p[0], NULL, x->c, NULL, 4096, 0);
	int e = errno;
	pthread_join(t, NULL);
	close(p[0]);
	close(p[1]);
	CHECK(r < 0 && e == EPIPE, "blocked splice: %zd %s, want -1 EPIPE", r, errname(e));
	return 0;
}

/* ... and a poll for room on it (TCP: POLLOUT once the sending side is
 * shut; a Unix socket shows none). */
static int case_own_shut_wr_wakes_poll(struct ctx *x)
{
	if (x->fam == AF_UNIX)
		return skipf("a Unix socket shows no POLLOUT after SHUT_WR");
	TRY(fill_c(x, NULL));
	struct shut_later l = { x->c };
	pthread_t t;
	CHECK(!pthread_create(&t, NULL, shut_wr_later, &l), "pthread_create");
	struct pollfd p = { x->c, POLLOUT, 0 };
	int r = poll(&p, 1, 5000); /* a bound, far above the 100 ms */
	pthread_join(t, NULL);
	CHECK(r == 1 && (p.revents & POLLOUT), "poll: %d, %s; want 1, OUT", r, evname(p.revents));
	return 0;
}

/* The peer closes with bytes of ours unread (a reset): what it had sent
 * before is read first, then ECONNRESET once, then the end; sends fail
 * with EPIPE. */
static int case_reset_queued(struct ctx *x)
{
	char b[16];
	unsigned ev = 0;
	EXPECT_RET(write(x->s, "hello", 5), 5);
	EXPECT_RET(write(x->c, "unread", 6), 6);
	TRY(wait_for(x->s, POLLIN, "our bytes at the peer"));
	TRY(wait_for(x->c, POLLIN, "the peer's bytes"));
	close_fd(&x->s);
	TRY(wait_for(x->c, POLLIN | POLLERR, "the reset"));
	TRY(poll1(x->c, POLLIN | POLLOUT | POLLRDHUP, 0, &ev));
	CHECK((ev & EV_MASK) == (POLLIN | POLLOUT | POLLERR | POLLHUP | POLLRDHUP),
	      "poll after the reset: %s", evname(ev & EV_MASK));
	EXPECT_RET(recv(x->c, b, 3, MSG_DONTWAIT), 3);
	CHECK(!memcmp(b, "hel", 3), "the first bytes differ");
	EXPECT_RET(recv(x->c, b, sizeof b, MSG_DONTWAIT), 2);
	CHECK(!memcmp(b, "lo", 2), "the last bytes differ");
	EXPECT_ERR(recv(x->c, b, sizeof b, MSG_DONTWAIT), ECONNRESET);
	EXPECT_RET(recv(x->c, b, sizeof b, MSG_DONTWAIT), 0);
	EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), EPIPE);
	return 0;
}

/* The same, the error taken by a send first: on TCP the send reports the
 * reset (then EPIPE) and the reads give the bytes and the end; a Unix
 * socket's sends fail with EPIPE and its reads still report the reset. */
static int case_reset_send_first(struct ctx *x)
{
	char b[16];
	EXPECT_RET(write(x->s, "hello", 5), 5);
	EXPECT_RET(write(x->c, "unread", 6), 6);
	TRY(wait_for(x->s, POLLIN, "our bytes at the peer"));
	TRY(wait_for(x->c, POLLIN, "the peer's bytes"));
	close_fd(&x->s);
	TRY(wait_for(x->c, POLLIN | POLLERR, "the reset"));
	if (x->fam == AF_UNIX)
		EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), EPIPE);
	else
		EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), ECONNRESET);
	EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), EPIPE);
	EXPECT_RET(recv(x->c, b, sizeof b, MSG_DONTWAIT), 5);
	if (x->fam == AF_UNIX)
		EXPECT_ERR(recv(x->c, b, sizeof b, MSG_DONTWAIT), ECONNRESET);
	EXPECT_RET(recv(x->c, b, sizeof b, MSG_DONTWAIT), 0);
	return 0;
}

/* TCP: data that reaches a peer which shut both ways is answered with a
 * reset (RFC 1122 4.2.2.13): the sender's send succeeds, its next fails
 * with EPIPE (SO_ERROR says it once); the peer reads what it had queued,
 * then ECONNRESET, then the end; both sockets are closed (shutdown gives
 * ENOTCONN). A Unix socket fails the send at once. */
static int case_data_after_both_shut_resets(struct ctx *x)
{
	char b[16];
	unsigned ev = 0;
	int err;
	EXPECT_RET(write(x->c, "queued", 6), 6);
	TRY(wait_for(x->s, POLLIN, "the bytes at the peer"));
	EXPECT_OK(shutdown(x->s, SHUT_RDWR));
	TRY(wait_for(x->c, POLLIN | POLLRDHUP, "the peer's shutdown"));
	if (x->fam == AF_UNIX) {
		EXPECT_ERR(send(x->c, "x", 1, MSG_NOSIGNAL), EPIPE);
		return 0;
	}
	EXPECT_RET(send(x->c, "", 0, MSG_NOSIGNAL), 0);
	EXPECT_RET(send(x->c, "late", 4, MSG_NOSIGNAL), 4);
	TRY(wait_for(x->c, POLLIN | POLLOUT | POLLHUP | POLLERR, "the peer's kernel's reset"));
	TRY(wait_for(x->s, POLLERR, "the reset at the peer"));
	TRY(poll1(x->s, POLLIN | POLLOUT | POLLRDHUP, 0, &ev));
	CHECK((ev & EV_MASK) == (POLLIN | POLLOUT | POLLERR | POLLHUP | POLLRDHUP),
	      "poll at the peer after the reset: %s", evname(ev & EV_MASK));
	TRY(poll1(x->c, POLLIN | POLLOUT | POLLRDHUP, 0, &ev));
	CHECK((ev & EV_MASK) == (POLLIN | POLLOUT | POLLERR | POLLHUP | POLLRDHUP),
	      "poll after the reset: %s", evname(ev & EV_MASK));
	TRY(so_error(x->c, &err));
	CHECK(err == EPIPE, "SO_ERROR after the reset: %s, want EPIPE", errname(err));
	EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), EPIPE);
	EXPECT_ERR(shutdown(x->c, SHUT_WR), ENOTCONN);
	EXPECT_RET(recv(x->s, b, sizeof b, MSG_DONTWAIT), 6);
	CHECK(!memcmp(b, "queued", 6), "the queued bytes differ");
	EXPECT_ERR(recv(x->s, b, sizeof b, MSG_DONTWAIT), ECONNRESET);
	EXPECT_RET(recv(x->s, b, sizeof b, MSG_DONTWAIT), 0);
	EXPECT_ERR(shutdown(x->s, SHUT_RD), ENOTCONN);
	EXPECT_ERR(send(x->s, "a", 1, MSG_NOSIGNAL), EPIPE);
	return 0;
}

/* A socket that a reset closed sends nothing when it is closed, even with
 * bytes unread: its peer sees no second reset (TCP). */
static int case_close_after_reset_sends_nothing(struct ctx *x)
{
	int err = -1;
	if (x->fam == AF_UNIX)
		return skipf("a reset is TCP's here");
	EXPECT_RET(write(x->c, "queued", 6), 6);
	TRY(wait_for(x->s, POLLIN, "the bytes at the peer"));
	EXPECT_OK(shutdown(x->s, SHUT_RDWR));
	TRY(wait_for(x->c, POLLIN | POLLRDHUP, "the peer's shutdown"));
	EXPECT_RET(send(x->c, "late", 4, MSG_NOSIGNAL), 4);
	TRY(wait_for(x->s, POLLERR, "the reset at the peer"));
	EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), EPIPE);
	close_fd(&x->s); /* ("queued" unread) */
	usleep(20000); /* (a reset, if one went, arrives in microseconds) */
	TRY(so_error(x->c, &err));
	CHECK(err == 0, "SO_ERROR after the close: %s, want 0", errname(err));
	EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), EPIPE);
	return 0;
}

/* The peer's reset is the error a send after our own SHUT_WR reports
 * first (TCP), then EPIPE. */
static int case_reset_before_epipe(struct ctx *x)
{
	if (x->fam == AF_UNIX)
		return skipf("a reset is TCP's here");
	EXPECT_OK(shutdown(x->s, SHUT_RDWR));
	TRY(wait_for(x->c, POLLRDHUP, "the peer's shutdown"));
	EXPECT_RET(send(x->c, "late", 4, MSG_NOSIGNAL), 4);
	TRY(wait_for(x->s, POLLERR, "the reset at the peer"));
	EXPECT_ERR(send(x->s, "a", 1, MSG_NOSIGNAL), ECONNRESET);
	EXPECT_ERR(send(x->s, "a", 1, MSG_NOSIGNAL), EPIPE);
	return 0;
}

/* A reset that lands after bytes still queued: a read larger than them
 * returns them and leaves the error pending, for the next send (and poll
 * shows it meanwhile). Under the preload the ring's last bytes are read
 * before the kernel stream where the reset waits (the urgent byte sends
 * both ends back to it), so the read must not swallow the error. */
static int case_reset_after_queued_read(struct ctx *x)
{
	if (x->fam == AF_UNIX)
		return skipf("a reset is TCP's here");
	char b[64];
	EXPECT_RET(send(x->c, "hello", 5, 0), 5);
	EXPECT_RET(send(x->s, "u", 1, MSG_OOB), 1);
	TRY(wait_for(x->c, POLLPRI, "the urgent byte"));
	EXPECT_OK(shutdown(x->s, SHUT_RDWR));
	TRY(wait_for(x->c, POLLRDHUP, "the peer's shutdown"));
	EXPECT_RET(send(x->c, "late", 4, MSG_NOSIGNAL), 4);
	TRY(wait_for(x->s, POLLERR, "the reset at the peer"));
	EXPECT_RET(recv(x->s, b, sizeof b, MSG_DONTWAIT), 5);
	TRY(wait_for(x->s, POLLERR, "the reset, still pending"));
	EXPECT_ERR(send(x->s, "a", 1, MSG_NOSIGNAL), ECONNRESET);
	EXPECT_ERR(send(x->s, "a", 1, MSG_NOSIGNAL), EPIPE);
	return 0;
}

/* A TCP connection whose FINs crossed is closed: a close with bytes
 * unread then resets nothing, and the peer reads the end of its stream. */
static int case_close_after_both_fins(struct ctx *x)
{
	if (x->fam == AF_UNIX)
		return skipf("a reset is TCP's here");
	char b[16];
	EXPECT_RET(send(x->c, "unread", 6, 0), 6);
	EXPECT_OK(shutdown(x->c, SHUT_WR));
	TRY(wait_for(x->s, POLLRDHUP, "the first end of stream"));
	EXPECT_OK(shutdown(x->s, SHUT_WR));
	TRY(wait_for(x->c, POLLRDHUP, "the second end of stream"));
	usleep(20000); /* (the last ACK on its way) */
	close_fd(&x->s); /* "unread" is left */
	usleep(20000);
	EXPECT_RET(recv(x->c, b, sizeof b, MSG_DONTWAIT), 0);
	EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), EPIPE);
	return 0;
}

/* Data reset the peer that shut both ways (zp_peer_refuses_data), and it
 * then closes with bytes unread: a closed socket sends nothing, so the
 * sender sees no new error. The peer's urgent byte first takes the sends
 * of both ends back to the kernel stream, where unread bytes then wait
 * beside those on the rings. */
static int case_reset_peer_closes_quiet(struct ctx *x)
{
	unsigned ev = 0;
	int err = -1;
	char u;
	if (x->fam == AF_UNIX)
		return skipf("a reset is TCP's here");
	EXPECT_RET(send(x->c, "ring1", 5, 0), 5); /* (unread: both ends stay switched) */
	EXPECT_RET(send(x->s, "ring2", 5, 0), 5);
	EXPECT_RET(send(x->s, "U", 1, MSG_OOB), 1);
	TRY(wait_for(x->c, POLLPRI, "the urgent byte"));
	EXPECT_RET(recv(x->c, &u, 1, MSG_OOB), 1);
	EXPECT_RET(send(x->c, "unread", 6, 0), 6);
	TRY(wait_for(x->s, POLLIN, "the bytes"));
	EXPECT_OK(shutdown(x->s, SHUT_RDWR));
	TRY(wait_for(x->c, POLLRDHUP, "the peer's shutdown"));
	EXPECT_RET(send(x->c, "late", 4, MSG_NOSIGNAL), 4);
	TRY(wait_for(x->c, POLLERR, "the reset"));
	EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), EPIPE);
	close_fd(&x->s);
	usleep(20000); /* (a reset, if one went, arrives in microseconds) */
	TRY(poll1(x->c, POLLIN | POLLOUT | POLLRDHUP, 0, &ev));
	CHECK(!(ev & POLLERR), "poll after the close: %s", evname(ev & EV_MASK));
	TRY(so_error(x->c, &err));
	CHECK(err == 0, "SO_ERROR after the close: %s, want 0", errname(err));
	return 0;
}

/* The peer shut both ways, then closed with our bytes unread (a reset, in
 * CLOSE_WAIT: EPIPE). Our sends are on the kernel stream (after the
 * peer's urgent byte), so a send learns of the reset there: it is told
 * once, and poll shows no error after it. */
static int case_reset_told_by_kernel_send(struct ctx *x)
{
	unsigned ev = 0;
	int err = -1;
	if (x->fam == AF_UNIX)
		return skipf("a reset is TCP's here");
	EXPECT_RET(send(x->c, "ring1", 5, 0), 5); /* (unread: both ends stay switched) */
	EXPECT_RET(send(x->s, "ring2", 5, 0), 5);
	EXPECT_RET(send(x->s, "U", 1, MSG_OOB), 1);
	TRY(wait_for(x->c, POLLPRI, "the urgent byte"));
	EXPECT_RET(send(x->c, "more", 4, 0), 4);
	TRY(wait_for(x->s, POLLIN, "the bytes"));
	EXPECT_OK(shutdown(x->s, SHUT_RDWR));
	TRY(wait_for(x->c, POLLRDHUP, "the peer's shutdown"));
	close_fd(&x->s);
	TRY(wait_for(x->c, POLLERR, "the reset"));
	EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), EPIPE);
	TRY(poll1(x->c, POLLIN | POLLOUT | POLLRDHUP, 0, &ev));
	CHECK(!(ev & POLLERR), "poll after the reset was told: %s", evname(ev & EV_MASK));
	TRY(so_error(x->c, &err));
	CHECK(err == 0, "SO_ERROR after the reset was told: %s, want 0", errname(err));
	EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), EPIPE);
	return 0;
}

/* We shut both ways after both ends' urgent bytes took every direction
 * back to the kernel stream (our socket is a kernel socket again): the
 * peer's data then meets our kernel socket, which resets (ECONNRESET in
 * FIN_WAIT), as it would without the preload. */
static int case_data_after_both_shut_on_kernel(struct ctx *x)
{
	char u;
	if (x->fam == AF_UNIX)
		return skipf("a reset is TCP's here");
	EXPECT_RET(send(x->c, "U", 1, MSG_OOB), 1);
	TRY(wait_for(x->s, POLLPRI, "our urgent byte"));
	EXPECT_RET(send(x->s, "V", 1, MSG_OOB), 1);
	TRY(wait_for(x->c, POLLPRI, "the peer's urgent byte"));
	EXPECT_RET(recv(x->c, &u, 1, MSG_OOB), 1);
	EXPECT_OK(shutdown(x->c, SHUT_RDWR));
	TRY(wait_for(x->s, POLLRDHUP, "our shutdown"));
	EXPECT_RET(send(x->s, "late", 4, MSG_NOSIGNAL), 4);
	TRY(wait_for(x->c, POLLERR, "the reset"));
	EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), ECONNRESET);
	EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), EPIPE);
	return 0;
}

/* The same reset, seen by an edge-triggered epoll set, with the peer's
 * bytes unread: the reset wakes the socket's waiters, so the next
 * epoll_wait reports it also when its error was read (SO_ERROR) before
 * the wait and the events are the ones reported before. */
static int case_reset_on_kernel_wakes_et(struct ctx *x)
{
	char u;
	int err;
	if (x->fam == AF_UNIX)
		return skipf("a reset is TCP's here");
	/* (the peer's urgent byte: its sends go on the kernel stream; ours
	 * stay where they are) */
	EXPECT_RET(send(x->s, "unread", 6, 0), 6);
	EXPECT_RET(send(x->s, "V", 1, MSG_OOB), 1);
	TRY(wait_for(x->c, POLLPRI, "the peer's urgent byte"));
	EXPECT_RET(recv(x->c, &u, 1, MSG_OOB), 1);
	EXPECT_OK(shutdown(x->c, SHUT_RDWR));
	TRY(wait_for(x->s, POLLRDHUP, "our shutdown"));
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0, "epoll_create1: %s", errname(errno));
	struct epoll_event e = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLET },
			   got[4];
	int rc = epoll_ctl(ep, EPOLL_CTL_ADD, x->c, &e);
	int first = epoll_wait(ep, got, 4, 0), again = epoll_wait(ep, got, 4, 0);
	int sent = (int)send(x->s, "late", 4, MSG_NOSIGNAL);
	int waited = wait_for(x->c, POLLERR, "the reset");
	int soe = so_error(x->c, &err);
	int after = epoll_wait(ep, got, 4, 0), later = epoll_wait(ep, got + 1, 3, 0);
	close(ep);
	CHECK(rc == 0, "epoll_ctl: %s", errname(errno));
	CHECK(first == 1 && again == 0, "before the reset: %d then %d reports, want 1 then 0", first,
	      again);
	CHECK(sent == 4 && waited == 0 && soe == 0 && err == ECONNRESET,
	      "the peer's send %d, the reset: SO_ERROR %s", sent, errname(err));
	CHECK(after == 1 && (got[0].events & (EPOLLHUP | EPOLLOUT)) == (EPOLLHUP | EPOLLOUT),
	      "after the reset (its error read): %d reports (0x%x), want 1 with HUP and OUT", after,
	      after == 1 ? got[0].events : 0u);
	CHECK(later == 0, "then %d reports, want none: nothing new", later);
	return 0;
}

/* The peer shuts its sending side (a FIN), then closes with our bytes
 * unread (a reset). */
static int fin_then_reset(struct ctx *x)
{
	EXPECT_RET(send(x->c, "unread", 6, 0), 6);
	TRY(wait_for(x->s, POLLIN, "the bytes"));
	EXPECT_OK(shutdown(x->s, SHUT_WR));
	TRY(wait_for(x->c, POLLRDHUP, "the peer's FIN"));
	close_fd(&x->s);
	return wait_for(x->c, POLLERR, "the reset");
}

/* A reset that follows the peer's FIN (it shut its sending side, then
 * closed with our bytes unread): a read sees the end of the stream, not
 * the reset, and the error is EPIPE (Linux's tcp_reset in CLOSE_WAIT). */
static int case_reset_after_fin(struct ctx *x)
{
	if (x->fam == AF_UNIX)
		return skipf("a reset is TCP's here");
	char b[16];
	int err = 0;
	TRY(fin_then_reset(x));
	EXPECT_RET(recv(x->c, b, sizeof b, MSG_DONTWAIT), 0);
	EXPECT_RET(recv(x->c, b, sizeof b, MSG_DONTWAIT), 0);
	TRY(so_error(x->c, &err));
	CHECK(err == EPIPE, "SO_ERROR %s, want EPIPE", errname(err));
	EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), EPIPE);
	return 0;
}

static volatile sig_atomic_t g_pipes;
static void on_pipe(int sig)
{
	(void)sig;
	g_pipes++;
}

/* ... and a send that reports it raises SIGPIPE, as EPIPE does. */
static int case_reset_after_fin_sigpipe(struct ctx *x)
{
	if (x->fam == AF_UNIX)
		return skipf("a reset is TCP's here");
	TRY(fin_then_reset(x));
	struct sigaction sa = { .sa_handler = on_pipe }, old;
	sigaction(SIGPIPE, &sa, &old);
	g_pipes = 0;
	errno = 0;
	ssize_t r = send(x->c, "a", 1, 0);
	int e = errno, n = g_pipes;
	sigaction(SIGPIPE, &old, NULL);
	CHECK(r < 0 && e == EPIPE && n == 1, "send: %zd %s with %d SIGPIPE, want -1 EPIPE with 1",
	      r, errname(e), n);
	return 0;
}

/* The peer shut both ways and then closed with bytes unread: its reset
 * comes before the rule that data to such a peer resets it (the send
 * fails at once). */
static int case_reset_before_refused_data(struct ctx *x)
{
	if (x->fam == AF_UNIX)
		return skipf("a reset is TCP's here");
	EXPECT_RET(send(x->c, "unread", 6, 0), 6);
	TRY(wait_for(x->s, POLLIN, "the bytes"));
	EXPECT_OK(shutdown(x->s, SHUT_RDWR));
	TRY(wait_for(x->c, POLLRDHUP, "the peer's FIN"));
	close_fd(&x->s);
	TRY(wait_for(x->c, POLLERR, "the reset"));
	EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), EPIPE);
	EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), EPIPE);
	return 0;
}

/* A reset is reported once, by whichever call comes first (SO_ERROR,
 * send), also where the urgent byte sent both ends back to the kernel
 * stream, whose socket learns of the reset too. */
static int case_reset_told_once(struct ctx *x)
{
	if (x->fam == AF_UNIX)
		return skipf("a reset is TCP's here");
	int err = -1;
	EXPECT_RET(send(x->c, "unread", 6, 0), 6);
	EXPECT_RET(send(x->c, "U", 1, MSG_OOB), 1);
	TRY(wait_for(x->s, POLLPRI, "the urgent byte"));
	close_fd(&x->s); /* with bytes unread: a reset */
	TRY(wait_for(x->c, POLLERR, "the reset"));
	EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), ECONNRESET);
	TRY(so_error(x->c, &err));
	CHECK(err == 0, "SO_ERROR after the send: %s, want 0", errname(err));
	EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), EPIPE);
	return 0;
}

/* Our FIN went (SHUT_WR), then the peer closed with our bytes unread (a
 * reset, in FIN_WAIT2): the reset's ECONNRESET is pending and comes before
 * the EPIPE of our own shutdown, once. With urgent, the peer first sends
 * an urgent byte that we read and peeks at our bytes: under the preload
 * both ways are then back on the kernel stream and our end is a kernel
 * socket again, while our bytes wait on the ring: the reset must reach
 * our kernel socket. With urgent_unread, our urgent send leaves bytes
 * unread on the kernel stream too: the peer's kernel resets as well, and
 * that reset and the one the preload plays are one, told once. */
static int reset_after_own_fin(struct ctx *x, int urgent)
{
	char u;
	if (x->fam == AF_UNIX)
		return skipf("a reset is TCP's here");
	EXPECT_RET(send(x->c, "unread", 6, 0), 6);
	TRY(wait_for(x->s, POLLIN, "the bytes"));
	if (urgent == 1) {
		EXPECT_RET(send(x->s, "U", 1, MSG_OOB), 1);
		TRY(wait_for(x->c, POLLPRI, "the urgent byte"));
		EXPECT_RET(recv(x->c, &u, 1, MSG_OOB), 1);
		char b[16];
		EXPECT_RET(recv(x->s, b, sizeof b, MSG_PEEK | MSG_DONTWAIT), 6);
	} else if (urgent == 2) {
		EXPECT_RET(send(x->c, "xyV", 3, MSG_OOB), 3);
		TRY(wait_for(x->s, POLLPRI, "the urgent byte"));
	}
	EXPECT_OK(shutdown(x->c, SHUT_WR));
	TRY(wait_for(x->s, POLLRDHUP, "our FIN"));
	close_fd(&x->s);
	if (urgent == 2) /* (no look between: the sends meet the reset first) */
		usleep(20000);
	else
		TRY(wait_for(x->c, POLLERR, "the reset"));
	EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), ECONNRESET);
	EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), EPIPE);
	int err = -1;
	TRY(so_error(x->c, &err));
	CHECK(err == 0, "SO_ERROR after the reset was told: %s, want 0", errname(err));
	return 0;
}

static int case_reset_after_own_fin_urgent_unread(struct ctx *x)
{
	return reset_after_own_fin(x, 2);
}

static int case_reset_after_own_fin(struct ctx *x)
{
	return reset_after_own_fin(x, 0);
}

static int case_reset_after_own_fin_urgent(struct ctx *x)
{
	return reset_after_own_fin(x, 1);
}

/* Both ways shut on TCP: once both FINs crossed, the connection is closed
 * at both ends (shutdown says ENOTCONN); a Unix pair stays connected. */
static int case_both_fins_close(struct ctx *x)
{
	char b[4];
	EXPECT_OK(shutdown(x->c, SHUT_WR));
	TRY(wait_for(x->s, POLLIN | POLLRDHUP, "the first end of stream"));
	EXPECT_RET(recv(x->s, b, sizeof b, MSG_DONTWAIT), 0);
	EXPECT_OK(shutdown(x->s, SHUT_WR));
	TRY(wait_for(x->c, POLLIN | POLLRDHUP | POLLHUP, "the second end of stream"));
	EXPECT_RET(recv(x->c, b, sizeof b, MSG_DONTWAIT), 0);
	usleep(20000); /* (the last ACK on its way: loopback takes microseconds) */
	if (x->fam == AF_UNIX) {
		EXPECT_OK(shutdown(x->c, SHUT_RD));
		EXPECT_OK(shutdown(x->s, SHUT_RD));
	} else {
		EXPECT_ERR(shutdown(x->c, SHUT_RD), ENOTCONN);
		EXPECT_ERR(shutdown(x->s, SHUT_RD), ENOTCONN);
	}
	return 0;
}

/* sendfile after our own SHUT_WR fails with EPIPE, as send does. */
static int case_sendfile_after_shut_wr(struct ctx *x)
{
	char path[128];
	snprintf(path, sizeof path, "%s/file", g_dir);
	int f = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(f >= 0, "open: %s", errname(errno));
	unlink(path);
	int rc = write_full(f, "abcdef", 6, "file");
	off_t off = 0;
	if (!rc && shutdown(x->c, SHUT_WR))
		rc = failf("shutdown: %s", errname(errno));
	ssize_t r = rc ? 0 : sendfile(x->c, f, &off, 6);
	int e = errno;
	if (!rc && (r != -1 || e != EPIPE))
		rc = failf("sendfile after SHUT_WR: %s, want EPIPE", rets(r, e));
	if (!rc && off != 0)
		rc = failf("sendfile after SHUT_WR took %lld bytes", (long long)off);
	close(f);
	return rc;
}

/* A TCP peer that went back to the kernel stream (its urgent byte) and
 * closes with our bytes unread: the reset comes after its bytes, then the
 * end. more: we send after its way back too, so that its kernel resets
 * as well (else its kernel's close is a FIN; the reset is the same).
 * waitall: the read that takes its bytes asks for more, and the reset is
 * the next call's (Linux's tcp_recvmsg: bytes copied end the read before
 * sk_err is taken). */
static int reset_after_peer_way_back(struct ctx *x, int more, int waitall)
{
	if (x->fam == AF_UNIX)
		return skipf("TCP's rule (unix_reset_after_way_back has Unix's)");
	char b[64];
	EXPECT_RET(write(x->s, "unread", 6), 6);
	TRY(wait_for(x->c, POLLIN, "the bytes it leaves unread"));
	EXPECT_RET(send(x->c, "V", 1, MSG_OOB), 1);
	EXPECT_RET(write(x->c, "xyz", 3), 3);
	if (more == 2) /* (no call of ours between its way back and its close) */
		msleep(20);
	else
		TRY(wait_for(x->s, POLLPRI, "the urgent byte"));
	if (more == 1)
		EXPECT_RET(write(x->s, "more", 4), 4);
	close_fd(&x->c);
	TRY(wait_for(x->s, POLLERR, "the reset"));
	EXPECT_RET(recv(x->s, b, sizeof b, MSG_DONTWAIT | (waitall ? MSG_WAITALL : 0)), 3);
	CHECK(!memcmp(b, "xyz", 3), "the bytes before the reset: %.3s", b);
	EXPECT_ERR(recv(x->s, b, sizeof b, MSG_DONTWAIT), ECONNRESET);
	EXPECT_RET(recv(x->s, b, sizeof b, MSG_DONTWAIT), 0);
	return 0;
}

static int case_reset_after_peer_way_back(struct ctx *x)
{
	return reset_after_peer_way_back(x, 0, 0);
}

static int case_reset_after_peer_way_back_more(struct ctx *x)
{
	return reset_after_peer_way_back(x, 1, 0);
}

static int case_reset_after_peer_way_back_quiet(struct ctx *x)
{
	return reset_after_peer_way_back(x, 2, 0);
}

static int case_reset_after_peer_way_back_waitall(struct ctx *x)
{
	return reset_after_peer_way_back(x, 1, 1);
}

/* ---- main ------------------------------------------------------------------- */

static const struct test tests[] = {
	{ "send_after_close", case_send_after_close },
	{ "peer_shut_rd", case_peer_shut_rd },
	{ "peer_shut_rd_wakes_sender", case_peer_shut_rd_wakes_sender },
	{ "reset_queued", case_reset_queued },
	{ "reset_send_first", case_reset_send_first },
	{ "data_after_both_shut_resets", case_data_after_both_shut_resets },
	{ "reset_before_epipe", case_reset_before_epipe },
	{ "both_fins_close", case_both_fins_close },
	{ "reset_after_queued_read", case_reset_after_queued_read },
	{ "reset_after_fin", case_reset_after_fin },
	{ "reset_after_fin_sigpipe", case_reset_after_fin_sigpipe },
	{ "reset_told_once", case_reset_told_once },
	{ "reset_after_own_fin", case_reset_after_own_fin },
	{ "reset_after_own_fin_urgent_unread", case_reset_after_own_fin_urgent_unread },
	{ "close_after_reset_sends_nothing", case_close_after_reset_sends_nothing },
	{ "reset_after_own_fin_urgent", case_reset_after_own_fin_urgent },
	{ "reset_before_refused_data", case_reset_before_refused_data },
	{ "close_after_both_fins", case_close_after_both_fins },
	{ "reset_peer_closes_quiet", case_reset_peer_closes_quiet },
	{ "reset_told_by_kernel_send", case_reset_told_by_kernel_send },
	{ "data_after_both_shut_on_kernel", case_data_after_both_shut_on_kernel },
	{ "reset_on_kernel_wakes_et", case_reset_on_kernel_wakes_et },
	{ "own_shut_wr_wakes_sender", case_own_shut_wr_wakes_sender },
	{ "own_shut_wr_wakes_splice", case_own_shut_wr_wakes_splice },
	{ "own_shut_wr_wakes_poll", case_own_shut_wr_wakes_poll },
	{ "sendfile_after_shut_wr", case_sendfile_after_shut_wr },
	{ "reset_after_peer_way_back", case_reset_after_peer_way_back },
	{ "reset_after_peer_way_back_more", case_reset_after_peer_way_back_more },
	{ "reset_after_peer_way_back_waitall", case_reset_after_peer_way_back_waitall },
	{ "reset_after_peer_way_back_quiet", case_reset_after_peer_way_back_quiet },
};

int main(int argc, char **argv)
{
	return pair_main(argc, argv, "reset_test", tests, sizeof tests / sizeof tests[0]);
}
