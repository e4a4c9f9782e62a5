/* SPDX-License-Identifier: MIT */
/*
 * poll_waiter SCHEME: zl_poller over channels of SCHEME, a listener and
 * foreign fds (a pipe).
 *
 * a) semantics
 *   - argument checks: -EINVAL (NULL, no or unknown events, a bad fd),
 *     -EEXIST (an item added twice), -ENOENT (an id that is not there),
 *     exactly as include/zipline.h says;
 *   - level-triggered: an unread message is reported on every wait, until
 *     it is read (three messages, read one at a time);
 *   - ZL_POLLOUT when asked (a channel, a pipe's write end);
 *   - a pipe's read end is reported ZL_POLLIN only while it holds data;
 *   - a listener is reported while a connection waits, not after accept;
 *   - a dead peer (closed; killed while we sleep; killed while another
 *     channel keeps every wait busy) is reported with ZL_POLLHUP or
 *     ZL_POLLIN, and zl_recv then says -ECONNRESET;
 *   - timeout 0: -EAGAIN; 20 ms with nothing: -ETIMEDOUT after 20 ms (and
 *     before 100 ms); a wait of 200 ms on idle items sleeps (user + sys
 *     CPU of this thread < 100 ms).
 * b) counters: a forked client pinned to one CPU ping-pongs ROUNDS
 *   messages (blocking zl_send/zl_recv, default spin) with this process,
 *   pinned to another CPU, which serves through zl_poller_wait: the first
 *   half with only the channel in the poller, the second with a listener
 *   and an idle pipe beside it. Every reply is checked. On shm:
 *   (poller arms + sleeps) / messages < 0.01 and the server channel's
 *   info.syscalls / messages < 0.01 in both halves (report only under the
 *   sanitizers, ZL_TEST_SCALE < 1, or with a single CPU).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>

#include "chanlib.h"

#define TMO 5000000
#define ROUNDS 100000
#define MAX_EV 16

static char url[600];
static struct tl_pipe to_child;
static int failures; /* noted, and the test goes on: main fails at the end */

/* ---- helpers ------------------------------------------------------------ */

struct conn_arg {
	zl_channel *ch;
};

static void *connector(void *p)
{
	struct conn_arg *a = p;
	a->ch = tl_connect(url, TMO);
	return NULL;
}

/* An in-process pair over the listener (which stays open). */
static void pair(zl_listener *l, zl_channel **srv, zl_channel **cli)
{
	struct conn_arg a = { 0 };
	struct tl_thread t;
	tl_thread_start(&t, connector, &a);
	*srv = tl_accept(l, TMO);
	tl_thread_join(&t, 10000);
	*cli = a.ch;
}

/* A forked peer: connects, then on 's' sends message 7 (len 107), on 'k'
 * dies without closing, on 'c' closes and exits. */
static int peer(void *arg)
{
	(void)arg;
	zl_channel *ch = tl_connect(url, TMO);
	for (;;) {
		char c;
		tl_pipe_get(&to_child, &c, 1, 30000);
		if (c == 's')
			tl_send_pattern(ch, 107, 7, TMO);
		else if (c == 'k')
			raise(SIGKILL);
		else {
			zl_close(ch);
			return T_EXIT_PASS;
		}
	}
}

static const char *evs(uint32_t m)
{
	static char b[8][64];
	static int k;
	char *s = b[k++ % 8];
	snprintf(s, 64, "%s%s%s%s%s", m & ZL_POLLIN ? "IN " : "", m & ZL_POLLOUT ? "OUT " : "",
		 m & ZL_POLLERR ? "ERR " : "", m & ZL_POLLHUP ? "HUP " : "",
		 m & ~(ZL_POLLIN | ZL_POLLOUT | ZL_POLLERR | ZL_POLLHUP) ? "?" : "");
	return s;
}

/* One wait that must report exactly one item, id, whose events include
 * all of must and none of mustnot; returns its events. */
