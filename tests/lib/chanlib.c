/* SPDX-License-Identifier: MIT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "chanlib.h"
#include "sockutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

static atomic_int url_counter;

const char *tl_scheme_arg(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s SCHEME (shm, tcp, unix, ...)\n", argv[0]);
		tl_exit(T_EXIT_FAIL);
	}
	/* line-buffered output so a failing test's log is in order */
	setvbuf(stdout, NULL, _IOLBF, 0);
	return argv[1];
}

void tl_make_url(const char *scheme, const char *params, char *buf, size_t cap)
{
	int n = atomic_fetch_add(&url_counter, 1);
	const char *q = params && *params ? "?" : "";
	const char *p = params ? params : "";
	int k;
	/* ZL_TEST_URL_<scheme> overrides the default, e.g. for rdma
	 * ZL_TEST_URL_rdma=rdma://192.168.122.10:0 */
	char env[64];
	snprintf(env, sizeof(env), "ZL_TEST_URL_%s", scheme);
	const char *base = getenv(env);
	if (base) /* join with '&' when the base has parameters already */
		k = snprintf(buf, cap, "%s%s%s", base, *q && strchr(base, '?') ? "&" : q, p);
	else if (!strcmp(scheme, "tcp"))
		k = snprintf(buf, cap, "tcp://127.0.0.1:0%s%s", q, p);
	else if (!strcmp(scheme, "unix"))
		k = snprintf(buf, cap, "unix:///tmp/zltest-%d-%d.sock%s%s", (int)getpid(), n, q, p);
	else
		k = snprintf(buf, cap, "%s://zltest-%d-%d%s%s", scheme, (int)getpid(), n, q, p);
	CHECK(k > 0 && (size_t)k < cap);
}

void tl_conn_url(const char *scheme, const char *params, const char *lurl, char *conn_url,
		 size_t cap)
{
	/* the listener's URL may leave out our parameters: add them, and
	 * ZL_TEST_CONNECT_<scheme> (e.g. "dev=rxe1&order=split" for rdma) */
	char env[64], all[600] = "";
	snprintf(env, sizeof(env), "ZL_TEST_CONNECT_%s", scheme);
	const char *extra = getenv(env);
	snprintf(all, sizeof(all), "%s%s%s", params ? params : "",
		 params && *params && extra ? "&" : "", extra ? extra : "");
	if (*all && !strchr(lurl, '?'))
		CHECK(snprintf(conn_url, cap, "%s?%s", lurl, all) < (int)cap);
	else
		CHECK(snprintf(conn_url, cap, "%s", lurl) < (int)cap);
}

zl_listener *tl_listen(const char *scheme, const char *params, char *conn_url, size_t cap)
{
	char url[600];
	tl_make_url(scheme, params, url, sizeof(url));
	zl_listener *l = NULL;
	int rc = zl_listen(url, NULL, &l);
	if (rc == -EPROTONOSUPPORT)
		SKIP("transport %s is not built in (zl_listen: %s)", scheme, zl_strerror(rc));
	CHECKF(rc == 0, "zl_listen(%s) = %d (%s)", url, rc, zl_strerror(rc));
	char lurl[600];
	CHECK_OK(zl_listener_url(l, lurl, sizeof(lurl)));
	tl_conn_url(scheme, params, lurl, conn_url, cap);
	return l;
}

zl_channel *tl_accept(zl_listener *l, int64_t timeout_us)
{
	zl_channel *ch = NULL;
	CHECK_OK(zl_accept(l, timeout_us, &ch));
	CHECK(ch);
	return ch;
}

zl_channel *tl_connect(const char *url, int64_t timeout_us)
{
	zl_channel *ch = NULL;
	int rc = zl_connect(url, NULL, timeout_us, &ch);
	CHECKF(rc == 0, "zl_connect(%s) = %d (%s)", url, rc, zl_strerror(rc));
	CHECK(ch);
	return ch;
}

struct pair_arg {
	const char *url;
	zl_channel *ch;
	int rc;
};

static void *pair_connector(void *p)
{
	struct pair_arg *a = p;
	a->rc = zl_connect(a->url, NULL, 10000000, &a->ch);
	return NULL;
}

