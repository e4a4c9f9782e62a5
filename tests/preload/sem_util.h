/* SPDX-License-Identifier: MIT */
/*
 * sem_util.h - helpers for sem_test.c, the socket semantics suite (header
 * only, included once): failure messages with errno names, bounded I/O on
 * sockets, byte patterns, forked peers that report through their exit status
 * and a pipe, and the fd bookkeeping of the leak check.
 *
 * Conventions: a helper that fails records the reason with failf() and
 * returns CASE_FAIL (-1); the case returns it (TRY). Every wait is bounded
 * (IO_WAIT_MS per poll, and the per-case watchdog alarm above that).
 */
#ifndef ZL_SEM_UTIL_H
#define ZL_SEM_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define IO_WAIT_MS 5000 /* bound on one wait for data, room or EOF */
#define MAX_FD 1024     /* fds the leak check looks at */

enum { CASE_FAIL = -1, CASE_PASS = 0, CASE_SKIP = 1 };

/* ---- failure messages -------------------------------------------------- */

static char g_msg[512];     /* the first failure (or skip reason) of a case */
static pthread_mutex_t g_msg_lock = PTHREAD_MUTEX_INITIALIZER;

static int vrecord(int ret, const char *fmt, va_list ap)
{
	pthread_mutex_lock(&g_msg_lock);
	if (!g_msg[0])
		vsnprintf(g_msg, sizeof g_msg, fmt, ap);
	pthread_mutex_unlock(&g_msg_lock);
	return ret;
}

__attribute__((format(printf, 1, 2))) static int failf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vrecord(CASE_FAIL, fmt, ap);
	va_end(ap);
	return r;
}

__attribute__((format(printf, 1, 2))) static int skipf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vrecord(CASE_SKIP, fmt, ap);
	va_end(ap);
	return r;
}

static const char *errname(int e)
{
	switch (e) {
#define E_(n) \
	case n: \
		return #n;
		E_(EPERM) E_(ENOENT) E_(EINTR) E_(EIO) E_(EBADF) E_(ECHILD)
		E_(EAGAIN) E_(ENOMEM) E_(EACCES) E_(EFAULT) E_(EEXIST)
		E_(EINVAL) E_(ENFILE) E_(EMFILE) E_(ENOTTY) E_(ESPIPE)
		E_(EPIPE) E_(ENOSYS) E_(ENOTSOCK) E_(EDESTADDRREQ)
		E_(EMSGSIZE) E_(EPROTOTYPE) E_(ENOPROTOOPT)
		E_(EPROTONOSUPPORT) E_(EOPNOTSUPP) E_(EAFNOSUPPORT)
		E_(EADDRINUSE) E_(EADDRNOTAVAIL) E_(ENETUNREACH)
		E_(ECONNABORTED) E_(ECONNRESET) E_(ENOBUFS) E_(EISCONN)
		E_(ENOTCONN) E_(ESHUTDOWN) E_(ETIMEDOUT) E_(ECONNREFUSED)
		E_(EHOSTUNREACH) E_(EALREADY) E_(EINPROGRESS)
#undef E_
	}
	static __thread char b[4][24];
	static __thread unsigned i;
	char *p = b[i++ % 4];
	snprintf(p, sizeof b[0], "errno %d", e);
	return p;
}

static const char *signame(int s)
{
	switch (s) {
	case SIGPIPE: return "SIGPIPE";
	case SIGALRM: return "SIGALRM";
	case SIGKILL: return "SIGKILL";
	case SIGSEGV: return "SIGSEGV";
	case SIGABRT: return "SIGABRT";
	case SIGBUS: return "SIGBUS";
	case SIGUSR1: return "SIGUSR1";
	case SIGTERM: return "SIGTERM";
	}
	static __thread char b[24];
	snprintf(b, sizeof b, "signal %d", s);
	return b;
}

