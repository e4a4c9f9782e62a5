/* SPDX-License-Identifier: MIT */
/*
 * zl_server clients: places (the client count and mailbox indices, under
 * the server's lock), the resources of one client (its shm page, or its rdma
 * windows), and its end: srv_drop, srv_free_client, srv_bury. Also pausing
 * (max_queued). The bottom of the server: it calls no other server file.
 *
 * Invariants: a client is either on srv->ready (accepted, the acceptor's
 * until the serving thread takes it), on srv->clients (the serving
 * thread's), or on srv->graves (dropped, freed once no deferred request
 * refers to it). A dropped client's channel is closed at once without
 * linger, so a client that does not read cannot hold the thread; its
 * mailbox index and flags are cleared before another client can get them.
 */
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

#include "server.h"
#include "sockutil.h"

/* Reserve a place for one more client (and a mailbox index). */
int srv_reserve_client(struct zl_server *s, bool mbox, uint32_t *idx, uint64_t *id)
{
	int r = -EUSERS;
	pthread_mutex_lock(&s->lock);
	if (s->nclients < s->o.max_clients) {
		r = 0;
		if (mbox) {
			uint32_t i = 0;
			while (s->idx_used[i])
				i++; /* nclients < max_clients: a free index exists */
			s->idx_used[i] = 1;
			*idx = i;
		}
		s->nclients++;
		*id = s->next_id++;
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

void srv_release_client(struct zl_server *s, bool mbox, uint32_t idx, bool client)
{
	pthread_mutex_lock(&s->lock);
	if (mbox)
		s->idx_used[idx] = 0;
	s->nclients -= client;
	pthread_mutex_unlock(&s->lock);
}

struct srv_client *srv_client_new(struct zl_server *s, zl_channel *ch)
{
	struct srv_client *cl = calloc(1, sizeof(*cl) + s->o.slots * sizeof(struct zl_req));
	if (!cl)
		return NULL;
	cl->srv = s;
	cl->ch = ch;
	for (uint32_t k = 0; k < s->o.slots; k++) {
		cl->req[k].cl = cl;
		cl->req[k].slot = (uint16_t)k;
		cl->req[k].seq = 1;
	}
	return cl;
}

/* The shm mailbox: this client's page; fds[1] for it. */
int srv_mbox_setup(struct zl_server *s, struct srv_client *cl, int fds[2])
{
	cl->page_len = srv_page_len(s->o.slots, s->o.slot_size);
	fds[0] = s->flags_fd;
	fds[1] = zl_memfd_sealed("zipline-slots", cl->page_len);
	if (fds[1] < 0)
		return fds[1];
	cl->page = mmap(NULL, cl->page_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
			fds[1], 0);
	if (cl->page == MAP_FAILED) {
		cl->page = NULL;
		return -errno;
	}
	return 0;
}

/* The rdma mailbox: this client's slots in our memory, and a window bound
 * to its queue pair over each of its two ranges, its slots and its flags
 * in rflags. Each range is also its own registration: rxe bounds a
 * window's access by its region only, so a window over one region shared
 * by all clients would let a client write past its own flags. The
 * registrations allow no remote access by themselves. -EOPNOTSUPP: the
 * device has no memory windows. */
int srv_rmbox_setup(struct zl_server *s, struct srv_client *cl, struct srv_welcome *w)
{
	const struct zl_onesided_ops *os = cl->ch->os;
	uint32_t slots_len = s->o.slots * s->o.slot_size;
	uint8_t *flags = s->rflags + (size_t)cl->idx * s->o.slots;
	cl->os = os;
	cl->page_len = srv_page_len(s->o.slots, s->o.slot_size);
	cl->page = aligned_alloc(4096, cl->page_len);
	if (!cl->page)
		return -ENOMEM;
	memset(cl->page, 0, cl->page_len);
	uint8_t *slots = cl->page + SRV_CTL_SIZE;
	struct zl_rwin ds, df;
	int r = os->reg(cl->ch, slots, slots_len, &cl->rm_slots);
	if (!r)
		r = os->reg(cl->ch, flags, s->o.slots, &cl->rm_flags);
	if (!r)
		r = os->win_open(cl->ch, cl->rm_slots, slots, slots_len, ZL_WIN_WRITE, &cl->w_slots,
				 &ds);
	if (!r)
		r = os->win_open(cl->ch, cl->rm_flags, flags, s->o.slots, ZL_WIN_WRITE,
					 &cl->w_flags, &df);
	if (r)
		return r;
	w->slots_win = (struct srv_rwin){ .addr = ds.addr, .rkey = ds.rkey, .len = ds.len };
	w->flags_win = (struct srv_rwin){ .addr = df.addr, .rkey = df.rkey, .len = df.len };
	w->flags |= SRV_F_RMBOX;
	w->flag_base = cl->idx * s->o.slots;
	return 0;
}

/* Close an rdma client's windows (at once when it is dropped); with all,
 * free its slots too (once no deferred request reads them). */
void srv_rmbox_free(struct srv_client *cl, bool all)
{
	if (!cl->os)
		return;
	cl->os->win_close(cl->w_slots);
	cl->os->win_close(cl->w_flags);
	cl->w_slots = cl->w_flags = NULL;
	if (!all)
		return;
	cl->os->dereg(cl->rm_slots);
	cl->os->dereg(cl->rm_flags);
	cl->rm_slots = cl->rm_flags = NULL;
	free(cl->page);
	cl->page = NULL;
	cl->os = NULL;
}

/* The serving thread gives a client's place back (after srv_drop). */
void srv_release(struct zl_server *s, struct srv_client *cl)
{
	srv_release_client(s, cl->kind == CL_MBOX || cl->kind == CL_RMBOX, cl->idx, true);
}

void srv_ep_del(struct zl_server *s, int fd)
{
	if (fd >= 0)
		epoll_ctl(s->ep, EPOLL_CTL_DEL, fd, NULL);
}

/* Its queued replies, which will never go out now. */
static void free_backlog(struct srv_client *cl)
{
	for (struct backlog *b = cl->bl_head, *n; b; b = n) {
		n = b->next;
		free(b);
	}
	cl->bl_head = cl->bl_tail = NULL;
	cl->srv->queued -= cl->queued;
	cl->queued = 0;
}

void srv_free_client(struct srv_client *cl)
{
	free_backlog(cl);
	for (uint32_t k = 0; k < cl->srv->o.slots; k++)
		free(cl->req[k].copy);
	if (cl->os)
		srv_rmbox_free(cl, true);
	else if (cl->page)
		munmap(cl->page, cl->page_len);
	if (cl->ch)
		zl_close(cl->ch);
	free(cl);
}

/* Disconnect a client. Its memory lives on while requests are deferred
 * (their zl_reply then returns -ECONNRESET). */
void srv_drop(struct srv_client *cl, const char *why, int err)
{
	struct zl_server *s = cl->srv;
	if (cl->dead)
		return;
	if (why) {
		/* a client that went away is ordinary; a violation is worth a warning */
		ZL_LOG(err == -ECONNRESET ? ZL_LOG_DEBUG : ZL_LOG_WARN,
		       "server: dropping client %llu: %s (%s)", (unsigned long long)cl->id, why,
		       zl_strerror(err));
		if (err != -ECONNRESET)
			CNT_ADD(s, clients_dropped, 1);
	}
	cl->dead = true;
	if (s->on_drop) /* before its channel goes: windows bound to it first */
		s->on_drop(cl->id, s->on_drop_arg);
	free_backlog(cl); /* at once: it counts against max_queued_total */
	srv_ep_del(s, zl_channel_fd(cl->ch));
	if (cl->next)
		cl->next->prev = cl->prev;
	if (cl->prev)
		cl->prev->next = cl->next;
	else
		s->clients = cl->next;
	if (cl->listed_pending) { /* unlink from the pending list */
		struct srv_client **pp = &s->pending;
		while (*pp != cl)
			pp = &(*pp)->pnext;
		*pp = cl->pnext;
		cl->listed_pending = false;
	}
	CNT_ADD(s, clients, -1);
	s->nmore -= cl->more;
	s->npartial -= cl->partial;
	s->nbells -= cl->bells;
	if (cl->kind == CL_RMBOX)
		srv_rmbox_free(cl, false); /* no more writes from it */
	if (cl->kind == CL_MBOX || cl->kind == CL_RMBOX) {
		uint8_t *fl = cl->kind == CL_MBOX ? s->flags : s->rflags;
		memset(fl + (size_t)cl->idx * s->o.slots, 0, s->o.slots);
		s->mbox[cl->idx] = NULL;
		while (s->mbox_hi && !s->mbox[s->mbox_hi - 1])
			s->mbox_hi--;
	}
	if (cl->kind == CL_MBOX) {
		s->nmbox--;
		s->nmbox_fence -= !cl->asym;
	} else if (cl->kind == CL_RMBOX) {
		s->nrmbox--;
	} else if (cl->kind == CL_STREAM) {
		s->nstream--;
	} else {
		s->nring--;
	}
	srv_release(s, cl);
	cl->ch->no_linger = true; /* a stuck client must not hold the thread */
	zl_close(cl->ch);
	cl->ch = NULL;
	/* freed by srv_bury: events of this epoll batch may still name it */
	cl->next = s->graves;
	s->graves = cl;
}

void srv_bury(struct zl_server *s)
{
	struct srv_client **pp = &s->graves;
	while (*pp) {
		struct srv_client *cl = *pp;
		if (cl->deferred) {
			pp = &cl->next;
			continue;
		}
		*pp = cl->next;
		srv_free_client(cl);
	}
}

/* A paused client's channel leaves epoll (a readable stream would keep
 * the loop from sleeping) and its slots are not taken; on resume the
 * channel is drained and the held slots are taken (poll_chans, serve.c). */
void srv_pause(struct srv_client *cl, bool pause)
{
	struct zl_server *s = cl->srv;
	if (cl->dead || cl->paused == pause)
		return;
	cl->paused = pause;
	int fd = zl_channel_fd(cl->ch);
	if (pause) {
		if (!cl->warned)
			ZL_LOG(ZL_LOG_WARN, "server: pausing client %llu: %llu bytes of replies "
			       "queued that it does not read (max_queued %llu)",
			       (unsigned long long)cl->id, (unsigned long long)cl->queued,
			       (unsigned long long)s->o.max_queued);
		cl->warned = true;
		CNT_ADD(s, paused, 1);
		srv_ep_del(s, fd);
		return;
	}
	struct epoll_event e = { .events = EPOLLIN, .data.ptr = &cl->t_chan };
	if (fd < 0 || epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &e)) {
		srv_drop(cl, "cannot watch the client", fd < 0 ? fd : -errno);
		return;
	}
	if (!cl->more) { /* serve.c drains it and takes its held slots */
		cl->more = true;
		s->nmore++;
	}
}
