/* SPDX-License-Identifier: MIT */
/* Handshakes side by side: see hs.c. */
#ifndef ZL_HS_H
#define ZL_HS_H

#include <stdbool.h>
#include <stdint.h>

#include "internal.h"

struct zl_hs;

/* What zl_hs_next did:
 *   ch, !err   a channel whose transport handshake is done; held: its
 *              entry stays (id), else it is the caller's
 *   ch, event  a held entry's channel became readable (id)
 *   err        a handshake failed with err; the peer is gone */
struct zl_hs_out {
	zl_channel *ch;
	int err;
	int id;      /* a held entry, or -1 */
	bool fresh;  /* the transport handshake has just completed */
};

/* A table of max entries (1..65536), and its epoll fd. 0, -ENOMEM, -errno. */
int zl_hs_new(unsigned max, bool hold, struct zl_hs **out);
/* Closes every pending connection; not the listeners. */
void zl_hs_free(struct zl_hs *h);
/* Readable when zl_hs_next may have something to do. */
int zl_hs_fd(const struct zl_hs *h);
/* Take l's connections, each bounded by hs_us. 0, -ENOSPC (16 listeners),
 * -errno. */
int zl_hs_watch(struct zl_hs *h, zl_listener *l, int64_t hs_us);
/* Move every entry on as far as it goes without waiting; 1 and *o for the
 * first thing done, 0 when nothing more is. */
int zl_hs_next(struct zl_hs *h, struct zl_hs_out *o);
/* Wait until there may be something to do, or the deadline: 0 or
 * -ETIMEDOUT. */
int zl_hs_wait(struct zl_hs *h, int64_t deadline);
/* A held entry is done: its channel is the caller's (why NULL), or is
 * dropped with the reason logged. */
void zl_hs_release(struct zl_hs *h, int id, const char *why, int err);
/* Handshakes dropped so far: failed, expired, displaced or probes. */
uint64_t zl_hs_dropped(const struct zl_hs *h);

#endif
