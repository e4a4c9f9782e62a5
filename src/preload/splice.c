/* SPDX-License-Identifier: MIT */
/*
 * splice(2) and sendfile(2) with a switched socket at one end, byte-exact:
 * nothing is taken from the source that the destination did not accept.
 *
 * The program's pipe is never written or read with a guess of its room:
 * the bytes pass through a pipe of our own (made for the call and closed
 * after it, so that the program never finds descriptors it did not open),
 * and the kernel's own splice moves them between it and the program's
 * pipe, with the program's flags, so its pipe's rules (room, O_NONBLOCK,
 * SPLICE_F_NONBLOCK, blocking) are the kernel's.
 *  - socket to pipe: the bytes are peeked from the socket, put in our pipe,
 *    spliced on; exactly what the program's pipe took is then consumed
 *    from the socket, and the rest of ours is dropped.
 *  - pipe (splice) or file (sendfile) to socket: what the ring has room for
 *    now is taken (the kernel's splice into our pipe, or a read of the
 *    file) and written into the ring, which cannot refuse it. Before our
 *    sends moved to the ring, the kernel's own call does it, counted.
 * SPLICE_F_NONBLOCK makes both sides nonblocking, as in the kernel; the
 * socket's O_NONBLOCK its side; a blocking wait honours SO_SNDTIMEO and
 * SO_RCVTIMEO as the socket's own calls do.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "preload.h"

#define CHUNK 65536 /* at most per call: our pipe's default capacity */

static __thread int own[2] = { -1, -1 }; /* our pipe: read end, write end */
static __thread uint8_t *bounce;           /* a chunk's bytes (kept per thread) */

static int our_pipe(void)
{
	if (!bounce && !(bounce = malloc(CHUNK)))
		return -1;
	return pipe2(own, O_CLOEXEC | O_NONBLOCK);
}

static void our_pipe_close(void)
{
	zp_real.close(own[0]);
	zp_real.close(own[1]);
	own[0] = own[1] = -1;
}

static void drop(size_t n)
{
	while (n) {
		ssize_t r = zp_real.read(own[0], bounce, n < CHUNK ? n : CHUNK);
		if (r <= 0)
			break;
		n -= (size_t)r;
	}
}

static bool is_pipe(int fd)
{
	struct stat st;
	return !fstat(fd, &st) && S_ISFIFO(st.st_mode);
}

static int64_t deadline(int64_t timeo_us)
{
	return timeo_us > 0 ? zl_now_us() + timeo_us : ZL_NEVER;
}

/* the switched socket z into pipe out */
static ssize_t from_socket(struct zsock *z, int out, size_t len, unsigned flags)
{
	/* The peer went back and its ring is read to the end: from here its
	 * kernel stream holds only its data, and the kernel's own splice
	 * keeps the kernel's rules (it stops at an urgent mark, where a read
	 * goes past; the real socket's O_NONBLOCK is the program's). */
	uint64_t left;
	zp_poll_join(z); /* (our sends follow the peer's way back first) */
	if (!z->xh && z->o->tx_back && !zp_peer_reset(z) && !z->o->gone_sent &&
	    (!z->o->rd_shut || atomic_load(&z->o->krd_shut)) && zp_rx_back(z) && zp_rx_left(z, &left) &&
	    left == UINT64_MAX) {
		int held = zp_take_kerr(z);
		if (held) {
			errno = held;
			return -1;
		}
		return zp_real.splice(z->fd, NULL, out, NULL, len, flags);
	}
	/* TCP's splice stops at an urgent mark (0, where a read skips the
	 * urgent byte; Linux's tcp_read_sock), as SIOCATMARK tells of the
	 * kernel stream: our peek below stops before a mark, not at one */
	int mark = 0;
	if (!z->xh && !z->is_unix && zp_rx_left(z, &left) &&
	    !zp_real.ioctl(z->fd, SIOCATMARK, &mark) && mark)
		return 0;
	bool nb = (flags & SPLICE_F_NONBLOCK) || atomic_load(&z->o->nonblock);
	struct iovec v = { bounce, len < CHUNK ? len : CHUNK };
	ssize_t n = zp_recv(z, &v, 1, MSG_PEEK | (nb ? MSG_DONTWAIT : 0));
	if (n <= 0)
		return n;
	ssize_t w = zp_real.write(own[1], bounce, (size_t)n); /* empty: it fits */
	if (w != n) {
		drop(w > 0 ? (size_t)w : 0);
		errno = EIO;
		return -1;
	}
	ssize_t k = zp_real.splice(own[0], NULL, out, NULL, (size_t)n, flags);
	int e = errno;
	drop((size_t)(k > 0 ? n - k : n));
	if (k <= 0) {
		errno = e;
		return k;
	}
	v.iov_len = (size_t)k; /* what the pipe took leaves the socket */
	ssize_t c = zp_recv(z, &v, 1, MSG_DONTWAIT);
	if (c != k)
		ZL_LOG(ZL_LOG_ERROR, "preload: splice from fd %d: %zd of %zd bytes taken "
		       "(another thread read the socket meanwhile)", z->fd, c, k);
	return k;
}

