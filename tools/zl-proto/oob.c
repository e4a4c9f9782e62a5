/* SPDX-License-Identifier: MIT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "oob.h"

#define OOB_MAGIC 0x7a6c7072u /* "zlpr" */
#define OOB_MAX (64u << 20)

static uint64_t deadline_of(double s) { return mono_ns() + (uint64_t)(s * 1e9); }

static int left_ms(uint64_t dl)
{
	uint64_t now = mono_ns();
	return now >= dl ? 0 : (int)((dl - now) / 1000000 + 1);
}

/* All len bytes or -ETIMEDOUT / -EPIPE (peer closed) / -errno. */
static int io_all(int fd, void *buf, size_t len, int wr, uint64_t dl)
{
	char *p = buf;
	while (len) {
		struct pollfd pf = { .fd = fd, .events = wr ? POLLOUT : POLLIN };
		int r = poll(&pf, 1, left_ms(dl));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		ssize_t n = wr ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return errno == ECONNRESET ? -EPIPE : -errno;
		if (n == 0)
			return -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int split(const char *hostport, char *host, size_t hl, char *port, size_t pl)
{
	const char *c = strrchr(hostport, ':');
	if (!c || (size_t)(c - hostport) >= hl || strlen(c + 1) >= pl)
		return -EINVAL;
	memcpy(host, hostport, (size_t)(c - hostport));
	host[c - hostport] = 0;
	strcpy(port, c + 1);
	return 0;
}

static int resolve(const char *hostport, struct addrinfo **ai, int passive)
{
	char host[256], port[32];
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = passive ? AI_PASSIVE : 0 };
	if (split(hostport, host, sizeof(host), port, sizeof(port)))
		return -EINVAL;
	int r = getaddrinfo(host[0] ? host : NULL, port, &hints, ai);
	if (r) {
		fprintf(stderr, "zl-proto: %s: %s\n", hostport, gai_strerror(r));
		return -EINVAL;
	}
	return 0;
}

int oob_listen(const char *hostport, int *port)
{
	struct addrinfo *ai;
	int r = resolve(hostport, &ai, 1), fd = -1, one = 1;
	if (r)
		return r;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 256)) {
		r = -errno;
		fprintf(stderr, "zl-proto: listen on %s: %s\n", hostport, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return r;
	}
	freeaddrinfo(ai);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	*port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					       : ((struct sockaddr_in6 *)&ss)->sin6_port);
	return fd;
}

struct hello {
	uint32_t magic, node, n, pad;
	uint64_t tag;
};

static int connect_retry(const char *coord, uint64_t dl)
{
	struct addrinfo *ai;
	int r = resolve(coord, &ai, 0);
	if (r)
		return r;
	/* node 0 may not listen yet: retry every 50 ms until the deadline */
	for (;;) {
		int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0) {
			r = -errno;
			break;
		}
		if (!connect(fd, ai->ai_addr, ai->ai_addrlen) || errno == EINPROGRESS) {
			struct pollfd pf = { .fd = fd, .events = POLLOUT };
			int e = 0;
			socklen_t el = sizeof(e);
			if (poll(&pf, 1, left_ms(dl)) == 1 &&
			    !getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) && !e) {
				freeaddrinfo(ai);
				return fd;
			}
		}
		close(fd);
		if (!left_ms(dl)) {
			r = -ETIMEDOUT;
			break;
		}
		usleep(50000);
	}
	freeaddrinfo(ai);
	return r;
}

