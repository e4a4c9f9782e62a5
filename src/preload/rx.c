/* SPDX-License-Identifier: MIT */
/*
 * Receiving on a switched socket (sock.c has the design): the kernel
 * stream's bytes up to the peer's kbytes, then the ring; the wake-up bytes
 * that follow on the kernel stream are drained here.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "preload.h"

/* Copy between the ring at position pos and the iovecs, from byte off. */
void zp_ring_copy(uint8_t *ring, uint32_t size, uint64_t pos, const struct iovec *iov,
		      int n, size_t off, size_t len, bool to_ring)
{
	for (int i = 0; i < n && len; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		size_t c = iov[i].iov_len - off;
		if (c > len)
			c = len;
		uint8_t *b = (uint8_t *)iov[i].iov_base + off;
		for (size_t done = 0; done < c;) {
			uint32_t at = (uint32_t)(pos % size);
			size_t k = size - at < c - done ? size - at : c - done;
			if (to_ring)
				memcpy(ring + at, b + done, k);
			else
				memcpy(b + done, ring + at, k);
			done += k;
			pos += k;
		}
		len -= c;
		off = 0;
	}
}

/* The iovecs from byte off, at most max bytes, into tmp (n entries). */
int zp_iov_sub(const struct iovec *iov, int n, size_t off, size_t max, struct iovec *tmp)
{
	int k = 0;
	for (int i = 0; i < n && max; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		size_t c = iov[i].iov_len - off;
		if (c > max)
			c = max;
		tmp[k].iov_base = (uint8_t *)iov[i].iov_base + off;
		tmp[k++].iov_len = c;
		max -= c;
		off = 0;
	}
	return k;
}

int64_t zp_deadline_of(struct zsock *z, int flags, bool rx)
{
	if ((flags & MSG_DONTWAIT) || atomic_load_explicit(&z->o->nonblock, memory_order_relaxed))
		return 0;
	int64_t t = rx ? z->o->rcvtimeo_us : z->o->sndtimeo_us;
	return t > 0 ? zl_now_us() + t : ZL_NEVER;
}

/* One read of the kernel stream into iov from byte off, at most max
 * bytes, with the caller's control buffer (cm, or NULL) */
static ssize_t kernel_read(struct zsock *z, const struct iovec *iov, int n, size_t off,
			   uint64_t max, int flags, struct msghdr *cm)
{
	struct iovec tmp[64];
	int k = zp_iov_sub(iov, n > 64 ? 64 : n, off, max > SIZE_MAX ? SIZE_MAX : (size_t)max, tmp);
	struct msghdr m = { .msg_iov = tmp, .msg_iovlen = (size_t)k };
	if (cm) {
		m.msg_control = cm->msg_control;
		m.msg_controllen = cm->msg_controllen;
	}
	ssize_t r = zp_real.recvmsg(z->fd, &m, flags | MSG_DONTWAIT);
	if (cm && r >= 0) {
		cm->msg_controllen = m.msg_controllen;
		cm->msg_flags = m.msg_flags;
	}
	return r;
}

/*
 * From the kernel stream, up to max bytes (the peer's data only): >0, 0
 * (its end), -1 (errno; EAGAIN: nothing of its data now). Before the
 * peer's switch is known it may switch (and come back) any time, so its
 * bytes are peeked first and only those before its kbytes are taken, with
 * the caller's control data: a wake-up is never read as data, and data
 * after its way back is never drained as a wake-up.
 */
static ssize_t zp_rx_kernel(struct zsock *z, const struct iovec *iov, int n, size_t off,
			    uint64_t max, int flags, struct msghdr *cm)
{
	if (zp_rx_switch(z) != ZP_UNLATCHED) { /* max is within its data */
		ssize_t r = kernel_read(z, iov, n, off, max, flags & MSG_PEEK, cm);
		if (r > 0 && !(flags & MSG_PEEK))
			atomic_fetch_add(&z->o->rx_k, (uint64_t)r);
		return r;
	}
	ssize_t r = kernel_read(z, iov, n, off, max, MSG_PEEK, NULL);
	if (r <= 0)
		return r;
	uint64_t left;
	if (!zp_rx_left(z, &left)) /* switched meanwhile, with all kbytes read */
		left = 0;
	if ((uint64_t)r > left) /* past kbytes: wake-ups, not data */
		r = (ssize_t)left;
	if (!r) {
		errno = EAGAIN;
		return -1;
	}
	if (flags & MSG_PEEK)
		return r;
	r = kernel_read(z, iov, n, off, (uint64_t)r, 0, cm);
	if (r > 0)
		atomic_fetch_add(&z->o->rx_k, (uint64_t)r);
	return r;
}

