/* SPDX-License-Identifier: MIT */
/*
 * chan_hostile_shm: raw clients on the shm rendezvous socket send garbage
 * instead of a handshake. zl_accept must refuse each (-EPROTO; a client
 * that hangs up early or stays silent may give -ECONNRESET / -ETIMEDOUT),
 * leak no fd, and the listener must keep working for the next good client.
 * (Garbage bytes only; structure-aware cases belong with the handshake.)
 */
#include <fcntl.h>
#include <sys/socket.h>

#include "chanlib.h"

#define TMO 5000000

static char url[600];
static zl_listener *l;

static int good_client(void *arg)
{
	(void)arg;
	zl_channel *ch = tl_connect(url, TMO);
	tl_send_pattern(ch, 77, 1, TMO);
	uint8_t buf[100];
	tl_recv_expect(ch, buf, sizeof(buf), 55, 2, TMO);
	zl_close(ch);
	return 0;
}

static void listener_still_works(void)
{
	pid_t pid = tl_fork(good_client, NULL, 30);
	zl_channel *ch = tl_accept(l, TMO);
	uint8_t buf[100];
	tl_recv_expect(ch, buf, sizeof(buf), 77, 1, TMO);
	tl_send_pattern(ch, 55, 2, TMO);
	tl_reap_ok(pid, 10000);
	zl_close(ch);
}

/* Garbage with nfds harmless fds (/dev/null) attached. */
static void send_with_fds(int fd, const void *buf, size_t len, int nfds)
{
	int fds[8];
	for (int i = 0; i < nfds; i++)
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	tl_send_fds(fd, buf, len, fds, nfds);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
}

enum action { GARBAGE, HANG_UP, SILENT };

/* zl_accept gets tmo_us; a peer that left or never completes is dropped
 * without ending the call, which then times out. */
static void hostile(const char *what, enum action a, size_t len, int nfds, int want,
		    int alt_want, int64_t tmo_us)
{
	int fds_before = tl_fd_count();
	int fd = tl_raw_connect(url);
	uint8_t *junk = malloc(len + 1);
	CHECK(junk);
	struct tl_rng r = { len * 7919 + (uint64_t)nfds };
	for (size_t i = 0; i < len; i++)
		junk[i] = (uint8_t)tl_rand(&r);
	if (a == GARBAGE)
		send_with_fds(fd, junk, len, nfds);
	else if (a == HANG_UP)
		close(fd);
	zl_channel *ch = NULL;
	int64_t t0 = tl_now_us();
	int rc = zl_accept(l, tmo_us, &ch);
	int64_t dt = tl_now_us() - t0;
	CHECKF(rc == want || rc == alt_want, "%s: zl_accept = %d (%s), expected %s", what, rc,
	       zl_strerror(rc), zl_strerror(want));
	CHECK(dt < tmo_us + 500000);
	if (a == SILENT) { /* expired and dropped: our end reads EOF */
		char c;
		CHECKF(recv(fd, &c, 1, MSG_DONTWAIT) == 0, "%s: not dropped", what);
	}
	if (a != HANG_UP)
		close(fd);
	int fds_after = tl_fd_count();
	CHECKF(fds_after == fds_before, "%s: %d fds before, %d after (leak)", what, fds_before,
	       fds_after);
	printf("%-40s -> %s (%.1f ms)\n", what, zl_strerror(rc), dt / 1e3);
	free(junk);
	listener_still_works();
}

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	setvbuf(stdout, NULL, _IOLBF, 0);
	tl_watchdog(60);
	l = tl_listen("shm", "handshake_timeout_us=300000", url, sizeof(url));
	listener_still_works();
	hostile("1 garbage byte", GARBAGE, 1, 0, -EPROTO, -EPROTO, 2000000);
	hostile("40 garbage bytes (hello-sized)", GARBAGE, 40, 0, -EPROTO, -EPROTO, 2000000);
	hostile("64 garbage bytes", GARBAGE, 64, 0, -EPROTO, -EPROTO, 2000000);
	hostile("64 KiB garbage", GARBAGE, 65536, 0, -EPROTO, -EPROTO, 2000000);
	hostile("40 garbage bytes + 3 fds", GARBAGE, 40, 3, -EPROTO, -EPROTO, 2000000);
	hostile("40 garbage bytes + 4 fds", GARBAGE, 40, 4, -EPROTO, -EPROTO, 2000000);
	hostile("64 garbage bytes + 1 fd", GARBAGE, 64, 1, -EPROTO, -EPROTO, 2000000);
	hostile("40 garbage bytes + 4 fds (hello-sized)", GARBAGE, 40, 4, -EPROTO, -EPROTO, 2000000);
	hostile("empty message", GARBAGE, 0, 0, -EPROTO, -ETIMEDOUT, 500000);
	hostile("hang up without a word", HANG_UP, 0, 0, -ETIMEDOUT, -ETIMEDOUT, 500000);
	hostile("silent (handshake timeout 300 ms)", SILENT, 0, 0, -ETIMEDOUT, -ETIMEDOUT, 500000);
	zl_listener_close(l);
	return T_EXIT_PASS;
}
