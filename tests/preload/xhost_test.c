/* SPDX-License-Identifier: MIT */
/*
 * xhost_test.c - one end of a plain TCP connection, for the preload's
 * cross-host tests in the VM (tests/vm/xhost-suite.sh runs the two ends as
 * separate processes, each plain or under zl-run).
 *
 *   xhost_test server ADDR PORT echo|stream
 *   xhost_test client ADDR PORT SRC echo|epecho ROUNDS
 *   xhost_test client ADDR PORT SRC stream BYTES
 *   xhost_test client ADDR PORT SRC ping ROUNDS
 *
 * echo: the client sends ROUNDS requests of growing size (up to 128 KiB, a
 * pattern that depends on the offset), the server echoes every byte, the
 * client checks each answer, then shuts down its side and expects EOF.
 * stream: after the client's 4-byte request (a client that never sends
 * never proves itself: the server's bytes stay on TCP), the server writes
 * the pattern until the connection fails; the
 * client checks BYTES of it, prints "streaming" (the harness then kills one
 * end with -9) and reads on: the server side expects EPIPE or ECONNRESET,
 * the client EOF or ECONNRESET. Every wait is bounded (SO_RCVTIMEO,
 * SO_SNDTIMEO, a 60 s alarm): a hang fails. Exit 0 on success, 1 on
 * failure, 2 usage.
 * epecho: echo, but the socket is registered with epoll (EPOLLIN) before
 * its connect, and each answer is waited for in epoll_wait (5 s at most:
 * the registration must follow the socket wherever its bytes come from).
 * ping: 64-byte round trips against an echo server: one second of warm-up
 * (a connection's first bytes go over TCP until its channel is up), then
 * ROUNDS timed ones; prints "round trips/s: N".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MAXREQ (1 << 20)
#define MAXECHO 17 /* requests up to 128 KiB: a request and its echo fit in
		    * the preload's default 256 KiB rings (an echo server that
		    * writes before the client reads could block otherwise) */

static uint8_t pat(uint64_t off) { return (uint8_t)(off * 131 + (off >> 9) * 7 + 3); }

static int fail(const char *what)
{
	fprintf(stderr, "xhost_test: %s: %s\n", what, strerror(errno));
	return 1;
}

static void timeouts(int fd, int sec)
{
	struct timeval t = { sec, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof(t));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &t, sizeof(t));
}

static int addr(const char *ip, int port, struct sockaddr_in *a)
{
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, ip, &a->sin_addr) == 1 ? 0 : -1;
}

static int write_all(int fd, const uint8_t *b, size_t n)
{
	while (n) {
		ssize_t r = write(fd, b, n);
		if (r <= 0)
			return -1;
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

static int server(const char *ip, int port, const char *mode)
{
	struct sockaddr_in a;
	int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || addr(ip, port, &a))
		return fail("socket/address");
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 8))
		return fail("bind/listen");
	printf("listening\n");
	fflush(stdout);
	int c = accept(l, NULL, NULL);
	if (c < 0)
		return fail("accept");
	timeouts(c, 20);
	static uint8_t buf[MAXREQ];
	if (!strcmp(mode, "echo")) {
		for (;;) {
			ssize_t r = read(c, buf, sizeof(buf));
			if (r == 0)
				break;
			if (r < 0)
				return fail("server read");
			if (write_all(c, buf, (size_t)r))
				return fail("server write");
		}
		close(c);
		printf("server: echoed until EOF\n");
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	for (size_t got = 0; got < 4;) {
		ssize_t r = read(c, buf + got, 4 - got);
		if (r <= 0)
			return fail("server: the request");
		got += (size_t)r;
	}
	for (uint64_t off = 0;;) {
		for (size_t i = 0; i < 65536; i++)
			buf[i] = pat(off + i);
		ssize_t r = write(c, buf, 65536);
		if (r < 0 && (errno == EPIPE || errno == ECONNRESET)) {
			printf("server: the client is gone: %s\n", strerror(errno));
			return 0;
		}
		if (r <= 0)
			return fail("server stream write");
		off += (uint64_t)r;
	}
}