static uint32_t expect_one(zl_poller *p, int64_t tmo, int id, void *user, uint32_t must,
			   uint32_t mustnot, const char *what)
{
	struct zl_poll_event ev[MAX_EV];
	int n = zl_poller_wait(p, ev, MAX_EV, tmo);
	CHECKF(n == 1, "%s: zl_poller_wait = %d (%s), expected 1 event (id %d)", what, n,
	       n < 0 ? zl_strerror(n) : "events", id);
	CHECKF(ev[0].id == id, "%s: reported id %d (%s), expected %d", what, ev[0].id,
	       evs(ev[0].events), id);
	CHECKF(ev[0].user == user, "%s: wrong user pointer", what);
	CHECKF((ev[0].events & must) == must && !(ev[0].events & mustnot),
	       "%s: events %s (want %s, not %s)", what, evs(ev[0].events), evs(must),
	       evs(mustnot));
	return ev[0].events;
}

static void expect_none(zl_poller *p, const char *what)
{
	struct zl_poll_event ev[MAX_EV];
	int n = zl_poller_wait(p, ev, MAX_EV, 0);
	CHECKF(n == -EAGAIN, "%s: zl_poller_wait(0) = %d (%s)%s%d %s, expected -EAGAIN", what,
	       n, n < 0 ? zl_strerror(n) : "events", n > 0 ? ", first id " : "",
	       n > 0 ? ev[0].id : 0, n > 0 ? evs(ev[0].events) : "");
}

/* Wait up to 3 s (waits of up to 100 ms) for id; returns its events,
 * counts the waits in *waits. Other items may be reported meanwhile. */
static uint32_t await_id(zl_poller *p, int id, int64_t wait_tmo, uint64_t *waits)
{
	int64_t end = tl_now_us() + 3000000;
	*waits = 0;
	while (tl_now_us() < end) {
		struct zl_poll_event ev[MAX_EV];
		int n = zl_poller_wait(p, ev, MAX_EV, wait_tmo);
		(*waits)++;
		CHECKF(n > 0 || n == -ETIMEDOUT || n == -EAGAIN, "zl_poller_wait = %d (%s)", n,
		       zl_strerror(n));
		for (int i = 0; i < n; i++)
			if (ev[i].id == id)
				return ev[i].events;
	}
	return 0;
}

static void *late_write(void *arg)
{
	tl_sleep_us(20000);
	tl_pipe_put(arg, "y", 1);
	return NULL;
}

