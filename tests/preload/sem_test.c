/* SPDX-License-Identifier: MIT */
/*
 * sem_test.c - the semantics suite of the LD_PRELOAD socket library.
 *
 * Exercises stream-socket semantics on real kernel sockets and asserts what
 * Linux does. It runs plain today; later the same binary runs with the
 * preload on both ends (the preload moves TCP/AF_UNIX streams onto shared
 * memory rings) and must print the same transcript. So it asserts only what
 * a program can observe and Linux guarantees: no timings (except that a
 * timeout is not early), no buffer sizes, no short-read split points.
 *
 *   sem_test tcp4|tcp6|unix [case-name-substring]
 *   sem_test --exec-child FD        (internal: the exec case's new image)
 *
 * Every case gets a fresh pair: a listener (127.0.0.1 / ::1 port 0, or a
 * path in a fresh mkdtemp dir), a connected end (c) and an accepted end (s).
 * Many cases move one end into a forked peer (the preload is per process).
 * stdout: one line per case, "ok NAME", "FAIL NAME: why" or "skip NAME: why",
 * identical from run to run; diagnostics go to stderr. Exit 0 all passed,
 * 1 a case failed, 77 the family is unavailable, 2 usage.
 * Bounds: a 10 s watchdog per case (alarm; prints the case and _exits 1),
 * 5 s per wait for data (IO_WAIT_MS), children have their own watchdog.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sem_util.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <sys/uio.h>

enum { F_NOPAIR = 1, F_LISTEN = 2 }; /* no sockets / only the listener */

static int g_fam;                       /* AF_INET, AF_INET6 or AF_UNIX */
static char g_dir[64];                  /* the mkdtemp dir */
static char g_sock_path[128];           /* the listener path (AF_UNIX) */
static char g_self[PATH_MAX];           /* this binary, for the exec case */
static unsigned char g_fd_start[MAX_FD]; /* open fds at start */
static uint8_t *g_buf;                  /* 1 MiB scratch for the cases */
#define GBUF_SIZE (1u << 20)

/* ---- the pair ------------------------------------------------------------ */

/* tcp4 across two addresses (the preload's cross-host switch, in the VM):
 * SEM_TCP4_ADDR is the listener's address instead of 127.0.0.1, and
 * SEM_TCP4_SRC the clients' source address. */
static void bind_src(int fd, int fam)
{
	const char *src = getenv("SEM_TCP4_SRC");
	struct sockaddr_in a = {.sin_family = AF_INET};
	if (fam != AF_INET || !src || inet_pton(AF_INET, src, &a.sin_addr) != 1)
		return;
	if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0)
		fprintf(stderr, "sem_test: bind %s: %s\n", src, errname(errno));
}

/* A new socket connected to the listener (blocking connect). */
static int connect_to(const struct ctx *x)
{
	int fd = socket(x->fam, SOCK_STREAM, 0);
	if (fd < 0)
		return failf("socket: %s", errname(errno));
	bind_src(fd, x->fam);
	if (connect(fd, (const struct sockaddr *)&x->la, x->lalen) < 0) {
		int e = errno;
		close(fd);
		return failf("connect: %s", errname(e));
	}
	return fd;
}

/* A listening socket of family fam on loopback (or at path); 0 or -errno. */
static int make_listener(int fam, const char *path, struct ctx *x)
{
	memset(&x->la, 0, sizeof x->la);
	if (fam == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&x->la;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		const char *addr = getenv("SEM_TCP4_ADDR");
		if (addr && inet_pton(AF_INET, addr, &a->sin_addr) != 1)
			return -EINVAL;
		x->lalen = sizeof *a;
	} else if (fam == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&x->la;
		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		x->lalen = sizeof *a;
	} else {
		struct sockaddr_un *a = (struct sockaddr_un *)&x->la;
		a->sun_family = AF_UNIX;
		snprintf(a->sun_path, sizeof a->sun_path, "%s", path);
		x->lalen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
			strlen(a->sun_path) + 1);
		unlink(path);
	}
	x->lfd = socket(fam, SOCK_STREAM, 0);
	if (x->lfd < 0)
		return -errno;
	int one = 1;
	if (fam != AF_UNIX)
		setsockopt(x->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(x->lfd, (struct sockaddr *)&x->la, x->lalen) < 0 ||
	    listen(x->lfd, 16) < 0) {
		int e = errno;
		close_fd(&x->lfd);
		return -e;
	}
	x->lalen = sizeof x->la;
	if (getsockname(x->lfd, (struct sockaddr *)&x->la, &x->lalen) < 0) {
		int e = errno;
		close_fd(&x->lfd);
		return -e;
	}
	return 0;
}

static void unix_path(char *p, size_t n)
{
	snprintf(p, n, "%s/sock", g_dir);
}

static int pair_open(struct ctx *x, unsigned flags)
{
	char path[128];
	unix_path(path, sizeof path);
	int e = make_listener(x->fam, path, x);
	if (e < 0)
		return failf("listener: %s", errname(-e));
	if (flags & F_LISTEN)
		return 0;
	if ((x->c = connect_to(x)) < 0)
		return CASE_FAIL;
	do
		x->s = accept(x->lfd, NULL, NULL);
	while (x->s < 0 && errno == EINTR);
	if (x->s < 0)
		return failf("accept: %s", errname(errno));
	return 0;
}

static void pair_close(struct ctx *x)
{
	close_fd(&x->c);
	close_fd(&x->s);
	close_fd(&x->lfd);
	if (x->fam == AF_UNIX) {
		char path[128];
		unix_path(path, sizeof path);
		unlink(path);
	}
}

/* ---- small helpers the cases share ------------------------------------------ */

/* The fd's F_GETFL has O_NONBLOCK (want 1) or not (want 0). */
static int expect_nonblock(int fd, int want, const char *what)
{
	int fl = fcntl(fd, F_GETFL);
	CHECK(fl >= 0, "%s: F_GETFL: %s", what, errname(errno));
	CHECK(!!(fl & O_NONBLOCK) == want, "%s: O_NONBLOCK is %s, want %s", what,
		fl & O_NONBLOCK ? "set" : "clear", want ? "set" : "clear");
	return 0;
}

/* The fd's F_GETFD has FD_CLOEXEC (want 1) or not (want 0). */
static int expect_cloexec(int fd, int want, const char *what)
{
	int fl = fcntl(fd, F_GETFD);
	CHECK(fl >= 0, "%s: F_GETFD: %s", what, errname(errno));
	CHECK(!!(fl & FD_CLOEXEC) == want, "%s: FD_CLOEXEC is %s, want %s", what,
		fl & FD_CLOEXEC ? "set" : "clear", want ? "set" : "clear");
	return 0;
}

/* A read now fails with EAGAIN (the fd or flags make it nonblocking). */
static int expect_eagain(int fd, int flags, const char *what)
{
	char b[16];
	ssize_t r = recv(fd, b, sizeof b, flags);
	int e = errno;
	CHECK(r < 0 && e == EAGAIN, "%s: recv = %s, want -1 EAGAIN", what,
		rets(r, e));
	return 0;
}

/* poll(fd, ev, ms): the revents, masked to the bits that matter here. */
#define EV_MASK (POLLIN | POLLOUT | POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)
static int poll1(int fd, short ev, int ms, unsigned *rev)
{
	struct pollfd p = {fd, ev, 0};
	int r;
	do
		r = poll(&p, 1, ms);
	while (r < 0 && errno == EINTR);
	CHECK(r >= 0, "poll: %s", errname(errno));
	*rev = r ? (unsigned)p.revents & EV_MASK : 0;
	return r;
}

/* Writes on fd (MSG_NOSIGNAL if nosig) until the kernel reports the closed
 * peer: ECONNRESET may come first on TCP (then EPIPE follows), any other
 * outcome fails. Bounded: 200 writes, 5 ms apart. */
static int write_until_epipe(int fd, int nosig, const char *what)
{
	for (int i = 0; i < 200; i++) {
		ssize_t r = nosig ? send(fd, "x", 1, MSG_NOSIGNAL) : write(fd, "x", 1);
		int e = errno;
		if (r == 1) {
			msleep(5);
			continue;
		}
		if (r < 0 && e == EPIPE)
			return 0;
		CHECK(r < 0 && e == ECONNRESET, "%s: write = %s, want 1, EPIPE or "
			"ECONNRESET", what, rets(r, e));
	}
	return failf("%s: no EPIPE after 200 writes", what);
}