/* After bytes read from the kernel stream, a MSG_WAITALL read ends where
 * the kernel's would: after bytes that came with control data (Unix) or
 * at the urgent mark (TCP). */
static bool kernel_stops(struct zsock *z, const struct msghdr *cm)
{
	int mark = 0;
	if (cm && (cm->msg_controllen || (cm->msg_flags & MSG_CTRUNC)))
		return true;
	return !z->is_unix && !zp_real.ioctl(z->fd, SIOCATMARK, &mark) && mark;
}

/*
 * A Unix peek that its buffer filled goes on through the queue with
 * nothing left to copy and stops at the first bytes that carry fds,
 * handing them out (MSG_CTRUNC without a control buffer): the kernel's
 * stream read does so. When the ring filled it, the queue's rest is what
 * the peer sent after its way back; a peek of no bytes there does the same.
 */
static void peek_on(struct zsock *z, struct msghdr *cm, size_t cap)
{
	if (!cm || !z->is_unix || !zp_rx_back(z))
		return;
	cm->msg_controllen = cap;
	if (kernel_read(z, NULL, 0, 0, 0, MSG_PEEK, cm) < 0)
		cm->msg_controllen = 0;
}

/* The ring ends at h: the peer went back to the kernel stream there. */
static bool ring_ends(struct zsock *z, uint64_t h)
{
	return zp_rx_back(z) && h == atomic_load(&z->o->rx_bt);
}

/*
 * A TCP peek at the ring's end looks past the peer's wake-ups without
 * taking them: where they end the peer's urgent mark may stand, and the
 * kernel's reader must stay behind it until ours reaches it, or a second
 * urgent byte would drop the first (Linux's tcp_check_urg) where the
 * kernel keeps it as data. The wake-ups go to a scratch buffer in the same
 * peek (a peek stops at the mark, as the kernel's does).
 */
static size_t peek_past_wakes(struct zsock *z, const struct iovec *iov, int n, size_t got,
			      size_t max)
{
	uint64_t due = zp_wakes_due(z);
	if (due > INT32_MAX)
		return 0; /* (nothing past them now) */
	char small[256], *scratch = due <= sizeof(small) ? small : malloc(due);
	if (!scratch)
		return 0;
	struct iovec tmp[65] = { { .iov_base = scratch, .iov_len = (size_t)due } };
	int k = 1 + zp_iov_sub(iov, n > 64 ? 64 : n, got, max, tmp + 1);
	struct msghdr m = { .msg_iov = tmp, .msg_iovlen = (size_t)k };
	ssize_t r = zp_real.recvmsg(z->fd, &m, MSG_PEEK | MSG_DONTWAIT);
	if (scratch != small)
		free(scratch);
	return r > 0 && (uint64_t)r > due ? (size_t)((uint64_t)r - due) : 0;
}

/* A kernel read failed with err after this call got bytes: the error is
 * the next call's (held), except that a Unix MSG_WAITALL read takes it
 * with its bytes, untold (unix_stream_read_generic: sock_error); the reset
 * we play is then told. */
static void error_after_bytes(struct zsock *z, int flags, int err)
{
	if (z->is_unix && (flags & MSG_WAITALL) && !(flags & MSG_PEEK)) {
		if (err == ECONNRESET && zp_peer_reset(z))
			z->o->reset_told = true;
		return;
	}
	zp_hold_kerr(z, err);
}

/*
 * After the ring's last bytes, what the kernel stream has now, in the same
 * call, as the kernel's one queue would give it (with its control data,
 * which the ring never carries): the peer's wake-ups are skipped first;
 * bytes read here leave the stream. The bytes read (0 if none now).
 */
