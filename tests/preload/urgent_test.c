/* SPDX-License-Identifier: MIT */
/*
 * urgent_test.c - TCP's urgent data (MSG_OOB) as Linux keeps it: one mark
 * in the stream, POLLPRI and the exceptional condition, the urgent byte
 * out of band, a second mark that turns the first byte into data, and
 * urgent bytes that meet a reset. Under the preload an urgent send takes
 * its side back to the kernel stream (the ring carries no mark), so each
 * case also tries the seam between the ring and the kernel stream.
 *
 *   urgent_test tcp4|tcp6 [case-name-substring]
 *
 * Each case gets a fresh pair (listener, connected c, accepted s) that
 * first exchanges a byte each way (pair_util.h), runs plain and preloaded
 * (sem_run.sh) and must print the same transcript both ways. stdout: "ok
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
#include <sys/ioctl.h>
#include <sys/select.h>

/* TCP's splice stops at an urgent mark that a read would go past: at the
 * mark it returns 0 (not EOF: the bytes after the mark are still read).
 * Under the preload the urgent byte sends both ends back to the kernel
 * stream, and the bytes before it came through the ring. */
static int splice_stops_at_urgent_mark(struct ctx *x, int reset)
{
	if (x->fam == AF_UNIX)
		return skipf("urgent data is TCP's");
	char b[16];
	int p[2];
	CHECK(!pipe2(p, O_CLOEXEC), "pipe: %s", errname(errno));
	EXPECT_RET(send(x->c, "abc", 3, 0), 3);
	EXPECT_RET(send(x->c, "U", 1, MSG_OOB), 1);
	EXPECT_RET(send(x->c, "def", 3, 0), 3);
	TRY(wait_for(x->s, POLLPRI, "the urgent byte"));
	EXPECT_RET(recv(x->s, b, 3, 0), 3);
	if (reset) { /* data after our shutdown both ways resets us */
		EXPECT_OK(shutdown(x->s, SHUT_RDWR));
		TRY(wait_for(x->c, POLLRDHUP, "the peer's shutdown"));
		EXPECT_RET(send(x->c, "late", 4, MSG_NOSIGNAL), 4);
		TRY(wait_for(x->s, POLLERR, "the reset"));
		EXPECT_ERR(send(x->s, "a", 1, MSG_NOSIGNAL), ECONNRESET);
	}
	EXPECT_RET(splice(x->s, NULL, p[1], NULL, sizeof b, SPLICE_F_NONBLOCK), 0);
	TRY(wait_for(x->s, POLLIN, "the bytes after the mark"));
	EXPECT_RET(recv(x->s, b, sizeof b, MSG_DONTWAIT), 3);
	CHECK(!memcmp(b, "def", 3), "after the mark: %.3s", b);
	if (reset)
		EXPECT_RET(recv(x->s, b, sizeof b, MSG_DONTWAIT), 0);
	close(p[0]);
	close(p[1]);
	return 0;
}

static int case_splice_stops_at_urgent_mark(struct ctx *x)
{
	return splice_stops_at_urgent_mark(x, 0);
}

/* ... also in a socket that a reset closed (its queued bytes stay readable) */
static int case_splice_stops_at_urgent_mark_reset(struct ctx *x)
{
	return splice_stops_at_urgent_mark(x, 1);
}

/* After the peer's close, urgent data fails as other data does: the
 * first send goes (the peer's kernel resets), then EPIPE. */
static int case_oob_after_peer_close(struct ctx *x)
{
	if (x->fam == AF_UNIX)
		return skipf("urgent data is TCP's");
	close_fd(&x->s);
	TRY(wait_for(x->c, POLLRDHUP, "the peer's close"));
	EXPECT_RET(send(x->c, "a", 1, MSG_NOSIGNAL), 1);
	TRY(wait_for(x->c, POLLERR, "the reset"));
	EXPECT_ERR(send(x->c, "U", 1, MSG_OOB | MSG_NOSIGNAL), EPIPE);
	EXPECT_ERR(send(x->c, "U", 1, MSG_OOB | MSG_NOSIGNAL), EPIPE);
	return 0;
}

/* An urgent byte that meets a peer that shut both ways resets it, and
 * leaves its mark there: the peer stands at it once it read the rest;
 * when the urgent send had bytes before its urgent one, those go with the
 * reset and the reader never stands at the mark. */
