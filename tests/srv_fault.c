/* SPDX-License-Identifier: MIT */
/*
 * zl_server under faulty and greedy clients (argv[1] transport, argv[2]
 * mode), while honest clients keep calling and check every reply:
 *   kill   clients killed (SIGKILL) or closed with requests in flight,
 *          some in the middle of a large request: the others go on, the
 *          server forgets the dead ones.
 *   stall  a client that never reads its replies (its ring fills), and one
 *          stopped (SIGSTOP) in the middle of a large request: the honest
 *          clients' calls stay under STALL_BOUND_US (tl_check_latency).
 *   fair   overload: NFAIR clients keep K requests each in flight on a
 *          handler that works SLOW_US per request. One scan rotation
 *          serves every waiting slot once, so a request waits at most
 *          about NFAIR*K*SLOW_US; we assert that requests stay within
 *          FAIR_BOUND_US (that plus a 100 ms scheduling allowance: 2 cores,
 *          9 threads; tl_check_latency, counting stalls: one stall delays
 *          all NFAIR*K calls in flight) and that no client gets under half
 *          the mean throughput (no starvation).
 */
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "srvlib.h"

#define T_OUT 10000000
/* A server that waited on a stalled client would lose at least a channel's
 * close linger (100 ms) or a timeout (seconds); scheduling noise on this
 * 2-core host stays well under it. */
#define STALL_BOUND_US TL_SLOW_US /* what tl_honest counts as slow */
#define NFAIR 8
#define SLOW_US 20
#define FAIR_BOUND_US (NFAIR * 4 * SLOW_US * 2 + 100000)

static void join_honest(struct tl_honest *h, int n, const char *what)
{
	uint64_t calls, slow;
	int64_t worst = tl_honest_join(h, n, &calls, &slow);
	printf("%s: honest clients made %" PRIu64 " calls\n", what, calls);
	if (!strcmp(what, "stall"))
		tl_check_latency("stall: honest calls", STALL_BOUND_US, worst, slow);
}

/* A child that pipelines large requests until it is killed. */
static __attribute__((noreturn)) int greedy_child(void *arg)
{
	zl_client *c = tl_client(arg, T_OUT);
	static uint8_t big[300000];
	for (;;) {
		for (int k = 0; k < zl_client_slots(c); k++)
			zl_call_send(c, k % 2 ? TL_T_DEFER : 2, big, k ? sizeof(big) : 10, T_OUT);
		const void *rep;
		size_t n;
		int tag;
		for (int k = 0; k < zl_client_slots(c); k++)
			zl_call_recv(c, &tag, &rep, &n, T_OUT);
	}
}

static void wait_clients(zl_server *srv, uint64_t want)
{
	struct zl_server_info info;
	for (int i = 0; i < 500; i++) {
		CHECK_OK(zl_server_info(srv, &info));
		if (info.clients == want)
			return;
		tl_sleep_us(10000);
	}
	FAIL("server has %" PRIu64 " clients, want %" PRIu64, info.clients, want);
}

static void mode_kill(struct tl_srv *s)
{
	_Atomic int stop = 0;
	struct tl_honest h[3];
	tl_honest_start(h, 3, s->url, &stop);
	for (int round = 0; round < 6; round++) {
		pid_t pid = tl_fork(greedy_child, s->url, 60);
		tl_sleep_us(50000 + 20000 * round);
		kill(pid, SIGKILL);
		CHECK(tl_wait_child(pid, 10000) >= 0);
	}
	/* closed with requests in flight, some of them deferred */
	zl_client *c = tl_client(s->url, T_OUT);
	CHECK(zl_call_send(c, TL_T_DEFER, "abc", 3, T_OUT) >= 0);
	CHECK(zl_call_send(c, 2, "abc", 3, T_OUT) >= 0);
	zl_client_close(c);
	atomic_store(&stop, 1);
	join_honest(h, 3, "kill");
	wait_clients(s->srv, 0);
	zl_client *after = tl_client(s->url, T_OUT); /* still serving */
	tl_call_check(after, 1, 100, 1, T_OUT);
	zl_client_close(after);
}

static int stop_child(void *arg)
{
	zl_client *c = tl_client(arg, T_OUT);
	static uint8_t big[1u << 20];
	/* a short timeout: the first fragments go, the rest waits in us */
	int r = zl_call_send(c, 1, big, sizeof(big), 2000);
	(void)r;
	raise(SIGSTOP);
	return 0;
}

