/* SPDX-License-Identifier: MIT */
/*
 * diff_test.c - the differential tester of the preload: seeded random
 * sequences of socket calls between two processes, run on kernel sockets
 * and then with the preload at both ends, at the connecting end only and
 * at the accepting end only; every return value, errno, event mask, byte
 * (hashed) and passed fd must be what the kernel gave.
 *
 *   diff_test [--strict-et] [--without CALL,...] FAM SEED OPS
 *                             FAM tcp4|tcp6|unix; OPS calls in all, on a
 *                             new connection every 200 or when both ends
 *                             closed. ZL_PRELOAD_LIB names the preload.
 *                             --without: these calls (names as printed,
 *                             e.g. shutdown,epoll_wait(ET)) are replaced by
 *                             FIONREAD, to look past a known difference.
 *                             --strict-et: edge-triggered epoll's edges
 *                             one for one as the kernel's (else against
 *                             epoll(7)'s promise: see et_required).
 *                             ZL_DIFF_ALL=1: the first difference's
 *                             report lists every step of its connection
 *                             with both results (kernel | preload).
 *   diff_test --worker ...    (internal: one end)
 *
 * A controller (this process, never preloaded) drives two workers, one per
 * end, each re-executed with or without the preload; it sends them one
 * call at a time and, after each, lets both settle (each polls its socket
 * until what it sees stops changing), so that a result never depends on
 * when bytes cross: on loopback they have crossed once settled. The calls
 * keep at most 32 KiB (Unix: 8 KiB) unread each way, so that no buffer
 * size (the kernel's, the ring's) shows. They are: send, write, writev, sendmsg,
 * sendto, recv, read, readv, recvmsg, recvfrom with MSG_PEEK,
 * MSG_WAITALL, MSG_DONTWAIT (never blocking); MSG_OOB both ways (TCP);
 * fds passed with SCM_RIGHTS (Unix); shutdown each way; close with and
 * without unread bytes; splice through a pipe; sendfile from a file;
 * poll, select and epoll, level- and edge-triggered, with 300 ready pipes
 * beside; FIONREAD, SIOCATMARK, SO_ERROR; a fork whose child sends.
 * stdout: a line per run and the first difference, if any; exit 0 none, 1
 * a difference, 77 skip (no ZL_PRELOAD_LIB, family unavailable), 2 usage.
 * Every wait is bounded: 5 s per answer of a worker, 300 s in all.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "sem_util.h"
#pragma GCC diagnostic pop

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <limits.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/uio.h>

enum op {
	O_SEND, O_WRITE, O_WRITEV, O_SENDMSG, O_SENDTO, O_RECV, O_READ, O_READV, O_RECVMSG,
	O_RECVFROM, O_OOB_SEND, O_OOB_RECV, O_FD_SEND, O_FD_RECV, O_SHUT, O_CLOSE, O_SPLICE,
	O_SENDFILE, O_POLL, O_SELECT, O_EPOLL_LT, O_EPOLL_ET, O_FIONREAD, O_ATMARK, O_SO_ERROR,
	O_FORK_SEND, O_NOPS
};
static const char *const op_name[] = {
	"send", "write", "writev", "sendmsg", "sendto", "recv", "read", "readv", "recvmsg",
	"recvfrom", "send(MSG_OOB)", "recv(MSG_OOB)", "sendmsg(SCM_RIGHTS)", "recvmsg(fds)",
	"shutdown", "close", "splice", "sendfile", "poll", "select", "epoll_wait",
	"epoll_wait(ET)", "FIONREAD", "SIOCATMARK", "SO_ERROR", "fork+send"
};

struct cmd {
	int op, len, flags, arg; /* arg: shutdown's how, the seed of the bytes */
};
struct res {
	long ret;
	int err;
	unsigned ev;      /* events, msg_flags, or fds received */
	unsigned lvl;     /* epoll_wait(ET): the socket's level state (poll) */
	uint64_t hash;    /* of the bytes read */
};

#define MAXLEN 4096
/* Unread bytes each way, at most: on TCP 32 KiB; a Unix socket stops
 * being writable when its queued buffers (with their overhead, a page or
 * more per write) pass a quarter of SO_SNDBUF, which the ring cannot
 * mirror, so there 8 KiB. */
#define INFLIGHT(unix) ((unix) ? 8 << 10 : 32 << 10)
#define PIPES 300

/* ---- a worker: one end of the connection --------------------------------- */

static int g_sock = -1, g_eplt = -1, g_epet = -1, g_file = -1;
static uint8_t g_buf[MAXLEN + 64];

static uint64_t fnv(const uint8_t *p, size_t n, uint64_t h)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static void fill(uint8_t *p, int n, int seed)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 31 + i * 7 + (i >> 8));
}

