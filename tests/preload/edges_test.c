/* SPDX-License-Identifier: MIT */
/*
 * edges_test.c - edge-triggered epoll on a connected socket: which calls
 * of ours and of the peer's make an EPOLLET edge, and what it reports, as
 * Linux makes them for TCP and Unix stream sockets. Each case asserts what
 * the kernel does; it runs plain and preloaded (sem_run.sh) and must print
 * the same transcript both ways.
 *
 *   edges_test tcp4|tcp6|unix [case-name-substring]
 *
 * stdout: "ok NAME", "FAIL NAME: why" or "skip NAME: why" per case. Exit 0
 * all passed, 1 a case failed, 77 the family is unavailable, 2 usage.
 * Bounds: a 20 s watchdog per case, IO_WAIT_MS per wait.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "sem_util.h"
#include "pair_util.h"
#pragma GCC diagnostic pop

#include <sys/epoll.h>

/* Edge-triggered: an edge reports every event the fd has then: after the
 * peer's bytes come, IN and OUT (the socket is writable). */
static int case_epoll_et_all_events(struct ctx *x)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0, "epoll_create1: %s", errname(errno));
	struct epoll_event e = { .events = EPOLLIN | EPOLLOUT | EPOLLET, .data.fd = x->c }, out[4];
	int rc = 0;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, x->c, &e))
		rc = failf("epoll_ctl: %s", errname(errno));
	int n = rc ? 0 : epoll_wait(ep, out, 4, 0);
	if (!rc && (n != 1 || out[0].events != EPOLLOUT))
		rc = failf("after ADD: %d, %s; want 1, OUT", n, evname(n > 0 ? out[0].events : 0));
	n = rc ? 0 : epoll_wait(ep, out, 4, 0);
	if (!rc && n != 0)
		rc = failf("again: %d, %s; want 0 (no new edge)", n, evname(out[0].events));
	if (!rc && write(x->s, "data", 4) != 4)
		rc = failf("write: %s", errname(errno));
	n = rc ? 0 : epoll_wait(ep, out, 4, IO_WAIT_MS);
	if (!rc && (n != 1 || out[0].events != (EPOLLIN | EPOLLOUT)))
		rc = failf("after data: %d, %s; want 1, IN|OUT", n, evname(n > 0 ? out[0].events : 0));
	close(ep);
	return rc;
}

/* One epoll_wait(ET) with no timeout: the events of x->c, 0 if none. */
static int et_look(int ep, unsigned *ev)
{
	struct epoll_event out[4];
	int n = epoll_wait(ep, out, 4, 0);
	*ev = n > 0 ? out[0].events : 0;
	return n;
}

/* No edge in `looks` looks (what: when); 0, or the failure */
static int no_edge(int ep, int looks, const char *what)
{
	unsigned ev;
	int n;
	for (int i = 0; i < looks; i++)
		if ((n = et_look(ep, &ev)) != 0)
			return failf("%s (look %d): %d, %s; want 0", what, i, n, evname(ev));
	return 0;
}

/* EPOLLET edges that no byte makes: our own shutdown wakes the socket's
 * waiters (also one that fails, on a closed TCP socket), and on TCP the
 * bytes that come after an urgent mark are an edge although FIONREAD
 * stops at the mark. */
static int case_epoll_et_quiet_edges(struct ctx *x)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0, "epoll_create1: %s", errname(errno));
	struct epoll_event e = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLET,
				 .data.fd = x->c };
	unsigned ev;
	int rc = 0, n;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, x->c, &e))
		rc = failf("epoll_ctl: %s", errname(errno));
	if (!rc && x->fam != AF_UNIX) {
		/* the urgent byte, then bytes after its mark */
		if (send(x->s, "a", 1, 0) != 1 || send(x->s, "U", 1, MSG_OOB) != 1)
			rc = failf("send: %s", errname(errno));
		if (!rc)
			rc = wait_for(x->c, POLLPRI, "the urgent byte");
		if (!rc && (n = et_look(ep, &ev)) != 1)
			rc = failf("after the urgent byte: %d; want 1", n);
		if (!rc && (n = et_look(ep, &ev)) != 0)
			rc = failf("again: %d, %s; want 0 (no new edge)", n, evname(ev));
		if (!rc && send(x->s, "after", 5, 0) != 5)
			rc = failf("send: %s", errname(errno));
		usleep(20000); /* (loopback takes microseconds) */
		if (!rc && (n = et_look(ep, &ev)) != 1)
			rc = failf("after the bytes past the mark: %d; want 1 (an edge)", n);
	}
	if (!rc && (n = et_look(ep, &ev)) > 0 && (n = et_look(ep, &ev)) != 0)
		rc = failf("before the shutdown: %d, %s; want 0", n, evname(ev));
	if (!rc && shutdown(x->c, SHUT_RD))
		rc = failf("shutdown: %s", errname(errno));
	if (!rc && (n = et_look(ep, &ev)) != 1)
		rc = failf("after our shutdown: %d; want 1 (an edge)", n);
	if (!rc && (n = et_look(ep, &ev)) != 0)
		rc = failf("again: %d, %s; want 0", n, evname(ev));
	if (!rc && shutdown(x->c, SHUT_RD) && errno != ENOTCONN)
		rc = failf("shutdown again: %s", errname(errno));
	if (!rc && (n = et_look(ep, &ev)) != 1)
		rc = failf("after our second shutdown: %d; want 1 (an edge)", n);
	close(ep);
	return rc;
}

