/* SPDX-License-Identifier: MIT */
/*
 * A channel made of two rings, one per direction, over any transport that
 * can place bytes in the peer's ring (shm today, RDMA next). This layer owns
 * the wait policy (spin, then sleep until woken), wakeups, fragmentation,
 * the zero-copy calls and failure handling; the transport supplies the
 * ring primitives (see ring.h) and the link operations below.
 *
 * Wakeup protocol (an eventcount, both directions alike): a side about to
 * sleep sets a flag the other side can read locally ("arm"), issues a full
 * fence, and checks once more before sleeping. The other side, after making
 * progress visible (a record, or a new read position), fences and checks
 * the flag; if set, it clears it and wakes the sleeper through the link.
 * The two fences make it impossible for both to miss each other (see the
 * top of ringchan.c for which fences, and when they are cheap). A link
 * whose records wake a sleeping receiver by themselves (rx_self_wake: rdma
 * split, where each record completes on the receive CQ) arms RX without
 * telling the peer.
 *
 * The receiver publishes its read position every publish_every bytes,
 * before it sleeps or returns -EAGAIN from a poll, and on demand: a sender
 * short of room raises its flag when it starts waiting, and a receiver that
 * sees the flag (while it spins for data, or after consuming) publishes,
 * and wakes the sender if the flag says it sleeps. So a spinning ping-pong
 * pays for no read-position updates, and a spinning pair never starves.
 * Where the link can say "demand only" (shm), a sender that has not yet
 * given up spinning costs neither side a fence or a system call: a
 * membarrier per full ring cost a 4 KiB stream a quarter of its rate.
 */
#ifndef ZL_RINGCHAN_H
#define ZL_RINGCHAN_H

#include "internal.h"
#include "ring.h"

enum zl_dir { ZL_DIR_RX = 0, ZL_DIR_TX = 1 };

/* The peer's TX flag: it sleeps waiting for room (any other non-zero
 * value), or only wants our read position while it spins. */
#define ZL_TX_DEMAND 2u

struct zl_ringchan;

struct zl_ring_link_ops {
	const char *name;
	/* A NIC, not a CPU, writes the receive ring: poll it without PAUSE (as
	 * perftest does). PAUSE only eases a CPU writer's access to the line;
	 * in a TCG guest it leaves translated code on every poll. */
	bool poll_hard;
	/* Set the flag that tells the peer this side sleeps waiting for data
	 * (RX) or for room (TX). 0 or -errno. */
	int (*arm)(struct zl_ringchan *rc, enum zl_dir d);
	/* Every record wakes a sleeping receiver by itself, and so does the
	 * peer's TX arm (rdma split: both complete on the receive CQ). An RX
	 * arm then tells the peer nothing, and a receiver about to sleep owes
	 * its read position only when the peer's TX flag asks for it. */
	bool rx_self_wake;
	/* Optional: ask the peer for its read position while this side only
	 * spins (ZL_TX_DEMAND in the flag the TX arm sets): the peer publishes
	 * and does not wake us. Without it a sender short of room arms. */
	void (*demand)(struct zl_ringchan *rc);
	/* Wake the peer's receiver (RX) or its sender waiting for room (TX). */
	int (*wake)(struct zl_ringchan *rc, enum zl_dir d);
	/* Sleep until woken, the peer goes away, or the deadline (absolute
	 * zl_now_us time, ZL_NEVER for none). 0 (woken or timed out) or
	 * -ECONNRESET (peer gone). Consumes the wakeup. */
	int (*sleep)(struct zl_ringchan *rc, enum zl_dir d, int64_t deadline);
	/* Without blocking: 0 if the peer looks alive, else -ECONNRESET. */
	int (*alive)(struct zl_ringchan *rc);
	/* Optional: called before every look at the receive ring, for
	 * transports whose records are announced by completions. */
	void (*progress)(struct zl_ringchan *rc);
	/* Optional (zl_sendv): from batch_begin on, hold the records' pushes,
	 * and post them together at batch_end (0 or -errno; the channel then
	 * fails). Only the sending thread pushes in between. */
	void (*batch_begin)(struct zl_ringchan *rc);
	int (*batch_end)(struct zl_ringchan *rc);
	/* Optional: the transport's own counters (zl_channel_info). */
	void (*info)(const struct zl_ringchan *rc, struct zl_channel_info *info);
	/* Drain pending RX wakeups without blocking (fd mode). 0, or
	 * -ECONNRESET when the drain saw that the peer is gone. */
	int (*drain)(struct zl_ringchan *rc);
	/* The fd for zl_channel_fd (created on first call) or -errno. */
	int (*fd)(struct zl_ringchan *rc);
	/* The socket whose end its sleep and alive see (zl_shutdown), or -1. */
	int (*sock)(struct zl_ringchan *rc);
	/* Release the transport's resources and free rc. */
	void (*destroy)(struct zl_ringchan *rc);
};