/* recv flags of a command: bit 0 MSG_PEEK, bit 1 MSG_WAITALL */
static int rflags(int f) { return MSG_DONTWAIT | (f & 1 ? MSG_PEEK : 0) | (f & 2 ? MSG_WAITALL : 0); }

static void do_cmd(const struct cmd *c, struct res *r)
{
	int s = g_sock;
	memset(r, 0, sizeof *r);
	errno = 0;
	struct iovec v[3] = { { g_buf, (size_t)c->len } };
	switch (c->op) {
	case O_SEND:
	case O_WRITE:
	case O_WRITEV:
	case O_SENDMSG:
	case O_SENDTO:
	case O_OOB_SEND:
		fill(g_buf, c->len, c->arg);
		if (c->op == O_SEND)
			r->ret = send(s, g_buf, (size_t)c->len, MSG_NOSIGNAL | MSG_DONTWAIT);
		else if (c->op == O_WRITE)
			r->ret = write(s, g_buf, (size_t)c->len);
		else if (c->op == O_SENDTO)
			r->ret = sendto(s, g_buf, (size_t)c->len, MSG_NOSIGNAL, NULL, 0);
		else if (c->op == O_OOB_SEND)
			r->ret = send(s, g_buf, (size_t)c->len, MSG_OOB | MSG_NOSIGNAL);
		else {
			v[0].iov_len = (size_t)c->len / 3;
			v[1] = (struct iovec){ g_buf + v[0].iov_len, (size_t)c->len / 3 };
			v[2] = (struct iovec){ g_buf + 2 * v[0].iov_len, (size_t)c->len - 2 * v[0].iov_len };
			struct msghdr m = { .msg_iov = v, .msg_iovlen = 3 };
			r->ret = c->op == O_WRITEV ? writev(s, v, 3) : sendmsg(s, &m, MSG_NOSIGNAL);
		}
		break;
	case O_RECV:
	case O_READ:
	case O_READV:
	case O_RECVMSG:
	case O_RECVFROM:
	case O_OOB_RECV: {
		if (c->op == O_RECV)
			r->ret = recv(s, g_buf, (size_t)c->len, rflags(c->flags));
		else if (c->op == O_READ) /* (the socket is nonblocking) */
			r->ret = read(s, g_buf, (size_t)c->len);
		else if (c->op == O_RECVFROM)
			r->ret = recvfrom(s, g_buf, (size_t)c->len, rflags(c->flags), NULL, NULL);
		else if (c->op == O_OOB_RECV)
			r->ret = recv(s, g_buf, (size_t)c->len, MSG_OOB | (c->flags & 1 ? MSG_PEEK : 0));
		else {
			v[0].iov_len = (size_t)c->len / 2;
			v[1] = (struct iovec){ g_buf + v[0].iov_len, (size_t)c->len - v[0].iov_len };
			struct msghdr m = { .msg_iov = v, .msg_iovlen = 2 };
			r->ret = c->op == O_READV ? readv(s, v, 2) : recvmsg(s, &m, rflags(c->flags));
			if (c->op == O_RECVMSG)
				r->ev = (unsigned)m.msg_flags;
		}
		break;
	}
	case O_FD_SEND: {
		int p[2];
		if (pipe2(p, O_CLOEXEC)) {
			r->ret = -2;
			break;
		}
		union {
			char b[CMSG_SPACE(sizeof(int))];
			struct cmsghdr a;
		} u;
		memset(&u, 0, sizeof u);
		fill(g_buf, c->len, c->arg);
		struct msghdr m = { .msg_iov = v, .msg_iovlen = 1, .msg_control = u.b,
				    .msg_controllen = sizeof u.b };
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &p[1], sizeof(int));
		r->ret = sendmsg(s, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		r->err = r->ret < 0 ? errno : 0;
		close(p[0]);
		close(p[1]);
		return;
	}
	case O_FD_RECV: {
		union {
			char b[CMSG_SPACE(4 * sizeof(int))];
			struct cmsghdr a;
		} u;
		struct msghdr m = { .msg_iov = v, .msg_iovlen = 1, .msg_control = u.b,
				    .msg_controllen = sizeof u.b };
		r->ret = recvmsg(s, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		r->err = r->ret < 0 ? errno : 0;
		unsigned nfd = 0;
		for (struct cmsghdr *cm = r->ret >= 0 ? CMSG_FIRSTHDR(&m) : NULL; cm; cm = CMSG_NXTHDR(&m, cm))
			if (cm->cmsg_type == SCM_RIGHTS) {
				int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
				for (int i = 0; i < k; i++) {
					int fd;
					memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
					/* a pipe's write end: it must write */
					nfd += write(fd, "z", 1) == 1 ? 1 : 100;
					close(fd);
				}
			}
		r->ev = nfd | ((unsigned)m.msg_flags & MSG_CTRUNC);
		if (r->ret > 0)
			r->hash = fnv(g_buf, (size_t)r->ret, 14695981039346656037ull);
		return;
	}
	case O_SHUT:
		r->ret = shutdown(s, c->arg);
		break;
	case O_CLOSE:
		r->ret = close(s);
		g_sock = -1;
		break;
	case O_SPLICE: { /* socket -> pipe -> our buffer */
		int p[2];
		if (pipe2(p, O_CLOEXEC | O_NONBLOCK)) {
			r->ret = -2;
			break;
		}
		r->ret = splice(s, NULL, p[1], NULL, (size_t)c->len, SPLICE_F_NONBLOCK);
		r->err = r->ret < 0 ? errno : 0;
		if (r->ret > 0 && read(p[0], g_buf, (size_t)r->ret) != r->ret)
			r->ret = -3;
		if (r->ret > 0)
			r->hash = fnv(g_buf, (size_t)r->ret, 14695981039346656037ull);
		close(p[0]);
		close(p[1]);
		return;
	}
	case O_SENDFILE: {
		off_t off = c->arg % 4096;
		r->ret = sendfile(s, g_file, &off, (size_t)c->len);
		r->ev = (unsigned)off;
		break;
	}
	case O_POLL: {
		struct pollfd p = { s, POLLIN | POLLOUT | POLLRDHUP | POLLPRI, 0 };
		r->ret = poll(&p, 1, 0);
		r->ev = p.revents;
		break;
	}
	case O_SELECT: {
		fd_set rs, ws, xs;
		FD_ZERO(&rs);
		FD_ZERO(&ws);
		FD_ZERO(&xs);
		FD_SET(s, &rs);
		FD_SET(s, &ws);
		FD_SET(s, &xs);
		struct timeval t = { 0, 0 };
		r->ret = select(s + 1, &rs, &ws, &xs, &t);
		r->ev = (FD_ISSET(s, &rs) ? 1 : 0) | (FD_ISSET(s, &ws) ? 2 : 0) | (FD_ISSET(s, &xs) ? 4 : 0);
		break;
	}
	case O_EPOLL_LT:
	case O_EPOLL_ET: {
		static struct epoll_event evs[PIPES + 8];
		r->ret = epoll_wait(c->op == O_EPOLL_LT ? g_eplt : g_epet, evs, PIPES + 8, 0);
		for (long i = 0; i < r->ret; i++)
			if (evs[i].data.fd == s)
				r->ev = evs[i].events;
		if (c->op == O_EPOLL_ET) { /* what a level report would say */
			int e = errno;
			struct pollfd p = { s, POLLIN | POLLOUT | POLLRDHUP | POLLPRI, 0 };
			poll(&p, 1, 0);
			r->lvl = (unsigned)p.revents;
			errno = e;
		}
		break;
	}
	case O_FIONREAD:
	case O_ATMARK: {
		int v2 = -1;
		r->ret = ioctl(s, c->op == O_FIONREAD ? FIONREAD : SIOCATMARK, &v2);
		r->ev = (unsigned)v2;
		break;
	}
	case O_SO_ERROR: {
		int e = 0;
		socklen_t l = sizeof e;
		r->ret = getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &l);
		r->ev = (unsigned)e;
		break;
	}
	case O_FORK_SEND: {
		pid_t p = fork();
		if (p == 0) {
			fill(g_buf, c->len, c->arg);
			_exit(send(s, g_buf, (size_t)c->len, MSG_NOSIGNAL) == c->len ? 0 : 1);
		}
		int st = -1;
		waitpid(p, &st, 0);
		r->ret = p > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -2;
		break;
	}
	}
	r->err = r->ret < 0 ? errno : 0;
	bool rd = c->op == O_RECV || c->op == O_READ || c->op == O_READV || c->op == O_RECVMSG ||
		  c->op == O_RECVFROM || c->op == O_OOB_RECV;
	if (rd && r->ret > 0)
		r->hash = fnv(g_buf, (size_t)r->ret, 14695981039346656037ull);
}

