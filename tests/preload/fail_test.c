/* SPDX-License-Identifier: MIT */
/*
 * fail_test.c - failures around the LD_PRELOAD library: a peer killed with
 * -9 in the middle of a transfer, garbage and strangers on the rendezvous
 * socket, half-done handshakes with rings the server must refuse, and peers
 * of another uid. After each case an honest preloaded client (a forked
 * child) connects to the preloaded server (another forked child), switches
 * and exchanges verified data within 1 s, and the debug log shows exactly
 * the switches the run expects: the honest ones, never a stranger's.
 *
 *   fail_test tcp4|tcp6|unix
 *       run by fail_run.sh: preloaded, ZL_LOG=debug, stderr a regular file
 *       (it reads the file to count "switched to shared memory" lines)
 *   fail_test --serve FAM TARGET REPFD CTLFD     (internal: a server, re-executed
 *                                                 with ZL_PRELOAD_ALLOW_OTHER_UID=1)
 *   fail_test --client FAM TARGET OUTFD          (internal: an honest client,
 *                                                 re-executed as nobody)
 *   fail_test --raw ACTION FAM TARGET OUTFD HOLD (internal: a raw peer,
 *                                                 re-executed WITHOUT the preload)
 *
 * The raw peers are this binary re-executed with the preload removed from
 * LD_PRELOAD (and they check /proc/self/maps): every call they make is the
 * kernel's. They talk to the rendezvous socket (an abstract SEQPACKET
 * socket "zipline-preload/tcp/PORT" or ".../unix/DEV-INO") directly.
 *
 * Cases; after each, an honest exchange with the server, and every
 * connection the server accepted in the case must have ended (the server
 * saw its client's close) within 2 s, without errors:
 *   kill-*        a preloaded peer of a connection is SIGKILLed while the
 *                 other is blocked writing (its ring full) or reading. The two
 *                 first exchange a byte each way, so that the connection
 *                 switched; an "idle" victim never touched its socket after
 *                 connect/accept, so it never switched (the switch needs a
 *                 call of each end after the other's proof). The blocked call returns within 5 s of the kill: a
 *                 read with 0 or ECONNRESET, a write with a short count and
 *                 then EPIPE or ECONNRESET. A surviving server then serves a
 *                 new client (switched).
 *   rendezvous-*  garbage and strangers' offers on the rendezvous socket, and
 *                 a flood of 300 connections; the strangers' rings are never
 *                 joined (the raw peer checks its memfds' joined word).
 *   half-*        a raw peer's correct hello, with true claims, for its own
 *                 real connection with rings the server must refuse: it stays
 *                 a kernel socket and the exchange over it is verified.
 *                 half-valid is the control: good rings are joined and, once
 *                 the raw peer says it proved the server, the answer is read
 *                 from the ring.
 *   uid-*         a client running as nobody against the root server: a kernel
 *                 socket, and the exchange verified, also when both sides set
 *                 ZL_PRELOAD_ALLOW_OTHER_UID=1 (the nobody client cannot
 *                 inspect the root server to prove it; as root only, skipped
 *                 otherwise).
 *   offers-expire offers that matched nothing are dropped after 10 s: the
 *                 server's fd count is back to what it was.
 *
 * stdout: "ok NAME (figures)", "FAIL NAME: why" or "skip NAME: why" per
 * case, then "switches: N", the number of switches the log must hold (the
 * runner checks it). Exit 0 pass, 1 fail, 77 skip (not preloaded, no debug
 * log file, family unavailable), 2 usage.
 * Bounds: a 60 s watchdog per case; an honest client has 1 s; a call blocked
 * on a killed peer must return within 5 s of the kill (its process is killed
 * after 10 s and the case fails); every pipe read and child wait is bounded.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"
#include "sem_util.h"
#pragma GCC diagnostic pop

#include <arpa/inet.h>
#include <dirent.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "preload.h" /* struct zp_shared, ZP_MAGIC, ZP_VERSION, ZP_HDR; wire.h */

#define CASE_S 60          /* watchdog per case */
#define HONEST_MS 1000     /* an honest connect + exchange */
#define RETURN_MS 5000     /* a blocked call after its peer was killed */
#define KILL_DELAY_MS 300  /* the victim is killed this long after all wait */
#define PENDING_S 10       /* the preload keeps an unmatched offer this long */
#define RING (64u << 10)   /* rings the raw peers offer */
#define REQ_LEN (16u << 10)
#define RESP_LEN (512u << 10) /* two default rings: the server waits for room */
#define XMAGIC 0x46545251u

/* The request of the exchange: the server reads req bytes of pattern seed,
 * answers resp bytes of pattern seed + 1, then waits for EOF. */
struct xreq {
	uint32_t magic, req, resp, seed;
};

struct target {
	int fam;
	uint16_t port;
	char path[108];
};

static int g_fam;
static const char *g_famname;
static char g_self[PATH_MAX];
static char g_dir[64];
static int g_logfd = -1;
static char g_note[512];       /* figures of a passing case, or a child's report */
static int g_expect;           /* switches asserted so far */
static const char *g_cur = "";
static pid_t g_watch[64];      /* children to kill when the watchdog fires */
static volatile sig_atomic_t g_nwatch;
static int g_kid_wfd = -1;     /* in a kid: its report pipe */
static uint32_t g_seed = 1;
static double g_honest_max, g_honest_sum;
static int g_honest_n;
static double g_last_offer;    /* when a raw peer last left an offer */

__attribute__((format(printf, 1, 2))) static void note(const char *fmt, ...)
{
	size_t n = strlen(g_note);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(g_note + n, sizeof g_note - n, fmt, ap);
	va_end(ap);
}

/* ---- processes --------------------------------------------------------- */

static void watch_add(pid_t p)
{
	if (g_nwatch < (int)(sizeof g_watch / sizeof g_watch[0]))
		g_watch[g_nwatch++] = p;
}

static void watch_del(pid_t p)
{
	for (int i = 0; i < g_nwatch; i++)
		if (g_watch[i] == p) {
			g_watch[i] = g_watch[g_nwatch - 1];
			g_nwatch--;
			return;
		}
}

static void on_alarm(int sig)
{
	(void)sig;
	char b[200];
	int n = snprintf(b, sizeof b, "FAIL %s: watchdog: no end after %d s\n", g_cur, CASE_S);
	ssize_t w = write(1, b, (size_t)n);
	(void)w;
	for (int i = 0; i < g_nwatch; i++)
		kill(g_watch[i], SIGKILL);
	_exit(1);
}

static const char *desc_status(int st)
{
	static char b[64];
	if (st < 0)
		snprintf(b, sizeof b, "no end in time (killed)");
	else if (WIFSIGNALED(st))
		snprintf(b, sizeof b, "killed by %s", signame(WTERMSIG(st)));
	else
		snprintf(b, sizeof b, "exit status %d", WEXITSTATUS(st));
	return b;
}

/* Waits up to ms for pid; its status, or -1 (then it is killed and reaped). */
static int wait_pid(pid_t pid, int ms)
{
	double end = now_ms() + ms;
	int st;
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return -1;
		if (now_ms() > end) {
			kill(pid, SIGKILL);
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			watch_del(pid);
			return -1;
		}
		msleep(2);
	}
	watch_del(pid);
	return st;
}

/* CPU time (clock ticks) a process has used, or -1. */
static long cpu_ticks(pid_t pid)
{
	char p[64], b[1024];
	snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, b, sizeof b - 1);
	close(fd);
	if (n <= 0)
		return -1;
	b[n] = 0;
	char *s = strrchr(b, ')');
	unsigned long ut, stt;
	if (!s || sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
			 &stt) != 2)
		return -1;
	return (long)(ut + stt);
}

/* "spinning (95% CPU)" or "asleep": what a process that does not return does. */
static const char *hang_kind(pid_t pid)
{
	static char b[64];
	long a = cpu_ticks(pid);
	msleep(500);
	long z = cpu_ticks(pid);
	if (a < 0 || z < 0)
		return "gone";
	double pct = (double)(z - a) * 100.0 / ((double)sysconf(_SC_CLK_TCK) * 0.5);
	snprintf(b, sizeof b, "%s, %.0f%% CPU", pct > 30 ? "spinning" : "asleep", pct);
	return b;
}

