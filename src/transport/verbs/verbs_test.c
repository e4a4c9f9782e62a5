/* SPDX-License-Identifier: MIT */
/*
 * rdma:// cases that only a real RDMA stack can show. Runs in the Soft-RoCE
 * VM (tests/vm/rdma-vm.sh), which sets ZL_RDMA_*; exits 77 elsewhere.
 *
 *   verbs_test CASE [single|split|auto]
 *   CASE: sizes | kill | memlock | hostile | rkey | auto | ring | stall | counts |
 *         sleepcounts | batchcounts | closetail
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zipline.h"
#include "verbs_wire.h"

#define TMO 5000000
#define FAIL(...) do { printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); \
		       printf("\n"); exit(1); } while (0)
#define CHECK_RC(call, want) do { int r_ = (call); if (r_ != (want)) \
		FAIL("%s = %d (%s), want %d", #call, r_, zl_strerror(r_), (want)); } while (0)

static const char *dev_a, *dev_b, *ip_a, *order = "auto";
static char logbuf[4096];

static void capture_log(enum zl_log_level lvl, const char *msg, void *arg)
{
	size_t n = strlen(logbuf);
	snprintf(logbuf + n, sizeof(logbuf) - n, "%s\n", msg);
	fprintf(stderr, "log: %s\n", msg);
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void url(char *buf, size_t cap, int port, const char *dev, const char *extra)
{
	snprintf(buf, cap, "rdma://%s:%d?dev=%s&order=%s%s", ip_a, port, dev, order, extra);
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 31 + i * 7);
}

/* A receive that sleeps on the channel fd whenever nothing is there, as an
 * event loop does (zl_channel_arm, then poll); *sleeps counts the polls. */
static int recv_sleeping(zl_channel *ch, void *buf, size_t cap, size_t *len, uint64_t *sleeps)
{
	struct pollfd p = { .fd = zl_channel_fd(ch), .events = POLLIN };
	for (;;) {
		int r = zl_recv(ch, buf, cap, len, 0);
		if (r != -EAGAIN)
			return r;
		if ((r = zl_channel_arm(ch)) == -EBUSY)
			continue;
		if (r)
			return r;
		(*sleeps)++;
		if (poll(&p, 1, TMO / 1000) != 1)
			return -ETIMEDOUT;
	}
}

static bool echo_sleeps; /* spawn_echo's peer sleeps on its fd between messages */

/* An echo peer in a child process; returns its pid. */
static pid_t spawn_echo(const char *u)
{
	pid_t pid = fork();
	if (pid)
		return pid;
	zl_channel *ch;
	static uint8_t buf[8 << 20];
	size_t len;
	int r = zl_connect(u, NULL, TMO, &ch);
	if (r) {
		printf("echo peer: connect: %s\n", zl_strerror(r));
		_exit(2);
	}
	uint64_t sleeps = 0;
	while (!(r = echo_sleeps ? recv_sleeping(ch, buf, sizeof(buf), &len, &sleeps)
				 : zl_recv(ch, buf, sizeof(buf), &len, TMO)) &&
	       !(r = zl_send(ch, buf, len, TMO)))
		;
	if (r != -ECONNRESET)
		printf("echo peer: stopped on %s\n", zl_strerror(r));
	zl_close(ch);
	_exit(0);
}

static zl_channel *accept_one(zl_listener *l)
{
	zl_channel *ch;
	CHECK_RC(zl_accept(l, TMO, &ch), 0);
	return ch;
}

/* A listener on device A at port and an echo peer from device B, connected. */
struct pair {
	zl_listener *l;
	zl_channel *ch;
	pid_t echo;
};

static struct pair echo_pair(int port, const char *extra)
{
	char su[256], cu[256];
	struct pair p;
	url(su, sizeof(su), port, dev_a, extra);
	url(cu, sizeof(cu), port, dev_b, extra);
	CHECK_RC(zl_listen(su, NULL, &p.l), 0);
	p.echo = spawn_echo(cu);
	p.ch = accept_one(p.l);
	return p;
}