static size_t kernel_after_ring(struct zsock *z, const struct iovec *iov, int n, size_t got,
				size_t max, int flags, struct msghdr *cm, size_t cap)
{
	if ((flags & MSG_PEEK) && !z->is_unix && zp_wakes_due(z))
		return peek_past_wakes(z, iov, n, got, max);
	zp_skip_wakes(z);
	int mark = 0; /* a read that took bytes stops at the urgent mark */
	if (zp_wakes_due(z) || (!z->is_unix && !zp_real.ioctl(z->fd, SIOCATMARK, &mark) && mark))
		return 0;
	if (cm)
		cm->msg_controllen = cap;
	ssize_t r = kernel_read(z, iov, n, got, max, flags & MSG_PEEK, cm);
	if (r < 0)
		error_after_bytes(z, flags, errno);
	if (cm && r <= 0)
		cm->msg_controllen = 0;
	if (r > 0 && !(flags & MSG_PEEK))
		atomic_fetch_add(&z->o->rx_k, (uint64_t)r); /* its data read, as zp_rx_kernel counts */
	return r > 0 ? (size_t)r : 0;
}

ssize_t zp_recv(struct zsock *z, const struct iovec *iov, int n, int flags)
{
	return zp_recvmsg(z, iov, n, NULL, flags);
}

static ssize_t recv_locked(struct zsock *z, const struct iovec *iov, int n, struct msghdr *cm,
			   int flags, bool *lk);

/* One read is one step against every other reader of ours, threads and
 * processes (the side's own rx_lock, preload.h), as under the kernel's
 * socket lock; it is let go while the read sleeps, as the kernel's is. */
ssize_t zp_recvmsg(struct zsock *z, const struct iovec *iov, int n, struct msghdr *cm, int flags)
{
	if (cm) {
		cm->msg_flags = 0;
		if (!cm->msg_control || z->xh) /* the rdma channel carries no control data */
			cm->msg_controllen = 0;
	}
	if (z->xh)
		return zx_recv(z, iov, n, flags);
	bool lk = zp_shared_use(z);
	int lr = lk ? zp_own_lock(&z->o->rx_lock) : 0;
	if (lr) {
		errno = -lr;
		return -1;
	}
	ssize_t r = recv_locked(z, iov, n, cm, flags, &lk);
	if (lk) {
		int e = errno;
		zp_own_unlock(&z->o->rx_lock);
		errno = e;
	}
	return r;
}