static int fds_of(pid_t pid)
{
	char p[64];
	snprintf(p, sizeof p, "/proc/%d/fd", (int)pid);
	int n = 0;
	DIR *d = opendir(p);
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Reads a line (without its newline) within ms: 0, or -1 (timeout, EOF). */
static int read_line(int fd, char *buf, size_t n, int ms)
{
	size_t k = 0;
	double end = now_ms() + ms;
	buf[0] = 0;
	while (k + 1 < n) {
		struct pollfd p = { fd, POLLIN, 0 };
		double left = end - now_ms();
		if (left <= 0)
			return -1;
		int r = poll(&p, 1, (int)left + 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		char c;
		ssize_t g = read(fd, &c, 1);
		if (g < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (g <= 0)
			return -1;
		if (c == '\n')
			break;
		buf[k++] = c;
		buf[k] = 0;
	}
	return 0;
}

/* Reads everything up to EOF within ms (a child's report). */
static void read_all(int fd, char *buf, size_t n, int ms)
{
	size_t k = 0;
	double end = now_ms() + ms;
	buf[0] = 0;
	while (k + 1 < n) {
		struct pollfd p = { fd, POLLIN, 0 };
		double left = end - now_ms();
		if (left <= 0 || poll(&p, 1, (int)left + 1) <= 0)
			break;
		ssize_t g = read(fd, buf + k, n - 1 - k);
		if (g <= 0)
			break;
		k += (size_t)g;
	}
	buf[k] = 0;
	while (k && buf[k - 1] == '\n')
		buf[--k] = 0;
}

/* A kid: a forked child running fn (preloaded like us), reporting its
 * g_note (passed) or g_msg (failed) through a pipe at its end. */
struct kid {
	pid_t pid;
	int rfd;
};

static int kid_start(struct kid *k, int (*fn)(void *), void *arg)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return failf("pipe2: %s", errname(errno));
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0)
		return failf("fork: %s", errname(errno));
	if (pid == 0) {
		close(p[0]);
		signal(SIGALRM, SIG_DFL);
		alarm(30);
		g_nwatch = 0;
		g_msg[0] = g_note[0] = 0;
		g_kid_wfd = p[1];
		int r = fn(arg);
		const char *m = r < 0 ? (g_msg[0] ? g_msg : "failed") : g_note;
		ssize_t w = write(p[1], m, strlen(m));
		(void)w;
		_exit(r == -77 ? 77 : r < 0 ? 1 : 0);
	}
	close(p[1]);
	k->pid = pid;
	k->rfd = p[0];
	watch_add(pid);
	return 0;
}

/* The kid's wait status (-1: no end within ms, killed) and its report. */
static int kid_end(struct kid *k, int ms, char *msg, size_t n)
{
	int st = wait_pid(k->pid, ms);
	read_all(k->rfd, msg, n, 100);
	close(k->rfd);
	return st;
}

/* ---- addresses and sockets ------------------------------------------------ */

static int fam_of(const char *s)
{
	return !strcmp(s, "tcp4") ? AF_INET : !strcmp(s, "tcp6") ? AF_INET6
					       : !strcmp(s, "unix") ? AF_UNIX : -1;
}

static socklen_t tsa(const struct target *t, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof *ss);
	if (t->fam == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a->sin_port = htons(t->port);
		return sizeof *a;
	}
	if (t->fam == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		a->sin6_port = htons(t->port);
		return sizeof *a;
	}
	struct sockaddr_un *a = (struct sockaddr_un *)ss;
	a->sun_family = AF_UNIX;
	snprintf(a->sun_path, sizeof a->sun_path, "%s", t->path);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(a->sun_path) + 1);
}

static const char *tstr(const struct target *t)
{
	static __thread char b[4][112];
	static __thread unsigned i;
	char *p = b[i++ % 4];
	if (t->fam == AF_UNIX)
		snprintf(p, sizeof b[0], "%s", t->path);
	else
		snprintf(p, sizeof b[0], "%u", t->port);
	return p;
}

static void tparse(struct target *t, int fam, const char *s)
{
	memset(t, 0, sizeof *t);
	t->fam = fam;
	if (fam == AF_UNIX)
		snprintf(t->path, sizeof t->path, "%.107s", s);
	else
		t->port = (uint16_t)atoi(s);
}

/* A listening socket (preloaded: it publishes its rendezvous): fd or -errno. */
static int listen_on(int fam, const char *path, struct target *t)
{
	memset(t, 0, sizeof *t);
	t->fam = fam;
	if (fam == AF_UNIX) {
		snprintf(t->path, sizeof t->path, "%.107s", path);
		unlink(path);
	}
	struct sockaddr_storage ss;
	socklen_t len = tsa(t, &ss);
	int fd = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int one = 1;
	if (fam != AF_UNIX)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 ||
	    (fam == AF_UNIX && chmod(path, 0777) < 0) || listen(fd, 128) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	if (fam != AF_UNIX) {
		len = sizeof ss;
		if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		t->port = fam == AF_INET ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
					 : ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	return fd;
}

/* A socket connected to t (blocking connect): fd or -errno. */
static int connect_to(const struct target *t)
{
	struct sockaddr_storage ss;
	socklen_t len = tsa(t, &ss);
	int fd = socket(t->fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

/* Waits up to ms for a connection on lfd: fd or -errno. */
static int accept_within(int lfd, int ms)
{
	int r = wait_ev(lfd, POLLIN, ms);
	if (r <= 0)
		return r == 0 ? -ETIMEDOUT : -errno;
	int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	return c < 0 ? -errno : c;
}

static bool preload_mapped(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[600];
	bool found = false;
	while (f && fgets(line, sizeof line, f))
		found |= strstr(line, "zipline-preload") != NULL;
	if (f)
		fclose(f);
	return found;
}

/* The log lines "... switched to shared memory" so far. */
static int switches(void)
{
	static char *buf;
	static size_t cap;
	struct stat st;
	if (fstat(g_logfd, &st) < 0)
		return -1;
	size_t n = (size_t)st.st_size;
	if (n + 1 > cap) {
		char *b = realloc(buf, n + 65536);
		if (!b)
			return -1;
		buf = b;
		cap = n + 65536;
	}
	size_t got = 0;
	while (got < n) {
		ssize_t r = pread(g_logfd, buf + got, n - got, (off_t)got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	static const char needle[] = "switched to shared memory";
	int c = 0;
	for (char *p = buf, *e = buf + got; (p = memmem(p, (size_t)(e - p), needle, sizeof needle - 1));
	     p += sizeof needle - 1)
		c++;
	return c;
}

/* ---- the exchange ------------------------------------------------------- */

/* The client's side, on a connected fd. */
static int exchange(int fd, uint32_t req, uint32_t resp, uint32_t seed)
{
	struct xreq h = { XMAGIC, req, resp, seed };
	TRY(write_full(fd, &h, sizeof h, "request header"));
	TRY(send_pattern(fd, req, seed, "request"));
	TRY(recv_pattern(fd, resp, seed + 1, "response"));
	return 0;
}

/* Bounded reads and writes that report instead of recording (the server's
 * threads): bytes done (short at EOF), or -errno. */
static ssize_t rd_all(int fd, void *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		int ev = wait_ev(fd, POLLIN, IO_WAIT_MS);
		if (ev == 0)
			return -ETIMEDOUT;
		if (ev < 0)
			return -errno;
		ssize_t r = read(fd, (char *)buf + got, n - got);
		if (r == 0)
			break;
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		got += (size_t)r;
	}
	return (ssize_t)got;
}

static ssize_t wr_all(int fd, const void *buf, size_t n)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = send(fd, (const char *)buf + done, n - done, MSG_NOSIGNAL);
		if (r > 0) {
			done += (size_t)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN) {
			if (wait_ev(fd, POLLOUT, IO_WAIT_MS) <= 0)
				return -ETIMEDOUT;
			continue;
		}
		return r < 0 ? -errno : -EIO;
	}
	return (ssize_t)done;
}

enum { H_SERVED, H_SHORT, H_BAD, H_ERR };

/* The server's side of one connection. */
static int handle(int fd, char *why, size_t wn)
{
	struct xreq h;
	uint8_t *buf = malloc(65536);
	int rc = H_SERVED;
	ssize_t r = buf ? rd_all(fd, &h, sizeof h) : -ENOMEM;
	why[0] = 0;
	if (r != (ssize_t)sizeof h) {
		snprintf(why, wn, "request header: %s", r < 0 ? errname((int)-r) : "EOF");
		rc = r < 0 ? H_ERR : H_SHORT;
		goto out;
	}
	if (h.magic != XMAGIC || h.req > (64u << 20) || h.resp > (64u << 20)) {
		snprintf(why, wn, "request header: magic 0x%x req %u resp %u", h.magic, h.req, h.resp);
		rc = H_BAD;
		goto out;
	}
	for (uint64_t off = 0; off < h.req;) {
		size_t n = h.req - off < 65536 ? (size_t)(h.req - off) : 65536;
		r = rd_all(fd, buf, n);
		if (r != (ssize_t)n) {
			snprintf(why, wn, "request at %llu: %s", (unsigned long long)off,
				 r < 0 ? errname((int)-r) : "EOF");
			rc = r < 0 ? H_ERR : H_SHORT;
			goto out;
		}
		for (size_t i = 0; i < n; i++)
			if (buf[i] != pat(h.seed, off + i)) {
				snprintf(why, wn, "request byte %llu is 0x%02x, want 0x%02x (WRONG DATA)",
					 (unsigned long long)(off + i), buf[i], pat(h.seed, off + i));
				rc = H_BAD;
				goto out;
			}
		off += n;
	}
	for (uint64_t off = 0; off < h.resp;) {
		size_t n = h.resp - off < 65536 ? (size_t)(h.resp - off) : 65536;
		fill_pat(buf, n, h.seed + 1, off);
		r = wr_all(fd, buf, n);
		if (r != (ssize_t)n) {
			snprintf(why, wn, "response at %llu: %s", (unsigned long long)off,
				 errname(r < 0 ? (int)-r : EIO));
			rc = H_ERR;
			goto out;
		}
		off += n;
	}
	r = rd_all(fd, buf, 1);
	if (r != 0) {
		snprintf(why, wn, "after the exchange: %s",
			 r < 0 ? errname((int)-r) : "a byte instead of EOF (WRONG DATA)");
		rc = r < 0 ? H_ERR : H_BAD;
	}
out:
	free(buf);
	return rc;
}

/* ---- the server ----------------------------------------------------------- */

struct sstats {
	unsigned accepted, served, shorts, bad, errs, active;
};
static struct {
	_Atomic unsigned accepted, served, shorts, bad, errs, active;
} g_sv;

static void *conn_thread(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char why[256];
	double t0 = now_ms();
	int h = handle(fd, why, sizeof why);
	close(fd);
	if (h == H_SERVED)
		g_sv.served++;
	else if (h == H_SHORT)
		g_sv.shorts++;
	else if (h == H_BAD)
		g_sv.bad++;
	else
		g_sv.errs++;
	if (h == H_BAD || h == H_ERR)
		fprintf(stderr, "fail_test: server %d: fd %d, accepted %.0f ms ago: %s\n",
			(int)getpid(), fd, now_ms() - t0, why);
	g_sv.active--;
	return NULL;
}

/* Serves until ctl is closed, then writes its sstats to rep. */
static int serve_main(int fam, const char *path, int rep, int ctl)
{
	signal(SIGPIPE, SIG_IGN);
	signal(SIGALRM, SIG_DFL);
	struct target t;
	int lfd = listen_on(fam, path, &t);
	if (lfd < 0) {
		fprintf(stderr, "fail_test: server: listen: %s\n", errname(-lfd));
		return 2;
	}
	if (write(rep, &t.port, sizeof t.port) != (ssize_t)sizeof t.port)
		return 2;
	for (;;) {
		struct pollfd p[2] = { { lfd, POLLIN, 0 }, { ctl, POLLIN, 0 } };
		int n = poll(p, 2, 1000);
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0)
			continue;
		if (p[1].revents) { /* a byte: report; EOF: the end */
			char b;
			if (read(ctl, &b, 1) != 1)
				break;
			struct sstats st = { g_sv.accepted, g_sv.served, g_sv.shorts, g_sv.bad,
					     g_sv.errs, g_sv.active };
			if (write(rep, &st, sizeof st) != (ssize_t)sizeof st)
				break;
			continue;
		}
		if (!(p[0].revents & POLLIN))
			continue;
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			fprintf(stderr, "fail_test: server: accept: %s\n", errname(errno));
			g_sv.errs++;
			continue;
		}
		g_sv.accepted++;
		g_sv.active++;
		pthread_t th;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&th, &a, conn_thread, (void *)(intptr_t)c)) {
			g_sv.active--;
			g_sv.errs++;
			close(c);
		}
		pthread_attr_destroy(&a);
	}
	for (int i = 0; i < 800 && g_sv.active; i++)
		msleep(10);
	struct sstats st = { g_sv.accepted, g_sv.served, g_sv.shorts, g_sv.bad, g_sv.errs,
			     g_sv.active };
	ssize_t w = write(rep, &st, sizeof st);
	(void)w;
	close(lfd);
	if (fam == AF_UNIX)
		unlink(path);
	return 0;
}

