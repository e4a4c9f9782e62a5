/* SPDX-License-Identifier: MIT */
/*
 * wait.h - what poll/select (wait.c) and epoll (epoll.c) share: a switched
 * socket's events merged with its kernel side, the spin before a sleep,
 * and when a wait asks the kernel at all.
 */
#ifndef ZL_PRELOAD_WAIT_H
#define ZL_PRELOAD_WAIT_H

#include <stdbool.h>
#include <stdint.h>

#include "preload.h"

/*
 * While switched sockets are ready from the rings, a wait returns them
 * without asking the kernel (no system call per message) if the kernel's
 * last answer for the same set, less than KLOOK_US ago, had nothing for
 * it: no kernel fd ready and nothing on the kernel side of a switched
 * socket but wake-ups (a dead peer's FIN, a reset). A kernel fd that turns
 * ready after that answer is reported at most KLOOK_US late, as if it had
 * turned ready then; one that was ready is looked at again at every call,
 * as level-triggered waits report it.
 */
#define KLOOK_US 200

struct klook {
	int64_t at;   /* the kernel's last answer */
	uint64_t sig; /* for the set (poll: its fds and events) */
	bool quiet;   /* it had nothing for the set */
};

/* the kernel need not be asked for this set (sig) now */
bool zp_klook_skip(const struct klook *l, uint64_t sig);
/* nothing from the kernel in revents kr of a (switched) fd */
bool zp_kquiet(bool switched, uint32_t kr);

/* A wait for room in a full ring looks at least this often for our own
 * shutdown(SHUT_WR) from another thread: no byte on the kernel socket
 * tells it (the kernel's waiters wake, and a send fails with EPIPE). */
#define WAIT_OUT_MS 10

bool zp_full_for(struct zsock *z, short events);  /* waits for room in its ring */
short zp_kernel_events(struct zsock *z, short want); /* to ask the kernel for */
bool zp_kernel_blind(struct zsock *z);   /* the kernel cannot tell its input */
/* its events after the kernel reported krev (*kin: input on the kernel
 * stream) */
short zp_merged(struct zsock *z, short want, short krev, bool *kin);
short zp_ready_now(struct zsock *z, short want, bool *kin); /* its events now */
bool zp_ring_only(struct zsock *z); /* its state is all in the rings */
/* spin until ready(arg), within the thread's budget and deadline */
bool zp_spin(int64_t deadline, bool (*ready)(void *), void *arg);
void zp_slept(int64_t t0); /* a sleep that began at t0 ended: adapt the spin */

#endif
