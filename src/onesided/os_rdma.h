/* SPDX-License-Identifier: MIT */
/* The one-sided store's rdma:// access method (rdma.c). */
#ifndef ZL_OS_RDMA_H
#define ZL_OS_RDMA_H

#include "internal.h"
#include "table.h"
#include "zipline_kv.h"

enum { OS_RM_CAS = 0 };

#define OS_CAS_MAX (OS_LANES + 1) /* compare-and-swaps in flight */

struct os_rdma {
	zl_channel *ch;
	const struct zl_onesided_ops *ops;
	struct zl_rwin win; /* the server's chunk */
	struct zl_rmem *m[6];
	const uint8_t *lo[6], *hi[6];
	int n;
	uint64_t *cas_buf;              /* OS_CAS_MAX results */
	uint64_t *cas_out[OS_CAS_MAX];  /* where each goes at the sync */
	int ncas;
	uint8_t *stage;  /* where a SET builds its container */
	uint8_t *lstage; /* OS_LANES of OS_LSTAGE: a batch's small SETs */
};

/* Register t's buffers on ch's device and make t use rdma through the
 * window (raddr, rkey) over its chunk. 0, -EPROTONOSUPPORT (ch has no
 * one-sided access, or the chunk is over 4 GiB), -ENOMEM. Close with
 * os_rdma_close (also after a failed open). */
int os_rdma_open(struct os_rdma *r, zl_channel *ch, struct os_table *t, uint64_t raddr,
		 uint32_t rkey);
void os_rdma_close(struct os_rdma *r);

#endif