struct srv {
	pid_t pid;
	int rep, ctl;
	struct target t;
};

/* A preloaded server (forked, or re-executed with ZL_PRELOAD_ALLOW_OTHER_UID=1). */
static int srv_start(struct srv *s, const char *name, bool allow_other)
{
	int rep[2], ctl[2];
	char path[128];
	snprintf(path, sizeof path, "%s/%s", g_dir, name);
	if (pipe2(rep, O_CLOEXEC) < 0 || pipe2(ctl, O_CLOEXEC) < 0)
		return failf("pipe2: %s", errname(errno));
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0)
		return failf("fork: %s", errname(errno));
	if (pid == 0) {
		close(rep[0]);
		close(ctl[1]);
		if (allow_other) {
			char a[16], b[16];
			fcntl(rep[1], F_SETFD, 0);
			fcntl(ctl[0], F_SETFD, 0);
			snprintf(a, sizeof a, "%d", rep[1]);
			snprintf(b, sizeof b, "%d", ctl[0]);
			setenv("ZL_PRELOAD_ALLOW_OTHER_UID", "1", 1);
			execl(g_self, g_self, "--serve", g_famname, path, a, b, (char *)NULL);
			_exit(127);
		}
		g_nwatch = 0;
		_exit(serve_main(g_fam, path, rep[1], ctl[0]));
	}
	close(rep[1]);
	close(ctl[0]);
	s->pid = pid;
	s->rep = rep[0];
	s->ctl = ctl[1];
	watch_add(pid);
	uint16_t port;
	struct pollfd p = { s->rep, POLLIN, 0 };
	if (poll(&p, 1, 10000) <= 0 || read(s->rep, &port, sizeof port) != (ssize_t)sizeof port) {
		kill(pid, SIGKILL);
		wait_pid(pid, 1000);
		return failf("the server did not start");
	}
	s->t.fam = g_fam;
	s->t.port = port;
	snprintf(s->t.path, sizeof s->t.path, "%.107s", path);
	return 0;
}

static int srv_stop(struct srv *s, struct sstats *st)
{
	close(s->ctl);
	memset(st, 0, sizeof *st);
	struct pollfd p = { s->rep, POLLIN, 0 };
	bool got = poll(&p, 1, 15000) > 0 && read(s->rep, st, sizeof *st) == (ssize_t)sizeof *st;
	close(s->rep);
	int w = wait_pid(s->pid, 5000);
	CHECK(got, "the server did not report its figures (%s)", desc_status(w));
	CHECK(w >= 0 && WIFEXITED(w) && WEXITSTATUS(w) == 0, "the server: %s", desc_status(w));
	return 0;
}

static int srv_query(struct srv *s, struct sstats *st)
{
	struct pollfd p = { s->rep, POLLIN, 0 };
	CHECK(write(s->ctl, "q", 1) == 1, "the server's control pipe: %s", errname(errno));
	CHECK(poll(&p, 1, 5000) > 0 && read(s->rep, st, sizeof *st) == (ssize_t)sizeof *st,
	      "the server does not answer");
	return 0;
}

static struct srv g_S;               /* the server every case ends with */
static unsigned g_s_accepted, g_s_served; /* what it must have done */
static int g_s_fds = -1;             /* its open fds after the first exchange */
static unsigned g_s_errs;            /* its errors before the running case */

/* Appends to the case's failure message (or starts it). */
__attribute__((format(printf, 1, 2))) static int addf(const char *fmt, ...)
{
	size_t n = strlen(g_msg);
	if (n && n + 3 < sizeof g_msg)
		strcpy(g_msg + n, "; "), n += 2;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(g_msg + n, sizeof g_msg - n, fmt, ap);
	va_end(ap);
	return CASE_FAIL;
}

/* After a case: every connection the server accepted ends (its client
 * closed it: the server must see EOF) within 2 s, without errors. */
static int settle(void)
{
	struct sstats st;
	double t0 = now_ms(), waited;
	do {
		if (srv_query(&g_S, &st) < 0)
			return CASE_FAIL;
		waited = now_ms() - t0;
		if (!st.active)
			break;
		msleep(20);
	} while (waited < IO_WAIT_MS + 2000);
	unsigned errs = st.errs - g_s_errs;
	g_s_errs = st.errs;
	if (st.active || waited > 2000)
		return addf("the server saw no EOF on %u connection%s of this case after %s "
			    "client closed it (waited %.0f ms: %u still open, %u timed out)",
			    st.active + errs, st.active + errs == 1 ? "" : "s",
			    st.active + errs == 1 ? "its" : "their", waited, st.active, errs);
	if (errs)
		return addf("the server had %u error%s in this case (see the log)", errs,
			    errs == 1 ? "" : "s");
	return 0;
}

/* ---- honest clients ------------------------------------------------------- */

struct hon {
	struct target t;
	uint32_t seed;
	bool as_nobody, exec_allow;
	uid_t uid;
	gid_t gid;
};

static int become(uid_t uid, gid_t gid)
{
	if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
		return failf("setuid(%u): %s", (unsigned)uid, errname(errno));
	return 0;
}

