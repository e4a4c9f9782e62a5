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
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
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
	/* a name that does not resolve is no address, not an unreachable host */
	return e == EAI_MEMORY ? -ENOMEM : e == EAI_SYSTEM ? -errno : -EADDRNOTAVAIL;
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

int zl_sock_take(int lfd, int tcp)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
			int one = 1;
			if (tcp)
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			return fd;
		}
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return -EAGAIN;
		if (errno != EINTR && errno != ECONNABORTED)
			return -errno;
	}
}

int zl_sock_ready(int fd, size_t need, const void *magic, size_t mlen)
{
	uint8_t buf[512];
	if (need > sizeof(buf))
		need = sizeof(buf);
	ssize_t n = recv(fd, buf, need, MSG_PEEK | MSG_DONTWAIT);
	if (n == 0)
		return -ECONNRESET;
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -ECONNRESET;
	size_t m = (size_t)n < mlen ? (size_t)n : mlen;
	if ((size_t)n >= need || (magic && memcmp(buf, magic, m)))
		return 1;
	return 0;
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

/* ---- fd passing and memfds --------------------------------------------- */

#define ZL_MAX_FDS 8

int zl_send_fds(int sock, const void *buf, size_t len, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * ZL_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (nfds < 0 || nfds > ZL_MAX_FDS)
		return -EINVAL;
	if (nfds) {
		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	return sendmsg(sock, &m, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)len ? 0 : -EPROTO;
}

int zl_recv_fds(int sock, void *buf, size_t cap, size_t *got, int *fds, int maxfds,
		int *nfds, int64_t deadline)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * ZL_MAX_FDS)];
		struct cmsghdr align;
	} u;
	*nfds = 0;
	struct pollfd p = { .fd = sock, .events = POLLIN };
	int n = poll(&p, 1, zl_poll_ms(deadline));
	if (n <= 0)
		return n == 0 ? -ETIMEDOUT : -errno;
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf) };
	ssize_t r = recvmsg(sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (r < 0)
		return -errno;
	int nf = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (nf < maxfds)
				fds[nf++] = fd;
			else
				close(fd);
		}
	}
	*got = (size_t)r;
	*nfds = nf;
	int e = r == 0 ? -ECONNRESET : (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ? -EPROTO : 0;
	if (e) {
		for (int i = 0; i < nf; i++)
			close(fds[i]);
		*nfds = 0;
	}
	return e;
}

int zl_memfd_sealed(const char *name, size_t size)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

int zl_memfd_check(int fd, size_t size)
{
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);
	if (fstat(fd, &st) || (size_t)st.st_size != size || seals < 0 || !(seals & F_SEAL_SHRINK))
		return -EPROTO;
	return 0;
}

int zl_check_peer_uid(int sock, int allow_other, const char *who, int32_t *pid)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cr, &len))
		return -errno;
	*pid = cr.pid;
	if (!allow_other && cr.uid != geteuid()) {
		ZL_LOG(ZL_LOG_ERROR, "%s: refusing peer pid %d with uid %u (we run as %u)", who,
		       (int)cr.pid, (unsigned)cr.uid, (unsigned)geteuid());
		return -EPERM;
	}
	return 0;
}
