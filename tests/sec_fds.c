/* SPDX-License-Identifier: MIT */
/*
 * sec_fds: shared fd flags cannot hang us. An fd passed over SCM_RIGHTS
 * shares its open file, status flags included, with the peer that holds
 * it: a peer that clears O_NONBLOCK on one we read or write would make
 * that read or write block for good (before ff807dc the shm wake-up
 * eventfds were such fds; a second read of an empty one blocked). A raw
 * peer (tests/lib/rawshm.c) therefore clears O_NONBLOCK on every fd it
 * received, sets every sleeping flag in the shared control pages (so that
 * we wake it, and look for its wake-ups), floods the socket with wake-up
 * records and stops reading.
 *   a) a zl_accept'ed 1:1 channel: every call returns within its timeout
 *      (+ SLACK_US), zl_channel_fd and poll work, a message the peer
 *      writes still arrives, zl_close returns promptly;
 *   b) zl_server: a raw client does that and exits; honest clients,
 *      connected before and after, get correct replies in bounded time.
 * A hang is caught by the watchdog; each step is printed first.
 */
#include <poll.h>
#include <stdatomic.h>

#include "rawshm.h"
#include "srvlib.h"

#define TMO 5000000
#define SLACK_US 500000
#define RAW_RING 65536u

static void step(const char *what) { printf("  %s\n", what); }

/* expr (a zl_* call with timeout tmo_us) must give a or b within tmo_us +
 * SLACK_US. */
