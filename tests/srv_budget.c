/* SPDX-License-Identifier: MIT */
/*
 * srv_budget (argv[1]: tcp or unix): a raw client that sends requests and
 * never reads a reply. Each reply queued frees the request's slot, so the
 * client could keep sending; the server must stop taking its requests once
 * max_queued bytes of replies wait for it (zl_server_info.paused, a log
 * line), keep its own memory within that budget, and keep serving an honest
 * client at its usual speed. Then several such clients, each under its own
 * budget but together over max_queued_total: the largest queues are
 * dropped, and the server's memory stays within the total.
 *
 * The attacker speaks the wire formats itself (stream hello and frames,
 * srv_hello, srv_hdr): the library's client never has more than K requests
 * open.
 */
#include <endian.h>
#include <poll.h>
#include <sys/socket.h>

#include "srvlib.h"
#include "wire.h"

#define T_OUT 10000000
#define REQ (256 * 1024)  /* each request, and its echo */
#define NREQ 600          /* 150 MiB of replies without the budget */
#define BUDGET (8u << 20) /* max_queued */
#define SLACK_KB (48 * 1024)
#define TOTAL (3 * BUDGET) /* max_queued_total: one attacker stays under it */
#define MANY 6            /* attackers that together would pass it */

static char url[600];

/* Write len bytes before the deadline; 0 or -1 (the server stopped
 * reading, which is what the budget does). */
static int put(int fd, const void *buf, size_t len, int64_t deadline)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		struct pollfd pf = { .fd = fd, .events = POLLOUT };
		int64_t left = deadline - tl_now_us();
		if (left <= 0 || poll(&pf, 1, (int)(left / 1000) + 1) < 0)
			return -1;
	}
	return 0;
}

static int frame(int fd, const void *a, size_t alen, const void *b, size_t blen, int64_t dl)
{
	uint32_t h = htole32((uint32_t)(alen + blen));
	return put(fd, &h, 4, dl) || put(fd, a, alen, dl) || (blen && put(fd, b, blen, dl));
}

/* The attacker: hello, then NREQ echo requests over the K slots, never a
 * read; reports how many it got out, then waits to be killed. */
static int hoarder(void *arg)
{
	struct tl_pipe *done = arg;
	int fd = tl_raw_connect(url);
	uint8_t hello[16] = { 'Z', 'L', 'S', 'T' };
	uint16_t ver = htole16(ZL_PROTO_VERSION);
	uint64_t max = htole64(64ull << 20);
	memcpy(hello + 4, &ver, 2);
	memcpy(hello + 8, &max, 8);
	int64_t dl = tl_now_us() + 5000000;
	struct srv_hello sh = { .magic = SRV_MAGIC, .version = SRV_VERSION, .size = sizeof(sh) };
	if (put(fd, hello, sizeof(hello), dl) || frame(fd, &sh, sizeof(sh), NULL, 0, dl))
		return 1;
	static uint8_t body[REQ];
	memset(body, 0x5a, sizeof(body));
	uint32_t sent = 0;
	for (; sent < NREQ; sent++) {
		struct srv_hdr h = { .type = 1, .slot = (uint16_t)(sent % 4), .len = REQ };
		atomic_store(&h.seq, 1 + sent / 4); /* as if each had been answered */
		if (frame(fd, &h, sizeof(h), body, sizeof(body), dl))
			break;
	}
	tl_pipe_put(done, &sent, sizeof(sent));
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	const char *tr = argc > 1 ? argv[1] : "tcp";
	struct zl_server_opts o;
	zl_server_opts_init(&o);
	o.max_queued = BUDGET;
	o.max_queued_total = TOTAL;
	struct tl_srv s;
	tl_srv_start(&s, tr, "", &o);
	snprintf(url, sizeof(url), "%s", s.url);

	/* a quiet baseline for the honest client, and memory after warm-up */
	zl_client *c = tl_client(url, T_OUT);
	int64_t t0 = tl_now_us();
	for (uint64_t i = 0; i < 200; i++)
		tl_call_check(c, 3, 64, i, T_OUT);
	int64_t quiet = tl_now_us() - t0;
	tl_call_check(c, 2, REQ, 1, T_OUT);
	long rss0 = tl_rss_kb();

	struct tl_pipe done;
	tl_pipe_init(&done);
	pid_t pid = tl_fork(hoarder, &done, 60);
	uint32_t sent;
	tl_pipe_get(&done, &sent, sizeof(sent), 20000);
	printf("attacker wrote %u requests of %d KiB and read nothing\n", sent, REQ / 1024);

	t0 = tl_now_us();
	for (uint64_t i = 0; i < 200; i++)
		tl_call_check(c, 3, 64, 1000 + i, T_OUT);
	int64_t busy = tl_now_us() - t0;
	zl_client *c2 = tl_client(url, 1000000); /* and a new client gets in */
	tl_call_check(c2, 1, 1000, 7, T_OUT);
	zl_client_close(c2);

	struct zl_server_info in;
	CHECK_OK(zl_server_info(s.srv, &in));
	long grew = tl_rss_kb() - rss0;
	printf("server: paused %" PRIu64 " times; RSS grew %ld KiB (budget %u KiB + slack)\n",
	       in.paused, grew, BUDGET / 1024);
	printf("honest: 200 calls took %" PRId64 " us quiet, %" PRId64 " us beside the attacker\n",
	       quiet, busy);
	CHECKF(in.paused >= 1, "the server never paused the client that does not read");
	CHECKF(grew < (long)(BUDGET / 1024) + SLACK_KB, "server RSS grew by %ld KiB", grew);
	tl_check_latency("honest calls beside the attacker", TL_SLOW_US, busy / 200, 0);

	kill(pid, SIGKILL);
	tl_wait_child(pid, 5000);
	tl_call_check(c, 3, 64, 5000, T_OUT);

	/* MANY attackers, each under max_queued, together over max_queued_total:
	 * the biggest queues are dropped and memory stays within the total */
	rss0 = tl_rss_kb();
	pid_t many[MANY];
	for (int i = 0; i < MANY; i++)
		many[i] = tl_fork(hoarder, &done, 60);
	for (int i = 0; i < MANY; i++)
		tl_pipe_get(&done, &sent, sizeof(sent), 20000);
	tl_call_check(c, 3, 64, 6000, T_OUT);
	struct zl_server_info in2;
	CHECK_OK(zl_server_info(s.srv, &in2));
	grew = tl_rss_kb() - rss0;
	uint64_t dropped = in2.clients_dropped - in.clients_dropped;
	printf("%d attackers: %" PRIu64 " dropped; RSS grew %ld KiB (max_queued_total %u KiB)\n",
	       MANY, dropped, grew, TOTAL / 1024);
	CHECKF(dropped >= 1, "no attacker dropped past max_queued_total");
	/* the sanitizers' allocators keep freed memory (TSan: 90 MB here):
	 * the drops are checked there, the memory bound only at full speed */
	CHECKF(tl_scaled_down() || grew < (long)(TOTAL / 1024) + SLACK_KB,
	       "server RSS grew by %ld KiB", grew);
	for (int i = 0; i < MANY; i++) {
		kill(many[i], SIGKILL);
		tl_wait_child(many[i], 5000);
	}
	tl_call_check(c, 3, 64, 7000, T_OUT);
	zl_client_close(c);
	tl_srv_stop(&s);
	printf("PASS: %s: clients that never read are paused within their budget, and "
	       "dropped past the total\n", tr);
	return 0;
}
