/* SPDX-License-Identifier: MIT */
/*
 * A process's status page: what `zl-ss` lists (docs/man/zl-ss.1).
 *
 * Each user of it (the preload, the library: each has its own copy of
 * status.c and so its own page) keeps one memfd named ZL_STATUS_NAME,
 * sealed at its size, with a header and fixed-size slots. The process
 * writes it only when something changes (a connection made, refused,
 * closed; a server's counters, at most every ZL_STATUS_EVERY_US), never on
 * a message's path. zl-ss finds it through /proc/PID/fd, which the kernel
 * opens only for the process's own uid (or root): the page shows nothing
 * that /proc does not already show to them.
 *
 * A slot is written under a sequence count (odd while written, as a
 * seqlock): a reader copies it and keeps the copy only if the count was
 * even and unchanged around the copy.
 *
 * Threat model: the page is written by its process; any same-uid process
 * could write it too (through /proc/PID/fd). Its process never reads it
 * back (status.c keeps what it needs in its own memory), so such a writer
 * changes only what zl-ss shows;
 * zl-ss takes nothing in it on trust (sizes, seals, strings, indexes are
 * checked) and a page that fails a check is skipped.
 */
#ifndef ZL_STATUS_H
#define ZL_STATUS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define ZL_STATUS_NAME "zipline-status"
#define ZL_STATUS_MAGIC 0x54534c5au /* "ZLST" */
#define ZL_STATUS_VERSION 1
#define ZL_STATUS_SLOTS 65536 /* the preload's are indexed by fd: fds past
			       * them are not listed */
#define ZL_STATUS_EVERY_US 100000

enum zl_status_role { ZL_STATUS_PRELOAD = 1, ZL_STATUS_LIBRARY = 2 };

enum zl_status_type {
	ZL_ST_FREE = 0,
	ZL_ST_SOCKET = 1,  /* a preloaded stream socket (the slot of its fd) */
	ZL_ST_SERVER = 2,  /* a zl_server: ctr[] as enum zl_status_server_ctr */
	ZL_ST_CHANNEL = 3, /* a zl_channel of zl_connect or zl_accept: ctr[] as
			    * enum zl_status_chan_ctr, name[] its URL */
};

/* a preloaded socket's path */
enum zl_status_state {
	ZL_SS_PENDING = 1, /* offered, the other end not proven yet */
	ZL_SS_RING = 2,    /* shared-memory rings (their memfd at mem_fd) */
	ZL_SS_RDMA = 3,    /* an rdma channel to another host */
	ZL_SS_KERNEL = 4,  /* stays a kernel socket: why[] says why */
};

/* as struct zl_server_info's: clients, clients_total, clients_dropped,
 * requests, rejected, spurious, recovered, handshakes_failed */
enum zl_status_server_ctr {
	ZL_SC_CLIENTS, ZL_SC_ACCEPTED, ZL_SC_DROPPED, ZL_SC_REQUESTS, ZL_SC_REJECTED,
	ZL_SC_SPURIOUS, ZL_SC_RECOVERED, ZL_SC_HS_FAILED, ZL_SC_N
};

enum zl_status_chan_ctr {
	ZL_CC_MSGS_SENT, ZL_CC_BYTES_SENT, ZL_CC_MSGS_RECV, ZL_CC_BYTES_RECV, ZL_CC_N
};
#define ZL_STATUS_CHAN_EVERY 1024 /* messages of a side between copies */

struct zl_status_hdr {
	uint32_t magic, version;
	uint32_t hdr_size, slot_size, nslots;
	int32_t pid;                  /* the process the page is of */
	uint32_t role;                /* enum zl_status_role */
	_Atomic uint32_t hi;          /* slots [0, hi) may be in use */
	char pad[128 - 32];
};

struct zl_status_slot {
	_Atomic uint32_t seq;         /* even: stable; odd: being written */
	_Atomic uint16_t type;        /* enum zl_status_type: taken and freed by
				       * any thread (status.c) */
	uint16_t state;               /* enum zl_status_state */
	int32_t fd;                   /* ZL_ST_SOCKET: the fd (= the slot) */
	int32_t mem_fd;               /* ZL_SS_RING: the rings' memfd, else -1 */
	int32_t own_fd;               /* ZL_SS_RING: the side's own page, else -1 */
	uint8_t side;                 /* 0 client, 1 server */
	uint8_t pad0[3];
	uint64_t ino;                 /* the socket's inode when written */
	char why[80];                 /* ZL_SS_KERNEL: why; NUL-terminated */
	char name[80];                /* ZL_ST_SERVER: its URL; NUL-terminated */
	_Atomic uint64_t ctr[8];
};
_Static_assert(sizeof(struct zl_status_hdr) == 128, "status header");
_Static_assert(sizeof(struct zl_status_slot) == 256, "status slot");

/* ---- the writer (status.c) ---------------------------------------------- */

/* Each copy of status.c writes one page, of role ZL_STATUS_ROLE (a
 * compile definition: the library's unless said). */
#ifndef ZL_STATUS_ROLE
#define ZL_STATUS_ROLE ZL_STATUS_LIBRARY
#endif
/* Slot i of the page (made at the first call), or NULL: ZL_STATUS=0, no
 * memory, i out of range. */
struct zl_status_slot *zl_status_slot(int i);
/* A free slot taken for `type` (its index), or -1 */
int zl_status_take(uint16_t type);
/* A slot's write: begin, its fields (its type through zl_status_type),
 * end. Writes of all slots take one lock: none is on a message's path. */
void zl_status_begin(struct zl_status_slot *s);
void zl_status_type(struct zl_status_slot *s, uint16_t type);
void zl_status_end(struct zl_status_slot *s);
/* slot i free again (a socket closed); no lock when it is free already */
void zl_status_clear(int i);
/* fork: the child gets its own page, a copy of the parent's */
void zl_status_atfork_child(void);
/* copy src (at most cap - 1 bytes) into dst, NUL-terminated */
void zl_status_str(char *dst, size_t cap, const char *src);

#endif