/* The tid of the calling thread. */
static pid_t my_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* The scheduler state letter of thread tid of this process ('S' asleep). */
static char thread_state(pid_t tid)
{
	char p[64], b[256];
	snprintf(p, sizeof p, "/proc/self/task/%d/stat", (int)tid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return '?';
	ssize_t n = read(fd, b, sizeof b - 1);
	close(fd);
	if (n <= 0)
		return '?';
	b[n] = 0;
	char *q = strrchr(b, ')');
	return q && q[1] == ' ' ? q[2] : '?';
}

/* ==== cases ================================================================= */

/* ---- 1. data calls ------------------------------------------------------ */

/* Every program: write() on one end arrives through read() on the other. */
static int case_read_write(struct ctx *x)
{
	char b[64];
	EXPECT_RET(write(x->c, "hello", 5), 5);
	TRY(expect_bytes(x->s, "hello", 5, "c->s"));
	EXPECT_RET(write(x->s, "world!", 6), 6);
	/* a read with a bigger buffer returns what is there: 1..6 bytes */
	TRY(wait_in(x->c, "s->c"));
	ssize_t r = read(x->c, b, sizeof b);
	CHECK(r >= 1 && r <= 6, "read(64) = %s, want 1..6", rets(r, errno));
	TRY(read_full(x->c, b + r, (size_t)(6 - r), "s->c rest"));
	CHECK(!memcmp(b, "world!", 6), "s->c: wrong bytes");
	/* zero-length calls return 0 and do not disturb the stream */
	EXPECT_RET(write(x->c, b, 0), 0);
	EXPECT_RET(read(x->s, b, 0), 0);
	EXPECT_RET(write(x->c, "z", 1), 1);
	TRY(expect_bytes(x->s, "z", 1, "after zero-length calls"));
	return 0;
}

/* HTTP servers writev() header+body; parsers readv() into split buffers. */
static int case_readv_writev(struct ctx *x)
{
	char a[4], b[6], all[10];
	struct iovec w[3] = {{"ab", 2}, {"cde", 3}, {"fghij", 5}};
	EXPECT_RET(writev(x->c, w, 3), 10);
	TRY(wait_in(x->s, "readv"));
	struct iovec r[2] = {{a, sizeof a}, {b, sizeof b}};
	ssize_t n = readv(x->s, r, 2);
	CHECK(n >= 1 && n <= 10, "readv = %s, want 1..10", rets(n, errno));
	memcpy(all, a, n < 4 ? (size_t)n : 4);
	if (n > 4)
		memcpy(all + 4, b, (size_t)n - 4);
	TRY(read_full(x->s, all + n, (size_t)(10 - n), "readv rest"));
	CHECK(!memcmp(all, "abcdefghij", 10), "readv: wrong bytes");
	/* the other way, with an empty iovec in the middle */
	struct iovec w2[3] = {{"xy", 2}, {NULL, 0}, {"z", 1}};
	EXPECT_RET(writev(x->s, w2, 3), 3);
	TRY(expect_bytes(x->c, "xyz", 3, "writev s->c"));
	return 0;
}

/* Most network code uses send()/recv() with flags 0. */
static int case_send_recv(struct ctx *x)
{
	char b[8];
	EXPECT_RET(send(x->c, "ping", 4, 0), 4);
	TRY(wait_in(x->s, "recv"));
	ssize_t n = recv(x->s, b, 4, 0);
	CHECK(n >= 1 && n <= 4, "recv = %s, want 1..4", rets(n, errno));
	TRY(read_full(x->s, b + n, (size_t)(4 - n), "recv rest"));
	CHECK(!memcmp(b, "ping", 4), "recv: wrong bytes");
	EXPECT_RET(send(x->s, "pong", 4, 0), 4);
	TRY(expect_bytes(x->c, "pong", 4, "send s->c"));
	return 0;
}

/* Generic "datagram or stream" code calls sendto(fd, buf, n, 0, NULL, 0);
 * TCP ignores an address on a connected socket, AF_UNIX says EISCONN. */
static int case_sendto_null(struct ctx *x)
{
	EXPECT_RET(sendto(x->c, "to-null", 7, 0, NULL, 0), 7);
	TRY(expect_bytes(x->s, "to-null", 7, "sendto NULL"));
	if (is_tcp(x)) {
		EXPECT_RET(sendto(x->c, "to-addr", 7, 0,
			(struct sockaddr *)&x->la, x->lalen), 7);
		TRY(expect_bytes(x->s, "to-addr", 7, "sendto with address"));
	} else {
		EXPECT_ERR(sendto(x->c, "to-addr", 7, 0,
			(struct sockaddr *)&x->la, x->lalen), EISCONN);
	}
	return 0;
}

/* Code shared with UDP calls recvfrom() with an address buffer on a stream.
 * Kernel: TCP leaves addrlen 0 (the buffer untouched); AF_UNIX gives the
 * sender's bound address: 0 from the unbound connecting end, the listener's
 * path from the accepted end. */
static int case_recvfrom_addr(struct ctx *x)
{
	struct sockaddr_storage a;
	socklen_t al;
	char b[16];
	for (int dir = 0; dir < 2; dir++) {
		int from = dir ? x->s : x->c, to = dir ? x->c : x->s;
		const char *what = dir ? "s->c" : "c->s";
		EXPECT_RET(write(from, "addr?", 5), 5);
		TRY(wait_in(to, what));
		memset(&a, 0xa5, sizeof a);
		al = sizeof a;
		ssize_t n = recvfrom(to, b, 5, 0, (struct sockaddr *)&a, &al);
		CHECK(n >= 1 && n <= 5, "%s: recvfrom = %s, want 1..5", what,
			rets(n, errno));
		TRY(read_full(to, b + n, (size_t)(5 - n), what));
		CHECK(!memcmp(b, "addr?", 5), "%s: wrong bytes", what);
		if (is_tcp(x) || !dir) {
			CHECK(al == 0, "%s: addrlen %u, want 0", what, (unsigned)al);
		} else {
			CHECK(same_addr(&a, al, &x->la, x->lalen),
				"%s: address (len %u) is not the listener's (len %u)",
				what, (unsigned)al, (unsigned)x->lalen);
		}
	}
	return 0;
}

/* Event loops (libuv, nginx) use sendmsg()/recvmsg() with iovec arrays and
 * look at msg_flags. */
static int case_sendmsg_recvmsg(struct ctx *x)
{
	char p1[3], p2[5], p3[32], got[12];
	struct iovec w[3] = {{"one", 3}, {"two", 3}, {"three!", 6}};
	struct msghdr m = {.msg_iov = w, .msg_iovlen = 3};
	EXPECT_RET(sendmsg(x->c, &m, 0), 12);
	size_t have = 0;
	while (have < 12) {
		TRY(wait_in(x->s, "recvmsg"));
		struct iovec r[3] = {{p1, sizeof p1}, {p2, sizeof p2},
			{p3, sizeof p3}};
		struct msghdr rm = {.msg_iov = r, .msg_iovlen = 3,
			.msg_flags = 0x7fff0000};
		ssize_t n = recvmsg(x->s, &rm, 0);
		CHECK(n >= 1 && (size_t)n <= 12 - have, "recvmsg = %s, want 1..%zu",
			rets(n, errno), 12 - have);
		CHECK(rm.msg_flags == 0, "recvmsg: msg_flags 0x%x, want 0",
			(unsigned)rm.msg_flags);
		/* the bytes are scattered over the iovecs in order */
		char flat[40];
		memcpy(flat, p1, 3);
		memcpy(flat + 3, p2, 5);
		memcpy(flat + 8, p3, 32);
		memcpy(got + have, flat, (size_t)n);
		have += (size_t)n;
	}
	CHECK(!memcmp(got, "onetwothree!", 12), "recvmsg: wrong bytes");
	return 0;
}

/* Protocol sniffers (e.g. TLS-or-plain on one port) MSG_PEEK, then read. */
static int case_msg_peek(struct ctx *x)
{
	char b[16], c2[16];
	EXPECT_RET(write(x->c, "peekaboo", 8), 8);
	TRY(wait_in(x->s, "peek"));
	ssize_t n = recv(x->s, b, 8, MSG_PEEK);
	CHECK(n >= 1 && n <= 8, "recv(MSG_PEEK) = %s, want 1..8", rets(n, errno));
	CHECK(!memcmp(b, "peekaboo", (size_t)n), "MSG_PEEK: wrong bytes");
	ssize_t n2 = recv(x->s, c2, 8, MSG_PEEK);
	CHECK(n2 >= n && n2 <= 8, "second MSG_PEEK = %s, want %zd..8",
		rets(n2, errno), n);
	CHECK(!memcmp(c2, "peekaboo", (size_t)n2), "second MSG_PEEK: wrong bytes");
	/* the peeked bytes are still there for read() */
	TRY(expect_bytes(x->s, "peekaboo", 8, "read after peek"));
	TRY(expect_eagain(x->s, MSG_DONTWAIT, "after peek and read"));
	return 0;
}

/* Servers probe a blocking socket with MSG_DONTWAIT without changing it. */
static int case_msg_dontwait(struct ctx *x)
{
	TRY(expect_eagain(x->s, MSG_DONTWAIT, "empty"));
	TRY(expect_nonblock(x->s, 0, "after MSG_DONTWAIT"));
	EXPECT_RET(send(x->c, "dw", 2, MSG_DONTWAIT), 2);
	TRY(expect_bytes(x->s, "dw", 2, "MSG_DONTWAIT data"));
	TRY(expect_eagain(x->s, MSG_DONTWAIT, "drained"));
	return 0;
}

static int waitall_peer(struct ctx *x, void *arg)
{
	static const char *const pieces[] = {"0", "12", "345", "6789"};
	for (int i = 0; i < 4; i++) {
		msleep(20);
		TRY(write_full(x->c, pieces[i], strlen(pieces[i]), "piece"));
	}
	TRY(write_full(x->c, "abcde", 5, "tail"));
	return 0; /* exit closes c: EOF after "abcde" */
}

/* Fixed-size record readers (databases, RPC headers) use MSG_WAITALL. */
static int case_msg_waitall(struct ctx *x)
{
	struct child ch;
	char b[16];
	TRY(spawn(&ch, x, PEER_C, waitall_peer, NULL));
	EXPECT_RET(recv(x->s, b, 10, MSG_WAITALL), 10);
	CHECK(!memcmp(b, "0123456789", 10), "MSG_WAITALL: wrong bytes");
	/* EOF cuts a MSG_WAITALL short: it returns what there was */
	EXPECT_RET(recv(x->s, b, 10, MSG_WAITALL), 5);
	CHECK(!memcmp(b, "abcde", 5), "short MSG_WAITALL: wrong bytes");
	EXPECT_RET(recv(x->s, b, 10, MSG_WAITALL), 0);
	return reap(&ch);
}

static int nosignal_peer(struct ctx *x, void *arg)
{
	signal(SIGPIPE, SIG_DFL); /* a stray SIGPIPE kills us: the parent sees */
	TRY(expect_eof(x->c, "peer close"));
	return write_until_epipe(x->c, 1, "send(MSG_NOSIGNAL)");
}

/* Libraries that cannot own the SIGPIPE disposition (curl, libpq) send with
 * MSG_NOSIGNAL: EPIPE, and no signal even at the default disposition. */
static int case_msg_nosignal(struct ctx *x)
{
	struct child ch;
	TRY(spawn(&ch, x, PEER_C, nosignal_peer, NULL));
	close_fd(&x->s);
	return reap(&ch);
}

static int small_writes_peer(struct ctx *x, void *arg)
{
	char m[32];
	for (int i = 0; i < 1000; i++) {
		int n = snprintf(m, sizeof m, "<%d:%.*s>", i, i % 7, "abcdefg");
		TRY(write_full(x->c, m, (size_t)n, "small write"));
	}
	return 0;
}

/* Line protocols (redis, SMTP) depend on a byte stream: no message bounds,
 * nothing lost, duplicated or reordered across many small writes. */
static int case_byte_stream(struct ctx *x)
{
	struct child ch;
	char *want = (char *)g_buf, m[32];
	size_t wn = 0, got = 0;
	for (int i = 0; i < 1000; i++) {
		int n = snprintf(m, sizeof m, "<%d:%.*s>", i, i % 7, "abcdefg");
		memcpy(want + wn, m, (size_t)n);
		wn += (size_t)n;
	}
	char *have = want + wn + 1;
	TRY(spawn(&ch, x, PEER_C, small_writes_peer, NULL));
	for (unsigned k = 0;; k++) {
		size_t ask = 1 + (k * 37) % 300; /* reads of varying size */
		TRY(wait_in(x->s, "stream"));
		ssize_t r = read(x->s, have + got, ask);
		CHECK(r >= 0, "read: %s", errname(errno));
		if (r == 0)
			break;
		got += (size_t)r;
		CHECK(got <= wn, "received more than the %zu bytes sent", wn);
	}
	CHECK(got == wn, "received %zu bytes, want %zu", got, wn);
	CHECK(!memcmp(have, want, wn), "received bytes differ from the writes");
	return reap(&ch);
}

#define BULK (8u << 20)

static int bulk_peer(struct ctx *x, void *arg)
{
	return duplex_pattern(x->c, BULK, 11, BULK, 22, "peer duplex");
}

/* Proxies and replication links stream both ways at once between two
 * processes (full duplex, 8 MiB each way, checked by pattern). */
static int case_bulk_duplex(struct ctx *x)
{
	struct child ch;
	TRY(spawn(&ch, x, PEER_C, bulk_peer, NULL));
	TRY(duplex_pattern(x->s, BULK, 22, BULK, 11, "duplex"));
	TRY(reap(&ch));
	return expect_eof(x->s, "after duplex");
}

/* Nonblocking servers (nginx, node) handle short writes and EAGAIN when the
 * buffer fills, and rely on every accepted byte arriving. */
static int case_short_write(struct ctx *x)
{
	enum { CH = 256 << 10 };
	uint64_t total = 0;
	int eagain = 0;
	TRY(set_nonblock(x->c, 1));
	for (int i = 0; i < 256 && !eagain; i++) {
		fill_pat(g_buf, CH, 33, total);
		ssize_t r = write(x->c, g_buf, CH);
		int e = errno;
		if (r < 0 && e == EAGAIN)
			eagain = 1;
		else if (r > 0 && r <= CH)
			total += (uint64_t)r;
		else
			return failf("write(%d) = %s, want 1..%d or EAGAIN", CH,
				rets(r, e), CH);
	}
	CHECK(eagain, "the buffer never filled (%llu bytes accepted)",
		(unsigned long long)total);
	CHECK(total > 0, "no write was accepted");
	TRY(recv_pattern(x->s, total, 33, "drain"));
	TRY(expect_eagain(x->s, MSG_DONTWAIT, "after draining"));
	return 0;
}

/* ---- 2. control ---------------------------------------------------------- */

static int late_writer(struct ctx *x, void *arg)
{
	struct gate *g = arg;
	TRY(gate_wait(g, "gate"));
	msleep(100);
	return write_full(x->c, "late", 4, "late write");
}

/* Event loops toggle O_NONBLOCK with F_GETFL/F_SETFL (libevent, Go runtime,
 * and code that goes blocking for a handshake). */
static int case_fcntl_nonblock(struct ctx *x)
{
	struct gate g;
	struct child ch;
	char b[8];
	TRY(gate_open(&g));
	TRY(spawn(&ch, x, PEER_C, late_writer, &g));
	TRY(set_nonblock(x->s, 1));
	TRY(expect_nonblock(x->s, 1, "after F_SETFL O_NONBLOCK"));
	EXPECT_ERR(read(x->s, b, sizeof b), EAGAIN);
	TRY(set_nonblock(x->s, 0));
	TRY(expect_nonblock(x->s, 0, "after clearing O_NONBLOCK"));
	TRY(gate_pass(&g));
	/* a blocking read now waits for the child's write (100 ms later) */
	ssize_t n = read(x->s, b, 4);
	CHECK(n >= 1 && n <= 4, "blocking read = %s, want 1..4", rets(n, errno));
	TRY(read_full(x->s, b + n, (size_t)(4 - n), "late rest"));
	CHECK(!memcmp(b, "late", 4), "blocking read: wrong bytes");
	gate_close(&g);
	return reap(&ch);
}

/* Daemons and shells move sockets to chosen numbers with F_DUPFD and make
 * private copies with F_DUPFD_CLOEXEC (systemd fd passing, CPython). */
static int case_fcntl_dupfd(struct ctx *x)
{
	int d1 = fcntl(x->s, F_DUPFD, 100);
	CHECK(d1 >= 100, "F_DUPFD(100) = %s", rets(d1, errno));
	int d2 = fcntl(x->s, F_DUPFD_CLOEXEC, 0);
	CHECK(d2 >= 0, "F_DUPFD_CLOEXEC = %s", rets(d2, errno));
	TRY(expect_cloexec(d1, 0, "F_DUPFD copy"));
	TRY(expect_cloexec(d2, 1, "F_DUPFD_CLOEXEC copy"));
	TRY(expect_cloexec(x->s, 0, "original"));
	EXPECT_RET(write(x->c, "via-d1", 6), 6);
	TRY(expect_bytes(d1, "via-d1", 6, "read via F_DUPFD copy"));
	EXPECT_RET(write(x->c, "via-d2", 6), 6);
	TRY(expect_bytes(d2, "via-d2", 6, "read via F_DUPFD_CLOEXEC copy"));
	EXPECT_RET(write(d2, "from-d2", 7), 7);
	TRY(expect_bytes(x->c, "from-d2", 7, "write via copy"));
	close(d1);
	close(d2);
	EXPECT_RET(write(x->c, "orig", 4), 4);
	TRY(expect_bytes(x->s, "orig", 4, "original after closing copies"));
	return 0;
}

/* Older code (and Java, OpenSSL BIOs) uses ioctl(FIONBIO) instead of fcntl. */
static int case_ioctl_fionbio(struct ctx *x)
{
	int on = 1;
	char b[4];
	EXPECT_OK(ioctl(x->s, FIONBIO, &on));
	TRY(expect_nonblock(x->s, 1, "after FIONBIO 1"));
	EXPECT_ERR(read(x->s, b, sizeof b), EAGAIN);
	on = 0;
	EXPECT_OK(ioctl(x->s, FIONBIO, &on));
	TRY(expect_nonblock(x->s, 0, "after FIONBIO 0"));
	EXPECT_RET(write(x->c, "nb", 2), 2);
	TRY(expect_bytes(x->s, "nb", 2, "after FIONBIO"));
	return 0;
}

static int fionread_peer(struct ctx *x, void *arg)
{
	for (int i = 0; i < 10; i++)
		TRY(write_full(x->c, g_buf + i * 100, 100, "fionread data"));
	return expect_eof(x->c, "parent close");
}

/* Readers size their buffer with ioctl(FIONREAD) (Java available(), Qt
 * bytesAvailable). Linux promises no exact count mid-stream (TCP may report
 * only what it has processed), only 1..N once readable and 0 when drained. */
static int case_ioctl_fionread(struct ctx *x)
{
	struct child ch;
	int v = -1;
	EXPECT_OK(ioctl(x->s, FIONREAD, &v));
	CHECK(v == 0, "FIONREAD on an empty socket = %d, want 0", v);
	fill_pat(g_buf, 1000, 44, 0);
	TRY(spawn(&ch, x, PEER_C, fionread_peer, NULL));
	TRY(wait_in(x->s, "fionread"));
	EXPECT_OK(ioctl(x->s, FIONREAD, &v));
	CHECK(v >= 1 && v <= 1000, "FIONREAD after data = %d, want 1..1000", v);
	TRY(recv_pattern(x->s, 1000, 44, "fionread data"));
	EXPECT_OK(ioctl(x->s, FIONREAD, &v));
	CHECK(v == 0, "FIONREAD after reading all = %d, want 0", v);
	close_fd(&x->s);
	return reap(&ch);
}

/* Frameworks inspect inherited sockets with SO_TYPE/SO_DOMAIN/SO_PROTOCOL/
 * SO_ACCEPTCONN (systemd sd_is_socket) and poll SO_ERROR. */
static int case_sockopt_type(struct ctx *x)
{
	int fds[3] = {x->c, x->s, x->lfd}, v;
	const char *nm[3] = {"c", "s", "listener"};
	for (int i = 0; i < 3; i++) {
		TRY(getopt_int(fds[i], SOL_SOCKET, SO_TYPE, "SO_TYPE", &v));
		CHECK(v == SOCK_STREAM, "%s: SO_TYPE %d, want SOCK_STREAM", nm[i], v);
		TRY(getopt_int(fds[i], SOL_SOCKET, SO_DOMAIN, "SO_DOMAIN", &v));
		CHECK(v == x->fam, "%s: SO_DOMAIN %d, want %d", nm[i], v, x->fam);
		TRY(getopt_int(fds[i], SOL_SOCKET, SO_PROTOCOL, "SO_PROTOCOL", &v));
		CHECK(v == (is_tcp(x) ? IPPROTO_TCP : 0), "%s: SO_PROTOCOL %d", nm[i],
			v);
		TRY(getopt_int(fds[i], SOL_SOCKET, SO_ERROR, "SO_ERROR", &v));
		CHECK(v == 0, "%s: SO_ERROR %s, want 0", nm[i], errname(v));
		TRY(getopt_int(fds[i], SOL_SOCKET, SO_ACCEPTCONN, "SO_ACCEPTCONN",
			&v));
		CHECK(v == (i == 2), "%s: SO_ACCEPTCONN %d, want %d", nm[i], v,
			i == 2);
	}
	return 0;
}

/* Throughput tuning sets SO_RCVBUF/SO_SNDBUF (Linux doubles the value and
 * reports the doubled size: only "at least what was asked" is asserted). */
static int case_sockopt_bufs(struct ctx *x)
{
	static const struct { int opt; const char *name; } o[] = {
		{SO_RCVBUF, "SO_RCVBUF"}, {SO_SNDBUF, "SO_SNDBUF"}};
	for (int i = 0; i < 2; i++) {
		int v;
		TRY(getopt_int(x->c, SOL_SOCKET, o[i].opt, o[i].name, &v));
		CHECK(v > 0, "%s default %d, want > 0", o[i].name, v);
		TRY(setopt_int(x->c, SOL_SOCKET, o[i].opt, o[i].name, 16384));
		TRY(getopt_int(x->c, SOL_SOCKET, o[i].opt, o[i].name, &v));
		CHECK(v >= 16384, "%s after setting 16384: %d", o[i].name, v);
	}
	TRY(send_pattern(x->c, 4096, 55, "after resizing"));
	return recv_pattern(x->s, 4096, 55, "after resizing");
}

/* Long-lived connections (databases, ssh) turn SO_KEEPALIVE on. */
static int case_sockopt_keepalive(struct ctx *x)
{
	int v;
	TRY(getopt_int(x->s, SOL_SOCKET, SO_KEEPALIVE, "SO_KEEPALIVE", &v));
	CHECK(v == 0, "SO_KEEPALIVE default %d, want 0", v);
	TRY(setopt_int(x->s, SOL_SOCKET, SO_KEEPALIVE, "SO_KEEPALIVE", 1));
	TRY(getopt_int(x->s, SOL_SOCKET, SO_KEEPALIVE, "SO_KEEPALIVE", &v));
	CHECK(v != 0, "SO_KEEPALIVE after setting 1: %d", v);
	TRY(setopt_int(x->s, SOL_SOCKET, SO_KEEPALIVE, "SO_KEEPALIVE", 0));
	TRY(getopt_int(x->s, SOL_SOCKET, SO_KEEPALIVE, "SO_KEEPALIVE", &v));
	CHECK(v == 0, "SO_KEEPALIVE after setting 0: %d", v);
	return 0;
}

/* Latency-sensitive protocols (redis, RPC) set TCP_NODELAY on every socket. */
static int case_tcp_nodelay(struct ctx *x)
{
	int v;
	if (!is_tcp(x))
		return skipf("TCP_NODELAY is a TCP option");
	for (int i = 0; i < 2; i++) {
		int fd = i ? x->s : x->c;
		TRY(getopt_int(fd, IPPROTO_TCP, TCP_NODELAY, "TCP_NODELAY", &v));
		CHECK(v == 0, "TCP_NODELAY default %d, want 0", v);
		TRY(setopt_int(fd, IPPROTO_TCP, TCP_NODELAY, "TCP_NODELAY", 1));
		TRY(getopt_int(fd, IPPROTO_TCP, TCP_NODELAY, "TCP_NODELAY", &v));
		CHECK(v != 0, "TCP_NODELAY after setting 1: %d", v);
	}
	EXPECT_RET(write(x->c, "nd", 2), 2);
	TRY(expect_bytes(x->s, "nd", 2, "with TCP_NODELAY"));
	TRY(setopt_int(x->c, IPPROTO_TCP, TCP_NODELAY, "TCP_NODELAY", 0));
	TRY(getopt_int(x->c, IPPROTO_TCP, TCP_NODELAY, "TCP_NODELAY", &v));
	CHECK(v == 0, "TCP_NODELAY after setting 0: %d", v);
	return 0;
}

/* Servers log getpeername(); proxies use getsockname() (e.g. to build
 * PROXY headers). AF_UNIX: the unbound connecting end has a bare family. */
static int case_sockname_peername(struct ctx *x)
{
	struct sockaddr_storage a, b;
	socklen_t al = sizeof a, bl = sizeof b;
	EXPECT_OK(getsockname(x->c, (struct sockaddr *)&a, &al));
	EXPECT_OK(getpeername(x->s, (struct sockaddr *)&b, &bl));
	CHECK(same_addr(&a, al, &b, bl), "getsockname(c) != getpeername(s)");
	if (!is_tcp(x))
		CHECK(al == sizeof(sa_family_t), "AF_UNIX getsockname(c): len %u, "
			"want %zu (unbound)", (unsigned)al, sizeof(sa_family_t));
	al = sizeof a, bl = sizeof b;
	EXPECT_OK(getpeername(x->c, (struct sockaddr *)&a, &al));
	EXPECT_OK(getsockname(x->s, (struct sockaddr *)&b, &bl));
	CHECK(same_addr(&a, al, &b, bl), "getpeername(c) != getsockname(s)");
	CHECK(same_addr(&a, al, &x->la, x->lalen),
		"getpeername(c) is not the listener's address");
	/* a short buffer: truncated, and the length says the real size */
	socklen_t sl = 4;
	EXPECT_OK(getpeername(x->c, (struct sockaddr *)&b, &sl));
	CHECK(sl == al, "getpeername with a 4-byte buffer: len %u, want %u",
		(unsigned)sl, (unsigned)al);
	al = sizeof a;
	EXPECT_ERR(getpeername(x->lfd, (struct sockaddr *)&a, &al), ENOTCONN);
	return 0;
}

/* Servers accept4(SOCK_NONBLOCK|SOCK_CLOEXEC) in one call (nginx, Go); a
 * nonblocking listener with nothing pending says EAGAIN. */
static int case_accept4_flags(struct ctx *x)
{
	TRY(expect_nonblock(x->s, 0, "plain accept"));
	TRY(expect_cloexec(x->s, 0, "plain accept"));
	int c2 = connect_to(x);
	TRY(c2);
	struct sockaddr_storage a, b;
	socklen_t al = sizeof a, bl = sizeof b;
	TRY(wait_in(x->lfd, "listener"));
	int s2 = accept4(x->lfd, (struct sockaddr *)&a, &al,
		SOCK_NONBLOCK | SOCK_CLOEXEC);
	CHECK(s2 >= 0, "accept4: %s", errname(errno));
	TRY(expect_nonblock(s2, 1, "accept4(SOCK_NONBLOCK)"));
	TRY(expect_cloexec(s2, 1, "accept4(SOCK_CLOEXEC)"));
	TRY(expect_nonblock(c2, 0, "connecting end"));
	EXPECT_OK(getsockname(c2, (struct sockaddr *)&b, &bl));
	CHECK(same_addr(&a, al, &b, bl), "accept4 address != getsockname(c2)");
	EXPECT_ERR(read(s2, &a, 1), EAGAIN);
	EXPECT_RET(write(c2, "a4", 2), 2);
	TRY(expect_bytes(s2, "a4", 2, "accept4 connection"));
	EXPECT_RET(write(s2, "4a", 2), 2);
	TRY(expect_bytes(c2, "4a", 2, "accept4 connection back"));
	close(c2);
	TRY(expect_eof(s2, "accept4 connection"));
	close(s2);
	TRY(set_nonblock(x->lfd, 1));
	al = sizeof a;
	EXPECT_ERR(accept(x->lfd, (struct sockaddr *)&a, &al), EAGAIN);
	return 0;
}

/* Shells and daemons dup2() sockets onto stdin/stdout (inetd, socat) and
 * keep dups around; the connection lives until the last one is closed, and
 * dups share the file status flags (O_NONBLOCK). */
static int case_dup_family(struct ctx *x)
{
	int p[2];
	EXPECT_OK(pipe(p));
	int d = dup(x->s);
	CHECK(d >= 0, "dup: %s", errname(errno));
	EXPECT_RET(dup2(x->s, p[0]), p[0]); /* p[0] was open: closed first */
	EXPECT_RET(dup3(x->s, p[1], O_CLOEXEC), p[1]);
	EXPECT_RET(dup2(x->s, x->s), x->s);
	TRY(expect_cloexec(d, 0, "dup"));
	TRY(expect_cloexec(p[0], 0, "dup2"));
	TRY(expect_cloexec(p[1], 1, "dup3(O_CLOEXEC)"));
	int fds[4] = {x->s, d, p[0], p[1]};
	for (int i = 0; i < 4; i++) {
		char m[8];
		snprintf(m, sizeof m, "dup#%d", i);
		EXPECT_RET(write(x->c, m, 5), 5);
		TRY(expect_bytes(fds[i], m, 5, m));
		EXPECT_RET(write(fds[i], m, 5), 5);
		TRY(expect_bytes(x->c, m, 5, m));
	}
	/* one open file description: O_NONBLOCK set via one shows on all */
	TRY(set_nonblock(d, 1));
	TRY(expect_nonblock(x->s, 1, "original after O_NONBLOCK on dup"));
	TRY(expect_nonblock(p[1], 1, "dup3 after O_NONBLOCK on dup"));
	TRY(set_nonblock(p[0], 0));
	TRY(expect_nonblock(d, 0, "dup after clearing via dup2"));
	/* closing duplicates does not close the connection */
	close(d);
	close(p[0]);
	TRY(expect_quiet(x->c, 50, "peer after closing two dups"));
	EXPECT_RET(write(p[1], "still", 5), 5);
	TRY(expect_bytes(x->c, "still", 5, "after closing dups"));
	close(p[1]);
	EXPECT_RET(write(x->c, "alive", 5), 5);
	TRY(expect_bytes(x->s, "alive", 5, "original after closing all dups"));
	close_fd(&x->s);
	return expect_eof(x->c, "after closing the last copy");
}

/* Nonblocking clients (curl multi, nginx upstreams, Go) connect, wait for
 * POLLOUT and read SO_ERROR. Kernel: TCP says EINPROGRESS even on loopback;
 * AF_UNIX connects at once (0). */
static int case_connect_nonblock(struct ctx *x)
{
	unsigned ev;
	int fd = socket(x->fam, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0, "socket: %s", errname(errno));
	x->c = fd; /* closed by the runner */
	bind_src(fd, x->fam);
	if (is_tcp(x))
		EXPECT_ERR(connect(fd, (struct sockaddr *)&x->la, x->lalen),
			EINPROGRESS);
	else
		EXPECT_RET(connect(fd, (struct sockaddr *)&x->la, x->lalen), 0);
	TRY(poll1(fd, POLLOUT, IO_WAIT_MS, &ev));
	CHECK(ev == POLLOUT, "after connect: poll %s, want OUT", evname(ev));
	int v;
	TRY(getopt_int(fd, SOL_SOCKET, SO_ERROR, "SO_ERROR", &v));
	CHECK(v == 0, "SO_ERROR after connect: %s", errname(v));
	struct sockaddr_storage a;
	socklen_t al = sizeof a;
	EXPECT_OK(getpeername(fd, (struct sockaddr *)&a, &al));
	CHECK(same_addr(&a, al, &x->la, x->lalen), "getpeername after connect");
	TRY(wait_in(x->lfd, "listener"));
	x->s = accept(x->lfd, NULL, NULL);
	CHECK(x->s >= 0, "accept: %s", errname(errno));
	EXPECT_RET(write(fd, "nbc", 3), 3);
	TRY(expect_bytes(x->s, "nbc", 3, "after nonblocking connect"));
	EXPECT_RET(write(x->s, "ok", 2), 2);
	return expect_bytes(fd, "ok", 2, "back");
}

/* Clients fall back to another server on ECONNREFUSED (and AF_UNIX clients
 * tell a stale socket file, ECONNREFUSED, from a missing one, ENOENT). */
static int case_connect_refused(struct ctx *x)
{
	close_fd(&x->lfd);
	x->c = socket(x->fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(x->c >= 0, "socket: %s", errname(errno));
	bind_src(x->c, x->fam);
	EXPECT_ERR(connect(x->c, (struct sockaddr *)&x->la, x->lalen),
		ECONNREFUSED);
	if (!is_tcp(x)) {
		char path[128];
		unix_path(path, sizeof path);
		EXPECT_OK(unlink(path));
		EXPECT_ERR(connect(x->c, (struct sockaddr *)&x->la, x->lalen),
			ENOENT);
	}
	return 0;
}

/* ---- 3. shutdown and close ------------------------------------------------ */

static int half_close_peer(struct ctx *x, void *arg)
{
	/* read the whole request up to EOF, then answer on the same socket */
	TRY(recv_pattern(x->c, 3000, 66, "request"));
	TRY(expect_eof(x->c, "after request"));
	TRY(expect_eof(x->c, "EOF again"));
	return write_full(x->c, "response", 8, "response");
}

/* HTTP/1.0 clients, rsh and netcat send a request, shutdown(SHUT_WR), then
 * read the response: the peer sees all bytes, then EOF, and can answer. */
static int case_shutdown_wr(struct ctx *x)
{
	struct child ch;
	TRY(spawn(&ch, x, PEER_C, half_close_peer, NULL));
	TRY(send_pattern(x->s, 3000, 66, "request"));
	EXPECT_OK(shutdown(x->s, SHUT_WR));
	EXPECT_ERR(send(x->s, "x", 1, MSG_NOSIGNAL), EPIPE);
	TRY(expect_bytes(x->s, "response", 8, "response"));
	TRY(expect_eof(x->s, "after response"));
	return reap(&ch);
}

#define EXIT_BYTES (4u << 20)

static int write_exit_peer(struct ctx *x, void *arg)
{
	return send_pattern(x->c, EXIT_BYTES, 77, "4 MiB then exit");
}

/* Batch producers (a CGI script, `cat file | nc`) write and exit at once:
 * everything written before exit arrives, then EOF. */
static int case_write_then_exit(struct ctx *x)
{
	struct child ch;
	TRY(spawn(&ch, x, PEER_C, write_exit_peer, NULL));
	msleep(50); /* let the buffers fill: the last of it is read after exit */
	TRY(recv_pattern(x->s, EXIT_BYTES, 77, "from the exiting writer"));
	TRY(expect_eof(x->s, "after 4 MiB"));
	return reap(&ch);
}

/* Servers with SIGPIPE ignored or MSG_NOSIGNAL detect a vanished client by
 * EPIPE (TCP may first accept a write, or say ECONNRESET once). Same
 * process; then a read gives EOF. */
static int case_closed_peer_nosignal(struct ctx *x)
{
	close_fd(&x->s);
	TRY(expect_eof(x->c, "peer closed"));
	TRY(write_until_epipe(x->c, 1, "send(MSG_NOSIGNAL)"));
	EXPECT_ERR(send(x->c, "x", 1, MSG_NOSIGNAL), EPIPE);
	return 0;
}

static int exit_now_peer(struct ctx *x, void *arg)
{
	return 0;
}

/* The same with SIGPIPE ignored and plain write() (nginx, redis), the peer
 * being another process that exited. */
static int case_closed_peer_sigign(struct ctx *x)
{
	struct child ch;
	TRY(spawn(&ch, x, PEER_S, exit_now_peer, NULL));
	TRY(reap(&ch));
	TRY(expect_eof(x->c, "peer exited"));
	return write_until_epipe(x->c, 0, "write with SIGPIPE ignored");
}

static int sigpipe_peer(struct ctx *x, void *arg)
{
	signal(SIGPIPE, SIG_DFL);
	TRY(expect_eof(x->c, "peer close"));
	TRY(write_until_epipe(x->c, 0, "write with SIGPIPE default"));
	return failf("write got EPIPE but SIGPIPE did not kill the process");
}

/* Unix filters (`yes | head`-style pipelines over sockets) rely on dying by
 * SIGPIPE when the reader goes away. */
static int case_closed_peer_sigpipe(struct ctx *x)
{
	struct child ch;
	int st;
	char m[sizeof g_msg];
	TRY(spawn(&ch, x, PEER_C, sigpipe_peer, NULL));
	close_fd(&x->s);
	TRY(reap_status(&ch, &st, m, sizeof m));
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGPIPE)
		return 0;
	if (WIFSIGNALED(st))
		return failf("peer killed by %s, want SIGPIPE", signame(WTERMSIG(st)));
	return failf("peer exited %d (%s), want death by SIGPIPE",
		WEXITSTATUS(st), m[0] ? m : "no message");
}

/* HTTP servers that close with an unread request body make the client see
 * ECONNRESET (TCP sends RST; AF_UNIX sets the error too), then EOF. */
static int case_close_unread(struct ctx *x)
{
	EXPECT_RET(write(x->c, "unread", 6), 6);
	TRY(wait_in(x->s, "unread data"));
	close_fd(&x->s);
	TRY(wait_in(x->c, "after close"));
	char b[8];
	EXPECT_ERR(read(x->c, b, sizeof b), ECONNRESET);
	EXPECT_RET(read(x->c, b, sizeof b), 0);
	return 0;
}

/* Servers that abort a connection (SO_LINGER on, 0 s: HAProxy, nginx's
 * reset_timedout_connection) make a TCP client see ECONNRESET, then EOF,
 * after the bytes that were sent; AF_UNIX closes as usual (EOF). */
static int case_linger_abort(struct ctx *x)
{
	struct linger l = {1, 0};
	EXPECT_RET(write(x->c, "q", 1), 1); /* across hosts: the client's proof */
	TRY(expect_bytes(x->s, "q", 1, "request"));
	EXPECT_OK(setsockopt(x->s, SOL_SOCKET, SO_LINGER, &l, sizeof l));
	EXPECT_RET(write(x->s, "bye", 3), 3);
	TRY(expect_bytes(x->c, "bye", 3, "before the abort"));
	close_fd(&x->s);
	TRY(wait_in(x->c, "after the abort"));
	char b[8];
	if (is_tcp(x))
		EXPECT_ERR(read(x->c, b, sizeof b), ECONNRESET);
	EXPECT_RET(read(x->c, b, sizeof b), 0);
	return 0;
}

/* After the peer's reset, SO_ERROR says ECONNRESET once (event loops read
 * it when poll reports POLLERR: libcurl, libuv), then the stream ends. */
static int case_so_error_reset(struct ctx *x)
{
	EXPECT_RET(write(x->c, "unread", 6), 6);
	TRY(wait_in(x->s, "unread data"));
	close_fd(&x->s);
	TRY(wait_in(x->c, "after close"));
	int v;
	TRY(getopt_int(x->c, SOL_SOCKET, SO_ERROR, "SO_ERROR", &v));
	CHECK(v == ECONNRESET, "SO_ERROR after the reset: %s, want ECONNRESET", errname(v));
	TRY(getopt_int(x->c, SOL_SOCKET, SO_ERROR, "SO_ERROR", &v));
	CHECK(v == 0, "SO_ERROR again: %s, want 0", errname(v));
	char b[8];
	EXPECT_RET(read(x->c, b, sizeof b), 0);
	return 0;
}

/* ---- 4. readiness ---------------------------------------------------------- */

/* epoll_wait on a set of at most one ready fd: n, and its events. */
static int ep_wait1(int ep, int ms, unsigned *ev)
{
	struct epoll_event e[4];
	int n;
	do
		n = epoll_wait(ep, e, 4, ms);
	while (n < 0 && errno == EINTR);
	CHECK(n >= 0, "epoll_wait: %s", errname(errno));
	CHECK(n <= 1, "epoll_wait returned %d events, want at most 1", n);
	*ev = n ? e[0].events & EV_MASK : 0;
	return n;
}

static int ep_ctl(int ep, int op, int fd, unsigned ev)
{
	struct epoll_event e = {.events = ev, .data.fd = fd};
	if (epoll_ctl(ep, op, fd, &e) < 0)
		return failf("epoll_ctl(%d, %s): %s", op, evname(ev), errname(errno));
	return 0;
}

/* The call (poll1 or ep_wait1, storing into the caller's ev) reports n
 * ready and exactly the events want (within the bits of mask). */
#define EXPECT_EV(call, n, mask, want, what) \
	do { \
		int n_ = (call); \
		TRY(n_); \
		CHECK(n_ == (n) && (ev & (mask)) == (unsigned)(want), \
			"%s: %d fd(s) ready with %s, want %d with %s", (what), n_, \
			evname(ev & (mask)), (n), evname(want)); \
	} while (0)

/* Every poll() loop: level-triggered POLLIN while data is unread. */
static int case_poll_level(struct ctx *x)
{
	unsigned ev;
	char b[16];
	EXPECT_EV(poll1(x->s, POLLIN, 0, &ev), 0, EV_MASK, 0, "idle");
	EXPECT_RET(write(x->c, "0123456789", 10), 10);
	EXPECT_EV(poll1(x->s, POLLIN, IO_WAIT_MS, &ev), 1, EV_MASK, POLLIN,
		"data");
	EXPECT_EV(poll1(x->s, POLLIN, 0, &ev), 1, EV_MASK, POLLIN, "again");
	EXPECT_RET(read(x->s, b, 1), 1);
	EXPECT_EV(poll1(x->s, POLLIN, 0, &ev), 1, EV_MASK, POLLIN, "after 1 byte");
	TRY(read_full(x->s, b, 9, "rest"));
	EXPECT_EV(poll1(x->s, POLLIN, 0, &ev), 0, EV_MASK, 0, "drained");
	EXPECT_EV(poll1(x->s, POLLIN | POLLOUT, 0, &ev), 1, EV_MASK, POLLOUT,
		"writable");
	return 0;
}

/* Signal-aware loops (e.g. pselect/ppoll-based servers) wait with a mask. */
static int case_ppoll(struct ctx *x)
{
	struct pollfd p = {x->s, POLLIN, 0};
	struct timespec ts = {0, 20 * 1000000L};
	sigset_t m;
	sigemptyset(&m);
	sigaddset(&m, SIGUSR1);
	EXPECT_RET(ppoll(&p, 1, &ts, &m), 0);
	EXPECT_RET(write(x->c, "pp", 2), 2);
	ts.tv_sec = IO_WAIT_MS / 1000;
	ts.tv_nsec = 0;
	EXPECT_RET(ppoll(&p, 1, &ts, &m), 1);
	CHECK((p.revents & EV_MASK) == POLLIN, "ppoll revents %s, want IN",
		evname(p.revents));
	EXPECT_RET(ppoll(&p, 1, NULL, NULL), 1); /* ready: returns at once */
	TRY(expect_bytes(x->s, "pp", 2, "ppoll data"));
	return 0;
}

/* select(): readable when data arrives, writable when there is room. */
static int do_select(struct ctx *x, int use_pselect)
{
	fd_set r, w;
	const char *nm = use_pselect ? "pselect" : "select";
	for (int round = 0; round < 3; round++) {
		FD_ZERO(&r);
		FD_ZERO(&w);
		FD_SET(x->s, &r);
		if (round == 2)
			FD_SET(x->s, &w);
		int ms = round == 1 ? IO_WAIT_MS : 0, n;
		if (use_pselect) {
			struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
			sigset_t m;
			sigemptyset(&m);
			n = pselect(x->s + 1, &r, &w, NULL, &ts, &m);
		} else {
			struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
			n = select(x->s + 1, &r, &w, NULL, &tv);
		}
		CHECK(n >= 0, "%s: %s", nm, errname(errno));
		if (round == 0) { /* idle */
			CHECK(n == 0, "%s on an idle socket = %d, want 0", nm, n);
			EXPECT_RET(write(x->c, "sel", 3), 3);
		} else if (round == 1) { /* data */
			CHECK(n == 1 && FD_ISSET(x->s, &r), "%s with data = %d, "
				"want 1 readable", nm, n);
			TRY(expect_bytes(x->s, "sel", 3, nm));
		} else { /* drained: writable only */
			CHECK(n == 1 && !FD_ISSET(x->s, &r) && FD_ISSET(x->s, &w),
				"%s drained = %d (r %d, w %d), want 1 writable", nm, n,
				FD_ISSET(x->s, &r), FD_ISSET(x->s, &w));
		}
	}
	return 0;
}

/* Legacy servers and many scripting runtimes still use select(). */
static int case_select(struct ctx *x)
{
	return do_select(x, 0);
}

/* pselect() loops that unblock signals only while waiting. */
static int case_pselect(struct ctx *x)
{
	return do_select(x, 1);
}

/* Level-triggered epoll (libuv, the default of most epoll users). */
static int case_epoll_level(struct ctx *x)
{
	unsigned ev;
	char b[8];
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0, "epoll_create1: %s", errname(errno));
	TRY(ep_ctl(ep, EPOLL_CTL_ADD, x->s, EPOLLIN));
	EXPECT_EV(ep_wait1(ep, 0, &ev), 0, EV_MASK, 0, "idle");
	EXPECT_RET(write(x->c, "0123456789", 10), 10);
	EXPECT_EV(ep_wait1(ep, IO_WAIT_MS, &ev), 1, EV_MASK, EPOLLIN, "data");
	EXPECT_EV(ep_wait1(ep, 0, &ev), 1, EV_MASK, EPOLLIN, "again");
	EXPECT_RET(read(x->s, b, 3), 3);
	EXPECT_EV(ep_wait1(ep, 0, &ev), 1, EV_MASK, EPOLLIN, "partly read");
	TRY(read_full(x->s, b, 7, "rest"));
	EXPECT_EV(ep_wait1(ep, 0, &ev), 0, EV_MASK, 0, "drained");
	close(ep);
	return 0;
}