static int urgent_into_reset(struct ctx *x, const char *bytes, int len, int want)
{
	if (x->fam == AF_UNIX)
		return skipf("urgent data is TCP's");
	int mark = -1;
	EXPECT_OK(shutdown(x->s, SHUT_RDWR));
	TRY(wait_for(x->c, POLLRDHUP, "the peer's shutdown"));
	EXPECT_RET(send(x->c, bytes, (size_t)len, MSG_OOB | MSG_NOSIGNAL), len);
	TRY(wait_for(x->s, POLLERR, "the reset"));
	CHECK(!ioctl(x->s, SIOCATMARK, &mark), "SIOCATMARK: %s", errname(errno));
	CHECK(mark == want, "SIOCATMARK %d, want %d", mark, want);
	return 0;
}

static int case_urgent_into_reset_mark(struct ctx *x)
{
	return urgent_into_reset(x, "U", 1, 1);
}

static int case_urgent_into_reset_after_bytes(struct ctx *x)
{
	return urgent_into_reset(x, "abU", 3, 0);
}

/* The urgent byte that met our reset stays pending in our closed socket
 * (ENOTCONN to an urgent read) after the sender closes too: its close
 * sends nothing to a reset connection, so no FIN can make it EINVAL. */
static int case_urgent_into_reset_then_close(struct ctx *x)
{
	char b[8];
	if (x->fam == AF_UNIX)
		return skipf("urgent data is TCP's");
	TRY(urgent_into_reset(x, "U", 1, 1));
	EXPECT_ERR(recv(x->s, b, sizeof b, MSG_DONTWAIT), ECONNRESET);
	close_fd(&x->c);
	usleep(20000); /* (a FIN, if one went, arrives in microseconds) */
	struct pollfd p = { .fd = x->s, .events = POLLIN | POLLPRI };
	EXPECT_RET(poll(&p, 1, 0), 1);
	EXPECT_RET(recv(x->s, b, sizeof b, MSG_DONTWAIT), 0);
	EXPECT_ERR(recv(x->s, b, 1, MSG_OOB | MSG_DONTWAIT), ENOTCONN);
	return 0;
}

static int case_oob(struct ctx *x)
{
	if (x->fam == AF_UNIX)
		return skipf("urgent data is TCP's here");
	char b[16];
	int at = -1;
	EXPECT_RET(write(x->c, "ab", 2), 2);
	EXPECT_RET(send(x->c, "!", 1, MSG_OOB), 1);
	EXPECT_RET(write(x->c, "cd", 2), 2);
	TRY(wait_for(x->s, POLLPRI, "urgent data"));
	fd_set xs;
	FD_ZERO(&xs);
	FD_SET(x->s, &xs);
	struct timeval tv = { 0, 0 };
	EXPECT_RET(select(x->s + 1, NULL, NULL, &xs, &tv), 1);
	CHECK(FD_ISSET(x->s, &xs), "select: no exceptional condition");
	EXPECT_OK(ioctl(x->s, SIOCATMARK, &at));
	CHECK(at == 0, "SIOCATMARK before the bytes before the mark: %d", at);
	EXPECT_RET(recv(x->s, b, sizeof b, 0), 2);
	CHECK(!memcmp(b, "ab", 2), "the bytes before the mark differ");
	EXPECT_OK(ioctl(x->s, SIOCATMARK, &at));
	CHECK(at == 1, "SIOCATMARK at the mark: %d", at);
	EXPECT_RET(recv(x->s, b, 1, MSG_OOB), 1);
	CHECK(b[0] == '!', "the urgent byte is 0x%02x", (uint8_t)b[0]);
	TRY(expect_bytes(x->s, "cd", 2, "after the mark"));
	EXPECT_RET(write(x->s, "pong", 4), 4); /* and the connection goes on */
	TRY(expect_bytes(x->c, "pong", 4, "the other way"));
	EXPECT_RET(write(x->c, "more", 4), 4);
	TRY(expect_bytes(x->s, "more", 4, "again"));
	return 0;
}

/* TCP keeps one urgent mark: when a second arrives before the reader has
 * come to the first, the first urgent byte stays in the stream as data
 * (here while the bytes before it were still unread, on the ring under
 * the preload, and the reader asked FIONREAD meanwhile). */