/* Before our sends moved to the ring: the kernel's own call (splice from
 * pipe in, or sendfile from in at off), nonblocking under z->lock so that
 * tx_k counts it; a blocking caller waits outside the lock. */
static ssize_t kernel_call(struct zsock *z, int in, off_t *off, size_t len, unsigned flags,
			   bool sendfile_call, bool *moved)
{
	bool nb = (flags & SPLICE_F_NONBLOCK) || atomic_load(&z->o->nonblock);
	int64_t end = deadline(z->o->sndtimeo_us);
	for (;;) {
		pthread_mutex_lock(&z->lock);
		if (atomic_load(&z->o->tx_ring)) {
			pthread_mutex_unlock(&z->lock);
			*moved = true;
			return 0;
		}
		ssize_t r = sendfile_call
				    ? zp_real.sendfile(z->fd, in, off, len)
				    : zp_real.splice(in, NULL, z->fd, NULL, len, flags | SPLICE_F_NONBLOCK);
		int e = errno;
		if (r > 0)
			z->o->tx_k += (uint64_t)r;
		else if (r < 0)
			zp_kernel_failed(z, e);
		pthread_mutex_unlock(&z->lock);
		if (r >= 0 || e != EAGAIN || nb) {
			errno = e;
			return r;
		}
		/* blocking: wait for what is missing, the pipe's bytes or room */
		struct pollfd p = { in, POLLIN, 0 };
		if (sendfile_call || zp_real.poll(&p, 1, 0) > 0)
			p = (struct pollfd){ z->fd, POLLOUT, 0 };
		int ms = zl_poll_ms(end);
		if (!ms) {
			errno = EAGAIN;
			return -1;
		}
		if (zp_real.poll(&p, 1, ms) < 0)
			return -1;
	}
}

/* Room in the ring of z now for a call that wants len, waiting for it if
 * the call blocks: >0, or -1 (EAGAIN, EPIPE, ...). Too little room marks
 * the ring full, as a short send does (edge-triggered writers wait for
 * the room to come back). */
static ssize_t ring_room(struct zsock *z, size_t len, bool nb)
{
	int64_t end = deadline(z->o->sndtimeo_us);
	for (;;) {
		if (zp_wr_shut(z)) /* another thread's shutdown */
			return zp_send_shut(z, 0);
		if (zp_peer_rd_shut(z)) /* before any byte leaves the source */
			return zp_epipe(0);
		size_t room = zp_tx_room(z);
		if (room < len && room < CHUNK)
			atomic_fetch_add_explicit(&z->o->tx_fulls, 1, memory_order_relaxed);
		if (room)
			return room > CHUNK ? CHUNK : (ssize_t)room;
		int r = nb ? -EAGAIN : zp_wait_one(z, POLLOUT, end);
		if (r == -EPIPE)
			return zp_epipe(0);
		if (r) {
			errno = r == -ETIMEDOUT ? EAGAIN : -r;
			return -1;
		}
	}
}

/* n bytes of the bounce buffer into the ring: room was there for them,
 * but another thread of ours may have taken it meanwhile; then we wait, as
 * the bytes have left their source. */
static ssize_t into_ring(struct zsock *z, size_t n)
{
	size_t done = 0;
	while (done < n) {
		struct iovec v = { bounce + done, n - done };
		ssize_t w = zp_send(z, &v, 1, MSG_DONTWAIT);
		if (w > 0)
			done += (size_t)w;
		else if (w < 0 && errno == EAGAIN && zp_wait_one(z, POLLOUT, ZL_NEVER) == 0)
			continue;
		else
			return done ? (ssize_t)done : w;
	}
	return (ssize_t)done;
}