/* Close our end (the echo peer then sees -ECONNRESET and exits) and reap. */
static void pair_close(struct pair *p)
{
	zl_close(p->ch);
	if (p->echo > 0)
		waitpid(p->echo, NULL, 0);
	zl_listener_close(p->l);
}

/* Inline and non-inline sizes, wraparound of a small ring, fragmentation. */
static void case_sizes(void)
{
	struct pair p = echo_pair(7601, "&ring=4096");
	zl_channel *ch = p.ch;
	static uint8_t out[8 << 20], in[8 << 20];
	static const size_t sizes[] = { 0, 1, 8, 64, 200, 232, 256, 300, 1000, 2024, 4000,
					100000, 1 << 20 };
	int n = 0;
	for (int round = 0; round < 40; round++)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			size_t s = sizes[(i + (size_t)round) % (sizeof(sizes) / sizeof(sizes[0]))];
			if (s > 100000 && round % 10)
				continue; /* a few big ones: the emulator is slow */
			size_t len = 0;
			fill(out, s, (uint32_t)n);
			CHECK_RC(zl_send(ch, out, s, 4 * TMO), 0);
			CHECK_RC(zl_recv(ch, in, sizeof(in), &len, 4 * TMO), 0);
			if (len != s || memcmp(in, out, s))
				FAIL("echo %d of %zu bytes came back as %zu bytes or different", n, s, len);
			n++;
		}
	struct zl_channel_info info;
	zl_channel_info(ch, &info);
	printf("sizes: %d echoes over a 4 KiB ring ok (mode %s, %llu rpos updates)\n", n,
	       info.mode, (unsigned long long)info.rpos_updates);
	pair_close(&p);
}

/* The peer dies mid-stream: we get an error within a bound, never a hang. */
static void case_kill(void)
{
	struct pair p = echo_pair(7602, "");
	zl_channel *ch = p.ch;
	uint8_t buf[4096];
	size_t len;
	for (int i = 0; i < 20; i++) {
		CHECK_RC(zl_send(ch, buf, 100, TMO), 0);
		CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, TMO), 0);
	}
	kill(p.echo, SIGKILL);
	waitpid(p.echo, NULL, 0);
	p.echo = 0;
	double t0 = now_s();
	int r = zl_recv(ch, buf, sizeof(buf), &len, 10000000);
	double dt = now_s() - t0;
	if (r != -ECONNRESET || dt > 3)
		FAIL("recv after the peer was killed: %d (%s) after %.2f s", r, zl_strerror(r), dt);
	r = zl_send(ch, buf, 100, TMO);
	if (r != -ECONNRESET && r != -EPIPE)
		FAIL("send after the peer was killed: %d (%s)", r, zl_strerror(r));
	printf("kill: -ECONNRESET %.3f s after the peer died\n", dt);
	pair_close(&p);
}

/* Registration beyond RLIMIT_MEMLOCK: a clear error that names the limit.
 * Root ignores the limit through CAP_IPC_LOCK, so the child drops it. */
static void case_memlock(void)
{
	char su[256], cu[256];
	url(su, sizeof(su), 7603, dev_a, "");
	url(cu, sizeof(cu), 7603, dev_b, "&ring=4194304");
	zl_listener *l;
	CHECK_RC(zl_listen(su, NULL, &l), 0);
	pid_t pid = fork();
	if (!pid) {
		struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
		struct __user_cap_data_struct d[2];
		struct rlimit rl = { 65536, 65536 };
		zl_channel *ch;
		if (syscall(SYS_capget, &h, d))
			_exit(3);
		d[0].effective &= ~(1u << CAP_IPC_LOCK);
		d[0].permitted &= ~(1u << CAP_IPC_LOCK);
		if (syscall(SYS_capset, &h, d) || setrlimit(RLIMIT_MEMLOCK, &rl))
			_exit(3);
		logbuf[0] = 0;
		int r = zl_connect(cu, NULL, TMO, &ch);
		printf("memlock: connect with a 4 MiB ring under a 64 KiB limit: %d (%s)\n", r,
		       zl_strerror(r));
		_exit(r == -ENOMEM && strstr(logbuf, "RLIMIT_MEMLOCK") ? 0 : 1);
	}
	zl_channel *ch;
	int r = zl_accept(l, TMO, &ch); /* the client gives up mid-handshake */
	if (!r)
		zl_close(ch);
	int st;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		FAIL("memlock child: status %d (want -ENOMEM and a log naming RLIMIT_MEMLOCK)", st);
	zl_listener_close(l);
}

