/* SPDX-License-Identifier: MIT */
/* Blocking TCP with timeouts for the protocol clients (see net.h). */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net.h"

int conn_fail(struct conn *c, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->err, sizeof(c->err), fmt, ap);
	va_end(ap);
	return rc;
}

static uint64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000;
}

/* One non-blocking connect attempt, waiting up to wait_us. */
static int try_connect(const struct addrinfo *ai, int64_t wait_us, int *fdp)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
			ai->ai_protocol);
	if (fd < 0)
		return -errno;
	int rc = 0;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		if (errno != EINPROGRESS) {
			rc = -errno;
		} else {
			struct pollfd p = {.fd = fd, .events = POLLOUT};
			int n = poll(&p, 1, (int)((wait_us + 999) / 1000));
			socklen_t sl = sizeof(rc);
			if (n == 0)
				rc = -ETIMEDOUT;
			else if (n < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &rc, &sl) < 0)
				rc = -errno;
			else
				rc = -rc;
		}
	}
	if (rc < 0) {
		close(fd);
		return rc;
	}
	*fdp = fd;
	return 0;
}

int conn_open(struct conn *c, const char *hostport, size_t rcap, size_t wcap,
	      int64_t timeout_us)
{
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	char host[256];
	const char *colon = strrchr(hostport, ':'), *h = hostport;
	size_t hl = colon ? (size_t)(colon - hostport) : 0;
	if (hl && h[0] == '[' && h[hl - 1] == ']')
		h++, hl -= 2;
	if (!colon || !hl || hl >= sizeof(host) || !colon[1])
		return conn_fail(c, -EINVAL, "want HOST:PORT, got '%s'", hostport);
	memcpy(host, h, hl);
	host[hl] = 0;

	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
	int g = getaddrinfo(host, colon + 1, &hints, &ai);
	if (g)
		return conn_fail(c, -EADDRNOTAVAIL, "%s: %s", hostport, gai_strerror(g));
	uint64_t start = mono_us(), deadline = start + (uint64_t)timeout_us;
	/* refused: the server may still be starting, but a user who typed the
	 * wrong port hears of it within a second */
	uint64_t refused_until = start + (timeout_us < 1000000 ? (uint64_t)timeout_us : 1000000);
	int rc;
	for (;;) {
		int64_t left = (int64_t)(deadline - mono_us());
		rc = try_connect(ai, left > 0 ? left : 0, &c->fd);
		if (rc != -ECONNREFUSED || (int64_t)(refused_until - mono_us()) <= 50000)
			break;
		usleep(50000);
	}
	freeaddrinfo(ai);
	if (rc < 0)
		return conn_fail(c, rc, "connect %s: %s", hostport, strerror(-rc));

	/* blocking from here on, every call bounded by the timeout */
	int one = 1;
	struct timeval tv = {.tv_sec = timeout_us / 1000000, .tv_usec = timeout_us % 1000000};
	if (fcntl(c->fd, F_SETFL, 0) < 0 ||
	    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
	    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0) {
		rc = -errno;
		conn_close(c);
		return conn_fail(c, rc, "socket options: %s", strerror(-rc));
	}
	c->rbuf = malloc(rcap);
	c->wbuf = malloc(wcap);
	if (!c->rbuf || !c->wbuf) {
		conn_close(c);
		return conn_fail(c, -ENOMEM, "out of memory");
	}
	c->rcap = rcap;
	c->wcap = wcap;
	return 0;
}

void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->rbuf);
	free(c->wbuf);
	c->rbuf = c->wbuf = NULL;
}

int conn_put(struct conn *c, const void *p, size_t n)
{
	if (n > c->wcap - c->wlen)
		return conn_fail(c, -EMSGSIZE, "request larger than the %zu-byte buffer", c->wcap);
	memcpy(c->wbuf + c->wlen, p, n);
	c->wlen += n;
	return 0;
}