/* "5" or "-1 EAGAIN": what a call returned, for messages. */
static const char *rets(ssize_t r, int e)
{
	static __thread char b[4][40];
	static __thread unsigned i;
	char *p = b[i++ % 4];
	if (r < 0)
		snprintf(p, sizeof b[0], "%zd %s", r, errname(e));
	else
		snprintf(p, sizeof b[0], "%zd", r);
	return p;
}

/* poll/epoll event bits by name (the EPOLL values equal the POLL ones). */
static const char *evname(unsigned m)
{
	static __thread char b[4][96];
	static __thread unsigned i;
	static const struct { unsigned bit; const char *name; } t[] = {
		{POLLIN, "IN"}, {POLLPRI, "PRI"}, {POLLOUT, "OUT"},
		{POLLERR, "ERR"}, {POLLHUP, "HUP"}, {POLLNVAL, "NVAL"},
		{POLLRDHUP, "RDHUP"}, {POLLRDNORM, "RDNORM"},
		{POLLWRNORM, "WRNORM"},
	};
	char *p = b[i++ % 4];
	p[0] = 0;
	for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
		if (m & t[k].bit) {
			if (p[0])
				strcat(p, "|");
			strcat(p, t[k].name);
			m &= ~t[k].bit;
		}
	}
	if (m)
		snprintf(p + strlen(p), 24, "%s0x%x", p[0] ? "|" : "", m);
	if (!p[0])
		strcpy(p, "0");
	return p;
}

/* ---- assertions (return from the calling case or helper) ---------------- */

#define CHECK(cond, ...) \
	do { \
		if (!(cond)) \
			return failf(__VA_ARGS__); \
	} while (0)

#define TRY(expr) \
	do { \
		if ((expr) < 0) \
			return CASE_FAIL; \
	} while (0)

/* expr must return want. */
#define EXPECT_RET(expr, want) \
	do { \
		errno = 0; \
		ssize_t r_ = (ssize_t)(expr); \
		int e_ = errno; \
		ssize_t w_ = (ssize_t)(want); \
		if (r_ != w_) \
			return failf("%s = %s, want %zd", #expr, rets(r_, e_), w_); \
	} while (0)

/* expr must fail with errno err. */
#define EXPECT_ERR(expr, err) \
	do { \
		errno = 0; \
		ssize_t r_ = (ssize_t)(expr); \
		int e_ = errno; \
		if (r_ != -1 || e_ != (err)) \
			return failf("%s = %s, want -1 %s", #expr, rets(r_, e_), \
				errname(err)); \
	} while (0)

/* expr must succeed (>= 0). */
#define EXPECT_OK(expr) \
	do { \
		errno = 0; \
		ssize_t r_ = (ssize_t)(expr); \
		int e_ = errno; \
		if (r_ < 0) \
			return failf("%s: %s", #expr, errname(e_)); \
	} while (0)

/* ---- time --------------------------------------------------------------- */

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void msleep(int ms)
{
	struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&t, &t) < 0 && errno == EINTR)
		;
}

/* ---- byte patterns: position-dependent, so loss, duplication and
 * reordering all show --------------------------------------------------- */

static inline uint8_t pat(uint32_t seed, uint64_t i)
{
	uint64_t v = (i + ((uint64_t)seed << 40) + 1) * 0x9E3779B97F4A7C15ull;
	return (uint8_t)(v >> 56);
}

static void fill_pat(void *buf, size_t n, uint32_t seed, uint64_t off)
{
	uint8_t *p = buf;
	for (size_t i = 0; i < n; i++)
		p[i] = pat(seed, off + i);
}

/* Checks n bytes against the pattern from off; records a failure. */
static int check_pat(const void *buf, size_t n, uint32_t seed, uint64_t off,
	const char *what)
{
	const uint8_t *p = buf;
	for (size_t i = 0; i < n; i++)
		if (p[i] != pat(seed, off + i))
			return failf("%s: byte %llu is 0x%02x, want 0x%02x", what,
				(unsigned long long)(off + i), p[i], pat(seed, off + i));
	return 0;
}