static ssize_t recv_locked(struct zsock *z, const struct iovec *iov, int n, struct msghdr *cm,
			   int flags, bool *lk)
{
	/* without the caller's header, one of ours: a kernel read that drops
	 * fds says so (MSG_CTRUNC), and ends a MSG_WAITALL read there as the
	 * kernel's own read ends (kernel_stops) */
	struct msghdr none = { 0 }, *mine = cm;
	if (!cm)
		cm = &none;
	size_t cap = cm->msg_controllen;
	if (flags & MSG_OOB) { /* urgent data travels only on the kernel stream */
		if (cm)
			cm->msg_controllen = cap;
		/* a TCP connection reset before the peer's FIN is closed in the
		 * kernel: where an urgent byte came, that is ENOTCONN (a kernel
		 * EOF after the reset we play is an artefact: zp_peer_fin_first) */
		if (!z->is_unix && zp_peer_reset(z) && !zp_peer_fin_first(z)) {
			char c;
			if (zp_peer_urg_reset(z) ||
			    zp_real.recv(z->fd, &c, 1, MSG_OOB | MSG_PEEK | MSG_DONTWAIT) >= 0 ||
			    errno != EINVAL)
				errno = ENOTCONN;
			return -1;
		}
		return kernel_read(z, iov, n, 0, SIZE_MAX, flags & ~MSG_DONTWAIT, cm);
	}
	if (cm)
		cm->msg_controllen = 0;
	/* (after the bytes before it, as the kernel's queue hands them out) */
	int held = z->o->kerr_held && zp_rx_avail(z) <= 0 ? zp_take_kerr(z) : 0;
	if (held) {
		errno = held;
		return -1;
	}
	size_t total = 0, got = 0;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	if (!total)
		return 0;
	int64_t deadline = zp_deadline_of(z, flags, true);
	bool all = (flags & MSG_WAITALL) && !(flags & MSG_PEEK);
	for (;;) {
		zp_poll_join(z);
		uint64_t left;
		if (zp_rx_left(z, &left)) {
			/* the caller's control buffer to every kernel read: control
			 * data ends the call (kernel_stops), as the kernel's read
			 * ends with it; without one the kernel would drop the fds */
			if (cm)
				cm->msg_controllen = cap;
			ssize_t r = zp_rx_kernel(z, iov, n, got, left < total - got ? left : total - got,
						 flags, cm);
			if (cm && r <= 0)
				cm->msg_controllen = 0;
			if (r > 0) {
				got += (size_t)r;
				if (!all || got == total || kernel_stops(z, cm))
					return (ssize_t)got;
				continue;
			}
			if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
				/* the reset we play: told once, then the end (after
				 * bytes it is held for the next call, not told) */
				if (errno == ECONNRESET && zp_peer_reset(z) && z->o->reset_told)
					return (ssize_t)got;
				if (!got) {
					if (errno == ECONNRESET && zp_peer_reset(z))
						z->o->reset_told = true;
					return -1;
				}
				error_after_bytes(z, flags, errno);
				return (ssize_t)got;
			}
			if (r == 0) {
				uint64_t kb = zp_rx_switch(z);
				/* a peer that closed with our bytes unread on the ring
				 * after its way back: its reset comes before the end
				 * (the kernel's end here is our played reset's FIN),
				 * unless its own FIN came first (TCP, Linux's
				 * tcp_recvmsg: SOCK_DONE before sk_err). A Unix
				 * MSG_WAITALL read that got bytes takes it with them
				 * (unix_stream_read_generic); TCP's is the next call's. */
				if (zp_rx_back(z) && zp_peer_reset(z) && !z->o->reset_told &&
				    !zp_peer_fin_first(z) && (!got || (all && z->is_unix))) {
					z->o->reset_told = true;
					if (!got) {
						errno = z->is_unix ? ECONNRESET : zp_reset_err(z);
						return -1;
					}
				}
				if (kb == ZP_UNLATCHED || zp_rx_back(z))
					return (ssize_t)got; /* the end, before its switch or
							      * after its way back */
				if (atomic_load(&z->o->rx_k) < kb)
					zp_lie(z, "its kernel stream ended before its kbytes");
				atomic_store(&z->o->peer_eof, true);
			}
		}
		if (!zp_rx_left(z, &left)) {
			int64_t a = zp_rx_avail(z);
			if (a > 0) {
				size_t c = (size_t)a < total - got ? (size_t)a : total - got;
				uint64_t h = atomic_load_explicit(&z->rx->head, memory_order_relaxed);
				zp_ring_copy(z->rxr, z->size, h, iov, n, got, c, false);
				got += c;
				if (!(flags & MSG_PEEK)) {
					atomic_store_explicit(&z->rx->head, h + c, memory_order_release);
					NOTIFY_TX(z);
				}
				size_t k = 0;
				if (got < total && ring_ends(z, h + c)) /* its kernel bytes follow */
					k = kernel_after_ring(z, iov, n, got, total - got, flags, cm, cap);
				got += k;
				if (!k && got == total && (flags & MSG_PEEK) && mine)
					peek_on(z, cm, cap);
				if ((flags & MSG_PEEK) || !all || got == total ||
				    (ring_ends(z, h + c) && kernel_stops(z, k ? cm : NULL)))
					return (ssize_t)got;
				continue;
			}
		}
		/* nothing more now: what came before a reset is read first, as
		 * the kernel hands out its queue before the error */
		if (zp_peer_reset(z)) {
			/* after the peer's FIN the end of the stream comes first,
			 * and the error stays (Linux: SOCK_DONE before sk_err) */
			if (got && all && z->is_unix)
				z->o->reset_told = true; /* a Unix MSG_WAITALL read that got
					bytes takes the error with it (Linux's
					unix_stream_read_generic: sock_error) */
			if (got || z->o->reset_told || zp_peer_fin_first(z))
				return (ssize_t)got;
			z->o->reset_told = true;
			errno = zp_reset_err(z);
			return -1;
		}
		if (!zp_rx_left(z, &left) && !zp_rx_back(z) &&
		    (zp_peer_closed(z) || atomic_load(&z->o->peer_eof))) {
			if (zp_rx_avail(z) > 0)
				continue; /* written before the end */
			return (ssize_t)got;
		}
		if ((got && !all) || z->o->rd_shut) /* shut for reading: what came, then 0 */
			return (ssize_t)got;
		if (*lk && deadline)
			zp_own_unlock(&z->o->rx_lock);
		int r = deadline ? zp_wait_one(z, POLLIN, deadline) : -EAGAIN;
		if (*lk && deadline && !r && (r = zp_own_lock(&z->o->rx_lock)))
			*lk = false;
		else if (*lk && deadline && r)
			*lk = false; /* (let go above) */
		if (r) {
			errno = r == -ETIMEDOUT ? EAGAIN : -r;
			return got ? (ssize_t)got : -1;
		}
	}
}

