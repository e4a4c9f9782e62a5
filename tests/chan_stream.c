/* SPDX-License-Identifier: MIT */
/*
 * chan_stream SCHEME [duplex]: 10^5 messages of random sizes (0 .. 3 x the
 * ring size, with ?ring=65536; plus a few of up to 8 MiB) with sequence
 * numbers in the pattern; a forked peer checks and echoes every message.
 *   default: one client thread with nonblocking send/flush/recv interleaved
 *   duplex:  one client thread sends (every 4th send with timeout 0, so
 *            fragments are left pending), another receives, concurrently
 */
#include "chanlib.h"

#define RING 65536u
#define BIGMAX (8u << 20)
#define TMO 10000000
#define NO_PROGRESS_US 10000000

static char url[600];
static uint64_t seed, nmsg;

static size_t msg_len(uint64_t id)
{
	uint64_t s = seed ^ (id * 0x9e3779b97f4a7c15ull);
	uint64_t r = tl_splitmix(&s);
	if (id % 5000 == 4999)
		return 1 + (size_t)(r % BIGMAX); /* large: many fragments */
	switch (r % 100) {
	case 0:
		return (size_t)((r >> 8) % (3 * RING + 1));
	case 1: case 2: case 3: case 4: case 5: case 6: case 7: case 8: case 9:
		return (size_t)((r >> 8) % (RING + 1));
	default:
		return (size_t)((r >> 8) % 257);
	}
}

/* the peer: check every message and send it back */
static int echo_peer(void *arg)
{
	(void)arg;
	zl_channel *ch = tl_connect(url, TMO);
	uint8_t *buf = malloc(BIGMAX);
	CHECK(buf);
	for (uint64_t id = 0; id < nmsg; id++) {
		size_t len = msg_len(id);
		tl_recv_expect(ch, buf, BIGMAX, len, id, TMO);
		int rc = zl_send(ch, buf, len, TMO);
		CHECKF(rc == 0, "peer: echo of %" PRIu64 " = %d (%s)", id, rc, zl_strerror(rc));
	}
	CHECK_OK(zl_flush(ch, TMO));
	/* wait for the client's goodbye before closing */
	size_t len;
	CHECK_RC(zl_recv(ch, buf, BIGMAX, &len, TMO), 0);
	zl_close(ch);
	free(buf);
	return 0;
}

static void check_echo(const uint8_t *buf, size_t len, uint64_t id)
{
	size_t want = msg_len(id);
	CHECKF(len == want, "echo %" PRIu64 ": length %zu, expected %zu", id, len, want);
	CHECK_PATTERN(buf, len, id);
}

/* one thread: never blocks, so it can't deadlock against the echo */
static void run_single(zl_channel *ch, uint8_t *sbuf, uint8_t *rbuf)
{
	uint64_t sent = 0, got = 0, eagain_send = 0, eagain_flush = 0, waits = 0;
	bool pending = false;
	int64_t last = tl_now_us();
	const uint64_t window = 16;
	while (got < nmsg) {
		bool progress = false;
		if (pending) {
			int rc = zl_flush(ch, 0);
			if (rc == 0) {
				pending = false;
				progress = true;
			} else {
				CHECK_RC(rc, -EAGAIN);
				eagain_flush++;
			}
		}
		if (!pending && sent < nmsg && sent - got < window) {
			size_t len = msg_len(sent);
			tl_fill(sbuf, len, sent);
			int rc = zl_send(ch, sbuf, len, 0);
			if (rc == 0) {
				sent++;
				pending = true; /* maybe: zl_flush tells */
				progress = true;
			} else {
				CHECKF(rc == -EAGAIN, "zl_send(%" PRIu64 ", len %zu, 0) = %d (%s)", sent,
				       len, rc, zl_strerror(rc));
				eagain_send++;
			}
		}
		size_t len;
		int rc = zl_recv(ch, rbuf, BIGMAX, &len, progress ? 0 : 1000);
		if (rc == 0) {
			check_echo(rbuf, len, got++);
			progress = true;
		} else {
			CHECKF(rc == -EAGAIN || rc == -ETIMEDOUT, "zl_recv = %d (%s) at echo %" PRIu64,
			       rc, zl_strerror(rc), got);
			waits += !progress;
		}
		if (progress)
			last = tl_now_us();
		else if (tl_now_us() - last > NO_PROGRESS_US)
			FAIL("no progress for 10 s: sent %" PRIu64 " received %" PRIu64, sent, got);
	}
	printf("single thread: %" PRIu64 " send -EAGAIN, %" PRIu64 " flush -EAGAIN, %" PRIu64
	       " idle waits\n",
	       eagain_send, eagain_flush, waits);
}