static int client(const char *ip, int port, const char *src, const char *mode, long n)
{
	struct sockaddr_in a, s;
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || addr(ip, port, &a) || addr(src, 0, &s))
		return fail("socket/address");
	int ep = -1;
	if (!strcmp(mode, "epecho")) {
		struct epoll_event e = { .events = EPOLLIN, .data.fd = c };
		if ((ep = epoll_create1(0)) < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, c, &e))
			return fail("epoll before connect");
		mode = "echo";
	}
	if (bind(c, (struct sockaddr *)&s, sizeof(s)) || connect(c, (struct sockaddr *)&a, sizeof(a)))
		return fail("connect");
	timeouts(c, 20);
	static uint8_t out[MAXREQ], in[MAXREQ];
	if (!strcmp(mode, "ping")) {
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (long i = 0, warm = 1;; i++) {
			if (warm && !(i % 64)) {
				clock_gettime(CLOCK_MONOTONIC, &t1);
				if (t1.tv_sec - t0.tv_sec >= 1) { /* start timing */
					warm = 0;
					i = -1; /* the next round is the first timed one */
					t0 = t1;
					continue;
				}
			}
			if (!warm && i == n)
				break;
			memset(out, (int)(i & 0xff), 64);
			if (write_all(c, out, 64))
				return fail("ping write");
			for (size_t got = 0; got < 64;) {
				ssize_t r = read(c, in + got, 64 - got);
				if (r <= 0)
					return fail("ping read");
				got += (size_t)r;
			}
			if (memcmp(in, out, 64)) {
				fprintf(stderr, "xhost_test: ping %ld: wrong bytes\n", i);
				return 1;
			}
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		printf("round trips/s: %.0f (%ld of 64 B in %.3f s)\n", (double)n / secs, n, secs);
		return 0;
	}
	if (!strcmp(mode, "echo")) {
		uint64_t off = 0;
		for (long i = 0; i < n; i++) {
			size_t len = (size_t)1 << (i % (MAXECHO + 1)); /* 1 B .. 128 KiB */
			for (size_t k = 0; k < len; k++)
				out[k] = pat(off + k);
			if (write_all(c, out, len))
				return fail("client write");
			for (size_t got = 0; got < len;) {
				struct epoll_event e;
				int k = ep < 0 ? 1 : epoll_wait(ep, &e, 1, 5000);
				if (k == 0) {
					fprintf(stderr, "xhost_test: round %ld: epoll_wait saw nothing "
						"in 5 s (%zu of %zu bytes)\n", i, got, len);
					return 1;
				}
				if (k < 0)
					return fail("epoll_wait");
				ssize_t r = read(c, in + got, len - got);
				if (r <= 0)
					return fail(r ? "client read" : "client read: early EOF");
				got += (size_t)r;
			}
			if (memcmp(in, out, len)) {
				fprintf(stderr, "xhost_test: round %ld: wrong bytes\n", i);
				return 1;
			}
			off += len;
		}
		shutdown(c, SHUT_WR);
		ssize_t r = read(c, in, 1);
		if (r != 0)
			return fail("after shutdown: want EOF");
		printf("client: %ld rounds, %llu bytes echoed\n", n, (unsigned long long)off);
		return 0;
	}
	uint64_t off = 0;
	bool told = false;
	if (write_all(c, (const uint8_t *)"go\n\n", 4))
		return fail("client: the request");
	for (;;) {
		ssize_t r = read(c, in, sizeof(in));
		if (r == 0 || (r < 0 && errno == ECONNRESET)) {
			if (!told) {
				fprintf(stderr, "xhost_test: the stream ended after %llu bytes\n",
					(unsigned long long)off);
				return 1;
			}
			printf("client: the server is gone: %s\n", r ? "ECONNRESET" : "EOF");
			return 0;
		}
		if (r < 0)
			return fail("client stream read");
		for (ssize_t k = 0; k < r; k++)
			if (in[k] != pat(off + (uint64_t)k)) {
				fprintf(stderr, "xhost_test: wrong byte at %llu\n",
					(unsigned long long)(off + (uint64_t)k));
				return 1;
			}
		off += (uint64_t)r;
		if (!told && off >= (uint64_t)n) {
			told = true;
			printf("streaming\n");
			fflush(stdout);
		}
	}
}

int main(int argc, char **argv)
{
	alarm(60);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 5 && !strcmp(argv[1], "server"))
		return server(argv[2], atoi(argv[3]), argv[4]);
	if (argc == 7 && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]), argv[4], argv[5], atol(argv[6]));
	fprintf(stderr, "usage: xhost_test server ADDR PORT echo|stream\n"
			"       xhost_test client ADDR PORT SRC echo|epecho ROUNDS|stream BYTES|"
			"ping ROUNDS\n");
	return 2;
}
