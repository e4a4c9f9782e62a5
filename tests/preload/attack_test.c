/* SPDX-License-Identifier: MIT */
/*
 * attack_test.c - a process that is not party to a connection attacks the
 * preload's rendezvous, as one of the same uid would (or of another uid,
 * or root against others), and a party lies in the shared memory. Each
 * attempt must fail and leave the honest connection working, with correct
 * data; at the end the preloaded server holds no more fds than before.
 *
 *   attack_test FAM ATTEMPTS MODE      run under zl-run (attack_run.sh),
 *                                      FAM tcp4|unix, MODE same|other|root
 *   attack_test --plain FAM PATH CTL REP (internal: the server without it)
 * The attacker is attack_peer (its own program, run without the preload).
 *
 * The attacks, each ATTEMPTS times:
 *   replay  (tcp4) the attacker offers its own connections from port X and
 *           resets them before the server accepts; then an honest client
 *           connects from X. The attacker's rings must never be joined nor
 *           its rendezvous connections answered.
 *   squat   the server does not run the preload; the attacker holds the
 *           rendezvous name, takes each client's rings and answers with the
 *           strongest claims it can make (the real server's pid and the fd
 *           that holds the connection), sets `joined` and writes a false
 *           reply into the client's ring. The client must read the real
 *           server's reply and never write into the rings.
 *   lie     a party (it really holds its connection) lies in the shared
 *           memory: kbytes beyond where its kernel stream ends, a tail more
 *           than a ring ahead, a head ahead of what was written. The server
 *           must end that connection within 3 s (the liar sees its end).
 * MODE same: the attacker runs as we do; other: as nobody against us
 * (root); root: as root against us running as nobody. Other uids fail at
 * the uid rule: the attacker gets no hello and no answer.
 * stdout: "ok ATTACK (figures)" or "FAIL ATTACK: why" per attack, then a
 * summary. Exit 0 pass, 1 fail, 77 skip (not preloaded, not root for
 * other/root, family unavailable), 2 usage. Every wait is bounded; a 300 s
 * watchdog ends it all.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "sem_util.h"
#pragma GCC diagnostic pop

#include <arpa/inet.h>
#include <dirent.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include "attack.h"

static int g_fam;
static const char *g_famname;
static char g_note[256];
static char g_self[PATH_MAX], g_peer[PATH_MAX], g_dir[64];

/* ---- the exchange, and servers ---------------------------------------------- */

static int listener(int fam, const char *path, uint16_t *port)
{
	struct sockaddr_storage ss;
	socklen_t len = addr_of(fam, 0, path, &ss);
	unlink(path);
	int fd = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 256) < 0 ||
	    (fam == AF_UNIX && chmod(path, 0777) < 0))
		return -1;
	len = sizeof ss;
	getsockname(fd, (struct sockaddr *)&ss, &len);
	*port = fam == AF_UNIX ? 0 : ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return fd;
}

/* A client's exchange on fd: a request of REQ bytes (seed), the answer of
 * RESP bytes (seed + 1). The server ends with the answer. */
static int client_exchange(int fd, uint32_t seed)
{
	uint32_t h[2] = { seed, REQ };
	TRY(write_full(fd, h, sizeof h, "request header"));
	TRY(send_pattern(fd, REQ, seed, "request"));
	TRY(recv_pattern(fd, RESP, seed + 1, "answer"));
	return 0;
}

/* The server's side: 1 served, 0 the peer ended or lied (EOF, reset), -1
 * wrong data or no end within 5 s. */
