/* SPDX-License-Identifier: MIT */
/*
 * What the peer writes into the shared memory, read once and checked
 * against what the stream carried (the argument is at the top of sock.c):
 * its switch (state, kbytes), its end (closed, gone), its reset, and the
 * ring positions. A lie ends the connection (zp_lie).
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

/* The peer's side is closed for good: it closed its last copy, or its
 * kernel socket ended after it had switched without a shutdown (once
 * switched it shuts down only its ring: an end of the kernel stream is then
 * its last close, or its death). A peer that shut down before switching, or
 * after its way back to the kernel stream, ended that stream alive; its
 * death shows in a probe (zp_probe), or in our kernel socket's state. */
bool zp_peer_gone(struct zsock *z)
{
	if (!zp_trusted(z))
		return false;
	return atomic_load_explicit(&z->sh->gone[1 - z->side], memory_order_acquire) ||
	       (atomic_load(&z->o->peer_eof) && zp_rx_switch(z) != ZP_UNLATCHED && !zp_rx_back(z) &&
		!zp_peer_closed(z));
}

/* A Unix peer shut its reading side: our sends fail, as its kernel's
 * shutdown makes them (a TCP peer's does not tell us). */
bool zp_peer_rd_shut(struct zsock *z)
{
	return z->is_unix && z->tx && zp_trusted(z) &&
	       atomic_load_explicit(&z->tx->rd_shut, memory_order_acquire);
}

/* The peer sends no more: it shut its sending side (on either path) or
 * closed, or its kernel stream ended. */
bool zp_peer_wr_shut(struct zsock *z)
{
	return atomic_load(&z->o->peer_eof) || zp_peer_closed(z) ||
	       (z->rx && zp_trusted(z) && atomic_load_explicit(&z->rx->wr_shut, memory_order_acquire));
}

/* Its urgent byte met our reset (TCP): our kernel would hold its mark
 * (POLLPRI) in a closed socket (ENOTCONN to an urgent read) */
/* ... and the bytes its send had before the urgent one (the mark) */
uint32_t zp_peer_urg_off(struct zsock *z)
{
	uint32_t n = zp_peer_urg_reset(z) ? atomic_load(&z->sh->urg_reset[1 - z->side]) : 0;
	return n ? n - 1 : 0;
}

bool zp_peer_urg_reset(struct zsock *z)
{
	return !z->is_unix && z->sh && zp_trusted(z) &&
	       atomic_load_explicit(&z->sh->urg_reset[1 - z->side], memory_order_acquire);
}

/* The peer shut its sending side (a FIN, not a close that resets) */
bool zp_peer_fin(struct zsock *z)
{
	return atomic_load(&z->o->peer_eof) ||
	       (z->rx && zp_trusted(z) && atomic_load_explicit(&z->rx->wr_shut, memory_order_acquire));
}

/*
 * A TCP peer that shut both ways (in FIN_WAIT with its reading side shut)
 * answers new data with a reset (RFC 1122 4.2.2.13; Linux's
 * tcp_rcv_state_process does so): the data is dropped, our send succeeds,
 * our next one fails with EPIPE, and the peer reads what it had queued,
 * then ECONNRESET. On one host we play both kernels: true when our data
 * would meet such a peer, and the reset is then set for it to see.
 */
bool zp_peer_refuses_data(struct zsock *z)
{
	if (z->is_unix || !z->sh || !zp_trusted(z) ||
	    !atomic_load_explicit(&z->tx->rd_shut, memory_order_acquire) ||
	    !atomic_load_explicit(&z->rx->wr_shut, memory_order_acquire))
		return false;
	/* our data on the kernel stream to a peer whose kernel socket is shut
	 * too (it may have left the rings): its kernel resets, not we */
	if (!atomic_load_explicit(&z->o->tx_ring, memory_order_acquire) &&
	    atomic_load_explicit(&z->tx->krd_shut, memory_order_acquire))
		return false;
	if (!atomic_exchange_explicit(&z->sh->reset[z->side], 1, memory_order_acq_rel)) {
		NOTIFY_RX(z); /* it may sleep on its input */
		NOTIFY_TX(z);
	}
	return true;
}

/* The peer's FIN came before its reset: it shut its sending side (a
 * close that resets sends none; the kernel stream's own end, then, is an
 * artefact of the reset we play). */