static int64_t thread_cpu_us(void)
{
	struct rusage ru;
	CHECK(getrusage(RUSAGE_THREAD, &ru) == 0);
	return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
	       ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

/* ---- a) semantics ------------------------------------------------------- */

static void arg_checks(zl_poller *p, zl_listener *l, zl_channel *srv, int rd)
{
	zl_poller *q;
	struct zl_poll_event ev[1];
	struct zl_poller_info pi;
	CHECK_RC(zl_poller_create(50, NULL), -EINVAL);
	CHECK_RC(zl_poller_wait(NULL, ev, 1, 0), -EINVAL);
	CHECK_RC(zl_poller_wait(p, NULL, 1, 0), -EINVAL);
	CHECK_RC(zl_poller_wait(p, ev, 0, 0), -EINVAL);
	CHECK_RC(zl_poller_wait(p, ev, -1, 0), -EINVAL);
	CHECK_RC(zl_poller_info(NULL, &pi), -EINVAL);
	CHECK_RC(zl_poller_info(p, NULL), -EINVAL);
	zl_poller_destroy(NULL);

	CHECK_RC(zl_poller_add_channel(NULL, srv, ZL_POLLIN, NULL), -EINVAL);
	CHECK_RC(zl_poller_add_channel(p, NULL, ZL_POLLIN, NULL), -EINVAL);
	CHECK_RC(zl_poller_add_channel(p, srv, 0, NULL), -EINVAL);
	CHECK_RC(zl_poller_add_channel(p, srv, 0x100, NULL), -EINVAL);
	CHECK_RC(zl_poller_add_listener(NULL, l, NULL), -EINVAL);
	CHECK_RC(zl_poller_add_listener(p, NULL, NULL), -EINVAL);
	CHECK_RC(zl_poller_add_fd(NULL, rd, ZL_POLLIN, NULL), -EINVAL);
	CHECK_RC(zl_poller_add_fd(p, -1, ZL_POLLIN, NULL), -EINVAL);
	CHECK_RC(zl_poller_add_fd(p, rd, 0, NULL), -EINVAL);
	CHECK_RC(zl_poller_add_fd(p, rd, ZL_POLLHUP, NULL), -EINVAL);
	int fds[2];
	CHECK(pipe(fds) == 0);
	close(fds[0]);
	close(fds[1]);
	CHECK_RC(zl_poller_add_fd(p, fds[0], ZL_POLLIN, NULL), -EINVAL); /* closed */
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	CHECK(devnull >= 0);
	CHECK_RC(zl_poller_add_fd(p, devnull, ZL_POLLIN, NULL), -EINVAL); /* epoll: EPERM */
	close(devnull);

	CHECK_RC(zl_poller_mod(p, -1, ZL_POLLIN), -ENOENT);
	CHECK_RC(zl_poller_mod(p, 12345, ZL_POLLIN), -ENOENT);
	CHECK_RC(zl_poller_del(p, -1), -ENOENT);
	CHECK_RC(zl_poller_del(p, 12345), -ENOENT);
	CHECK_RC(zl_poller_del(NULL, 0), -ENOENT); /* "0 or -ENOENT" */
	CHECK_RC2(zl_poller_mod(NULL, 0, ZL_POLLIN), -ENOENT, -EINVAL);

	/* failed adds left nothing behind; an empty poller just times out */
	CHECK_OK(zl_poller_create(0, &q));
	CHECK_RC(zl_poller_wait(q, ev, 1, 0), -EAGAIN);
	CHECK_RC(zl_poller_wait(q, ev, 1, 1000), -ETIMEDOUT);
	zl_poller_destroy(q);
	CHECK_RC(zl_poller_wait(p, ev, 1, 0), -EAGAIN);
}

static void semantics(zl_listener *l)
{
	zl_channel *srv, *cli;
	pair(l, &srv, &cli);
	struct tl_pipe pp;
	tl_pipe_init(&pp);
	zl_poller *p;
	CHECK_OK(zl_poller_create(-1, &p));
	arg_checks(p, l, srv, pp.rd);

	static int u_ch, u_l, u_rd, u_wr;
	int cid = zl_poller_add_channel(p, srv, ZL_POLLIN, &u_ch);
	CHECKF(cid >= 0, "zl_poller_add_channel = %d (%s)", cid, zl_strerror(cid));
	CHECK_RC(zl_poller_add_channel(p, srv, ZL_POLLIN, NULL), -EEXIST);
	CHECK_RC(zl_poller_add_channel(p, srv, ZL_POLLOUT, NULL), -EEXIST);
	int lid = zl_poller_add_listener(p, l, &u_l);
	CHECKF(lid >= 0, "zl_poller_add_listener = %d (%s)", lid, zl_strerror(lid));
	CHECK_RC(zl_poller_add_listener(p, l, NULL), -EEXIST);
	int rid = zl_poller_add_fd(p, pp.rd, ZL_POLLIN, &u_rd);
	CHECKF(rid >= 0, "zl_poller_add_fd = %d (%s)", rid, zl_strerror(rid));
	CHECK_RC(zl_poller_add_fd(p, pp.rd, ZL_POLLIN, NULL), -EEXIST);
	CHECK(cid != lid && cid != rid && lid != rid);
	CHECK_RC(zl_poller_mod(p, cid, 0), -EINVAL);
	CHECK_RC(zl_poller_mod(p, cid, 0x100), -EINVAL);
	CHECK_RC(zl_poller_mod(p, 12345, ZL_POLLIN), -ENOENT);
	expect_none(p, "idle items");

	/* level-triggered: every unread message reported on every wait */
	for (uint64_t i = 0; i < 3; i++)
		tl_send_pattern(cli, 100 + i, i, TMO);
	uint8_t buf[1024];
	size_t len;
	for (uint64_t i = 0; i < 3; i++) {
		for (int rep = 0; rep < 3; rep++)
			expect_one(p, rep || i ? 0 : 1000000, cid, &u_ch, ZL_POLLIN, ZL_POLLOUT,
				   "unread message");
		tl_recv_expect(srv, buf, sizeof(buf), 100 + i, i, 0);
	}
	expect_none(p, "all read");
	CHECK_RC(zl_recv(srv, buf, sizeof(buf), &len, 0), -EAGAIN);

	/* ZL_POLLOUT on a channel when asked */
	CHECK_OK(zl_poller_mod(p, cid, ZL_POLLIN | ZL_POLLOUT));
	expect_one(p, 0, cid, &u_ch, ZL_POLLOUT, ZL_POLLIN, "channel with room, POLLOUT asked");
	CHECK_OK(zl_poller_mod(p, cid, ZL_POLLIN));
	expect_none(p, "POLLOUT no longer asked");

	/* a pipe: ZL_POLLIN only while it holds data */
	tl_pipe_put(&pp, "x", 1);
	expect_one(p, 0, rid, &u_rd, ZL_POLLIN, ZL_POLLOUT, "pipe with data");
	expect_one(p, 0, rid, &u_rd, ZL_POLLIN, ZL_POLLOUT, "pipe with data, again");
	char c;
	CHECK(read(pp.rd, &c, 1) == 1);
	expect_none(p, "pipe read dry");
	struct tl_thread w; /* written 20 ms later, while the wait sleeps */
	tl_thread_start(&w, late_write, &pp);
	expect_one(p, 1000000, rid, &u_rd, ZL_POLLIN, 0, "pipe written while we sleep");
	tl_thread_join(&w, 5000);
	CHECK(read(pp.rd, &c, 1) == 1);
	expect_none(p, "pipe read dry again");
	/* its write end: ZL_POLLOUT when asked, nothing when not */
	int wid = zl_poller_add_fd(p, pp.wr, ZL_POLLIN, &u_wr);
	CHECKF(wid >= 0, "zl_poller_add_fd(write end) = %d (%s)", wid, zl_strerror(wid));
	expect_none(p, "pipe write end, POLLIN asked");
	CHECK_OK(zl_poller_mod(p, wid, ZL_POLLOUT));
	expect_one(p, 0, wid, &u_wr, ZL_POLLOUT, ZL_POLLIN, "pipe write end, POLLOUT asked");
	CHECK_OK(zl_poller_del(p, wid));
	CHECK_RC(zl_poller_del(p, wid), -ENOENT);
	CHECK_RC(zl_poller_mod(p, wid, ZL_POLLIN), -ENOENT);
	expect_none(p, "write end removed");
	int wid2 = zl_poller_add_fd(p, pp.wr, ZL_POLLOUT, &u_wr); /* re-add after del */
	CHECKF(wid2 >= 0, "re-add = %d (%s)", wid2, zl_strerror(wid2));
	expect_one(p, 0, wid2, &u_wr, ZL_POLLOUT, 0, "pipe write end, re-added");
	CHECK_OK(zl_poller_del(p, wid2));

	/* a listener: reported while a connection waits */
	struct conn_arg a = { 0 };
	struct tl_thread t;
	tl_thread_start(&t, connector, &a);
	expect_one(p, 2000000, lid, &u_l, ZL_POLLIN, 0, "pending connection");
	zl_channel *srv2 = tl_accept(l, TMO);
	tl_thread_join(&t, 10000);
	expect_none(p, "connection accepted");

	/* the peer closes: reported (HUP or IN) until removed; zl_recv says so */
	int cid2 = zl_poller_add_channel(p, srv2, ZL_POLLIN, &a);
	CHECK(cid2 >= 0);
	expect_none(p, "second channel, idle");
	zl_close(a.ch);
	uint32_t m = expect_one(p, 1000000, cid2, &a, 0, 0, "peer closed");
	CHECKF(m & (ZL_POLLIN | ZL_POLLHUP), "peer closed: events %s", evs(m));
	CHECK_RC(zl_recv(srv2, buf, sizeof(buf), &len, 0), -ECONNRESET);
	m = expect_one(p, 0, cid2, &a, 0, 0, "peer closed, after -ECONNRESET");
	CHECKF(m & (ZL_POLLIN | ZL_POLLHUP), "peer closed: events %s", evs(m));
	printf("peer closed: reported %s\n", evs(m));
	CHECK_OK(zl_poller_del(p, cid2));
	zl_close(srv2);
	expect_none(p, "closed channel removed");

	/* timeouts */
	struct zl_poll_event ev[MAX_EV];
	CHECK_RC(zl_poller_wait(p, ev, MAX_EV, 0), -EAGAIN);
	int64_t t0 = tl_now_us();
	CHECK_RC(zl_poller_wait(p, ev, MAX_EV, 20000), -ETIMEDOUT);
	int64_t dt = tl_now_us() - t0;
	printf("timeout 20 ms: -ETIMEDOUT after %.3f ms\n", dt / 1e3);
	CHECKF(dt >= 20000, "-ETIMEDOUT after %.3f ms, before the 20 ms", dt / 1e3);
	if (!tl_scaled_down())
		CHECKF(dt < 100000, "-ETIMEDOUT after %.3f ms (20 ms asked)", dt / 1e3);

	/* idle: a 200 ms wait sleeps */
	struct zl_poller_info i0, i1;
	CHECK_OK(zl_poller_info(p, &i0));
	int64_t cpu0 = thread_cpu_us();
	t0 = tl_now_us();
	CHECK_RC(zl_poller_wait(p, ev, MAX_EV, 200000), -ETIMEDOUT);
	dt = tl_now_us() - t0;
	int64_t cpu = thread_cpu_us() - cpu0;
	CHECK_OK(zl_poller_info(p, &i1));
	printf("idle wait of 200 ms: %.3f ms, CPU %.3f ms, %" PRIu64 " sleeps, %" PRIu64
	       " arms, %" PRIu64 " kernel looks\n", dt / 1e3, cpu / 1e3, i1.sleeps - i0.sleeps,
	       i1.arms - i0.arms, i1.kernel_looks - i0.kernel_looks);
	CHECKF(dt >= 200000, "-ETIMEDOUT after %.3f ms, before the 200 ms", dt / 1e3);
	CHECK(i1.sleeps > i0.sleeps);
	CHECKF(cpu < 100000, "an idle wait of 200 ms used %.3f ms of CPU", cpu / 1e3);

	/* the level-triggered message count survives a mod */
	tl_send_pattern(cli, 50, 50, TMO);
	expect_one(p, 1000000, cid, &u_ch, ZL_POLLIN, 0, "message");
	CHECK_OK(zl_poller_mod(p, cid, ZL_POLLIN));
	expect_one(p, 0, cid, &u_ch, ZL_POLLIN, 0, "message, after a mod");
	tl_recv_expect(srv, buf, sizeof(buf), 50, 50, 0);
	expect_none(p, "message read");

	struct zl_poller_info pi;
	CHECK_OK(zl_poller_info(p, &pi));
	CHECK(pi.waits > 0 && pi.events > 0);
	CHECK_OK(zl_poller_del(p, cid));
	CHECK_OK(zl_poller_del(p, lid));
	CHECK_OK(zl_poller_del(p, rid));
	CHECK_RC(zl_poller_wait(p, ev, MAX_EV, 0), -EAGAIN);
	zl_poller_destroy(p);
	zl_close(cli);
	zl_close(srv);
	close(pp.rd);
	close(pp.wr);
}

/* A forked peer dies without closing: while we sleep in the wait, and while
 * another channel (an unread message) makes every wait return at once. */
static void dead_peers(zl_listener *l)
{
	uint8_t buf[1024];
	size_t len;
	zl_poller *p;
	CHECK_OK(zl_poller_create(-1, &p));

	/* killed while we sleep */
	pid_t pid = tl_fork(peer, NULL, 50);
	zl_channel *ch = tl_accept(l, TMO);
	int id = zl_poller_add_channel(p, ch, ZL_POLLIN, ch);
	CHECK(id >= 0);
	tl_pipe_put(&to_child, "s", 1);
	expect_one(p, 2000000, id, ch, ZL_POLLIN, 0, "message from the forked peer");
	tl_recv_expect(ch, buf, sizeof(buf), 107, 7, 0);
	expect_none(p, "forked peer idle");
	int64_t t0 = tl_now_us();
	tl_pipe_put(&to_child, "k", 1);
	uint64_t waits;
	uint32_t m = await_id(p, id, 1000000, &waits);
	int64_t dt = tl_now_us() - t0;
	CHECKF(m & (ZL_POLLIN | ZL_POLLHUP), "killed peer: not reported within 3 s (events %s)",
	       evs(m));
	printf("peer killed while the poller sleeps: reported %s after %.3f ms, %" PRIu64
	       " waits\n", evs(m), dt / 1e3, waits);
	CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, 0), -ECONNRESET);
	expect_one(p, 0, id, ch, 0, 0, "killed peer, after -ECONNRESET");
	CHECK(tl_wait_child(pid, 5000) == 128 + SIGKILL);
	CHECK_OK(zl_poller_del(p, id));
	zl_close(ch);

	/* killed while another channel keeps the poller busy */
	zl_channel *srv, *cli;
	pair(l, &srv, &cli);
	int busy = zl_poller_add_channel(p, srv, ZL_POLLIN, srv);
	CHECK(busy >= 0);
	tl_send_pattern(cli, 60, 60, TMO); /* never read: reported on every wait */
	expect_one(p, 1000000, busy, srv, ZL_POLLIN, 0, "busy channel");
	pid = tl_fork(peer, NULL, 50);
	ch = tl_accept(l, TMO);
	id = zl_poller_add_channel(p, ch, ZL_POLLIN, ch);
	CHECK(id >= 0);
	t0 = tl_now_us();
	tl_pipe_put(&to_child, "k", 1);
	CHECK(tl_wait_child(pid, 5000) == 128 + SIGKILL);
	m = await_id(p, id, 1000000, &waits);
	dt = tl_now_us() - t0;
	if (m & (ZL_POLLIN | ZL_POLLHUP)) {
		printf("peer killed beside a busy channel: reported %s after %.3f ms, %" PRIu64
		       " waits after its death\n", evs(m), dt / 1e3, waits);
		CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, 0), -ECONNRESET);
	} else { /* go on to the counters; fail at the end */
		fprintf(stderr, "%s:%d: FAIL: killed peer beside a busy channel: not reported "
			"within 3 s (%" PRIu64 " waits)\n", __FILE__, __LINE__, waits);
		failures++;
	}
	CHECK_OK(zl_poller_del(p, id));
	zl_close(ch);
	tl_recv_expect(srv, buf, sizeof(buf), 60, 60, 0);
	CHECK_OK(zl_poller_del(p, busy));
	zl_poller_destroy(p);
	zl_close(cli);
	zl_close(srv);
}