/* ---- bounded I/O --------------------------------------------------------- */

/* Waits up to ms for one of ev (ERR/HUP/NVAL always count): revents, 0 on
 * timeout, -1 on error. */
static int wait_ev(int fd, short ev, int ms)
{
	struct pollfd p = {fd, ev, 0};
	double end = now_ms() + ms;
	for (;;) {
		double left = end - now_ms();
		int r = poll(&p, 1, left > 0 ? (int)left + 1 : 0);
		if (r > 0)
			return p.revents;
		if (r == 0)
			return 0;
		if (errno != EINTR)
			return -1;
	}
}

static int wait_in(int fd, const char *what)
{
	int r = wait_ev(fd, POLLIN, IO_WAIT_MS);
	if (r == 0)
		return failf("%s: nothing to read after %d ms", what, IO_WAIT_MS);
	if (r < 0)
		return failf("%s: poll: %s", what, errname(errno));
	return 0;
}

/* Writes all n bytes (waits for room on a nonblocking fd). */
static int write_full(int fd, const void *buf, size_t n, const char *what)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = write(fd, (const char *)buf + done, n - done);
		if (r > 0) {
			done += (size_t)r;
			continue;
		}
		if (r == 0)
			return failf("%s: write returned 0", what);
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			int ev = wait_ev(fd, POLLOUT, IO_WAIT_MS);
			if (ev == 0)
				return failf("%s: no room after %d ms", what, IO_WAIT_MS);
			if (ev < 0)
				return failf("%s: poll: %s", what, errname(errno));
			continue;
		}
		return failf("%s: write: %s", what, errname(errno));
	}
	return 0;
}

/* Reads exactly n bytes; EOF before that is a failure. */
static int read_full(int fd, void *buf, size_t n, const char *what)
{
	size_t done = 0;
	while (done < n) {
		TRY(wait_in(fd, what));
		ssize_t r = read(fd, (char *)buf + done, n - done);
		if (r > 0) {
			done += (size_t)r;
			continue;
		}
		if (r == 0)
			return failf("%s: EOF after %zu of %zu bytes", what, done, n);
		if (errno == EINTR || errno == EAGAIN)
			continue;
		return failf("%s: read: %s", what, errname(errno));
	}
	return 0;
}

/* Reads n bytes and compares them with want. */
static int expect_bytes(int fd, const void *want, size_t n, const char *what)
{
	char buf[256];
	if (n > sizeof buf)
		return failf("%s: expect_bytes: %zu bytes is too many", what, n);
	TRY(read_full(fd, buf, n, what));
	CHECK(!memcmp(buf, want, n), "%s: wrong bytes", what);
	return 0;
}

/* The next read returns 0 (EOF), within IO_WAIT_MS. */
static int expect_eof(int fd, const char *what)
{
	char b;
	TRY(wait_in(fd, what));
	ssize_t r = read(fd, &b, 1);
	int e = errno;
	CHECK(r == 0, "%s: read = %s, want 0 (EOF)", what, rets(r, e));
	return 0;
}

/* fd stays unreadable (no data, no EOF, no error) for ms. */
static int expect_quiet(int fd, int ms, const char *what)
{
	int r = wait_ev(fd, POLLIN, ms);
	CHECK(r == 0, "%s: fd became ready (%s)", what,
		r < 0 ? errname(errno) : evname((unsigned)r));
	return 0;
}

/* Sends total bytes of pattern seed, in chunks of varying size. */
static int send_pattern(int fd, uint64_t total, uint32_t seed, const char *what)
{
	enum { CH = 65536 };
	uint8_t *buf = malloc(CH);
	if (!buf)
		return failf("%s: out of memory", what);
	uint64_t off = 0;
	for (unsigned k = 0; off < total; k++) {
		size_t n = k % 4 == 3 ? 1 + (k * 7919u) % 4096 : CH;
		if (n > total - off)
			n = (size_t)(total - off);
		fill_pat(buf, n, seed, off);
		if (write_full(fd, buf, n, what) < 0) {
			free(buf);
			return CASE_FAIL;
		}
		off += n;
	}
	free(buf);
	return 0;
}

