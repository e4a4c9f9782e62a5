/* SPDX-License-Identifier: MIT */
/*
 * One phase (load or run) with N client threads. Each thread has its own
 * connection, generators and preallocated latency array; the timed part of
 * an operation is the backend call alone (one request/reply round trip for
 * most operations; see the backends), as YCSB's DBWrapper measures.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "ycsb.h"

#define POOL_LEN (1u << 20) /* random bytes values are cut from */
#define PROGRESS_NS 2000000000ull
/* A sample: the op type in the top bits, nanoseconds below. */
#define OP_SHIFT 59
#define NS_MASK ((1ull << OP_SHIFT) - 1)

struct shared {
	const struct opts *o;
	enum phase ph;
	const struct backend *be;
	struct be_conf bc;
	struct acked ins;           /* run-phase insert keys, from records up */
	_Atomic int64_t load_next;  /* load-phase keys, from 0 */
	_Atomic int stop;           /* a thread failed: everyone stops */
	pthread_barrier_t ready, go;
	uint64_t t0;
	double interval_ns;         /* per thread, when throttled */
	const char *pool;
};

struct worker {
	struct shared *s;
	pthread_t tid;
	int id;
	void *h;
	struct wgen g;
	int64_t nops;
	uint64_t *lat, *ilat, n;
	uint64_t notfound[OP_N], badlen;
	uint64_t end_ns;
	int failed;
	char err[200];
	_Alignas(64) _Atomic uint64_t done; /* read by the progress loop */
};

/* Sleep, then spin the last stretch: a sleep alone wakes tens of us
 * late, which would be charged to the INTENDED-* latencies. */
#define SPIN_NS 150000u
static void wait_until(uint64_t ns)
{
	uint64_t now = now_ns();
	if (now + SPIN_NS < ns) {
		uint64_t t = ns - SPIN_NS;
		struct timespec ts = {.tv_sec = (time_t)(t / 1000000000u),
				      .tv_nsec = (long)(t % 1000000000u)};
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
	}
	while (now_ns() < ns) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#else
		__asm__ volatile("" ::: "memory");
#endif
	}
}

static int fatal(struct worker *w, int rc, const char *what)
{
	const char *e = w->h ? w->s->be->error(w->h) : "";
	snprintf(w->err, sizeof(w->err), "%s: %s", what, e && *e ? e : strerror(-rc));
	w->failed = 1;
	atomic_store(&w->s->stop, 1);
	return rc;
}

/* An operation chosen, then its outcome. */
struct pick {
	enum op op;
	int64_t kn;
	char key[KEY_MAX];
	size_t klen;
	const char *val;
	uint32_t scanlen;
	uint64_t intended;
	size_t vlen;
	int rc;
};

/* Choose operation number i (its key, value, schedule). */
static void choose(struct worker *w, int64_t i, struct pick *p)
{
	struct shared *s = w->s;
	if (s->ph == PHASE_LOAD) {
		p->op = OP_INSERT;
		p->kn = atomic_fetch_add_explicit(&s->load_next, 1, memory_order_relaxed);
	} else {
		p->op = wgen_op(&w->g);
		p->kn = p->op == OP_INSERT ? acked_next(&s->ins) : wgen_keynum(&w->g);
	}
	p->klen = wgen_key(p->kn, p->key);
	p->val = p->op == OP_UPDATE || p->op == OP_INSERT || p->op == OP_RMW ? wgen_value(&w->g)
									     : NULL;
	p->scanlen = p->op == OP_SCAN ? wgen_scanlen(&w->g) : 0;
	/* absolute schedule: no drift, no catch-up skew */
	p->intended = s->interval_ns > 0 ? s->t0 + (uint64_t)((double)i * s->interval_ns) : 0;
	p->vlen = s->bc.recsize;
}

static int exec_one(struct worker *w, struct pick *p)
{
	const struct backend *be = w->s->be;
	size_t recsize = w->s->bc.recsize;
	uint32_t got;
	switch (p->op) {
	case OP_READ:
		return be->read(w->h, p->key, p->klen, &p->vlen);
	case OP_UPDATE:
		return be->update(w->h, p->key, p->klen, p->val, recsize);
	case OP_INSERT:
		return be->insert(w->h, p->key, p->klen, p->val, recsize);
	case OP_SCAN:
		return be->scan(w->h, p->key, p->klen, p->scanlen, &got);
	default:
		return be->rmw(w->h, p->key, p->klen, p->val, recsize, &p->vlen);
	}
}

/* Check and record an operation that ran from t to end. 0 or fatal. */
static int record(struct worker *w, struct pick *p, uint64_t t, uint64_t end)
{
	struct shared *s = w->s;
	int rc = p->rc;
	if (rc == -ENOENT)
		w->notfound[p->op]++;
	else if (rc < 0)
		return fatal(w, rc, op_name[p->op]);
	else if (p->vlen != s->bc.recsize)
		w->badlen++;
	if (p->op == OP_INSERT && s->ph == PHASE_RUN && (rc = acked_ack(&s->ins, p->kn)) < 0)
		return fatal(w, rc, "too many unacknowledged inserts");
	w->lat[w->n] = (uint64_t)p->op << OP_SHIFT | ((end - t) & NS_MASK);
	if (w->ilat)
		w->ilat[w->n] = (uint64_t)p->op << OP_SHIFT | ((end - p->intended) & NS_MASK);
	w->n++;
	return 0;
}