static int tcp_to(const char *ip, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, ip, &a.sin_addr);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)))
		FAIL("tcp connect to %s:%d: %s", ip, port, strerror(errno));
	return s;
}

/* Garbage and a version mismatch in the handshake: -EPROTO, and the
 * listener keeps serving good clients. */
static void case_hostile(void)
{
	char su[256], cu[256];
	url(su, sizeof(su), 7604, dev_a, "");
	url(cu, sizeof(cu), 7604, dev_b, "");
	zl_listener *l;
	zl_channel *ch;
	CHECK_RC(zl_listen(su, NULL, &l), 0);
	struct rd_info bad;
	memset(&bad, 0x5a, sizeof(bad));
	int s = tcp_to(ip_a, 7604);
	if (write(s, &bad, sizeof(bad)) != (ssize_t)sizeof(bad))
		FAIL("write");
	CHECK_RC(zl_accept(l, TMO, &ch), -EPROTO);
	close(s);
	memset(&bad, 0, sizeof(bad));
	bad.magic = RD_MAGIC;
	bad.version = 999;
	bad.info_size = sizeof(bad);
	s = tcp_to(ip_a, 7604);
	if (write(s, &bad, sizeof(bad)) != (ssize_t)sizeof(bad))
		FAIL("write");
	CHECK_RC(zl_accept(l, TMO, &ch), -EPROTO);
	close(s);
	s = tcp_to(ip_a, 7604); /* says nothing: the handshake times out */
	struct zl_opts o;
	zl_opts_init(&o);
	zl_listener_close(l);
	o.handshake_timeout_us = 300000;
	CHECK_RC(zl_listen(su, &o, &l), 0);
	close(s);
	s = tcp_to(ip_a, 7604);
	CHECK_RC(zl_accept(l, TMO, &ch), -ETIMEDOUT);
	close(s);
	pid_t pid = spawn_echo(cu);
	ch = accept_one(l);
	uint8_t buf[64] = "hello";
	size_t len;
	CHECK_RC(zl_send(ch, buf, 6, TMO), 0);
	CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, TMO), 0);
	printf("hostile: garbage and a wrong version refused with -EPROTO, silence times out, "
	       "then a good client works\n");
	zl_close(ch);
	waitpid(pid, NULL, 0);
	zl_listener_close(l);
}

/* A peer's ring over our max_peer_ring is refused, and both sides say
 * why: -EMSGSIZE on each, whichever side refuses. */
