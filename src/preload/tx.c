/* SPDX-License-Identifier: MIT */
/*
 * Sending on a switched socket (sock.c has the design): the kernel stream
 * until our switch, counted; then the ring, with a wake-up byte to a peer
 * that sleeps; the kernel's rules for a peer that is gone or reset.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/single_threaded.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "preload.h"

static void zp_wake(struct zsock *z)
{
	static const char b = 0;
	/* Until our sends moved to the ring, and after they went back, our
	 * kernel stream carries data and a byte on it would be one: no wake-up
	 * then (the peer wakes for our data; one waiting for room in its ring
	 * is woken by our switch, which our next call makes: its own switch
	 * told us to). A wake-up in flight holds off our way back (Dekker with
	 * zp_switch_back), which counts them. */
	if (!atomic_load_explicit(&z->o->tx_ring, memory_order_acquire))
		return;
	atomic_fetch_add(&z->o->wake_inflight, 1);
	if (atomic_load(&z->o->tx_ring) && zp_real.send(z->fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1)
		atomic_fetch_add_explicit(&z->tx->wakes, 1, memory_order_relaxed);
	/* EAGAIN: wake-ups the peer has not read yet; it will look anyway */
	atomic_fetch_sub(&z->o->wake_inflight, 1);
}

/* The peer may sleep on its socket: after our store, wake it if so, once
 * until it arms again. */
void zp_notify(struct zsock *z, _Atomic uint32_t *sleeping, _Atomic uint32_t *kick)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(sleeping, memory_order_relaxed) &&
	    !atomic_exchange_explicit(kick, 1, memory_order_relaxed))
		zp_wake(z);
}

/* Our sends move to the ring (under z->lock, and the side's tx_lock: a
 * send of another holder on the kernel stream is counted in tx_k before
 * kbytes says where the stream ends, or goes to the ring after). */
void zp_switch_tx(struct zsock *z)
{
	bool held = !zp_own_lock(&z->o->tx_lock);
	if (!atomic_load_explicit(&z->tx->state, memory_order_acquire)) { /* (or another
							 * holder's switch did) */
		atomic_store_explicit(&z->tx->kbytes, atomic_load(&z->o->tx_k),
				      memory_order_relaxed);
		atomic_store_explicit(&z->tx->state, 1, memory_order_release);
	}
	atomic_store_explicit(&z->o->tx_ring, true, memory_order_release);
	if (held)
		zp_own_unlock(&z->o->tx_lock);
	NOTIFY_RX(z);
	NOTIFY_TX(z); /* a wake-up we could not send before (wake) */
}

/*
 * Our sends go back to the kernel stream, for what a ring cannot carry
 * (fds and credentials, urgent data), and the connection with them, since
 * the peer's follow (under z->lock; tx_lock holds the ring's writers off).
 * The ring ends at its tail now; our kernel stream carried kbytes of data,
 * then the wake-ups we sent, then data again: kresume says where. Stored
 * before state says 2 (release), so a peer that reads a byte we send after
 * sees them. No wake-up goes after it (zp_wake).
 */