/* ---- b) counters ------------------------------------------------------ */

static cpu_set_t start_cpus;
static int cpu_a = -1, cpu_b = -1; /* server, client */

static void pick_cpus(void)
{
	if (sched_getaffinity(0, sizeof(start_cpus), &start_cpus))
		return;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &start_cpus)) {
			if (cpu_a < 0)
				cpu_a = c;
			else if (cpu_b < 0)
				cpu_b = c;
		}
}

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	CHECKF(sched_setaffinity(0, sizeof(s), &s) == 0, "cannot pin to cpu%d", cpu);
}

static size_t req_len(uint64_t i) { return 8 + (size_t)(i % 57); }
#define REPLY_ID(i) ((i) | (1ull << 40))

static uint64_t rounds;

static int pingpong_client(void *arg)
{
	(void)arg;
	if (cpu_b >= 0)
		pin(cpu_b);
	zl_channel *ch = tl_connect(url, TMO);
	uint8_t out[128], in[128];
	for (uint64_t i = 0; i < rounds; i++) {
		size_t n = req_len(i), len = 0;
		tl_fill(out, n, i);
		int rc = zl_send(ch, out, n, TMO);
		CHECKF(rc == 0, "client: zl_send %" PRIu64 " = %s", i, zl_strerror(rc));
		rc = zl_recv(ch, in, sizeof(in), &len, TMO);
		CHECKF(rc == 0, "client: zl_recv reply %" PRIu64 " = %s", i, zl_strerror(rc));
		CHECKF(len == n, "client: reply %" PRIu64 " has length %zu, expected %zu", i, len, n);
		CHECK_PATTERN(in, len, REPLY_ID(i));
	}
	zl_close(ch);
	return T_EXIT_PASS;
}

