/* SPDX-License-Identifier: MIT */
/*
 * verbs-count.so: count a process's verbs data-path calls, the same way for
 * any program (perftest's ib_write_lat and ib_write_bw, zl-bench, ...):
 *
 *   LD_PRELOAD=./verbs-count.so VERBS_COUNT_OUT=FILE ib_write_lat ...
 *
 * At exit it appends one line to FILE (stderr without it):
 *   verbs-count pid=P prog=NAME post_send=N wr=N signaled=N inline=N
 *   bytes=N poll_cq=N poll_hits=N post_recv=N recv_wr=N
 * (post_send: ibv_post_send calls, i.e. doorbells; wr: the send work
 * requests they carried, and of them signaled and inline ones; bytes: the
 * bytes of their scatter lists; poll_hits: ibv_poll_cq calls that returned
 * a completion.) Counts run from process start: a difference of two runs
 * with different iteration counts gives the cost per iteration.
 *
 * How: ibv_post_send, ibv_poll_cq and ibv_post_recv are static inline
 * functions in <infiniband/verbs.h> that call through the device context's
 * ops table (qp->context->ops.post_send, ...), so there is no symbol to
 * interpose. Instead ibv_open_device, an exported function, is wrapped:
 * after the real one, the context's ops.post_send, ops.poll_cq and
 * ops.post_recv are replaced with counting wrappers that call the
 * provider's functions. Every program that opens a device through
 * ibv_open_device (all the above) is covered; the extended API
 * (ibv_wr_start and friends on an ibv_qp_ex) is not counted.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Atomic unsigned long long n_post, n_wr, n_sig, n_inl, n_bytes, n_poll, n_hits, n_rpost,
	n_rwr;

/* The provider's functions, per context (a program opens few devices). */
#define MAX_CTX 16
static struct {
	struct ibv_context *ctx;
	int (*post_send)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **);
	int (*poll_cq)(struct ibv_cq *, int, struct ibv_wc *);
	int (*post_recv)(struct ibv_qp *, struct ibv_recv_wr *, struct ibv_recv_wr **);
} ctxs[MAX_CTX];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int find(struct ibv_context *c)
{
	for (int i = 0; i < MAX_CTX; i++)
		if (ctxs[i].ctx == c)
			return i;
	return -1;
}

static void add(_Atomic unsigned long long *c, unsigned long long n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static int count_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	int i = find(qp->context);
	if (i < 0)
		return EINVAL;
	add(&n_post, 1);
	for (struct ibv_send_wr *w = wr; w; w = w->next) {
		add(&n_wr, 1);
		add(&n_sig, !!(w->send_flags & IBV_SEND_SIGNALED));
		add(&n_inl, !!(w->send_flags & IBV_SEND_INLINE));
		for (int k = 0; k < w->num_sge; k++)
			add(&n_bytes, w->sg_list[k].length);
	}
	return ctxs[i].post_send(qp, wr, bad);
}

static int count_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc)
{
	int i = find(cq->context);
	if (i < 0)
		return -1;
	int n = ctxs[i].poll_cq(cq, num, wc);
	add(&n_poll, 1);
	add(&n_hits, n > 0);
	return n;
}

static int count_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	int i = find(qp->context);
	if (i < 0)
		return EINVAL;
	add(&n_rpost, 1);
	for (struct ibv_recv_wr *w = wr; w; w = w->next)
		add(&n_rwr, 1);
	return ctxs[i].post_recv(qp, wr, bad);
}

struct ibv_context *ibv_open_device(struct ibv_device *dev)
{
	static struct ibv_context *(*real)(struct ibv_device *);
	if (!real)
		real = (struct ibv_context * (*)(struct ibv_device *))
			dlvsym(RTLD_NEXT, "ibv_open_device", "IBVERBS_1.1");
	if (!real)
		real = (struct ibv_context * (*)(struct ibv_device *))
			dlsym(RTLD_NEXT, "ibv_open_device");
	struct ibv_context *c = real ? real(dev) : NULL;
	if (!c)
		return c;
	pthread_mutex_lock(&lock);
	int i = find(NULL);
	if (i >= 0) {
		ctxs[i].post_send = c->ops.post_send;
		ctxs[i].poll_cq = c->ops.poll_cq;
		ctxs[i].post_recv = c->ops.post_recv;
		ctxs[i].ctx = c;
		c->ops.post_send = count_post_send;
		c->ops.poll_cq = count_poll_cq;
		c->ops.post_recv = count_post_recv;
	} else {
		fprintf(stderr, "verbs-count: more than %d devices open; not counting\n", MAX_CTX);
	}
	pthread_mutex_unlock(&lock);
	return c;
}

__attribute__((destructor)) static void report(void)
{
	char prog[256] = "?";
	ssize_t k = readlink("/proc/self/exe", prog, sizeof(prog) - 1);
	prog[k > 0 ? k : 1] = 0;
	const char *out = getenv("VERBS_COUNT_OUT");
	FILE *f = out ? fopen(out, "a") : stderr;
	if (!f)
		return;
	fprintf(f, "verbs-count pid=%d prog=%s post_send=%llu wr=%llu signaled=%llu inline=%llu "
		   "bytes=%llu poll_cq=%llu poll_hits=%llu post_recv=%llu recv_wr=%llu\n",
		(int)getpid(), strrchr(prog, '/') ? strrchr(prog, '/') + 1 : prog,
		(unsigned long long)n_post, (unsigned long long)n_wr, (unsigned long long)n_sig,
		(unsigned long long)n_inl, (unsigned long long)n_bytes, (unsigned long long)n_poll,
		(unsigned long long)n_hits, (unsigned long long)n_rpost, (unsigned long long)n_rwr);
	if (out)
		fclose(f);
}
