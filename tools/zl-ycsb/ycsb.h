/* SPDX-License-Identifier: MIT */
/* zl-ycsb: shared types of the YCSB driver. */
#ifndef ZLY_YCSB_H
#define ZLY_YCSB_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "gen.h"

/* ---- workloads (workload.c) ------------------------------------------- */

/* In YCSB's order (CoreWorkload.createOperationGenerator). */
enum op { OP_READ, OP_UPDATE, OP_INSERT, OP_SCAN, OP_RMW, OP_N };
enum dist { DIST_UNIFORM, DIST_ZIPFIAN, DIST_LATEST };

extern const char *const op_name[OP_N]; /* "READ", ... "READ-MODIFY-WRITE" */

struct workload {
	char name;          /* 'a'..'f' */
	double prop[OP_N];  /* operation proportions */
	enum dist dist;     /* requestdistribution */
	uint32_t maxscan;   /* maxscanlength; scan length uniform 1..maxscan */
	int64_t records;    /* recordcount */
	int64_t ops;        /* operationcount */
	uint32_t fieldcount, fieldlength;
};

/* Set w to YCSB's workload name ('a'..'f'); records etc. are left alone.
 * 0 or -EINVAL. */
int workload_set(struct workload *w, char name);
/* "read 95% update 5%, zipfian" */
void workload_describe(const struct workload *w, char *buf, size_t cap);
static inline size_t workload_recsize(const struct workload *w)
{
	return (size_t)w->fieldcount * w->fieldlength;
}

/* Per-thread request generation: keys, operations, values. */
struct wgen {
	const struct workload *w;
	struct rng rng;
	struct acked *ins;  /* run-phase insert keys (shared) */
	struct scrambled sz;
	struct latest lt;
	const char *pool;   /* random record bytes; values are windows of it */
	size_t pool_len;
};

#define KEY_MAX 32 /* "user" + a signed 64-bit decimal */

/* ins is shared by all threads; pool is built once by wgen_pool. */
void wgen_init(struct wgen *g, const struct workload *w, struct acked *ins, uint64_t seed,
	       const char *pool, size_t pool_len);
/* Random printable bytes for values: len + recsize, one allocation. */
char *wgen_pool(size_t len, size_t recsize, uint64_t seed);
enum op wgen_op(struct wgen *g);
/* CoreWorkload.nextKeynum: a key that exists (rejects keys not yet
 * acknowledged). */
int64_t wgen_keynum(struct wgen *g);
/* CoreWorkload.buildKeyName with insertorder=hashed: "user" + fnv64(n). */
size_t wgen_key(int64_t keynum, char *buf);
/* A fresh record value: all fields (writeallfields=true). */
const char *wgen_value(struct wgen *g);
uint32_t wgen_scanlen(struct wgen *g);

/* ---- backends (be_*.c) ------------------------------------------------ */

struct be_conf {
	size_t recsize;     /* bytes of one record */
	uint32_t maxscan;   /* longest scan */
	int scan_index;     /* redis: keep the sorted-set key index */
	int64_t timeout_us; /* every read, write and connect */
	int depth;          /* operations in flight per thread (batch) */
};

/* One operation of a batch: reads, updates and inserts only. */
struct be_op {
	enum op op;
	const char *key;
	size_t klen;
	const void *val;
	size_t vlen; /* in: the value's; out: a read's */
	int rc;      /* out: 0 or -ENOENT */
};

#define DEPTH_MAX 64

/*
 * Results: 0; -ENOENT (no such key: the operation fails, the run goes on);
 * anything else is fatal for the run, with a message in the handle
 * (be_error). scan is NULL where the store has none.
 */
struct backend {
	const char *scheme; /* "redis://" */
	int (*open)(const char *addr, const struct be_conf *c, void **h);
	void (*close)(void *h);
	const char *(*error)(void *h);
	int (*read)(void *h, const char *key, size_t klen, size_t *vlen);
	int (*update)(void *h, const char *key, size_t klen, const void *val, size_t vlen);
	int (*insert)(void *h, const char *key, size_t klen, const void *val, size_t vlen);
	int (*scan)(void *h, const char *key, size_t klen, uint32_t n, uint32_t *got);
	/* read, then write val; *oldlen gets the length read */
	int (*rmw)(void *h, const char *key, size_t klen, const void *val, size_t vlen,
		   size_t *oldlen);
	/* n (1..depth) operations in flight at once (pipelined); NULL where
	 * the backend cannot. 0 (each op's own result in rc) or fatal. */
	int (*batch)(void *h, struct be_op *ops, int n);
	const char *scan_how; /* for --help and the header */
};

extern const struct backend be_redis, be_memcached, be_zl, be_null;

/* ---- run (run.c) ------------------------------------------------------ */

enum phase { PHASE_LOAD, PHASE_RUN };

struct opts {
	const char *url;      /* as given, e.g. redis://127.0.0.1:6379 */
	const char *addr;     /* after the scheme */
	const struct backend *be;
	struct workload w;
	int threads;
	int depth;            /* operations in flight per thread */
	double target;        /* ops/s over all threads, 0 = unthrottled */
	uint64_t seed;
	int64_t timeout_us;
	const char *label;    /* CSV "backend" column; NULL: the URL */
	const char *csv, *plot;
	int quiet;            /* no progress lines */
};

/* Latencies of one phase in ns: samples[op] for every op type; when
 * throttled also intended[op], from the scheduled start. */
struct phase_result {
	enum phase phase;
	uint64_t *samples[OP_N], n[OP_N];
	uint64_t *intended[OP_N];
	uint64_t notfound[OP_N]; /* failed with -ENOENT */
	uint64_t badlen;         /* reads whose value was not recsize bytes */
	uint64_t elapsed_ns;
	int throttled;
};

/* Run one phase with o->threads threads. 0, or 1 after a reported error. */
int run_phase(const struct opts *o, enum phase ph, struct phase_result *res);
void phase_result_free(struct phase_result *res);

/* ---- report (stats.c, plot.c) ----------------------------------------- */

struct lat_stats {
	uint64_t count;
	double ops_per_s, median_us, p99_us, p999_us, max_us;
};

/* Sorts v. */
void lat_stats(uint64_t *v, uint64_t n, uint64_t elapsed_ns, struct lat_stats *s);
/* Table on stdout and CSV rows; fills st[OP_N + 1] (the last: OVERALL).
 * 0, or -errno when the CSV could not be written. */
int report_phase(const struct opts *o, struct phase_result *r, struct lat_stats *st);
/* 0 written, 1 no gnuplot (note printed), -1 gnuplot failed. */
int plot_png(const struct opts *o, const struct phase_result *const *r,
	     struct lat_stats *const *st, int nphases);

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