static int honest_fn(void *arg)
{
	struct hon *h = arg;
	if (h->as_nobody)
		TRY(become(h->uid, h->gid));
	if (h->exec_allow) { /* a new image, so that the preload reads the variable */
		char a[16];
		setenv("ZL_PRELOAD_ALLOW_OTHER_UID", "1", 1);
		fcntl(g_kid_wfd, F_SETFD, 0);
		snprintf(a, sizeof a, "%d", g_kid_wfd);
		execl(g_self, g_self, "--client", g_famname, tstr(&h->t), a, (char *)NULL);
		return failf("exec %s: %s", g_self, errname(errno));
	}
	double t0 = now_ms();
	int fd = connect_to(&h->t);
	CHECK(fd >= 0, "connect: %s", errname(-fd));
	TRY(exchange(fd, REQ_LEN, RESP_LEN, h->seed));
	close(fd);
	snprintf(g_note, sizeof g_note, "%.1f", now_ms() - t0);
	return 0;
}

/* The --client image: an honest client with the environment it was given. */
static int client_main(int fam, const char *target, int out)
{
	struct hon h = { .seed = 4242 };
	tparse(&h.t, fam, target);
	signal(SIGPIPE, SIG_IGN);
	alarm(20);
	int r;
	if (!preload_mapped()) {
		snprintf(g_msg, sizeof g_msg, "the preload is not loaded in uid %u", (unsigned)getuid());
		r = -77;
	} else {
		r = honest_fn(&h);
	}
	const char *m = r < 0 ? (g_msg[0] ? g_msg : "failed") : g_note;
	ssize_t w = write(out, m, strlen(m));
	(void)w;
	return r == -77 ? 77 : r < 0 ? 1 : 0;
}

/* An honest client against t; it must finish within HONEST_MS and add want
 * switches to the log. 1: skipped (the kid exited 77, reason in g_msg). */
static int honest_as(const struct target *t, int want, const char *what, struct hon *h)
{
	int before = switches();
	h->t = *t;
	h->seed = g_seed++;
	struct kid k;
	TRY(kid_start(&k, honest_fn, h));
	char msg[512];
	int st = kid_end(&k, 10000, msg, sizeof msg);
	if (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 77)
		return skipf("%s", msg);
	if (t == &g_S.t)
		g_s_accepted++;
	CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: honest client: %s", what,
	      msg[0] ? msg : desc_status(st));
	if (t == &g_S.t)
		g_s_served++;
	double ms = atof(msg);
	CHECK(ms <= HONEST_MS, "%s: the honest connect + exchange took %.0f ms (bound %d)", what, ms,
	      HONEST_MS);
	if (ms > g_honest_max)
		g_honest_max = ms;
	g_honest_sum += ms;
	g_honest_n++;
	int d = switches() - before;
	CHECK(d == want, "%s: %d switch%s in the log, want %d", what, d, d == 1 ? "" : "es", want);
	g_expect += want;
	return 0;
}

static int honest(const struct target *t, const char *what)
{
	struct hon h = { .seed = 0 };
	return honest_as(t, 1, what, &h);
}

/* ---- raw peers (re-executed without the preload) ---------------------------- */

static void strip_preload(void)
{
	const char *lp = getenv("LD_PRELOAD");
	if (!lp)
		return;
	char out[4096] = "", tok[1024];
	for (const char *p = lp; *p;) {
		size_t n = strcspn(p, " :");
		if (n && n < sizeof tok) {
			memcpy(tok, p, n);
			tok[n] = 0;
			if (!strstr(tok, "zipline-preload") && strlen(out) + n + 2 < sizeof out) {
				if (out[0])
					strcat(out, " ");
				strcat(out, tok);
			}
		}
		p += n;
		p += strspn(p, " :");
	}
	if (out[0])
		setenv("LD_PRELOAD", out, 1);
	else
		unsetenv("LD_PRELOAD");
}

struct raw {
	pid_t pid;
	int out, hold;
};

static int raw_start(struct raw *r, const char *action, const struct target *t)
{
	int o[2], h[2];
	if (pipe2(o, O_CLOEXEC) < 0 || pipe2(h, O_CLOEXEC) < 0)
		return failf("pipe2: %s", errname(errno));
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0)
		return failf("fork: %s", errname(errno));
	if (pid == 0) {
		char a[16], b[16];
		close(o[0]);
		close(h[1]);
		fcntl(o[1], F_SETFD, 0);
		fcntl(h[0], F_SETFD, 0);
		snprintf(a, sizeof a, "%d", o[1]);
		snprintf(b, sizeof b, "%d", h[0]);
		strip_preload();
		execl(g_self, g_self, "--raw", action, g_famname, tstr(t), a, b, (char *)NULL);
		_exit(127);
	}
	close(o[1]);
	close(h[0]);
	r->pid = pid;
	r->out = o[0];
	r->hold = h[1];
	watch_add(pid);
	return 0;
}

/* The raw peer's first report: it did what it was told ("ok ..."). */
static int raw_ready(struct raw *r, const char *what)
{
	char line[512];
	if (read_line(r->out, line, sizeof line, 15000) < 0) {
		int st = wait_pid(r->pid, 100);
		close(r->out);
		close(r->hold);
		r->pid = -1;
		return failf("%s: the raw peer did not report (%s)", what, desc_status(st));
	}
	if (strncmp(line, "ok", 2)) {
		kill(r->pid, SIGKILL);
		wait_pid(r->pid, 5000);
		close(r->out);
		close(r->hold);
		r->pid = -1;
		return failf("%s: raw peer: %s", what, line);
	}
	return 0;
}

/* Lets the raw peer go; its last report (its offers' rings untouched). */
static int raw_end(struct raw *r, const char *what)
{
	if (r->pid < 0)
		return CASE_FAIL;
	char line[512];
	close(r->hold);
	int got = read_line(r->out, line, sizeof line, 10000);
	int st = wait_pid(r->pid, 5000);
	close(r->out);
	CHECK(got == 0, "%s: the raw peer's last report is missing (%s)", what, desc_status(st));
	CHECK(!strncmp(line, "ok", 2), "%s: raw peer: %s", what, line);
	CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: raw peer: %s", what,
	      desc_status(st));
	return 0;
}

/* --- the raw peer's side --- */

static struct {
	int fd;
	uint32_t want; /* its joined word must stay (or become) this */
} g_mems[8];
static int g_nmems;

enum mem_kind { M_OK, M_SMALL, M_UNSEALED, M_NOSHRINK, M_BADMAGIC, M_JOINED, M_BADHDR, M_TMPFILE };

/* A memfd as a client would offer it, or spoiled in one way. */
static int make_mem(enum mem_kind kind, uint32_t ring)
{
	size_t size = kind == M_SMALL ? 4096 : ZP_HDR + 2 * (size_t)ring;
	int fd;
	if (kind == M_TMPFILE) {
		fd = open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		if (fd < 0)
			fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	} else {
		fd = memfd_create("zipline-preload",
				  MFD_CLOEXEC | (kind == M_UNSEALED ? 0 : MFD_ALLOW_SEALING));
	}
	if (fd < 0)
		return failf("memfd: %s", errname(errno));
	struct zp_shared h;
	memset(&h, 0, sizeof h);
	h.magic = kind == M_BADMAGIC ? 0x12345678u : ZP_MAGIC;
	h.version = ZP_VERSION;
	h.ring_size = ring;
	h.hdr_size = kind == M_BADHDR ? 64 : ZP_HDR;
	atomic_store(&h.joined, kind == M_JOINED);
	int seals = kind == M_NOSHRINK ? F_SEAL_GROW | F_SEAL_SEAL
					: F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
	if (ftruncate(fd, (off_t)size) < 0 || pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h ||
	    (kind != M_UNSEALED && kind != M_TMPFILE && fcntl(fd, F_ADD_SEALS, seals) < 0)) {
		int e = errno;
		close(fd);
		return failf("memfd setup: %s", errname(e));
	}
	if (g_nmems < (int)(sizeof g_mems / sizeof g_mems[0]))
		g_mems[g_nmems++].fd = fd, g_mems[g_nmems - 1].want = kind == M_JOINED;
	return fd;
}

static uint32_t mem_joined(int fd)
{
	uint32_t j = 0xffffffffu;
	if (pread(fd, &j, sizeof j, offsetof(struct zp_shared, joined)) != (ssize_t)sizeof j)
		return 0xfffffffeu;
	return j;
}

/* A connection to t's rendezvous socket: fd or CASE_FAIL. */
static int rdv_connect(const struct target *t)
{
	char key[100];
	if (t->fam == AF_UNIX) {
		struct stat st;
		if (stat(t->path, &st) < 0)
			return failf("stat %s: %s", t->path, errname(errno));
		snprintf(key, sizeof key, "unix/%llx-%llx", (unsigned long long)st.st_dev,
			 (unsigned long long)st.st_ino);
	} else {
		snprintf(key, sizeof key, "tcp/%u", t->port);
	}
	struct sockaddr_un u;
	memset(&u, 0, sizeof u);
	u.sun_family = AF_UNIX;
	int k = snprintf(u.sun_path + 1, sizeof u.sun_path - 1, "zipline-preload/%s", key);
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)k);
	int c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (c < 0)
		return failf("socket: %s", errname(errno));
	if (connect(c, (struct sockaddr *)&u, len) < 0) {
		int e = errno;
		close(c);
		return failf("connect to the rendezvous @zipline-preload/%s: %s", key, errname(e));
	}
	return c;
}