/* One operation: choose, time, check. 0 or a fatal error. */
static int one_op(struct worker *w, int64_t i)
{
	struct pick p;
	choose(w, i, &p);
	if (p.intended)
		wait_until(p.intended);
	uint64_t t = now_ns();
	p.rc = exec_one(w, &p);
	return record(w, &p, t, now_ns());
}

/* Operations i.. with up to depth in flight: reads, updates and inserts
 * go out as one batch; a scan or read-modify-write ends the batch and
 * runs alone. Each operation of a batch is charged the whole batch's time
 * (it was in flight all along); a throttled batch starts when its last
 * operation is due. The number of operations done, or a fatal error. */
static int64_t batch_ops(struct worker *w, int64_t i, int64_t end)
{
	struct shared *s = w->s;
	struct pick p[DEPTH_MAX];
	struct be_op b[DEPTH_MAX];
	int n = 0, rc = 0;
	while (n < s->o->depth && i + n < end) {
		choose(w, i + n, &p[n]);
		if (p[n].op == OP_SCAN || p[n].op == OP_RMW)
			break;
		b[n] = (struct be_op){ .op = p[n].op, .key = p[n].key, .klen = p[n].klen,
				       .val = p[n].val, .vlen = s->bc.recsize };
		n++;
	}
	if (n) {
		if (p[n - 1].intended)
			wait_until(p[n - 1].intended);
		uint64_t t = now_ns();
		if ((rc = s->be->batch(w->h, b, n)) < 0)
			return fatal(w, rc, "batch");
		uint64_t e = now_ns();
		for (int k = 0; k < n && rc >= 0; k++) {
			p[k].rc = b[k].rc;
			p[k].vlen = b[k].vlen;
			rc = record(w, &p[k], t, e);
		}
	}
	if (rc >= 0 && n < s->o->depth && i + n < end) { /* the scan or rmw */
		if (p[n].intended)
			wait_until(p[n].intended);
		uint64_t t = now_ns();
		p[n].rc = exec_one(w, &p[n]);
		rc = record(w, &p[n], t, now_ns());
		n++;
	}
	return rc < 0 ? rc : n;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct shared *s = w->s;
	int rc = s->be->open(s->o->addr, &s->bc, &w->h);
	if (rc < 0)
		fatal(w, rc, "connect");
	prctl(PR_SET_TIMERSLACK, 1000UL); /* pacing sleeps: wake within 1 us */
	pthread_barrier_wait(&s->ready);
	pthread_barrier_wait(&s->go); /* t0 set, stop set if a connect failed */
	for (int64_t i = 0; i < w->nops && !atomic_load_explicit(&s->stop, memory_order_relaxed);) {
		int64_t k = s->o->depth > 1 ? batch_ops(w, i, w->nops) : one_op(w, i) < 0 ? -1 : 1;
		if (k < 0)
			break;
		i += k;
		atomic_store_explicit(&w->done, (uint64_t)i, memory_order_relaxed);
	}
	w->end_ns = now_ns();
	return NULL;
}

static void progress(const struct shared *s, struct worker *ws, int n, uint64_t total,
		     uint64_t *last_ops, uint64_t *last_ns)
{
	uint64_t done = 0, now = now_ns();
	for (int i = 0; i < n; i++)
		done += atomic_load_explicit(&ws[i].done, memory_order_relaxed);
	double dt = (double)(now - *last_ns) / 1e9;
	fprintf(stderr, "zl-ycsb: %s %6.1f s  %llu / %llu ops (%.0f%%)  %.0f ops/s now\n",
		s->ph == PHASE_LOAD ? "load" : "run", (double)(now - s->t0) / 1e9,
		(unsigned long long)done, (unsigned long long)total,
		total ? 100.0 * (double)done / (double)total : 0, (double)(done - *last_ops) / dt);
	*last_ops = done;
	*last_ns = now;
}

/* Split the threads' packed samples by op type into res. */
static int collect(struct worker *ws, int n, struct phase_result *res)
{
	for (int t = 0; t < n; t++) {
		for (uint64_t i = 0; i < ws[t].n; i++)
			res->n[ws[t].lat[i] >> OP_SHIFT]++;
		for (int k = 0; k < OP_N; k++)
			res->notfound[k] += ws[t].notfound[k];
		res->badlen += ws[t].badlen;
	}
	for (int k = 0; k < OP_N; k++) {
		if (!res->n[k])
			continue;
		res->samples[k] = malloc(res->n[k] * sizeof(uint64_t));
		if (res->throttled)
			res->intended[k] = malloc(res->n[k] * sizeof(uint64_t));
		if (!res->samples[k] || (res->throttled && !res->intended[k]))
			return -ENOMEM;
	}
	uint64_t fill[OP_N] = {0};
	for (int t = 0; t < n; t++)
		for (uint64_t i = 0; i < ws[t].n; i++) {
			int k = (int)(ws[t].lat[i] >> OP_SHIFT);
			res->samples[k][fill[k]] = ws[t].lat[i] & NS_MASK;
			if (res->throttled)
				res->intended[k][fill[k]] = ws[t].ilat[i] & NS_MASK;
			fill[k]++;
		}
	return 0;
}

