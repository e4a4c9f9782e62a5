/* SPDX-License-Identifier: MIT */
/* The one-sided store's server state, shared by server.c (requests, the
 * chunk) and gc.c (the collector thread). */
#ifndef ZL_OS_SERVER_H
#define ZL_OS_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "internal.h"
#include "layout.h"
#include "onesided.h"
#include "os_proto.h"

#define OS_MAX_HELD 16 /* regions one client may hold, at most */
#define OS_REPAIRS 64  /* garbage slots queued for checking */
#define RESERVE 2      /* free regions clients cannot take: the collector's */

/* R_QUAR: collected, but of a session that expired while its client may
 * only have been stopped (server.c: unquarantine) */
enum { R_FREE, R_CLIENT, R_COLLECT, R_SRV_CUR, R_SRV_FULL, R_QUAR };

struct os_sess {
	uint64_t client; /* zl_req_client id; 0: unused */
	zl_channel *ch;  /* rdma: the channel its window is bound to */
	struct zl_win *win;
	uint64_t win_client; /* whose connection win is bound to (it may
	                        outlive the session: gc.c) */
	uint64_t session;
	int64_t last_hb;
	uint32_t nheld;
	uint32_t held[OS_MAX_HELD];
};

struct zl_kvos {
	zl_server *srv;
	struct zl_kvos_opts o;
	struct os_geom g;
	uint8_t *base; /* the chunk */
	int memfd;
	int lsock;     /* abstract socket handing out the memfd */
	char sockname[48];
	struct zl_rmem *rm[4]; /* rdma: the chunk registered, per device */
	const struct zl_onesided_ops *ops;
	/* A device's atomics are not the CPU's (no IBV_ATOMIC_GLOB): the
	 * server's CASes then go through a connection of its own (loop, the
	 * collector's), to loop_url; until it works, cleanup waits. */
	atomic_bool devcas;
	char loop_url[600];     /* under mu */
	struct zl_os *loop;     /* the collector's */
	int64_t loop_retry;     /* the collector's */

	pthread_mutex_t mu; /* everything below up to the collector's own */
	uint8_t *rstate;
	uint64_t *rents;   /* entries pointing into each region, at the last
	                      walk (UINT64_MAX: not counted) */
	uint64_t *rcopied; /* containers the collector wrote into a region */
	uint64_t *rquar;   /* the client whose expired session held it, or 0 */
	uint32_t nfree;
	struct os_sess *sess;
	uint64_t next_session;
	uint64_t repair[OS_REPAIRS];
	uint32_t nrepair;
	uint64_t deletes_told;
	uint32_t load_ppm;

	/* the collector thread's own */
	pthread_t thr;
	atomic_bool stop;
	bool has_cur;
	uint32_t cur;
	uint64_t cur_pos;
	uint8_t *buf; /* a private copy of one container */
	int64_t next_scan;
	uint64_t c_copied, c_holes, c_moved; /* copied into st under mu */

	struct os_stats_rep st; /* under mu */
};

/* server.c: end a session and give its regions to the collector (under
 * mu). expired: its client may be alive but stopped, so its regions are
 * not given out again until it speaks or goes (quarantine), and its
 * window (rdma) stays open until its slot is reused; else the window is
 * closed now. */
void os_sess_drop(struct zl_kvos *s, struct os_sess *c, bool expired);

/* gc.c */
void *os_collector(void *arg);
/* The region's index for a chunk offset, or -1 outside the data space. */
int64_t os_region_of(const struct zl_kvos *s, uint64_t off);

#endif