struct sender {
	zl_channel *ch;
	uint8_t *buf;
};

static void *sender_thread(void *p)
{
	struct sender *s = p;
	for (uint64_t id = 0; id < nmsg; id++) {
		size_t len = msg_len(id);
		tl_fill(s->buf, len, id);
		/* every 4th send polls: a fragmented message may then be accepted
		 * with its rest kept, which later calls push out, while the other
		 * thread keeps receiving */
		int rc = zl_send(s->ch, s->buf, len, id % 4 ? TMO : 0);
		if (rc == -EAGAIN)
			rc = zl_send(s->ch, s->buf, len, TMO);
		CHECKF(rc == 0, "sender: zl_send(%" PRIu64 ") = %d (%s)", id, rc, zl_strerror(rc));
	}
	CHECK_OK(zl_flush(s->ch, TMO));
	return NULL;
}

static void run_duplex(zl_channel *ch, uint8_t *sbuf, uint8_t *rbuf)
{
	struct sender s = { ch, sbuf };
	struct tl_thread th;
	tl_thread_start(&th, sender_thread, &s);
	for (uint64_t id = 0; id < nmsg; id++) {
		size_t len;
		int rc = zl_recv(ch, rbuf, BIGMAX, &len, TMO);
		CHECKF(rc == 0, "receiver: zl_recv(echo %" PRIu64 ") = %d (%s)", id, rc,
		       zl_strerror(rc));
		check_echo(rbuf, len, id);
	}
	tl_thread_join(&th, 30000);
}

int main(int argc, char **argv)
{
	const char *scheme = tl_scheme_arg(argc, argv);
	bool duplex = argc > 2 && !strcmp(argv[2], "duplex");
	tl_watchdog(110);
	seed = tl_seed();
	nmsg = tl_scaled(100000);
	zl_listener *l = tl_listen(scheme, "ring=65536", url, sizeof(url));
	pid_t pid = tl_fork(echo_peer, NULL, 100);
	zl_channel *ch = tl_accept(l, TMO);
	zl_listener_close(l);

	uint8_t *sbuf = malloc(BIGMAX), *rbuf = malloc(BIGMAX);
	CHECK(sbuf && rbuf);
	uint64_t bytes = 0;
	for (uint64_t id = 0; id < nmsg; id++)
		bytes += msg_len(id);
	int64_t t0 = tl_now_us();
	if (duplex)
		run_duplex(ch, sbuf, rbuf);
	else
		run_single(ch, sbuf, rbuf);
	int64_t dt = tl_now_us() - t0;
	tl_send_pattern(ch, 0, 0, TMO); /* goodbye */
	tl_reap_ok(pid, 20000);
	struct zl_channel_info in;
	CHECK_OK(zl_channel_info(ch, &in));
	CHECK_EQ_U64(in.msgs_recv, nmsg);
	CHECK_EQ_U64(in.bytes_recv, bytes);
	printf("%s %s: %" PRIu64 " messages, %.1f MB each way, echoed in %.2f s (%.0f MB/s both "
	       "ways); sleeps %" PRIu64 " wakeups %" PRIu64 "\n",
	       scheme, duplex ? "duplex" : "single", nmsg, bytes / 1e6, dt / 1e6,
	       2 * bytes / (double)dt, in.sleeps, in.wakeups_sent);
	zl_close(ch);
	free(sbuf);
	free(rbuf);
	return T_EXIT_PASS;
}
