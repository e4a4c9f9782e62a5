/* SPDX-License-Identifier: MIT */
/* Public entry points: argument checks, URL dispatch to the transports. */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>

#include "chanstat.h"
#include "clock.h"
#include "hs.h"
#include "internal.h"


static const struct zl_transport *const transports[] = {
	&zl_transport_shm,
	&zl_transport_tcp,
	&zl_transport_unix,
	&zl_transport_rdma,
};

ZL_API int zl_version(void) { return ZL_VERSION_NUM; }

ZL_API const char *zl_strerror(int err)
{
	switch (err) {
	case 0: return "success";
	case -EAGAIN: return "would block (nothing ready; try again)";
	case -ETIMEDOUT: return "timed out";
	case -ECONNRESET: return "peer closed or died";
	case -EPIPE: return "channel is shut down or failed";
	case -ESHUTDOWN: return "the channel was shut down here (zl_shutdown)";
	case -EPROTO: return "protocol violation by the peer";
	case -EMSGSIZE: return "message too large";
	case -EINVAL: return "invalid argument";
	case -EPROTONOSUPPORT: return "unknown or unsupported transport";
	case -ECONNREFUSED: return "connection refused";
	case -EADDRINUSE: return "address in use";
	case -ENOMEM: return "out of memory";
	case -EBUSY: return "busy (a reservation or peek is open, or every call slot is in use)";
	case -ESTALE: return "the value changed (compare-and-swap did not match)";
	case -EADDRNOTAVAIL: return "address not available (the host name does not resolve)";
	case -EUSERS: return "too many peers (handshakes, clients or connections)";
	case -EPERM: return "permission denied (peer credentials)";
	default:
		if (err < 0 && err > -4096)
			return strerror(-err); /* glibc returns static text for known codes */
		return "unknown error";
	}
}

static int resolve(const char *url, const struct zl_opts *opts, struct zl_url *u,
		   struct zl_opts *o, const struct zl_transport **t)
{
	int rc = zl_url_parse(url, u);
	if (rc) {
		ZL_LOG(ZL_LOG_ERROR, "malformed URL '%s'", url ? url : "(null)");
		return rc;
	}
	zl_opts_init(o);
	if (opts) {
		if (opts->size < offsetof(struct zl_opts, reserved)) {
			ZL_LOG(ZL_LOG_ERROR, "struct zl_opts: size %u; fill it with zl_opts_init",
			       opts->size);
			return -EINVAL;
		}
		/* reserved fields must stay zero, so that they can be given a
		 * meaning later without changing what old callers ask for */
		size_t end = opts->size < sizeof(*opts) ? opts->size : sizeof(*opts);
		for (size_t i = offsetof(struct zl_opts, reserved); i < end; i++)
			if (((const unsigned char *)opts)[i]) {
				ZL_LOG(ZL_LOG_ERROR, "struct zl_opts: reserved fields must be zero");
				return -EINVAL;
			}
		memcpy(o, opts, offsetof(struct zl_opts, reserved));
		o->size = sizeof(*o);
		if (!o->max_handshakes) /* a caller's own zeroed options */
			o->max_handshakes = 64;
	}
	rc = zl_opts_apply_url(o, u);
	if (rc)
		return rc;
	for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]); i++)
		if (!strcmp(transports[i]->scheme, u->scheme)) {
			*t = transports[i];
			return 0;
		}
	ZL_LOG(ZL_LOG_ERROR, "unknown transport '%s'", u->scheme);
	return -EPROTONOSUPPORT;
}

static int listen_capped(const char *url, const struct zl_opts *opts, uint64_t max_msg,
			 uint32_t max_peer_ring, struct zl_opts *o, zl_listener **out)
{
	struct zl_url u;
	const struct zl_transport *t;
	if (!out)
		return -EINVAL;
	int rc = resolve(url, opts, &u, o, &t);
	if (rc)
		return rc;
	if (o->max_msg > max_msg)
		o->max_msg = max_msg;
	if (o->max_peer_ring > max_peer_ring)
		o->max_peer_ring = max_peer_ring;
	return t->listen(&u, o, out);
}

ZL_API int zl_listen(const char *url, const struct zl_opts *opts, zl_listener **out)
{
	struct zl_opts o;
	zl_listener *l;
	if (!out)
		return -EINVAL;
	int rc = listen_capped(url, opts, UINT64_MAX, UINT32_MAX, &o, &l);
	if (rc)
		return rc;
	if (!(rc = zl_hs_new(o.max_handshakes, false, &l->hs)) &&
	    !(rc = zl_hs_watch(l->hs, l, o.handshake_timeout_us))) {
		*out = l;
		return 0;
	}
	zl_listener_close(l);
	return rc;
}