/* What the socket shows, for settling */
static uint64_t look(void)
{
	struct pollfd p = { g_sock, POLLIN | POLLOUT | POLLRDHUP | POLLPRI, 0 };
	int n = 0;
	if (g_sock < 0)
		return 0;
	poll(&p, 1, 0);
	ioctl(g_sock, FIONREAD, &n);
	return (uint64_t)(uint16_t)p.revents << 32 | (uint32_t)n;
}

/* Until what the socket shows stands still (bounded: 50 ms). */
static void settle(void)
{
	uint64_t was = look();
	for (int same = 0, i = 0; same < 3 && i < 250; i++) {
		usleep(200);
		uint64_t now = look();
		same = now == was ? same + 1 : 0;
		was = now;
	}
}

static int g_pipes[PIPES][2];

static void setup_sock(int s)
{
	g_sock = s;
	fcntl(s, F_SETFL, O_NONBLOCK);
	int one = 1; /* no Nagle: with delayed acks, bytes could wait 40 ms to go */
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (g_eplt >= 0)
		close(g_eplt);
	if (g_epet >= 0)
		close(g_epet);
	g_eplt = epoll_create1(EPOLL_CLOEXEC);
	g_epet = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event e = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI, .data.fd = s };
	epoll_ctl(g_eplt, EPOLL_CTL_ADD, s, &e);
	e.events |= EPOLLET;
	epoll_ctl(g_epet, EPOLL_CTL_ADD, s, &e);
	for (int i = 0; i < PIPES; i++) { /* ready beside it: more than 256 */
		struct epoll_event pe = { .events = EPOLLIN, .data.fd = g_pipes[i][0] };
		epoll_ctl(g_eplt, EPOLL_CTL_ADD, g_pipes[i][0], &pe);
		epoll_ctl(g_epet, EPOLL_CTL_ADD, g_pipes[i][0], &pe);
	}
}

