/* SPDX-License-Identifier: MIT */
/*
 * tcp:// and unix:// endpoints: addressing, listen/accept/connect and the
 * handshake.
 *
 * Handshake semantics: both sides send their hello at once, then read the
 * peer's. On accept the exchange gets its own handshake_timeout_us (not the
 * accept timeout: a peer that connected just before the accept deadline
 * still gets a fair chance). Then zl_accept
 *   - returns -EPROTO for a malformed or incompatible hello (bad magic is
 *     detected from the first bytes, without waiting for all 16),
 *   - returns -ETIMEDOUT if the hello stalls past handshake_timeout_us,
 *   - silently drops a peer that closes before sending a single byte (a
 *     port probe, or the liveness probe of a unix listen) and keeps waiting
 *     for the next one until its own timeout.
 * The peer is closed in every failing case. On connect, the handshake is
 * bounded by both the caller's timeout and handshake_timeout_us.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <endian.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "sockutil.h"
#include "stream.h"

struct slistener {
	struct zl_listener base;
	int fd;
	bool is_unix;
	struct zl_opts o;
	char url[ZL_URL_MAX];
	struct sockaddr_un sun; /* unix: our path, unlinked on close if still ours */
	dev_t dev;
	ino_t ino;
};

static const char *name(bool is_unix) { return is_unix ? "unix" : "tcp"; }

/* ---- handshake -------------------------------------------------------- */

/* Move n bytes in one direction before deadline. Reading: -ENOTCONN if the
 * peer left before sending anything, -EPROTO if it left mid-hello,
 * -EBADMSG as soon as its first bytes are not our magic. */
static int xfer(int fd, uint8_t *buf, size_t n, int64_t deadline, bool out)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = out ? send(fd, buf + done, n - done, MSG_NOSIGNAL | MSG_DONTWAIT)
				: recv(fd, buf + done, n - done, MSG_DONTWAIT);
		if (r > 0) {
			done += (size_t)r;
			size_t m = done < 4 ? done : 4;
			if (!out && memcmp(buf, ZL_STREAM_MAGIC, m))
				return -EBADMSG; /* garbage: no need to wait for more */
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (zl_now_us() >= deadline)
				return -ETIMEDOUT;
			int rc = zl_stream_poll(fd, out ? POLLOUT : POLLIN, deadline, NULL);
			if (rc < 0)
				return rc;
			continue;
		}
		if (r == 0 || errno == ECONNRESET || errno == EPIPE)
			return done ? -EPROTO : -ENOTCONN;
		return -errno;
	}
	return 0;
}

/* Handshake on a fresh nonblocking socket and wrap it in a channel. Closes
 * fd on failure. */
static int setup(int fd, bool is_unix, const struct zl_opts *o, int64_t deadline,
		 zl_channel **out)
{
	int32_t pid;
	int refuse = is_unix ? zl_check_peer_uid(fd, o->allow_other_uid, "unix", &pid) : 0;
	uint8_t me[ZL_STREAM_HELLO_LEN], peer[ZL_STREAM_HELLO_LEN] = { 0 };
	uint16_t ver = htole16(ZL_PROTO_VERSION), flags = htole16(refuse ? ZL_STREAM_F_EPERM : 0);
	uint64_t max = htole64(o->max_msg);
	memcpy(me, ZL_STREAM_MAGIC, 4);
	memcpy(me + 4, &ver, 2);
	memcpy(me + 6, &flags, 2);
	memcpy(me + 8, &max, 8);
	int rc = xfer(fd, me, sizeof(me), deadline, true);
	if (refuse) { /* the hello told the peer why */
		close(fd);
		return refuse;
	}
	if (rc == -ENOTCONN)
		rc = 0; /* the peer already left, but what it sent may be queued */
	if (!rc)
		rc = xfer(fd, peer, sizeof(peer), deadline, false);
	if (rc == -EBADMSG) {
		rc = -EPROTO;
		ZL_LOG(ZL_LOG_ERROR, "%s handshake: bad magic %02x %02x %02x %02x, expected "
		       "\"ZLST\" (peer is not a zipline stream endpoint)", name(is_unix),
		       peer[0], peer[1], peer[2], peer[3]);
	} else if (rc == -EPROTO) {
		ZL_LOG(ZL_LOG_ERROR, "%s handshake: peer closed in the middle of its hello",
		       name(is_unix));
	} else if (rc == -ETIMEDOUT) {
		ZL_LOG(ZL_LOG_ERROR, "%s handshake: no complete hello from the peer in time",
		       name(is_unix));
	} else if (!rc) {
		memcpy(&ver, peer + 4, 2);
		memcpy(&flags, peer + 6, 2);
		memcpy(&max, peer + 8, 8);
		ver = le16toh(ver);
		max = le64toh(max);
		if (ver == ZL_PROTO_VERSION && (le16toh(flags) & ZL_STREAM_F_EPERM)) {
			ZL_LOG(ZL_LOG_ERROR, "%s handshake: the peer refuses us: we run as "
			       "another user", name(is_unix));
			rc = -EPERM;
		} else if (ver != ZL_PROTO_VERSION) {
			ZL_LOG(ZL_LOG_ERROR, "%s handshake: peer speaks protocol version %u, "
			       "we speak %u", name(is_unix), ver, ZL_PROTO_VERSION);
			rc = -EPROTO;
		} else if (max == 0) {
			ZL_LOG(ZL_LOG_ERROR, "%s handshake: peer announced max_msg 0", name(is_unix));
			rc = -EPROTO;
		}
	}
	if (rc) {
		close(fd);
		return rc;
	}
	return zl_stream_chan_new(fd, is_unix, o, max, out);
}

