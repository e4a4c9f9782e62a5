/* SPDX-License-Identifier: MIT */
/*
 * rules_test.c - the kernel's rules for stream sockets that the preload
 * once broke (epoll, splice and sendfile, fd passing; resets are in
 * reset_test.c, urgent data in urgent_test.c), each a case named after
 * the rule: it asserts what Linux does,
 * runs plain and preloaded (rules_run.sh, through sem_run.sh) and must
 * print the same transcript both ways.
 *
 *   rules_test tcp4|tcp6|unix [case-name-substring]
 *
 * Each case gets a fresh pair (listener, connected c, accepted s) that
 * first exchanges a byte each way, so that under the preload both
 * directions have switched before the rule is tried. stdout: "ok NAME",
 * "FAIL NAME: why" or "skip NAME: why" per case. Exit 0 all passed, 1 a
 * case failed, 77 the family is unavailable, 2 usage. Bounds: a 20 s
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

#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>

/* ---- epoll ------------------------------------------------------------------- */

/* epoll_ctl on a switched socket as on a kernel one, however often an
 * event loop adds, modifies and deletes it: EEXIST, ENOENT, no events
 * after a delete, the events after a new add. */
static int case_epoll_ctl_add_del(struct ctx *x)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0, "epoll_create1: %s", errname(errno));
	struct epoll_event e = { .events = EPOLLIN, .data.fd = x->s }, out[4];
	int rc = 0;
	for (int round = 0; round < 3 && !rc; round++) {
		if (epoll_ctl(ep, EPOLL_CTL_ADD, x->s, &e))
			rc = failf("ADD: %s", errname(errno));
		else if (!epoll_ctl(ep, EPOLL_CTL_ADD, x->s, &e) || errno != EEXIST)
			rc = failf("a second ADD: %s, want EEXIST", errname(errno));
		else if (epoll_wait(ep, out, 4, 0) != 0)
			rc = failf("events before any byte");
		else if (write(x->c, "b", 1) != 1 || epoll_wait(ep, out, 4, 1000) != 1 ||
			 out[0].events != EPOLLIN)
			rc = failf("no EPOLLIN after a byte");
		else if ((e.events = EPOLLIN | EPOLLOUT), epoll_ctl(ep, EPOLL_CTL_MOD, x->s, &e))
			rc = failf("MOD: %s", errname(errno));
		else if (epoll_wait(ep, out, 4, 1000) != 1 || out[0].events != (EPOLLIN | EPOLLOUT))
			rc = failf("MOD to IN|OUT: events 0x%x", out[0].events);
		else if (epoll_ctl(ep, EPOLL_CTL_DEL, x->s, NULL))
			rc = failf("DEL: %s", errname(errno));
		else if (epoll_wait(ep, out, 4, 0) != 0)
			rc = failf("events after DEL");
		else if (!epoll_ctl(ep, EPOLL_CTL_DEL, x->s, NULL) || errno != ENOENT)
			rc = failf("a second DEL: %s, want ENOENT", errname(errno));
		else if (!epoll_ctl(ep, EPOLL_CTL_MOD, x->s, &e) || errno != ENOENT)
			rc = failf("MOD after DEL: %s, want ENOENT", errname(errno));
		else {
			char b;
			if (read(x->s, &b, 1) != 1)
				rc = failf("read the byte: %s", errname(errno));
			e.events = EPOLLIN;
		}
	}
	close(ep);
	return rc;
}

/* epoll_wait gives every ready fd the caller has room for: 300 pipes
 * with bytes here, in a set that also holds the (switched) socket. */