struct figures {
	uint64_t msgs, waits, sleeps, arms, klooks, ch_sys, ch_fences, ch_arms, ch_sleeps;
	int64_t us;
};

/* Serve until `upto` requests were answered in total (*served). l, lid:
 * the listener beside (NULL, -1: none). */
static void serve(zl_poller *p, zl_channel *ch, int cid, zl_listener *l, int lid,
		  uint64_t *served, uint64_t upto)
{
	uint8_t buf[128], rep[128];
	while (*served < upto) {
		struct zl_poll_event ev[MAX_EV];
		int n = zl_poller_wait(p, ev, MAX_EV, TMO);
		CHECKF(n > 0, "server: zl_poller_wait = %d (%s) after %" PRIu64 " requests", n,
		       zl_strerror(n), *served);
		for (int k = 0; k < n; k++) {
			/* The listener's fd also turns readable when a handshake
			 * timer runs out (zl_listener_fd: zl_accept "may have
			 * something to do"): 5 s after the handshakes of the first
			 * phases, which a slow machine's run reaches. Then there
			 * must be nothing to accept. */
			if (ev[k].id == lid && ev[k].events == ZL_POLLIN) {
				zl_channel *x;
				CHECK_RC(zl_accept(l, 0, &x), -EAGAIN);
				continue;
			}
			CHECKF(ev[k].id == cid, "server: item %d reported (%s), only the channel may",
			       ev[k].id, evs(ev[k].events));
			CHECKF(!(ev[k].events & (ZL_POLLHUP | ZL_POLLERR)),
			       "server: channel reported %s after %" PRIu64 " requests",
			       evs(ev[k].events), *served);
			size_t len;
			int rc;
			while ((rc = zl_recv(ch, buf, sizeof(buf), &len, 0)) == 0) {
				uint64_t i = *served;
				CHECKF(len == req_len(i), "server: request %" PRIu64 " length %zu", i, len);
				CHECK_PATTERN(buf, len, i);
				tl_fill(rep, len, REPLY_ID(i));
				CHECK_OK(zl_send(ch, rep, len, TMO));
				(*served)++;
			}
			CHECKF(rc == -EAGAIN, "server: zl_recv = %d (%s)", rc, zl_strerror(rc));
		}
	}
}