static void case_ring(void)
{
	for (int refuser = 0; refuser < 2; refuser++) {
		char su[256], cu[256];
		/* refuser 0: the listener refuses the client's 1 MiB ring */
		url(su, sizeof(su), 7607, dev_a,
		    refuser ? "&ring=1048576" : "&max_peer_ring=65536");
		url(cu, sizeof(cu), 7607, dev_b,
		    refuser ? "&max_peer_ring=65536" : "&ring=1048576");
		zl_listener *l;
		CHECK_RC(zl_listen(su, NULL, &l), 0);
		pid_t pid = fork();
		if (!pid) {
			zl_channel *ch;
			int r = zl_connect(cu, NULL, TMO, &ch);
			printf("ring: refuser %s: client got %d (%s)\n", refuser ? "client" : "server",
			       r, zl_strerror(r));
			_exit(r == -EMSGSIZE ? 0 : 1);
		}
		zl_channel *ch;
		int r = zl_accept(l, TMO, &ch);
		printf("ring: refuser %s: server got %d (%s)\n", refuser ? "client" : "server", r,
		       zl_strerror(r));
		if (r != -EMSGSIZE)
			FAIL("server: %d, want -EMSGSIZE", r);
		int st;
		waitpid(pid, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			FAIL("client: status %d, want -EMSGSIZE", st);
		zl_listener_close(l);
	}
}

/* Peers stalled in either handshake step (silent after connecting; or
 * silent after a valid info, so the listener waits for their ready word)
 * never delay an honest client's zl_accept. */
static void case_stall(void)
{
	char su[256], cu[256];
	url(su, sizeof(su), 7608, dev_a, "");
	url(cu, sizeof(cu), 7608, dev_b, "");
	zl_listener *l;
	CHECK_RC(zl_listen(su, NULL, &l), 0);
	int silent[3], half[3];
	struct rd_info info = { .magic = RD_MAGIC, .version = ZL_PROTO_VERSION,
				.info_size = sizeof(info), .qpn = 77, .psn = 1, .mtu = 3,
				.ring_size = 4096, .max_msg = 4096 };
	/* RoCE: the gid is the IPv4-mapped address of device B */
	const char *ip_b = getenv("ZL_RDMA_IP_B");
	info.gid[10] = info.gid[11] = 0xff;
	if (!ip_b || inet_pton(AF_INET, ip_b, &info.gid[12]) != 1)
		FAIL("ZL_RDMA_IP_B");
	for (int i = 0; i < 3; i++) {
		silent[i] = tcp_to(ip_a, 7608);
		half[i] = tcp_to(ip_a, 7608);
		if (write(half[i], &info, sizeof(info)) != (ssize_t)sizeof(info))
			FAIL("write");
	}
	double t0 = now_s();
	pid_t pid = spawn_echo(cu);
	zl_channel *ch = accept_one(l);
	double dt = now_s() - t0;
	uint8_t buf[64] = "hello";
	size_t len;
	CHECK_RC(zl_send(ch, buf, 6, TMO), 0);
	CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, TMO), 0);
	printf("stall: an honest client accepted in %.3f s beside 3 silent and 3 half-done "
	       "handshakes\n", dt);
	if (dt > 1.0)
		FAIL("the honest client waited %.3f s", dt);
	uint32_t word;
	for (int i = 0; i < 3; i++) /* the half-done ones got the listener's info */
		if (recv(half[i], &info, sizeof(info), MSG_WAITALL) != (ssize_t)sizeof(info) ||
		    recv(half[i], &word, 4, MSG_WAITALL) != 4 || word != RD_MAGIC)
			FAIL("half-done peer %d: no info and ready word from the listener", i);
	zl_close(ch);
	waitpid(pid, NULL, 0);
	for (int i = 0; i < 3; i++) {
		close(silent[i]);
		close(half[i]);
	}
	zl_listener_close(l);
}

/* A man in the middle corrupts the server's ring rkey in the handshake:
 * the client's WRITEs fail on the NIC, and both ends see an error. */