bool zp_peer_fin_first(struct zsock *z)
{
	return !z->is_unix && z->rx && zp_trusted(z) &&
	       atomic_load_explicit(&z->rx->wr_shut, memory_order_acquire);
}

/* The error the peer's reset leaves: TCP in CLOSE_WAIT (its FIN came
 * first, ours did not go) takes it as EPIPE, as Linux's tcp_reset does;
 * otherwise ECONNRESET. */
int zp_reset_err(struct zsock *z)
{
	int e = atomic_load_explicit(&z->o->reset_err, memory_order_acquire);
	return e ? e : ECONNRESET;
}

/* The peer broke the protocol (sock.c's top): the connection ends. */
void zp_lie(struct zsock *z, const char *what)
{
	static struct zl_ratelimit rl;
	atomic_store(&z->o->lied, true);
	if (atomic_exchange(&z->o->reset_seen, true))
		return;
	ZL_LOG_RL(&rl, ZL_LOG_WARN, "preload: fd %d: the peer lied (%s): connection reset",
		  z->fd, what);
	zp_real.shutdown(z->fd, SHUT_RDWR);
}

/* The peer reset the connection, or lied: sticky, as the kernel's reset. */
bool zp_peer_reset(struct zsock *z)
{
	if (atomic_load_explicit(&z->o->reset_seen, memory_order_acquire))
		return true;
	if (!zp_trusted(z) || !atomic_load_explicit(&z->sh->reset[1 - z->side], memory_order_acquire))
		return false;
	/* the state it met, now: a shutdown of ours after it changes nothing */
	int e = !zp_wr_shut(z) && zp_peer_fin_first(z) ? EPIPE : ECONNRESET, zero = 0;
	atomic_compare_exchange_strong(&z->o->reset_err, &zero, e);
	atomic_store(&z->o->reset_seen, true);
	return true;
}

/* The peer's switch, read once: its kbytes, or ZP_UNLATCHED before it. */
uint64_t zp_rx_switch(struct zsock *z)
{
	uint64_t kb = atomic_load_explicit(&z->o->rx_kb, memory_order_acquire);
	if (kb != ZP_UNLATCHED || !zp_trusted(z) ||
	    !atomic_load_explicit(&z->rx->state, memory_order_acquire))
		return kb;
	uint64_t k = atomic_load_explicit(&z->rx->kbytes, memory_order_relaxed);
	if (k == ZP_UNLATCHED)
		k--; /* more than any stream carries: the lie shows at its end */
	if (atomic_compare_exchange_strong(&z->o->rx_kb, &kb, k))
		kb = k;
	if (kb < z->o->rx_k)
		zp_lie(z, "it had sent more on the kernel stream than it says");
	return kb;
}

/* The peer's way back to the kernel stream, read once: false before it.
 * Its ring ends at back_tail (it writes no more there: a tail past it, or
 * a kresume before its kbytes, is a lie); its kernel stream carries, after
 * its kbytes, its wake-ups up to kresume, then data again. Ours follow. */
bool zp_rx_back(struct zsock *z)
{
	if (atomic_load_explicit(&z->o->rx_kr, memory_order_acquire) != ZP_UNLATCHED)
		return true;
	uint64_t kb = zp_rx_switch(z);
	if (kb == ZP_UNLATCHED ||
	    atomic_load_explicit(&z->rx->state, memory_order_acquire) != ZP_BACK)
		return false;
	uint64_t bt = atomic_load_explicit(&z->rx->back_tail, memory_order_relaxed);
	uint64_t kr = atomic_load_explicit(&z->rx->kresume, memory_order_relaxed);
	uint64_t h = atomic_load_explicit(&z->rx->head, memory_order_acquire);
	if (kr < kb || kr == ZP_UNLATCHED || bt - h > z->size) {
		zp_lie(z, "its way back");
		return false;
	}
	uint64_t none = ZP_UNLATCHED;
	atomic_compare_exchange_strong(&z->o->rx_bt, &none, bt);
	none = ZP_UNLATCHED;
	atomic_compare_exchange_strong(&z->o->rx_kr, &none, kr);
	atomic_store(&z->o->peer_back, true);
	return true;
}

/* Its wake-ups on the kernel stream before its data resumes, still to come */
uint64_t zp_wakes_due(struct zsock *z)
{
	uint64_t kb = atomic_load(&z->o->rx_kb), kr = atomic_load(&z->o->rx_kr);
	uint64_t w = atomic_load(&z->o->rx_w);
	return kr - kb > w ? kr - kb - w : 0;
}