#define MANY 300
static int case_epoll_many_ready(struct ctx *x)
{
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < 2 * MANY + 64)
		return skipf("RLIMIT_NOFILE %llu is below %d", (unsigned long long)rl.rlim_cur,
			     2 * MANY + 64);
	int ep = epoll_create1(EPOLL_CLOEXEC), fds[2 * MANY], n = 0, rc = 0;
	CHECK(ep >= 0, "epoll_create1: %s", errname(errno));
	struct epoll_event e = { .events = EPOLLIN, .data.fd = x->c };
	if (epoll_ctl(ep, EPOLL_CTL_ADD, x->c, &e))
		rc = failf("epoll_ctl(socket): %s", errname(errno));
	for (; rc == 0 && n < 2 * MANY; n += 2) {
		if (pipe2(fds + n, O_CLOEXEC)) {
			rc = failf("pipe %d: %s", n / 2, errname(errno));
			break;
		}
		e.data.fd = fds[n];
		if (write(fds[n + 1], "x", 1) != 1 || epoll_ctl(ep, EPOLL_CTL_ADD, fds[n], &e))
			rc = failf("pipe %d: %s", n / 2, errname(errno));
	}
	if (rc == 0) {
		struct epoll_event evs[2 * MANY];
		int got = epoll_wait(ep, evs, 2 * MANY, IO_WAIT_MS);
		if (got != MANY)
			rc = failf("epoll_wait(max %d) = %s, want %d ready", 2 * MANY, rets(got, errno),
				   MANY);
		got = rc ? 0 : epoll_wait(ep, evs, 100, 0);
		if (rc == 0 && got != 100)
			rc = failf("epoll_wait(max 100) = %s, want 100", rets(got, errno));
	}
	for (int i = 0; i < n; i++)
		close(fds[i]);
	close(ep);
	return rc;
}

/* ---- splice and sendfile ------------------------------------------------- */

#define SPL (96u << 10) /* fits a Unix socket's default buffers */

/* Reads what a pipe holds now into out (nonblocking), at most cap. */
static size_t drain_pipe(int fd, uint8_t *out, size_t cap)
{
	size_t got = 0;
	for (ssize_t r; got < cap && (r = read(fd, out + got, cap - got)) > 0;)
		got += (size_t)r;
	return got;
}

/* splice from the socket into a nonblocking pipe with little room: short
 * counts or EAGAIN, never a byte lost or twice. */
static int case_splice_socket_to_full_pipe(struct ctx *x)
{
	int p[2];
	CHECK(!pipe2(p, O_CLOEXEC | O_NONBLOCK), "pipe2: %s", errname(errno));
	uint8_t *buf = malloc(2 * SPL);
	int rc = buf ? 0 : failf("out of memory");
	size_t filler = 60000, moved = 0, got = 0, want = SPL + filler;
	if (!rc) {
		fill_pat(buf, SPL, 11, 0);
		rc = write_full(x->s, buf, SPL, "data");
	}
	memset(buf, 0xee, filler);
	if (!rc && write(p[1], buf, filler) != (ssize_t)filler)
		rc = failf("filling the pipe: %s", errname(errno));
	for (double quiet = now_ms(); !rc && moved < SPL && now_ms() - quiet < IO_WAIT_MS;) {
		ssize_t r = splice(x->c, NULL, p[1], NULL, SPL - moved, SPLICE_F_NONBLOCK);
		if (r > 0) {
			moved += (size_t)r;
			quiet = now_ms();
		} else if (r < 0 && errno == EAGAIN) { /* the pipe is full, or the bytes not here */
			size_t d = drain_pipe(p[0], buf + got, want - got);
			got += d;
			if (!d)
				wait_ev(x->c, POLLIN, 10);
		} else
			rc = failf("splice: %s after %zu bytes", rets(r, errno), moved);
	}
	if (!rc)
		got += drain_pipe(p[0], buf + got, want - got);
	if (!rc && (moved != SPL || got != want))
		rc = failf("moved %zu, the pipe gave %zu bytes, want %u and %zu", moved, got, SPL, want);
	for (size_t i = 0; !rc && i < filler; i++)
		if (buf[i] != 0xee)
			rc = failf("the pipe's first bytes were changed");
	if (!rc)
		rc = check_pat(buf + filler, SPL, 11, 0, "spliced bytes");
	free(buf);
	close(p[0]);
	close(p[1]);
	return rc;
}

/* splice from a pipe into a nonblocking socket whose peer does not read:
 * the socket takes what it has room for, the rest stays in the pipe; all
 * of it arrives once the peer reads. */