int zp_fionread(struct zsock *z)
{
	if (z->xh)
		return zx_fionread(z);
	uint64_t left;
	int k = 0;
	if (zp_rx_left(z, &left)) {
		if (zp_real.ioctl(z->fd, FIONREAD, &k) || k < 0)
			k = 0;
		if ((uint64_t)k > left)
			k = (int)left;
		/* all its kernel data is here: its ring's follow (the kernel
		 * counts every byte queued) */
		if (left != UINT64_MAX && (uint64_t)k == left) {
			int64_t a = zp_rx_avail(z);
			if (a > 0)
				k = (int64_t)k + a > INT32_MAX ? INT32_MAX : k + (int)a;
			return k;
		}
		if (left != UINT64_MAX || k)
			return k;
	}
	int64_t a = zp_rx_avail(z);
	if (a < 0)
		a = 0;
	/* the ring ends where the peer went back: its kernel bytes follow,
	 * after its wake-ups (counted, not read: they stay until the reader
	 * is at the ring's end, see zp_switch_back) */
	if (zp_rx_back(z) && atomic_load(&z->rx->head) + (uint64_t)a == atomic_load(&z->o->rx_bt)) {
		uint64_t due = zp_wakes_due(z);
		if (!zp_real.ioctl(z->fd, FIONREAD, &k) && k > 0 && (uint64_t)k > due)
			a += k - (int64_t)due;
	}
	return (int)(a > INT32_MAX ? INT32_MAX : a);
}

bool zp_rx_on_kernel(struct zsock *z)
{
	if (z->xh)
		return false;
	uint64_t left;
	return zp_rx_left(z, &left);
}

static void drain_locked(struct zsock *z);

void zp_drain(struct zsock *z)
{
	if (z->xh)
		return; /* the channel drains its own fd when armed */
	uint64_t left;
	if (zp_rx_left(z, &left))
		return; /* what is there is data */
	if (atomic_load(&z->o->sleepers) > 0)
		return; /* others of ours (threads, holders) sleep on it: the
			 * wake-up may be theirs */
	/* a reader of ours (thread or process) is at the kernel stream: the
	 * wake-ups are its to drop, and what we peek may be gone next */
	bool lk = zp_shared_use(z);
	if (lk && !zp_own_trylock(&z->o->rx_lock))
		return;
	drain_locked(z);
	if (lk)
		zp_own_unlock(&z->o->rx_lock);
}

static void drain_locked(struct zsock *z)
{
	/* peeked first: after the peer's way back (which it may take any
	 * time) only its wake-ups up to kresume are ours to drop */
	char buf[256];
	for (int i = 0; i < 64; i++) {
		ssize_t r = zp_real.recv(z->fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_PEEK);
		if (r == 0 && atomic_load(&z->o->krd_shut))
			return; /* our own SHUT_RD's end (zp_kernel_rd_shut), not the peer's */
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
			atomic_store(&z->o->peer_eof, true);
			return;
		}
		if (r < 0)
			return;
		size_t take = (size_t)r;
		if (zp_rx_back(z)) { /* while the ring has bytes, its wake-ups stay: they go
				     * at the ring's end, with the reads that follow it */
			uint64_t due = zp_rx_avail(z) > 0 ? 0 : zp_wakes_due(z);
			take = due < take ? (size_t)due : take;
		}
		ssize_t d = take ? zp_real.recv(z->fd, buf, take, MSG_DONTWAIT) : 0;
		if (d > 0)
			atomic_fetch_add(&z->o->rx_w, (uint64_t)d);
		if (d < (ssize_t)sizeof(buf))
			return;
	}
}