/* shutdown(SHUT_RD): what already came can still be read, then the
 * stream ends for us (read returns 0, poll says IN and RDHUP), and the
 * peer can still be written to. */
static int case_shutdown_rd(struct ctx *x)
{
	unsigned ev;
	EXPECT_RET(write(x->c, "abc", 3), 3);
	TRY(wait_in(x->s, "data"));
	EXPECT_OK(shutdown(x->s, SHUT_RD));
	TRY(expect_bytes(x->s, "abc", 3, "what came before"));
	char b[8];
	EXPECT_RET(read(x->s, b, sizeof b), 0);
	EXPECT_EV(poll1(x->s, POLLIN | POLLRDHUP, 0, &ev), 1, POLLIN | POLLRDHUP,
		  POLLIN | POLLRDHUP, "after SHUT_RD");
	EXPECT_RET(write(x->s, "out", 3), 3);
	return expect_bytes(x->c, "out", 3, "the other way");
}

/* What poll and epoll say of a socket its peer reset (event loops take
 * POLLERR or POLLHUP for "read the error, then close"): IN, ERR and HUP;
 * once a read took the error (ECONNRESET), IN and HUP. */
static int case_poll_reset(struct ctx *x)
{
	unsigned ev;
	unsigned want = EPOLLIN | EPOLLHUP | EPOLLERR;
	EXPECT_RET(write(x->c, "unread", 6), 6);
	TRY(wait_in(x->s, "unread data"));
	close_fd(&x->s);
	TRY(wait_in(x->c, "after close"));
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0, "epoll_create1: %s", errname(errno));
	TRY(ep_ctl(ep, EPOLL_CTL_ADD, x->c, EPOLLIN | EPOLLRDHUP));
	unsigned m = EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP;
	EXPECT_EV(poll1(x->c, POLLIN, 0, &ev), 1, m, want, "poll after the reset");
	EXPECT_EV(ep_wait1(ep, 0, &ev), 1, m, want, "epoll after the reset");
	char b[8];
	EXPECT_ERR(read(x->c, b, sizeof b), ECONNRESET);
	EXPECT_RET(read(x->c, b, sizeof b), 0);
	want &= ~(unsigned)EPOLLERR;
	EXPECT_EV(poll1(x->c, POLLIN, 0, &ev), 1, m, want, "poll, error read");
	EXPECT_EV(ep_wait1(ep, 0, &ev), 1, m, want, "epoll, error read");
	close(ep);
	return 0;
}

