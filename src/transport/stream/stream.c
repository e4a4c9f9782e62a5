/* SPDX-License-Identifier: MIT */
/*
 * The stream channel data path (tcp:// and unix://).
 *
 * Receive: one recv() into rbuf may carry many frames; they are parsed out
 * without further syscalls. A frame too big for rbuf is read straight into
 * the caller's buffer (readv: rest of the frame + rbuf for what follows).
 * If a wait times out in the middle of such a frame, the bytes read so far
 * are moved back into rbuf (grown to hold the frame), so nothing is lost
 * and later calls continue there.
 *
 * Waits: a blocking receive polls first (with nothing complete buffered, a
 * read would most likely find nothing; syscalls cost ~0.5-1 us here), then
 * reads. busy_poll=1 instead spins on nonblocking recv()/send() for spin_us
 * before it polls. info.sleeps counts poll() calls.
 *
 * Send: sendmsg(header, payload) in one syscall (small frames are copied
 * into sbuf and go out with one send()). If the socket fills up and
 * the deadline passes after part of a frame left, the rest is copied to
 * sbuf ("pending") and the send counts as accepted; every later send-side
 * call, zl_recv and zl_close push it out first. sbuf also holds zero-copy
 * reservations (a reservation needs an empty pending area).
 *
 * Threads: the receive side may run concurrently with the send side. The
 * receive side only touches send state through try_push(), under slock.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <endian.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "clock.h"
#include "stream.h"

#define RBUF_SIZE (64u << 10)
#define SBUF_SIZE (4u << 10)
#define SMALL_FRAME 1024 /* frames up to this size are copied, then send() */
#define CLOSE_FLUSH_US 100000

struct schan {
	struct zl_channel base;
	int fd;
	bool is_unix;
	bool busy_poll;
	int64_t spin_us;
	uint64_t max_msg;	/* incoming frame limit (ours) */
	uint64_t send_max;	/* outgoing limit: min(peer's max_msg, u32) */
	int32_t peer_pid;
	atomic_int err;		/* 0, -ECONNRESET (peer gone) or -EPIPE (failed) */

	/* receive side */
	uint8_t *rbuf;
	size_t rcap, rhead, rtail; /* unparsed bytes: rbuf[rhead, rtail) */
	size_t peeked;		/* frame size of an unreleased peek, 0: none */
	bool eof;
	uint64_t msgs_recv, bytes_recv, rsleeps, rsys;

	/* send side */
	atomic_int slock;	/* send side vs. try_push() from the receiver */
	atomic_bool pending;	/* plen != 0, readable without slock */
	bool res_open;
	size_t res_len;
	uint8_t *sbuf;
	size_t scap, poff, plen; /* unsent bytes: sbuf[poff, plen) */
	uint64_t msgs_sent, bytes_sent, ssleeps, ssys; /* ssys: under slock */
};

#define CH(ch) ((struct schan *)(ch))

static int peer_gone(struct schan *c)
{
	int zero = 0;
	atomic_compare_exchange_strong(&c->err, &zero, -ECONNRESET);
	return -ECONNRESET;
}

/* The channel is unusable from now on: later calls return -EPIPE. */
static int fail(struct schan *c, int rc)
{
	atomic_store(&c->err, -EPIPE);
	return rc;
}

/* ---- waiting ---------------------------------------------------------- */

/* One wait loop's deadline, computed lazily so the fast path never reads
 * the clock. */
struct waiter {
	int64_t timeout, deadline, spin_end;
	bool armed;
};
#define WAITER(t) { .timeout = (t) }

/* Called after an attempt would block. busy_poll: spin (the caller retries
 * its nonblocking syscall) until spin_end; then sleep in poll. Returns 0 to
 * retry, the timeout error, or -errno. */
static int wait_io(struct schan *c, struct waiter *w, short events, uint64_t *sleeps)
{
	int64_t now = zl_now_us();
	if (!w->armed) {
		w->armed = true;
		w->deadline = zl_deadline(w->timeout);
		if (!c->busy_poll)
			w->spin_end = now;
		else if (c->spin_us < 0 || c->spin_us > w->deadline - now)
			w->spin_end = w->deadline;
		else
			w->spin_end = now + c->spin_us;
	}
	if (now >= w->deadline)
		return ZL_TIMEOUT_ERR(w->timeout);
	if (now < w->spin_end) {
		zl_cpu_relax();
		return 0;
	}
	(*sleeps)++;
	int rc = zl_stream_poll(c->fd, events, w->deadline, NULL);
	return rc < 0 ? rc : 0;
}