static void snap(zl_poller *p, zl_channel *ch, struct figures *f)
{
	struct zl_poller_info pi;
	struct zl_channel_info ci;
	CHECK_OK(zl_poller_info(p, &pi));
	CHECK_OK(zl_channel_info(ch, &ci));
	*f = (struct figures){ .msgs = ci.msgs_recv, .waits = pi.waits, .sleeps = pi.sleeps,
			       .arms = pi.arms, .klooks = pi.kernel_looks, .ch_sys = ci.syscalls,
			       .ch_fences = ci.fences, .ch_arms = ci.arms,
			       .ch_sleeps = ci.sleeps, .us = tl_now_us() };
}

/* Prints the figures; with bounds (shm), complains of those exceeded and
 * returns how many count (enforce). */
static int report_phase(const char *scheme, const char *what, const struct figures *a,
			const struct figures *b, bool bounds, bool enforce)
{
	double m = (double)(b->msgs - a->msgs);
	CHECK(m > 0);
	double as = (double)((b->arms - a->arms) + (b->sleeps - a->sleeps)) / m;
	double sys = (double)(b->ch_sys - a->ch_sys) / m;
	printf("%s %s: %.0f round trips in %.3f s (%.2f us each): poller %.4f waits, "
	       "%.5f arms, %.5f sleeps, %.4f kernel looks per message; "
	       "server channel %.5f syscalls, %.5f fences, %.5f arms, %.5f sleeps per message\n",
	       scheme, what, m, (b->us - a->us) / 1e6, (double)(b->us - a->us) / m,
	       (double)(b->waits - a->waits) / m, (double)(b->arms - a->arms) / m,
	       (double)(b->sleeps - a->sleeps) / m, (double)(b->klooks - a->klooks) / m, sys,
	       (double)(b->ch_fences - a->ch_fences) / m, (double)(b->ch_arms - a->ch_arms) / m,
	       (double)(b->ch_sleeps - a->ch_sleeps) / m);
	int bad = 0;
	if (!bounds)
		return 0;
	if (as >= 0.01) {
		fprintf(stderr, "%s %s: (arms + sleeps) / messages = %.5f, want < 0.01%s\n", scheme,
			what, as, enforce ? "" : " (report only)");
		bad += enforce;
	}
	if (sys >= 0.01) {
		fprintf(stderr, "%s %s: server channel syscalls / messages = %.5f, want < 0.01%s\n",
			scheme, what, sys, enforce ? "" : " (report only)");
		bad += enforce;
	}
	return bad;
}