/* Claims about socket fd (its pid, fd numbers and inodes) for a message on
 * rendezvous connection c, as a client makes them. */
static struct zp_wire claims_of(int fd, int c, uint32_t ring)
{
	struct stat a, b;
	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	fstat(fd, &a);
	fstat(c, &b);
	return (struct zp_wire){ .magic = ZP_HELLO_MAGIC, .version = ZP_WIRE_VERSION,
				 .ring_size = ring, .pid = getpid(), .sock_fd = fd, .rdv_fd = c,
				 .sock_ino = a.st_ino, .rdv_ino = b.st_ino };
}

/* The first len bytes of hello w (the rest 0xa5) with fds. */
static int send_hello(int c, const struct zp_wire *w, size_t len, const int *fds, int nfds)
{
	unsigned char buf[64];
	memset(buf, 0xa5, sizeof buf);
	memcpy(buf, w, len < sizeof *w ? len : sizeof *w);
	union {
		char b[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec io = { buf, len };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1 };
	if (nfds) {
		memset(&u, 0, sizeof u);
		m.msg_control = u.b;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
	}
	ssize_t r = sendmsg(c, &m, MSG_NOSIGNAL);
	CHECK(r == (ssize_t)len, "sendmsg(hello): %s", rets(r, errno));
	return 0;
}

/* A well-formed hello with true claims about our socket fd, and the memfd. */
static int good_hello(int c, int fd, int mem)
{
	struct zp_wire w = claims_of(fd, c, RING);
	return send_hello(c, &w, sizeof w, &mem, 1);
}

/* A connected pair of family fam elsewhere (our own listener, not the
 * server's): *c the connecting end, *a the accepted one. */
static int elsewhere(int fam, int *c, int *a)
{
	struct target t;
	char path[108];
	snprintf(path, sizeof path, "/tmp/zl-fail-raw-%d", (int)getpid());
	int l = listen_on(fam, path, &t);
	CHECK(l >= 0, "a listener elsewhere: %s", errname(-l));
	*c = connect_to(&t);
	CHECK(*c >= 0, "connect elsewhere: %s", errname(-*c));
	*a = accept_within(l, 5000);
	CHECK(*a >= 0, "accept elsewhere: %s", errname(-*a));
	close(l);
	if (fam == AF_UNIX)
		unlink(path);
	return 0;
}

/* Garbage on the rendezvous (no connection to the server itself). */
static int act_garbage(const char *a, const struct target *t)
{
	int sp[2], pp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0 || pipe2(pp, O_CLOEXEC) < 0)
		return failf("socketpair/pipe: %s", errname(errno));
	int mem = make_mem(M_OK, RING);
	TRY(mem);
	if (!strcmp(a, "flood")) { /* 300 connections, held open */
		int n[3] = { 0, 0, 0 };
		for (int i = 0; i < 300; i++) {
			int c = rdv_connect(t);
			TRY(c);
			struct zp_wire w = claims_of(sp[0], c, RING);
			w.magic = 0x11111111u;
			if (i % 3 == 1)
				TRY(send_hello(c, &w, sizeof w, NULL, 0));
			else if (i % 3 == 2)
				TRY(good_hello(c, sp[0], mem));
			n[i % 3]++;
		}
		snprintf(g_note, sizeof g_note, "%d silent, %d wrong magic, %d stranger offers", n[0],
			 n[1], n[2]);
		return 0;
	}
	int c = rdv_connect(t);
	TRY(c);
	snprintf(g_note, sizeof g_note, "%s", a);
	struct zp_wire w = claims_of(sp[0], c, RING);
	if (!strcmp(a, "silent"))
		return 0;
	if (!strcmp(a, "byte"))
		return send(c, "Z", 1, MSG_NOSIGNAL) == 1 ? 0 : failf("send: %s", errname(errno));
	if (!strcmp(a, "short"))
		return send_hello(c, &w, 8, &mem, 1);
	if (!strcmp(a, "long"))
		return send_hello(c, &w, sizeof w + 8, &mem, 1);
	if (!strcmp(a, "magic")) {
		w.magic ^= 1;
		return send_hello(c, &w, sizeof w, &mem, 1);
	}
	if (!strcmp(a, "version")) {
		w.version++;
		return send_hello(c, &w, sizeof w, &mem, 1);
	}
	if (!strcmp(a, "fds0"))
		return send_hello(c, &w, sizeof w, NULL, 0);
	if (!strcmp(a, "fds2"))
		return send_hello(c, &w, sizeof w, (int[]){ mem, sp[0] }, 2);
	if (!strcmp(a, "fds3"))
		return send_hello(c, &w, sizeof w, (int[]){ mem, sp[0], pp[0] }, 3);
	if (!strcmp(a, "pipe"))
		return send_hello(c, &w, sizeof w, &pp[0], 1);
	if (!strcmp(a, "devnull")) {
		int dn = open("/dev/null", O_RDWR | O_CLOEXEC);
		return send_hello(c, &w, sizeof w, &dn, 1);
	}
	if (!strcmp(a, "mem-small"))
		return good_hello(c, sp[0], make_mem(M_SMALL, RING));
	if (!strcmp(a, "mem-unsealed"))
		return good_hello(c, sp[0], make_mem(M_UNSEALED, RING));
	if (!strcmp(a, "pair"))
		return good_hello(c, sp[0], mem);
	if (!strcmp(a, "unconnected"))
		return good_hello(c, socket(t->fam, SOCK_STREAM | SOCK_CLOEXEC, 0), mem);
	if (!strcmp(a, "elsewhere") || !strcmp(a, "elsewhere-accepted") || !strcmp(a, "cross")) {
		int fam = !strcmp(a, "cross") ? (t->fam == AF_UNIX ? AF_INET : AF_UNIX) : t->fam;
		int ec = -1, ea = -1;
		TRY(elsewhere(fam, &ec, &ea));
		return good_hello(c, !strcmp(a, "elsewhere-accepted") ? ea : ec, mem);
	}
	return failf("unknown action %s", a);
}

/* A correct hello, with true claims, for a real connection of our own to
 * the server, with rings it must refuse (or, "half-valid", join). */