void tl_pair(const char *scheme, const char *params, zl_channel **server, zl_channel **client)
{
	char url[600];
	zl_listener *l = tl_listen(scheme, params, url, sizeof(url));
	struct pair_arg a = { .url = url };
	struct tl_thread t;
	tl_thread_start(&t, pair_connector, &a);
	int rc = zl_accept(l, 10000000, server);
	tl_thread_join(&t, 15000);
	CHECKF(rc == 0, "zl_accept = %d (%s)", rc, zl_strerror(rc));
	CHECKF(a.rc == 0, "zl_connect(%s) = %d (%s)", url, a.rc, zl_strerror(a.rc));
	*client = a.ch;
	zl_listener_close(l);
}

pid_t tl_fork(int (*fn)(void *), void *arg, unsigned watchdog_s)
{
	fflush(NULL);
	pid_t parent = getpid();
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(T_EXIT_FAIL);
		tl_watchdog(watchdog_s);
		int rc = fn(arg);
		tl_exit(rc);
	}
	return pid;
}

int tl_wait_child(pid_t pid, int timeout_ms)
{
	int64_t end = tl_now_us() + (int64_t)timeout_ms * 1000;
	for (;;) {
		int st;
		pid_t r = waitpid(pid, &st, WNOHANG);
		CHECK(r >= 0);
		if (r == pid) {
			if (WIFEXITED(st))
				return WEXITSTATUS(st);
			return 128 + WTERMSIG(st);
		}
		if (tl_now_us() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		tl_sleep_us(1000);
	}
}

void tl_reap_ok(pid_t pid, int timeout_ms)
{
	int rc = tl_wait_child(pid, timeout_ms);
	CHECKF(rc == 0, "peer process %d: %s %d", (int)pid,
	       rc < 0 ? "timed out" : rc > 128 ? "killed by signal" : "exit code",
	       rc > 128 ? rc - 128 : rc);
}

static void *thread_tramp(void *p)
{
	struct tl_thread *t = p;
	t->ret = t->fn(t->arg);
	__atomic_store_n(&t->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

void tl_thread_start(struct tl_thread *t, void *(*fn)(void *), void *arg)
{
	memset(t, 0, sizeof(*t));
	t->fn = fn;
	t->arg = arg;
	CHECK(pthread_create(&t->th, NULL, thread_tramp, t) == 0);
}

void *tl_thread_join(struct tl_thread *t, int timeout_ms)
{
	int64_t end = tl_now_us() + (int64_t)timeout_ms * 1000;
	while (!__atomic_load_n(&t->done, __ATOMIC_ACQUIRE)) {
		if (tl_now_us() > end)
			FAIL("thread did not finish within %d ms", timeout_ms);
		tl_sleep_us(1000);
	}
	CHECK(pthread_join(t->th, NULL) == 0);
	return t->ret;
}

void tl_pipe_init(struct tl_pipe *p)
{
	int fds[2];
	CHECK(pipe2(fds, O_CLOEXEC) == 0);
	p->rd = fds[0];
	p->wr = fds[1];
}

void tl_pipe_put(struct tl_pipe *p, const void *buf, size_t len)
{
	CHECK(write(p->wr, buf, len) == (ssize_t)len);
}

void tl_pipe_get(struct tl_pipe *p, void *buf, size_t len, int timeout_ms)
{
	int64_t end = tl_now_us() + (int64_t)timeout_ms * 1000;
	size_t got = 0;
	while (got < len) {
		int64_t left = (end - tl_now_us()) / 1000;
		if (left < 0)
			FAIL("pipe: nothing within %d ms", timeout_ms);
		struct pollfd pf = { .fd = p->rd, .events = POLLIN };
		int n = poll(&pf, 1, (int)left + 1);
		if (n < 0 && errno == EINTR)
			continue;
		CHECK(n >= 0);
		if (n == 0)
			continue;
		ssize_t r = read(p->rd, (char *)buf + got, len - got);
		CHECKF(r > 0, "pipe closed (peer exited?)");
		got += (size_t)r;
	}
}

long tl_rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return -1;
	char line[256];
	long kb = -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kb = strtol(line + 6, NULL, 10);
	fclose(f);
	return kb;
}

long tl_status_kb(pid_t pid, const char *field)
{
	char path[64], line[256];
	size_t n = strlen(field);
	snprintf(path, sizeof(path), pid ? "/proc/%d/status" : "/proc/self/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	long kb = -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, n) && line[n] == ':')
			kb = strtol(line + n + 1, NULL, 10);
	fclose(f);
	return kb;
}

bool tl_dropped(int sock, int timeout_ms)
{
	int64_t end = tl_now_us() + (int64_t)timeout_ms * 1000;
	for (;;) {
		char buf[4096];
		ssize_t r = recv(sock, buf, sizeof(buf), MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
			return true; /* EOF, or ECONNRESET */
		if (r > 0)
			continue;
		int64_t left = end - tl_now_us();
		if (left <= 0)
			return false;
		struct pollfd p = { .fd = sock, .events = POLLIN | POLLRDHUP };
		if (poll(&p, 1, (int)(left / 1000) + 1) > 0 &&
		    (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
			return true;
	}
}

/* (the process's status page, src/core/status.h, is one fd for the
 * process's life from its first channel on: not a leak; a second one is) */
int tl_fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	int n = 0, pages = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char path[300], link[128];
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t k = readlink(path, link, sizeof(link) - 1);
		link[k > 0 ? k : 0] = '\0';
		if (!strcmp(link, "/memfd:zipline-status (deleted)") && !pages++)
			continue;
		n++;
	}
	closedir(d);
	return n - 1; /* the DIR's own fd */
}

void tl_recv_expect(zl_channel *ch, void *buf, size_t cap, size_t len, uint64_t id,
		    int64_t timeout_us)
{
	size_t got = (size_t)-1;
	int rc = zl_recv(ch, buf, cap, &got, timeout_us);
	CHECKF(rc == 0, "zl_recv of message %" PRIu64 " (len %zu) = %d (%s)", id, len, rc,
	       zl_strerror(rc));
	CHECKF(got == len, "message %" PRIu64 ": length %zu, expected %zu", id, got, len);
	CHECK_PATTERN(buf, len, id);
}

void tl_send_pattern(zl_channel *ch, size_t len, uint64_t id, int64_t timeout_us)
{
	void *buf = malloc(len ? len : 1);
	CHECK(buf);
	tl_fill(buf, len, id);
	int rc = zl_send(ch, buf, len, timeout_us);
	CHECKF(rc == 0, "zl_send of message %" PRIu64 " (len %zu) = %d (%s)", id, len, rc,
	       zl_strerror(rc));
	free(buf);
}

#include "url.h"

int tl_raw_connect(const char *url)
{
	struct zl_url u;
	CHECK_OK(zl_url_parse(url, &u));
	int fd;
	if (!strcmp(u.scheme, "tcp") || !strcmp(u.scheme, "rdma")) {
		struct sockaddr_in a = { .sin_family = AF_INET };
		a.sin_port = htons((uint16_t)atoi(u.port));
		CHECK(inet_pton(AF_INET, u.host, &a.sin_addr) == 1);
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		CHECK(fd >= 0);
		CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
		return fd;
	}
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	socklen_t len;
	if (!strcmp(u.scheme, "shm")) {
		int k = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "zipline/%s", u.host);
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)k);
		fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	} else {
		CHECK(strlen(u.path) < sizeof(a.sun_path));
		strcpy(a.sun_path, u.path);
		len = sizeof(a);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	}
	CHECK(fd >= 0);
	CHECKF(connect(fd, (struct sockaddr *)&a, len) == 0, "raw connect to %s: %s", url,
	       strerror(errno));
	return fd;
}

void tl_dead_url(const char *scheme, char *buf, size_t cap)
{
	if (!strcmp(scheme, "tcp") || !strcmp(scheme, "rdma")) {
		/* a port that was free a moment ago (rdma sets up over TCP) */
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_in a = { .sin_family = AF_INET };
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		socklen_t al = sizeof(a);
		CHECK(fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof(a)));
		CHECK(!getsockname(fd, (struct sockaddr *)&a, &al));
		close(fd);
		snprintf(buf, cap, "%s://127.0.0.1:%u", scheme, ntohs(a.sin_port));
	} else if (!strcmp(scheme, "unix")) {
		snprintf(buf, cap, "unix:///tmp/zltest-%d-none.sock", (int)getpid());
	} else {
		snprintf(buf, cap, "%s://zltest-%d-none", scheme, (int)getpid());
	}
}

void tl_send_fds(int sock, const void *buf, size_t len, const int *fds, int nfds)
{
	int r = zl_send_fds(sock, buf, len, fds, nfds);
	CHECKF(r == 0, "zl_send_fds: %s", zl_strerror(r));
}