/* EPOLLET: an error read after its edge is no new edge (the kernel wakes
 * for what comes, not for what goes). */
static int case_epoll_et_error_read(struct ctx *x)
{
	if (x->fam == AF_UNIX)
		return skipf("a reset is TCP's here");
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0, "epoll_create1: %s", errname(errno));
	struct epoll_event e = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.fd = x->c };
	unsigned ev;
	int rc = 0, n, err = 0;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, x->c, &e))
		rc = failf("epoll_ctl: %s", errname(errno));
	if (!rc && send(x->c, "unread", 6, 0) != 6)
		rc = failf("send: %s", errname(errno));
	if (!rc)
		rc = wait_for(x->s, POLLIN, "the bytes");
	if (!rc) {
		close(x->s); /* with bytes unread: a reset */
		x->s = -1;
		rc = wait_for(x->c, POLLERR, "the reset");
	}
	if (!rc && (n = et_look(ep, &ev)) != 1)
		rc = failf("after the reset: %d; want 1", n);
	if (!rc)
		rc = so_error(x->c, &err);
	if (!rc && err != ECONNRESET)
		rc = failf("SO_ERROR %s, want ECONNRESET", errname(err));
	if (!rc && (n = et_look(ep, &ev)) != 0)
		rc = failf("after reading the error: %d, %s; want 0 (no edge)", n, evname(ev));
	close(ep);
	return rc;
}

/* Unix: the writer's edge comes when the peer's read frees one of its
 * writes (a buffer of the kernel's), not at a read of part of one; TCP
 * wakes a writer only after a send found its buffer full: no edge. */
static int case_epoll_et_out_at_whole_write(struct ctx *x)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0, "epoll_create1: %s", errname(errno));
	struct epoll_event e = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.fd = x->c };
	char b[4096];
	unsigned ev;
	int rc = 0, n;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, x->c, &e))
		rc = failf("epoll_ctl: %s", errname(errno));
	if (!rc && (n = et_look(ep, &ev)) != 1)
		rc = failf("after ADD: %d; want 1", n);
	memset(b, 'w', sizeof b);
	if (!rc && (send(x->c, b, 433, 0) != 433 || send(x->c, b, 3994, 0) != 3994))
		rc = failf("send: %s", errname(errno));
	if (!rc)
		rc = wait_for(x->s, POLLIN, "our bytes at the peer");
	msleep(20);
	if (!rc && (n = et_look(ep, &ev)) != 0)
		rc = failf("after our sends: %d, %s; want 0", n, evname(ev));
	if (!rc && recv(x->s, b, 100, 0) != 100) /* a part of the first write */
		rc = failf("recv 100: %s", errname(errno));
	msleep(20);
	if (!rc && (n = et_look(ep, &ev)) != 0)
		rc = failf("after the peer read part of a write: %d, %s; want 0", n, evname(ev));
	if (!rc && recv(x->s, b, 1000, 0) != 1000) /* past the first write's end */
		rc = failf("recv 1000: %s", errname(errno));
	msleep(20);
	int want = x->fam == AF_UNIX ? 1 : 0;
	if (!rc && (n = et_look(ep, &ev)) != want)
		rc = failf("after the peer read past a write's end: %d, %s; want %d", n, evname(ev),
			   want);
	if (!rc && want && ev != EPOLLOUT)
		rc = failf("after the peer read past a write's end: %s; want OUT", evname(ev));
	close(ep);
	return rc;
}