static void case_rkey(void)
{
	char su[256], cu[256];
	url(su, sizeof(su), 7605, dev_a, "");
	snprintf(cu, sizeof(cu), "rdma://%s:7606?dev=%s&order=%s", ip_a, dev_b, order);
	zl_listener *l;
	CHECK_RC(zl_listen(su, NULL, &l), 0);
	pid_t proxy = fork();
	if (!proxy) { /* one connection: 7606 -> 7605, rewriting one field */
		int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(7606) };
		inet_pton(AF_INET, ip_a, &a.sin_addr);
		setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 1))
			_exit(3);
		int c = accept(ls, NULL, NULL), srv = tcp_to(ip_a, 7605);
		struct rd_info info; /* the listener answers the client's info */
		if (recv(c, &info, sizeof(info), MSG_WAITALL) != (ssize_t)sizeof(info) ||
		    write(srv, &info, sizeof(info)) != (ssize_t)sizeof(info) ||
		    recv(srv, &info, sizeof(info), MSG_WAITALL) != (ssize_t)sizeof(info))
			_exit(4);
		info.ring_rkey ^= 0x5a5a;
		if (write(c, &info, sizeof(info)) != (ssize_t)sizeof(info))
			_exit(4);
		struct pollfd p[2] = { { .fd = c, .events = POLLIN }, { .fd = srv, .events = POLLIN } };
		while (poll(p, 2, 10000) > 0)
			for (int i = 0; i < 2; i++) {
				char buf[4096];
				if (!p[i].revents)
					continue;
				ssize_t n = read(p[i].fd, buf, sizeof(buf));
				if (n <= 0 || write(i ? c : srv, buf, (size_t)n) != n)
					_exit(0);
			}
		_exit(0);
	}
	usleep(200000);
	pid_t cli = fork();
	if (!cli) {
		zl_channel *ch;
		uint8_t buf[256] = { 0 };
		size_t len;
		int r = zl_connect(cu, NULL, TMO, &ch);
		if (r)
			_exit(10);
		double t0 = now_s();
		r = zl_send(ch, buf, 100, TMO);
		if (!r)
			r = zl_recv(ch, buf, sizeof(buf), &len, 10000000);
		printf("rkey: client got %d (%s) after %.2f s\n", r, zl_strerror(r), now_s() - t0);
		_exit(r == -ECONNRESET || r == -EPIPE ? 0 : 1);
	}
	zl_channel *ch = accept_one(l);
	uint8_t buf[256];
	size_t len;
	double t0 = now_s();
	int r = zl_recv(ch, buf, sizeof(buf), &len, 10000000);
	printf("rkey: server got %d (%s) after %.2f s\n", r, zl_strerror(r), now_s() - t0);
	if (r != -ECONNRESET && r != -ETIMEDOUT)
		FAIL("server: unexpected %d", r);
	int st;
	waitpid(cli, &st, 0);
	kill(proxy, SIGKILL);
	waitpid(proxy, NULL, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		FAIL("client with a corrupted rkey: status %d", st);
	zl_close(ch);
	zl_listener_close(l);
}

/* order=auto must choose the mode that does not rely on in-order
 * placement on a device that does not promise it (rxe). */
static void case_auto(void)
{
	order = "auto";
	struct pair p = echo_pair(7607, "");
	zl_channel *ch = p.ch;
	struct zl_channel_info info;
	zl_channel_info(ch, &info);
	bool rxe = !strncmp(dev_a, "rxe", 3);
	printf("auto: mode %s on %s\n", info.mode, dev_a);
	if (rxe && strcmp(info.mode, "split"))
		FAIL("order=auto chose '%s' on rxe, which does not place data in order", info.mode);
	pair_close(&p);
}

/* What a 64 B ping-pong costs in verbs calls per message, from the
 * channel's own counters: every count is checked against what the protocol
 * says, exactly, and printed per message.
 *   Spinning (sleep false): no sleeps, so no arms or wake-ups.
 *   Sleeping (sleep true: both ends wait for each message asleep on the
 * channel fd, as an event loop does, zl_channel_arm then poll): a split
 * receiver is woken by the record's own completion, so a message
 * costs its record alone; in single and split2 each arm writes a flag and
 * each wake-up is a WRITE_WITH_IMM, on top of the records. */