/* ---- send side -------------------------------------------------------- */

static void slock(struct schan *c)
{
	while (atomic_exchange_explicit(&c->slock, 1, memory_order_acquire))
		zl_cpu_relax();
}

static void sunlock(struct schan *c)
{
	atomic_store_explicit(&c->slock, 0, memory_order_release);
}

/* Push sbuf[poff, plen) out. w == NULL: never wait (-EAGAIN if stuck). */
static int push_pending(struct schan *c, struct waiter *w)
{
	int rc = 0;
	while (c->poff < c->plen) {
		c->ssys++;
		ssize_t n = send(c->fd, c->sbuf + c->poff, c->plen - c->poff,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0) {
			c->poff += (size_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n == 0 || errno == EAGAIN || errno == EWOULDBLOCK) {
			rc = w ? wait_io(c, w, POLLOUT, &c->ssleeps) : -EAGAIN;
			if (rc)
				break;
		} else {
			rc = peer_gone(c);
			c->poff = c->plen; /* dead channel: drop it */
			break;
		}
	}
	if (c->poff == c->plen)
		c->poff = c->plen = 0;
	atomic_store_explicit(&c->pending, c->plen != 0, memory_order_relaxed);
	return rc;
}

/* Called by the receive side: push pending bytes if the sender is idle. */
static void try_push(struct schan *c)
{
	if (!atomic_load_explicit(&c->pending, memory_order_relaxed) ||
	    atomic_exchange_explicit(&c->slock, 1, memory_order_acquire))
		return;
	push_pending(c, NULL); /* errors reach the sender through c->err */
	sunlock(c);
}

/* Send the frame hdr|buf; keep the tail in sbuf if the deadline passes
 * after part of it left. */
static int send_frame(struct schan *c, const uint8_t *buf, size_t len, struct waiter *w)
{
	uint32_t hdr = htole32((uint32_t)len);
	const uint8_t *h = (const uint8_t *)&hdr;
	size_t total = 4 + len, sent = 0;
	if (total <= SMALL_FRAME) {
		/* Small: build it in sbuf and send() it; cheaper than sendmsg's
		 * iovec import, and a partial send leaves it pending in place. */
		memcpy(c->sbuf, h, 4);
		if (len)
			memcpy(c->sbuf + 4, buf, len);
		c->poff = 0;
		c->plen = total;
		int rc = push_pending(c, w);
		if (rc && rc != -ECONNRESET && c->poff == 0) {
			c->plen = 0; /* nothing left: the message was not sent */
			atomic_store_explicit(&c->pending, false, memory_order_relaxed);
			return rc;
		}
		if (rc == -ECONNRESET)
			return rc;
		sent = total;
	}
	while (sent < total) {
		size_t hrest = sent < 4 ? 4 - sent : 0, pdone = sent - (4 - hrest);
		struct iovec iov[2];
		int niov = 0;
		if (hrest)
			iov[niov++] = (struct iovec){ (void *)(h + sent), hrest };
		if (len > pdone)
			iov[niov++] = (struct iovec){ (void *)(buf + pdone), len - pdone };
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)niov };
		c->ssys++;
		ssize_t n = sendmsg(c->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0) {
			sent += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return peer_gone(c);
		int rc = wait_io(c, w, POLLOUT, &c->ssleeps);
		if (!rc)
			continue;
		if (sent == 0)
			return rc; /* nothing left: the message was not sent */
		/* Part of the frame is on the wire: accept it, keep the rest. */
		if (zl_grow(&c->sbuf, &c->scap, total - sent))
			return fail(c, -ENOMEM); /* the stream is torn */
		memcpy(c->sbuf, h + sent, hrest);
		if (len > pdone)
			memcpy(c->sbuf + hrest, buf + pdone, len - pdone);
		c->poff = 0;
		c->plen = total - sent;
		atomic_store_explicit(&c->pending, true, memory_order_relaxed);
		break;
	}
	c->msgs_sent++;
	c->bytes_sent += len;
	return 0;
}