/* Unix: every shutdown of the peer's wakes us, also once its end and ours
 * are known, and so does its close; TCP says it once (its FIN). */
static int case_epoll_et_peer_shutdown_again(struct ctx *x)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0, "epoll_create1: %s", errname(errno));
	struct epoll_event e = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.fd = x->c };
	unsigned ev;
	int rc = 0, n, want = x->fam == AF_UNIX ? 1 : 0;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, x->c, &e))
		rc = failf("epoll_ctl: %s", errname(errno));
	if (!rc && (n = et_look(ep, &ev)) != 1)
		rc = failf("after ADD: %d; want 1", n);
	if (!rc && shutdown(x->s, SHUT_RDWR))
		rc = failf("shutdown: %s", errname(errno));
	if (!rc)
		rc = wait_for(x->c, POLLIN | POLLRDHUP, "the peer's shutdown");
	if (!rc && (n = et_look(ep, &ev)) != 1)
		rc = failf("after the peer's shutdown: %d; want 1", n);
	if (!rc && shutdown(x->s, SHUT_RD))
		rc = failf("shutdown again: %s", errname(errno));
	msleep(20);
	if (!rc && (n = et_look(ep, &ev)) != want)
		rc = failf("after the peer's second shutdown: %d, %s; want %d", n, evname(ev), want);
	if (!rc) {
		close(x->s);
		x->s = -1;
	}
	msleep(20);
	if (!rc && (n = et_look(ep, &ev)) != want)
		rc = failf("after the peer's close: %d, %s; want %d", n, evname(ev), want);
	close(ep);
	return rc;
}

/* An epoll set with fd in it, edge-triggered for IN, OUT and RDHUP (-1,
 * the failure printed, if not) */
static int et_set(int fd)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event e = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.fd = fd };
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e)) {
		failf("epoll: %s", errname(errno));
		if (ep >= 0)
			close(ep);
		return -1;
	}
	return ep;
}

/* Our urgent byte, which the peer reads: our sends go back to the kernel
 * stream, and (under the preload) the peer's follow */
static int urgent_to_c(struct ctx *x)
{
	char b;
	EXPECT_RET(send(x->s, "U", 1, MSG_OOB), 1);
	TRY(wait_for(x->c, POLLPRI, "the urgent byte"));
	EXPECT_RET(recv(x->c, &b, 1, MSG_OOB), 1);
	return 0;
}

/* A TCP socket whose both directions went back to the kernel stream
 * (urgent bytes each way) and whose input was read since the last
 * EPOLLET report: no edge came (reads are none), so none is reported,
 * also when the preload hands the socket back to the kernel meanwhile;
 * shut: then our shutdown, an edge (the kernel's wakes the socket's
 * waiters), after a poll (where the hand-back may come first). */
static int back_on_kernel(struct ctx *x, int shut)
{
	if (x->fam == AF_UNIX)
		return skipf("urgent data is TCP's");
	int ep = et_set(x->s);
	if (ep < 0)
		return 1;
	unsigned ev;
	char b[8];
	int rc = 0, n;
	if (!rc && (write(x->c, "abc", 3) != 3 || send(x->c, "V", 1, MSG_OOB) != 1))
		rc = failf("send: %s", errname(errno));
	if (!rc)
		rc = wait_for(x->s, POLLPRI, "the urgent byte");
	if (!rc && ((n = et_look(ep, &ev)) != 1 || ev != (EPOLLIN | EPOLLOUT)))
		rc = failf("after the bytes: %d, %s; want 1, IN|OUT", n, evname(ev));
	if (!rc)
		rc = urgent_to_c(x);
	if (!rc && recv(x->s, b, sizeof b, MSG_DONTWAIT) != 3)
		rc = failf("recv: %s", errname(errno));
	if (!rc && recv(x->s, b, 1, MSG_OOB | MSG_DONTWAIT) != 1)
		rc = failf("recv(MSG_OOB): %s", errname(errno));
	msleep(20);
	if (shut) {
		unsigned pev;
		for (int i = 0; !rc && i < 3; i++)
			rc = poll1(x->s, POLLIN | POLLOUT, 0, &pev) < 0;
		if (!rc && shutdown(x->s, SHUT_WR))
			rc = failf("shutdown: %s", errname(errno));
		if (!rc && ((n = et_look(ep, &ev)) != 1 || ev != EPOLLOUT))
			rc = failf("after our shutdown: %d, %s; want 1, OUT", n, evname(ev));
	}
	if (!rc) /* (the first look may hand it back) */
		rc = no_edge(ep, 2, "after reads only");
	close(ep);
	return rc;
}