static int act_half(const char *a, const struct target *t)
{
	static const struct {
		const char *name;
		enum mem_kind kind;
	} kinds[] = {
		{ "half-small", M_SMALL },	 { "half-unsealed", M_UNSEALED },
		{ "half-noshrink", M_NOSHRINK }, { "half-badmagic", M_BADMAGIC },
		{ "half-joined", M_JOINED },	 { "half-badhdr", M_BADHDR },
		{ "half-tmpfile", M_TMPFILE },	 { "half-npot", M_OK },
		{ "half-socket", M_OK },	 { "half-valid", M_OK },
	};
	int ki = -1;
	for (int i = 0; i < (int)(sizeof kinds / sizeof kinds[0]); i++)
		if (!strcmp(a, kinds[i].name))
			ki = i;
	CHECK(ki >= 0, "unknown action %s", a);
	bool control = !strcmp(a, "half-valid"), sock = !strcmp(a, "half-socket");
	uint32_t ring = !strcmp(a, "half-npot") ? 12288 : RING;
	int s = socket(t->fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(s >= 0, "socket: %s", errname(errno));
	int c = rdv_connect(t);
	TRY(c);
	int mem = make_mem(kinds[ki].kind, ring);
	TRY(mem);
	if (control)
		g_mems[g_nmems - 1].want = 1;
	struct zp_wire w = claims_of(s, c, ring);
	TRY(send_hello(c, &w, sizeof w, sock ? &s : &mem, 1));
	/* c stays open: holding it is half of our proof */
	struct sockaddr_storage ss;
	socklen_t len = tsa(t, &ss);
	CHECK(connect(s, (struct sockaddr *)&ss, len) == 0, "connect: %s", errname(errno));
	uint32_t seed = 0x7700u + (uint32_t)ki;
	if (!control) {
		TRY(exchange(s, REQ_LEN, 256u << 10, seed));
		close(s);
		close(c);
		CHECK(mem_joined(mem) == (kinds[ki].kind == M_JOINED),
		      "the server joined the refused rings");
		snprintf(g_note, sizeof g_note, "kernel exchange verified");
		return 0;
	}
	/* The positive control: our sends never switch (our state stays 0, so
	 * the request on the kernel stream is valid); we say we proved the
	 * server (client_ok) before the request, so the server's answer comes
	 * in the ring from byte 0. We read the ring ourselves. */
	size_t mlen = ZP_HDR + 2 * (size_t)ring;
	struct zp_shared *sh = mmap(NULL, mlen, PROT_READ | PROT_WRITE, MAP_SHARED, mem, 0);
	CHECK(sh != MAP_FAILED, "mmap: %s", errname(errno));
	double end = now_ms() + 5000;
	while (!atomic_load(&sh->joined) && now_ms() < end)
		msleep(1);
	CHECK(atomic_load(&sh->joined), "the server did not join our own connection");
	atomic_store(&sh->client_ok, 1);
	const uint32_t resp = 32u << 10;
	struct xreq h = { XMAGIC, REQ_LEN, resp, seed };
	TRY(write_full(s, &h, sizeof h, "request header"));
	TRY(send_pattern(s, REQ_LEN, seed, "request"));
	while (atomic_load(&sh->dir[1].tail) < resp && now_ms() < end)
		msleep(1);
	CHECK(atomic_load(&sh->dir[1].state) == 1 && atomic_load(&sh->dir[1].kbytes) == 0,
	      "the server's sends did not move to the ring from byte 0");
	uint64_t tail = atomic_load(&sh->dir[1].tail);
	CHECK(tail == resp, "the server's ring holds %llu bytes, want %u", (unsigned long long)tail,
	      resp);
	TRY(check_pat((uint8_t *)sh + ZP_HDR + ring, resp, seed + 1, 0, "response in the ring"));
	atomic_store(&sh->dir[1].head, tail);
	munmap(sh, mlen);
	close(s);
	close(c);
	snprintf(g_note, sizeof g_note, "switched: %u bytes read from the ring", resp);
	return 0;
}

static int raw_main(const char *action, int fam, const char *target, int out, int hold)
{
	struct target t;
	tparse(&t, fam, target);
	signal(SIGPIPE, SIG_IGN);
	alarm(90);
	int r;
	if (preload_mapped())
		r = failf("the raw peer runs with the preload mapped");
	else if (!strncmp(action, "half-", 5))
		r = act_half(action, &t);
	else
		r = act_garbage(action, &t);
	dprintf(out, "%s %s\n", r < 0 ? "FAIL" : "ok", r < 0 ? g_msg : g_note);
	if (r < 0)
		return 1;
	struct pollfd p = { hold, POLLIN, 0 };
	poll(&p, 1, 80000);
	for (int i = 0; i < g_nmems; i++) {
		uint32_t j = mem_joined(g_mems[i].fd);
		if (j != g_mems[i].want) {
			dprintf(out, "FAIL the rings offered as fd %d were joined (%u, want %u)\n",
				g_mems[i].fd, j, g_mems[i].want);
			return 1;
		}
	}
	dprintf(out, "ok\n");
	return 0;
}

/* ---- cases: garbage and half-done handshakes ------------------------------ */

static int garbage_case(const char *action)
{
	struct raw r;
	TRY(raw_start(&r, action, &g_S.t));
	int rc = raw_ready(&r, action);
	TRY(rc);
	char what[64];
	snprintf(what, sizeof what, "after %s", action);
	rc = honest(&g_S.t, what);
	if (rc < 0 && !strcmp(action, "flood")) {
		/* diagnose: how many more honest connections until one switches */
		char m[sizeof g_msg];
		snprintf(m, sizeof m, "%s", g_msg);
		int k = 0;
		for (; k < 10; k++) {
			g_msg[0] = 0;
			if (honest(&g_S.t, "after the flood, again") == 0)
				break;
		}
		g_msg[0] = 0;
		failf("%s (the next %d honest connection%s did not switch either)", m, k,
		      k == 1 ? "" : "s");
	}
	int rc2 = raw_end(&r, action);
	g_last_offer = now_ms();
	if (rc == 0 && rc2 == 0)
		note("%s", action);
	return rc < 0 ? rc : rc2;
}

static int half_case(const char *action)
{
	bool control = !strcmp(action, "half-valid");
	int before = switches();
	struct raw r;
	TRY(raw_start(&r, action, &g_S.t));
	int rc = raw_ready(&r, action);
	g_s_accepted++;
	TRY(rc);
	g_s_served++;
	rc = raw_end(&r, action);
	g_last_offer = now_ms();
	TRY(rc);
	/* the log counts preloaded clients' switches: the raw peer has none
	 * (half-valid's switch showed in the ring it read) */
	int d = switches() - before;
	CHECK(d == 0, "%s: the raw peer's own connection: %d switches in the log, want 0", action,
	      d);
	note("%s", control ? "switched, its rings used" : "kernel socket, data verified");
	return honest(&g_S.t, action);
}

/* ---- cases: kill -9 --------------------------------------------------------- */

struct kspec {
	const char *name;
	bool server_dies;   /* else the client dies */
	bool blocked_write; /* the survivor is blocked writing (else reading) */
	bool victim_idle;   /* the victim never touched its socket after connect/accept */
};

struct role {
	const struct kspec *k;
	bool server;
	struct target t;
	char path[128];
	int out; /* lines to the parent */
};

#define KDATA (100u << 10)
#define BIG (4u << 20)

/* The survivor's blocked call, then its report line. */
static int survive(int fd, const struct kspec *k, int out)
{
	if (!k->blocked_write) {
		if (!k->victim_idle) { /* what the victim sent before it stopped */
			size_t skip = k->server_dies ? 0 : sizeof(struct xreq);
			if (skip) {
				char h[sizeof(struct xreq)];
				TRY(read_full(fd, h, skip, "header"));
			}
			TRY(recv_pattern(fd, KDATA, 99, "data before the kill"));
		}
		dprintf(out, "blocking\n");
		char b[4096];
		ssize_t r = read(fd, b, sizeof b);
		int e = errno;
		double tret = now_ms();
		ssize_t r2 = read(fd, b, sizeof b);
		int e2 = errno;
		double tend = now_ms();
		dprintf(out, "result %zd %d %.3f %zd %d %.3f\n", r, r < 0 ? e : 0, tret, r2,
			r2 < 0 ? e2 : 0, tend);
		return 0;
	}
	uint8_t *big = malloc(BIG);
	CHECK(big, "out of memory");
	fill_pat(big, BIG, 99, 0);
	dprintf(out, "blocking\n");
	ssize_t r = send(fd, big, BIG, MSG_NOSIGNAL);
	int e = errno;
	double tret = now_ms();
	ssize_t r2 = 0;
	int e2 = 0, n = 0;
	while (n++ < 1000 && (r2 = send(fd, big, 65536, MSG_NOSIGNAL)) >= 0)
		;
	e2 = errno;
	double tend = now_ms();
	free(big);
	dprintf(out, "result %zd %d %.3f %zd %d %.3f\n", r, r < 0 ? e : 0, tret, r2, e2, tend);
	return 0;
}

static int victim(int fd, const struct kspec *k, int out)
{
	if (!k->victim_idle) {
		if (k->blocked_write) { /* the survivor writes: read some */
			TRY(recv_pattern(fd, k->server_dies ? 16u << 10 : KDATA, 99, "victim read"));
		} else { /* the survivor reads: send some */
			if (!k->server_dies) {
				struct xreq h = { XMAGIC, 1u << 20, 0, 99 };
				TRY(write_full(fd, &h, sizeof h, "header"));
			}
			TRY(send_pattern(fd, KDATA, 99, "victim write"));
		}
	}
	dprintf(out, "ready\n");
	for (;;)
		pause();
}

/* A byte each way and one more from the client: after it both ends have
 * made a call since the other's proof, so both directions switched. */
static int warm_up(int fd, bool server)
{
	char b;
	for (int i = 0; i < 3; i++) {
		if ((i == 1) == server) {
			TRY(write_full(fd, "abc" + i, 1, "warm-up"));
		} else {
			TRY(read_full(fd, &b, 1, "warm-up"));
			CHECK(b == "abc"[i], "warm-up: got 0x%02x, want '%c'", (uint8_t)b, "abc"[i]);
		}
	}
	return 0;
}

static int role_fn(void *arg)
{
	struct role *ro = arg;
	const struct kspec *k = ro->k;
	bool dies = ro->server == k->server_dies;
	signal(SIGPIPE, SIG_IGN);
	if (ro->server) {
		int l = listen_on(g_fam, ro->path, &ro->t);
		CHECK(l >= 0, "listen: %s", errname(-l));
		dprintf(ro->out, "target %s\n", tstr(&ro->t));
		int c = accept_within(l, 10000);
		CHECK(c >= 0, "accept: %s", errname(-c));
		if (!k->victim_idle)
			TRY(warm_up(c, true));
		if (dies)
			return victim(c, k, ro->out);
		TRY(survive(c, k, ro->out));
		close(c);
		/* and the server goes on: one more connection, served in full */
		c = accept_within(l, 10000);
		CHECK(c >= 0, "accept after the kill: %s", errname(-c));
		char why[256];
		int h = handle(c, why, sizeof why);
		CHECK(h == H_SERVED, "serving after the kill: %s", why);
		close(c);
		close(l);
		dprintf(ro->out, "served\n");
		return 0;
	}
	int c = connect_to(&ro->t);
	CHECK(c >= 0, "connect: %s", errname(-c));
	if (!k->victim_idle)
		TRY(warm_up(c, false));
	if (dies)
		return victim(c, k, ro->out);
	TRY(survive(c, k, ro->out));
	close(c);
	return 0;
}

struct rkid {
	struct kid kid;
	int out; /* its lines */
	struct role ro;
};

static int role_start(struct rkid *r, const struct kspec *k, bool server, const struct target *t,
		      const char *path)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return failf("pipe2: %s", errname(errno));
	r->ro = (struct role){ .k = k, .server = server, .out = p[1] };
	if (t)
		r->ro.t = *t;
	snprintf(r->ro.path, sizeof r->ro.path, "%s", path);
	int rc = kid_start(&r->kid, role_fn, &r->ro);
	close(p[1]);
	r->out = p[0];
	return rc;
}