static int case_splice_pipe_to_full_socket(struct ctx *x)
{
	int p[2];
	CHECK(!pipe2(p, O_CLOEXEC | O_NONBLOCK), "pipe2: %s", errname(errno));
	fcntl(p[0], F_SETPIPE_SZ, 1 << 20);
	int rc = set_nonblock(x->c, 1);
	uint8_t *buf = malloc(8 * SPL), *in = malloc(8 * SPL);
	size_t total = 8 * SPL, put = 0, moved = 0, got = 0;
	if (!buf || !in)
		rc = failf("out of memory");
	if (!rc)
		fill_pat(buf, total, 12, 0);
	for (double quiet = now_ms(); !rc && got < total && now_ms() - quiet < IO_WAIT_MS;) {
		ssize_t w = put < total ? write(p[1], buf + put, total - put) : 0;
		if (w > 0)
			put += (size_t)w;
		ssize_t r = moved < put ? splice(p[0], NULL, x->c, NULL, put - moved, SPLICE_F_NONBLOCK)
					: 0;
		if (r > 0)
			moved += (size_t)r;
		else if (r < 0 && errno != EAGAIN)
			rc = failf("splice: %s after %zu bytes", rets(r, errno), moved);
		if (!(rand() & 3) || moved == total) { /* the peer reads now and then */
			ssize_t k = recv(x->s, in + got, total - got, MSG_DONTWAIT);
			if (k > 0) {
				got += (size_t)k;
				quiet = now_ms();
			} else if (moved == total) {
				wait_ev(x->s, POLLIN, 10); /* bytes in flight */
			}
		}
	}
	if (!rc && got != total)
		rc = failf("the peer got %zu of %zu bytes (%zu spliced)", got, total, moved);
	if (!rc)
		rc = check_pat(in, total, 12, 0, "the peer's bytes");
	free(buf);
	free(in);
	close(p[0]);
	close(p[1]);
	return rc;
}

/* sendfile into a nonblocking socket whose peer reads slowly: short
 * counts, the offset advanced by what went, every byte once. */
static int case_sendfile_to_full_socket(struct ctx *x)
{
	char path[128];
	snprintf(path, sizeof path, "%s/file", g_dir);
	int f = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(f >= 0, "open: %s", errname(errno));
	unlink(path);
	size_t total = 8 * SPL, got = 0;
	uint8_t *buf = malloc(total), *in = malloc(total);
	int rc = buf && in ? set_nonblock(x->c, 1) : failf("out of memory");
	if (!rc) {
		fill_pat(buf, total, 13, 0);
		rc = write_full(f, buf, total, "file");
	}
	off_t off = 0;
	for (double quiet = now_ms(); !rc && got < total && now_ms() - quiet < IO_WAIT_MS;) {
		if ((size_t)off < total) {
			ssize_t r = sendfile(x->c, f, &off, total - (size_t)off);
			if (r < 0 && errno != EAGAIN)
				rc = failf("sendfile: %s at %lld", rets(r, errno), (long long)off);
		}
		ssize_t k = recv(x->s, in + got, total - got, MSG_DONTWAIT);
		if (k > 0) {
			got += (size_t)k;
			quiet = now_ms();
		} else {
			wait_ev(x->s, POLLIN, 10); /* bytes in flight */
		}
	}
	if (!rc && ((size_t)off != total || got != total))
		rc = failf("offset %lld, the peer got %zu, want %zu", (long long)off, got, total);
	if (!rc)
		rc = check_pat(in, total, 13, 0, "the peer's bytes");
	free(buf);
	free(in);
	close(f);
	return rc;
}

/* ---- what a ring cannot carry: the connection goes back to the kernel ------- */

/* Passes fd over the socket with one byte (SCM_RIGHTS). */
static int send_fd(int sock, int fd, char byte)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr a;
	} u;
	memset(&u, 0, sizeof u);
	struct iovec io = { &byte, 1 };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = u.b,
			    .msg_controllen = sizeof u.b };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof fd);
	EXPECT_RET(sendmsg(sock, &m, 0), 1);
	return 0;
}

