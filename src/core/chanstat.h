/* SPDX-License-Identifier: MIT */
/* A channel's messages and bytes each way, for its slot of the status page
 * (status.h): counted by each side's own thread in the channel, copied to
 * the page every ZL_STATUS_CHAN_EVERY messages and when a call returns
 * without one, so that a message costs two additions and a test. */
#ifndef ZL_CHANSTAT_H
#define ZL_CHANSTAT_H

#include "internal.h"
#include "status.h"

void zl_chanstat_open(zl_channel *ch, const char *url); /* a slot for it */
void zl_chanstat_close(zl_channel *ch);
void zl_chanstat_pub(zl_channel *ch, bool tx); /* copy one side's counts */

static inline void zl_chanstat_tx(zl_channel *ch, int r, uint64_t msgs, uint64_t bytes)
{
	if (__builtin_expect(!ch->st_idx, 0))
		return;
	ch->st_tx_msgs += msgs;
	ch->st_tx_bytes += bytes;
	if (__builtin_expect((r < 0 || msgs == 0 ||
			      ch->st_tx_msgs - ch->st_tx_pub >= ZL_STATUS_CHAN_EVERY) &&
				     ch->st_tx_msgs != ch->st_tx_pub, 0))
		zl_chanstat_pub(ch, true);
}

static inline void zl_chanstat_rx(zl_channel *ch, int r, uint64_t msgs, uint64_t bytes)
{
	if (__builtin_expect(!ch->st_idx, 0))
		return;
	ch->st_rx_msgs += msgs;
	ch->st_rx_bytes += bytes;
	if (__builtin_expect((r < 0 || msgs == 0 ||
			      ch->st_rx_msgs - ch->st_rx_pub >= ZL_STATUS_CHAN_EVERY) &&
				     ch->st_rx_msgs != ch->st_rx_pub, 0))
		zl_chanstat_pub(ch, false);
}

#endif