static void case_counts(bool sleep)
{
	enum { WARM = 200, N = 2000, SIZE = 64 };
	echo_sleeps = sleep;
	struct pair p = echo_pair(sleep ? 7610 : 7609, "&spin_us=-1");
	uint64_t sleeps = 0;
	zl_channel *ch = p.ch;
	uint8_t buf[SIZE];
	size_t len;
	struct zl_channel_info a, b;
	for (int i = 0; i < WARM + N; i++) {
		if (i == WARM)
			zl_channel_info(ch, &a);
		fill(buf, SIZE, (uint32_t)i);
		CHECK_RC(zl_send(ch, buf, SIZE, TMO), 0);
		if (sleep)
			CHECK_RC(recv_sleeping(ch, buf, sizeof(buf), &len, &sleeps), 0);
		else
			CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, TMO), 0);
	}
	zl_channel_info(ch, &b);
	const struct zl_verbs_counts *x = &a.verbs, *y = &b.verbs;
	uint64_t msgs = b.msgs_sent - a.msgs_sent, rpos = b.rpos_updates - a.rpos_updates;
	uint64_t wr = y->wr_posted - x->wr_posted, posts = y->post_calls - x->post_calls;
	uint64_t bytes = y->bytes_posted - x->bytes_posted, inl = y->wr_inline - x->wr_inline;
	uint64_t sig = y->wr_signaled - x->wr_signaled;
	uint64_t arms = b.arms - a.arms, wakes = b.wakeups_sent - a.wakeups_sent;
	bool split = !strcmp(order, "split");
	if (sleep && (msgs != N || !sleeps))
		FAIL("%llu messages, %llu sleeps: not a sleeping ping-pong",
		     (unsigned long long)msgs, (unsigned long long)sleeps);
	if (sleep && split && wakes)
		FAIL("%llu wake-ups sent: a split receiver needs none", (unsigned long long)wakes);
	if (!sleep && (msgs != N || arms || wakes || b.sleeps != a.sleeps))
		FAIL("%llu messages, %llu arms, %llu wake-ups, %llu sleeps: not a spinning ping-pong",
		     (unsigned long long)msgs, (unsigned long long)(b.arms - a.arms),
		     (unsigned long long)(b.wakeups_sent - a.wakeups_sent),
		     (unsigned long long)(b.sleeps - a.sleeps));
	/* the record of a 64 B message: 16 B header, the payload, 8 B footer */
	if (!strcmp(order, "auto"))
		FAIL("counts needs an explicit order (single, split, split2)");
	/* split2 writes a record as its data and then its tag */
	uint64_t rec = 16 + SIZE + 8, per = strcmp(order, "split2") ? 1 : 2;
	/* read positions: one 16-byte WRITE (position and check word) each;
	 * flags (arms, but not a split receiver's): one 8-byte WRITE each;
	 * wake-ups: one zero-byte WRITE_WITH_IMM each */
	uint64_t flags = split ? 0 : arms;
	if (wr != N * per + rpos + flags + wakes)
		FAIL("%llu work requests for %d records (%llu each), %llu read positions, %llu "
		     "flags and %llu wake-ups", (unsigned long long)wr, N, (unsigned long long)per,
		     (unsigned long long)rpos, (unsigned long long)flags, (unsigned long long)wakes);
	if (posts != N + rpos + flags + wakes)
		FAIL("%llu ibv_post_send calls for %d records, %llu read positions, %llu flags and "
		     "%llu wake-ups: want one each", (unsigned long long)posts, N,
		     (unsigned long long)rpos, (unsigned long long)flags, (unsigned long long)wakes);
	if (bytes != N * rec + rpos * 16 + flags * 8)
		FAIL("%llu bytes posted, want %llu", (unsigned long long)bytes,
		     (unsigned long long)(N * rec + rpos * 16 + flags * 8));
	if (inl != wr)
		FAIL("%llu of %llu work requests inline", (unsigned long long)inl,
		     (unsigned long long)wr);
	if (y->wr_signaled != y->wr_posted / ZL_RD_SIGNAL_EVERY)
		FAIL("%llu of %llu work requests signaled, want one in %d",
		     (unsigned long long)y->wr_signaled, (unsigned long long)y->wr_posted,
		     ZL_RD_SIGNAL_EVERY);
	printf("%s: order=%s, %d round trips of %d B, per message sent: %.4f work requests, "
	       "%.4f ibv_post_send, %.4f signaled, %.4f inline, %.2f bytes, %.4f send-CQ polls, "
	       "%.4f receive-CQ polls, %.4f ibv_post_recv (%llu read positions, %llu arms, %llu "
	       "wake-ups, %llu sleeps)\n", sleep ? "sleepcounts" : "counts", order, N, SIZE,
	       (double)wr / N, (double)posts / N, (double)sig / N, (double)inl / N, (double)bytes / N,
	       (double)(y->send_cq_polls - x->send_cq_polls) / N,
	       (double)(y->recv_cq_polls - x->recv_cq_polls) / N,
	       (double)(y->recv_post_calls - x->recv_post_calls) / N, (unsigned long long)rpos,
	       (unsigned long long)arms, (unsigned long long)wakes, (unsigned long long)sleeps);
	pair_close(&p);
}