static void mode_stall(struct tl_srv *s)
{
	/* never reads: K replies of 200 kB, more than its reply ring holds */
	zl_client *deaf = tl_client(s->url, T_OUT);
	static uint8_t big[200000];
	for (int k = 0; k < zl_client_slots(deaf); k++)
		CHECK(zl_call_send(deaf, 2 + (k % 2), big, sizeof(big), T_OUT) >= 0);
	pid_t pid = tl_fork(stop_child, s->url, 60);
	tl_sleep_us(100000);
	_Atomic int stop = 0;
	struct tl_honest h[3];
	tl_honest_start(h, 3, s->url, &stop);
	tl_sleep_us(1000000);
	atomic_store(&stop, 1);
	join_honest(h, 3, "stall");
	/* the deaf client still gets all its replies, intact */
	for (int k = 0; k < zl_client_slots(deaf); k++) {
		const void *rep;
		size_t n;
		int tag;
		CHECK_OK(zl_call_recv(deaf, &tag, &rep, &n, T_OUT));
		CHECK(n == sizeof(big));
	}
	zl_client_close(deaf);
	kill(pid, SIGKILL);
	CHECK(tl_wait_child(pid, 10000) >= 0);
	wait_clients(s->srv, 0);
}

struct greedy {
	const char *url;
	struct tl_thread th;
	_Atomic int *stop;
	uint64_t done, slow;
	int64_t worst_us;
	int k; /* its calls in flight */
};

static void *greedy(void *arg)
{
	struct greedy *g = arg;
	zl_client *c = tl_client(g->url, T_OUT);
	int k = zl_client_slots(c);
	g->k = k;
	int64_t sent_at[64];
	uint8_t req[64] = { 0 };
	for (int i = 0; i < k; i++) {
		int tag = zl_call_send(c, TL_T_SLOW, req, sizeof(req), T_OUT);
		CHECK(tag >= 0);
		sent_at[tag] = tl_now_us();
	}
	while (!atomic_load(g->stop)) {
		const void *rep;
		size_t n;
		int tag;
		CHECK_OK(zl_call_recv(c, &tag, &rep, &n, T_OUT));
		int64_t dt = tl_now_us() - sent_at[tag];
		if (dt > g->worst_us)
			g->worst_us = dt;
		g->slow += dt > FAIR_BOUND_US;
		g->done++;
		tag = zl_call_send(c, TL_T_SLOW, req, sizeof(req), T_OUT);
		CHECK(tag >= 0);
		sent_at[tag] = tl_now_us();
	}
	zl_client_close(c);
	return NULL;
}

static void mode_fair(struct tl_srv *s)
{
	s->busy_us = SLOW_US;
	_Atomic int stop = 0;
	struct greedy g[NFAIR];
	for (int i = 0; i < NFAIR; i++) {
		g[i] = (struct greedy){ .url = s->url, .stop = &stop };
		tl_thread_start(&g[i].th, greedy, &g[i]);
	}
	tl_sleep_us(2000000);
	atomic_store(&stop, 1);
	uint64_t total = 0, least = UINT64_MAX, slow = 0;
	int64_t worst = 0;
	for (int i = 0; i < NFAIR; i++) {
		tl_thread_join(&g[i].th, 30000);
		total += g[i].done;
		least = g[i].done < least ? g[i].done : least;
		worst = g[i].worst_us > worst ? g[i].worst_us : worst;
		slow += g[i].slow;
		printf("client %d: %" PRIu64 " requests, worst %" PRId64 " us\n", i, g[i].done,
		       g[i].worst_us);
	}
	printf("fair: %d clients, %" PRIu64 " requests in 2 s, least %" PRIu64
	       ", worst latency %" PRId64 " us (bound %d us)\n", NFAIR, total, least, worst,
	       FAIR_BOUND_US);
	/* One stall of the serving thread (the host's scheduling) makes every
	 * call in flight slow at once, NFAIR * K of them: count stalls, each
	 * at least that many slow calls, against tl_check_latency's allowance. */
	uint64_t in_flight = 0;
	for (int i = 0; i < NFAIR; i++)
		in_flight += (uint64_t)g[i].k;
	printf("fair: %" PRIu64 " slow calls, %" PRIu64 " in flight\n", slow, in_flight);
	tl_check_latency("fair: stalls (slow calls / calls in flight)", FAIR_BOUND_US, worst,
			 (slow + in_flight - 1) / in_flight);
	CHECKF(least * 2 * NFAIR >= total, "a client got %" PRIu64 " of %" PRIu64, least, total);
}

int main(int argc, char **argv)
{
	const char *scheme = tl_scheme_arg(argc, argv);
	const char *mode = argc > 2 ? argv[2] : "kill";
	tl_watchdog(200);
	signal(SIGPIPE, SIG_IGN);
	struct tl_srv s;
	tl_srv_start(&s, scheme, NULL, NULL);
	if (!strcmp(mode, "kill"))
		mode_kill(&s);
	else if (!strcmp(mode, "stall"))
		mode_stall(&s);
	else if (!strcmp(mode, "fair"))
		mode_fair(&s);
	else
		FAIL("unknown mode %s", mode);
	struct zl_server_info info;
	CHECK_OK(zl_server_info(s.srv, &info));
	printf("server: %" PRIu64 " requests, %" PRIu64 " clients total, %" PRIu64 " dropped\n",
	       info.requests, info.clients_total, info.clients_dropped);
	tl_srv_stop(&s);
	return 0;
}
