/* SPDX-License-Identifier: MIT */
/*
 * The one-sided store's control messages (zl_server RPCs; the data path
 * never reaches the server). Fixed-size little-endian structs; the server
 * takes a request only at its exact size.
 *   HELLO      geometry, session, heartbeat window, and how to map the chunk
 *              (shm: the abstract socket that hands out its memfd)
 *   REGION     release a region (or none) and get a fresh one
 *   HEARTBEAT  keep the regions; report deletes and garbage slots seen
 *   STATS      the server's counters (tools and tests)
 *   BYE        end the session (reply: struct os_hb_rep); its regions are
 *              collected at once
 */
#ifndef ZL_OS_PROTO_H
#define ZL_OS_PROTO_H

#include <stdint.h>

#define OS_MAGIC 0x5a4c4f5331ull /* "ZLOS1" */
#define OS_VERSION 1u
#define OS_NONE UINT32_MAX

enum { OS_HELLO = 1, OS_REGION = 2, OS_HEARTBEAT = 3, OS_STATS = 4, OS_BYE = 5 };

struct os_hello_req {
	uint64_t magic;
	uint32_t version;
	uint32_t pad;
};

struct os_hello_rep {
	uint64_t magic;
	int32_t status;
	uint32_t nregions;
	uint64_t chunk_len, table_off, nslots, data_off, data_len, region_len;
	uint64_t session;      /* this client's writer id (versions) */
	uint64_t hb_window_us; /* regions are lost this long after the last
	                          heartbeat */
	char sock[48];         /* shm: the abstract socket that hands out the
	                          chunk's memfd, NUL-terminated */
	uint32_t load_ppm;     /* occupied slots at the last scan */
	uint32_t rkey;         /* rdma: the chunk's window on this connection */
	uint64_t raddr;        /* rdma: where the chunk starts there */
};

struct os_region_req {
	uint32_t release; /* a region to give back, or OS_NONE */
	uint32_t want;    /* 1: and a fresh one */
};

struct os_region_rep {
	int32_t status; /* 0, -ENOSPC (none free), -EDQUOT (holds its
	                   maximum), -ENOENT (unknown session: HELLO again) */
	uint32_t region;
	uint64_t off, len;
};

struct os_hb_req {
	uint64_t deletes;      /* since the last heartbeat */
	uint64_t garbage_slot; /* slot + 1 of a garbage entry seen, or 0 */
};

struct os_hb_rep {
	int32_t status;    /* 0, or -ENOENT: the session expired, its regions
	                      are gone (HELLO again) */
	uint32_t load_ppm; /* occupied slots, parts per million */
};

struct os_stats_rep {
	uint64_t clients, regions_free, regions_client, regions_server;
	uint64_t gc_runs, gc_copied, gc_holes, cleanups, cleanup_moved;
	uint64_t expired, live, deleted, holes, scans;
	uint64_t dropped; /* sessions ended with their connection */
	uint64_t quarantined; /* regions of expired sessions kept from reuse
	                         until their client speaks or goes */
};

#endif