int conn_putf(struct conn *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(c->wbuf + c->wlen, c->wcap - c->wlen, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= c->wcap - c->wlen)
		return conn_fail(c, -EMSGSIZE, "request larger than the %zu-byte buffer", c->wcap);
	c->wlen += (size_t)n;
	return 0;
}

int conn_put_u64(struct conn *c, uint64_t v)
{
	char tmp[24];
	int n = 0;
	do
		tmp[sizeof(tmp) - ++n] = (char)('0' + v % 10);
	while (v /= 10);
	return conn_put(c, tmp + sizeof(tmp) - n, (size_t)n);
}

static int io_error(struct conn *c, const char *what)
{
	if (errno == EAGAIN || errno == EWOULDBLOCK)
		return conn_fail(c, -ETIMEDOUT, "%s: timed out", what);
	return conn_fail(c, -errno, "%s: %s", what, strerror(errno));
}

int conn_send(struct conn *c)
{
	size_t off = 0;
	while (off < c->wlen) {
		ssize_t n = send(c->fd, c->wbuf + off, c->wlen - off, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			c->wlen = 0;
			return io_error(c, "send");
		}
		off += (size_t)n;
	}
	c->wlen = 0;
	return 0;
}

/* Read more into rbuf, moving unread bytes to the front first if the
 * buffer's tail is full. */
static int fill(struct conn *c)
{
	if (c->rpos == c->rlen) {
		c->rpos = c->rlen = 0;
	} else if (c->rlen == c->rcap) {
		if (c->rpos == 0)
			return conn_fail(c, -EPROTO, "reply line longer than %zu bytes", c->rcap);
		memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
		c->rlen -= c->rpos;
		c->rpos = 0;
	}
	for (;;) {
		ssize_t n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
		if (n > 0) {
			c->rlen += (size_t)n;
			return 0;
		}
		if (n == 0)
			return conn_fail(c, -ECONNRESET, "the server closed the connection");
		if (errno != EINTR)
			return io_error(c, "recv");
	}
}

int conn_line(struct conn *c, const char **line, size_t *len)
{
	size_t from = c->rpos;
	for (;;) {
		char *nl = memchr(c->rbuf + from, '\n', c->rlen - from);
		if (nl) {
			char *s = c->rbuf + c->rpos;
			size_t l = (size_t)(nl - s);
			if (!l || s[l - 1] != '\r')
				return conn_fail(c, -EPROTO, "reply line without CRLF");
			*line = s;
			*len = l - 1;
			c->rpos += l + 1;
			return 0;
		}
		size_t scanned = c->rlen - c->rpos;
		int rc = fill(c);
		if (rc < 0)
			return rc;
		from = c->rpos + scanned;
	}
}

int conn_skip_data(struct conn *c, size_t n)
{
	while (n) {
		if (c->rpos == c->rlen) {
			int rc = fill(c);
			if (rc < 0)
				return rc;
		}
		size_t k = c->rlen - c->rpos < n ? c->rlen - c->rpos : n;
		c->rpos += k;
		n -= k;
	}
	while (c->rlen - c->rpos < 2) {
		int rc = fill(c);
		if (rc < 0)
			return rc;
	}
	if (memcmp(c->rbuf + c->rpos, "\r\n", 2))
		return conn_fail(c, -EPROTO, "value not followed by CRLF");
	c->rpos += 2;
	return 0;
}

int conn_data(struct conn *c, size_t n, const char **data)
{
	if (n + 2 > c->rcap)
		return conn_fail(c, -EPROTO, "reply value of %zu bytes exceeds the buffer", n);
	while (c->rlen - c->rpos < n + 2) {
		if (c->rlen == c->rcap) { /* make room at the tail */
			memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
			c->rlen -= c->rpos;
			c->rpos = 0;
		}
		int rc = fill(c);
		if (rc < 0)
			return rc;
	}
	if (memcmp(c->rbuf + c->rpos + n, "\r\n", 2))
		return conn_fail(c, -EPROTO, "value not followed by CRLF");
	*data = c->rbuf + c->rpos;
	c->rpos += n + 2;
	return 0;
}