/* One byte and the fd passed with it, or -1 (none). */
static int recv_fd(int sock, char *byte, int *fd)
{
	union {
		char b[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr a;
	} u;
	struct iovec io = { byte, 1 };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = u.b,
			    .msg_controllen = sizeof u.b };
	TRY(wait_for(sock, POLLIN, "a passed fd"));
	EXPECT_RET(recvmsg(sock, &m, MSG_CMSG_CLOEXEC), 1);
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	*fd = -1;
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
		memcpy(fd, CMSG_DATA(c), sizeof *fd);
	CHECK(!(m.msg_flags & MSG_CTRUNC), "recvmsg: MSG_CTRUNC");
	return 0;
}

/* fds passed over a switched Unix socket arrive with their byte, between
 * the bytes sent before and after, and the connection goes on both ways. */
static int case_fd_pass(struct ctx *x)
{
	if (x->fam != AF_UNIX)
		return skipf("fd passing is for Unix sockets");
	for (int round = 0; round < 3; round++) {
		int p[2], got = -1;
		char b[8];
		CHECK(!pipe2(p, O_CLOEXEC), "pipe2: %s", errname(errno));
		EXPECT_RET(write(x->c, "abc", 3), 3);
		TRY(send_fd(x->c, p[1], 'D'));
		EXPECT_RET(write(x->c, "xyz", 3), 3);
		TRY(expect_bytes(x->s, "abc", 3, "before the fd"));
		TRY(recv_fd(x->s, b, &got));
		CHECK(b[0] == 'D' && got >= 0, "the fd's byte 0x%02x, fd %d", (uint8_t)b[0], got);
		TRY(expect_bytes(x->s, "xyz", 3, "after the fd"));
		EXPECT_RET(write(got, "via", 3), 3); /* the passed fd is the pipe */
		TRY(expect_bytes(p[0], "via", 3, "through the passed fd"));
		close(got);
		close(p[0]);
		close(p[1]);
		EXPECT_RET(write(x->s, "pong", 4), 4);
		TRY(expect_bytes(x->c, "pong", 4, "the other way"));
	}
	return 0;
}

/* A Unix socket that shut its reading side, then passed an fd (which
 * takes its sends back to the kernel stream, and the peer's with them):
 * the peer's sends still fail with EPIPE. */
static int case_shut_rd_then_fd_pass(struct ctx *x)
{
	unsigned ev = 0;
	if (x->fam != AF_UNIX)
		return skipf("fd passing is for Unix sockets");
	int p[2];
	CHECK(!pipe2(p, O_CLOEXEC), "pipe2: %s", errname(errno));
	EXPECT_RET(write(x->s, "unread", 6), 6);
	TRY(wait_for(x->c, POLLIN, "the bytes"));
	EXPECT_OK(shutdown(x->c, SHUT_RD));
	int rc = send_fd(x->c, p[1], 'D');
	close(p[0]);
	close(p[1]);
	TRY(rc);
	TRY(wait_for(x->s, POLLIN, "the fd"));
	TRY(poll1(x->s, POLLOUT, 0, &ev));
	EXPECT_ERR(send(x->s, "late", 4, MSG_NOSIGNAL), EPIPE);
	return 0;
}

/* A Unix peer that we passed an fd to (both ends' sends go back to the
 * kernel stream, with bytes unread on the rings both ways), then shut its
 * sending side: we see the end (POLLIN, POLLRDHUP), not a hang-up
 * (POLLHUP is both ways shut), and our sends still go through. */
