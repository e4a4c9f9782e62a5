/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "sockutil.h"

static int set_sock_opts(int fd)
{
	int one = 1;
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) ||
	    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		return -errno;
	return 0;
}

static int resolve(const char *host, const char *port, bool passive, struct addrinfo **res)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0) };
	int e = getaddrinfo(host && *host ? host : NULL, port && *port ? port : "0", &hints, res);
	if (!e)
		return 0;
	ZL_LOG(ZL_LOG_ERROR, "cannot resolve '%s': %s", host ? host : "", gai_strerror(e));
	return e == EAI_MEMORY ? -ENOMEM : e == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
}

int zl_tcp_listen(const char *host, const char *port)
{
	struct addrinfo *res;
	int r = resolve(host, port, true, &res);
	if (r)
		return r;
	r = -EADDRNOTAVAIL;
	for (struct addrinfo *a = res; a; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		int one = 1;
		if (fd < 0) {
			r = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (!bind(fd, a->ai_addr, a->ai_addrlen) && !listen(fd, SOMAXCONN)) {
			freeaddrinfo(res);
			return fd;
		}
		r = -errno;
		close(fd);
	}
	freeaddrinfo(res);
	return r;
}

static int wait_fd(int fd, short ev, int64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = ev };
	for (;;) {
		int n = poll(&p, 1, zl_poll_ms(deadline));
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n == 0 && zl_now_us() >= deadline)
			return -ETIMEDOUT;
	}
}

int zl_tcp_connect(const char *host, const char *port, int64_t deadline)
{
	struct addrinfo *res;
	int r = resolve(host, port, false, &res);
	if (r)
		return r;
	r = -ECONNREFUSED;
	for (struct addrinfo *a = res; a; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0) {
			r = -errno;
			continue;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen) && errno != EINPROGRESS) {
			r = -errno;
			close(fd);
			continue;
		}
		int err = 0;
		socklen_t len = sizeof(err);
		r = wait_fd(fd, POLLOUT, deadline);
		if (!r && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len))
			err = errno;
		if (!r && !err && !(r = set_sock_opts(fd))) {
			freeaddrinfo(res);
			return fd;
		}
		r = r ? r : -err;
		close(fd);
	}
	freeaddrinfo(res);
	return r;
}

int zl_tcp_accept(int lfd, int64_t deadline)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
			int r = set_sock_opts(fd);
			if (r) {
				close(fd);
				return r;
			}
			return fd;
		}
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			return -errno;
		int r = wait_fd(lfd, POLLIN, deadline);
		if (r)
			return r;
	}
}

int zl_write_full(int fd, const void *buf, size_t len, int64_t deadline)
{
	const char *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (errno == EPIPE)
			return -ECONNRESET;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		int r = wait_fd(fd, POLLOUT, deadline);
		if (r)
			return r;
	}
	return 0;
}

int zl_read_full(int fd, void *buf, size_t len, int64_t deadline)
{
	char *p = buf;
	while (len) {
		ssize_t n = recv(fd, p, len, 0);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		int r = wait_fd(fd, POLLIN, deadline);
		if (r)
			return r;
	}
	return 0;
}

int zl_sock_name(int fd, char *buf, size_t cap)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN];
	int port, n;
	if (getsockname(fd, (struct sockaddr *)&ss, &len))
		return -errno;
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
		port = ntohs(s6->sin6_port);
		n = snprintf(buf, cap, "[%s]:%d", host, port);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
		port = ntohs(s4->sin_port);
		n = snprintf(buf, cap, "%s:%d", host, port);
	}
	return n < 0 || (size_t)n >= cap ? -ENOSPC : 0;
}
