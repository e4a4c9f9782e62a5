/* SPDX-License-Identifier: MIT */
/* The one-sided store's rdma:// access method (rdma.c). */
#ifndef ZL_OS_RDMA_H
#define ZL_OS_RDMA_H

#include "internal.h"
#include "table.h"
#include "zipline_kv.h"

enum { OS_RM_CAS = 0 };

struct os_rdma {
	zl_channel *ch;
	const struct zl_onesided_ops *ops;
	struct zl_rwin win; /* the server's chunk */
	struct zl_rmem *m[5];
	const uint8_t *lo[5], *hi[5];
	int n;
	uint64_t *cas_buf, *cas_out;
	uint8_t *stage; /* where a SET builds its container */
};

/* Register t's buffers on ch's device and make t use rdma through the
 * window (raddr, rkey) over its chunk. 0, -EPROTONOSUPPORT (ch has no
 * one-sided access, or the chunk is over 4 GiB), -ENOMEM. Close with
 * os_rdma_close (also after a failed open). */
int os_rdma_open(struct os_rdma *r, zl_channel *ch, struct os_table *t, uint64_t raddr,
		 uint32_t rkey);
void os_rdma_close(struct os_rdma *r);

#endif
