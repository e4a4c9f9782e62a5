/* SPDX-License-Identifier: MIT */
/*
 * sec_uid: one uid rule on shm:// and unix://, root included (ff807dc):
 * a side refuses a peer of another uid (SO_PEERCRED) unless its
 * allow_other_uid is set, and a refusing listener says so, so that the
 * connector gets -EPERM from zl_connect too. Children setuid to nobody:
 *   root listens, nobody connects; nobody listens, root connects:
 *     the listener refuses (the connector allows other uids, so only the
 *     listener's rule decides): -EPERM on both sides; neither allows:
 *     -EPERM on both sides; both allow: a message each way;
 *   a zl_server running as root refuses a nobody zl_client_connect
 *     (-EPERM, whether the client allows other uids or not) and serves
 *     root's clients.
 * unix:// sockets live in the file system: they go into a directory of
 * mode 0777, and a root listener's socket gets mode 0777, so that the
 * file system lets nobody connect and only the library's rule refuses.
 * Needs root and the user nobody; skips (77) otherwise.
 */
#include <grp.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include "srvlib.h"

#define TMO 5000000

static uid_t nobody_uid;
static gid_t nobody_gid;
static char dir[64] = "/tmp/zlsec-uid-XXXXXX";

static void become_nobody(void)
{
	CHECKF(!setgroups(0, NULL) && !setgid(nobody_gid) && !setuid(nobody_uid),
	       "cannot become nobody: %s", strerror(errno));
	prctl(PR_SET_PDEATHSIG, SIGKILL); /* cleared by the change of credentials */
}

static void url_for(const char *scheme, const char *tag, char *url, size_t cap)
{
	if (!strcmp(scheme, "unix"))
		snprintf(url, cap, "unix://%s/%s.sock", dir, tag);
	else
		snprintf(url, cap, "shm://zlsec-uid-%d-%s", (int)getpid(), tag);
}

/* A unix socket file anyone may connect to (the library's rule decides). */
static void open_up(const char *url)
{
	if (!strncmp(url, "unix://", 7))
		CHECKF(chmod(url + 7, 0777) == 0, "chmod %s: %s", url + 7, strerror(errno));
}

struct side {
	const char *url;
	int allow; /* allow_other_uid */
	int want;  /* what zl_accept / zl_connect must return */
	struct tl_pipe ready;
};

static struct zl_opts opts(int allow)
{
	struct zl_opts o;
	zl_opts_init(&o);
	o.allow_other_uid = allow;
	return o;
}

/* When the channel is allowed: a message each way. */
static void talk(zl_channel *ch, bool connector)
{
	uint8_t buf[128];
	if (connector) {
		tl_send_pattern(ch, 100, 1, TMO);
		tl_recv_expect(ch, buf, sizeof(buf), 50, 2, TMO);
	} else {
		tl_recv_expect(ch, buf, sizeof(buf), 100, 1, TMO);
		tl_send_pattern(ch, 50, 2, TMO);
	}
}

static zl_listener *listen_as(const struct side *s)
{
	zl_listener *l;
	struct zl_opts o = opts(s->allow);
	int rc = zl_listen(s->url, &o, &l);
	CHECKF(rc == 0, "zl_listen(%s) as uid %d: %s", s->url, (int)geteuid(), zl_strerror(rc));
	open_up(s->url);
	return l;
}

static void accept_side(const struct side *s, zl_listener *l)
{
	zl_channel *ch = NULL;
	int rc = zl_accept(l, TMO, &ch);
	CHECKF(rc == s->want, "zl_accept as uid %d: %s, expected %s", (int)geteuid(),
	       zl_strerror(rc), zl_strerror(s->want));
	if (!rc) {
		talk(ch, false);
		zl_close(ch);
	}
}

static int connect_side(void *arg)
{
	const struct side *s = arg;
	zl_channel *ch = NULL;
	struct zl_opts o = opts(s->allow);
	int rc = zl_connect(s->url, &o, TMO, &ch);
	CHECKF(rc == s->want, "zl_connect(%s) as uid %d: %s, expected %s", s->url,
	       (int)geteuid(), zl_strerror(rc), zl_strerror(s->want));
	if (!rc) {
		talk(ch, true);
		zl_close(ch);
	}
	return 0;
}

static int nobody_listener(void *arg)
{
	struct side *s = arg;
	become_nobody();
	zl_listener *l = listen_as(s);
	tl_pipe_put(&s->ready, "r", 1);
	accept_side(s, l);
	zl_listener_close(l);
	return 0;
}

