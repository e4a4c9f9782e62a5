/* SPDX-License-Identifier: MIT */
/* The rdma:// handshake, sent both ways over the TCP side channel in host
 * byte order (both ends must share it: the magic catches a mismatch). */
#ifndef ZL_VERBS_WIRE_H
#define ZL_VERBS_WIRE_H

#include <stdint.h>

#define RD_MAGIC 0x44524c5au /* "ZLRD" */
/* After the infos, each side sends one word: RD_MAGIC once its queue pair
 * is ready to receive, or RD_NAK | errno when it refuses the other's info
 * (so that both sides return the same error). */
#define RD_NAK 0x4e4b0000u

/* Not wire format but shared with verbs_test, which checks the counts: one
 * send work request in this many is signaled (to reclaim send-queue slots;
 * the rest complete silently). */
#define ZL_RD_SIGNAL_EVERY 32

/* In rd_info.mode: my receiver counts several records per immediate
 * (split: zl_sendv's adjacent records in one WRITE_WITH_IMM). A peer
 * without it is written one record per immediate; a release that predates
 * the bit refuses it in the handshake (mode out of range), never silently. */
#define RD_MODE_NIMM 0x80

struct rd_info {
	uint32_t magic;
	uint16_t version;
	uint16_t info_size;
	int32_t status;
	uint32_t qpn, psn;
	uint16_t lid;
	uint8_t mtu, mode; /* enum rd_mode: how the peer must write into my ring,
	                      | RD_MODE_NIMM */
	uint8_t gid[16];
	uint64_t ring_addr;
	uint32_t ring_rkey, ring_size;
	uint64_t ctl_addr;
	uint32_t ctl_rkey, max_inline;
	uint64_t key, max_msg;
};

#endif
