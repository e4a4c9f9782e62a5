/* SPDX-License-Identifier: MIT */
/*
 * poll and select (and a wait on one socket) over sets that mix switched
 * sockets and kernel fds, and the helpers epoll.c shares (wait.h). A
 * switched socket's readiness is in shared memory: it is looked at first,
 * then, when nothing is ready, looked at again for the thread's spin
 * budget (at most zp_spin_us, see zp_spin), then every switched socket is
 * armed (its peer will send a wake-up byte) and the kernel wait sleeps on
 * all fds, switched sockets asked for POLLIN only (their kernel side is
 * always writable; room is the ring's). What the kernel reports for a
 * switched socket is translated: wake-ups are drained and the socket's own
 * state is reported.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <linux/tcp.h>
#include <stddef.h>
#include <sys/ioctl.h>

#include <linux/sockios.h>

#include "clock.h"
#include "preload.h"
#include "wait.h"

/* ---- poll ------------------------------------------------------------ */

bool zp_klook_skip(const struct klook *l, uint64_t sig)
{
	return l->quiet && l->sig == sig && zl_now_us() - l->at < KLOOK_US;
}

/* Nothing from the kernel for the set in revents kr of fd (switched: z):
 * wake-ups and room on a switched socket's kernel side are not news. */
bool zp_kquiet(bool switched, uint32_t kr)
{
	return switched ? !(kr & ~(uint32_t)(POLLIN | POLLOUT)) : !kr;
}

static __thread struct klook poll_look;

bool zp_full_for(struct zsock *z, short events)
{
	return (events & POLLOUT) && !z->xh && atomic_load(&z->o->tx_ring) && zp_tx_free(z) == 0;
}

/* Events to ask the kernel for on a switched socket. */
short zp_kernel_events(struct zsock *z, short want)
{
	if (z->xh) /* its fd to sleep on (zp_kfd) turns readable for anything */
		return POLLIN;
	/* (after the stream's end, or our own SHUT_RD in the kernel, POLLIN
	 * would hold for good: a sleep on it would not sleep) */
	short k = atomic_load(&z->o->peer_eof) || atomic_load(&z->o->krd_shut) ? 0 : POLLIN | POLLRDHUP;
	if (atomic_load(&z->o->peer_back) && zp_rx_avail(z) > 0)
		k = 0; /* the ring's last bytes are ready; its wake-ups wait for them (rx.c) */
	if (!atomic_load_explicit(&z->o->tx_ring, memory_order_acquire))
		k |= want & POLLOUT;
	return (short)(k | (want & POLLPRI)); /* urgent data is the kernel's */
}

/* The kernel cannot tell of this socket's input now (kernel_events leaves
 * POLLIN out, and no wake-up comes): a sleep on it looks again every 1 ms,
 * as one among a crowd does. */
bool zp_kernel_blind(struct zsock *z)
{
	return !z->xh && (atomic_load(&z->o->peer_eof) || atomic_load(&z->o->krd_shut) ||
			  (atomic_load(&z->o->peer_back) && zp_rx_avail(z) > 0));
}

/* A switched socket's events after the kernel reported krev for it;
 * *kin: its input is the kernel stream's (bytes sent before the switch). */