/* Receives total bytes and checks them against pattern seed. */
static int recv_pattern(int fd, uint64_t total, uint32_t seed, const char *what)
{
	enum { CH = 65536 };
	uint8_t *buf = malloc(CH);
	if (!buf)
		return failf("%s: out of memory", what);
	uint64_t off = 0;
	int rc = 0;
	for (unsigned k = 0; off < total && rc == 0; k++) {
		size_t n = k % 3 == 2 ? 1 + (k * 104729u) % 8192 : CH;
		if (n > total - off)
			n = (size_t)(total - off);
		if ((rc = wait_in(fd, what)) < 0)
			break;
		ssize_t r = read(fd, buf, n);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r < 0)
			rc = failf("%s: read at %llu: %s", what,
				(unsigned long long)off, errname(errno));
		else if (r == 0)
			rc = failf("%s: EOF after %llu of %llu bytes", what,
				(unsigned long long)off, (unsigned long long)total);
		else if ((rc = check_pat(buf, (size_t)r, seed, off, what)) == 0)
			off += (uint64_t)r;
	}
	free(buf);
	return rc;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* An int socket option (optlen must come back as sizeof(int)). */
static int getopt_int(int fd, int level, int opt, const char *name, int *out)
{
	socklen_t l = sizeof *out;
	*out = -12345;
	if (getsockopt(fd, level, opt, out, &l) < 0)
		return failf("getsockopt(%s): %s", name, errname(errno));
	CHECK(l == sizeof(int), "getsockopt(%s): optlen %u, want %zu", name,
		(unsigned)l, sizeof(int));
	return 0;
}

static int setopt_int(int fd, int level, int opt, const char *name, int v)
{
	if (setsockopt(fd, level, opt, &v, sizeof v) < 0)
		return failf("setsockopt(%s, %d): %s", name, v, errname(errno));
	return 0;
}

static int set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) < 0)
		return failf("fcntl(O_NONBLOCK): %s", errname(errno));
	return 0;
}

/* ---- the pair a case runs on ---------------------------------------------- */

struct ctx {
	int fam;   /* AF_INET, AF_INET6 or AF_UNIX */
	int lfd;   /* listening socket */
	int c;     /* the connecting end */
	int s;     /* the accepted end */
	struct sockaddr_storage la; /* the listener's address */
	socklen_t lalen;
};

static int is_tcp(const struct ctx *x) { return x->fam != AF_UNIX; }

/* Two addresses as a program compares them: address and port for IP, the
 * length and path for AF_UNIX (length 2, no path, for an unbound socket). */
static int same_addr(const void *a, socklen_t al, const void *b, socklen_t bl)
{
	const struct sockaddr *sa = a, *sb = b;
	if (al < sizeof(sa_family_t) || bl < sizeof(sa_family_t) ||
	    sa->sa_family != sb->sa_family)
		return 0;
	switch (sa->sa_family) {
	case AF_INET: {
		const struct sockaddr_in *x = a, *y = b;
		return al == sizeof *x && bl == sizeof *y &&
			x->sin_addr.s_addr == y->sin_addr.s_addr &&
			x->sin_port == y->sin_port;
	}
	case AF_INET6: {
		const struct sockaddr_in6 *x = a, *y = b;
		return al == sizeof *x && bl == sizeof *y &&
			!memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) &&
			x->sin6_port == y->sin6_port;
	}
	case AF_UNIX:
		return al == bl &&
			!memcmp(((const struct sockaddr_un *)a)->sun_path,
				((const struct sockaddr_un *)b)->sun_path,
				al - offsetof(struct sockaddr_un, sun_path));
	}
	return 0;
}