int oob_join(struct oob *o, int me, int n, const char *coord, int lfd, uint64_t tag,
	     double timeout)
{
	uint64_t dl = deadline_of(timeout);
	int r, one = 1;
	memset(o, 0, sizeof(*o));
	o->me = me;
	o->n = n;
	o->tag = tag;
	for (int i = 0; i < 256; i++)
		o->fd[i] = -1;
	if (me != 0) {
		int fd = connect_retry(coord, dl);
		if (fd < 0) {
			fprintf(stderr, "zl-proto: node %d: cannot reach node 0 at %s: %s\n", me, coord,
				strerror(-fd));
			return fd;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		o->fd[0] = fd;
		struct hello h = { OOB_MAGIC, (uint32_t)me, (uint32_t)n, 0, tag };
		r = io_all(fd, &h, sizeof(h), 1, dl);
		if (r)
			fprintf(stderr, "zl-proto: node %d: hello to node 0: %s\n", me, strerror(-r));
		return r;
	}
	if (lfd < 0) {
		int port;
		if ((lfd = oob_listen(coord, &port)) < 0)
			return lfd;
	}
	for (int got = 1; got < n;) {
		struct pollfd pf = { .fd = lfd, .events = POLLIN };
		if (poll(&pf, 1, left_ms(dl)) != 1) {
			fprintf(stderr, "zl-proto: node 0: only %d of %d nodes joined within %.0f s; missing:",
				got, n, timeout);
			for (int i = 1; i < n; i++)
				if (o->fd[i] < 0)
					fprintf(stderr, " %d", i);
			fprintf(stderr, "\n");
			return -ETIMEDOUT;
		}
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		struct hello h;
		/* a stranger that says nothing costs at most a second */
		uint64_t hd = mono_ns() + 1000000000ull;
		if (io_all(fd, &h, sizeof(h), 0, hd < dl ? hd : dl) || h.magic != OOB_MAGIC) {
			close(fd);
			continue;
		}
		if (h.n != (uint32_t)n || h.tag != tag) {
			fprintf(stderr, "zl-proto: node %u was started with other parameters than node 0\n",
				h.node);
			close(fd);
			return -EINVAL;
		}
		if (h.node == 0 || h.node >= (uint32_t)n || o->fd[h.node] >= 0) {
			fprintf(stderr, "zl-proto: node 0: a second node %u joined\n", h.node);
			close(fd);
			return -EINVAL;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		o->fd[h.node] = fd;
		got++;
	}
	return 0;
}


static int say(int r, int node, const char *what)
{
	if (r == -EPIPE)
		fprintf(stderr, "zl-proto: %s: node %d closed the rendezvous (it failed or died)\n", what, node);
	else if (r == -ETIMEDOUT)
		fprintf(stderr, "zl-proto: %s: no answer from node %d in time\n", what, node);
	else if (r)
		fprintf(stderr, "zl-proto: %s: node %d: %s\n", what, node, strerror(-r));
	return r;
}

/* Node 0: every other node's part, in whatever order they come, so that
 * the first node to die or fail is named at once (not after the ones
 * before it in node order answer). */
static int gather_parts(struct oob *o, uint32_t *l, char **part, uint64_t dl, const char *what)
{
	uint32_t got[256] = { 0 }; /* bytes of 4 + l[i] received */
	int left = o->n - 1;
	while (left > 0) {
		struct pollfd pf[256];
		int idx[256], k = 0;
		for (int i = 1; i < o->n; i++)
			if (!part[i] || got[i] < 4 + l[i]) {
				pf[k] = (struct pollfd){ .fd = o->fd[i], .events = POLLIN };
				idx[k++] = i;
			}
		int r = poll(pf, (nfds_t)k, left_ms(dl));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			for (int j = 0; j < k; j++)
				say(-ETIMEDOUT, idx[j], what);
			return -ETIMEDOUT;
		}
		for (int j = 0; j < k; j++) {
			int i = idx[j];
			if (!(pf[j].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t n;
			if (got[i] < 4)
				n = recv(o->fd[i], (char *)&l[i] + got[i], 4 - got[i], MSG_DONTWAIT);
			else
				n = recv(o->fd[i], part[i] + (got[i] - 4), 4 + l[i] - got[i], MSG_DONTWAIT);
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (n <= 0)
				return say(n == 0 || errno == ECONNRESET ? -EPIPE : -errno, i, what);
			got[i] += (uint32_t)n;
			if (got[i] == 4) {
				if (l[i] > OOB_MAX || !(part[i] = malloc(l[i] + 1)))
					return say(-EPROTO, i, what);
			}
			if (part[i] && got[i] == 4 + l[i])
				left--;
		}
	}
	return 0;
}

int oob_gather(struct oob *o, const void *mine, uint32_t len, void **all, uint32_t *lens,
	       double timeout, const char *what)
{
	uint64_t dl = deadline_of(timeout);
	uint32_t *l = calloc((size_t)o->n, sizeof(*l));
	char *buf = NULL;
	int r = 0;
	if (!l)
		return -ENOMEM;
	if (o->me != 0) {
		uint32_t total;
		if ((r = io_all(o->fd[0], &len, 4, 1, dl)) || (r = io_all(o->fd[0], (void *)mine, len, 1, dl)) ||
		    (r = io_all(o->fd[0], l, 4 * (size_t)o->n, 0, dl)))
			goto out;
		total = 0;
		for (int i = 0; i < o->n; i++)
			total += l[i];
		if (total > OOB_MAX) {
			r = -EPROTO;
			goto out;
		}
		if (!(buf = malloc(total + 1))) {
			r = -ENOMEM;
			goto out;
		}
		r = io_all(o->fd[0], buf, total, 0, dl);
	} else {
		char *part[256] = { 0 };
		uint32_t total = len;
		l[0] = len;
		if ((r = gather_parts(o, l, part, dl, what)) == 0) {
			for (int i = 1; i < o->n; i++)
				total += l[i];
			if (!(buf = malloc(total + 1)))
				r = -ENOMEM;
		}
		if (!r) {
			size_t at = len;
			memcpy(buf, mine, len);
			for (int i = 1; i < o->n; i++) {
				memcpy(buf + at, part[i], l[i]);
				at += l[i];
			}
			for (int i = 1; i < o->n && !r; i++)
				if ((r = io_all(o->fd[i], l, 4 * (size_t)o->n, 1, dl)) ||
				    (r = io_all(o->fd[i], buf, total, 1, dl)))
					say(r, i, what);
		}
		for (int i = 1; i < o->n; i++)
			free(part[i]);
		if (r) {
			free(l);
			free(buf);
			return r; /* already said which node */
		}
	}
out:
	memset(o->quiet, 0, sizeof(o->quiet));
	if (r) {
		if (o->me != 0)
			say(r, 0, what);
		free(buf);
		free(l);
		return r;
	}
	*all = buf;
	if (lens)
		memcpy(lens, l, 4 * (size_t)o->n);
	free(l);
	return 0;
}

int oob_barrier(struct oob *o, double timeout, const char *what)
{
	void *all;
	char c = 0;
	int r = oob_gather(o, &c, 1, &all, NULL, timeout, what);
	if (!r)
		free(all);
	return r;
}

int oob_watch(struct oob *o, int ms, const char *what)
{
	struct pollfd pf[256];
	int idx[256], k = 0;
	for (int i = 0; i < o->n; i++)
		if (o->fd[i] >= 0 && !o->quiet[i]) {
			pf[k] = (struct pollfd){ .fd = o->fd[i], .events = POLLIN };
			idx[k++] = i;
		}
	int r = poll(k ? pf : NULL, (nfds_t)k, ms);
	for (int j = 0; j < k && r > 0; j++) {
		char c;
		if (!pf[j].revents)
			continue;
		ssize_t n = recv(pf[j].fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return say(-EPIPE, idx[j], what);
		if (n > 0)
			o->quiet[idx[j]] = 1; /* its next part is here: it is done */
	}
	return 0;
}

void oob_close(struct oob *o)
{
	for (int i = 0; i < 256; i++)
		if (o->fd[i] >= 0)
			close(o->fd[i]);
}
