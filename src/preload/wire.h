/* SPDX-License-Identifier: MIT */
/*
 * The rendezvous messages of libzipline-preload (rendezvous.c has the
 * protocol and its argument) and their checks. Pure functions over bytes,
 * shared by the preload, its tests and the fuzz targets.
 */
#ifndef ZP_WIRE_H
#define ZP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define ZP_HELLO_MAGIC 0x5a4c5048u  /* "ZLPH": client to server */
#define ZP_ANSWER_MAGIC 0x5a4c5041u /* "ZLPA": server to client */
#define ZP_WIRE_VERSION 3
#define ZP_RING_MIN 4096u
#define ZP_RING_MAX (64u << 20)
#define ZP_WIRE_MAXFDS 8 /* fds one received message may carry at most */

/*
 * One message each way on the rendezvous connection. Everything in it is a
 * claim: the receiver proves the two (fd, inode) pairs against the
 * sender's fd table (zp_holds) before it believes any of it. A hello
 * carries no fd; an answer carries exactly one, the memfd of the rings.
 */
struct zp_wire {
	uint32_t magic;     /* ZP_HELLO_MAGIC or ZP_ANSWER_MAGIC */
	uint32_t version;   /* ZP_WIRE_VERSION */
	uint32_t ring_size; /* bytes per direction: the client's choice */
	int32_t pid;        /* the sender */
	int32_t sock_fd;    /* the sender's end of the program's connection */
	int32_t rdv_fd;     /* the sender's end of this rendezvous connection */
	uint64_t sock_ino;  /* their socket inodes */
	uint64_t rdv_ino;
};

/* A ring size both ends accept: a power of two in [4 KiB, 64 MiB]. */
static inline bool zp_ring_ok(uint64_t ring)
{
	return ring >= ZP_RING_MIN && ring <= ZP_RING_MAX && !(ring & (ring - 1));
}

/*
 * A received message: n bytes of data (recvmsg's result), msg_flags, and the
 * control buffer ctl of ctllen bytes. Every fd the control data holds
 * lands in fds[] (*nfds, at most ZP_WIRE_MAXFDS: the kernel delivered them
 * and the caller must close each, whatever the verdict; a claim of more is
 * malformed). Returns 0 if the message is a well-formed `magic` message
 * carrying exactly want_fds fds, with *out filled in; -1 otherwise.
 */
int zp_wire_parse(const void *buf, ssize_t n, int msg_flags, const void *ctl, size_t ctllen,
		  uint32_t magic, int want_fds, struct zp_wire *out, int *fds, int *nfds);

#endif