/* Its next line, which must start with key. */
static int role_line(struct rkid *r, const char *key, char *line, size_t n, int ms,
		     const char *who)
{
	if (read_line(r->out, line, n, ms) == 0 && !strncmp(line, key, strlen(key)))
		return 0;
	char why[256];
	snprintf(why, sizeof why, "%s", line);
	if (read_line(r->out, line, n, 10) < 0 || !line[0]) { /* nothing more: the kid's end */
		int st = waitpid(r->kid.pid, NULL, WNOHANG) == r->kid.pid ? 0 : -1;
		char msg[300] = "";
		if (st == 0) {
			read_all(r->kid.rfd, msg, sizeof msg, 100);
			watch_del(r->kid.pid);
			r->kid.pid = -1;
		}
		return failf("%s: no \"%s\" line (got \"%s\")%s%s", who, key, why,
			     msg[0] ? ": " : "", msg);
	}
	return failf("%s: \"%s\" instead of \"%s\"", who, why, key);
}

static void role_kill(struct rkid *r)
{
	if (r->kid.pid > 0) {
		kill(r->kid.pid, SIGKILL);
		wait_pid(r->kid.pid, 5000);
		r->kid.pid = -1;
	}
	close(r->kid.rfd);
	close(r->out);
}

static int kill_case(const struct kspec *k)
{
	static int seq;
	char path[128], line[256];
	snprintf(path, sizeof path, "%s/k%d", g_dir, seq++);
	struct rkid srv, cli;
	int before = switches();
	TRY(role_start(&srv, k, true, NULL, path));
	struct rkid *sv = k->server_dies ? &cli : &srv, *vi = k->server_dies ? &srv : &cli;
	if (role_line(&srv, "target ", line, sizeof line, 10000, "server") < 0) {
		role_kill(&srv);
		return CASE_FAIL;
	}
	struct target t;
	tparse(&t, g_fam, line + 7);
	if (role_start(&cli, k, false, &t, path) < 0) {
		role_kill(&srv);
		return CASE_FAIL;
	}
	int rc = 0;
	if (role_line(sv, "blocking", line, sizeof line, 10000, "survivor") < 0 ||
	    role_line(vi, "ready", line, sizeof line, 10000, "victim") < 0)
		rc = CASE_FAIL;
	/* the client switches when it proves the server: in the warm-up;
	 * never when it is the idle victim; in its blocked call if that began
	 * after the idle server's accept (it cannot later: it sleeps until
	 * the kill, and a dead server proves nothing) */
	if (!rc)
		msleep(KILL_DELAY_MS);
	int d = switches() - before, want = !k->victim_idle;
	bool either = k->victim_idle && k->server_dies;
	if (!rc && d != want && !(either && d == 1))
		rc = failf("%d switches before the kill, want %d", d, want);
	if (!rc)
		g_expect += d;
	double tk = 0;
	if (!rc) {
		tk = now_ms();
		kill(vi->kid.pid, SIGKILL);
		int st = wait_pid(vi->kid.pid, 5000);
		vi->kid.pid = -1;
		if (st < 0 || !WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
			rc = failf("the victim: %s", desc_status(st));
	}
	if (!rc && read_line(sv->out, line, sizeof line, 10000) < 0) {
		const char *how = hang_kind(sv->kid.pid);
		rc = failf("the survivor's blocked %s did not return within 10 s of the kill (%s)",
			   k->blocked_write ? "write" : "read", how);
	}
	long r1 = 0, r2 = 0;
	int e1 = 0, e2 = 0;
	double tret = 0, tend = 0;
	if (!rc && sscanf(line, "result %ld %d %lf %ld %d %lf", &r1, &e1, &tret, &r2, &e2, &tend) != 6)
		rc = failf("survivor: %s", line);
	if (!rc) {
		if (tret < tk)
			rc = failf("the %s returned %.0f ms before the kill (%s): not blocked",
				   k->blocked_write ? "write" : "read", tk - tret, rets(r1, e1));
		else if (tend - tk > RETURN_MS)
			rc = failf("the blocked call ended %.0f ms after the kill (bound %d)", tend - tk,
				   RETURN_MS);
		else if (k->blocked_write && r1 == BIG)
			rc = failf("the write of %u bytes completed: the peer was dead", BIG);
		else if (k->blocked_write && (r2 != -1 || (e2 != EPIPE && e2 != ECONNRESET)))
			rc = failf("writing after the kill: %s, want EPIPE or ECONNRESET", rets(r2, e2));
		else if (!k->blocked_write && !(r1 == 0 || (r1 < 0 && e1 == ECONNRESET)))
			rc = failf("the blocked read: %s, want 0 or ECONNRESET", rets(r1, e1));
		else if (!k->blocked_write && r2 != 0)
			rc = failf("the read after: %s, want 0", rets(r2, e2));
	}
	if (!rc && !k->server_dies) { /* the server goes on */
		rc = honest(&t, "the surviving server");
		if (!rc && role_line(sv, "served", line, sizeof line, 10000, "survivor") < 0)
			rc = CASE_FAIL;
	}
	if (!rc) {
		int st = wait_pid(sv->kid.pid, 10000);
		char msg[300];
		read_all(sv->kid.rfd, msg, sizeof msg, 100);
		sv->kid.pid = -1;
		if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
			rc = failf("survivor: %s", msg[0] ? msg : desc_status(st));
	}
	role_kill(&srv);
	role_kill(&cli);
	if (!rc) /* and the kill left the persistent server alone */
		rc = honest(&g_S.t, "afterwards");
	if (!rc)
		note("returned %.0f ms after the kill: %s%s, then %s", tret - tk, rets(r1, e1),
		     k->blocked_write ? " bytes" : "", rets(r2, e2));
	return rc;
}

/* ---- cases: another uid ------------------------------------------------------- */

static struct srv g_S2; /* with ZL_PRELOAD_ALLOW_OTHER_UID=1 */
static uid_t g_nobody_uid;
static gid_t g_nobody_gid;

static int uid_case(bool server_allows, bool client_allows, int want)
{
	struct hon h = { .as_nobody = true, .exec_allow = client_allows, .uid = g_nobody_uid,
			 .gid = g_nobody_gid };
	const struct target *t = server_allows ? &g_S2.t : &g_S.t;
	int rc = honest_as(t, want, want ? "a nobody client, both allowing" : "a nobody client", &h);
	if (rc == 0)
		note("uid %u -> uid 0: %s", (unsigned)g_nobody_uid, want ? "switched" : "kernel socket");
	return rc;
}

/* ---- the run --------------------------------------------------------------- */

static int g_failed, g_passed, g_skipped;
static int c_stats(const void *a);

static void run_case(const char *name, int (*fn)(const void *), const void *arg)
{
	g_cur = name;
	g_msg[0] = g_note[0] = 0;
	fprintf(stderr, "fail_test: case %s\n", name);
	alarm(CASE_S);
	double t0 = now_ms();
	int r = fn(arg);
	if (g_S.pid > 0 && fn != c_stats) {
		int s = settle();
		r = r == CASE_SKIP && s == 0 ? r : r < 0 || s < 0 ? CASE_FAIL : 0;
	}
	alarm(0);
	if (r == CASE_SKIP) {
		printf("skip %s: %s\n", name, g_msg);
		g_skipped++;
	} else if (r < 0) {
		printf("FAIL %s: %s\n", name, g_msg[0] ? g_msg : "failed");
		g_failed++;
	} else {
		printf("ok %s (%s%s%.0f ms)\n", name, g_note, g_note[0] ? "; " : "", now_ms() - t0);
		g_passed++;
	}
	fflush(stdout);
}

static int c_garbage(const void *a) { return garbage_case(a); }
static int c_half(const void *a) { return half_case(a); }
static int c_kill(const void *a) { return kill_case(a); }
static int c_first(const void *a)
{
	(void)a;
	TRY(honest(&g_S.t, "the first honest client"));
	for (int i = 0; i < 30; i++) { /* its handler closes the connection soon */
		int n = fds_of(g_S.pid);
		if (n >= 0 && (g_s_fds < 0 || n < g_s_fds))
			g_s_fds = n;
		msleep(10);
	}
	note("server fds %d", g_s_fds);
	return 0;
}

struct uspec {
	bool sa, ca;
	int want;
};
static int c_uid(const void *a)
{
	const struct uspec *u = a;
	if (geteuid() != 0)
		return skipf("not root: no other uid to be");
	if (!g_nobody_uid)
		return skipf("no user nobody");
	return uid_case(u->sa, u->ca, u->want);
}

/* Offers that matched nothing expire (10 s); then the server's fds are back. */
static int c_expiry(const void *a)
{
	(void)a;
	double wait = g_last_offer + PENDING_S * 1000 + 500 - now_ms();
	if (wait > 0)
		msleep((int)wait);
	TRY(honest(&g_S.t, "after the offers expired"));
	int n = -1;
	for (int i = 0; i < 300; i++) {
		n = fds_of(g_S.pid);
		if (n >= 0 && n <= g_s_fds)
			break;
		msleep(10);
	}
	CHECK(n >= 0 && n <= g_s_fds, "the server holds %d fds, %d after the first exchange", n,
	      g_s_fds);
	note("server fds %d", n);
	return 0;
}

static int c_stats(const void *a)
{
	(void)a;
	struct sstats st;
	TRY(srv_stop(&g_S, &st));
	g_S.pid = -1;
	note("accepted %u, served %u, short %u, bad %u, errors %u", st.accepted, st.served, st.shorts,
	     st.bad, st.errs);
	CHECK(!st.bad, "the server saw wrong data %u times", st.bad);
	CHECK(st.errs == g_s_errs, "the server had %u errors after the last case", st.errs - g_s_errs);
	/* a connection that got no EOF was reported by its case, counted as an error */
	CHECK(st.accepted == g_s_accepted && st.served + st.errs == g_s_served,
	      "the server accepted %u and served %u (+%u errors), want %u and %u", st.accepted,
	      st.served, st.errs, g_s_accepted, g_s_served);
	return 0;
}

static const struct kspec g_kills[] = {
	{ "kill-client/server-writing", false, true, false },
	{ "kill-idle-client/server-writing", false, true, true },
	{ "kill-client/server-reading", false, false, false },
	{ "kill-idle-client/server-reading", false, false, true },
	{ "kill-server/client-reading", true, false, false },
	{ "kill-idle-server/client-reading", true, false, true },
	{ "kill-server/client-writing", true, true, false },
	{ "kill-idle-server/client-writing", true, true, true },
};

static const char *const g_garbage[] = {
	"silent", "byte", "short", "long", "magic", "version", "fds0", "fds2", "fds3",
	"pipe", "devnull", "mem-small", "mem-unsealed", "pair", "unconnected",
	"elsewhere", "elsewhere-accepted", "cross", "flood",
};

static const char *const g_half[] = {
	"half-small", "half-unsealed", "half-noshrink", "half-badmagic", "half-joined",
	"half-badhdr", "half-tmpfile", "half-npot", "half-socket", "half-valid",
};

static void cleanup_dir(void)
{
	if (!g_dir[0])
		return;
	DIR *d = opendir(g_dir);
	char p[PATH_MAX];
	for (struct dirent *e; d && (e = readdir(d));)
		if (e->d_name[0] != '.') {
			snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
			unlink(p);
		}
	if (d)
		closedir(d);
	rmdir(g_dir);
}

int main(int argc, char **argv)
{
	ssize_t sl = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
	if (sl <= 0) {
		perror("fail_test: readlink /proc/self/exe");
		return 2;
	}
	g_self[sl] = 0;
	if (argc == 7 && !strcmp(argv[1], "--raw"))
		return raw_main(argv[2], fam_of(argv[3]), argv[4], atoi(argv[5]), atoi(argv[6]));
	if (argc == 6 && !strcmp(argv[1], "--serve"))
		return serve_main(fam_of(argv[2]), argv[3], atoi(argv[4]), atoi(argv[5]));
	if (argc == 5 && !strcmp(argv[1], "--client"))
		return client_main(fam_of(argv[2]), argv[3], atoi(argv[4]));
	if (argc != 2 || fam_of(argv[1]) < 0) {
		fprintf(stderr, "usage: fail_test tcp4|tcp6|unix (run by fail_run.sh)\n");
		return 2;
	}
	g_famname = argv[1];
	g_fam = fam_of(argv[1]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = { .sa_handler = on_alarm };
	sigaction(SIGALRM, &sa, NULL);

	const char *lv = getenv("ZL_LOG");
	struct stat st;
	if (!preload_mapped()) {
		printf("skip: not running with libzipline-preload (use fail_run.sh or zl-run)\n");
		return 77;
	}
	if (!lv || strcmp(lv, "debug") || fstat(2, &st) < 0 || !S_ISREG(st.st_mode)) {
		printf("skip: needs ZL_LOG=debug and stderr to a file (it counts the switches there)\n");
		return 77;
	}
	g_logfd = open("/proc/self/fd/2", O_RDONLY | O_CLOEXEC);
	if (g_logfd < 0) {
		printf("skip: cannot read back stderr: %s\n", strerror(errno));
		return 77;
	}
	int probe = socket(g_fam, SOCK_STREAM, 0);
	if (probe < 0) {
		printf("skip: no %s sockets: %s\n", g_famname, strerror(errno));
		return 77;
	}
	close(probe);
	if (g_fam == AF_INET6) {
		struct target t6;
		int l = listen_on(AF_INET6, NULL, &t6);
		if (l < 0) {
			printf("skip: no IPv6 loopback: %s\n", strerror(-l));
			return 77;
		}
		close(l);
	}
	snprintf(g_dir, sizeof g_dir, "/tmp/zl-fail-XXXXXX");
	if (!mkdtemp(g_dir) || chmod(g_dir, 0755) < 0) {
		perror("fail_test: mkdtemp");
		return 1;
	}
	struct passwd *pw = getpwnam("nobody");
	if (pw && pw->pw_uid != 0) {
		g_nobody_uid = pw->pw_uid;
		g_nobody_gid = pw->pw_gid;
	}
	g_cur = "start";
	alarm(CASE_S);
	if (srv_start(&g_S, "srv", false) < 0) {
		printf("FAIL start: %s\n", g_msg);
		cleanup_dir();
		return 1;
	}
	alarm(0);
	run_case("first", c_first, NULL);

	for (size_t i = 0; i < sizeof g_kills / sizeof g_kills[0]; i++)
		run_case(g_kills[i].name, c_kill, &g_kills[i]);

	char names[64][64];
	int ni = 0;
	for (size_t i = 0; i < sizeof g_garbage / sizeof g_garbage[0]; i++, ni++) {
		snprintf(names[ni], sizeof names[ni], "rendezvous-%s", g_garbage[i]);
		run_case(names[ni], c_garbage, g_garbage[i]);
	}
	for (size_t i = 0; i < sizeof g_half / sizeof g_half[0]; i++)
		run_case(g_half[i], c_half, g_half[i]);

	/* Even with both allowing, a nobody client cannot read a root
	 * server's /proc/PID/fd and so cannot prove it: a kernel socket. */
	static const struct uspec us[] = {
		{ false, false, 0 }, { true, true, 0 }, { true, false, 0 }, { false, true, 0 },
	};
	bool s2 = geteuid() == 0 && g_nobody_uid;
	g_msg[0] = 0;
	if (s2 && srv_start(&g_S2, "srv2", true) < 0) {
		printf("FAIL uid: the second server: %s\n", g_msg);
		g_failed++;
		s2 = false;
	} else {
		run_case("uid-other", c_uid, &us[0]);
		run_case("uid-other-allowed-both", c_uid, &us[1]);
		run_case("uid-other-allowed-server-only", c_uid, &us[2]);
		run_case("uid-other-allowed-client-only", c_uid, &us[3]);
		if (s2) {
			struct sstats ss;
			g_msg[0] = 0;
			if (srv_stop(&g_S2, &ss) < 0 || ss.bad || ss.errs) {
				printf("FAIL uid: the second server: %s (bad %u, errors %u)\n", g_msg,
				       ss.bad, ss.errs);
				g_failed++;
			}
		}
	}
	if (g_last_offer)
		run_case("offers-expire", c_expiry, NULL);
	run_case("server-figures", c_stats, NULL);
	for (int i = 0; i < g_nwatch; i++)
		kill(g_watch[i], SIGKILL);
	cleanup_dir();
	printf("honest exchanges: %d, %.1f ms mean, %.1f ms max (bound %d ms)\n", g_honest_n,
	       g_honest_n ? g_honest_sum / g_honest_n : 0.0, g_honest_max, HONEST_MS);
	printf("switches: %d\n", g_expect);
	printf("%s: %s: %d ok, %d failed, %d skipped\n", g_failed ? "FAIL" : "PASS", g_famname,
	       g_passed, g_failed, g_skipped);
	return g_failed ? 1 : 0;
}