static int case_epoll_et_back_on_kernel_no_edge(struct ctx *x)
{
	return back_on_kernel(x, 0);
}

static int case_epoll_et_back_on_kernel_shutdown(struct ctx *x)
{
	return back_on_kernel(x, 1);
}

/* Bytes that came are an edge also when read before the look (the
 * kernel's wake-up came with them): the report says what is now, OUT.
 * back: before the look both directions went back to the kernel stream
 * (urgent bytes), and the preload hands the socket back to the kernel. */
static int bytes_read_before_look(struct ctx *x, int back)
{
	if (back && x->fam == AF_UNIX)
		return skipf("urgent data is TCP's");
	int ep = et_set(x->s);
	if (ep < 0)
		return 1;
	unsigned ev;
	int rc = 0, n;
	if (!rc && ((n = et_look(ep, &ev)) != 1 || ev != EPOLLOUT))
		rc = failf("after ADD: %d, %s; want 1, OUT", n, evname(ev));
	if (!rc && write(x->c, "abc", 3) != 3)
		rc = failf("write: %s", errname(errno));
	if (!rc)
		rc = expect_bytes(x->s, "abc", 3, "the bytes");
	if (!rc && back) {
		rc = urgent_to_c(x);
		msleep(20);
	}
	if (!rc && ((n = et_look(ep, &ev)) != 1 || ev != EPOLLOUT))
		rc = failf("after bytes read: %d, %s; want 1, OUT", n, evname(ev));
	if (!rc)
		rc = no_edge(ep, 2, "again");
	close(ep);
	return rc;
}

static int case_epoll_et_bytes_read_before_look(struct ctx *x)
{
	return bytes_read_before_look(x, 0);
}

static int case_epoll_et_bytes_read_then_back(struct ctx *x)
{
	return bytes_read_before_look(x, 1);
}

/* A TCP peer that shut its sending side, then went back to the kernel
 * stream (following ours: our urgent byte): its end was an edge once; the
 * FIN its kernel sends only now is none, also when the preload hands the
 * socket back to the kernel (the next look). */
static int case_epoll_et_fin_after_way_back(struct ctx *x)
{
	if (x->fam == AF_UNIX)
		return skipf("urgent data is TCP's");
	int ep = et_set(x->s);
	if (ep < 0)
		return 1;
	unsigned ev;
	int rc = 0, n;
	if (!rc && ((n = et_look(ep, &ev)) != 1 || ev != EPOLLOUT))
		rc = failf("after ADD: %d, %s; want 1, OUT", n, evname(ev));
	if (!rc && shutdown(x->c, SHUT_WR))
		rc = failf("shutdown: %s", errname(errno));
	if (!rc)
		rc = wait_for(x->s, POLLRDHUP, "the peer's shutdown");
	if (!rc && ((n = et_look(ep, &ev)) != 1 || ev != (EPOLLIN | EPOLLOUT | EPOLLRDHUP)))
		rc = failf("after its shutdown: %d, %s; want 1, IN|OUT|RDHUP", n, evname(ev));
	if (!rc)
		rc = urgent_to_c(x);
	msleep(20);
	if (!rc)
		rc = no_edge(ep, 3, "after its way back");
	close(ep);
	return rc;
}

/* A TCP peer that went back to the kernel stream and closed with our
 * bytes unread: the reset is an edge once; reading what came before it,
 * the error and the end makes none. */