/* ---- addresses -------------------------------------------------------- */

static int unix_addr(const struct zl_url *u, struct sockaddr_un *sa)
{
	size_t n = strlen(u->path);
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (u->host[0] || u->port[0] || u->path[0] != '/' || n >= sizeof(sa->sun_path)) {
		ZL_LOG(ZL_LOG_ERROR, "unix: need unix:///absolute/path of at most %zu bytes",
		       sizeof(sa->sun_path) - 1);
		return -EINVAL;
	}
	memcpy(sa->sun_path, u->path, n);
	return 0;
}

/* tcp://HOST:PORT, the port always given; 0 (any) only for listening. */
static int tcp_check(const struct zl_url *u, bool passive)
{
	bool bad_port = !u->port[0] || strlen(u->port) > 5 || atoi(u->port) > 65535;
	if ((u->path[0] && strcmp(u->path, "/")) || bad_port ||
	    (!passive && (!u->host[0] || !atoi(u->port)))) {
		ZL_LOG(ZL_LOG_ERROR, "tcp: need tcp://HOST:PORT%s",
		       passive ? " (PORT 0: any free port)" : " with PORT > 0");
		return -EINVAL;
	}
	return 0;
}

/* ---- listener --------------------------------------------------------- */

static int l_take(zl_listener *base)
{
	struct slistener *l = (struct slistener *)base;
	return zl_sock_take(l->fd, !l->is_unix);
}

static int l_ready(zl_listener *base, int fd)
{
	(void)base;
	return zl_sock_ready(fd, ZL_STREAM_HELLO_LEN, ZL_STREAM_MAGIC, 4);
}

static int l_finish(zl_listener *base, int fd, zl_channel **out, void **half, int *wfd)
{
	struct slistener *l = (struct slistener *)base;
	return setup(fd, l->is_unix, &l->o, zl_deadline(l->o.handshake_timeout_us), out);
}

static int l_fd(const zl_listener *base) { return ((const struct slistener *)base)->fd; }

static int l_url(const zl_listener *base, char *buf, size_t cap)
{
	const struct slistener *l = (const struct slistener *)base;
	return (size_t)snprintf(buf, cap, "%s", l->url) >= cap ? -ENOSPC : 0;
}

static void l_close(zl_listener *base)
{
	struct slistener *l = (struct slistener *)base;
	struct stat st;
	/* Unlink only our own socket file, not one a successor put there. */
	if (l->is_unix && !lstat(l->sun.sun_path, &st) && st.st_dev == l->dev &&
	    st.st_ino == l->ino)
		unlink(l->sun.sun_path);
	close(l->fd);
	free(l);
}

static const struct zl_listener_ops listener_ops = {
	.take = l_take,
	.ready = l_ready,
	.finish = l_finish,
	.fd = l_fd,
	.url = l_url,
	.close = l_close,
};

static struct slistener *l_new(int fd, bool is_unix, const struct zl_opts *o)
{
	struct slistener *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->base.ops = &listener_ops;
	l->fd = fd;
	l->is_unix = is_unix;
	l->o = *o;
	return l;
}

static int tcp_listen(const struct zl_url *u, const struct zl_opts *o, zl_listener **out)
{
	int rc = zl_opts_check_keys(u);
	if (!rc)
		rc = tcp_check(u, true);
	if (rc)
		return rc;
	int fd = zl_tcp_listen(u->host, u->port);
	if (fd < 0) {
		ZL_LOG(ZL_LOG_ERROR, "tcp: cannot listen on '%s:%s': %s", u->host, u->port,
		       strerror(-fd));
		return fd;
	}
	/* Report the port actually bound, and a host peers can use. */
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[NI_MAXHOST] = "", port[NI_MAXSERV] = "0";
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), port, sizeof(port),
		    NI_NUMERICHOST | NI_NUMERICSERV);
	const char *h = u->host[0] ? u->host : host;
	struct slistener *l = l_new(fd, false, o);
	if (!l) {
		close(fd);
		return -ENOMEM;
	}
	snprintf(l->url, sizeof(l->url), strchr(h, ':') ? "tcp://[%s]:%s" : "tcp://%s:%s", h, port);
	*out = &l->base;
	return 0;
}