static int case_fd_pass_then_peer_shut_wr(struct ctx *x)
{
	if (x->fam != AF_UNIX)
		return skipf("fd passing is for Unix sockets");
	int p[2];
	unsigned ev = 0;
	CHECK(!pipe2(p, O_CLOEXEC), "pipe2: %s", errname(errno));
	EXPECT_RET(write(x->c, "x", 1), 1);
	TRY(wait_for(x->s, POLLIN, "its bytes"));
	EXPECT_RET(write(x->s, "abc", 3), 3);
	int rc = send_fd(x->s, p[1], 'D');
	close(p[0]);
	close(p[1]);
	TRY(rc);
	TRY(wait_for(x->c, POLLIN, "the bytes"));
	EXPECT_OK(shutdown(x->c, SHUT_WR));
	TRY(wait_for(x->s, POLLIN | POLLRDHUP, "the peer's shutdown"));
	TRY(poll1(x->s, POLLIN | POLLOUT | POLLRDHUP, 0, &ev));
	CHECK((ev & EV_MASK) == (POLLIN | POLLOUT | POLLRDHUP), "poll after its shutdown: %s",
	      evname(ev & EV_MASK));
	EXPECT_RET(send(x->s, "more", 4, MSG_NOSIGNAL), 4);
	TRY(expect_bytes(x->s, "x", 1, "before its shutdown"));
	TRY(expect_bytes(x->c, "abcDmore", 8, "ours"));
	return 0;
}

/* A Unix peer that shut its reading side (while on the ring), passed an
 * fd, then shut its sending side: both ways are shut for us (POLLHUP),
 * with the fd's byte still to read. */
static int case_shut_rd_fd_pass_shut_wr_hangs_up(struct ctx *x)
{
	if (x->fam != AF_UNIX)
		return skipf("fd passing is for Unix sockets");
	int p[2];
	unsigned ev = 0;
	CHECK(!pipe2(p, O_CLOEXEC), "pipe2: %s", errname(errno));
	EXPECT_OK(shutdown(x->s, SHUT_RD));
	int rc = send_fd(x->s, p[1], 'D');
	close(p[0]);
	close(p[1]);
	TRY(rc);
	EXPECT_OK(shutdown(x->s, SHUT_WR));
	TRY(wait_for(x->c, POLLRDHUP, "the peer's shutdown"));
	TRY(poll1(x->c, POLLIN | POLLOUT | POLLRDHUP, 0, &ev));
	CHECK((ev & EV_MASK) == (POLLIN | POLLOUT | POLLHUP | POLLRDHUP), "poll: %s",
	      evname(ev & EV_MASK));
	return 0;
}

/* A Unix peer passed an fd (both ends' sends go back to the kernel
 * stream), then closed with our bytes unread on the ring: we read what it
 * sent, then ECONNRESET, then the end; a MSG_WAITALL read that gets bytes
 * takes the error with them (Linux's unix_stream_read_generic). */
static int unix_reset_after_way_back(struct ctx *x, int waitall)
{
	char b[16];
	int p[2], got = -1;
	if (x->fam != AF_UNIX)
		return skipf("fd passing is for Unix sockets");
	CHECK(!pipe2(p, O_CLOEXEC), "pipe2: %s", errname(errno));
	EXPECT_RET(write(x->c, "unread", 6), 6);
	TRY(wait_for(x->s, POLLIN, "our bytes"));
	int rc = send_fd(x->s, p[1], 'D');
	close(p[0]);
	close(p[1]);
	TRY(rc);
	TRY(recv_fd(x->c, b, &got));
	close(got);
	if (waitall == 2) { /* our fd, unread too: our sends go back as well */
		CHECK(!pipe2(p, O_CLOEXEC), "pipe2: %s", errname(errno));
		rc = send_fd(x->c, p[1], 'E');
		close(p[0]);
		close(p[1]);
		TRY(rc);
	}
	EXPECT_RET(write(x->s, "tail", 4), 4);
	TRY(wait_for(x->c, POLLIN, "the bytes after the fd"));
	close_fd(&x->s); /* ("unread" unread) */
	TRY(wait_for(x->c, POLLERR, "the reset"));
	if (waitall) {
		EXPECT_RET(recv(x->c, b, sizeof b, MSG_WAITALL), 4);
		if (waitall == 2) { /* the error went with the bytes */
			int err = -1;
			TRY(so_error(x->c, &err));
			CHECK(err == 0, "SO_ERROR after the MSG_WAITALL read: %s, want 0",
			      errname(err));
		}
	} else {
		EXPECT_RET(recv(x->c, b, sizeof b, MSG_DONTWAIT), 4);
		EXPECT_ERR(recv(x->c, b, sizeof b, MSG_DONTWAIT), ECONNRESET);
	}
	EXPECT_RET(recv(x->c, b, sizeof b, MSG_DONTWAIT), 0);
	return 0;
}