static int serve_one(int fd)
{
	uint32_t h[2];
	static __thread uint8_t buf[REQ];
	ssize_t r = 0;
	for (size_t got = 0; got < sizeof h; got += (size_t)r)
		if (wait_ev(fd, POLLIN, 5000) <= 0 || (r = read(fd, (char *)h + got, sizeof h - got)) <= 0)
			return r == 0 || errno == ECONNRESET ? 0 : -1;
	if (h[1] != REQ)
		return 0; /* a liar's header */
	for (size_t got = 0; got < REQ; got += (size_t)r)
		if (wait_ev(fd, POLLIN, 5000) <= 0 || (r = read(fd, buf + got, REQ - got)) <= 0)
			return r == 0 || errno == ECONNRESET ? 0 : -1;
	for (size_t i = 0; i < REQ; i++)
		if (buf[i] != pat(h[0], i))
			return -1;
	for (size_t off = 0; off < RESP;) {
		uint8_t o[4096];
		fill_pat(o, sizeof o, h[0] + 1, off);
		r = send(fd, o, sizeof o, MSG_NOSIGNAL);
		if (r < 0 && errno == EAGAIN && wait_ev(fd, POLLOUT, 5000) > 0)
			continue;
		if (r <= 0)
			return errno == ECONNRESET || errno == EPIPE ? 0 : -1;
		off += (size_t)r;
	}
	return 1;
}

/* ---- the preloaded server: a thread per connection ----------------------- */

static _Atomic unsigned g_served, g_ended, g_bad, g_active;

static void *conn_thread(void *arg)
{
	int fd = (int)(intptr_t)arg;
	int r = serve_one(fd);
	if (r > 0) { /* and the client's close */
		char b;
		r = wait_ev(fd, POLLIN, 5000) > 0 && read(fd, &b, 1) <= 0 ? 1 : -1;
	}
	close(fd);
	if (r > 0)
		g_served++;
	else if (r == 0)
		g_ended++;
	else
		g_bad++;
	g_active--;
	return NULL;
}

/* gate >= 0: one accept per byte read from it */
static void accept_loop(int lfd, int gate)
{
	for (;;) {
		char b;
		if (gate >= 0 && read(gate, &b, 1) != 1)
			return;
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return;
		}
		g_active++;
		pthread_t t;
		if (pthread_create(&t, NULL, conn_thread, (void *)(intptr_t)c)) {
			close(c);
			g_active--;
			continue;
		}
		pthread_detach(t);
	}
}

struct server {
	pid_t pid;
	int ctl, rep, gate; /* gate: a byte lets it accept one (-1: it accepts all) */
	uint16_t port;
	char path[108];
};

/* The server answers a byte on ctl with its counts (and its open fds). */
static void *report_thread(void *arg)
{
	int *p = arg;
	char b;
	while (read(p[0], &b, 1) == 1) {
		DIR *d = opendir("/proc/self/fd");
		unsigned n = 0;
		for (struct dirent *e; d && (e = readdir(d));)
			n += e->d_name[0] != '.';
		if (d)
			closedir(d);
		unsigned v[5] = { g_served, g_ended, g_bad, g_active, n - 1 };
		if (write(p[1], v, sizeof v) != (ssize_t)sizeof v)
			break;
	}
	_exit(0);
}

/* A server: preloaded (a fork of us), or plain (re-executed without it). */
static int server_start(struct server *s, const char *name, bool plain, bool gated)
{
	int ctl[2], rep[2], gate[2] = { -1, -1 };
	snprintf(s->path, sizeof s->path, "%s/%s", g_dir, name);
	if (pipe2(ctl, O_CLOEXEC) || pipe2(rep, O_CLOEXEC) || (gated && pipe2(gate, O_CLOEXEC)))
		return failf("pipe: %s", errname(errno));
	pid_t pid = fork();
	if (pid == 0) {
		close(ctl[1]);
		close(rep[0]);
		if (plain) {
			char a[16], b[16];
			fcntl(ctl[0], F_SETFD, 0);
			fcntl(rep[1], F_SETFD, 0);
			snprintf(a, sizeof a, "%d", ctl[0]);
			snprintf(b, sizeof b, "%d", rep[1]);
			unsetenv("LD_PRELOAD");
			execl(g_self, g_self, "--plain", g_famname, s->path, a, b, (char *)NULL);
			_exit(127);
		}
		uint16_t port;
		int l = listener(g_fam, s->path, &port);
		if (l < 0 || write(rep[1], &port, sizeof port) != sizeof port)
			_exit(2);
		int p[2] = { ctl[0], rep[1] };
		pthread_t t;
		pthread_create(&t, NULL, report_thread, p);
		if (gate[1] >= 0)
			close(gate[1]);
		accept_loop(l, gate[0]);
		_exit(0);
	}
	close(ctl[0]);
	close(rep[1]);
	if (gate[0] >= 0)
		close(gate[0]);
	s->pid = pid;
	s->ctl = ctl[1];
	s->rep = rep[0];
	s->gate = gate[1];
	CHECK(pid > 0 && wait_ev(s->rep, POLLIN, 10000) > 0 &&
	      read(s->rep, &s->port, sizeof s->port) == sizeof s->port, "server %s did not start",
	      name);
	return 0;
}

