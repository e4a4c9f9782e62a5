/* SPDX-License-Identifier: MIT */
/*
 * Baseline: plain blocking TCP ping-pong on 127.0.0.1 with TCP_NODELAY,
 * written without zipline. zipline's tcp:// should land close to it, so
 * "zipline tcp / raw tcp" shows the library's own overhead.
 *
 * Before each size the client sends a 16-byte header {size, count}; the
 * server then echoes count messages of exactly size bytes. The server
 * blocks in read(2), or (--loop other than block) runs the usual epoll
 * loop: a nonblocking socket read until EAGAIN, then epoll_wait. Waits are
 * bounded with SO_RCVTIMEO/SO_SNDTIMEO, which adds no syscall per read.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zl-bench.h"

struct hdr {
	uint64_t size, count;
};

static int read_full(int fd, void *buf, size_t n)
{
	char *p = buf;
	while (n) {
		ssize_t k = read(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k == 0 ? -ECONNRESET : -errno; /* EAGAIN: SO_RCVTIMEO hit */
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Write all of buf. A blocking socket (wait_us 0) reports EAGAIN (its
 * SO_SNDTIMEO hit); a nonblocking one polls up to wait_us for room. */
static int write_full(int fd, const void *buf, size_t n, int64_t wait_us)
{
	const char *p = buf;
	while (n) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN && wait_us > 0) {
			struct pollfd pfd = {.fd = fd, .events = POLLOUT};
			if (poll(&pfd, 1, (int)(wait_us / 1000)) == 1)
				continue;
			return -EAGAIN;
		}
		if (k < 0)
			return -errno;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static void tune(int fd, int64_t timeout_us)
{
	int one = 1;
	struct timeval tv = {.tv_sec = timeout_us / 1000000, .tv_usec = timeout_us % 1000000};
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static const char *errtext(int rc)
{
	return rc == -EAGAIN || rc == -EWOULDBLOCK ? "timed out" : strerror(-rc);
}

/* ---- server ----------------------------------------------------------- */

/* The epoll echo: read what is there, echo every whole message, and wait
 * in epoll_wait once a read finds nothing. */
static int epoll_echo(int fd, int64_t timeout_us)
{
	int ep = epoll_create1(EPOLL_CLOEXEC), rc = 0;
	struct epoll_event e = {.events = EPOLLIN};
	size_t cap = 1 << 16, have = 0;
	char *buf = malloc(cap);
	struct hdr h = {0, 0};
	if (ep < 0 || !buf || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e)) {
		rc = ep < 0 || buf ? -errno : -ENOMEM;
		goto out;
	}
	for (;;) {
		ssize_t k = read(fd, buf + have, cap - have);
		if (k == 0) {
			rc = -ECONNRESET;
			break;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN) {
			int n = epoll_wait(ep, &e, 1, (int)(timeout_us / 1000));
			if (n <= 0 && !(n < 0 && errno == EINTR)) {
				rc = n ? -errno : -EAGAIN;
				break;
			}
			continue;
		}
		if (k < 0) {
			rc = -errno;
			break;
		}
		have += (size_t)k;
		size_t off = 0;
		for (;;) { /* the header, then h.count messages of h.size bytes */
			if (!h.count && have - off >= sizeof(h)) {
				memcpy(&h, buf + off, sizeof(h));
				off += sizeof(h);
				if (h.size > cap / 2) { /* room for a message and the next */
					char *nb = realloc(buf, 2 * h.size);
					if (!nb) {
						rc = -ENOMEM;
						goto out;
					}
					buf = nb;
					cap = 2 * h.size;
				}
			} else if (h.count && have - off >= h.size) {
				if ((rc = write_full(fd, buf + off, h.size, timeout_us)))
					goto out;
				off += h.size;
				h.count--;
			} else {
				break;
			}
		}
		memmove(buf, buf + off, have - off);
		have -= off;
	}
out:
	if (ep >= 0)
		close(ep);
	free(buf);
	return rc;
}

static int raw_server(void *arg, int wfd)
{
	const struct pp_opts *o = arg;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (pin_self(o->cpu_server) || lfd < 0 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 1) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) < 0) {
		dprintf(wfd, "ERR raw tcp server: %s\n", strerror(errno));
		return 1;
	}
	dprintf(wfd, "OK %u\n", ntohs(sa.sin_port));
	close(wfd);

	struct pollfd pfd = {.fd = lfd, .events = POLLIN};
	if (poll(&pfd, 1, (int)(o->timeout_us / 1000)) != 1) {
		fprintf(stderr, "zl-bench raw tcp server: no client\n");
		return 1;
	}
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	close(lfd);
	if (fd < 0) {
		perror("zl-bench raw tcp server: accept");
		return 1;
	}
	tune(fd, o->timeout_us);
	char *buf = NULL;
	int rc = 0;
	if (o->loop != LOOP_BLOCK)
		rc = epoll_echo(fd, o->timeout_us);
	for (; o->loop == LOOP_BLOCK;) {
		struct hdr h;
		rc = read_full(fd, &h, sizeof(h));
		if (rc)
			break;
		char *nb = realloc(buf, h.size ? h.size : 1);
		if (!nb) {
			rc = -ENOMEM;
			break;
		}
		buf = nb;
		for (uint64_t i = 0; i < h.count && !rc; i++) {
			rc = read_full(fd, buf, h.size);
			if (!rc)
				rc = write_full(fd, buf, h.size, 0);
		}
		if (rc)
			break;
	}
	free(buf);
	close(fd);
	if (rc == -ECONNRESET)
		return 0; /* the client is done */
	fprintf(stderr, "zl-bench raw tcp server: %s\n", errtext(rc));
	return 1;
}