short zp_merged(struct zsock *z, short want, short krev, bool *kin)
{
	if (z->xh) {
		*kin = false;
		return (short)(zp_ready(z, (short)(want | POLLRDHUP)) & (want | POLLERR | POLLHUP));
	}
	if (krev & (POLLIN | POLLRDHUP | POLLHUP | POLLERR))
		zp_drain(z); /* reads only wake-ups; data stays */
	short r = zp_ready(z, (short)(want | POLLRDHUP));
	bool rx_kernel = zp_rx_on_kernel(z);
	if (rx_kernel)
		r |= krev & POLLIN;
	r |= krev & POLLRDHUP; /* the peer's FIN (after its way back, its death) or a
				* reset: the kernel's, wherever our unread bytes are */
	if ((krev & POLLRDHUP) && (__atomic_load_n(&z->o->wr_shut, __ATOMIC_ACQUIRE) ||
				   (z->is_unix && (zp_peer_gone(z) || zp_peer_rd_shut(z)))))
		r |= POLLHUP; /* both ways shut (zp_ready), the end told by the kernel */
	*kin = rx_kernel && (krev & POLLIN);
	if (!atomic_load_explicit(&z->o->tx_ring, memory_order_acquire))
		r |= krev & POLLOUT;
	if ((krev & POLLERR) && z->o->reset_told && zp_peer_reset(z))
		krev &= (short)~POLLERR; /* the reset we play, told already (zp_kerr_once) */
	r |= krev & (POLLERR | POLLHUP | POLLPRI);
	return (short)(r & (want | POLLERR | POLLHUP));
}

/*
 * A switched socket's events now. The ring's state says them all while
 * both directions are on the ring (urgent data comes only after a way
 * back); a socket that sends on the kernel (after a way back) or reads the
 * kernel stream (bytes from before a switch, or after the peer's way back)
 * asks the kernel too, in one poll that does not wait: those are not the
 * fast path. *kin as merged.
 */
bool zp_ring_only(struct zsock *z)
{
	return atomic_load_explicit(&z->o->tx_ring, memory_order_acquire) && !zp_rx_back(z) &&
	       !zp_rx_on_kernel(z);
}

short zp_ready_now(struct zsock *z, short want, bool *kin)
{
	*kin = false;
	if (z->xh || zp_ring_only(z)) /* (urgent data comes after a way back) */
		return (short)(zp_ready(z, (short)(want | POLLRDHUP)) & (want | POLLERR | POLLHUP));
	/* (a look that does not sleep also asks for the peer's FIN, which
	 * kernel_events leaves out while the ring's last bytes wait) */
	struct pollfd p = { z->fd, (short)(zp_kernel_events(z, want) | (want & POLLRDHUP)), 0 };
	if (zp_real.poll(&p, 1, 0) < 0)
		p.revents = 0;
	return zp_merged(z, want, p.revents, kin);
}

/*
 * Spinning pays only while the peer answers within the spin, which it
 * cannot when more threads spin than there are CPUs to run them (pgbench
 * with 4 clients and 4 backends on 2 CPUs). Each thread keeps a budget, at
 * most zp_spin_us: it doubles when a spin finds work or a sleep ends
 * sooner than a full spin would have, and halves when a sleep lasted
 * longer.
 */
static __thread int spin_budget = -1;

bool zp_spin(int64_t deadline, bool (*ready)(void *), void *arg)
{
	if (spin_budget < 0 || spin_budget > zp_spin_us)
		spin_budget = zp_spin_us;
	int64_t now = zl_now_us(), end = now + spin_budget;
	if (end > deadline)
		end = deadline;
	while (now < end) {
		for (int i = 0; i < 64; i++)
			zl_cpu_relax();
		if (ready(arg)) {
			spin_budget = spin_budget * 2 + 1 < zp_spin_us ? spin_budget * 2 + 1 : zp_spin_us;
			return true;
		}
		now = zl_now_us();
	}
	return false;
}

/* A sleep that began at t0 has ended. */
void zp_slept(int64_t t0)
{
	if (zl_now_us() - t0 < zp_spin_us)
		spin_budget = spin_budget * 2 + 1 < zp_spin_us ? spin_budget * 2 + 1 : zp_spin_us;
	else
		spin_budget /= 2;
}

struct pollset {
	struct pollfd *fds;
	struct zsock **z;
	nfds_t n;
};

static int scan_poll(struct pollset *s)
{
	int ready = 0;
	for (nfds_t i = 0; i < s->n; i++) {
		s->fds[i].revents = 0;
		if (!s->z[i])
			continue;
		bool kin;
		s->fds[i].revents = zp_ready_now(s->z[i], s->fds[i].events, &kin);
		if (s->fds[i].revents)
			ready++;
	}
	return ready;
}

