/* SPDX-License-Identifier: MIT */
/* UCX active messages for zl-bench blocks (ucx.c). */
#ifndef ZLB_UCX_H
#define ZLB_UCX_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "zl-bench.h"

#define UCX_XCHG_MAX 4000
#define UCX_XCHG_FAILED UINT32_MAX

/* In memory both processes share: each side's UCP worker address. len 0:
 * not yet; UCX_XCHG_FAILED: that side has no UCX. */
struct ucx_xchg {
	_Atomic uint32_t len[2];
	uint8_t addr[2][UCX_XCHG_MAX];
};

struct zlb_ucx;

/* side 0 = client, 1 = server; both call it. 0, or -1 (reason printed;
 * the other side then fails too). */
int ucx_open(struct zlb_ucx **u, struct ucx_xchg *x, int side, size_t size);
/* One round trip with q in the first 8 bytes: 0, -1 (error or 1 s without
 * progress), or 1 (the answer is wrong). */
int ucx_ping(struct zlb_ucx *u, const void *msg, size_t size, uint64_t q);
/* Answer one message with one of the same size. 0 or -1. */
int ucx_pong(struct zlb_ucx *u);
void ucx_close(struct zlb_ucx *u);

#endif