struct zl_ringchan {
	struct zl_channel base;
	const struct zl_ring_link_ops *link;
	struct zl_ring_tx tx;
	struct zl_ring_rx rx;
	/* Flags in memory this side reads locally: the peer's receiver sleeps
	 * (we wake it after a send), the peer's sender waits for room (we wake
	 * it after publishing our read position). */
	_Atomic uint32_t *peer_rx_sleeping;
	_Atomic uint32_t *peer_tx_sleeping;
	/* Symmetric fences on request (optional, with asym; see ringchan.c):
	 * our request, which the peer reads, and its answer; the peer's
	 * request, and our answer. */
	_Atomic uint32_t *sym_req, *sym_ack, *peer_sym_req, *peer_sym_ack;
	bool tx_sym;            /* we fence every send: the peer asked */
	bool rx_sym;            /* the peer fences every send: our arms may too */
	void (*publish_rpos)(struct zl_ringchan *rc, uint64_t rpos);
	/* Optional: publish rpos from the sending thread, never moving the
	 * published position back (shm: a CAS; see serve_rpos_from_tx). */
	void (*publish_rpos_max)(struct zl_ringchan *rc, uint64_t rpos);

	struct zl_opts opts;    /* opts.max_msg: the largest message we accept */
	uint64_t send_max;      /* the largest the peer accepts (its max_msg) */
	uint32_t max_frag;      /* payload bytes per fragment */
	_Atomic int err;        /* sticky failure, 0 while healthy */
	_Atomic bool peer_closed; /* CLOSE record seen or peer gone */
	bool fd_mode;           /* zl_channel_fd was called */
	bool manual_arm;        /* the owner arms (the arm op): empty polls do not */
	bool rx_armed;          /* armed for RX since the last drain */
	bool rpos_answered;     /* our last read position woke the sender */
	bool rx_pokes;          /* the owner arms for pokes (settle): an RX arm
				 * must reach the peer even with rx_self_wake,
				 * one-sided writes complete nowhere here */
	bool asym;              /* both ends registered for membarrier(2) */
	bool peeked;            /* a zl_recv_peek is open */
	const uint8_t *rec_p;   /* the record rx_ready found */
	uint32_t rec_n;
	uint8_t rec_t;
	uint32_t peek_len;
	uint32_t ops_since_check;
	uint32_t clock_first, clock_every; /* spin polls before/between clock reads */

	/* Rest of a fragmented message accepted by zl_send. The receiving
	 * thread pushes it too (so a caller waiting for a reply cannot
	 * deadlock), under tx_lock, and only while pend_active: the sending
	 * thread takes the lock only when it finds pend_active set, so the
	 * ordinary send path stays lock-free. */
	atomic_flag tx_lock;
	_Atomic bool pend_active;
	uint8_t *pend;
	size_t pend_len, pend_off;
	/* partial fragmented message kept across a receive timeout */
	uint8_t *asm_buf;
	size_t asm_total, asm_got;
	bool asm_active;

	struct zl_channel_info stats;
	/* counters the receive side keeps (stats holds the send side's) */
	uint64_t rx_wakeups_sent, rx_sleeps, rx_fences, rx_arms;
	_Atomic uint64_t syscalls; /* the link counts its system calls (zl_rc_syscall) */
};

/* Set up rc after the transport filled link, tx, rx, the flag pointers and
 * publish_rpos; the ring's publish callback is routed through the core so
 * that it can wake a sender waiting for room. peer_max_msg: what the peer
 * said it accepts (0: as much as we do). */
void zl_ringchan_init(struct zl_ringchan *rc, const struct zl_opts *o, uint64_t peer_max_msg,
		      const char *transport);

/* Free the core's buffers (called by the transport's destroy). */
void zl_ringchan_fini(struct zl_ringchan *rc);

extern const struct zl_chan_ops zl_ringchan_ops;

/* RX waits on this channel are woken by the records themselves (see
 * rx_self_wake), unless the owner arms for one-sided pokes. */
static inline bool zl_rc_self_woken(const struct zl_ringchan *rc)
{
	return rc->link->rx_self_wake && !rc->rx_pokes;
}

/* Count n system calls made for rc (any thread). */
static inline void zl_rc_syscall(struct zl_ringchan *rc, uint64_t n)
{
	atomic_fetch_add_explicit(&rc->syscalls, n, memory_order_relaxed);
}

/* Register this process for membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED);
 * true if the kernel supports it (once per process, thread-safe). */
bool zl_membarrier_register(void);
/* Full barrier on every CPU running a registered process; 0 or -errno. */
int zl_membarrier_global(void);

#endif