/* Bytes for a TCP peer that shut both ways (zp_peer_refuses_data): the
 * kernel takes them from the source and its reset drops them; after that
 * first call, EPIPE before any byte leaves the source. */
static ssize_t refused(struct zsock *z, int in, off_t *off, size_t len, unsigned flags,
		       bool sendfile_call)
{
	if (z->o->gone_sent || !len)
		return zp_send_dropped(z, len, 0);
	size_t n = len < CHUNK ? len : CHUNK;
	ssize_t k;
	if (sendfile_call) {
		k = off ? pread(in, bounce, n, *off) : zp_real.read(in, bounce, n);
		if (k > 0 && off)
			*off += (off_t)k;
	} else {
		k = zp_real.splice(in, NULL, own[1], NULL, n, flags);
		drop(k > 0 ? (size_t)k : 0);
	}
	return k <= 0 ? k : zp_send_dropped(z, (size_t)k, 0);
}

/* pipe in into the switched socket z */
static ssize_t to_socket(struct zsock *z, int in, size_t len, unsigned flags)
{
	if (zp_wr_shut(z) || zp_peer_rd_shut(z)) /* (the kernel's call would not know) */
		return zp_send_shut(z, 0);
	if (!zp_peer_reset(z) && zp_peer_refuses_data(z))
		return refused(z, in, NULL, len, flags, false);
	bool moved = false;
	ssize_t r = kernel_call(z, in, NULL, len, flags, false, &moved);
	if (!moved)
		return r;
	ssize_t room = ring_room(z, len, (flags & SPLICE_F_NONBLOCK) || atomic_load(&z->o->nonblock));
	if (room < 0)
		return room;
	size_t n = len < (size_t)room ? len : (size_t)room;
	ssize_t k = zp_real.splice(in, NULL, own[1], NULL, n, flags);
	if (k <= 0)
		return k;
	ssize_t got = zp_real.read(own[0], bounce, (size_t)k);
	if (got != k) {
		drop(got > 0 ? 0 : (size_t)k);
		errno = EIO;
		return -1;
	}
	return into_ring(z, (size_t)k);
}

ssize_t zp_splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len, unsigned flags)
{
	struct zsock *zi = off_in ? NULL : zp_get(in), *zo = off_out ? NULL : zp_get(out);
	if ((zi && !zo && is_pipe(out)) || (zo && !zi && is_pipe(in))) {
		if (our_pipe())
			return -1;
		ssize_t r = zi ? from_socket(zi, out, len, flags) : to_socket(zo, in, len, flags);
		int e = errno;
		our_pipe_close();
		errno = e;
		return r;
	}
	/* (not a pipe at the other end, or offsets on a socket: the kernel's
	 * error, EINVAL or ESPIPE) */
	return zp_real.splice(in, off_in, out, off_out, len, flags);
}

ssize_t zp_sendfile(int out, int in, off_t *off, size_t count)
{
	struct zsock *zo = zp_get(out);
	if (!zo || zp_get(in))
		return zp_real.sendfile(out, in, off, count); /* a socket as input: EINVAL */
	if (!bounce && !(bounce = malloc(CHUNK)))
		return -1;
	if (zp_wr_shut(zo) || zp_peer_rd_shut(zo)) /* (the kernel's call would not know) */
		return zp_send_shut(zo, 0);
	if (!zp_peer_reset(zo) && zp_peer_refuses_data(zo))
		return refused(zo, in, off, count, 0, true);
	bool moved = false;
	ssize_t r = kernel_call(zo, in, off, count, 0, true, &moved);
	if (!moved)
		return r;
	ssize_t room = ring_room(zo, count, atomic_load(&zo->o->nonblock));
	if (room < 0)
		return room;
	size_t n = count < (size_t)room ? count : (size_t)room;
	ssize_t k = off ? pread(in, bounce, n, *off) : zp_real.read(in, bounce, n);
	if (k <= 0)
		return k;
	ssize_t w = into_ring(zo, (size_t)k);
	size_t sent = w > 0 ? (size_t)w : 0;
	if (off)
		*off += (off_t)sent;
	else if (sent < (size_t)k) /* what did not go stays in the file */
		lseek(in, (off_t)sent - k, SEEK_CUR);
	return w;
}