static int case_unix_reset_after_way_back(struct ctx *x)
{
	return unix_reset_after_way_back(x, 0);
}

static int case_unix_reset_after_way_back_waitall(struct ctx *x)
{
	return unix_reset_after_way_back(x, 1);
}

/* The same with our sends back on the kernel stream too, so that the
 * kernel socket learns the reset as well: the MSG_WAITALL read takes it,
 * and SO_ERROR then says nothing. */
static int case_unix_waitall_takes_kernel_reset(struct ctx *x)
{
	return unix_reset_after_way_back(x, 2);
}

/* The peer shut its sending side on the ring, then our fd (Unix) or
 * urgent byte (TCP) took both ways back to the kernel stream, with bytes
 * of ours still unread on the ring: once we read the end, poll still says
 * POLLIN (the end stays readable) with RDHUP. */
static int case_eof_after_way_back_polls_in(struct ctx *x)
{
	char b[8];
	unsigned ev = 0;
	EXPECT_OK(shutdown(x->c, SHUT_WR));
	TRY(wait_for(x->s, POLLRDHUP, "the peer's end"));
	EXPECT_RET(send(x->s, "unread", 6, 0), 6); /* (keeps us switched) */
	if (x->fam == AF_UNIX) {
		int p[2], rc;
		CHECK(!pipe2(p, O_CLOEXEC), "pipe2: %s", errname(errno));
		rc = send_fd(x->s, p[1], 'D');
		close(p[0]);
		close(p[1]);
		TRY(rc);
	} else {
		EXPECT_RET(send(x->s, "U", 1, MSG_OOB), 1);
	}
	EXPECT_RET(recv(x->s, b, sizeof b, MSG_DONTWAIT), 0);
	usleep(20000); /* (the peer follows our way back) */
	EXPECT_RET(recv(x->s, b, sizeof b, MSG_DONTWAIT), 0);
	TRY(poll1(x->s, POLLIN | POLLOUT | POLLRDHUP, 0, &ev));
	CHECK((ev & EV_MASK) == (POLLIN | POLLOUT | POLLRDHUP), "poll at the end: %s",
	      evname(ev & EV_MASK));
	return 0;
}

/* FIONREAD counts every byte queued: those the peer sent before its
 * switch (still on the kernel stream) and those after (on the ring). */