/* Consume the peer's wake-ups up to its kresume (without waiting: they
 * were sent before its state said 2, so they are here or on their way). */
void zp_skip_wakes(struct zsock *z)
{
	char b[256];
	for (uint64_t due; (due = zp_wakes_due(z));) {
		ssize_t r = zp_real.recv(z->fd, b, due < sizeof(b) ? due : sizeof(b), MSG_DONTWAIT);
		if (r <= 0)
			return;
		atomic_fetch_add(&z->o->rx_w, (uint64_t)r);
	}
}

/*
 * Where the input is: on the kernel stream (true; *left bytes of it, the
 * peer's kbytes not yet read, or UINT64_MAX before its switch and after
 * its way back), or in the ring (false).
 */
bool zp_rx_left(struct zsock *z, uint64_t *left)
{
	uint64_t kb = zp_rx_switch(z);
	if (kb == ZP_UNLATCHED) {
		*left = UINT64_MAX;
		return true;
	}
	uint64_t k = atomic_load_explicit(&z->o->rx_k, memory_order_relaxed);
	*left = kb > k ? kb - k : 0;
	if (*left > 0)
		return true;
	if (!zp_rx_back(z) ||
	    atomic_load_explicit(&z->rx->head, memory_order_relaxed) != atomic_load(&z->o->rx_bt))
		return false;
	zp_skip_wakes(z);
	if (zp_wakes_due(z))
		return false; /* (nothing in the ring either: look again later) */
	*left = UINT64_MAX;
	zp_back_done(z);
	return true;
}

/* The peer's end of stream (closed), read once with the tail it ended at. */
bool zp_peer_closed(struct zsock *z)
{
	if (atomic_load_explicit(&z->o->closed_seen, memory_order_acquire))
		return true;
	if (!zp_trusted(z) || !atomic_load_explicit(&z->rx->closed, memory_order_acquire))
		return false;
	uint64_t none = ZP_UNLATCHED;
	atomic_compare_exchange_strong(&z->o->closed_tail, &none,
				       atomic_load_explicit(&z->rx->tail, memory_order_acquire));
	atomic_store_explicit(&z->o->closed_seen, true, memory_order_release);
	return true;
}

/* Bytes in the ring, or -1: the peer broke the ring (the connection is
 * reset then). */
int64_t zp_rx_avail(struct zsock *z)
{
	if (!zp_trusted(z))
		return 0;
	/* Another thread of ours may consume meanwhile (a readiness check
	 * beside a read): only a tail read while head stood still proves a
	 * lie; an honest tail is never more than a ring ahead of any head. */
	uint64_t h, t;
	int tries = 0;
	do {
		h = atomic_load_explicit(&z->rx->head, memory_order_acquire);
		t = atomic_load_explicit(&z->rx->tail, memory_order_acquire);
	} while (h != atomic_load_explicit(&z->rx->head, memory_order_acquire) && ++tries < 16);
	if (t - h > z->size) {
		if (tries == 16)
			return 0; /* no still view: nothing for this look */
		zp_lie(z, "its ring's tail");
		return -1;
	}
	if (atomic_load_explicit(&z->o->closed_seen, memory_order_acquire) &&
	    t != atomic_load_explicit(&z->o->closed_tail, memory_order_relaxed)) {
		zp_lie(z, "bytes after its end of stream");
		return -1;
	}
	uint64_t bt = atomic_load_explicit(&z->o->rx_bt, memory_order_acquire);
	if (bt != ZP_UNLATCHED && t != bt) {
		zp_lie(z, "bytes in its ring after its way back");
		return -1;
	}
	return (int64_t)(t - h);
}

int64_t zp_tx_free(struct zsock *z)
{
	/* the same with our tail, which another thread of ours may move */
	uint64_t h, t;
	int tries = 0;
	do {
		t = atomic_load_explicit(&z->tx->tail, memory_order_acquire);
		h = atomic_load_explicit(&z->tx->head, memory_order_acquire);
	} while (t != atomic_load_explicit(&z->tx->tail, memory_order_acquire) && ++tries < 16);
	if (t - h > z->size) {
		if (tries == 16)
			return 0; /* no still view: no room for this look */
		zp_lie(z, "its ring's head");
		return -1;
	}
	return (int64_t)(z->size - (t - h));
}
