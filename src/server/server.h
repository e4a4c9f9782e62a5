/* SPDX-License-Identifier: MIT */
/* zl_server internals shared by its files (the layers: server.c's header). */
#ifndef ZL_SERVER_H
#define ZL_SERVER_H

#include <poll.h>
#include <pthread.h>
#include <unistd.h>
#include <stdatomic.h>

#include "internal.h"
#include "scan.h"
#include "wire.h"

#define SRV_MAX_LISTENERS 8

enum cl_kind {
	CL_MBOX,   /* shm: slots in the client's page, flags in the array */
	CL_RMBOX,  /* rdma: slots in our memory, flags in the rdma array,
	            * both written by the client through memory windows */
	CL_STREAM, /* tcp, unix: channel messages, readiness from epoll */
	CL_RING,   /* rdma without memory windows: channel messages, found by
	            * polling the ring */
};

enum req_state { REQ_IDLE, REQ_BUSY, REQ_DEFERRED };

struct zl_req {
	struct srv_client *cl;
	uint32_t seq;   /* IDLE: the next one expected; else the current one */
	uint16_t slot;
	uint8_t type;
	uint8_t state;
	bool replied;
	bool reserved;  /* zl_reply_reserve is open */
	bool bell;      /* its doorbell came before its channel message */
	bool swept;     /* a sweep found swept_seq waiting with its flag clear */
	bool flag_owed; /* taken by a sweep: its own flag may still land */
	uint32_t swept_seq;
	int64_t swept_at;  /* when a sweep first found it so (us) */
	const uint8_t *data;
	size_t len;
	uint8_t *copy;  /* a deferred channel request's own bytes */
	uint8_t *rsv;   /* the open zl_reply_reserve, header first */
};

/* A reply that could not go out at once. */
struct backlog {
	struct backlog *next;
	size_t len;
	uint8_t buf[];
};

/* What an epoll event belongs to. */
enum ep_kind { EP_ACCEPT, EP_STOP, EP_CHAN };
struct ep_tag {
	enum ep_kind kind;
	struct srv_client *cl;
};

struct srv_client {
	struct zl_server *srv;
	zl_channel *ch;
	enum cl_kind kind;
	uint64_t id;
	bool dead;           /* dropped; freed once no request is deferred */
	bool listed_pending; /* on srv->pending (replies to push out) */
	bool asym;           /* shm: the client skips its fence (membarrier) */
	bool more;           /* chan_drain stopped with messages left */
	bool partial;        /* chan_drain stopped in a fragmented message */
	bool paused;         /* over max_queued: its requests wait (reply.c) */
	bool warned;         /* the pause was logged once */
	uint64_t held;       /* bit k: slot k announced while paused */
	uint32_t deferred;   /* requests in REQ_DEFERRED */
	uint32_t bells;      /* requests with bell set */
	struct backlog *bl_head, *bl_tail;
	uint64_t queued;     /* bytes in the backlog */
	struct srv_client *next, *prev;  /* srv->clients */
	struct srv_client *pnext;        /* srv->pending */
	struct ep_tag t_chan;
	/* CL_MBOX, CL_RMBOX */
	uint32_t idx;        /* flags [idx*K, idx*K + K) */
	uint8_t *page;       /* shm: a memfd mapping; rdma: our memory */
	size_t page_len;
	struct zl_rmem *rm_slots, *rm_flags; /* rdma: its two ranges */
	struct zl_win *w_slots, *w_flags; /* rdma: the client's windows */
	const struct zl_onesided_ops *os;
	struct zl_req req[]; /* K */
};

struct srv_counters {
	_Atomic uint64_t clients, clients_total, clients_dropped, requests, rejected,
		spurious, recovered, sleeps, paused, handshakes_failed;
	_Atomic uint64_t per_type[256];
	_Atomic uint64_t arms;
};

struct zl_server {
	struct zl_server_opts o;
	void (*on_drop)(uint64_t client, void *arg); /* zl_server_on_drop */
	void *on_drop_arg;
	struct {
		zl_handler_fn fn;
		void *arg;
	} h[256];
	struct srv_counters n;
	int st_slot;      /* our slot of the status page (zl-ss), or -1 */
	int64_t st_next;  /* ... copied the counters next at this time */
	_Atomic bool stop;
	int stop_fd;   /* eventfd: zl_server_stop wakes the serving thread */
	int ep;        /* epoll: accept queue, stop, client channels (a shm
	                * client's doorbell rings on its channel) */
	struct ep_tag t_accept, t_stop;