int zl_listen_capped(const char *url, const struct zl_opts *opts, uint64_t max_msg,
		     uint32_t max_peer_ring, int64_t *hs_us, zl_listener **out)
{
	struct zl_opts o;
	int rc = listen_capped(url, opts, max_msg, max_peer_ring, &o, out);
	if (!rc && hs_us)
		*hs_us = o.handshake_timeout_us;
	return rc;
}

ZL_API int zl_connect(const char *url, const struct zl_opts *opts, int64_t timeout_us,
		      zl_channel **out)
{
	struct zl_url u;
	struct zl_opts o;
	const struct zl_transport *t;
	if (!out)
		return -EINVAL;
	int rc = resolve(url, opts, &u, &o, &t);
	if (!rc && !(rc = t->connect(&u, &o, timeout_us, out)))
		zl_chanstat_open(*out, url);
	return rc;
}

/* The handshakes of every pending peer run side by side (hs.c): a silent
 * peer holds only its own entry, never this call. */
ZL_API int zl_accept(zl_listener *l, int64_t timeout_us, zl_channel **out)
{
	if (!l || !out || !l->hs)
		return -EINVAL;
	int64_t deadline = zl_deadline(timeout_us);
	for (;;) {
		struct zl_hs_out o;
		if (zl_hs_next(l->hs, &o)) {
			if (o.ch) {
				char url[256];
				*out = o.ch;
				if (!zl_listener_url(l, url, sizeof(url)))
					zl_chanstat_open(o.ch, url);
			}
			return o.ch ? 0 : o.err;
		}
		if (zl_hs_wait(l->hs, deadline))
			return ZL_TIMEOUT_ERR(timeout_us);
	}
}

ZL_API int zl_listener_fd(const zl_listener *l)
{
	return l && l->hs ? zl_hs_fd(l->hs) : -EINVAL;
}

ZL_API int zl_listener_url(const zl_listener *l, char *buf, size_t cap)
{
	if (!l || !buf || !cap)
		return -EINVAL;
	return l->ops->url(l, buf, cap);
}

ZL_API void zl_listener_close(zl_listener *l)
{
	if (!l)
		return;
	zl_hs_free(l->hs);
	l->ops->close(l);
}

ZL_API void zl_close(zl_channel *ch)
{
	if (!ch)
		return;
	zl_chanstat_close(ch);
	ch->ops->close(ch);
}

/* A blocked call ends by the socket's end (its sleep and its alive check
 * watch that socket): the shutdown of our own socket wakes our sleepers at
 * once and spinners at their next look, and the peer sees our end. */
ZL_API int zl_shutdown(zl_channel *ch)
{
	if (!ch)
		return -EINVAL;
	if (atomic_exchange(&ch->shut, 1))
		return 0;
	int s = ch->ops->sock ? ch->ops->sock(ch) : -1;
	if (s >= 0)
		shutdown(s, SHUT_RDWR);
	return 0;
}

/* After zl_shutdown a call that failed for the channel's end (or timed
 * out because of it) says so; an error about the call's own arguments
 * (-EMSGSIZE with its *len, -EBUSY, -EINVAL) stays. */
static inline int shut_or(const zl_channel *ch, int r)
{
	if (r != -ECONNRESET && r != -EPIPE && r != -ETIMEDOUT && r != -EAGAIN)
		return r;
	return atomic_load_explicit(&ch->shut, memory_order_relaxed) ? -ESHUTDOWN : r;
}

ZL_API int zl_send(zl_channel *ch, const void *buf, size_t len, int64_t timeout_us)
{
	if (!ch || (!buf && len))
		return -EINVAL;
	if (atomic_load_explicit(&ch->shut, memory_order_relaxed))
		return -ESHUTDOWN;
	int r = shut_or(ch, ch->ops->send(ch, buf, len, timeout_us));
	zl_chanstat_tx(ch, r, !r, r ? 0 : len);
	return r;
}

/* Without the transport's own sendv: one send after the other, under one
 * deadline. */
static int sendv_loop(zl_channel *ch, const struct zl_msgvec *v, size_t n, int64_t timeout_us)
{
	int64_t deadline = timeout_us > 0 ? zl_now_us() + timeout_us : 0;
	for (size_t i = 0; i < n; i++) {
		int64_t t = timeout_us;
		if (timeout_us > 0 && i) {
			t = deadline - zl_now_us();
			t = t > 0 ? t : 0;
		}
		int r = ch->ops->send(ch, v[i].buf, v[i].len, t);
		if (r)
			return i ? (int)i : r;
	}
	return (int)n;
}