/* A socket in an epoll set from before its connect (event loops that
 * register first): the set reports its bytes and its peer's EOF as for
 * one added after. The preload used to leave such a registration on the
 * plain socket, and the set saw none of the switched bytes. */
static int case_epoll_before_connect(struct ctx *x)
{
	unsigned ev;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0, "epoll_create1: %s", errname(errno));
	x->c = socket(x->fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(x->c >= 0, "socket: %s", errname(errno));
	bind_src(x->c, x->fam);
	TRY(ep_ctl(ep, EPOLL_CTL_ADD, x->c, EPOLLIN));
	EXPECT_OK(connect(x->c, (struct sockaddr *)&x->la, x->lalen));
	TRY(wait_in(x->lfd, "listener"));
	x->s = accept(x->lfd, NULL, NULL);
	CHECK(x->s >= 0, "accept: %s", errname(errno));
	for (int i = 0; i < 200; i++) { /* the client speaks first, as across hosts */
		EXPECT_RET(write(x->c, "ping", 4), 4);
		TRY(expect_bytes(x->s, "ping", 4, "request"));
		EXPECT_RET(write(x->s, "pong", 4), 4);
		EXPECT_EV(ep_wait1(ep, IO_WAIT_MS, &ev), 1, EV_MASK, EPOLLIN, "answer");
		TRY(expect_bytes(x->c, "pong", 4, "answer"));
	}
	close_fd(&x->s);
	EXPECT_EV(ep_wait1(ep, IO_WAIT_MS, &ev), 1, EPOLLIN, EPOLLIN, "peer's EOF");
	char b;
	EXPECT_RET(read(x->c, &b, 1), 0);
	close(ep);
	return 0;
}

