/* SPDX-License-Identifier: MIT */
/*
 * chan_handshakes TRANSPORT: on a 1:1 listener, peers that stall in their
 * handshake keep nobody out of zl_accept. A server thread accepts and
 * echoes one message per channel, either blocking in zl_accept or, as an
 * event loop does, polling zl_listener_fd and calling zl_accept(l, 0).
 * Against it, in both modes:
 *   - silent peers (connected, nothing sent) and, on tcp and unix,
 *     half-open ones (3 bytes of the stream hello's magic);
 *   - a flood of 300 silent connections, over max_handshakes (64): the
 *     oldest are dropped;
 * and each time honest clients must connect within 1 s and get their echo.
 * With a 200 ms handshake timeout, silent peers are dropped in time even
 * when the event loop calls zl_accept only once the listener fd is
 * readable (its timer makes it so). No fd may leak.
 */
#include <poll.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include "chanlib.h"

#define MAX_RAW 512

static const char *scheme;
static int raw[MAX_RAW], nraw;

struct srv {
	zl_listener *l;
	bool poll_mode;
	atomic_bool stop;
	atomic_int served, failed;
};

static void *serve(void *arg)
{
	struct srv *s = arg;
	while (!atomic_load(&s->stop)) {
		zl_channel *ch;
		int r;
		if (s->poll_mode) {
			struct pollfd p = { .fd = zl_listener_fd(s->l), .events = POLLIN };
			if (poll(&p, 1, 50) <= 0)
				continue;
			r = zl_accept(s->l, 0, &ch);
		} else {
			r = zl_accept(s->l, 50000, &ch);
		}
		if (r == -EAGAIN || r == -ETIMEDOUT)
			continue;
		if (r) { /* a failed handshake is an attacker's: counted, not fatal */
			atomic_fetch_add(&s->failed, 1);
			continue;
		}
		char buf[256];
		size_t len;
		if (!zl_recv(ch, buf, sizeof(buf), &len, 2000000) && !zl_send(ch, buf, len, 2000000))
			atomic_fetch_add(&s->served, 1);
		zl_close(ch);
	}
	return NULL;
}

static void keep(int fd)
{
	CHECK(nraw < MAX_RAW);
	raw[nraw++] = fd;
}

static void close_raw(void)
{
	while (nraw)
		close(raw[--nraw]);
	usleep(100000); /* the listener notices meanwhile */
}

/* Connect within 1 s and get the echo. */
static void honest(const char *url, const char *what)
{
	int64_t t0 = tl_now_us();
	zl_channel *ch = NULL;
	int r = zl_connect(url, NULL, 1000000, &ch);
	int64_t took = tl_now_us() - t0;
	CHECKF(r == 0, "%s: honest client: %s after %" PRId64 " us", what, zl_strerror(r), took);
	char buf[64] = "honest", back[64];
	size_t len;
	CHECK_OK(zl_send(ch, buf, sizeof(buf), 1000000));
	CHECK_OK(zl_recv(ch, back, sizeof(back), &len, 2000000));
	CHECK(len == sizeof(buf) && !memcmp(buf, back, len));
	zl_close(ch);
	printf("%s: connected in %" PRId64 " us\n", what, took);
}

static void stall(const char *url)
{
	static const uint8_t magic[3] = { 'Z', 'L', 'S' };
	for (int i = 0; i < 20; i++) {
		keep(tl_raw_connect(url));
		if (strcmp(scheme, "shm")) {
			int fd = tl_raw_connect(url);
			CHECK(send(fd, magic, 3, MSG_NOSIGNAL) == 3);
			keep(fd);
		}
	}
	usleep(100000);
}

static void flood(const char *url)
{
	for (int i = 0; i < 300; i++)
		keep(tl_raw_connect(url));
	usleep(200000);
	int dropped = 0;
	for (int i = 0; i < nraw; i++)
		dropped += tl_dropped(raw[i], 0);
	printf("flood: %d of 300 silent peers dropped\n", dropped);
	CHECKF(dropped >= 300 - 64, "only %d of 300 flooding peers dropped", dropped);
}

static void run(bool poll_mode)
{
	char url[600];
	struct srv s = { .poll_mode = poll_mode };
	const char *mode = poll_mode ? "poll" : "block";
	s.l = tl_listen(scheme, "", url, sizeof(url));
	struct tl_thread t;
	tl_thread_start(&t, serve, &s);
	honest(url, mode);
	stall(url);
	for (int i = 0; i < 3; i++)
		honest(url, poll_mode ? "poll, 20-40 stalled peers" : "block, 20-40 stalled peers");
	close_raw();
	flood(url);
	for (int i = 0; i < 3; i++)
		honest(url, poll_mode ? "poll, after a flood of 300" : "block, after a flood of 300");
	close_raw();
	atomic_store(&s.stop, true);
	tl_thread_join(&t, 5000);
	CHECKF(atomic_load(&s.served) == 7, "%s: served %d honest clients, want 7", mode,
	       atomic_load(&s.served));
	zl_listener_close(s.l);
}

/* Silent peers are dropped at their handshake timeout by an event loop
 * that only calls zl_accept when the listener's fd turns readable. */
static void expiry(void)
{
	char url[600];
	struct srv s = { .poll_mode = true };
	s.l = tl_listen(scheme, "handshake_timeout_us=200000", url, sizeof(url));
	struct tl_thread t;
	tl_thread_start(&t, serve, &s);
	for (int i = 0; i < 5; i++)
		keep(tl_raw_connect(url));
	int64_t t0 = tl_now_us();
	for (int i = 0; i < nraw; i++)
		CHECKF(tl_dropped(raw[i], 2000), "silent peer %d not dropped in 2 s", i);
	int64_t took = tl_now_us() - t0;
	printf("expiry: 5 silent peers dropped after %" PRId64 " ms (handshake timeout 200 ms)\n",
	       took / 1000);
	CHECK(took >= 150000);
	close_raw();
	atomic_store(&s.stop, true);
	tl_thread_join(&t, 5000);
	zl_listener_close(s.l);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	scheme = tl_scheme_arg(argc, argv);
	tl_watchdog(100);
	int fds = tl_fd_count();
	run(false);
	run(true);
	expiry();
	CHECKF(tl_fd_count() == fds, "%d fds before, %d after", fds, tl_fd_count());
	printf("PASS: stalled handshakes keep nobody out of zl_accept (%s)\n", scheme);
	return 0;
}