int run_phase(const struct opts *o, enum phase ph, struct phase_result *res)
{
	const struct workload *wl = &o->w;
	struct shared s = {.o = o, .ph = ph, .be = o->be};
	int n = o->threads, failed = 0;
	int64_t total = ph == PHASE_LOAD ? wl->records : wl->ops;

	memset(res, 0, sizeof(*res));
	res->phase = ph;
	res->throttled = o->target > 0;
	s.bc = (struct be_conf){.recsize = workload_recsize(wl), .maxscan = wl->maxscan,
				.scan_index = wl->prop[OP_SCAN] > 0, .timeout_us = o->timeout_us,
				.depth = o->depth};
	if (o->target > 0)
		s.interval_ns = 1e9 * n / o->target;
	atomic_init(&s.load_next, 0);
	atomic_init(&s.stop, 0);
	char *pool = wgen_pool(POOL_LEN, s.bc.recsize, o->seed);
	struct worker *ws = calloc((size_t)n, sizeof(*ws));
	if (!pool || !ws || acked_init(&s.ins, wl->records) < 0) {
		fprintf(stderr, "zl-ycsb: out of memory\n");
		free(pool);
		free(ws);
		return 1;
	}
	s.pool = pool;
	pthread_barrier_init(&s.ready, NULL, (unsigned)n + 1);
	pthread_barrier_init(&s.go, NULL, (unsigned)n + 1);

	for (int i = 0; i < n; i++) {
		struct worker *w = &ws[i];
		w->s = &s;
		w->id = i;
		/* YCSB's split: opcount / threads, the remainder to the first */
		w->nops = total / n + (i < total % n);
		wgen_init(&w->g, wl, &s.ins, o->seed * 1000003u + (uint64_t)i * 7919u + ph, pool,
			  POOL_LEN);
		w->lat = malloc(((size_t)w->nops + 1) * sizeof(uint64_t));
		if (res->throttled)
			w->ilat = malloc(((size_t)w->nops + 1) * sizeof(uint64_t));
		if (!w->lat || (res->throttled && !w->ilat)) {
			fprintf(stderr, "zl-ycsb: no memory for %lld latency samples\n",
				(long long)w->nops);
			failed = 1;
			break;
		}
	}
	for (int i = 0; !failed && i < n; i++) {
		if (pthread_create(&ws[i].tid, NULL, worker_main, &ws[i])) {
			/* the others wait in a barrier that counts on this one */
			fprintf(stderr, "zl-ycsb: cannot start thread %d\n", i);
			exit(1);
		}
	}
	if (!failed) {
		pthread_barrier_wait(&s.ready);
		s.t0 = now_ns();
		pthread_barrier_wait(&s.go);
		uint64_t last_ops = 0, last_ns = s.t0, next = s.t0 + PROGRESS_NS;
		for (;;) { /* wait, with a progress line every ~2 s */
			struct timespec d = {0, 50 * 1000 * 1000};
			uint64_t done = 0;
			for (int i = 0; i < n; i++)
				done += atomic_load_explicit(&ws[i].done, memory_order_relaxed);
			if (done >= (uint64_t)total || atomic_load(&s.stop))
				break;
			nanosleep(&d, NULL);
			if (!o->quiet && now_ns() >= next) {
				progress(&s, ws, n, (uint64_t)total, &last_ops, &last_ns);
				next += PROGRESS_NS;
			}
		}
		for (int i = 0; i < n; i++)
			pthread_join(ws[i].tid, NULL);
	}

	uint64_t end = s.t0;
	int nfail = 0;
	for (int i = 0; i < n; i++) {
		if (ws[i].failed && !nfail++) /* the first says it all */
			fprintf(stderr, "zl-ycsb: %s: thread %d: %s\n", o->url, i, ws[i].err);
		end = ws[i].end_ns > end ? ws[i].end_ns : end;
	}
	if (nfail > 1)
		fprintf(stderr, "zl-ycsb: (%d more threads failed)\n", nfail - 1);
	failed |= nfail > 0;
	res->elapsed_ns = end - s.t0;
	if (!failed && collect(ws, n, res) < 0) {
		fprintf(stderr, "zl-ycsb: out of memory\n");
		failed = 1;
	}
	for (int i = 0; i < n; i++) {
		if (ws[i].h)
			o->be->close(ws[i].h);
		free(ws[i].lat);
		free(ws[i].ilat);
	}
	pthread_barrier_destroy(&s.ready);
	pthread_barrier_destroy(&s.go);
	acked_free(&s.ins);
	free(ws);
	free(pool);
	return failed;
}

void phase_result_free(struct phase_result *res)
{
	for (int k = 0; k < OP_N; k++) {
		free(res->samples[k]);
		free(res->intended[k]);
		res->samples[k] = res->intended[k] = NULL;
	}
}