/* Edge-triggered epoll (nginx, Go netpoller, Rust mio): one report per
 * arrival; leftover data after a partial read is not reported again. */
static int case_epoll_et(struct ctx *x)
{
	unsigned ev;
	char b[8];
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0, "epoll_create1: %s", errname(errno));
	TRY(ep_ctl(ep, EPOLL_CTL_ADD, x->s, EPOLLIN | EPOLLET));
	EXPECT_RET(write(x->c, "0123456789", 10), 10);
	EXPECT_EV(ep_wait1(ep, IO_WAIT_MS, &ev), 1, EV_MASK, EPOLLIN, "arrival");
	EXPECT_EV(ep_wait1(ep, 0, &ev), 0, EV_MASK, 0, "no second report");
	EXPECT_RET(read(x->s, b, 4), 4);
	EXPECT_EV(ep_wait1(ep, 50, &ev), 0, EV_MASK, 0, "after a partial read");
	EXPECT_RET(write(x->c, "abc", 3), 3);
	EXPECT_EV(ep_wait1(ep, IO_WAIT_MS, &ev), 1, EV_MASK, EPOLLIN,
		"second arrival");
	EXPECT_EV(ep_wait1(ep, 0, &ev), 0, EV_MASK, 0, "no repeat");
	TRY(expect_bytes(x->s, "456789abc", 9, "ET data"));
	close(ep);
	return 0;
}

/* Multi-threaded epoll servers hand a connection to one worker with
 * EPOLLONESHOT and re-arm it with EPOLL_CTL_MOD. */
static int case_epoll_oneshot(struct ctx *x)
{
	unsigned ev;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0, "epoll_create1: %s", errname(errno));
	TRY(ep_ctl(ep, EPOLL_CTL_ADD, x->s, EPOLLIN | EPOLLONESHOT));
	EXPECT_RET(write(x->c, "one", 3), 3);
	EXPECT_EV(ep_wait1(ep, IO_WAIT_MS, &ev), 1, EV_MASK, EPOLLIN, "first");
	EXPECT_EV(ep_wait1(ep, 0, &ev), 0, EV_MASK, 0, "disarmed");
	EXPECT_RET(write(x->c, "two", 3), 3);
	EXPECT_EV(ep_wait1(ep, 50, &ev), 0, EV_MASK, 0, "disarmed, more data");
	TRY(ep_ctl(ep, EPOLL_CTL_MOD, x->s, EPOLLIN | EPOLLONESHOT));
	EXPECT_EV(ep_wait1(ep, IO_WAIT_MS, &ev), 1, EV_MASK, EPOLLIN, "re-armed");
	EXPECT_EV(ep_wait1(ep, 0, &ev), 0, EV_MASK, 0, "disarmed again");
	TRY(expect_bytes(x->s, "onetwo", 6, "oneshot data"));
	close(ep);
	return 0;
}

static int rdhup_peer(struct ctx *x, void *arg)
{
	TRY(write_full(x->c, "bye", 3, "bye"));
	if (shutdown(x->c, SHUT_WR) < 0)
		return failf("shutdown: %s", errname(errno));
	return expect_bytes(x->c, "ack", 3, "ack after half-close");
}

/* Event loops detect a half-closed peer with EPOLLRDHUP without a read
 * (nginx, haproxy): SHUT_WR gives IN|RDHUP, no HUP, still writable. */
static int case_epoll_rdhup(struct ctx *x)
{
	unsigned ev = 0;
	struct child ch;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0, "epoll_create1: %s", errname(errno));
	TRY(ep_ctl(ep, EPOLL_CTL_ADD, x->s, EPOLLIN | EPOLLRDHUP));
	TRY(spawn(&ch, x, PEER_C, rdhup_peer, NULL));
	/* the data may be reported before the FIN */
	double end = now_ms() + IO_WAIT_MS;
	while (!(ev & EPOLLRDHUP) && now_ms() < end)
		TRY(ep_wait1(ep, 100, &ev));
	CHECK(ev == (EPOLLIN | EPOLLRDHUP), "after peer SHUT_WR: %s, want IN|RDHUP",
		evname(ev));
	TRY(expect_bytes(x->s, "bye", 3, "data before FIN"));
	EXPECT_RET(read(x->s, &ev, 1), 0);
	EXPECT_EV(ep_wait1(ep, 0, &ev), 1, EV_MASK, EPOLLIN | EPOLLRDHUP,
		"after reading EOF");
	EXPECT_RET(write(x->s, "ack", 3), 3);
	close(ep);
	return reap(&ch);
}

/* Writers wait for POLLOUT when a nonblocking write said EAGAIN
 * (every nonblocking server with slow clients). */
static int case_pollout_room(struct ctx *x)
{
	enum { CH = 64 << 10 };
	unsigned ev;
	uint64_t total = 0;
	EXPECT_EV(poll1(x->c, POLLOUT, 0, &ev), 1, EV_MASK, POLLOUT, "fresh");
	TRY(set_nonblock(x->c, 1));
	/* fill until a write right after a pause still says EAGAIN (late ACKs
	 * can free room just after the first EAGAIN on TCP) */
	for (int round = 0, first = 1; round < 50; round++, first = 1) {
		for (int i = 0; i < 4096; i++, first = 0) {
			fill_pat(g_buf, CH, 88, total);
			ssize_t r = write(x->c, g_buf, CH);
			if (r < 0 && errno == EAGAIN)
				break;
			CHECK(r > 0, "write = %s", rets(r, errno));
			total += (uint64_t)r;
		}
		if (first)
			break;
		msleep(20);
	}
	EXPECT_EV(poll1(x->c, POLLOUT, 0, &ev), 0, EV_MASK, 0, "full");
	TRY(recv_pattern(x->s, total, 88, "drain"));
	EXPECT_EV(poll1(x->c, POLLOUT, IO_WAIT_MS, &ev), 1, EV_MASK, POLLOUT,
		"drained");
	return 0;
}

static int last_words_peer(struct ctx *x, void *arg)
{
	return write_full(x->c, "last", 4, "last words");
}

/* Readers tell EOF apart by poll bits (curl, OpenSSH, Python asyncio).
 * Kernel: a peer's close gives TCP IN|OUT|RDHUP (HUP only once we shut down
 * our side too); AF_UNIX sets both directions: IN|OUT|HUP|RDHUP at once. */
