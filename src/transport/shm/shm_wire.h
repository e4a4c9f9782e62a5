/* SPDX-License-Identifier: MIT */
/* The shm:// handshake: one SOCK_SEQPACKET message each way, carrying the
 * sender's receive ring (a sealed memfd) over SCM_RIGHTS. After it, the same
 * socket carries wake-ups: one-byte records, SHM_WAKE_RX or SHM_WAKE_TX. */
#ifndef ZL_SHM_WIRE_H
#define ZL_SHM_WIRE_H

#include <stdint.h>

#define SHM_MAGIC 0x4d534c5au /* "ZLSM" */
/* 2: wake-ups travel on the socket, the hello carries only the memfd
 * (version 1 passed eventfds, whose file status flags the peer shared). */
#define SHM_VERSION 2
#define CTL_SIZE 4096u

struct shm_ctl {
	_Alignas(64) _Atomic uint64_t rpos;       /* owner publishes */
	_Alignas(64) _Atomic uint32_t rx_sleeping; /* owner sets, peer clears */
	/* in rx_sleeping's line, which the sender reads on every send:
	 * symmetric fences (ringchan.c) asked by the owner, granted by the peer */
	_Atomic uint32_t sym_req;                  /* owner sets */
	_Atomic uint32_t sym_ack;                  /* peer sets */
	/* peer sets (1 sleeping, ZL_TX_DEMAND spinning), owner clears */
	_Alignas(64) _Atomic uint32_t tx_sleeping;
};

struct shm_hello {
	uint32_t magic;
	uint16_t version;
	uint16_t hello_size;
	int32_t status;     /* 0, or -errno: why the acceptor refuses */
	uint32_t ring_size; /* of the ring the sender of this hello receives on */
	uint64_t key;
	uint64_t max_msg;
	uint32_t ctl_size;
	uint32_t flags;     /* SHM_F_* */
};

/* This process is registered for membarrier(2), so the peer may skip the
 * fence on its fast path (see fast_fence in ringchan.c). */
#define SHM_F_MEMBARRIER 1u
/* This side pads records to cache lines (zl_ring_rec_bytes). Both rings
 * use line grain when the peer says so too; we always do. */
#define SHM_F_LINES 2u

/* The fds of a hello. */
enum { FD_MEM, NFDS };

/* Wake-up records on the socket: wake the receiver of the side that reads
 * it (data arrived), or its sender (room appeared). */
#define SHM_WAKE_RX 1
#define SHM_WAKE_TX 2

#endif