static int case_fionread_counts_all(struct ctx *x)
{
	char b[3000];
	memset(b, 'f', sizeof b);
	int c = socket(x->fam, SOCK_STREAM | SOCK_CLOEXEC, 0), s = -1, rc = 0, n = -1;
	CHECK(c >= 0, "socket: %s", errname(errno));
	if (connect(c, (struct sockaddr *)&x->la, x->lalen))
		rc = failf("connect: %s", errname(errno));
	if (!rc && send(c, b, 3000, 0) != 3000) /* (before any switch) */
		rc = failf("send: %s", errname(errno));
	if (!rc && (s = accept4(x->lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
		rc = failf("accept: %s", errname(errno));
	msleep(50);
	if (!rc && send(c, b, 1000, 0) != 1000) /* (after it, under the preload) */
		rc = failf("send: %s", errname(errno));
	for (double end = now_ms() + IO_WAIT_MS; !rc && now_ms() < end; msleep(2))
		if (ioctl(s, FIONREAD, &n) || n == 4000)
			break;
	if (!rc && n != 4000)
		rc = failf("FIONREAD %d, want 4000", n);
	if (c >= 0)
		close(c);
	if (s >= 0)
		close(s);
	return rc;
}

/* A peek that its buffer fills goes on through the queue and reports the
 * fds of the first bytes ahead that carry some (Linux's stream read):
 * MSG_CTRUNC without a control buffer. */
static int case_peek_sees_fds_ahead(struct ctx *x)
{
	if (x->fam != AF_UNIX)
		return skipf("fd passing is for Unix sockets");
	int p[2];
	char b[8];
	CHECK(!pipe2(p, O_CLOEXEC), "pipe2: %s", errname(errno));
	EXPECT_RET(write(x->c, "abcdef", 6), 6);
	TRY(send_fd(x->c, p[1], 'D'));
	close(p[0]);
	close(p[1]);
	TRY(wait_for(x->s, POLLIN, "the bytes"));
	struct iovec io = { b, 3 };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1 };
	EXPECT_RET(recvmsg(x->s, &m, MSG_PEEK | MSG_DONTWAIT), 3);
	CHECK(m.msg_flags & MSG_CTRUNC, "a peek before fds: msg_flags 0x%x", m.msg_flags);
	TRY(expect_bytes(x->s, "abcdef", 6, "before the fd"));
	m.msg_flags = 0;
	EXPECT_RET(recvmsg(x->s, &m, MSG_DONTWAIT), 1);
	CHECK(b[0] == 'D' && (m.msg_flags & MSG_CTRUNC), "the fd's byte: 0x%02x, msg_flags 0x%x",
	      (uint8_t)b[0], m.msg_flags);
	return 0;
}

/* A MSG_WAITALL read ends after the bytes that carried fds, also when it
 * has no control buffer (the kernel closes them). */
static int case_waitall_stops_at_fds(struct ctx *x)
{
	if (x->fam != AF_UNIX)
		return skipf("fd passing is for Unix sockets");
	int p[2];
	char b[16];
	CHECK(!pipe2(p, O_CLOEXEC), "pipe2: %s", errname(errno));
	EXPECT_RET(write(x->c, "abc", 3), 3);
	TRY(send_fd(x->c, p[1], 'D'));
	EXPECT_RET(write(x->c, "xyz", 3), 3);
	close(p[0]);
	close(p[1]);
	TRY(wait_for(x->s, POLLIN, "the bytes"));
	EXPECT_RET(recv(x->s, b, sizeof b, MSG_WAITALL | MSG_DONTWAIT), 4);
	CHECK(!memcmp(b, "abcD", 4), "the bytes up to the fd differ");
	TRY(expect_bytes(x->s, "xyz", 3, "after the fd"));
	return 0;
}

/* ---- main ------------------------------------------------------------------- */

static const struct test tests[] = {
	{ "epoll_many_ready", case_epoll_many_ready },
	{ "epoll_ctl_add_del", case_epoll_ctl_add_del },
	{ "splice_socket_to_full_pipe", case_splice_socket_to_full_pipe },
	{ "splice_pipe_to_full_socket", case_splice_pipe_to_full_socket },
	{ "sendfile_to_full_socket", case_sendfile_to_full_socket },
	{ "fd_pass", case_fd_pass },
	{ "shut_rd_then_fd_pass", case_shut_rd_then_fd_pass },
	{ "fd_pass_then_peer_shut_wr", case_fd_pass_then_peer_shut_wr },
	{ "shut_rd_fd_pass_shut_wr_hangs_up", case_shut_rd_fd_pass_shut_wr_hangs_up },
	{ "unix_reset_after_way_back", case_unix_reset_after_way_back },
	{ "unix_reset_after_way_back_waitall", case_unix_reset_after_way_back_waitall },
	{ "unix_waitall_takes_kernel_reset", case_unix_waitall_takes_kernel_reset },
	{ "eof_after_way_back_polls_in", case_eof_after_way_back_polls_in },
	{ "fionread_counts_all", case_fionread_counts_all },
	{ "peek_sees_fds_ahead", case_peek_sees_fds_ahead },
	{ "waitall_stops_at_fds", case_waitall_stops_at_fds },
};

int main(int argc, char **argv)
{
	return pair_main(argc, argv, "rules_test", tests, sizeof tests / sizeof tests[0]);
}