	/* shared with the acceptor thread, under lock */
	pthread_mutex_t lock;
	pthread_t acceptor;
	bool acceptor_running;
	int ctl_fd;          /* eventfd: listeners changed, or quit */
	bool acceptor_quit;
	zl_listener *lst[SRV_MAX_LISTENERS];
	int64_t lst_hs_us[SRV_MAX_LISTENERS]; /* their handshake_timeout_us */
	int nlst;
	struct zl_hs *hs;          /* connections in their handshake; the
	                            * acceptor thread's once it runs */
	struct srv_client *ready;  /* accepted, not yet taken by the server */
	int accept_fd;             /* eventfd: ready is not empty */
	uint32_t nclients;         /* admitted, including ready */
	uint8_t *idx_used;         /* mailbox index map, max_clients bytes */
	uint64_t next_id;

	/* the mailbox: flags of all shm clients, one memfd; flags of all rdma
	 * clients, a second array (shm clients must not reach it). Both are
	 * indexed alike: a client's index owns the same K bytes in each. */
	int flags_fd;
	uint8_t *flags, *rflags;
	size_t flags_len;
	struct srv_client **mbox; /* by index */
	uint32_t mbox_hi;         /* indices in use are below this */
	enum zl_scan_impl scan_impl;
	size_t scan_start, rscan_start;
	int64_t next_sweep;

	/* serving thread only */
	struct srv_client *clients;  /* all live clients */
	uint64_t queued;             /* their backlogs' bytes (max_queued_total) */
	struct srv_client *pending;  /* clients with replies to push out */
	struct srv_client *graves;   /* dropped, to be freed */
	uint32_t nstream, nring, nmore, npartial;
	int64_t next_epoll;          /* next nonblocking epoll look (shm only) */
	uint32_t nmbox, nmbox_fence; /* shm clients; those without membarrier */
	uint32_t nrmbox, nbells;     /* rdma mailbox clients; open bells */
	uint8_t *big;                /* fragmented channel requests */
	size_t big_cap;
	uint8_t *scratch;            /* replies larger than one record */
	size_t scratch_cap;
};

#define CNT_ADD(srv, f, v) \
	atomic_store_explicit(&(srv)->n.f, atomic_load_explicit(&(srv)->n.f, \
		memory_order_relaxed) + (v), memory_order_relaxed)

/* Wake a thread through one of our own eventfds (never a peer's). */
static inline void srv_kick(int efd)
{
	uint64_t one = 1;
	ssize_t r = write(efd, &one, sizeof(one));
	(void)r; /* an eventfd at its limit is still readable: nothing lost */
}

/* Read one of our own eventfds empty (it is nonblocking, and ours alone). */
static inline void srv_drain(int efd)
{
	uint64_t v;
	while (read(efd, &v, sizeof(v)) > 0)
		;
}

/* Take a ring channel's wake-ups and look at its peer; with arm, also ask
 * the peer for a wake-up (ring channels are in manual mode). 0 for other
 * channels, else the settle op's result. */
static inline int srv_settle(struct zl_server *s, zl_channel *ch, bool arm)
{
	if (!ch->ops->settle)
		return 0;
	if (arm && s) /* the serving thread's (s NULL: the acceptor's) */
		CNT_ADD(s, arms, 1);
	return ch->ops->settle(ch, arm);
}

/* accept.c: the acceptor thread (arg: the server) */
void *srv_acceptor(void *arg);
/* the counters to the status page (serve.c); now 0: read the clock */
void srv_publish(struct zl_server *s, int64_t now);
/* serve.c */
void srv_take_ready(struct zl_server *srv); /* attach what the acceptor queued */
/* reply.c */
void srv_dispatch(struct zl_server *srv, struct zl_req *rq);
void srv_push_pending(struct zl_server *srv);
/* clients.c */
int srv_reserve_client(struct zl_server *srv, bool mbox, uint32_t *idx, uint64_t *id);
void srv_release_client(struct zl_server *srv, bool mbox, uint32_t idx, bool client);
struct srv_client *srv_client_new(struct zl_server *srv, zl_channel *ch);
int srv_mbox_setup(struct zl_server *srv, struct srv_client *cl, int fds[2]);
int srv_rmbox_setup(struct zl_server *srv, struct srv_client *cl, struct srv_welcome *w);
void srv_rmbox_free(struct srv_client *cl, bool all);
void srv_release(struct zl_server *srv, struct srv_client *cl);
void srv_ep_del(struct zl_server *srv, int fd);
void srv_drop(struct srv_client *cl, const char *why, int err);
void srv_free_client(struct srv_client *cl);
void srv_bury(struct zl_server *srv); /* free dropped clients */
/* stop or resume taking a client's requests (max_queued) */
void srv_pause(struct srv_client *cl, bool pause);
/* client.c; for tests (tests/srv_rogue_rdma.c), not exported: the
 * channel and windows of an rdma mailbox client, or -ENOENT. */
int srv_client_rwin(const zl_client *c, zl_channel **ch, struct zl_rwin *slots,
		    struct zl_rwin *flags);
#endif