void zp_switch_back(struct zsock *z)
{
	if (!atomic_load(&z->o->tx_ring) || z->o->tx_back)
		return;
	bool held = !zp_own_lock(&z->o->tx_lock); /* (else a holder stopped it:
						      * we go back anyway) */
	atomic_store(&z->o->tx_ring, false);
	for (int i = 0; atomic_load(&z->o->wake_inflight) && i < 1000000; i++)
		zl_cpu_relax(); /* one nonblocking send */
	/* TCP keeps one urgent mark: a second one arriving while the reader's
	 * stream stands at the first drops the first byte, else it stays as
	 * data. The peer's kernel stream stands where the ring began, though
	 * its reader is still behind in the ring: a pad byte (skipped as a
	 * wake-up, at the ring's end) keeps the stream behind the mark too. */
	static const char pad = 0;
	if (!z->is_unix && atomic_load(&z->tx->head) != atomic_load(&z->tx->tail) &&
	    zp_real.send(z->fd, &pad, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1)
		atomic_fetch_add_explicit(&z->tx->wakes, 1, memory_order_relaxed);
	uint64_t kr = atomic_load(&z->tx->kbytes) + atomic_load(&z->tx->wakes);
	atomic_store_explicit(&z->tx->back_tail, atomic_load(&z->tx->tail), memory_order_relaxed);
	atomic_store_explicit(&z->tx->kresume, kr, memory_order_relaxed);
	atomic_store_explicit(&z->tx->state, ZP_BACK, memory_order_release);
	atomic_store(&z->o->tx_k, kr);
	z->o->tx_back = true;
	/* our ring was closed (SHUT_WR): the kernel stream now ends after our
	 * wake-ups, as the peer reads it from now on (it needs no wake-up from
	 * us: we follow its way back, or send nothing) */
	if (zp_wr_shut(z) && atomic_load(&z->tx->wr_shut)) /* (none after a played reset) */
		zp_real.shutdown(z->fd, SHUT_WR);
	zp_kernel_rd_shut(z);
	if (held)
		zp_own_unlock(&z->o->tx_lock);
	ZL_LOG(ZL_LOG_DEBUG, "preload: fd %d: our sends went back to the kernel stream", z->fd);
}

ssize_t zp_epipe(int flags)
{
	if (!(flags & MSG_NOSIGNAL))
		pthread_kill(pthread_self(), SIGPIPE);
	errno = EPIPE;
	return -1;
}

/*
 * A send to a peer that reset the connection (reset) or is gone, as the
 * kernel answers it: on TCP a zero-length send and the first send after
 * the peer's close succeed (the peer's kernel then resets us: EPIPE is
 * pending, for the next send or SO_ERROR), the peer's reset is reported
 * once (the one error that recv and SO_ERROR report too), and EPIPE with
 * SIGPIPE after; on a Unix socket every send fails with EPIPE (the reset
 * stays for recv).
 */
static ssize_t zp_send_refused(struct zsock *z, size_t total, int flags, bool reset)
{
	if (reset && !z->is_unix && !z->o->reset_told) {
		z->o->reset_told = true;
		if (zp_reset_err(z) == EPIPE)
			return zp_epipe(flags); /* (with SIGPIPE, as Linux's) */
		errno = ECONNRESET;
		return -1;
	}
	if (z->is_unix || reset || z->o->gone_sent) {
		if (z->o->so_err == EPIPE)
			z->o->so_err = 0;
		return zp_epipe(flags);
	}
	if (total) { /* the bytes are lost, as in the peer's kernel */
		z->o->gone_sent = true;
		z->o->so_err = EPIPE;
	}
	return (ssize_t)total;
}

ssize_t zp_send_shut(struct zsock *z, int flags)
{
	int held = zp_take_kerr(z);
	if (held) {
		errno = held;
		return -1;
	}
	if (!z->is_unix && !z->o->reset_told && zp_peer_reset(z)) {
		z->o->reset_told = true; /* the kernel's pending error comes first */
		if (zp_reset_err(z) == EPIPE)
			return zp_epipe(flags); /* (with SIGPIPE, as Linux's) */
		errno = ECONNRESET;
		return -1;
	}
	if (z->o->so_err == EPIPE)
		z->o->so_err = 0; /* (the pending error this call reports) */
	int err = 0;
	socklen_t l = sizeof(err);
	if (!z->is_unix && !zp_real.getsockopt(z->fd, SOL_SOCKET, SO_ERROR, &err, &l) &&
	    (err = zp_kerr_once(z, err))) {
		errno = err; /* the kernel socket's reset (after both ways went back) */
		return -1;
	}
	return zp_epipe(flags);
}

ssize_t zp_send_dropped(struct zsock *z, size_t total, int flags)
{
	return zp_send_refused(z, total, flags, false);
}

ssize_t zp_send(struct zsock *z, const struct iovec *iov, int n, int flags)
{
	return zp_sendmsg(z, iov, n, NULL, 0, flags);
}

ssize_t zp_sendmsg(struct zsock *z, const struct iovec *iov, int n, const void *ctl, size_t ctllen,
		   int flags)
{
	if (z->xh)
		return ctllen ? (errno = EOPNOTSUPP, -1) : zx_send(z, iov, n, flags);
	size_t total = 0, sent = 0;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	int held = zp_take_kerr(z);
	if (held) {
		errno = held;
		return -1;
	}
	if (zp_wr_shut(z) || zp_peer_rd_shut(z)) /* (before a way back for fds) */
		return zp_send_shut(z, flags);
	if (total && !zp_peer_reset(z) && zp_peer_refuses_data(z)) { /* (a reset first) */
		if ((flags & MSG_OOB) && !z->o->gone_sent)
			atomic_store_explicit(&z->sh->urg_reset[z->side],
					      total < UINT32_MAX ? (uint32_t)total : UINT32_MAX,
					      memory_order_release);
		return zp_send_refused(z, total, flags, false);
	}
	if ((flags & MSG_OOB) || ctllen) { /* what a ring cannot carry */
		zp_poll_join(z);
		/* a peer that reset or closed answers as on the ring: our kernel
		 * socket, which carried no data to it, would not know */
		if (atomic_load(&z->o->tx_ring) && zp_peer_reset(z))
			return zp_send_refused(z, total, flags, true);
		if (atomic_load(&z->o->tx_ring) && zp_peer_gone(z))
			return zp_send_refused(z, total, flags, false);
		pthread_mutex_lock(&z->lock);
		zp_switch_back(z);
		pthread_mutex_unlock(&z->lock);
	}
	int64_t deadline = zp_deadline_of(z, flags, false);
	for (;;) {
		zp_poll_join(z);
		if (zp_peer_rd_shut(z)) /* (also after a wait) */
			return sent ? (ssize_t)sent : zp_epipe(flags);
		bool ring = atomic_load_explicit(&z->o->tx_ring, memory_order_acquire);
		if (ring || atomic_load(&z->o->lied)) { /* (on the kernel stream: its rules) */
			if (zp_peer_reset(z))
				return sent ? (ssize_t)sent : zp_send_refused(z, total, flags, true);
			if (ring && zp_peer_gone(z)) {
				ZL_LOG(ZL_LOG_DEBUG, "preload: fd %d: the peer is gone (%s)", z->fd,
				       atomic_load(&z->sh->gone[1 - z->side]) ? "closed" : "kernel EOF");
				return sent ? (ssize_t)sent : zp_send_refused(z, total, flags, false);
			}
		}
		if (!ring) {
			/* before our switch: the kernel stream, counted exactly
			 * (against another holder's switch: tx_lock) */
			pthread_mutex_lock(&z->lock);
			bool mt = zp_shared_use(z);
			int lr = mt ? zp_own_lock(&z->o->tx_lock) : 0;
			if (lr) {
				pthread_mutex_unlock(&z->lock);
				errno = -lr;
				return sent ? (ssize_t)sent : -1;
			}
			if (atomic_load_explicit(&z->o->tx_ring, memory_order_relaxed)) {
				if (mt)
					zp_own_unlock(&z->o->tx_lock);
				pthread_mutex_unlock(&z->lock);
				continue;
			}
			struct iovec tmp[64];
			int k = zp_iov_sub(iov, n > 64 ? 64 : n, sent, total - sent, tmp);
			struct msghdr m = { .msg_iov = tmp, .msg_iovlen = (size_t)k,
					    .msg_control = sent ? NULL : (void *)ctl,
					    .msg_controllen = sent ? 0 : ctllen };
			ssize_t r = zp_real.sendmsg(z->fd, &m, flags | MSG_DONTWAIT);
			if (r > 0)
				z->o->tx_k += (uint64_t)r;
			if (mt)
				zp_own_unlock(&z->o->tx_lock);
			pthread_mutex_unlock(&z->lock);
			if (r > 0) {
				sent += (size_t)r;
			} else if (errno != EAGAIN && errno != EWOULDBLOCK) {
				if (!sent) {
					zp_kernel_failed(z, errno); /* (the reset we play, told) */
					return -1;
				}
				zp_hold_kerr(z, errno); /* (the kernel's own send would
							 * have left it pending) */
				return (ssize_t)sent;
			}
		} else {
			/* threads and processes of ours write one at a time, and
			 * not past our way back (one thread alone needs no lock) */
			bool mt = zp_shared_use(z);
			int lr = mt ? zp_own_lock(&z->o->tx_lock) : 0;
			if (lr) {
				errno = -lr;
				return sent ? (ssize_t)sent : -1;
			}
			if (!atomic_load_explicit(&z->o->tx_ring, memory_order_acquire)) {
				if (mt)
					zp_own_unlock(&z->o->tx_lock);
				continue; /* gone back meanwhile */
			}
			if (__atomic_load_n(&z->o->wr_shut, __ATOMIC_ACQUIRE)) { /* another thread's */
				if (mt)
					zp_own_unlock(&z->o->tx_lock);
				return sent ? (ssize_t)sent : zp_send_shut(z, flags);
			}
			if (!(++z->sends & 63)) { /* notice a peer that died, now and then */
				int64_t now = zl_now_us();
				if (now >= z->next_look) {
					z->next_look = now + 10000;
					zp_drain(z);
				}
			}
			int64_t room = zp_tx_free(z);
			if (room >= 0 && (size_t)room < total - sent)
				atomic_fetch_add_explicit(&z->o->tx_fulls, 1, memory_order_relaxed);
			if (room > 0 && sent < total) {
				size_t c = (size_t)room < total - sent ? (size_t)room : total - sent;
				uint64_t t = atomic_load_explicit(&z->tx->tail, memory_order_relaxed);
				zp_ring_copy(z->txr, z->size, t, iov, n, sent, c, true);
				if (z->is_unix) { /* where this write ends (before the
						   * peer can read past it) */
					uint64_t w = atomic_load_explicit(&z->o->wr_count,
									  memory_order_relaxed);
					atomic_store_explicit(&z->o->wr_ends[w % ZP_WR_ENDS], t + c,
							      memory_order_relaxed);
					atomic_store_explicit(&z->o->wr_count, w + 1,
							      memory_order_release);
				}
				atomic_store_explicit(&z->tx->tail, t + c, memory_order_release);
				NOTIFY_RX(z);
				sent += c;
			}
			if (mt)
				zp_own_unlock(&z->o->tx_lock);
			if (room < 0) /* a lie */
				return sent ? (ssize_t)sent : zp_send_refused(z, total, flags, true);
		}
		if (sent == total || (sent && !deadline))
			return (ssize_t)sent;
		int r = deadline ? zp_wait_one(z, POLLOUT, deadline) : -EAGAIN;
		if (r == -EPIPE) {
			ZL_LOG(ZL_LOG_DEBUG, "preload: fd %d: the peer died with our ring full", z->fd);
			return sent ? (ssize_t)sent : zp_epipe(flags);
		}
		if (r) {
			errno = r == -ETIMEDOUT ? EAGAIN : -r;
			return sent ? (ssize_t)sent : -1;
		}
	}
}

static int shutdown_now(struct zsock *z, int how);

/* Each shutdown is an edge (own_wakes), counted after its state changed
 * so that a report that takes the edge shows the new state. */
int zp_shutdown(struct zsock *z, int how)
{
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
		errno = EINVAL;
		return -1;
	}
	int r = z->xh ? zx_shutdown(z, how) : shutdown_now(z, how);
	atomic_fetch_add_explicit(&z->o->own_wakes, 1, memory_order_release);
	if (!r && !z->xh && z->is_unix) /* (a Unix shutdown wakes the peer too) */
		atomic_fetch_add_explicit(&z->tx->shut_calls, 1, memory_order_release);
	return r;
}

