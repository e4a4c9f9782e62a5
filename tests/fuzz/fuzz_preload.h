/* SPDX-License-Identifier: MIT */
/* The preload's fuzz targets (fuzz_preload_wire.c, fuzz_preload_ring.c):
 * their input formats, shared with the seed generator. */
#ifndef ZL_FUZZ_PRELOAD_H
#define ZL_FUZZ_PRELOAD_H

/* fuzz_preload_wire: [magic: 0 hello, 1 answer][want_fds][msg_flags: 1
 * MSG_TRUNC, 2 MSG_CTRUNC][data length, 2 bytes LE][data][control bytes] */

/* fuzz_preload_ring: [side 0 client (proven) | 1 server][is_unix], then
 * operations until the input ends, each an opcode byte and its bytes: */
enum {
	OP_POKE32,  /* offset 2 LE (in the header page), value 4 LE: the peer
		     * stores anything in the shared header */
	OP_POKE64,  /* offset 2, value 8 */
	OP_RING,    /* position 2, length 1, bytes: into the peer's ring */
	OP_KERNEL,  /* length 1, bytes: on the kernel stream (data, wake-ups) */
	OP_RECV,    /* length 2, flags 1 (bit 0 MSG_PEEK, 1 MSG_WAITALL) */
	OP_READV,   /* three iovecs of length 1 each */
	OP_SEND,    /* length 2 */
	OP_READY,   /* poll events 1 */
	OP_FIONREAD,
	OP_PEER_END, /* 1: 0 shut its writes, 1 close */
	OP_SHUTDOWN, /* how 1 */
	OP_DRAIN,
	OP_COUNT
};

void fuzz_preload_init(void);

#endif