static bool poll_ready(void *arg) { return scan_poll(arg) > 0; }

int zp_poll(struct pollfd *fds, nfds_t n, int64_t timeout_us, const sigset_t *mask)
{
	struct zsock *zs[64], **z = n <= 64 ? zs : calloc(n, sizeof(*z));
	struct pollfd kb[64], *k = n <= 64 ? kb : calloc(n, sizeof(*k));
	short ab[64], *armed = n <= 64 ? ab : calloc(n, sizeof(*armed));
	int rc = -1;
	if (!z || !k || !armed) {
		errno = ENOMEM;
		goto out;
	}
	bool any = false;
	uint64_t sig = 14695981039346656037ull ^ n; /* FNV-1a of the set */
	for (nfds_t i = 0; i < n; i++) {
		any |= (z[i] = fds[i].fd >= 0 ? zp_get(fds[i].fd) : NULL) != NULL;
		sig = (sig ^ (uint32_t)fds[i].fd) * 1099511628211ull;
		sig = (sig ^ (uint16_t)fds[i].events) * 1099511628211ull;
	}
	struct pollset s = { fds, z, n };
	int64_t deadline = timeout_us < 0 ? ZL_NEVER : zl_now_us() + timeout_us;
	for (;;) {
		int ready = any ? scan_poll(&s) : 0;
		if (!ready && any && deadline > zl_now_us() && zp_spin(deadline, poll_ready, &s))
			ready = scan_poll(&s);
		if (ready && zp_klook_skip(&poll_look, sig)) { /* (scan_poll: kernel fds 0) */
			rc = ready;
			goto out;
		}
		bool arm = !ready && deadline > zl_now_us(), crowded = false, full = false;
		for (nfds_t i = 0; i < n; i++) {
			k[i] = fds[i];
			k[i].revents = 0;
			armed[i] = -1;
			if (!z[i])
				continue;
			k[i].fd = zp_kfd(z[i], fds[i].fd);
			/* (poll is level-triggered: the peer's FIN, when asked for,
			 * is reported as soon as the kernel has it, so a sleep on it
			 * ends with an event) */
			k[i].events = (short)(zp_kernel_events(z[i], fds[i].events) |
					      (fds[i].events & POLLRDHUP));
			if (!arm)
				continue;
			int a = zp_arm(z[i], (short)(fds[i].events | POLLIN), &armed[i]);
			ready |= a & ZP_READY;
			if ((a & ZP_CROWDED) || zp_kernel_blind(z[i])) {
				crowded = true;
				k[i].events &= (short)~(POLLIN | POLLRDHUP);
			}
			full |= zp_full_for(z[i], fds[i].events);
		}
		struct timespec ts = { 0, 0 }, *tp = &ts;
		int64_t left = deadline == ZL_NEVER ? INT64_MAX : deadline - zl_now_us();
		if (crowded && left > 1000)
			left = 1000;
		if (full && left > WAIT_OUT_MS * 1000)
			left = WAIT_OUT_MS * 1000;
		if (!ready && left == INT64_MAX) {
			tp = NULL;
		} else if (!ready) {
			left = left < 0 ? 0 : left;
			ts.tv_sec = left / 1000000;
			ts.tv_nsec = left % 1000000 * 1000;
		}
		int64_t t0 = zl_now_us();
		int r = zp_real.ppoll(k, n, tp, mask);
		poll_look = (struct klook){ .at = t0, .sig = sig, .quiet = r >= 0 };
		for (nfds_t i = 0; r > 0 && i < n; i++)
			poll_look.quiet &= zp_kquiet(z[i] != NULL, (uint16_t)k[i].revents);
		if (arm && !ready)
			zp_slept(t0);
		for (nfds_t i = 0; i < n; i++)
			if (z[i] && armed[i] >= 0)
				zp_disarm(z[i], armed[i]);
		if (r < 0)
			goto out;
		int count = 0;
		for (nfds_t i = 0; i < n; i++) {
			bool kin;
			fds[i].revents = z[i] ? zp_merged(z[i], fds[i].events, k[i].revents, &kin)
					      : k[i].revents;
			count += fds[i].revents != 0;
		}
		if (count || (deadline != ZL_NEVER && zl_now_us() >= deadline)) {
			rc = count;
			goto out;
		}
	}
out:
	if (z != zs)
		free(z);
	if (k != kb)
		free(k);
	if (armed != ab)
		free(armed);
	return rc;
}