/* ---- forked peers ------------------------------------------------------------
 * A child runs fn and exits 0 (pass) or 1 (fail; the message goes back
 * through a pipe and to stderr). It has its own watchdog alarm. Modes:
 *   PEER_S  the child keeps s (closes c and the listener); the parent closes s
 *   PEER_C  the child keeps c (closes s and the listener); the parent closes c
 *   SHARE   both keep everything (the child closes what it wants itself)
 */
enum peer_mode { PEER_S, PEER_C, SHARE };
struct child {
	pid_t pid;
	int rfd; /* read end of the report pipe */
};
typedef int (*child_fn)(struct ctx *x, void *arg);

static const char *g_case = "";     /* the running case, for the watchdog */
static unsigned g_timeout = 10;     /* watchdog seconds of the running case */
static int g_in_child;              /* set in forked peers */
static pid_t g_kids[64];            /* children not yet reaped */
static int g_nkids;

static void kid_del(pid_t pid)
{
	for (int i = 0; i < g_nkids; i++)
		if (g_kids[i] == pid) {
			g_kids[i] = g_kids[--g_nkids];
			return;
		}
}

static int spawn(struct child *ch, struct ctx *x, enum peer_mode m, child_fn fn,
	void *arg)
{
	int p[2];
	ch->pid = -1;
	ch->rfd = -1;
	if (g_nkids == (int)(sizeof g_kids / sizeof g_kids[0]))
		return failf("too many children");
	if (pipe2(p, O_CLOEXEC) < 0)
		return failf("pipe2: %s", errname(errno));
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return failf("fork: %s", errname(errno));
	}
	if (pid == 0) {
		close(p[0]);
		g_in_child = 1;
		g_nkids = 0;
		g_msg[0] = 0;
		alarm(g_timeout);
		if (m == PEER_S) {
			close_fd(&x->c);
			close_fd(&x->lfd);
		} else if (m == PEER_C) {
			close_fd(&x->s);
			close_fd(&x->lfd);
		}
		int r = fn(x, arg);
		if (r < 0) {
			if (!g_msg[0])
				strcpy(g_msg, "failed");
			ssize_t w = write(p[1], g_msg, strlen(g_msg));
			(void)w;
			fprintf(stderr, "sem_test: %s: child: %s\n", g_case, g_msg);
		}
		_exit(r < 0 ? 1 : 0);
	}
	close(p[1]);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	if (m == PEER_S)
		close_fd(&x->s);
	else if (m == PEER_C)
		close_fd(&x->c);
	ch->pid = pid;
	ch->rfd = p[0];
	g_kids[g_nkids++] = pid;
	return 0;
}

/* Waits for the child (bounded by its own alarm); returns its wait status,
 * and in msg (if given) what it reported. */
static int reap_status(struct child *ch, int *status, char *msg, size_t msz)
{
	pid_t r;
	do
		r = waitpid(ch->pid, status, 0);
	while (r < 0 && errno == EINTR);
	kid_del(ch->pid);
	if (msg && msz) {
		ssize_t n = read(ch->rfd, msg, msz - 1);
		msg[n > 0 ? n : 0] = 0;
	}
	close_fd(&ch->rfd);
	if (r < 0)
		return failf("waitpid: %s", errname(errno));
	return 0;
}

/* Waits for the child; a child that did not exit 0 fails the case. */
static int reap(struct child *ch)
{
	int st;
	char m[sizeof g_msg];
	TRY(reap_status(ch, &st, m, sizeof m));
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (m[0])
		return failf("peer: %s", m);
	if (WIFSIGNALED(st))
		return failf("peer killed by %s", signame(WTERMSIG(st)));
	return failf("peer exited with status %d", WEXITSTATUS(st));
}

/* Kills and reaps children a failed case left behind. */
static void kill_kids(void)
{
	while (g_nkids > 0) {
		pid_t pid = g_kids[g_nkids - 1];
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		g_nkids--;
	}
}