static void counters(const char *scheme, zl_listener *l)
{
	rounds = tl_scaled(ROUNDS);
	if (rounds < 2)
		rounds = 2;
	pick_cpus();
	bool two = cpu_a >= 0 && cpu_b >= 0;
	bool ring = !strcmp(scheme, "shm");
	bool enforce = ring && two && !tl_scaled_down();
	printf("counters: %" PRIu64 " round trips, server on cpu%d, client on cpu%d%s\n", rounds,
	       cpu_a, cpu_b,
	       !ring ? " (bounds for shm only: checking replies)"
	       : !two ? " (one CPU: bounds report only)"
	       : tl_scaled_down() ? " (scaled down: bounds report only)" : "");
	if (two)
		pin(cpu_a);
	pid_t pid = tl_fork(pingpong_client, NULL, 100);
	zl_channel *ch = tl_accept(l, TMO);
	zl_poller *p;
	CHECK_OK(zl_poller_create(-1, &p));
	int cid = zl_poller_add_channel(p, ch, ZL_POLLIN, NULL);
	CHECK(cid >= 0);
	struct figures f0, f1, f2;
	uint64_t served = 0;
	snap(p, ch, &f0);
	serve(p, ch, cid, NULL, -1, &served, rounds / 2);
	/* the second half beside a listener and an idle pipe */
	struct tl_pipe pp;
	tl_pipe_init(&pp);
	int lid = zl_poller_add_listener(p, l, NULL);
	int rid = zl_poller_add_fd(p, pp.rd, ZL_POLLIN, NULL);
	CHECK(lid >= 0 && rid >= 0);
	snap(p, ch, &f1);
	serve(p, ch, cid, l, lid, &served, rounds);
	snap(p, ch, &f2);
	int bad = report_phase(scheme, "channel alone", &f0, &f1, ring, enforce);
	bad += report_phase(scheme, "beside a listener and a pipe", &f1, &f2, ring, enforce);

	/* the client closes after the last reply */
	uint64_t waits;
	uint32_t m = await_id(p, cid, 1000000, &waits);
	CHECKF(m & (ZL_POLLIN | ZL_POLLHUP), "client's close not reported (%s)", evs(m));
	uint8_t buf[128];
	size_t len;
	CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, 0), -ECONNRESET);
	tl_reap_ok(pid, 10000);
	zl_poller_destroy(p);
	zl_close(ch);
	close(pp.rd);
	close(pp.wr);
	if (two)
		sched_setaffinity(0, sizeof(start_cpus), &start_cpus);
	failures += bad;
}

int main(int argc, char **argv)
{
	const char *scheme = tl_scheme_arg(argc, argv);
	tl_watchdog(180);
	tl_pipe_init(&to_child);
	zl_listener *l = tl_listen(scheme, "", url, sizeof(url));
	semantics(l);
	dead_peers(l);
	counters(scheme, l);
	zl_listener_close(l);
	CHECKF(!failures, "%d checks failed (above)", failures);
	return T_EXIT_PASS;
}
