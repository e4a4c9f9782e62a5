/* SPDX-License-Identifier: MIT */
/*
 * zl_server's public setup: options, listeners, handlers, counters, stop
 * and close. The layers below, each calling only downwards:
 *   server.c  this file: the API around the two threads
 *   accept.c  the acceptor thread: connections and handshakes
 *   serve.c   the serving thread: the scan, channels, dispatch, sleeping
 *   reply.c   requests and replies, and the reply budget
 *   clients.c places, a client's resources, dropping and pausing
 * Accepting runs on its own thread so that a client stalling in a
 * handshake never delays the serving thread: finished clients are queued
 * and the serving thread picks them up (srv_take_ready).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hs.h"
#include "server.h"
#include "sockutil.h"
#include "status.h"

ZL_API void zl_server_opts_init(struct zl_server_opts *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->slots = 4;
	o->slot_size = 512;
	o->max_clients = 1024;
	o->max_req = 4u << 20;
	o->spin_us = 50;
	o->sweep_us = 1000;
	o->max_queued = 8u << 20;
	o->max_ring = 4u << 20;
	o->max_handshakes = 64;
	o->max_queued_total = 256u << 20;
}

static int opts_ok(const struct zl_server_opts *o)
{
	return o->slots >= 1 && o->slots <= SRV_MAX_SLOTS && o->slot_size >= 64 &&
	       o->slot_size <= 65536 && o->slot_size % 64 == 0 && o->max_clients >= 1 &&
	       o->max_clients <= 65536 && o->max_req >= 1 && o->max_req <= UINT32_MAX &&
	       o->spin_us >= -1 && o->sweep_us > 0 && o->max_queued > 0 &&
	       o->max_queued_total >= o->max_queued &&
	       o->max_ring >= 4096 && o->max_ring <= (1u << 30) && o->max_handshakes >= 1 &&
	       o->max_handshakes <= 65536;
}

static int ep_add(int ep, int fd, struct ep_tag *t)
{
	struct epoll_event e = { .events = EPOLLIN, .data.ptr = t };
	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) ? -errno : 0;
}

ZL_API int zl_server_create(const struct zl_server_opts *opts, zl_server **out)
{
	struct zl_server_opts o;
	zl_server_opts_init(&o);
	if (!out)
		return -EINVAL;
	if (opts) {
		if (opts->size < offsetof(struct zl_server_opts, reserved))
			return -EINVAL;
		memcpy(&o, opts, offsetof(struct zl_server_opts, reserved));
		o.size = sizeof(o);
	}
	if (!opts_ok(&o))
		return -EINVAL;
	struct zl_server *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->o = o;
	s->ep = s->stop_fd = s->ctl_fd = s->accept_fd = s->flags_fd = s->st_slot = -1;
	pthread_mutex_init(&s->lock, NULL);
	s->t_accept.kind = EP_ACCEPT;
	s->t_stop.kind = EP_STOP;
	s->scan_impl = zl_scan_best() | ZL_SCAN_PADDED;
	s->next_id = 1;
	/* the flag array: padded to a page, so SIMD may read past the end */
	s->flags_len = srv_round_up((uint64_t)o.max_clients * o.slots + 64, 4096);
	s->idx_used = calloc(o.max_clients, 1);
	s->mbox = calloc(o.max_clients, sizeof(*s->mbox));
	s->rflags = aligned_alloc(4096, s->flags_len);
	int r = s->idx_used && s->mbox && s->rflags ? 0 : -ENOMEM;
	if (s->rflags)
		memset(s->rflags, 0, s->flags_len);
	if (!r)
		r = zl_hs_new(o.max_handshakes, true, &s->hs);
	if (!r && (s->ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
		r = -errno;
	if (!r && ((s->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
		   (s->ctl_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
		   (s->accept_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0))
		r = -errno;
	if (!r && (s->flags_fd = zl_memfd_sealed("zipline-flags", s->flags_len)) < 0)
		r = s->flags_fd;
	if (!r) {
		s->flags = mmap(NULL, s->flags_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
				s->flags_fd, 0);
		if (s->flags == MAP_FAILED) {
			s->flags = NULL;
			r = -errno;
		}
	}
	if (!r)
		r = ep_add(s->ep, s->accept_fd, &s->t_accept);
	if (!r)
		r = ep_add(s->ep, s->stop_fd, &s->t_stop);
	if (r) {
		zl_server_close(s);
		return r;
	}
	s->st_slot = zl_status_take(ZL_ST_SERVER); /* (-1: no page, not listed) */
	*out = s;
	return 0;
}

/* The status page (zl-ss) names the server by its listeners' URLs (its
 * slot, taken at zl_server_create; the counters are the serving thread's
 * to copy, srv_publish). */
static void srv_status_name(struct zl_server *s)
{
	struct zl_status_slot *st = zl_status_slot(s->st_slot);
	if (!st)
		return;
	char name[sizeof(st->name)] = "";
	size_t n = 0;
	for (int i = 0; i < s->nlst && n + 2 < sizeof(name); i++) {
		if (i)
			name[n++] = ' ';
		if (zl_listener_url(s->lst[i], name + n, sizeof(name) - n) < 0)
			name[n] = '\0';
		n += strlen(name + n);
	}
	zl_status_begin(st);
	zl_status_str(st->name, sizeof(st->name), name);
	zl_status_end(st);
}

ZL_API int zl_server_listen(zl_server *s, const char *url, const struct zl_opts *opts)
{
	if (!s || !url)
		return -EINVAL;
	if (s->nlst >= SRV_MAX_LISTENERS) /* only this thread adds listeners */
		return -ENOSPC;
	struct zl_opts o;
	zl_opts_init(&o);
	o.ring_size = 64 * 1024; /* requests mostly travel in slots */
	/* the budgets, which neither opts nor the URL raise: nothing larger
	 * than a request comes in (a stream buffers a frame as it arrives),
	 * no reply ring larger than max_ring */
	zl_listener *l;
	int64_t hs_us = 0;
	int r = zl_listen_capped(url, opts ? opts : &o, s->o.max_req + sizeof(struct srv_hdr),
				 s->o.max_ring, &hs_us, &l);
	if (r)
		return r;
	pthread_mutex_lock(&s->lock);
	s->lst_hs_us[s->nlst] = hs_us;
	s->lst[s->nlst++] = l;
	bool start = !s->acceptor_running;
	pthread_mutex_unlock(&s->lock);
	srv_status_name(s);
	if (!start) {
		srv_kick(s->ctl_fd);
		return 0;
	}
	r = pthread_create(&s->acceptor, NULL, srv_acceptor, s);
	if (r) {
		pthread_mutex_lock(&s->lock);
		s->nlst--;
		pthread_mutex_unlock(&s->lock);
		zl_listener_close(l);
		return -r;
	}
	s->acceptor_running = true;
	return 0;
}

ZL_API int zl_server_url(const zl_server *s, int i, char *buf, size_t cap)
{
	if (!s || !buf)
		return -EINVAL;
	if (i < 0 || i >= s->nlst)
		return -ENOENT;
	return zl_listener_url(s->lst[i], buf, cap);
}

ZL_API int zl_server_handle(zl_server *s, int type, zl_handler_fn fn, void *arg)
{
	if (!s || type < 1 || type > 255)
		return -EINVAL;
	s->h[type].fn = fn;
	s->h[type].arg = arg;
	return 0;
}

ZL_API void zl_server_stop(zl_server *s)
{
	if (!s)
		return;
	atomic_store_explicit(&s->stop, true, memory_order_release);
	srv_kick(s->stop_fd);
}

ZL_API int zl_server_info(const zl_server *s, struct zl_server_info *info)
{
	if (!s || !info)
		return -EINVAL;
#define GET(f) atomic_load_explicit(&s->n.f, memory_order_relaxed)
	info->clients = GET(clients);
	info->clients_total = GET(clients_total);
	info->clients_dropped = GET(clients_dropped);
	info->requests = GET(requests);
	info->rejected = GET(rejected);
	info->spurious = GET(spurious);
	info->recovered = GET(recovered);
	info->sleeps = GET(sleeps);
	info->paused = GET(paused);
	info->handshakes_failed = GET(handshakes_failed);
	info->arms = GET(arms);
	for (int t = 0; t < 256; t++)
		info->per_type[t] = GET(per_type[t]);
#undef GET
	return 0;
}

ZL_API void zl_server_close(zl_server *s)
{
	if (!s)
		return;
	if (s->acceptor_running) {
		pthread_mutex_lock(&s->lock);
		s->acceptor_quit = true;
		pthread_mutex_unlock(&s->lock);
		srv_kick(s->ctl_fd);
		pthread_join(s->acceptor, NULL);
	}
	zl_status_clear(s->st_slot);
	zl_hs_free(s->hs); /* before the listeners its entries came from */
	for (int i = 0; i < s->nlst; i++)
		zl_listener_close(s->lst[i]);
	srv_take_ready(s); /* attach, then drop with everyone else */
	while (s->clients)
		srv_drop(s->clients, NULL, 0);
	for (struct srv_client *cl = s->graves; cl; cl = cl->next)
		cl->deferred = 0; /* open deferred requests die with the server */
	srv_bury(s);
	free(s->rflags);
	if (s->flags)
		munmap(s->flags, s->flags_len);
	int fds[] = { s->flags_fd, s->ep, s->stop_fd, s->ctl_fd, s->accept_fd };
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	pthread_mutex_destroy(&s->lock);
	free(s->idx_used);
	free(s->mbox);
	free(s->big);
	free(s->scratch);
	free(s);
}