/* zl_sendv's batches in verbs calls, exactly: B batches of 16 messages of
 * 104 B (records of 128 B), each echoed back one by one, spinning, in a
 * 512 KiB ring whose end the measured batches do not reach (records on
 * either side of it are not adjacent: two WRITEs). Per batch: single
 * and split one WRITE (split's immediate counts the 16 records), split2 a
 * data and a tag WRITE per record; one ibv_post_send in every mode. Our
 * read positions come on top, one small WRITE and post each. */
static void case_batchcounts(void)
{
	enum { WARM = 4, B = 100, K = 16, SIZE = 104 };
	struct pair p = echo_pair(7611, "&spin_us=-1&ring=524288");
	zl_channel *ch = p.ch;
	uint8_t out[K][SIZE], buf[SIZE];
	struct zl_msgvec v[K];
	size_t len;
	struct zl_channel_info a, b;
	for (int i = 0; i < WARM + B; i++) {
		if (i == WARM)
			zl_channel_info(ch, &a);
		for (int j = 0; j < K; j++) {
			fill(out[j], SIZE, (uint32_t)(i * K + j));
			v[j] = (struct zl_msgvec){ out[j], SIZE };
		}
		CHECK_RC(zl_sendv(ch, v, K, TMO), K);
		for (int j = 0; j < K; j++) {
			CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, TMO), 0);
			if (len != SIZE || memcmp(buf, out[j], SIZE))
				FAIL("batch %d, message %d: echoed wrong", i, j);
		}
	}
	zl_channel_info(ch, &b);
	const struct zl_verbs_counts *x = &a.verbs, *y = &b.verbs;
	uint64_t rpos = b.rpos_updates - a.rpos_updates, wr = y->wr_posted - x->wr_posted;
	uint64_t posts = y->post_calls - x->post_calls, bytes = y->bytes_posted - x->bytes_posted;
	if (b.msgs_sent - a.msgs_sent != B * K || b.arms != a.arms || b.wakeups_sent != a.wakeups_sent)
		FAIL("not a spinning run of %d messages", B * K);
	uint64_t per = !strcmp(order, "split2") ? 2 * K : 1;
	if (!strcmp(order, "auto"))
		FAIL("batchcounts needs an explicit order (single, split, split2)");
	if (wr != B * per + rpos || posts != B + rpos)
		FAIL("%llu work requests and %llu ibv_post_send (%llu bytes, %llu inline) for %d "
		     "batches of %d and %llu read positions: want %llu and %llu",
		     (unsigned long long)wr, (unsigned long long)posts, (unsigned long long)bytes,
		     (unsigned long long)(y->wr_inline - x->wr_inline), B, K,
		     (unsigned long long)rpos, (unsigned long long)(B * per + rpos),
		     (unsigned long long)(B + rpos));
	if (bytes != (uint64_t)B * K * 128 + rpos * 16)
		FAIL("%llu bytes posted, want %llu", (unsigned long long)bytes,
		     (unsigned long long)((uint64_t)B * K * 128 + rpos * 16));
	printf("batchcounts: order=%s, %d batches of %d x %d B, per batch: %.4f work requests, "
	       "%.4f ibv_post_send (%llu read positions)\n", order, B, K, SIZE, (double)wr / B,
	       (double)posts / B, (unsigned long long)rpos);
	pair_close(&p);
}