ZL_API int zl_sendv(zl_channel *ch, const struct zl_msgvec *v, size_t n, int64_t timeout_us)
{
	if (!ch || (!v && n))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!v[i].buf && v[i].len)
			return -EINVAL;
	if (atomic_load_explicit(&ch->shut, memory_order_relaxed))
		return -ESHUTDOWN;
	if (!n)
		return 0;
	if (n > INT_MAX)
		n = INT_MAX;
	int r = shut_or(ch, ch->ops->sendv ? ch->ops->sendv(ch, v, n, timeout_us)
					  : sendv_loop(ch, v, n, timeout_us));
	if (__builtin_expect(ch->st_idx != 0, 0)) {
		uint64_t bytes = 0;
		for (int i = 0; i < r; i++)
			bytes += v[i].len;
		zl_chanstat_tx(ch, r, r > 0 ? (uint64_t)r : 0, bytes);
	}
	return r;
}

ZL_API int zl_recv(zl_channel *ch, void *buf, size_t cap, size_t *len, int64_t timeout_us)
{
	if (!ch || !len || (!buf && cap))
		return -EINVAL;
	if (atomic_load_explicit(&ch->shut, memory_order_relaxed))
		return -ESHUTDOWN;
	int r = shut_or(ch, ch->ops->recv(ch, buf, cap, len, timeout_us));
	zl_chanstat_rx(ch, r, !r, r ? 0 : *len);
	return r;
}

ZL_API int zl_flush(zl_channel *ch, int64_t timeout_us)
{
	if (!ch)
		return -EINVAL;
	if (atomic_load_explicit(&ch->shut, memory_order_relaxed))
		return -ESHUTDOWN;
	return shut_or(ch, ch->ops->flush(ch, timeout_us));
}

ZL_API int zl_send_reserve(zl_channel *ch, size_t len, void **ptr)
{
	if (!ch || !ptr)
		return -EINVAL;
	if (atomic_load_explicit(&ch->shut, memory_order_relaxed))
		return -ESHUTDOWN;
	return shut_or(ch, ch->ops->reserve(ch, len, ptr));
}

ZL_API int zl_send_commit(zl_channel *ch, size_t len)
{
	if (!ch)
		return -EINVAL;
	if (atomic_load_explicit(&ch->shut, memory_order_relaxed))
		return -ESHUTDOWN;
	int r = shut_or(ch, ch->ops->commit(ch, len));
	zl_chanstat_tx(ch, r, !r, r ? 0 : len);
	return r;
}

ZL_API int zl_recv_peek(zl_channel *ch, const void **ptr, size_t *len, int64_t timeout_us)
{
	if (!ch || !ptr || !len)
		return -EINVAL;
	if (atomic_load_explicit(&ch->shut, memory_order_relaxed))
		return -ESHUTDOWN;
	int r = shut_or(ch, ch->ops->peek(ch, ptr, len, timeout_us));
	if (r)
		zl_chanstat_rx(ch, r, 0, 0);
	else
		ch->st_peek_len = *len;
	return r;
}

ZL_API int zl_recv_release(zl_channel *ch)
{
	if (!ch)
		return -EINVAL;
	int r = ch->ops->release(ch);
	if (!r && ch->st_peek_len != (size_t)-1) /* (a second release: no message) */
		zl_chanstat_rx(ch, r, 1, ch->st_peek_len);
	ch->st_peek_len = (size_t)-1;
	return r;
}

ZL_API size_t zl_max_inline(const zl_channel *ch) { return ch ? ch->ops->max_inline(ch) : 0; }

ZL_API int zl_wait_writable(zl_channel *ch, size_t len, int64_t timeout_us)
{
	if (!ch)
		return -EINVAL;
	if (atomic_load_explicit(&ch->shut, memory_order_relaxed))
		return -ESHUTDOWN;
	return shut_or(ch, ch->ops->wait_writable(ch, len, timeout_us));
}

ZL_API int zl_channel_fd(zl_channel *ch) { return ch ? ch->ops->fd(ch) : -EINVAL; }

ZL_API int zl_channel_arm(zl_channel *ch)
{
	if (!ch || !ch->ops->arm)
		return -EINVAL;
	int fd = ch->ops->fd(ch);
	if (fd < 0)
		return -EINVAL;
	int r = ch->ops->arm(ch, ZL_POLLIN, false);
	return r > 0 ? -EBUSY : r;
}

ZL_API int zl_channel_info(const zl_channel *ch, struct zl_channel_info *info)
{
	if (!ch || !info)
		return -EINVAL;
	memset(info, 0, sizeof(*info));
	info->peer_pid = -1;
	ch->ops->info(ch, info);
	return 0;
}