/* Once our sends use the ring, the kernel socket stays open both ways: it
 * carries the wake-ups, also those the peer needs after our SHUT_WR. */
static int shutdown_now(struct zsock *z, int how)
{
	zp_poll_join(z);
	/* a TCP connection that was reset, or whose both ways ended, is
	 * closed in the kernel: its shutdown fails with ENOTCONN (after
	 * taking effect) */
	bool closed = !z->is_unix && (z->o->gone_sent || zp_peer_reset(z) ||
				      (zp_wr_shut(z) && zp_peer_wr_shut(z)));
	pthread_mutex_lock(&z->lock);
	bool ring = atomic_load(&z->o->tx_ring);
	if (how != SHUT_RD && !zp_wr_shut(z)) {
		/* under tx_lock: a thread of ours writing the ring finishes its
		 * copy first, and one that comes after sees wr_shut (a byte past
		 * our end would be a lie to the peer); one waiting for room
		 * looks again within WAIT_OUT_MS (zp_wait_one) and fails */
		bool held = !zp_own_lock(&z->o->tx_lock);
		__atomic_store_n(&z->o->wr_shut, true, __ATOMIC_RELEASE);
		if (!closed) { /* (a closed TCP socket sends no FIN) */
			atomic_store_explicit(&z->tx->wr_shut, 1, memory_order_release);
			if (!z->o->tx_back) /* (after our way back the kernel's FIN says it) */
				atomic_store_explicit(&z->tx->closed, 1, memory_order_release);
			NOTIFY_RX(z);
		}
		if (held)
			zp_own_unlock(&z->o->tx_lock);
	}
	if (how != SHUT_WR) {
		z->o->rd_shut = true;
		zp_kernel_rd_shut(z);
		/* a Unix peer's sends fail from now on, on its ring as on the
		 * kernel stream (which stays open: a kernel shutdown would read
		 * as the peer's end here); a socket that joins later says it
		 * then (rendezvous.c). A TCP peer's data resets once we shut
		 * both ways (zp_peer_refuses_data). */
		if (z->rx) {
			atomic_store_explicit(&z->rx->rd_shut, 1, memory_order_release);
			NOTIFY_TX(z); /* a sender waiting for room gets its EPIPE */
		}
	}
	pthread_mutex_unlock(&z->lock);
	if (closed && zp_real.fcntl(z->fd, F_GETFD) >= 0) {
		errno = ENOTCONN;
		return -1;
	}
	if (!ring && atomic_load(&z->o->krd_shut)) /* both ways on the kernel stream: */
		return zp_real.shutdown(z->fd, how); /* its state (ENOTCONN) is the kernel's */
	if (how == SHUT_RD || ring)
		return zp_real.fcntl(z->fd, F_GETFD) < 0 ? -1 : 0; /* EBADF as the kernel */
	return zp_real.shutdown(z->fd, SHUT_WR);
}

size_t zp_tx_room(struct zsock *z)
{
	if (z->xh)
		return zx_tx_room(z);
	zp_poll_join(z);
	if (!atomic_load_explicit(&z->o->tx_ring, memory_order_acquire))
		return SIZE_MAX;
	int64_t r = zp_tx_free(z);
	return r > 0 ? (size_t)r : 0;
}

bool zp_probe(struct zsock *z)
{
	static const char b = 0;
	int err = 0;
	socklen_t l = sizeof(err);
	if (zp_real.send(z->fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 &&
	    (errno == EPIPE || errno == ECONNRESET))
		return true;
	return !zp_real.getsockopt(z->fd, SOL_SOCKET, SO_ERROR, &err, &l) &&
	       (err == EPIPE || err == ECONNRESET);
}
