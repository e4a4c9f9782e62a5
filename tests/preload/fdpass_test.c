/* SPDX-License-Identifier: MIT */
/* fdpass_test: a connected TCP socket handed to another process over a
 * Unix socket (SCM_RIGHTS). On kernel sockets the receiver reads and
 * answers through it. A switched socket's bytes travel in a ring the
 * receiver does not know of, so under the preload sendmsg refuses it with
 * EOPNOTSUPP and the connection stays the sender's, intact (before, the
 * hand-off went through and the peer saw ECONNRESET). Run with and without
 * the preload (zl-run); exit 0 pass, 1 fail. */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int fail(const char *what)
{
	fprintf(stderr, "fdpass_test: %s: %s\n", what, strerror(errno));
	return 1;
}

static int expect(int fd, const char *want)
{
	char b[16];
	size_t n = strlen(want), got = 0;
	while (got < n) {
		ssize_t r = read(fd, b + got, n - got);
		if (r <= 0)
			return r ? fail("read") : (fprintf(stderr, "fdpass_test: early EOF\n"), 1);
		got += (size_t)r;
	}
	if (memcmp(b, want, n)) {
		fprintf(stderr, "fdpass_test: read the wrong bytes, want '%s'\n", want);
		return 1;
	}
	return 0;
}

static int say(int fd, const char *what)
{
	size_t n = strlen(what);
	return write(fd, what, n) == (ssize_t)n ? 0 : fail("write");
}

/* The receiving process: the descriptor, if one comes, answers "ok" to
 * "hello"; EOF on the Unix socket (nothing passed) is fine too. */
static int receiver(int sp)
{
	char b, cb[CMSG_SPACE(sizeof(int))];
	struct iovec io = { &b, 1 };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = cb,
			    .msg_controllen = sizeof cb };
	ssize_t r = recvmsg(sp, &m, 0);
	if (r == 0)
		return 0;
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	if (r != 1 || !c || c->cmsg_type != SCM_RIGHTS)
		return fail("recvmsg");
	int fd;
	memcpy(&fd, CMSG_DATA(c), sizeof fd);
	return expect(fd, "hello") || say(fd, "ok");
}

int main(void)
{
	alarm(20);
	signal(SIGPIPE, SIG_IGN);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof a;
	int sp[2], l = socket(AF_INET, SOCK_STREAM, 0);
	if (bind(l, (void *)&a, sizeof a) || listen(l, 8) || getsockname(l, (void *)&a, &al) ||
	    socketpair(AF_UNIX, SOCK_STREAM, 0, sp))
		return fail("setup");
	pid_t pid = fork();
	if (pid == 0) {
		close(sp[0]);
		close(l);
		_exit(receiver(sp[1]));
	}
	close(sp[1]);
	int c = socket(AF_INET, SOCK_STREAM, 0), s;
	if (c < 0 || connect(c, (void *)&a, sizeof a) || (s = accept(l, NULL, NULL)) < 0)
		return fail("connect");
	if (say(c, "x") || expect(s, "x"))
		return 1;
	char cb[CMSG_SPACE(sizeof(int))];
	memset(cb, 0, sizeof cb);
	struct iovec io = { "F", 1 };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = cb,
			    .msg_controllen = sizeof cb };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &c, sizeof c);
	ssize_t r = sendmsg(sp[0], &m, 0);
	int e = errno;
	close(sp[0]);
	const char *pre = getenv("LD_PRELOAD");
	bool preloaded = pre && strstr(pre, "zipline-preload");
	int st, bad;
	if (r == 1) { /* handed off: the receiver answers, our close ends nothing */
		close(c);
		bad = say(s, "hello") || expect(s, "ok");
		if (!bad && read(s, &st, 1) != 0)
			bad = fail("after the receiver closed: want EOF");
		if (!bad)
			printf("handed off: the receiver answered through it\n");
	} else if (r < 0 && e == EOPNOTSUPP && preloaded) { /* still ours, intact */
		bad = say(c, "after") || expect(s, "after") || say(s, "back") || expect(c, "back");
		if (!bad)
			printf("refused (EOPNOTSUPP): the connection stays the sender's\n");
	} else {
		errno = e;
		bad = fail(preloaded ? "sendmsg, preloaded" : "sendmsg");
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		bad = bad || (fprintf(stderr, "fdpass_test: the receiver failed\n"), 1);
	return bad;
}
