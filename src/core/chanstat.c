/* SPDX-License-Identifier: MIT */
/* A channel's slot of the status page (chanstat.h). */
#include "chanstat.h"

#include <string.h>

void zl_chanstat_open(zl_channel *ch, const char *url)
{
	int i = zl_status_take(ZL_ST_CHANNEL);
	struct zl_status_slot *s = zl_status_slot(i);
	if (!s)
		return;
	char name[sizeof(s->name)];
	zl_status_str(name, sizeof(name), url);
	char *q = strchr(name, '?'); /* (its options are not its name) */
	if (q)
		*q = '\0';
	zl_status_begin(s);
	zl_status_str(s->name, sizeof(s->name), name);
	zl_status_end(s);
	ch->st_idx = i + 1;
}

void zl_chanstat_close(zl_channel *ch)
{
	if (ch->st_idx)
		zl_status_clear(ch->st_idx - 1);
	ch->st_idx = 0;
}

/* (each counter has one writer, the side's thread: no sequence count) */
void zl_chanstat_pub(zl_channel *ch, bool tx)
{
	struct zl_status_slot *s = zl_status_slot(ch->st_idx - 1);
	if (!s) { /* (no page in a fork child: no more looks) */
		ch->st_idx = 0;
		return;
	}
	if (tx) {
		atomic_store_explicit(&s->ctr[ZL_CC_MSGS_SENT], ch->st_tx_msgs, memory_order_relaxed);
		atomic_store_explicit(&s->ctr[ZL_CC_BYTES_SENT], ch->st_tx_bytes, memory_order_relaxed);
		ch->st_tx_pub = ch->st_tx_msgs;
	} else {
		atomic_store_explicit(&s->ctr[ZL_CC_MSGS_RECV], ch->st_rx_msgs, memory_order_relaxed);
		atomic_store_explicit(&s->ctr[ZL_CC_BYTES_RECV], ch->st_rx_bytes, memory_order_relaxed);
		ch->st_rx_pub = ch->st_rx_msgs;
	}
}