/* The start of every send, under the lock: the channel's error, an open
 * reservation (sbuf holds it: -EBUSY), or the rest of a fragment pushed
 * out first. */
static int send_begin(struct schan *c, struct waiter *w)
{
	int rc = atomic_load(&c->err);
	if (!rc && c->res_open)
		rc = -EBUSY;
	if (!rc && c->plen)
		rc = push_pending(c, w);
	return rc;
}

static int s_send(zl_channel *ch, const void *buf, size_t len, int64_t timeout_us)
{
	struct schan *c = CH(ch);
	struct waiter w = WAITER(timeout_us);
	if (len > c->send_max)
		return -EMSGSIZE;
	slock(c);
	int rc = send_begin(c, &w);
	if (!rc)
		rc = send_frame(c, buf, len, &w);
	sunlock(c);
	return rc;
}

/* zl_sendv: up to SENDV_GROUP frames per sendmsg; small frames are copied
 * together into one piece (as send_frame copies one), larger payloads go
 * out from the caller's buffers. */
#define SENDV_GROUP 64
#define SENDV_COAL 8192

/* Copy len bytes starting at byte from of the iovec stream iov[0..n). */
static void gather(const struct iovec *iov, int n, size_t from, size_t len, uint8_t *dst)
{
	for (int i = 0; i < n && len; i++) {
		if (from >= iov[i].iov_len) {
			from -= iov[i].iov_len;
			continue;
		}
		size_t k = iov[i].iov_len - from < len ? iov[i].iov_len - from : len;
		memcpy(dst, (const uint8_t *)iov[i].iov_base + from, k);
		dst += k;
		len -= k;
		from = 0;
	}
}

/* Drop the first k bytes of iov[*idx..n). */
static void advance(struct iovec *iov, int *idx, size_t k)
{
	while (k) {
		size_t t = iov[*idx].iov_len < k ? iov[*idx].iov_len : k;
		iov[*idx].iov_base = (uint8_t *)iov[*idx].iov_base + t;
		iov[*idx].iov_len -= t;
		k -= t;
		if (!iov[*idx].iov_len)
			(*idx)++;
	}
}

/* One group of frames: v[0..k) with k <= SENDV_GROUP, all within send_max.
 * Returns the frames accepted (a frame partly sent when the wait ends is
 * accepted and its rest kept in sbuf); *rc gets the error that ended it. */
static size_t send_group(struct schan *c, const struct zl_msgvec *v, size_t k, struct waiter *w,
			 int *rc)
{
	uint8_t coal[SENDV_COAL];
	uint32_t hdr[SENDV_GROUP];
	struct iovec iov[2 * SENDV_GROUP], orig[2 * SENDV_GROUP];
	size_t fend[SENDV_GROUP], total = 0, cl = 0, sent = 0;
	int niov = 0, idx = 0;
	for (size_t j = 0; j < k; j++) {
		size_t len = v[j].len;
		hdr[j] = htole32((uint32_t)len);
		if (4 + len <= SMALL_FRAME && cl + 4 + len <= SENDV_COAL) {
			uint8_t *d = coal + cl;
			memcpy(d, &hdr[j], 4);
			if (len)
				memcpy(d + 4, v[j].buf, len);
			if (niov && (uint8_t *)iov[niov - 1].iov_base + iov[niov - 1].iov_len == d)
				iov[niov - 1].iov_len += 4 + len;
			else
				iov[niov++] = (struct iovec){ d, 4 + len };
			cl += 4 + len;
		} else {
			iov[niov++] = (struct iovec){ &hdr[j], 4 };
			if (len)
				iov[niov++] = (struct iovec){ (void *)v[j].buf, len };
		}
		total += 4 + len;
		fend[j] = total;
	}
	memcpy(orig, iov, sizeof(iov[0]) * (size_t)niov);
	*rc = 0;
	while (sent < total) {
		struct msghdr m = { .msg_iov = iov + idx, .msg_iovlen = (size_t)(niov - idx) };
		c->ssys++;
		ssize_t r = sendmsg(c->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r > 0) {
			sent += (size_t)r;
			advance(iov, &idx, (size_t)r);
		} else if (r < 0 && errno == EINTR) {
			continue;
		} else if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
			*rc = peer_gone(c);
			break;
		} else if ((*rc = wait_io(c, w, POLLOUT, &c->ssleeps))) {
			break;
		}
	}
	size_t full = 0;
	while (full < k && fend[full] <= sent)
		full++;
	if (full < k && *rc != -ECONNRESET && sent > (full ? fend[full - 1] : 0)) {
		size_t rest = fend[full] - sent;
		if (zl_grow(&c->sbuf, &c->scap, rest)) {
			*rc = fail(c, -ENOMEM); /* the stream is torn */
			return full;
		}
		gather(orig, niov, sent, rest, c->sbuf);
		c->poff = 0;
		c->plen = rest;
		atomic_store_explicit(&c->pending, true, memory_order_relaxed);
		full++;
	}
	for (size_t j = 0; j < full; j++) {
		c->msgs_sent++;
		c->bytes_sent += v[j].len;
	}
	return full;
}