static int case_poll_eof(struct ctx *x)
{
	const short want = POLLIN | POLLOUT | POLLRDHUP;
	unsigned ev = 0, eof = is_tcp(x) ? want : want | POLLHUP;
	struct child ch;
	TRY(spawn(&ch, x, PEER_C, last_words_peer, NULL));
	TRY(reap(&ch));
	double end = now_ms() + IO_WAIT_MS;
	while (!(ev & POLLRDHUP) && now_ms() < end)
		TRY(poll1(x->s, want, 100, &ev));
	CHECK(ev == eof, "peer gone: poll %s, want %s", evname(ev), evname(eof));
	TRY(expect_bytes(x->s, "last", 4, "last words"));
	EXPECT_RET(read(x->s, &ev, 1), 0);
	EXPECT_EV(poll1(x->s, want, 0, &ev), 1, EV_MASK, eof, "after EOF read");
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0, "epoll_create1: %s", errname(errno));
	TRY(ep_ctl(ep, EPOLL_CTL_ADD, x->s, EPOLLIN | EPOLLOUT | EPOLLRDHUP));
	EXPECT_EV(ep_wait1(ep, 0, &ev), 1, EV_MASK, eof, "epoll at EOF");
	close(ep);
	EXPECT_EV(poll1(x->s, 0, 0, &ev), is_tcp(x) ? 0 : 1, EV_MASK,
		eof & POLLHUP, "no events asked");
	EXPECT_OK(shutdown(x->s, SHUT_WR));
	EXPECT_EV(poll1(x->s, want, 0, &ev), 1, EV_MASK, want | POLLHUP,
		"after our SHUT_WR too");
	return 0;
}

/* One connection watched by two event loops (e.g. a library's private epoll
 * plus the application's): both report it, each by its own mode. */
static int case_epoll_two_sets(struct ctx *x)
{
	unsigned ev;
	int e1 = epoll_create1(EPOLL_CLOEXEC), e2 = epoll_create1(EPOLL_CLOEXEC);
	CHECK(e1 >= 0 && e2 >= 0, "epoll_create1: %s", errname(errno));
	TRY(ep_ctl(e1, EPOLL_CTL_ADD, x->s, EPOLLIN));
	TRY(ep_ctl(e2, EPOLL_CTL_ADD, x->s, EPOLLIN | EPOLLET));
	EXPECT_RET(write(x->c, "both", 4), 4);
	EXPECT_EV(ep_wait1(e1, IO_WAIT_MS, &ev), 1, EV_MASK, EPOLLIN, "set 1");
	EXPECT_EV(ep_wait1(e2, IO_WAIT_MS, &ev), 1, EV_MASK, EPOLLIN, "set 2 (ET)");
	EXPECT_EV(ep_wait1(e1, 0, &ev), 1, EV_MASK, EPOLLIN, "set 1 again");
	EXPECT_EV(ep_wait1(e2, 0, &ev), 0, EV_MASK, 0, "set 2 again (ET)");
	TRY(expect_bytes(x->s, "both", 4, "data"));
	EXPECT_EV(ep_wait1(e1, 0, &ev), 0, EV_MASK, 0, "set 1 drained");
	close(e1);
	close(e2);
	return 0;
}

enum { MECH_POLL, MECH_EPOLL, MECH_SELECT };

/* Which of fds[0..2] one wait reports readable (bit i for fds[i]). */
static int ready_set(int mech, const int *fds, int ep, unsigned *set)
{
	*set = 0;
	if (mech == MECH_POLL) {
		struct pollfd p[3];
		for (int i = 0; i < 3; i++)
			p[i] = (struct pollfd){fds[i], POLLIN, 0};
		int n = poll(p, 3, IO_WAIT_MS);
		CHECK(n >= 0, "poll: %s", errname(errno));
		for (int i = 0; i < 3; i++)
			if (p[i].revents)
				*set |= 1u << i;
	} else if (mech == MECH_EPOLL) {
		struct epoll_event e[3];
		int n = epoll_wait(ep, e, 3, IO_WAIT_MS);
		CHECK(n >= 0, "epoll_wait: %s", errname(errno));
		for (int k = 0; k < n; k++)
			for (int i = 0; i < 3; i++)
				if (e[k].data.fd == fds[i])
					*set |= 1u << i;
	} else {
		fd_set r;
		FD_ZERO(&r);
		int mx = 0;
		for (int i = 0; i < 3; i++) {
			FD_SET(fds[i], &r);
			mx = fds[i] > mx ? fds[i] : mx;
		}
		struct timeval tv = {IO_WAIT_MS / 1000, 0};
		int n = select(mx + 1, &r, NULL, NULL, &tv);
		CHECK(n >= 0, "select: %s", errname(errno));
		for (int i = 0; i < 3; i++)
			if (FD_ISSET(fds[i], &r))
				*set |= 1u << i;
	}
	return 0;
}

/* Event loops wait on sockets together with pipes and eventfds (self-pipe
 * wakeups, libuv async handles): exactly the ready one is reported. */
static int case_mixed_fds(struct ctx *x)
{
	static const char *const mn[] = {"poll", "epoll", "select"};
	static const char *const fn[] = {"socket", "pipe", "eventfd"};
	int p[2], efd = eventfd(0, EFD_CLOEXEC);
	CHECK(efd >= 0, "eventfd: %s", errname(errno));
	EXPECT_OK(pipe2(p, O_CLOEXEC));
	int fds[3] = {x->s, p[0], efd};
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0, "epoll_create1: %s", errname(errno));
	for (int i = 0; i < 3; i++)
		TRY(ep_ctl(ep, EPOLL_CTL_ADD, fds[i], EPOLLIN));
	for (int m = 0; m < 3; m++) {
		for (int which = 0; which < 3; which++) {
			uint64_t one = 1;
			char b[8];
			if (which == 0)
				EXPECT_RET(write(x->c, "s", 1), 1);
			else if (which == 1)
				EXPECT_RET(write(p[1], "p", 1), 1);
			else
				EXPECT_RET(write(efd, &one, 8), 8);
			unsigned set;
			TRY(ready_set(m, fds, ep, &set));
			CHECK(set == 1u << which, "%s: %s made ready, reported set 0x%x",
				mn[m], fn[which], set);
			EXPECT_RET(read(fds[which], b, 8), which == 2 ? 8 : 1);
		}
	}
	close(ep);
	close(p[0]);
	close(p[1]);
	close(efd);
	return 0;
}

/* Timers built on poll timeouts (keepalive ticks, retry loops): a wait on
 * an idle socket times out, and not early. */
static int case_wait_timeout(struct ctx *x)
{
	static const char *const mn[] = {"poll", "epoll_wait", "select"};
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0, "epoll_create1: %s", errname(errno));
	TRY(ep_ctl(ep, EPOLL_CTL_ADD, x->s, EPOLLIN));
	for (int m = 0; m < 3; m++) {
		struct pollfd p = {x->s, POLLIN, 0};
		struct epoll_event e;
		fd_set r;
		struct timeval tv = {0, 50000};
		FD_ZERO(&r);
		FD_SET(x->s, &r);
		double t0 = now_ms();
		int n = m == 0 ? poll(&p, 1, 50) : m == 1 ? epoll_wait(ep, &e, 1, 50) :
			select(x->s + 1, &r, NULL, NULL, &tv);
		double dt = now_ms() - t0;
		CHECK(n == 0, "%s(50 ms) on an idle socket = %s, want 0", mn[m],
			rets(n, errno));
		CHECK(dt >= 47, "%s(50 ms) returned after %.1f ms", mn[m], dt);
		CHECK(dt < 5000, "%s(50 ms) returned after %.1f ms", mn[m], dt);
	}
	close(ep);
	return 0;
}

/* A blocking read on an idle socket with SO_RCVTIMEO fails with EAGAIN
 * after it, and not early. */
static int read_times_out(int fd, const char *what)
{
	char b;
	double t0 = now_ms();
	ssize_t n = read(fd, &b, 1);
	int e = errno;
	double dt = now_ms() - t0;
	CHECK(n < 0 && (e == EAGAIN || e == EWOULDBLOCK), "%s: read = %s, want EAGAIN", what,
	      rets((int)n, e));
	CHECK(dt >= 47, "%s: read timed out after %.1f ms (SO_RCVTIMEO 50 ms)", what, dt);
	CHECK(dt < 5000, "%s: read timed out after %.1f ms (SO_RCVTIMEO 50 ms)", what, dt);
	return 0;
}

/* Socket timeouts set before connect (to bound the connect itself, as
 * many clients do) hold after it, and an accepted TCP socket has its
 * listener's (Linux copies them at accept). Before, a switched socket
 * forgot both and such a read waited forever. */