/* bind() found the path taken. A socket file nobody listens on (connect
 * refused) is left over from a dead process: remove it. 0: retry bind. */
static int unix_reclaim(const struct sockaddr_un *sa)
{
	struct stat st;
	if (lstat(sa->sun_path, &st))
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode)) {
		ZL_LOG(ZL_LOG_ERROR, "unix: '%s' exists and is not a socket", sa->sun_path);
		return -EADDRINUSE;
	}
	int p = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (p < 0)
		return -errno;
	int r = connect(p, (const struct sockaddr *)sa, sizeof(*sa)), e = errno;
	close(p);
	if (r && e == ECONNREFUSED) {
		ZL_LOG(ZL_LOG_INFO, "unix: removing stale socket '%s'", sa->sun_path);
		return unlink(sa->sun_path) && errno != ENOENT ? -errno : 0;
	}
	if (r && e != EAGAIN)
		return -e;
	ZL_LOG(ZL_LOG_ERROR, "unix: somebody already listens on '%s'", sa->sun_path);
	return -EADDRINUSE;
}

static int unix_listen(const struct zl_url *u, const struct zl_opts *o, zl_listener **out)
{
	struct sockaddr_un sa;
	struct stat st;
	int rc = zl_opts_check_keys(u);
	if (!rc)
		rc = unix_addr(u, &sa);
	if (rc)
		return rc;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ? -errno : 0;
	if (rc == -EADDRINUSE) {
		rc = unix_reclaim(&sa);
		if (!rc)
			rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ? -errno : 0;
	}
	if (rc) {
		close(fd);
		return rc;
	}
	struct slistener *l = NULL;
	if (listen(fd, SOMAXCONN) || lstat(sa.sun_path, &st))
		rc = -errno;
	else if (!(l = l_new(fd, true, o)))
		rc = -ENOMEM;
	if (!l) {
		unlink(sa.sun_path);
		close(fd);
		return rc;
	}
	l->sun = sa;
	l->dev = st.st_dev;
	l->ino = st.st_ino;
	snprintf(l->url, sizeof(l->url), "unix://%s", sa.sun_path);
	*out = &l->base;
	return 0;
}

/* ---- connect ---------------------------------------------------------- */

static int64_t hs_deadline(const struct zl_opts *o, int64_t deadline)
{
	int64_t hs = zl_deadline(o->handshake_timeout_us);
	return hs < deadline ? hs : deadline;
}

static int finish_connect(int fd, bool is_unix, const struct zl_opts *o, int64_t deadline,
			  zl_channel **out)
{
	int rc = setup(fd, is_unix, o, hs_deadline(o, deadline), out);
	return rc == -ENOTCONN ? -ECONNRESET : rc; /* dropped by the listener */
}

static int tcp_connect(const struct zl_url *u, const struct zl_opts *o, int64_t timeout_us,
		       zl_channel **out)
{
	int64_t deadline = zl_deadline(timeout_us);
	int rc = zl_opts_check_keys(u);
	if (!rc)
		rc = tcp_check(u, false);
	if (rc)
		return rc;
	int fd = zl_tcp_connect(u->host, u->port, deadline);
	if (fd < 0) {
		ZL_LOG(ZL_LOG_ERROR, "tcp: cannot connect to '%s:%s': %s", u->host, u->port,
		       strerror(-fd));
		return fd;
	}
	return finish_connect(fd, false, o, deadline, out);
}

static int unix_connect(const struct zl_url *u, const struct zl_opts *o, int64_t timeout_us,
			zl_channel **out)
{
	int64_t deadline = zl_deadline(timeout_us);
	struct sockaddr_un sa;
	int rc = zl_opts_check_keys(u);
	if (!rc)
		rc = unix_addr(u, &sa);
	if (rc)
		return rc;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	while (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		rc = -errno;
		if (rc == -EINTR)
			continue;
		if (rc == -EAGAIN && zl_now_us() < deadline) { /* backlog full: retry */
			poll(NULL, 0, 1);
			continue;
		}
		if (rc == -EAGAIN)
			rc = -ETIMEDOUT;
		else if (rc == -ENOENT)
			rc = -ECONNREFUSED; /* nobody listens there */
		ZL_LOG(ZL_LOG_ERROR, "unix: cannot connect to '%s': %s", sa.sun_path,
		       strerror(-rc));
		close(fd);
		return rc;
	}
	return finish_connect(fd, true, o, deadline, out);
}

const struct zl_transport zl_transport_tcp = { "tcp", tcp_listen, tcp_connect };
const struct zl_transport zl_transport_unix = { "unix", unix_listen, unix_connect };
