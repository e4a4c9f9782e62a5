/* SPDX-License-Identifier: MIT */
/*
 * kv_daemon ZL-KVD SCHEME...: the zl-kvd program. One server listens on
 * one URL per scheme at once and serves one store through all of them;
 * `zl-kvd --stats URL` queries it while it runs; --stats-every prints
 * lines; SIGTERM stops it cleanly (exit 0, a final stats line) and its
 * clients then see the connection gone. Also: --help, usage errors.
 */
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>

#include "testlib.h"
#include "zipline_kv.h"

#define TMO 10000000

static const char *kvd;

/* Run kvd with args; its stdout into out (cap), stderr to errfile.
 * Returns the pid; *outfd (if not NULL) gets the read end of stdout
 * instead of waiting. */
static pid_t spawn(char *const *args, int *outfd, const char *errfile)
{
	int p[2];
	CHECK(!pipe(p));
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (!pid) {
		dup2(p[1], 1);
		int e = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (e >= 0)
			dup2(e, 2);
		close(p[0]);
		execv(kvd, args);
		_exit(127);
	}
	close(p[1]);
	*outfd = p[0];
	return pid;
}

/* Read what fd gives until EOF or until buf holds `lines` lines. */
static size_t read_lines(int fd, char *buf, size_t cap, int lines, int timeout_ms)
{
	size_t n = 0;
	int64_t end = tl_now_us() + timeout_ms * 1000ll;
	for (;;) {
		int have = 0;
		for (size_t i = 0; i < n; i++)
			have += buf[i] == '\n';
		if (lines && have >= lines)
			break;
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int left = (int)((end - tl_now_us()) / 1000);
		CHECKF(left > 0 && poll(&pfd, 1, left) == 1, "zl-kvd output timed out: \"%.*s\"",
		       (int)n, buf);
		ssize_t r = read(fd, buf + n, cap - 1 - n);
		CHECK(r >= 0);
		if (r == 0)
			break;
		n += (size_t)r;
	}
	buf[n] = 0;
	return n;
}

static int wait_exit(pid_t pid, int timeout_ms)
{
	int64_t end = tl_now_us() + timeout_ms * 1000ll;
	for (;;) {
		int st;
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (tl_now_us() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			FAIL("zl-kvd did not exit");
		}
		tl_sleep_us(10000);
	}
}

/* Run kvd to completion; returns its exit code, output in out. */
static int run(char *const *args, char *out, size_t cap)
{
	int fd;
	pid_t pid = spawn(args, &fd, "/dev/null");
	read_lines(fd, out, cap, 0, 20000);
	close(fd);
	return wait_exit(pid, 20000);
}

static char *slurp(const char *path)
{
	static char buf[65536];
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return buf;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: kv_daemon ZL-KVD SCHEME...\n");
		return T_EXIT_FAIL;
	}
	tl_watchdog(120);
	kvd = argv[1];
	int nurl = argc - 2;
	static char out[65536];

	CHECK_RC(run((char *[]){ (char *)kvd, "--help", NULL }, out, sizeof(out)), 0);
	CHECK(strstr(out, "--stats URL") && strstr(out, "--mem-limit"));
	CHECK_RC(run((char *[]){ (char *)kvd, NULL }, out, sizeof(out)), 2);
	CHECK_RC(run((char *[]){ (char *)kvd, "--listen", "tcp://127.0.0.1:0", "--mem-limit",
				 "12q", NULL }, out, sizeof(out)), 2);
	CHECK_RC(run((char *[]){ (char *)kvd, "--listen", "bogus://x", NULL }, out, sizeof(out)),
		 1);

	/* one server, every transport at once */
	char *args[32] = { (char *)kvd, "--mem-limit", "64m", "--stats-every", "1" };
	int na = 5;
	char urls[8][128], errfile[64];
	for (int i = 0; i < nurl; i++) {
		if (!strcmp(argv[2 + i], "tcp"))
			snprintf(urls[i], sizeof(urls[i]), "tcp://127.0.0.1:0");
		else if (!strcmp(argv[2 + i], "unix"))
			snprintf(urls[i], sizeof(urls[i]), "unix:///tmp/zlkvd-%d.sock", (int)getpid());
		else
			snprintf(urls[i], sizeof(urls[i]), "%s://zlkvd-%d", argv[2 + i], (int)getpid());
		args[na++] = "--listen";
		args[na++] = urls[i];
	}
	args[na] = NULL;
	snprintf(errfile, sizeof(errfile), "/tmp/zlkvd-%d.err", (int)getpid());
	int fd;
	pid_t pid = spawn(args, &fd, errfile);
	read_lines(fd, out, sizeof(out), nurl, 20000);
	/* "listening URL" per listener, with the bound port */
	zl_kv *kv[8];
	char *line = out;
	for (int i = 0; i < nurl; i++) {
		char *nl = strchr(line, '\n');
		CHECK(nl && !strncmp(line, "listening ", 10));
		*nl = 0;
		snprintf(urls[i], sizeof(urls[i]), "%s", line + 10);
		line = nl + 1;
		CHECK_OK(zl_kv_connect(urls[i], NULL, TMO, &kv[i]));
		char key[32];
		snprintf(key, sizeof(key), "via-%d", i);
		CHECK_OK(zl_kv_put(kv[i], key, strlen(key), urls[i], strlen(urls[i]), TMO));
	}
	for (int i = 0; i < nurl; i++) /* one store behind every URL */
		for (int j = 0; j < nurl; j++) {
			char key[32];
			snprintf(key, sizeof(key), "via-%d", j);
			const void *v;
			size_t vlen;
			CHECK_OK(zl_kv_get(kv[i], key, strlen(key), &v, &vlen, NULL, TMO));
			CHECK(vlen == strlen(urls[j]) && !memcmp(v, urls[j], vlen));
		}

	/* query it while it runs */
	for (int i = 0; i < nurl; i++) {
		CHECK_RC(run((char *[]){ (char *)kvd, "--stats", urls[i], NULL }, out, sizeof(out)), 0);
		char want[32];
		snprintf(want, sizeof(want), "keys=%d ", nurl);
		CHECKF(strstr(out, want) && strstr(out, " limit=67108864 ") && strstr(out, " clients="),
		       "stats: %s", out);
	}
	tl_sleep_us(1200000);
	CHECK(strstr(slurp(errfile), "zl-kvd: stats keys="));

	CHECK(!kill(pid, SIGTERM));
	CHECK_RC(wait_exit(pid, 10000), 0);
	char *err = slurp(errfile);
	CHECKF(strstr(err, "zl-kvd: exit keys="), "stderr: %s", err);
	for (int i = 0; i < nurl; i++) {
		int rc = zl_kv_get(kv[i], "via-0", 5, NULL, NULL, NULL, TMO);
		CHECKF(rc == -ECONNRESET || rc == -EPIPE, "after exit: %s", zl_strerror(rc));
		zl_kv_close(kv[i]);
	}
	close(fd);
	unlink(errfile);
	printf("kv_daemon: OK\n");
	return T_EXIT_PASS;
}