static int nobody_connector(void *arg)
{
	become_nobody();
	return connect_side(arg);
}

static void one(const char *scheme, bool nobody_listens, int lallow, int callow, int want)
{
	static int n;
	char url[200], tag[16];
	snprintf(tag, sizeof(tag), "c%d", n++);
	url_for(scheme, tag, url, sizeof(url));
	struct side ls = { .url = url, .allow = lallow, .want = want };
	struct side cs = { .url = url, .allow = callow, .want = want };
	printf("%-4s %-6s listens (allow_other_uid %d), %-6s connects (%d): want %s\n", scheme,
	       nobody_listens ? "nobody" : "root", lallow, nobody_listens ? "root" : "nobody",
	       callow, zl_strerror(want));
	if (nobody_listens) {
		tl_pipe_init(&ls.ready);
		pid_t pid = tl_fork(nobody_listener, &ls, 30);
		char c;
		tl_pipe_get(&ls.ready, &c, 1, 10000);
		connect_side(&cs);
		tl_reap_ok(pid, 10000);
		close(ls.ready.rd);
		close(ls.ready.wr);
	} else {
		zl_listener *l = listen_as(&ls);
		pid_t pid = tl_fork(nobody_connector, &cs, 30);
		accept_side(&ls, l);
		tl_reap_ok(pid, 10000);
		zl_listener_close(l);
	}
}

/* Forked before the servers start: learns their URLs through the pipe. */
static int nobody_clients(void *arg)
{
	become_nobody();
	for (int i = 0; i < 2; i++) {
		char url[600];
		tl_pipe_get(arg, url, sizeof(url), 30000);
		for (int allow = 0; allow < 2; allow++) {
			struct zl_opts o = opts(allow);
			zl_client *c = NULL;
			int rc = zl_client_connect(url, &o, TMO, &c);
			CHECKF(rc == -EPERM, "zl_client_connect(%s) as nobody (allow_other_uid %d): %s",
			       url, allow, zl_strerror(rc));
			printf("zl_server as root refuses nobody on %s (allow_other_uid %d): %s\n",
			       url, allow, zl_strerror(rc));
		}
	}
	return 0;
}

static void server_case(void)
{
	struct tl_pipe p;
	tl_pipe_init(&p);
	pid_t pid = tl_fork(nobody_clients, &p, 60);
	struct tl_srv s[2];
	char base[200];
	url_for("unix", "srv", base, sizeof(base));
	setenv("ZL_TEST_URL_unix", base, 1); /* tl_make_url: in our directory */
	tl_srv_start(&s[0], "shm", NULL, NULL);
	tl_srv_start(&s[1], "unix", NULL, NULL);
	open_up(s[1].url);
	for (int i = 0; i < 2; i++) {
		char url[600] = { 0 };
		snprintf(url, sizeof(url), "%s", s[i].url);
		tl_pipe_put(&p, url, sizeof(url));
	}
	tl_reap_ok(pid, 30000);
	for (int i = 0; i < 2; i++) { /* and root's clients are served */
		zl_client *c = tl_client(s[i].url, TMO);
		tl_call_check(c, 1, 100, 3, TMO);
		zl_client_close(c);
		tl_srv_stop(&s[i]);
	}
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (geteuid() != 0)
		SKIP("needs root: children setuid to nobody");
	struct passwd *pw = getpwnam("nobody");
	if (!pw || pw->pw_uid == 0)
		SKIP("no user nobody");
	nobody_uid = pw->pw_uid;
	nobody_gid = pw->pw_gid;
	tl_watchdog(100);
	CHECK(mkdtemp(dir) && chmod(dir, 0777) == 0);
	server_case(); /* first: its child is forked before any thread */
	const char *schemes[] = { "shm", "unix" };
	for (int i = 0; i < 2; i++) {
		for (int nl = 0; nl < 2; nl++) {
			one(schemes[i], nl, 0, 1, -EPERM); /* the listener's rule decides */
			one(schemes[i], nl, 0, 0, -EPERM);
			one(schemes[i], nl, 1, 1, 0);
		}
	}
	CHECKF(rmdir(dir) == 0, "rmdir %s: %s (a socket file left?)", dir, strerror(errno));
	printf("PASS\n");
	return T_EXIT_PASS;
}