static int case_epoll_et_reset_after_way_back(struct ctx *x)
{
	if (x->fam == AF_UNIX)
		return skipf("urgent data is TCP's");
	int ep = et_set(x->s);
	if (ep < 0)
		return 1;
	unsigned ev;
	char b[8];
	int rc = 0, n;
	if (!rc && write(x->c, "abc", 3) != 3)
		rc = failf("write: %s", errname(errno));
	if (!rc && send(x->s, "U", 1, MSG_OOB) != 1)
		rc = failf("send: %s", errname(errno));
	if (!rc)
		rc = wait_for(x->c, POLLPRI, "the urgent byte");
	if (!rc) {
		close(x->c);
		x->c = -1;
		rc = wait_for(x->s, POLLERR, "the reset");
	}
	if (!rc && ((n = et_look(ep, &ev)) != 1 || !(ev & EPOLLERR)))
		rc = failf("after the reset: %d, %s; want 1 with ERR", n, evname(ev));
	if (!rc && recv(x->s, b, sizeof b, MSG_DONTWAIT) != 3)
		rc = failf("recv: %s", errname(errno));
	if (!rc && (recv(x->s, b, sizeof b, MSG_DONTWAIT) != -1 || errno != ECONNRESET))
		rc = failf("recv: %s, want ECONNRESET", errname(errno));
	if (!rc && recv(x->s, b, sizeof b, MSG_DONTWAIT) != 0)
		rc = failf("recv: %s, want the end", errname(errno));
	msleep(20);
	if (!rc)
		rc = no_edge(ep, 3, "after reads only");
	close(ep);
	return rc;
}

/* A TCP socket handed back to the kernel (both directions went back: an
 * urgent byte each way), then shut both ways: the peer's data resets it
 * (RFC 1122; Linux's tcp_rcv_state_process), which wakes its waiters: an
 * edge, although no byte is received and, once SO_ERROR took the error,
 * no event is new to the set. */
static int case_epoll_et_reset_by_data_after_back(struct ctx *x)
{
	if (x->fam == AF_UNIX)
		return skipf("urgent data is TCP's");
	int ep = et_set(x->s);
	if (ep < 0)
		return 1;
	unsigned ev;
	char b[8];
	int rc = 0, n;
	if (send(x->c, "V", 1, MSG_OOB) != 1)
		rc = failf("send: %s", errname(errno));
	if (!rc)
		rc = wait_for(x->s, POLLPRI, "the urgent byte");
	if (!rc && recv(x->s, b, 1, MSG_OOB) != 1)
		rc = failf("recv(MSG_OOB): %s", errname(errno));
	if (!rc)
		rc = urgent_to_c(x);
	msleep(20);
	for (int i = 0; !rc && i < 2; i++) /* (the hand-back may come in one) */
		et_look(ep, &ev);
	if (!rc && shutdown(x->s, SHUT_RDWR))
		rc = failf("shutdown: %s", errname(errno));
	if (!rc && (n = et_look(ep, &ev)) != 1)
		rc = failf("after our shutdown: %d, %s; want 1", n, evname(ev));
	if (!rc && (n = et_look(ep, &ev)) != 0)
		rc = failf("again: %d, %s; want 0", n, evname(ev));
	if (!rc && send(x->c, "late", 4, MSG_NOSIGNAL) != 4)
		rc = failf("send: %s", errname(errno));
	if (!rc)
		rc = wait_for(x->s, POLLERR, "the reset");
	int err = 0;
	if (!rc) /* (the error read first: nothing new to the set but the wake-up) */
		rc = so_error(x->s, &err);
	if (!rc && err != ECONNRESET)
		rc = failf("SO_ERROR: %s, want ECONNRESET", errname(err));
	if (!rc && (n = et_look(ep, &ev)) != 1)
		rc = failf("after the reset: %d, %s; want 1", n, evname(ev));
	close(ep);
	return rc;
}

static const struct test tests[] = {
	{ "epoll_et_all_events", case_epoll_et_all_events },
	{ "epoll_et_quiet_edges", case_epoll_et_quiet_edges },
	{ "epoll_et_error_read", case_epoll_et_error_read },
	{ "epoll_et_out_at_whole_write", case_epoll_et_out_at_whole_write },
	{ "epoll_et_peer_shutdown_again", case_epoll_et_peer_shutdown_again },
	{ "epoll_et_back_on_kernel_no_edge", case_epoll_et_back_on_kernel_no_edge },
	{ "epoll_et_back_on_kernel_shutdown", case_epoll_et_back_on_kernel_shutdown },
	{ "epoll_et_bytes_read_before_look", case_epoll_et_bytes_read_before_look },
	{ "epoll_et_bytes_read_then_back", case_epoll_et_bytes_read_then_back },
	{ "epoll_et_fin_after_way_back", case_epoll_et_fin_after_way_back },
	{ "epoll_et_reset_after_way_back", case_epoll_et_reset_after_way_back },
	{ "epoll_et_reset_by_data_after_back", case_epoll_et_reset_by_data_after_back },
};

int main(int argc, char **argv)
{
	return pair_main(argc, argv, "edges_test", tests, sizeof tests / sizeof tests[0]);
}