static int case_urgent_twice(struct ctx *x)
{
	if (x->fam == AF_UNIX)
		return skipf("urgent data is TCP's here");
	char b[32];
	int n = -1, at = -1;
	EXPECT_RET(write(x->c, "0123456789", 10), 10);
	EXPECT_RET(send(x->c, "A", 1, MSG_OOB), 1);
	EXPECT_RET(write(x->c, "bc", 2), 2);
	TRY(wait_for(x->s, POLLPRI, "the first urgent byte"));
	EXPECT_OK(ioctl(x->s, FIONREAD, &n));
	CHECK(n == 10, "FIONREAD before the first mark: %d", n);
	EXPECT_RET(send(x->c, "B", 1, MSG_OOB), 1);
	for (int i = 0; i < 2000 && n != 13; i++) { /* (bounded: 2 s) */
		usleep(1000);
		EXPECT_OK(ioctl(x->s, FIONREAD, &n));
	}
	CHECK(n == 13, "FIONREAD before the second mark: %d (the first urgent byte lost?)", n);
	EXPECT_RET(recv(x->s, b, sizeof b, 0), 13);
	CHECK(!memcmp(b, "0123456789Abc", 13), "the bytes before the second mark differ");
	EXPECT_OK(ioctl(x->s, SIOCATMARK, &at));
	CHECK(at == 1, "SIOCATMARK at the second mark: %d", at);
	EXPECT_RET(recv(x->s, b, 1, MSG_OOB), 1);
	CHECK(b[0] == 'B', "the urgent byte is 0x%02x", (uint8_t)b[0]);
	EXPECT_RET(write(x->c, "end", 3), 3);
	TRY(expect_bytes(x->s, "end", 3, "after the mark"));
	return 0;
}

/* ... also when the reader peeked at the bytes before the first mark: a
 * peek moves nothing, so the first urgent byte is still ahead of the
 * reader when the second mark comes, and stays as data (under the
 * preload the peek ends at the ring's end, where the kernel stream's
 * mark follows). */
static int case_urgent_twice_after_peek(struct ctx *x)
{
	if (x->fam == AF_UNIX)
		return skipf("urgent data is TCP's here");
	char b[32];
	EXPECT_RET(write(x->c, "0123456789abcdefghij", 20), 20);
	TRY(expect_bytes(x->s, "0123456789", 10, "the first half"));
	EXPECT_RET(send(x->c, "A", 1, MSG_OOB), 1);
	TRY(wait_for(x->s, POLLPRI, "the first urgent byte"));
	EXPECT_RET(recv(x->s, b, sizeof b, MSG_PEEK | MSG_DONTWAIT), 10);
	CHECK(!memcmp(b, "abcdefghij", 10), "the peek before the first mark differs");
	EXPECT_RET(send(x->c, "B", 1, MSG_OOB), 1);
	EXPECT_RET(write(x->c, "end", 3), 3);
	TRY(expect_bytes(x->s, "abcdefghijA", 11, "the bytes before the second mark"));
	TRY(wait_for(x->s, POLLPRI, "the second urgent byte"));
	EXPECT_RET(recv(x->s, b, 1, MSG_OOB), 1);
	CHECK(b[0] == 'B', "the urgent byte is 0x%02x", (uint8_t)b[0]);
	TRY(expect_bytes(x->s, "end", 3, "after the second mark"));
	return 0;
}

/* ---- main ------------------------------------------------------------------- */

static const struct test tests[] = {
	{ "oob", case_oob },
	{ "oob_after_peer_close", case_oob_after_peer_close },
	{ "urgent_twice", case_urgent_twice },
	{ "urgent_twice_after_peek", case_urgent_twice_after_peek },
	{ "urgent_into_reset_mark", case_urgent_into_reset_mark },
	{ "urgent_into_reset_after_bytes", case_urgent_into_reset_after_bytes },
	{ "urgent_into_reset_then_close", case_urgent_into_reset_then_close },
	{ "splice_stops_at_urgent_mark", case_splice_stops_at_urgent_mark },
	{ "splice_stops_at_urgent_mark_reset", case_splice_stops_at_urgent_mark_reset },
};

int main(int argc, char **argv)
{
	return pair_main(argc, argv, "urgent_test", tests, sizeof tests / sizeof tests[0]);
}