/* ---- client ----------------------------------------------------------- */

static int raw_rounds(int fd, size_t size, uint8_t *tx, uint8_t *rx, uint64_t n,
		      uint64_t *samples, uint64_t *ctr)
{
	uint64_t prev = timer_now();
	for (uint64_t i = 0; i < n; i++) {
		uint64_t c = (*ctr)++;
		if (size >= 8)
			memcpy(tx, &c, 8);
		else if (size)
			tx[0] = (uint8_t)c;
		int rc = write_full(fd, tx, size, 0);
		if (!rc)
			rc = read_full(fd, rx, size);
		if (rc)
			return rc;
		if (size && (memcmp(rx, tx, size < 8 ? size : 8) || rx[size - 1] != tx[size - 1])) {
			fprintf(stderr, "zl-bench raw tcp: ERROR: echo mismatch at round trip %llu\n",
				(unsigned long long)i);
			return 1;
		}
		uint64_t now = timer_now();
		if (samples)
			samples[i] = now - prev;
		prev = now;
	}
	return 0;
}

int rawtcp_run(const struct pp_opts *o, const struct sink *sink, struct result *res)
{
	int rfd, fd = -1, ret = 1;
	char line[256];
	size_t maxsz = 1;
	for (int i = 0; i < o->nsizes; i++)
		if (o->sizes[i] > maxsz)
			maxsz = o->sizes[i];
	uint8_t *tx = malloc(maxsz), *rx = malloc(maxsz);
	uint64_t *samples = malloc(o->iters * sizeof(*samples)), ctr = 1;
	if (!tx || !rx || !samples) {
		fprintf(stderr, "zl-bench raw tcp: out of memory\n");
		goto out;
	}
	memset(samples, 0, o->iters * sizeof(*samples));
	for (size_t j = 0; j < maxsz; j++)
		tx[j] = (uint8_t)(j * 7 + 1);

	pid_t pid = spawn_child(raw_server, (void *)o, &rfd);
	if (pid < 0)
		goto out;
	if (read_line(rfd, line, sizeof(line), (int)(o->timeout_us / 1000)) < 0 ||
	    strncmp(line, "OK ", 3)) {
		fprintf(stderr, "zl-bench raw tcp: server did not start: %s\n", line);
		close(rfd);
		kill_child(pid);
		goto out;
	}
	close(rfd);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				 .sin_port = htons((uint16_t)atoi(line + 3))};
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (pin_self(o->cpu_client) || fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("zl-bench raw tcp: connect");
		kill_child(pid);
		goto out;
	}
	tune(fd, o->timeout_us);
	pid_t pids[2] = {0, pid};
	for (int s = 0; s < o->nsizes; s++) {
		size_t size = o->sizes[s];
		res[s].valid = 0;
		if (!size) { /* a byte stream has no empty messages */
			printf("%8d   (skipped: raw TCP cannot send an empty message)\n", 0);
			continue;
		}
		struct hdr h = {size, o->warmup + o->iters};
		struct load_snap l0, l1;
		int rc = write_full(fd, &h, sizeof(h), 0);
		if (!rc)
			rc = raw_rounds(fd, size, tx, rx, o->warmup, NULL, &ctr);
		load_snap(&l0, pids, 2);
		uint64_t t0 = mono_ns();
		if (!rc)
			rc = raw_rounds(fd, size, tx, rx, o->iters, samples, &ctr);
		uint64_t t1 = mono_ns();
		load_snap(&l1, pids, 2);
		if (rc) {
			if (rc < 0)
				fprintf(stderr, "zl-bench raw tcp: size %zu: %s\n", size, errtext(rc));
			close(fd);
			fd = -1;
			kill_child(pid);
			goto out;
		}
		res[s].size = size;
		res[s].iters = o->iters;
		report_result(samples, o->iters, t1 - t0, &l0, &l1, sink, &res[s]);
	}
	close(fd);
	fd = -1;
	int st = reap_child(pid, 5000);
	explain_status("the raw tcp server", st);
	ret = st != 0;
out:
	if (fd >= 0)
		close(fd);
	free(tx);
	free(rx);
	free(samples);
	return ret;
}