static int server_counts(struct server *s, unsigned v[5])
{
	CHECK(write(s->ctl, "q", 1) == 1 && wait_ev(s->rep, POLLIN, 5000) > 0 &&
	      read(s->rep, v, 5 * sizeof *v) == 5 * sizeof *v, "the server does not report");
	return 0;
}

static void server_stop(struct server *s)
{
	if (s->gate >= 0)
		close(s->gate);
	close(s->ctl);
	close(s->rep);
	kill(s->pid, SIGKILL);
	waitpid(s->pid, NULL, 0);
}

/* ---- the orchestration (preloaded: we are the honest client) --------------- */

struct attacker {
	pid_t pid;
	int in, out;
};

static int att_start(struct attacker *a, bool as_nobody)
{
	int in[2], out[2];
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		return failf("pipe: %s", errname(errno));
	struct passwd *pw = getpwnam("nobody");
	pid_t pid = fork();
	if (pid == 0) {
		char x[16], y[16];
		close(in[1]);
		close(out[0]);
		fcntl(in[0], F_SETFD, 0);
		fcntl(out[1], F_SETFD, 0);
		if (as_nobody && (setgroups(0, NULL) || setgid(pw->pw_gid) || setuid(pw->pw_uid)))
			_exit(126);
		snprintf(x, sizeof x, "%d", in[0]);
		snprintf(y, sizeof y, "%d", out[1]);
		unsetenv("LD_PRELOAD");
		execl(g_peer, g_peer, g_famname, x, y, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	a->pid = pid;
	a->in = in[1];
	a->out = out[0];
	return pid > 0 ? 0 : failf("fork: %s", errname(errno));
}

/* One command; its result (0/1) in *res, its figure in *ms. */
static int att_cmd(struct attacker *a, int *res, double *ms, const char *fmt, ...)
{
	char cmd[160], line[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	CHECK(dprintf(a->in, "%s\n", cmd) > 0, "the attacker is gone");
	size_t n = 0;
	while (n < sizeof line - 1 && wait_ev(a->out, POLLIN, 15000) > 0 &&
	       read(a->out, line + n, 1) == 1 && line[n] != '\n')
		n++;
	line[n] = 0;
	CHECK(n, "%s: the attacker did not answer", cmd);
	int r = 0;
	double m = 0;
	CHECK(sscanf(line, "ok %d %lf", &r, &m) == 2, "%s: attacker: %s", cmd, line);
	if (res)
		*res = r;
	if (ms)
		*ms = m;
	return 0;
}

static int switches(void)
{
	const char *p = getenv("ATTACK_LOG");
	FILE *f = p ? fopen(p, "re") : NULL;
	char line[700];
	int n = 0;
	while (f && fgets(line, sizeof line, f))
		n += strstr(line, "switched to shared memory") != NULL;
	if (f)
		fclose(f);
	return p ? n : -1;
}

static int connect_from(int fam, uint16_t port, const char *path, uint16_t from)
{
	struct sockaddr_storage ss, me;
	socklen_t len = addr_of(fam, port, path, &ss);
	int s = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	CHECK(s >= 0, "socket: %s", errname(errno));
	if (from) {
		addr_of(AF_INET, from, NULL, &me);
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		CHECK(!bind(s, (struct sockaddr *)&me, len), "bind :%u: %s", from, errname(errno));
	}
	if (connect(s, (struct sockaddr *)&ss, len)) {
		int e = errno;
		close(s);
		return failf("connect: %s", errname(e));
	}
	return s;
}

static uint16_t free_port(void)
{
	struct sockaddr_storage ss;
	socklen_t len = addr_of(AF_INET, 0, NULL, &ss);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	uint16_t p = 0;
	if (s >= 0 && !bind(s, (struct sockaddr *)&ss, len) && !getsockname(s, (struct sockaddr *)&ss, &len))
		p = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	close(s);
	return p;
}

/* An honest exchange with server sv (preloaded or not), from port from. */
static int honest(struct server *sv, uint16_t from, uint32_t seed)
{
	int s = connect_from(g_fam, sv->port, sv->path, from);
	TRY(s);
	if (sv->gate >= 0)
		CHECK(write(sv->gate, "a", 1) == 1, "gate: %s", errname(errno));
	int r = client_exchange(s, seed);
	close(s);
	return r;
}

static bool g_same; /* the attacker runs as we do */
static int g_attempts;

static int attack_replay(struct server *sv, struct attacker *a)
{
	TRY(att_cmd(a, NULL, NULL, "target %u %s %d", sv->port, sv->path, (int)sv->pid));
	for (int i = 0; i < g_attempts; i++) {
		uint16_t x = free_port();
		int made;
		CHECK(x, "no free port");
		TRY(att_cmd(a, &made, NULL, "replay %u 2", x));
		CHECK(made == 2 || !g_same, "the attacker made %d connections, want 2", made);
		/* the victim from the same port, queued behind the reset ones,
		 * with a forged hello for its socket ahead of its own */
		struct sockaddr_storage ss, me;
		socklen_t len = addr_of(AF_INET, sv->port, NULL, &ss);
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, forged;
		addr_of(AF_INET, x, NULL, &me);
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		CHECK(s >= 0 && !bind(s, (struct sockaddr *)&me, len), "bind :%u: %s", x, errname(errno));
		if (att_cmd(a, &forged, NULL, "forge %d %d", (int)getpid(), s) < 0 ||
		    (connect(s, (struct sockaddr *)&ss, len) && failf("connect: %s", errname(errno)))) {
			close(s);
			return CASE_FAIL;
		}
		(void)forged; /* another uid can send it: the server refuses it */
		CHECK(write(sv->gate, "aaa", (size_t)made + 1) == made + 1, "gate: %s", errname(errno));
		int r = client_exchange(s, 1000u + (uint32_t)i);
		close(s);
		TRY(r);
		TRY(att_cmd(a, NULL, NULL, "check"));
	}
	snprintf(g_note, sizeof g_note, "%d attempts (2 replayed offers and 1 forged each), "
		 "0 takeovers%s", g_attempts, g_same ? "" : " (refused at the uid rule)");
	return 0;
}

static int attack_squat(struct server *pl, struct attacker *a)
{
	TRY(att_cmd(a, NULL, NULL, "target %u %s %d", pl->port, pl->path, (int)pl->pid));
	TRY(att_cmd(a, NULL, NULL, "squat"));
	int answered = 0;
	for (int i = 0; i < g_attempts; i++) {
		int s = connect_from(g_fam, pl->port, pl->path, 0), r;
		TRY(s);
		if (att_cmd(a, &r, NULL, "answer") < 0) {
			close(s);
			return CASE_FAIL;
		}
		CHECK(r == g_same, "the squatter %s a hello", r ? "got" : "got no");
		answered += r;
		r = client_exchange(s, 2000u + (uint32_t)i);
		close(s);
		TRY(r);
		TRY(att_cmd(a, NULL, NULL, "squat-check"));
	}
	snprintf(g_note, sizeof g_note, "%d attempts, %d false answers, 0 believed%s", g_attempts,
		 answered, g_same ? "" : " (no client sent it a hello: the uid rule)");
	return 0;
}

static int attack_lie(struct server *sv, struct attacker *a)
{
	static const char *const kinds[] = { "eof", "tail", "head" };
	TRY(att_cmd(a, NULL, NULL, "target %u %s %d", sv->port, sv->path, (int)sv->pid));
	double worst = 0;
	int ended = 0;
	for (int i = 0; i < g_attempts; i++) {
		int r;
		double ms;
		TRY(att_cmd(a, &r, &ms, "lie %s", kinds[i % 3]));
		CHECK(r == g_same, "lie %s: the server %s the liar's hello", kinds[i % 3],
		      r ? "took" : "refused");
		ended += r;
		worst = ms > worst ? ms : worst;
	}
	if (g_same)
		snprintf(g_note, sizeof g_note, "%d attempts, %d lies, each connection ended "
			 "(%.1f ms at most)", g_attempts, ended, worst);
	else
		snprintf(g_note, sizeof g_note, "%d attempts, all refused at the uid rule",
			 g_attempts);
	return 0;
}

/* The server holds no more fds than after the first exchange, has no
 * connection left and saw no wrong data (offers expire after 10 s). */
static int settled(struct server *sv, unsigned base_fds, const char *what)
{
	unsigned v[5] = { 0 };
	TRY(honest(sv, 0, 5)); /* an accept: it drops the offers that expired */
	for (int i = 0; i < 50; i++) {
		TRY(server_counts(sv, v));
		if (!v[3] && v[4] <= base_fds)
			break;
		msleep(100);
	}
	CHECK(!v[2], "%s: the server saw wrong data on %u connections", what, v[2]);
	CHECK(!v[3], "%s: %u connections still open at the server", what, v[3]);
	CHECK(v[4] <= base_fds, "%s: the server holds %u fds, %u after the first exchange", what,
	      v[4], base_fds);
	return 0;
}

static int g_failed;

static void run(const char *name, int (*fn)(struct server *, struct attacker *), struct server *sv,
		struct attacker *a)
{
	g_msg[0] = g_note[0] = 0;
	alarm(120);
	if (fn(sv, a) < 0) {
		printf("FAIL %s: %s\n", name, g_msg);
		g_failed++;
	} else {
		printf("ok %s (%s)\n", name, g_note);
	}
	fflush(stdout);
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char m[] = "FAIL: the watchdog fired\n";
	ssize_t w = write(1, m, sizeof m - 1);
	(void)w;
	kill(0, SIGKILL);
}

int main(int argc, char **argv)
{
	ssize_t n = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
	g_self[n > 0 ? n : 0] = 0;
	const char *fam = argc > 2 ? argv[2] : "";
	g_famname = argc > 1 && argv[1][0] != '-' ? argv[1] : fam;
	g_fam = !strcmp(g_famname, "unix") ? AF_UNIX : AF_INET;
	snprintf(g_peer, sizeof g_peer, "%s", g_self);
	char *slash = strrchr(g_peer, '/');
	snprintf(slash ? slash + 1 : g_peer, sizeof g_peer - (size_t)(slash ? slash + 1 - g_peer : 0),
		 "attack_peer");
	if (argc == 6 && !strcmp(argv[1], "--plain")) { /* as the preloaded one, without it */
		uint16_t port;
		int l = listener(g_fam, argv[3], &port), ctl = atoi(argv[4]), rep = atoi(argv[5]);
		if (l < 0 || write(rep, &port, sizeof port) != sizeof port)
			return 2;
		int p[2] = { ctl, rep };
		pthread_t t;
		pthread_create(&t, NULL, report_thread, p);
		accept_loop(l, -1);
		return 0;
	}
	if (argc != 4 || (strcmp(argv[1], "tcp4") && strcmp(argv[1], "unix"))) {
		fprintf(stderr, "usage: attack_test tcp4|unix ATTEMPTS same|other|root\n");
		return 2;
	}
	g_attempts = atoi(argv[2]);
	const char *mode = argv[3];
	g_same = !strcmp(mode, "same");
	if (g_attempts < 1 || (!g_same && strcmp(mode, "other") && strcmp(mode, "root"))) {
		fprintf(stderr, "attack_test: ATTEMPTS >= 1, MODE same|other|root\n");
		return 2;
	}
	if (!getenv("LD_PRELOAD") || !strstr(getenv("LD_PRELOAD"), "zipline-preload")) {
		printf("skip: not preloaded (run it under zl-run: attack_run.sh)\n");
		return 77;
	}
	struct passwd *pw = getpwnam("nobody");
	if (!g_same && (geteuid() || !pw)) {
		printf("skip: mode %s needs root and a user nobody\n", mode);
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGALRM, on_alarm);
	setpgid(0, 0);
	struct attacker a;
	struct server sv, gated, pl;
	g_msg[0] = 0;
	if (att_start(&a, !strcmp(mode, "other")) < 0) {
		printf("FAIL: %s\n", g_msg);
		return 1;
	}
	/* root: we, the victims, run as nobody against a root attacker (and
	 * stay inspectable by our own uid, as a program that execs would be:
	 * setuid alone makes a process undumpable, and its peers could not
	 * prove it) */
	if (!strcmp(mode, "root") && (setgroups(0, NULL) || setgid(pw->pw_gid) ||
				      setuid(pw->pw_uid) || prctl(PR_SET_DUMPABLE, 1))) {
		printf("FAIL: setuid(nobody): %s\n", errname(errno));
		return 1;
	}
	snprintf(g_dir, sizeof g_dir, "/tmp/zl-attack.XXXXXX");
	if (!mkdtemp(g_dir) || chmod(g_dir, 0777)) {
		perror("mkdtemp");
		return 1;
	}
	int sw0 = switches();
	if (server_start(&sv, "sv", false, false) < 0 || server_start(&gated, "gated", false, true) < 0 ||
	    server_start(&pl, "plain", true, false) < 0 || honest(&sv, 0, 1) < 0 ||
	    honest(&gated, 0, 2) < 0) {
		printf("FAIL: setting up: %s\n", g_msg);
		kill(0, SIGKILL);
	}
	unsigned v[5], base_sv = 0, base_gated;
	msleep(100); /* the first exchanges' connections end */
	if (server_counts(&sv, v) < 0 || (base_sv = v[4], server_counts(&gated, v) < 0)) {
		printf("FAIL: %s\n", g_msg);
		kill(0, SIGKILL);
	}
	base_gated = v[4];
	if (g_fam == AF_INET)
		run("replay", attack_replay, &gated, &a);
	run("squat", attack_squat, &pl, &a);
	run("lie", attack_lie, &sv, &a);
	g_msg[0] = 0;
	alarm(120);
	/* the honest connections still work and switch */
	int sw1 = switches();
	bool ok = honest(&sv, 0, 3) == 0 && honest(&gated, 0, 4) == 0;
	msleep(100);
	int sw2 = switches();
	if (!ok || (sw0 >= 0 && sw2 - sw1 != 2)) {
		printf("FAIL honest-after: %s%s (%d switches, want 2)\n", g_msg, ok ? "" : "",
		       sw2 - sw1);
		g_failed++;
	} else {
		printf("ok honest-after (both servers switched an honest connection)\n");
	}
	g_msg[0] = 0;
	msleep(10500); /* the attacker's offers expire */
	if (settled(&sv, base_sv, "sv") < 0 || settled(&gated, base_gated, "gated") < 0) {
		printf("FAIL fds: %s\n", g_msg);
		g_failed++;
	} else {
		printf("ok fds (each server back to the fds it held after its first exchange)\n");
	}
	printf("%s: %s %s, %d attempts per attack: %s\n", g_failed ? "FAIL" : "PASS", g_famname,
	       mode, g_attempts, g_failed ? "attacks succeeded or broke a connection" : "all failed");
	server_stop(&sv);
	server_stop(&gated);
	server_stop(&pl);
	close(a.in);
	kill(a.pid, SIGKILL);
	waitpid(a.pid, NULL, 0);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
	int rr = system(cmd);
	(void)rr;
	return g_failed ? 1 : 0;
}