static int s_sendv(zl_channel *ch, const struct zl_msgvec *v, size_t n, int64_t timeout_us)
{
	struct schan *c = CH(ch);
	struct waiter w = WAITER(timeout_us);
	if (v[0].len > c->send_max)
		return -EMSGSIZE;
	slock(c);
	int rc = send_begin(c, &w);
	size_t done = 0;
	while (!rc && done < n) {
		size_t k = 0;
		while (k < SENDV_GROUP && done + k < n && v[done + k].len <= c->send_max)
			k++;
		if (!k) {
			rc = -EMSGSIZE;
			break;
		}
		size_t got = send_group(c, v + done, k, &w, &rc);
		done += got;
		if (got < k)
			break;
	}
	sunlock(c);
	return done ? (int)done : rc;
}

static int s_flush(zl_channel *ch, int64_t timeout_us)
{
	struct schan *c = CH(ch);
	struct waiter w = WAITER(timeout_us);
	slock(c);
	int rc = 0;
	if (c->plen) {
		rc = atomic_load(&c->err);
		if (rc) { /* failed channel: the tail can never go out */
			c->poff = c->plen = 0;
			atomic_store_explicit(&c->pending, false, memory_order_relaxed);
		} else {
			rc = push_pending(c, &w);
		}
	}
	sunlock(c);
	return rc;
}

static int s_reserve(zl_channel *ch, size_t len, void **ptr)
{
	struct schan *c = CH(ch);
	if (len > c->send_max)
		return -EMSGSIZE;
	slock(c);
	int rc = atomic_load(&c->err);
	if (!rc && c->res_open)
		rc = -EBUSY;
	if (!rc && c->plen)
		rc = push_pending(c, NULL); /* -EAGAIN: zl_wait_writable */
	if (!rc)
		rc = zl_grow(&c->sbuf, &c->scap, 4 + len);
	if (!rc) {
		c->res_open = true;
		c->res_len = len;
		*ptr = c->sbuf + 4;
	}
	sunlock(c);
	return rc;
}

static int s_commit(zl_channel *ch, size_t len)
{
	struct schan *c = CH(ch);
	slock(c);
	int rc = -EINVAL;
	if (c->res_open && len <= c->res_len) {
		c->res_open = false;
		rc = atomic_load(&c->err);
	}
	if (!rc) {
		/* The frame is built in place: it becomes the pending area. */
		uint32_t hdr = htole32((uint32_t)len);
		memcpy(c->sbuf, &hdr, 4);
		c->poff = 0;
		c->plen = 4 + len;
		rc = push_pending(c, NULL);
		if (rc == -EAGAIN)
			rc = 0; /* accepted; pushed out by later calls */
		if (!rc) {
			c->msgs_sent++;
			c->bytes_sent += len;
		}
	}
	sunlock(c);
	return rc;
}