static int case_timeo_before_connect(struct ctx *x)
{
	struct timeval tv = {0, 50000};
	EXPECT_OK(setsockopt(x->lfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv));
	x->c = socket(x->fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(x->c >= 0, "socket: %s", errname(errno));
	bind_src(x->c, x->fam);
	EXPECT_OK(setsockopt(x->c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv));
	EXPECT_OK(connect(x->c, (struct sockaddr *)&x->la, x->lalen));
	TRY(wait_in(x->lfd, "listener"));
	x->s = accept(x->lfd, NULL, NULL);
	CHECK(x->s >= 0, "accept: %s", errname(errno));
	EXPECT_RET(write(x->c, "hi", 2), 2); /* across hosts: the client's proof */
	TRY(expect_bytes(x->s, "hi", 2, "request"));
	TRY(read_times_out(x->c, "client, timeout set before connect"));
	if (is_tcp(x)) /* AF_UNIX gives an accepted socket no timeouts */
		TRY(read_times_out(x->s, "accepted, the listener's timeout"));
	EXPECT_RET(write(x->s, "ok", 2), 2);
	return expect_bytes(x->c, "ok", 2, "after the timeouts");
}

/* Timeouts set on a connected socket: a read on an idle one, and writes
 * into a peer that does not read (until one fails with EAGAIN, having
 * written nothing), time out, not early. */
static int case_sockopt_timeo(struct ctx *x)
{
	struct timeval tv = {0, 50000};
	EXPECT_OK(setsockopt(x->c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv));
	EXPECT_OK(setsockopt(x->c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv));
	TRY(read_times_out(x->c, "idle"));
	for (size_t total = 0;;) {
		double t0 = now_ms();
		ssize_t n = write(x->c, g_buf, 65536);
		int e = errno;
		double dt = now_ms() - t0;
		if (n > 0) {
			total += (size_t)n;
			CHECK(total < ((size_t)1 << 30), "1 GiB written into a peer that reads nothing");
			continue;
		}
		CHECK(n < 0 && (e == EAGAIN || e == EWOULDBLOCK), "write into a full peer = %s, "
		      "want EAGAIN", rets((int)n, e));
		CHECK(dt >= 47, "write timed out after %.1f ms (SO_SNDTIMEO 50 ms)", dt);
		CHECK(dt < 5000, "write timed out after %.1f ms (SO_SNDTIMEO 50 ms)", dt);
		return 0;
	}
}

enum { WAKE_POLL, WAKE_EPOLL, WAKE_READ };
struct waker {
	int mech, fd;
	pid_t tid;            /* set by the thread before it blocks */
	volatile int started;
	int ret, err;
	unsigned ev;
	char buf[8];
};

static void *wake_thread(void *arg)
{
	struct waker *w = arg;
	int ep = -1;
	if (w->mech == WAKE_EPOLL) {
		ep = epoll_create1(EPOLL_CLOEXEC);
		struct epoll_event e = {.events = EPOLLIN, .data.fd = w->fd};
		epoll_ctl(ep, EPOLL_CTL_ADD, w->fd, &e);
	}
	w->tid = my_tid();
	__atomic_store_n(&w->started, 1, __ATOMIC_RELEASE);
	if (w->mech == WAKE_POLL) {
		struct pollfd p = {w->fd, POLLIN, 0};
		w->ret = poll(&p, 1, 8000);
		w->ev = (unsigned)p.revents;
	} else if (w->mech == WAKE_EPOLL) {
		struct epoll_event e = {0};
		w->ret = epoll_wait(ep, &e, 1, 8000);
		w->ev = e.events;
	} else {
		w->ret = (int)read(w->fd, w->buf, 4); /* the watchdog bounds it */
	}
	w->err = errno;
	if (ep >= 0)
		close(ep);
	return NULL;
}

static int wake_peer(struct ctx *x, void *arg)
{
	TRY(gate_wait(arg, "gate"));
	return write_full(x->c, "wake", 4, "wake");
}

/* Thread-per-connection servers and background I/O threads block in
 * poll/epoll_wait/read and must wake when another process writes. */
static int wake_common(struct ctx *x, int mech)
{
	static const char *const mn[] = {"poll", "epoll_wait", "read"};
	struct gate g;
	struct child ch;
	struct waker w = {.mech = mech, .fd = x->s};
	pthread_t t;
	TRY(gate_open(&g));
	TRY(spawn(&ch, x, PEER_C, wake_peer, &g));
	int e = pthread_create(&t, NULL, wake_thread, &w);
	CHECK(e == 0, "pthread_create: %s", errname(e));
	/* wait (bounded) until the thread sleeps, presumably in the call */
	double end = now_ms() + 2000;
	while (now_ms() < end && (!__atomic_load_n(&w.started, __ATOMIC_ACQUIRE) ||
		thread_state(w.tid) != 'S'))
		msleep(2);
	msleep(20);
	int gr = gate_pass(&g);
	pthread_join(t, NULL);
	TRY(gr);
	if (mech == WAKE_READ)
		CHECK(w.ret >= 1 && w.ret <= 4 && !memcmp(w.buf, "wake", (size_t)w.ret),
			"read in a thread = %s, want 1..4 bytes of \"wake\"",
			rets(w.ret, w.err));
	else
		CHECK(w.ret == 1 && (w.ev & POLLIN), "%s in a thread = %s (%s), "
			"want 1 with IN", mn[mech], rets(w.ret, w.err), evname(w.ev));
	gate_close(&g);
	return reap(&ch);
}

/* Thread-per-connection servers: a thread blocked in poll(). */
static int case_wake_poll(struct ctx *x)
{
	return wake_common(x, WAKE_POLL);
}

/* Worker-thread event loops: a thread blocked in epoll_wait(). */
static int case_wake_epoll(struct ctx *x)
{
	return wake_common(x, WAKE_EPOLL);
}

/* Blocking clients with a reader thread: a thread blocked in read(). */
static int case_wake_read(struct ctx *x)
{
	return wake_common(x, WAKE_READ);
}

/* ---- 5. processes and threads ----------------------------------------------- */

static int shared_writer(struct ctx *x, void *arg)
{
	close_fd(&x->s);
	close_fd(&x->lfd);
	TRY(write_full(x->c, "child", 5, "child write"));
	return gate_wait(arg, "gate"); /* then exit closes the last copy */
}

/* Pre-fork servers and shells: a connection copied by fork() stays open
 * until the last copy is closed (here the parent closes first). */
static int case_fork_parent_closes(struct ctx *x)
{
	struct gate g;
	struct child ch;
	TRY(gate_open(&g));
	TRY(spawn(&ch, x, SHARE, shared_writer, &g));
	close_fd(&x->c);
	TRY(expect_bytes(x->s, "child", 5, "child's write"));
	TRY(expect_quiet(x->s, 100, "while the child holds its copy"));
	TRY(gate_pass(&g));
	TRY(reap(&ch));
	gate_close(&g);
	return expect_eof(x->s, "after the last copy closed");
}

static int write_exit_shared(struct ctx *x, void *arg)
{
	close_fd(&x->s);
	close_fd(&x->lfd);
	return write_full(x->c, "child", 5, "child write");
}

/* The same with the child exiting first (daemons whose helper exits); the
 * parent's copy keeps the connection usable. */
static int case_fork_child_exits(struct ctx *x)
{
	struct child ch;
	TRY(spawn(&ch, x, SHARE, write_exit_shared, NULL));
	TRY(reap(&ch));
	TRY(expect_bytes(x->s, "child", 5, "child's write"));
	TRY(expect_quiet(x->s, 100, "while the parent holds its copy"));
	EXPECT_RET(write(x->c, "parent", 6), 6);
	TRY(expect_bytes(x->s, "parent", 6, "parent's copy"));
	EXPECT_RET(write(x->s, "reply", 5), 5);
	TRY(expect_bytes(x->c, "reply", 5, "reply to the parent's copy"));
	close_fd(&x->c);
	return expect_eof(x->s, "after the last copy closed");
}

#define NCONN 3

static int fork_client(struct ctx *x, void *arg)
{
	close_fd(&x->lfd);
	for (int i = 0; i < NCONN; i++) {
		char req[16], resp[16];
		snprintf(req, sizeof req, "req %d\n", i);
		snprintf(resp, sizeof resp, "resp %d\n", i);
		int fd = connect_to(x);
		TRY(fd);
		int r = write_full(fd, req, 6, "request");
		if (r == 0)
			r = expect_bytes(fd, resp, 7, "response");
		if (r == 0)
			r = expect_eof(fd, "end of response");
		close(fd);
		TRY(r);
	}
	return 0;
}

static int fork_server_child(struct ctx *x, void *arg)
{
	char req[16], got[8];
	snprintf(req, sizeof req, "req %d\n", *(int *)arg);
	TRY(read_full(x->s, got, 6, "request"));
	CHECK(!memcmp(got, req, 6), "request: wrong bytes");
	char resp[16];
	snprintf(resp, sizeof resp, "resp %d\n", *(int *)arg);
	return write_full(x->s, resp, 7, "response");
}

/* Fork-per-connection servers (inetd, classic Apache prefork, sshd): the
 * parent accepts, forks, closes its copy; the child serves and exits. */
static int case_fork_server(struct ctx *x)
{
	struct child cl, srv[NCONN];
	int n = 0, rc = 0;
	TRY(spawn(&cl, x, SHARE, fork_client, NULL));
	for (int i = 0; i < NCONN && rc == 0; i++) {
		if ((rc = wait_in(x->lfd, "listener")) < 0)
			break;
		x->s = accept(x->lfd, NULL, NULL);
		if (x->s < 0) {
			rc = failf("accept: %s", errname(errno));
			break;
		}
		if ((rc = spawn(&srv[i], x, PEER_S, fork_server_child, &i)) == 0)
			n++;
	}
	for (int i = 0; i < n; i++)
		if (reap(&srv[i]) < 0)
			rc = CASE_FAIL;
	TRY(rc);
	return reap(&cl);
}

static int kv_client(struct ctx *x, void *arg)
{
	for (int i = 0; i < 10; i++) {
		char req[16], resp[16];
		snprintf(req, sizeof req, "get %d\n", i);
		snprintf(resp, sizeof resp, "val %d\n", i);
		TRY(write_full(x->c, req, 6, "request"));
		TRY(expect_bytes(x->c, resp, 6, "response"));
	}
	return 0;
}

static int bgsave_child(struct ctx *x, void *arg)
{
	msleep(30); /* "writes the snapshot"; never touches the sockets */
	return 0;
}

/* redis BGSAVE / postgres-style helpers: a forked child that inherits every
 * connection and exits without touching them must not disturb them. */
static int case_fork_bgsave(struct ctx *x)
{
	struct child cl, bg;
	TRY(spawn(&cl, x, PEER_C, kv_client, NULL));
	for (int i = 0; i < 10; i++) {
		char req[16], got[8], resp[16];
		snprintf(req, sizeof req, "get %d\n", i);
		TRY(read_full(x->s, got, 6, "request"));
		CHECK(!memcmp(got, req, 6), "request %d: wrong bytes", i);
		if (i == 2)
			TRY(spawn(&bg, x, SHARE, bgsave_child, NULL));
		if (i == 3)
			TRY(reap(&bg)); /* requests 4..9 come after it exited */
		snprintf(resp, sizeof resp, "val %d\n", i);
		TRY(write_full(x->s, resp, 6, "response"));
	}
	TRY(expect_eof(x->s, "client done"));
	return reap(&cl);
}

static int exec_peer(struct ctx *x, void *arg)
{
	char fd[16];
	TRY(expect_cloexec(x->c, 0, "socket before exec"));
	snprintf(fd, sizeof fd, "%d", x->c);
	char *argv[] = {g_self, "--exec-child", fd, NULL};
	execv(g_self, argv);
	return failf("execv %s: %s", g_self, errname(errno));
}

/* inetd/systemd socket activation, nginx binary upgrade, `ssh -o
 * ProxyCommand`: a socket inherited across execve() keeps working. */
static int case_exec_inherit(struct ctx *x)
{
	struct child ch;
	TRY(spawn(&ch, x, PEER_C, exec_peer, NULL));
	TRY(expect_bytes(x->s, "exec-hello", 10, "hello from the new image"));
	EXPECT_RET(write(x->s, "exec-reply", 10), 10);
	TRY(expect_bytes(x->s, "exec-bye", 8, "bye from the new image"));
	TRY(expect_eof(x->s, "new image exited"));
	return reap(&ch);
}

#define TBYTES (1u << 20)

static int thread_peer(struct ctx *x, void *arg)
{
	return duplex_pattern(x->c, TBYTES, 91, TBYTES, 92, "peer");
}

struct writer {
	int fd, rc;
};

static void *writer_thread(void *arg)
{
	struct writer *w = arg;
	w->rc = send_pattern(w->fd, TBYTES, 92, "writer thread");
	return NULL;
}

/* Programs with a reader thread and a writer thread on one socket (gRPC,
 * database drivers, terminal multiplexers): both directions at once. */
static int case_threads_duplex(struct ctx *x)
{
	struct child ch;
	struct writer w = {x->s, 0};
	pthread_t t;
	TRY(spawn(&ch, x, PEER_C, thread_peer, NULL));
	int e = pthread_create(&t, NULL, writer_thread, &w);
	CHECK(e == 0, "pthread_create: %s", errname(e));
	int rc = recv_pattern(x->s, TBYTES, 91, "reader thread");
	if (rc < 0)
		shutdown(x->s, SHUT_RDWR); /* unblock the writer */
	pthread_join(t, NULL);
	TRY(rc);
	TRY(w.rc);
	TRY(reap(&ch));
	return expect_eof(x->s, "after the transfer");
}

/* ---- 6. sendfile and splice ----------------------------------------------------- */

#define FBYTES ((1u << 20) + 12345)

/* An unlinked temp file holding n bytes of pattern seed (offset at 0). */
static int pattern_file(uint64_t n, uint32_t seed)
{
	char path[128];
	snprintf(path, sizeof path, "%s/file", g_dir);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return failf("open %s: %s", path, errname(errno));
	unlink(path);
	for (uint64_t off = 0; off < n;) {
		size_t k = n - off < GBUF_SIZE ? (size_t)(n - off) : GBUF_SIZE;
		fill_pat(g_buf, k, seed, off);
		if (write_full(fd, g_buf, k, "temp file") < 0) {
			close(fd);
			return CASE_FAIL;
		}
		off += k;
	}
	if (lseek(fd, 0, SEEK_SET) != 0) {
		close(fd);
		return failf("lseek: %s", errname(errno));
	}
	return fd;
}

static int file_reader_peer(struct ctx *x, void *arg)
{
	TRY(recv_pattern(x->c, FBYTES, *(uint32_t *)arg, "file data"));
	return expect_eof(x->c, "after the file");
}

/* Static file servers (nginx, Apache, lighttpd) sendfile() from a file:
 * first with an offset pointer (file offset untouched), then from the file
 * offset (advanced). */
static int case_sendfile(struct ctx *x)
{
	static uint32_t seed = 101;
	struct child ch;
	int f = pattern_file(FBYTES, seed);
	TRY(f);
	TRY(spawn(&ch, x, PEER_C, file_reader_peer, &seed));
	off_t off = 0, half = FBYTES / 2;
	while (off < half) {
		ssize_t r = sendfile(x->s, f, &off, (size_t)(half - off));
		CHECK(r > 0, "sendfile(&off) = %s", rets(r, errno));
	}
	CHECK(off == half, "offset %lld, want %lld", (long long)off,
		(long long)half);
	CHECK(lseek(f, 0, SEEK_CUR) == 0, "sendfile(&off) moved the file offset");
	EXPECT_RET(lseek(f, half, SEEK_SET), half);
	for (size_t done = half; done < FBYTES;) {
		ssize_t r = sendfile(x->s, f, NULL, FBYTES - done);
		CHECK(r > 0, "sendfile(NULL) = %s", rets(r, errno));
		done += (size_t)r;
	}
	CHECK(lseek(f, 0, SEEK_CUR) == FBYTES, "sendfile(NULL) left the offset "
		"at %lld", (long long)lseek(f, 0, SEEK_CUR));
	close(f);
	close_fd(&x->s);
	return reap(&ch);
}

static int pattern_writer_peer(struct ctx *x, void *arg)
{
	return send_pattern(x->c, FBYTES, *(uint32_t *)arg, "splice source");
}

/* Zero-copy proxies and recorders (haproxy, tee-like tools) splice() a
 * socket into a pipe and the pipe into a file. */
static int case_splice_to_file(struct ctx *x)
{
	static uint32_t seed = 102;
	struct child ch;
	int p[2];
	int f = pattern_file(0, 0);
	TRY(f);
	EXPECT_OK(pipe2(p, O_CLOEXEC));
	TRY(spawn(&ch, x, PEER_C, pattern_writer_peer, &seed));
	uint64_t total = 0;
	for (;;) {
		ssize_t r = splice(x->s, NULL, p[1], NULL, 65536, SPLICE_F_MOVE);
		CHECK(r >= 0, "splice(socket -> pipe): %s", errname(errno));
		if (r == 0)
			break;
		for (ssize_t moved = 0; moved < r;) {
			ssize_t k = splice(p[0], NULL, f, NULL, (size_t)(r - moved),
				SPLICE_F_MOVE);
			CHECK(k > 0, "splice(pipe -> file) = %s", rets(k, errno));
			moved += k;
		}
		total += (uint64_t)r;
		CHECK(total <= FBYTES, "spliced more than was sent");
	}
	CHECK(total == FBYTES, "spliced %llu bytes, want %u",
		(unsigned long long)total, FBYTES);
	TRY(reap(&ch));
	for (uint64_t off = 0; off < total;) {
		size_t k = total - off < GBUF_SIZE ? (size_t)(total - off) : GBUF_SIZE;
		EXPECT_RET(pread(f, g_buf, k, (off_t)off), k);
		TRY(check_pat(g_buf, k, seed, off, "file contents"));
		off += k;
	}
	close(p[0]);
	close(p[1]);
	close(f);
	return 0;
}

/* Proxies splice() a pipe into a socket (the other half of zero-copy
 * forwarding). */
static int case_splice_to_socket(struct ctx *x)
{
	static uint32_t seed = 103;
	struct child ch;
	int p[2];
	EXPECT_OK(pipe2(p, O_CLOEXEC));
	TRY(spawn(&ch, x, PEER_C, file_reader_peer, &seed));
	for (size_t off = 0; off < FBYTES;) {
		size_t k = FBYTES - off < 32768 ? FBYTES - off : 32768;
		fill_pat(g_buf, k, seed, off);
		TRY(write_full(p[1], g_buf, k, "pipe"));
		for (size_t moved = 0; moved < k;) {
			ssize_t r = splice(p[0], NULL, x->s, NULL, k - moved,
				SPLICE_F_MOVE);
			CHECK(r > 0, "splice(pipe -> socket) = %s", rets(r, errno));
			moved += (size_t)r;
		}
		off += k;
	}
	close(p[0]);
	close(p[1]);
	close_fd(&x->s);
	return reap(&ch);
}

/* ---- 7. last: no fd leaks --------------------------------------------------------- */

/* Long-running servers: the suite itself closed every fd it opened (and so
 * will the preload, which must not keep fds the program can see growing). */
/* The fds that differ from the start, each with what it is. */
static int fd_diff(char *list, size_t cap)
{
	unsigned char now[MAX_FD];
	int n = 0;
	list[0] = 0;
	fd_snapshot(now);
	for (int i = 0; i < MAX_FD; i++) {
		if (now[i] == g_fd_start[i])
			continue;
		char path[32], what[80] = "closed";
		if (now[i]) {
			snprintf(path, sizeof path, "/proc/self/fd/%d", i);
			ssize_t k = readlink(path, what, sizeof what - 1);
			what[k > 0 ? k : 0] = 0;
		}
		size_t l = strlen(list);
		if (l < cap - 100)
			snprintf(list + l, cap - l, " %d(%s)", i, what);
		n++;
	}
	return n;
}

static int case_fd_leak(struct ctx *x)
{
	char list[512];
	/* the preload across hosts ends a channel on a thread of its own, a
	 * moment after the close that asked for it (the device's fds go
	 * with the last channel): a leak is what stays */
	int n = fd_diff(list, sizeof list);
	for (int k = 0; k < 40 && n; k++) {
		usleep(50000);
		n = fd_diff(list, sizeof list);
	}
	CHECK(n == 0, "%d fds differ from the start:%s", n, list);
	return 0;
}

/* ==== the table ============================================================== */

struct test {
	const char *name;
	int (*fn)(struct ctx *x);
	unsigned flags;
};

static const struct test tests[] = {
	{"read_write", case_read_write, 0},
	{"readv_writev", case_readv_writev, 0},
	{"send_recv", case_send_recv, 0},
	{"sendto_null", case_sendto_null, 0},
	{"recvfrom_addr", case_recvfrom_addr, 0},
	{"sendmsg_recvmsg", case_sendmsg_recvmsg, 0},
	{"msg_peek", case_msg_peek, 0},
	{"msg_dontwait", case_msg_dontwait, 0},
	{"msg_waitall", case_msg_waitall, 0},
	{"msg_nosignal", case_msg_nosignal, 0},
	{"byte_stream", case_byte_stream, 0},
	{"bulk_duplex", case_bulk_duplex, 0},
	{"short_write", case_short_write, 0},
	{"fcntl_nonblock", case_fcntl_nonblock, 0},
	{"fcntl_dupfd", case_fcntl_dupfd, 0},
	{"ioctl_fionbio", case_ioctl_fionbio, 0},
	{"ioctl_fionread", case_ioctl_fionread, 0},
	{"sockopt_type", case_sockopt_type, 0},
	{"sockopt_bufs", case_sockopt_bufs, 0},
	{"sockopt_keepalive", case_sockopt_keepalive, 0},
	{"tcp_nodelay", case_tcp_nodelay, 0},
	{"sockname_peername", case_sockname_peername, 0},
	{"accept4_flags", case_accept4_flags, 0},
	{"dup_family", case_dup_family, 0},
	{"connect_nonblock", case_connect_nonblock, F_LISTEN},
	{"connect_refused", case_connect_refused, F_LISTEN},
	{"shutdown_wr", case_shutdown_wr, 0},
	{"write_then_exit", case_write_then_exit, 0},
	{"closed_peer_nosignal", case_closed_peer_nosignal, 0},
	{"closed_peer_sigign", case_closed_peer_sigign, 0},
	{"closed_peer_sigpipe", case_closed_peer_sigpipe, 0},
	{"close_unread", case_close_unread, 0},
	{"poll_level", case_poll_level, 0},
	{"ppoll", case_ppoll, 0},
	{"select", case_select, 0},
	{"pselect", case_pselect, 0},
	{"epoll_level", case_epoll_level, 0},
	{"epoll_before_connect", case_epoll_before_connect, F_LISTEN},
	{"timeo_before_connect", case_timeo_before_connect, F_LISTEN},
	{"linger_abort", case_linger_abort, 0},
	{"sockopt_timeo", case_sockopt_timeo, 0},
	{"so_error_reset", case_so_error_reset, 0},
	{"poll_reset", case_poll_reset, 0},
	{"shutdown_rd", case_shutdown_rd, 0},
	{"epoll_et", case_epoll_et, 0},
	{"epoll_oneshot", case_epoll_oneshot, 0},
	{"epoll_rdhup", case_epoll_rdhup, 0},
	{"pollout_room", case_pollout_room, 0},
	{"poll_eof", case_poll_eof, 0},
	{"epoll_two_sets", case_epoll_two_sets, 0},
	{"mixed_fds", case_mixed_fds, 0},
	{"wait_timeout", case_wait_timeout, 0},
	{"wake_poll", case_wake_poll, 0},
	{"wake_epoll", case_wake_epoll, 0},
	{"wake_read", case_wake_read, 0},
	{"fork_parent_closes", case_fork_parent_closes, 0},
	{"fork_child_exits", case_fork_child_exits, 0},
	{"fork_server", case_fork_server, F_LISTEN},
	{"fork_bgsave", case_fork_bgsave, 0},
	{"exec_inherit", case_exec_inherit, 0},
	{"threads_duplex", case_threads_duplex, 0},
	{"sendfile", case_sendfile, 0},
	{"splice_to_file", case_splice_to_file, 0},
	{"splice_to_socket", case_splice_to_socket, 0},
	{"fd_leak", case_fd_leak, F_NOPAIR}, /* keep last */
};

/* ==== main ====================================================================== */

static void on_alarm(int sig)
{
	static const char a[] = "sem_test: watchdog: case ";
	static const char b[] = " still running after the time limit";
	ssize_t w = write(2, a, sizeof a - 1);
	w = write(2, g_case, strlen(g_case));
	w = write(2, b, sizeof b - 1);
	if (g_in_child)
		w = write(2, " (in a forked peer)", 19);
	w = write(2, "\n", 1);
	(void)w;
	if (!g_in_child) { /* _exit skips atexit: remove the temp dir here */
		unlink(g_sock_path);
		rmdir(g_dir);
	}
	_exit(1);
}

/* SIGTERM/SIGINT (ctest's timeout, ^C): remove the temp dir, then die by
 * the signal as usual. */
static void on_term(int sig)
{
	if (!g_in_child) {
		unlink(g_sock_path);
		rmdir(g_dir);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

static void set_signals(void)
{
	struct sigaction sa = {0};
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	/* SIGPIPE ignored, as in most servers; cases that need the default
	 * disposition set it in a forked peer */
	signal(SIGPIPE, SIG_IGN);
}

/* One case: fresh pair, run, clean up, one line on stdout; 1 if it failed. */
static int run_case(const struct test *t)
{
	struct ctx x = {.fam = g_fam, .lfd = -1, .c = -1, .s = -1};
	unsigned char before[MAX_FD];
	fd_snapshot(before);
	g_msg[0] = 0;
	g_case = t->name;
	alarm(g_timeout);
	int r = t->flags & F_NOPAIR ? 0 : pair_open(&x, t->flags);
	if (r == 0)
		r = t->fn(&x);
	alarm(0);
	if (g_nkids > 0) {
		kill_kids();
		if (r == 0)
			r = failf("a forked peer was left running");
	}
	pair_close(&x);
	set_signals();
	if (r < 0) {
		int n = fd_close_new(before);
		if (n)
			fprintf(stderr, "sem_test: %s: closed %d fds it left open\n",
				t->name, n);
	}
	if (r == CASE_PASS)
		printf("ok %s\n", t->name);
	else if (r == CASE_SKIP)
		printf("skip %s: %s\n", t->name, g_msg);
	else
		printf("FAIL %s: %s\n", t->name, g_msg[0] ? g_msg : "failed");
	fflush(stdout);
	return r < 0;
}

/* The exec case's new image: the inherited socket is fd; it says hello,
 * reads the reply and says bye. Exit 0 on success. */
static int exec_child(const char *arg)
{
	char *end;
	long fd = strtol(arg, &end, 10);
	g_case = "exec_inherit";
	g_in_child = 1;
	set_signals();
	alarm(g_timeout);
	int r = -1;
	if (*end || fd < 0 || fd >= MAX_FD)
		failf("bad fd argument '%s'", arg);
	else if (expect_cloexec((int)fd, 0, "inherited fd") == 0 &&
		 write_full((int)fd, "exec-hello", 10, "hello") == 0 &&
		 expect_bytes((int)fd, "exec-reply", 10, "reply") == 0 &&
		 write_full((int)fd, "exec-bye", 8, "bye") == 0)
		r = 0;
	if (r < 0)
		fprintf(stderr, "sem_test: exec child: %s\n", g_msg);
	return r < 0 ? 1 : 0;
}

static void cleanup_dir(void)
{
	if (g_dir[0])
		rmdir(g_dir);
}

/* 0 if the family works on loopback; else prints why and returns 77. */
static int family_usable(void)
{
	struct ctx x = {.fam = g_fam, .lfd = -1, .c = -1, .s = -1};
	char path[128];
	unix_path(path, sizeof path);
	int e = make_listener(g_fam, path, &x);
	if (e == 0) {
		int c = connect_to(&x);
		if (c < 0)
			e = -errno;
		else
			close(c);
	}
	pair_close(&x);
	if (e == 0)
		return 0;
	printf("skip: %s unusable: %s\n",
		g_fam == AF_INET6 ? "::1" : g_fam == AF_INET ? "127.0.0.1" : "AF_UNIX",
		errname(-e));
	return 77;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--exec-child"))
		return exec_child(argv[2]);
	const char *fam = argc >= 2 ? argv[1] : "";
	if (!strcmp(fam, "tcp4"))
		g_fam = AF_INET;
	else if (!strcmp(fam, "tcp6"))
		g_fam = AF_INET6;
	else if (!strcmp(fam, "unix"))
		g_fam = AF_UNIX;
	if (!g_fam || argc > 3) {
		fprintf(stderr, "usage: sem_test tcp4|tcp6|unix [case-name-substring]\n");
		return 2;
	}
	const char *filter = argc == 3 ? argv[2] : NULL;
	setvbuf(stdout, NULL, _IOLBF, 0);
	set_signals();

	ssize_t n = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
	if (n <= 0) {
		fprintf(stderr, "sem_test: readlink /proc/self/exe: %s\n",
			errname(errno));
		return 1;
	}
	g_self[n] = 0;
	const char *tmp = getenv("TMPDIR");
	snprintf(g_dir, sizeof g_dir, "%s/sem_test.XXXXXX",
		tmp && *tmp && strlen(tmp) < 40 ? tmp : "/tmp");
	if (!mkdtemp(g_dir)) {
		fprintf(stderr, "sem_test: mkdtemp %s: %s\n", g_dir, errname(errno));
		return 1;
	}
	unix_path(g_sock_path, sizeof g_sock_path);
	atexit(cleanup_dir);
	int rc = family_usable();
	if (rc)
		return rc;
	g_buf = malloc(GBUF_SIZE);
	if (!g_buf) {
		fprintf(stderr, "sem_test: out of memory\n");
		return 1;
	}
	fd_snapshot(g_fd_start);

	int failed = 0, ran = 0;
	for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
		if (filter && !strstr(tests[i].name, filter))
			continue;
		ran++;
		failed += run_case(&tests[i]);
	}
	free(g_buf);
	if (!ran) {
		fprintf(stderr, "sem_test: no case matches '%s'\n", filter);
		return 2;
	}
	return failed ? 1 : 0;
}