/* ---- one socket ------------------------------------------------------- */

struct one {
	struct zsock *z;
	short events;
};

static bool one_ready(void *arg)
{
	struct one *o = arg;
	return zp_ready(o->z, o->events) != 0;
}


int zp_wait_one(struct zsock *z, short events, int64_t deadline)
{
	if ((events & POLLOUT) && !z->xh && atomic_load(&z->o->tx_ring) && zp_rx_back(z)) {
		pthread_mutex_lock(&z->lock); /* no wake-up comes from a peer gone back */
		zp_switch_back(z);
		pthread_mutex_unlock(&z->lock);
		return 0;
	}
	struct one o = { z, events };
	if (zp_spin(deadline, one_ready, &o))
		return 0;
	for (;;) {
		short armed;
		int a = zp_arm(z, (short)(events | POLLIN), &armed);
		if (a & ZP_READY) {
			zp_disarm(z, armed);
			return 0;
		}
		bool eof = atomic_load(&z->o->peer_eof);
		struct pollfd p = { .fd = zp_kfd(z, z->fd), .events = zp_kernel_events(z, events) };
		int ms = zl_poll_ms(deadline);
		if (a & ZP_CROWDED) /* another thread's wake-ups stay unread */
			p.events &= (short)~(POLLIN | POLLRDHUP);
		/* a writer cannot take the peer's bytes still on the kernel stream
		 * (it has not switched, so it sends no wake-ups either): it looks
		 * every 1 ms, and notices the stream's end by RDHUP */
		bool kin = !(events & POLLIN) && zp_rx_on_kernel(z);
		if (kin) {
			p.events &= (short)~POLLIN;
			if (ms < 0 || ms > 1)
				ms = 1;
		}
		/* no wake-ups come after the kernel stream's end, nor to a crowd */
		if ((eof || (a & ZP_CROWDED) || zp_kernel_blind(z)) && (ms < 0 || ms > 1))
			ms = 1;
		if (eof && (events & POLLOUT) && zp_probe(z)) {
			zp_disarm(z, armed);
			return -EPIPE; /* our ring is full and the peer's socket is gone */
		}
		if (events & POLLOUT) {
			if (__atomic_load_n(&z->o->wr_shut, __ATOMIC_ACQUIRE)) {
				zp_disarm(z, armed);
				return 0; /* the send looks again, and fails */
			}
			if (ms < 0 || ms > WAIT_OUT_MS)
				ms = WAIT_OUT_MS;
		}
		int64_t t0 = zl_now_us();
		int r = zp_real.poll(&p, 1, ms);
		if (ms)
			zp_slept(t0);
		zp_disarm(z, armed);
		if (r < 0)
			return errno == EINTR ? -EINTR : -errno;
		if (r > 0) {
			if (kin && (p.revents & (POLLRDHUP | POLLHUP)) && !atomic_load(&z->o->krd_shut))
				atomic_store(&z->o->peer_eof, true);
			if (p.revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR))
				zp_drain(z);
			if ((events & POLLOUT) && (p.revents & (POLLERR | POLLHUP)) &&
			    atomic_load_explicit(&z->o->tx_ring, memory_order_acquire) &&
			    !zp_ready(z, POLLOUT))
				return -EPIPE; /* the peer died with our ring full */
			return 0;
		}
		if (deadline != ZL_NEVER && zl_now_us() >= deadline)
			return -ETIMEDOUT;
		if (zp_ready(z, events))
			return 0;
	}
}