static int s_wait_writable(zl_channel *ch, size_t len, int64_t timeout_us)
{
	struct schan *c = CH(ch);
	struct waiter w = WAITER(timeout_us);
	if (len > c->send_max)
		return -EMSGSIZE;
	slock(c);
	int rc = atomic_load(&c->err);
	if (!rc && c->plen)
		rc = push_pending(c, &w);
	while (!rc) { /* then wait for socket room, so commit need not buffer */
		short rev = 0;
		c->ssys++;
		rc = zl_stream_poll(c->fd, POLLOUT, 0, &rev);
		if (rc < 0)
			break;
		rc = 0;
		if (rev & (POLLERR | POLLHUP)) {
			rc = peer_gone(c);
			break;
		}
		if (rev & POLLOUT)
			break;
		rc = wait_io(c, &w, POLLOUT, &c->ssleeps);
	}
	sunlock(c);
	return rc;
}

/* ---- receive side ----------------------------------------------------- */

/* One nonblocking read into rbuf: 0 got bytes, -EAGAIN, -ECONNRESET (EOF
 * or a socket error: the peer is gone), -ENOMEM. */
static int fill(struct schan *c)
{
	for (;;) {
		c->rsys++;
		ssize_t n = recv(c->fd, c->rbuf + c->rtail, c->rcap - c->rtail, 0);
		if (n > 0) {
			c->rtail += (size_t)n;
			return 0;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return -EAGAIN;
		if (n < 0 && (errno == ENOMEM || errno == ENOBUFS))
			return -ENOMEM;
		c->eof = true;
		return peer_gone(c);
	}
}

/* Make rbuf[rhead, rhead + need) fit, compacting to keep room for batches. */
static int rbuf_room(struct schan *c, size_t need)
{
	if (c->rhead && (c->rcap - c->rhead < need || c->rcap - c->rtail < 4096)) {
		memmove(c->rbuf, c->rbuf + c->rhead, c->rtail - c->rhead);
		c->rtail -= c->rhead;
		c->rhead = 0;
	}
	return zl_grow(&c->rbuf, &c->rcap, c->rhead + need);
}

static void consume(struct schan *c, size_t n)
{
	c->rhead += n;
	if (c->rhead == c->rtail)
		c->rhead = c->rtail = 0;
}

static short rx_events(struct schan *c)
{
	/* Also wake for room if a send tail waits: the peer may need it
	 * before it answers what we are waiting for. */
	return POLLIN | (atomic_load_explicit(&c->pending, memory_order_relaxed) ? POLLOUT : 0);
}

/* Read the rest of a frame of len bytes straight into dst; rbuf holds its
 * header and first bytes. */
static int rx_direct(struct schan *c, uint8_t *dst, size_t len, struct waiter *w)
{
	size_t have = c->rtail - c->rhead - 4;
	memcpy(dst, c->rbuf + c->rhead + 4, have);
	c->rhead = c->rtail = 0;
	for (;;) {
		struct iovec iov[2] = { { dst + have, len - have }, { c->rbuf, c->rcap } };
		c->rsys++;
		ssize_t n = readv(c->fd, iov, 2);
		int rc;
		if (n > 0) {
			if ((size_t)n < len - have) {
				have += (size_t)n;
				continue;
			}
			c->rtail = (size_t)n - (len - have);
			c->msgs_recv++;
			c->bytes_recv += len;
			return 0;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			try_push(c);
			rc = wait_io(c, w, rx_events(c), &c->rsleeps);
			if (!rc)
				continue;
		} else if (n < 0 && (errno == ENOMEM || errno == ENOBUFS)) {
			rc = -ENOMEM;
		} else {
			c->eof = true; /* died mid-frame: the partial frame is void */
			return peer_gone(c);
		}
		/* Out of time mid-frame: park what we have in rbuf. rbuf grows
		 * to the whole frame so the next calls finish it there. */
		if (zl_grow(&c->rbuf, &c->rcap, 4 + len))
			return fail(c, -ENOMEM);
		uint32_t hdr = htole32((uint32_t)len);
		memcpy(c->rbuf, &hdr, 4);
		memcpy(c->rbuf + 4, dst, have);
		c->rtail = 4 + have;
		return rc;
	}
}

/* Next frame: copied to buf (cap) or, with ptr, exposed in rbuf. */
static int rx(struct schan *c, void *buf, size_t cap, const void **ptr, size_t *len,
	      int64_t timeout_us)
{
	struct waiter w = WAITER(timeout_us);
	bool polled = false;
	int rc = atomic_load(&c->err);
	if (rc == -EPIPE)
		return rc;
	if (c->peeked)
		return -EBUSY; /* rbuf must not move under the peeked pointer */
	for (;;) {
		try_push(c);
		size_t avail = c->rtail - c->rhead, need = 4;
		if (avail >= 4) {
			uint32_t flen;
			memcpy(&flen, c->rbuf + c->rhead, 4);
			flen = le32toh(flen);
			if (flen > c->max_msg) {
				ZL_LOG(ZL_LOG_ERROR, "%s: peer sent a %u-byte frame, max_msg is %llu; "
				       "channel failed", c->is_unix ? "unix" : "tcp", flen,
				       (unsigned long long)c->max_msg);
				return fail(c, -EPROTO);
			}
			*len = flen;
			if (!ptr && flen > cap)
				return -EMSGSIZE; /* stays queued */
			need = 4 + (size_t)flen;
			if (avail >= need) {
				uint8_t *p = c->rbuf + c->rhead + 4;
				if (ptr) {
					*ptr = p;
					c->peeked = need;
				} else {
					if (flen)
						memcpy(buf, p, flen);
					consume(c, need);
				}
				c->msgs_recv++;
				c->bytes_recv += flen;
				return 0;
			}
			if (!ptr && need > c->rcap && !c->eof)
				return rx_direct(c, buf, flen, &w);
		}
		if (c->eof)
			return -ECONNRESET; /* no complete frame left */
		/* Blocking waits poll first: with no complete frame buffered, a
		 * read would most likely find nothing and cost a syscall (~1 us
		 * here). busy_poll and timeout 0 read first. */
		rc = rbuf_room(c, need);
		if (!rc)
			rc = polled || c->busy_poll || timeout_us == 0 ? fill(c) : -EAGAIN;
		polled = rc == -EAGAIN;
		if (polled)
			rc = wait_io(c, &w, rx_events(c), &c->rsleeps);
		if (rc && rc != -ECONNRESET)
			return rc;
	}
}

static int s_recv(zl_channel *ch, void *buf, size_t cap, size_t *len, int64_t timeout_us)
{
	return rx(CH(ch), buf, cap, NULL, len, timeout_us);
}

static int s_peek(zl_channel *ch, const void **ptr, size_t *len, int64_t timeout_us)
{
	return rx(CH(ch), NULL, 0, ptr, len, timeout_us);
}

static int s_release(zl_channel *ch)
{
	struct schan *c = CH(ch);
	if (!c->peeked)
		return -EINVAL;
	consume(c, c->peeked);
	c->peeked = 0;
	return 0;
}

/* ---- the rest --------------------------------------------------------- */

static int s_fd(zl_channel *ch) { return CH(ch)->fd; }

/* Readiness in our buffers; the kernel's shows on the socket itself. */
static uint32_t s_ready(zl_channel *ch, uint32_t events)
{
	struct schan *c = CH(ch);
	int err = atomic_load(&c->err);
	if (err == -EPIPE)
		return ZL_POLLERR | (events & (ZL_POLLIN | ZL_POLLOUT));
	uint32_t m = c->eof ? ZL_POLLHUP | (events & ZL_POLLIN) : 0;
	size_t avail = c->rtail - c->rhead;
	if ((events & ZL_POLLIN) && (c->peeked || avail >= 4)) {
		uint32_t flen;
		memcpy(&flen, c->rbuf + c->rhead, 4);
		flen = le32toh(flen);
		if (c->peeked || flen > c->max_msg || avail - 4 >= flen)
			m |= ZL_POLLIN;
	}
	return m;
}

/* Nothing whole in our buffer: read what the socket holds (one recv), so
 * that a frame or the end already there is reported instead of slept on. */
static int s_arm(zl_channel *ch, uint32_t events, bool woken)
{
	struct schan *c = CH(ch);
	(void)woken;
	uint32_t m = s_ready(ch, events);
	if (m || !(events & ZL_POLLIN))
		return (int)m;
	int r = rbuf_room(c, c->rtail - c->rhead + 4096);
	if (!r)
		r = fill(c);
	if (r && r != -EAGAIN)
		return (int)(ZL_POLLIN | (c->eof ? ZL_POLLHUP : ZL_POLLERR));
	return (int)s_ready(ch, events);
}

static size_t s_max_inline(const zl_channel *ch) { return CH(ch)->send_max; }

static void s_info(const zl_channel *ch, struct zl_channel_info *info)
{
	const struct schan *c = (const struct schan *)ch;
	strcpy(info->transport, c->is_unix ? "unix" : "tcp");
	info->max_msg = c->max_msg;
	info->msgs_sent = c->msgs_sent;
	info->msgs_recv = c->msgs_recv;
	info->bytes_sent = c->bytes_sent;
	info->bytes_recv = c->bytes_recv;
	info->sleeps = c->rsleeps + c->ssleeps;
	info->syscalls = c->rsys + c->ssys + info->sleeps;
	info->peer_pid = c->peer_pid;
}

static void s_close(zl_channel *ch)
{
	struct schan *c = CH(ch);
	if (c->plen && !atomic_load(&c->err) && !ch->no_linger) {
		struct waiter w = WAITER(CLOSE_FLUSH_US);
		c->busy_poll = false;
		push_pending(c, &w);
	}
	/* Unread input would make close() send an RST, which can destroy
	 * data still on its way to the peer. Discard it to get a clean FIN. */
	for (int i = 0; i < 64; i++)
		if (recv(c->fd, c->rbuf, c->rcap, MSG_DONTWAIT) <= 0)
			break;
	close(c->fd);
	free(c->rbuf);
	free(c->sbuf);
	free(c);
}

static const struct zl_chan_ops stream_ops = {
	.send = s_send,
	.sendv = s_sendv,
	.recv = s_recv,
	.flush = s_flush,
	.reserve = s_reserve,
	.commit = s_commit,
	.peek = s_peek,
	.release = s_release,
	.wait_writable = s_wait_writable,
	.fd = s_fd,
	.sock = s_fd,
	.max_inline = s_max_inline,
	.info = s_info,
	.close = s_close,
	.ready = s_ready,
	.arm = s_arm,
	.kernel = true,
};

int zl_stream_chan_new(int fd, bool is_unix, const struct zl_opts *o, uint64_t peer_max_msg,
		       zl_channel **out)
{
	struct schan *c = calloc(1, sizeof(*c));
	if (c) {
		c->rbuf = malloc(RBUF_SIZE);
		c->sbuf = malloc(SBUF_SIZE);
	}
	if (!c || !c->rbuf || !c->sbuf) {
		if (c) {
			free(c->rbuf);
			free(c->sbuf);
		}
		free(c);
		close(fd);
		return -ENOMEM;
	}
	c->base.ops = &stream_ops;
	c->fd = fd;
	c->is_unix = is_unix;
	c->busy_poll = o->busy_poll != 0;
	c->spin_us = o->spin_us;
	c->max_msg = o->max_msg;
	c->send_max = peer_max_msg; /* max_msg limits what each side accepts */
	if (c->send_max > UINT32_MAX)
		c->send_max = UINT32_MAX;
	c->rcap = RBUF_SIZE;
	c->scap = SBUF_SIZE;
	c->peer_pid = -1;
	if (is_unix) {
		struct ucred cr;
		socklen_t sl = sizeof(cr);
		if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &sl))
			c->peer_pid = cr.pid;
	}
	*out = &c->base;
	return 0;
}

int zl_stream_poll(int fd, short events, int64_t deadline, short *revents)
{
	struct pollfd p = { .fd = fd, .events = events };
	struct timespec ts, *tp = NULL;
	if (deadline != ZL_NEVER) {
		int64_t left = deadline - zl_now_us();
		if (left < 0)
			left = 0;
		ts.tv_sec = left / 1000000;
		ts.tv_nsec = (long)(left % 1000000) * 1000;
		tp = &ts;
	}
	int r = ppoll(&p, 1, tp, NULL);
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	if (revents)
		*revents = p.revents;
	return r;
}