/* The stream's tail survives the sender's close and exit on a slow link
 * (the suite delays device B's packets: closetail_rdma): zl_close waits
 * until what was posted has left, within the transport's retry budget,
 * before the queue pair goes. The sender posts a full ring and exits at
 * once; every message must arrive, then the end. */
static void case_closetail(void)
{
	enum { N = 256, SIZE = 4000 };
	char su[256], cu[256];
	zl_listener *l;
	url(su, sizeof(su), 7612, dev_a, "&ring=1048576");
	url(cu, sizeof(cu), 7612, dev_b, "&ring=1048576");
	CHECK_RC(zl_listen(su, NULL, &l), 0);
	pid_t pid = fork();
	if (pid == 0) {
		zl_channel *c;
		static uint8_t out[SIZE];
		int r = zl_connect(cu, NULL, TMO, &c);
		for (int i = 0; !r && i < N; i++) {
			fill(out, SIZE, (uint32_t)i);
			r = zl_send(c, out, SIZE, 4 * TMO);
		}
		if (r) {
			printf("sender: %s\n", zl_strerror(r));
			_exit(2);
		}
		zl_close(c);
		_exit(0);
	}
	zl_channel *ch = accept_one(l);
	static uint8_t in[SIZE + 1], want[SIZE];
	size_t len;
	int n = 0, r;
	double t0 = now_s();
	while (!(r = zl_recv(ch, in, sizeof(in), &len, 4 * TMO))) {
		fill(want, SIZE, (uint32_t)n);
		if (len != SIZE || memcmp(in, want, SIZE))
			FAIL("message %d: %zu bytes or different", n, len);
		n++;
	}
	int st = -1;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		FAIL("the sender failed (status %d)", st);
	if (n != N || r != -ECONNRESET)
		FAIL("%d of %d messages, then %d (%s): the stream's tail was lost at the sender's close",
		     n, N, r, zl_strerror(r));
	printf("closetail: %d messages of %d B, all of them, then the end, %.2f s\n", n, SIZE,
	       now_s() - t0);
	zl_close(ch);
	zl_listener_close(l);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	dev_a = getenv("ZL_RDMA_DEV_A");
	dev_b = getenv("ZL_RDMA_DEV_B");
	ip_a = getenv("ZL_RDMA_IP_A");
	if (!dev_a || !dev_b || !ip_a) {
		printf("SKIP: needs an RDMA device pair (run inside tests/vm/rdma-vm.sh)\n");
		return 77;
	}
	if (argc < 2)
		return 2;
	if (argc > 2)
		order = argv[2];
	zl_set_log(capture_log, NULL, ZL_LOG_INFO);
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(argv[1], "sizes"))
		case_sizes();
	else if (!strcmp(argv[1], "kill"))
		case_kill();
	else if (!strcmp(argv[1], "memlock"))
		case_memlock();
	else if (!strcmp(argv[1], "hostile"))
		case_hostile();
	else if (!strcmp(argv[1], "rkey"))
		case_rkey();
	else if (!strcmp(argv[1], "auto"))
		case_auto();
	else if (!strcmp(argv[1], "ring"))
		case_ring();
	else if (!strcmp(argv[1], "stall"))
		case_stall();
	else if (!strcmp(argv[1], "counts"))
		case_counts(false);
	else if (!strcmp(argv[1], "sleepcounts"))
		case_counts(true);
	else if (!strcmp(argv[1], "batchcounts"))
		case_batchcounts();
	else if (!strcmp(argv[1], "closetail"))
		case_closetail();
	else
		return 2;
	printf("PASS verbs_test %s %s\n", argv[1], order);
	return 0;
}