#define BOUNDED(expr, tmo_us, a, b)                                              \
	do {                                                                     \
		int64_t t0_ = tl_now_us();                                       \
		int r_ = (expr);                                                 \
		int64_t dt_ = tl_now_us() - t0_;                                 \
		CHECKF(r_ == (a) || r_ == (b), "%s = %d (%s)", #expr, r_,        \
		       zl_strerror(r_));                                         \
		CHECKF(dt_ <= (tmo_us) + SLACK_US, "%s took %" PRId64 " us",     \
		       #expr, dt_);                                              \
	} while (0)

/* The attack on the pages: every sleeping flag set, in our ring's control
 * page and in the peer's (the peer then wakes us, and looks for our
 * wake-ups, on every occasion). */
static void set_flags(struct raw_shm *r)
{
	struct shm_ctl *c[2] = { raw_ctl(r->map), raw_ctl(r->peer_map) };
	for (int i = 0; i < 2; i++) {
		atomic_store(&c[i]->rx_sleeping, 1);
		atomic_store(&c[i]->tx_sleeping, 1);
	}
}

static void attack(struct raw_shm *r)
{
	set_flags(r);
	long n = raw_shm_flood(r->sock, 20);
	printf("  raw peer: flags set, %ld wake-up records queued\n", n);
}

/* ---- a) the 1:1 channel ------------------------------------------------ */

static void chan_case(void)
{
	printf("a) zl_accept'ed shm channel, raw peer\n");
	char url[600], buf[2048];
	size_t len;
	zl_listener *l = tl_listen("shm", NULL, url, sizeof(url));
	struct raw_shm r;
	raw_shm_hello(&r, url, RAW_RING);
	zl_channel *ch = tl_accept(l, TMO);
	CHECK_OK(raw_shm_answer(&r, TMO));
	zl_listener_close(l);
	raw_clear_flags(r.peer_fd); /* all it received: the memfd */
	attack(&r);

	step("zl_recv with 200 ms, nothing sent");
	BOUNDED(zl_recv(ch, buf, sizeof(buf), &len, 200000), 200000, -ETIMEDOUT, -ECONNRESET);
	step("zl_recv_peek with 100 ms");
	const void *p;
	BOUNDED(zl_recv_peek(ch, &p, &len, 100000), 100000, -ETIMEDOUT, -ECONNRESET);

	step("zl_channel_fd, poll, zl_recv with 0 (three rounds)");
	int fd = zl_channel_fd(ch);
	CHECK(fd >= 0);
	for (int i = 0; i < 3; i++) {
		attack(&r);
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int64_t t0 = tl_now_us();
		CHECK(poll(&pf, 1, 100) >= 0);
		CHECK(tl_now_us() - t0 <= 100000 + SLACK_US);
		/* as an event loop does: until -EAGAIN, and once more */
		for (int k = 0; k < 2; k++)
			BOUNDED(zl_recv(ch, buf, sizeof(buf), &len, 0), 0, -EAGAIN, -ECONNRESET);
	}

	step("a message from the raw peer still arrives");
	tl_fill(buf, 100, 7);
	raw_shm_put(&r, buf, 100, ZL_REC_MSG);
	attack(&r);
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	CHECK(poll(&pf, 1, 1000) == 1);
	tl_recv_expect(ch, buf, sizeof(buf), 100, 7, TMO);

	step("zl_send until the peer's ring is full (it does not read), then 200 ms");
	int k = 0;
	tl_fill(buf, 1000, 9);
	while (zl_send(ch, buf, 1000, 0) == 0)
		CHECK(++k < 1000);
	printf("  %d messages fit\n", k);
	attack(&r);
	BOUNDED(zl_send(ch, buf, 1000, 0), 0, -EAGAIN, -ECONNRESET);
	BOUNDED(zl_send(ch, buf, 1000, 200000), 200000, -ETIMEDOUT, -ECONNRESET);
	BOUNDED(zl_recv(ch, buf, sizeof(buf), &len, 100000), 100000, -ETIMEDOUT, -ECONNRESET);

	step("zl_close");
	int64_t t0 = tl_now_us();
	zl_close(ch);
	CHECKF(tl_now_us() - t0 <= SLACK_US, "zl_close took %" PRId64 " us", tl_now_us() - t0);
	raw_shm_close(&r);
}

/* ---- b) zl_server ------------------------------------------------------ */

/* Forked before any thread exists; learns the URL through the pipe. */
static int raw_client(void *arg)
{
	char url[600];
	tl_pipe_get(arg, url, sizeof(url), 30000);
	struct raw_srv c;
	CHECK_OK(raw_srv_join(&c, url, RAW_RING, TMO));
	/* all it received: the server's ring, the flag array, its page */
	raw_clear_flags(c.s.peer_fd);
	raw_clear_flags(c.fds[0]);
	raw_clear_flags(c.fds[1]);
	set_flags(&c.s);
	atomic_store(&((struct srv_page_ctl *)c.page)->srv_sleeping, 1);
	long n = raw_shm_flood(c.s.sock, 300);
	printf("  raw client: fd flags cleared, %ld wake-up records sent, exits\n", n);
	CHECKF(n >= 1000, "only %ld wake-up records went out", n);
	return 0; /* everything still open: the exit closes it */
}

static void server_case(void)
{
	printf("b) zl_server, raw client\n");
	struct tl_pipe pp;
	tl_pipe_init(&pp);
	pid_t pid = tl_fork(raw_client, &pp, 60);
	struct tl_srv s;
	tl_srv_start(&s, "shm", NULL, NULL);
	_Atomic int stop = 0;
	struct tl_honest h[2];
	tl_honest_start(h, 2, s.url, &stop); /* connected before, calling throughout */
	tl_sleep_us(100000);
	char url[600] = { 0 };
	snprintf(url, sizeof(url), "%s", s.url);
	tl_pipe_put(&pp, url, sizeof(url));
	tl_reap_ok(pid, 30000);

	step("a client connected after");
	zl_client *after = tl_client(s.url, TMO);
	int64_t worst_after = 0;
	uint64_t slow_after = 0;
	for (int i = 0; i < 200; i++) {
		int64_t t0 = tl_now_us();
		tl_call_check(after, 1 + i % 4, (size_t)(i * 7) % 600, 1000 + (uint64_t)i, TMO);
		int64_t dt = tl_now_us() - t0;
		worst_after = dt > worst_after ? dt : worst_after;
		slow_after += dt > TL_SLOW_US;
	}
	zl_client_close(after);
	atomic_store(&stop, 1);
	uint64_t calls, slow;
	int64_t worst = tl_honest_join(h, 2, &calls, &slow);
	printf("  honest: %" PRIu64 " calls before and during, worst %" PRId64
	       " us; after: worst %" PRId64 " us\n", calls, worst, worst_after);
	tl_check_latency("honest calls", TL_SLOW_US, worst > worst_after ? worst : worst_after,
			 slow + slow_after);
	tl_srv_stop(&s);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tl_watchdog(90);
	server_case(); /* first: its raw client is forked before any thread */
	chan_case();
	printf("PASS\n");
	return T_EXIT_PASS;
}