enum { C_SETTLE = -1, C_CONNECT = -2, C_EXIT = -3 };

static int full_io(int fd, void *p, size_t n, bool wr)
{
	for (size_t done = 0; done < n;) {
		if (!wr && wait_ev(fd, POLLIN, 30000) <= 0)
			return -1;
		ssize_t r = wr ? write(fd, (char *)p + done, n - done) : read(fd, (char *)p + done, n - done);
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

/* --worker a|b FAM PATH CMDFD RESFD */
static int worker(bool acceptor, int fam, const char *path, int in, int out)
{
	signal(SIGPIPE, SIG_IGN);
	alarm(600);
	for (int i = 0; i < PIPES; i++)
		if (pipe2(g_pipes[i], O_CLOEXEC) || write(g_pipes[i][1], "p", 1) != 1)
			return 1;
	char fpath[PATH_MAX];
	snprintf(fpath, sizeof fpath, "%s.%c.file", path, acceptor ? 'b' : 'a');
	g_file = open(fpath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	fill(g_buf, 8192 > MAXLEN ? MAXLEN : 8192, 99);
	if (g_file < 0 || write(g_file, g_buf, MAXLEN) != MAXLEN || write(g_file, g_buf, MAXLEN) != MAXLEN)
		return 1;
	unlink(fpath);
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof ss);
	socklen_t len;
	int lfd = -1;
	if (fam == AF_UNIX) {
		struct sockaddr_un *u = (void *)&ss;
		u->sun_family = AF_UNIX;
		snprintf(u->sun_path, sizeof u->sun_path, "%s", path);
		len = sizeof *u;
	} else if (fam == AF_INET) {
		struct sockaddr_in *a = (void *)&ss;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof *a;
	} else {
		struct sockaddr_in6 *a = (void *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		len = sizeof *a;
	}
	if (acceptor) {
		lfd = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fam == AF_UNIX)
			unlink(path);
		if (lfd < 0 || bind(lfd, (struct sockaddr *)&ss, len) || listen(lfd, 8))
			return 1;
		getsockname(lfd, (struct sockaddr *)&ss, &len);
		if (full_io(out, &ss, sizeof ss, true))
			return 1;
	} else if (full_io(in, &ss, sizeof ss, false)) {
		return 1;
	}
	for (;;) {
		struct cmd c;
		struct res r = { 0 };
		if (full_io(in, &c, sizeof c, false))
			return 0;
		if (c.op == C_EXIT)
			return 0;
		if (c.op == C_SETTLE) {
			settle();
		} else if (c.op == C_CONNECT) {
			if (g_sock >= 0)
				close(g_sock);
			int s;
			if (acceptor) {
				s = wait_ev(lfd, POLLIN, 5000) > 0 ? accept4(lfd, NULL, NULL, SOCK_CLOEXEC) : -1;
			} else {
				s = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
				if (s >= 0 && connect(s, (struct sockaddr *)&ss, len)) {
					close(s);
					s = -1;
				}
			}
			r.ret = s;
			if (s >= 0)
				setup_sock(s);
		} else {
			do_cmd(&c, &r);
		}
		if (full_io(out, &r, sizeof r, true))
			return 1;
	}
}

/* ---- the controller --------------------------------------------------------- */

struct ends {
	pid_t pid[2];
	int in[2], out[2];
};

static char g_self[PATH_MAX], g_path[108];

static int start(struct ends *e, bool pre_a, bool pre_b, const char *fam)
{
	const char *lib = getenv("ZL_PRELOAD_LIB");
	for (int w = 1; w >= 0; w--) { /* the acceptor first: it listens */
		int ci[2], co[2];
		if (pipe2(ci, O_CLOEXEC) || pipe2(co, O_CLOEXEC))
			return failf("pipe: %s", errname(errno));
		pid_t p = fork();
		if (p == 0) {
			char a[16], b[16];
			dup2(ci[0], 100);
			dup2(co[1], 101);
			snprintf(a, sizeof a, "%d", 100);
			snprintf(b, sizeof b, "%d", 101);
			if (w ? pre_b : pre_a)
				setenv("LD_PRELOAD", lib, 1);
			else
				unsetenv("LD_PRELOAD");
			execl(g_self, g_self, "--worker", w ? "b" : "a", fam, g_path, a, b, (char *)NULL);
			_exit(127);
		}
		close(ci[0]);
		close(co[1]);
		e->pid[w] = p;
		e->in[w] = ci[1];
		e->out[w] = co[0];
	}
	struct sockaddr_storage ss; /* the acceptor's address, to the connector */
	CHECK(!full_io(e->out[1], &ss, sizeof ss, false) && !full_io(e->in[0], &ss, sizeof ss, true),
	      "the workers did not start");
	return 0;
}

static int ask(struct ends *e, int w, const struct cmd *c, struct res *r)
{
	struct res dummy;
	CHECK(!full_io(e->in[w], (void *)c, sizeof *c, true) &&
	      !full_io(e->out[w], r ? r : &dummy, sizeof *r, false),
	      "worker %c does not answer", 'a' + w);
	return 0;
}

static void stop(struct ends *e)
{
	struct cmd c = { .op = C_EXIT };
	for (int w = 0; w < 2; w++) {
		ssize_t ignored = write(e->in[w], &c, sizeof c); /* (gone: it is killed below) */
		(void)ignored;
		close(e->in[w]);
		close(e->out[w]);
		int st;
		for (int i = 0; i < 500 && waitpid(e->pid[w], &st, WNOHANG) == 0; i++)
			msleep(10);
		kill(e->pid[w], SIGKILL);
		waitpid(e->pid[w], &st, 0);
	}
}

struct step {
	struct cmd c;
	int side;
	struct res r;
};

static uint64_t g_rng;
static uint32_t rnd(void)
{
	g_rng ^= g_rng << 13;
	g_rng ^= g_rng >> 7;
	g_rng ^= g_rng << 17;
	return (uint32_t)(g_rng >> 11);
}

static unsigned g_without; /* the calls left out (--without), a bit per op */

/* The sequence of seed: the same calls whatever the results (they do not
 * steer it: the model only keeps the unread bytes under INFLIGHT). */
static int plan(int fam, uint64_t seed, int nops, struct step *st)
{
	g_rng = seed * 0x9E3779B97F4A7C15ull | 1;
	int n = 0;
	while (n < nops) {
		st[n++] = (struct step){ .c.op = C_CONNECT, .side = 2 };
		bool alive[2] = { true, true }, shut[2][2] = { { false } };
		long unread[2] = { 0, 0 };
		for (int k = 0; k < 200 && n < nops && (alive[0] || alive[1]); k++) {
			int w = rnd() % 2;
			if (!alive[w])
				w = 1 - w;
			struct cmd c = { .op = (int)(rnd() % O_NOPS), .len = 1 + (int)(rnd() % MAXLEN),
					 .flags = (int)(rnd() % 4), .arg = (int)(rnd() % 1000) };
			bool tcp = fam != AF_UNIX;
			if (g_without & (1u << c.op))
				c.op = O_FIONREAD;
			if ((c.op == O_OOB_SEND || c.op == O_OOB_RECV || c.op == O_ATMARK) && !tcp)
				c.op = O_FIONREAD;
			if ((c.op == O_FD_SEND || c.op == O_FD_RECV) && tcp)
				c.op = O_SO_ERROR;
			if (c.op == O_OOB_SEND)
				c.len = 1 + (int)(rnd() % 3);
			if (c.op == O_FD_SEND)
				c.len = 1;
			bool sends = c.op <= O_SENDTO || c.op == O_OOB_SEND || c.op == O_FD_SEND ||
				     c.op == O_SENDFILE || c.op == O_FORK_SEND;
			if (sends) {
				if (unread[w] + c.len > INFLIGHT(!tcp))
					c.op = O_POLL;
				else if (!shut[w][1] && alive[1 - w])
					unread[w] += c.len;
			}
			if (c.op == O_SHUT) {
				c.arg = (int)(rnd() % 3);
				if (c.arg != SHUT_RD)
					shut[w][1] = true;
			}
			if (c.op == O_CLOSE) {
				if (rnd() % 4) { /* closes are rare */
					c.op = O_RECV;
				} else {
					alive[w] = false;
				}
			}
			if (c.op >= O_RECV && c.op <= O_RECVFROM)
				unread[1 - w] -= unread[1 - w] > c.len ? c.len : unread[1 - w];
			st[n++] = (struct step){ .c = c, .side = w };
			st[n - 1].c.op = c.op; /* (as planned) */
		}
	}
	return n;
}

static int put(struct ends *e, int w, const struct cmd *c)
{
	CHECK(!full_io(e->in[w], (void *)c, sizeof *c, true), "worker %c is gone", 'a' + w);
	return 0;
}

static int get(struct ends *e, int w, struct res *r)
{
	struct res dummy;
	CHECK(!full_io(e->out[w], r ? r : &dummy, sizeof *r, false),
	      "worker %c does not answer", 'a' + w);
	return 0;
}

/* The steps st[0..n) with the preload at a (the connecting end) if pa,
 * at b (the accepting end) if pb; results into st[i].r. */
static int run(const char *fam, struct step *st, int n, bool pa, bool pb)
{
	struct ends e;
	TRY(start(&e, pa, pb, fam));
	struct cmd settle_cmd = { .op = C_SETTLE };
	int rc = 0;
	bool alive[2] = { false, false };
	for (int i = 0; i < n && !rc; i++) {
		if (st[i].c.op == C_CONNECT) { /* the acceptor waits for the connector */
			struct res rb;
			rc = put(&e, 1, &st[i].c) || ask(&e, 0, &st[i].c, &st[i].r) || get(&e, 1, &rb) ? -1 : 0;
			if (!rc && (st[i].r.ret < 0 || rb.ret < 0))
				rc = failf("step %d: no connection (%ld %ld)", i, st[i].r.ret, rb.ret);
			st[i].r.ret = 0; /* (fd numbers may differ) */
			alive[0] = alive[1] = true;
		} else {
			int w = st[i].side;
			if (!alive[w]) { /* (closed: a no-op kept in the trace) */
				st[i].r = (struct res){ .ret = -9 };
				continue;
			}
			if (ask(&e, w, &st[i].c, &st[i].r) < 0)
				rc = -1;
			if (st[i].c.op == O_CLOSE)
				alive[w] = false;
		}
		for (int k = 0; !rc && k < 2; k++)
			if (alive[k] && put(&e, k, &settle_cmd) < 0)
				rc = -1;
		for (int k = 0; !rc && k < 2; k++)
			if (alive[k] && get(&e, k, NULL) < 0)
				rc = -1;
	}
	stop(&e);
	return rc;
}

static void show(char *b, size_t n, const struct step *s)
{
	if (s->r.ret < 0)
		snprintf(b, n, "%ld %s ev 0x%x", s->r.ret, errname(s->r.err), s->r.ev);
	else
		snprintf(b, n, "%ld ev 0x%x hash %016llx", s->r.ret, s->r.ev,
			 (unsigned long long)s->r.hash);
	if (s->c.op == O_EPOLL_ET && s->r.ret >= 0) {
		size_t l = strlen(b);
		snprintf(b + l, n - l, " level 0x%x", s->r.lvl);
	}
}

/*
 * Edge-triggered epoll is compared against epoll(7)'s promise, not against
 * the kernel's every wake-up: the kernel also reports an edge for events
 * that change nothing a program can see (an acknowledgement that frees
 * send buffer, a state change after a FIN is acknowledged; on a Unix
 * socket each of the peer's reads), and which of those land between two
 * calls depends on timing, not on the calls. What a program may rely on
 * is checked, in the kernel's trace as in the preload's (so the rule is
 * itself tested against the kernel on every run):
 *  - a report tells the truth: its mask is the socket's level state
 *    (a poll of it, right after), and the level states are the kernel's;
 *  - an edge comes when something new happened since the socket was last
 *    reported (or registered): a bit of the level state that the last
 *    report lacked (the peer's shutdown or close shows so), bytes (or an
 *    urgent byte, fds) the peer sent while the socket is readable, or room
 *    after one of our sends found none (EAGAIN or a short count);
 *  - no edge where nothing at all happened since this end's last wait;
 *  - the ready pipes beside it are all reported, as by the kernel.
 * Other edges are optional: either trace may have them. --strict-et
 * compares the kernel's edges one for one instead (bench/preload-diff.sh
 * takes it too).
 */
static bool g_strict_et;

static bool sends_op(int op)
{
	return op <= O_SENDTO || op == O_OOB_SEND || op == O_FD_SEND || op == O_SENDFILE;
}

/* Must step i (an epoll_wait(ET)) of trace t report the socket? */
static bool et_required(const struct step *t, int i)
{
	int w = t[i].side;
	unsigned lvl = t[i].r.lvl, last = 0;
	bool peer_sent = false, we_filled = false;
	for (int j = i - 1; j >= 0 && t[j].c.op != C_CONNECT; j--) {
		const struct step *s = &t[j];
		if (s->side == w && s->c.op == O_EPOLL_ET && s->r.ev) {
			last = s->r.ev;
			break;
		}
		if (s->side != w) {
			if ((sends_op(s->c.op) && s->r.ret > 0) || (s->c.op == O_FORK_SEND && s->r.ret == 0))
				peer_sent = true;
		} else if (sends_op(s->c.op) &&
			   ((s->r.ret < 0 && s->r.err == EAGAIN) || (s->r.ret >= 0 && s->r.ret < s->c.len))) {
			we_filled = true;
		}
	}
	return (lvl & ~last) || (peer_sent && (lvl & (EPOLLIN | EPOLLPRI))) ||
	       (we_filled && (lvl & EPOLLOUT));
}

/* A call that changes nothing on either end: a look, or a call on an end
 * already closed (-9: not made) */
static bool passive(const struct step *s)
{
	return s->c.op == O_POLL || s->c.op == O_SELECT || s->c.op == O_EPOLL_LT ||
	       s->c.op == O_EPOLL_ET || s->c.op == O_FIONREAD || s->c.op == O_ATMARK ||
	       s->r.ret == -9;
}

/* One trace's epoll_wait(ET) at step i keeps the promise: a true report,
 * one where an edge is owed, and none where nothing at all happened since
 * this end's last wait (only looks between: a report there would wake an
 * edge-triggered program for nothing, over and over). */
static bool et_kept(const struct step *t, int i)
{
	const struct res *r = &t[i].r;
	if (r->ret < 0)
		return true; /* (its errno is compared) */
	if (r->ev && r->ev != r->lvl)
		return false;
	if (r->ev)
		for (int j = i - 1; j >= 0 && t[j].c.op != C_CONNECT && passive(&t[j]); j--)
			if (t[j].side == t[i].side && t[j].c.op == O_EPOLL_ET)
				return false;
	return r->ev || !et_required(t, i);
}

static bool same_step(const struct step *want, const struct step *got, int i)
{
	const struct res *a = &want[i].r, *b = &got[i].r;
	if (want[i].c.op == O_EPOLL_ET && !g_strict_et)
		return a->err == b->err && a->lvl == b->lvl &&
		       a->ret - (a->ev != 0) == b->ret - (b->ev != 0) && et_kept(want, i) &&
		       et_kept(got, i);
	return a->ret == b->ret && a->err == b->err && a->ev == b->ev && a->hash == b->hash;
}

/* The first step where got differs from want: its index, or -1. */
static int first_diff(const struct step *want, const struct step *got, int n)
{
	for (int i = 0; i < n; i++)
		if (!same_step(want, got, i))
			return i;
	return -1;
}

static void report_diff(const char *what, const struct step *want, const struct step *got, int i)
{
	char a[96], b[96];
	show(a, sizeof a, &want[i]);
	show(b, sizeof b, &got[i]);
	int from = i;
	while (from > 0 && want[from].c.op != C_CONNECT)
		from--;
	printf("DIFF %s: step %d (%d into its connection), end %c: %s len %d flags %d arg %d\n"
	       "  kernel:  %s\n  preload: %s\n  the connection's steps before it:\n",
	       what, i, i - from, 'a' + want[i].side,
	       want[i].c.op >= 0 ? op_name[want[i].c.op] : "connect", want[i].c.len,
	       want[i].c.flags, want[i].c.arg, a, b);
	if (want[i].c.op == O_EPOLL_ET && !g_strict_et)
		printf("  (edge-triggered: the kernel %s epoll(7)'s promise, the preload %s it%s)\n",
		       et_kept(want, i) ? "keeps" : "breaks", et_kept(got, i) ? "keeps" : "breaks",
		       want[i].r.lvl != got[i].r.lvl ? "; the level states differ" : "");
	bool all = getenv("ZL_DIFF_ALL") != NULL;
	for (int j = i - 40 > from && !all ? i - 40 : from; j < i; j++) {
		show(a, sizeof a, &want[j]);
		show(b, sizeof b, &got[j]);
		printf("    %d %c %s len %d flags %d arg %d: %s%s%s\n", j, 'a' + want[j].side,
		       want[j].c.op >= 0 ? op_name[want[j].c.op] : "connect", want[j].c.len,
		       want[j].c.flags, want[j].c.arg, a, all ? " | " : "", all ? b : "");
	}
}

int main(int argc, char **argv)
{
	if (argc == 7 && !strcmp(argv[1], "--worker")) {
		int fam = !strcmp(argv[3], "unix") ? AF_UNIX : !strcmp(argv[3], "tcp6") ? AF_INET6 : AF_INET;
		return worker(argv[2][0] == 'b', fam, argv[4], atoi(argv[5]), atoi(argv[6]));
	}
	const char *without = NULL;
	while (argc > 1 && !strcmp(argv[1], "--strict-et")) {
		g_strict_et = true;
		argv++;
		argc--;
	}
	if (argc > 2 && !strcmp(argv[1], "--without")) {
		without = argv[2];
		char list[1024];
		snprintf(list, sizeof list, "%s", without);
		for (char *sv, *t = strtok_r(list, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
			int o = 0;
			while (o < O_NOPS && strcmp(op_name[o], t))
				o++;
			if (o == O_NOPS) {
				fprintf(stderr, "diff_test: --without: no call named '%s'\n", t);
				return 2;
			}
			g_without |= 1u << o;
		}
		argv += 2;
		argc -= 2;
	}
	if (argc != 4 || (strcmp(argv[1], "tcp4") && strcmp(argv[1], "tcp6") && strcmp(argv[1], "unix"))) {
		fprintf(stderr, "usage: diff_test [--strict-et] [--without CALL,...] tcp4|tcp6|unix SEED OPS\n");
		return 2;
	}
	char *end;
	unsigned long long seed = strtoull(argv[2], &end, 0);
	long nops = strtol(argv[3], &end, 10);
	if (*end || nops < 1 || nops > 100000000) {
		fprintf(stderr, "diff_test: OPS must be 1 to 100000000\n");
		return 2;
	}
	const char *lib = getenv("ZL_PRELOAD_LIB");
	if (!lib || access(lib, R_OK)) {
		printf("SKIP: ZL_PRELOAD_LIB does not name the preload\n");
		return 77;
	}
	int fam = !strcmp(argv[1], "unix") ? AF_UNIX : !strcmp(argv[1], "tcp6") ? AF_INET6 : AF_INET;
	int probe = socket(fam, SOCK_STREAM, 0);
	if (probe < 0) {
		printf("SKIP: %s sockets: %s\n", argv[1], strerror(errno));
		return 77;
	}
	close(probe);
	signal(SIGPIPE, SIG_IGN);
	alarm(300 + (unsigned)(nops / 200)); /* far above the usual ~2 ms a step */
	ssize_t k = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
	if (k <= 0)
		return 2;
	g_self[k] = 0;
	char dir[] = "/tmp/zldiff.XXXXXX";
	if (!mkdtemp(dir))
		return 2;
	snprintf(g_path, sizeof g_path, "%s/sock", dir);
	/* a long run goes in pieces of 20,000 steps: the traces stay small */
	int piece = nops < 20000 ? (int)nops : 20000;
	struct step *plan_st = calloc((size_t)piece + 1, sizeof *plan_st);
	struct step *ref = calloc((size_t)piece + 1, sizeof *ref), *got = calloc((size_t)piece + 1, sizeof *got);
	if (!plan_st || !ref || !got)
		return 2;
	static const struct { const char *name; bool a, b; } placements[] = {
		{ "kernel again", false, false }, { "both ends", true, true },
		{ "the connecting end only", true, false }, { "the accepting end only", false, true },
	};
	int rc = 0;
	long done = 0;
	unsigned long npieces = 0;
	while (done < nops && !rc) {
		int n = plan(fam, seed + npieces++, nops - done < piece ? (int)(nops - done) : piece, plan_st);
		memcpy(ref, plan_st, (size_t)n * sizeof *ref);
		if (run(argv[1], ref, n, false, false)) {
			printf("FAIL: kernel run: %s\n", g_msg);
			rc = 1;
			break;
		}
		for (size_t p = 0; p < sizeof placements / sizeof placements[0] && !rc; p++) {
			memcpy(got, plan_st, (size_t)n * sizeof *got);
			if (run(argv[1], got, n, placements[p].a, placements[p].b)) {
				printf("FAIL: %s: %s\n", placements[p].name, g_msg);
				rc = 1;
				break;
			}
			int d = first_diff(ref, got, n);
			if (d >= 0) {
				report_diff(placements[p].name, ref, got, d);
				printf("FAIL: %s differs from the kernel (seed %llu, piece %lu)\n",
				       placements[p].name, seed + npieces - 1, npieces - 1);
				rc = p == 0 ? 2 : 1; /* the kernel against itself: the test's own fault */
			}
		}
		done += n;
	}
	if (!rc)
		printf("PASS: %s: %ld calls (%lu piece%s from seed %llu), the same results as the kernel's "
		       "with the preload at both ends and at each end alone\n",
		       argv[1], done, npieces, npieces == 1 ? "" : "s", seed);
	if (without)
		printf("(without %s: replaced by FIONREAD)\n", without);
	unlink(g_path);
	rmdir(dir);
	free(plan_st);
	free(ref);
	free(got);
	return rc;
}