/* ---- gates: one process lets another go on (a byte through a pipe) ------ */

struct gate {
	int p[2];
};

static int gate_open(struct gate *g)
{
	if (pipe2(g->p, O_CLOEXEC) < 0)
		return failf("pipe2: %s", errname(errno));
	return 0;
}

static int gate_pass(struct gate *g)
{
	if (write(g->p[1], "g", 1) != 1)
		return failf("gate: write: %s", errname(errno));
	return 0;
}

static int gate_wait(struct gate *g, const char *what)
{
	char b;
	return read_full(g->p[0], &b, 1, what);
}

static void gate_close(struct gate *g)
{
	close_fd(&g->p[0]);
	close_fd(&g->p[1]);
}

/* Sends tx bytes of pattern txseed while receiving rx bytes of pattern
 * rxseed on one fd, multiplexed with poll (the fd is made nonblocking for the
 * transfer and restored), so neither direction waits for the other. */
static int duplex_pattern(int fd, uint64_t tx, uint32_t txseed, uint64_t rx,
	uint32_t rxseed, const char *what)
{
	enum { CH = 65536 };
	uint8_t *wb = malloc(CH), *rb = malloc(CH);
	uint64_t txd = 0, rxd = 0;
	int rc = 0, fl = fcntl(fd, F_GETFL);
	if (!wb || !rb)
		rc = failf("%s: out of memory", what);
	else if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		rc = failf("%s: fcntl: %s", what, errname(errno));
	while (rc == 0 && (txd < tx || rxd < rx)) {
		struct pollfd p = {fd, 0, 0};
		if (rxd < rx)
			p.events |= POLLIN;
		if (txd < tx)
			p.events |= POLLOUT;
		int n = poll(&p, 1, IO_WAIT_MS);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = failf("%s: poll: %s", what, errname(errno));
			break;
		}
		if (n == 0) {
			rc = failf("%s: stalled at sent %llu/%llu, received %llu/%llu",
				what, (unsigned long long)txd, (unsigned long long)tx,
				(unsigned long long)rxd, (unsigned long long)rx);
			break;
		}
		if (rxd < rx && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
			size_t want = rx - rxd < CH ? (size_t)(rx - rxd) : CH;
			ssize_t r = read(fd, rb, want);
			if (r > 0) {
				rc = check_pat(rb, (size_t)r, rxseed, rxd, what);
				rxd += (uint64_t)r;
			} else if (r == 0) {
				rc = failf("%s: EOF after %llu of %llu bytes", what,
					(unsigned long long)rxd, (unsigned long long)rx);
			} else if (errno != EAGAIN && errno != EINTR) {
				rc = failf("%s: read: %s", what, errname(errno));
			}
		}
		if (rc == 0 && txd < tx && (p.revents & (POLLOUT | POLLERR))) {
			size_t want = tx - txd < CH ? (size_t)(tx - txd) : CH;
			fill_pat(wb, want, txseed, txd);
			ssize_t r = write(fd, wb, want);
			if (r > 0)
				txd += (uint64_t)r;
			else if (r == 0)
				rc = failf("%s: write returned 0", what);
			else if (errno != EAGAIN && errno != EINTR)
				rc = failf("%s: write: %s", what, errname(errno));
		}
	}
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl);
	free(wb);
	free(rb);
	return rc;
}

/* ---- the fd set, for the leak check ------------------------------------------ */

static void fd_snapshot(unsigned char *set)
{
	for (int i = 0; i < MAX_FD; i++)
		set[i] = fcntl(i, F_GETFD) >= 0;
}

/* Closes every fd that is open now but was not in set (after a failed case,
 * so one failure does not cascade); returns how many. */
static int fd_close_new(const unsigned char *set)
{
	int n = 0;
	for (int i = 0; i < MAX_FD; i++)
		if (!set[i] && fcntl(i, F_GETFD) >= 0) {
			close(i);
			n++;
		}
	return n;
}

#endif
