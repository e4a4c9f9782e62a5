/* SPDX-License-Identifier: MIT */
/*
 * The N:1 server's wire formats (zl_server / zl_client).
 *
 * Setup, after the transport's own handshake:
 *   client -> server  srv_hello, as the first channel message
 *   server -> client  srv_welcome: on shm over the rendezvous socket with
 *                     two fds (flag array memfd, the client's page memfd);
 *                     elsewhere as a channel message.
 *
 * On rdma the welcome is a channel message carrying two memory windows
 * bound to the client's queue pair: its K slots (in server memory) and its
 * K flags (in the server's contiguous rdma flag array).
 *
 * A request is a srv_hdr and len bytes. On shm it sits in one of the
 * client's slots (in its page) and its mailbox flag announces it; on rdma
 * the client WRITEs the slot, then (a separate WRITE, which RC executes
 * after the first) the flag. A request larger than a slot travels as a
 * channel message (header + body) and its slot carries the same header
 * with SRV_F_CHAN as a doorbell. On tcp and unix every request is a
 * channel message.
 * A reply is a srv_rep and the reply bytes, always a channel message.
 *
 * The shm client page: a control line (srv_sleeping: set by the server
 * before it sleeps, so the client must wake it through its doorbell, a
 * wake-up record on the channel's socket), then K slots of slot_size
 * bytes. Only this client and the server map it. No fd the server blocks
 * on is ever passed to a client (a passed fd shares its file status flags).
 */
#ifndef ZL_SRV_WIRE_H
#define ZL_SRV_WIRE_H

#include <stdatomic.h>
#include <stdint.h>

#define SRV_MAGIC 0x56535a4cu /* "LZSV" */
#define SRV_VERSION 3
#define SRV_MAX_SLOTS 64

struct srv_hello {
	uint32_t magic;
	uint16_t version;
	uint16_t size;
	uint32_t flags; /* SRV_F_MEMBARRIER */
	uint32_t reserved;
};

/* This process is registered for membarrier(2) (see ringchan.c). */
#define SRV_F_MEMBARRIER 1u
/* welcome: requests go into the mailbox (shm); two fds came along */
#define SRV_F_MBOX 2u
/* welcome: requests go into the mailbox by RDMA WRITE (the two windows) */
#define SRV_F_RMBOX 4u

/* A memory window the client may WRITE (rdma). */
struct srv_rwin {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};

struct srv_welcome {
	uint32_t magic;
	uint16_t version;
	uint16_t size;
	int32_t status;     /* 0, or -errno: why the server refuses */
	uint32_t flags;     /* SRV_F_* */
	uint32_t slots;     /* K */
	uint32_t slot_size; /* bytes per slot, header included */
	uint64_t max_req;
	uint64_t client_id;
	uint32_t flag_base; /* index of this client's first flag */
	uint32_t flags_len; /* size of the flag array memfd */
	uint32_t page_len;  /* size of this client's page memfd */
	uint32_t reserved;
	struct srv_rwin slots_win; /* rdma: K * slot_size bytes */
	struct srv_rwin flags_win; /* rdma: K bytes */
};

/* Request header, in a slot or in front of a channel message. */
struct srv_hdr {
	_Atomic uint32_t seq; /* per slot, 1, 2, ...; written last (release) */
	uint8_t type;         /* 1..255 */
	uint8_t flags;        /* SRV_F_CHAN */
	uint16_t slot;
	uint32_t len;         /* request bytes after the header */
	uint32_t reserved;
};
#define SRV_F_CHAN 1u /* slot: the request comes as a channel message */

/* Reply header, in front of every reply message. */
struct srv_rep {
	uint32_t seq;
	uint16_t slot;
	uint16_t reserved;
	int32_t status; /* 0 or -errno */
	uint32_t reserved2;
};

#define SRV_CTL_SIZE 64u

struct srv_page_ctl {
	_Atomic uint32_t srv_sleeping;
};

static inline uint64_t srv_round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static inline uint32_t srv_page_len(uint32_t slots, uint32_t slot_size)
{
	return (uint32_t)srv_round_up(SRV_CTL_SIZE + (uint64_t)slots * slot_size, 4096);
}

#endif
