/* SPDX-License-Identifier: MIT */
/*
 * YCSB core workloads A-F (workloads/workload[a-f] of YCSB) and the
 * per-thread request generation of CoreWorkload.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ycsb.h"

const char *const op_name[OP_N] = {"READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE"};

int workload_set(struct workload *w, char name)
{
	memset(w->prop, 0, sizeof(w->prop));
	w->dist = DIST_ZIPFIAN;
	w->maxscan = 1000; /* YCSB default; only E scans, with 100 */
	w->name = name;
	switch (name) {
	case 'a': /* update heavy */
		w->prop[OP_READ] = 0.5, w->prop[OP_UPDATE] = 0.5;
		break;
	case 'b': /* read mostly */
		w->prop[OP_READ] = 0.95, w->prop[OP_UPDATE] = 0.05;
		break;
	case 'c': /* read only */
		w->prop[OP_READ] = 1.0;
		break;
	case 'd': /* read latest */
		w->prop[OP_READ] = 0.95, w->prop[OP_INSERT] = 0.05;
		w->dist = DIST_LATEST;
		break;
	case 'e': /* short ranges */
		w->prop[OP_SCAN] = 0.95, w->prop[OP_INSERT] = 0.05;
		w->maxscan = 100;
		break;
	case 'f': /* read-modify-write */
		w->prop[OP_READ] = 0.5, w->prop[OP_RMW] = 0.5;
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

void workload_describe(const struct workload *w, char *buf, size_t cap)
{
	static const char *lower[OP_N] = {"read", "update", "insert", "scan", "rmw"};
	static const char *dist[] = {"uniform", "zipfian 0.99 scrambled", "latest"};
	size_t n = 0;
	buf[0] = 0;
	for (int i = 0; i < OP_N && n < cap; i++)
		if (w->prop[i] > 0)
			n += (size_t)snprintf(buf + n, cap - n, "%s%s %g%%", n ? " " : "", lower[i],
					      w->prop[i] * 100);
	if (n < cap)
		snprintf(buf + n, cap - n, ", %s%s", dist[w->dist],
			 w->prop[OP_SCAN] > 0 ? ", scan length uniform 1..100" : "");
}

char *wgen_pool(size_t len, size_t recsize, uint64_t seed)
{
	char *p = malloc(len + recsize);
	if (!p)
		return NULL;
	struct rng r;
	rng_seed(&r, seed ^ 0x706f6f6cull);
	/* printable ASCII, as YCSB's RandomByteIterator (' ' .. '~') */
	for (size_t i = 0; i < len + recsize; i++)
		p[i] = (char)(' ' + (rng_next(&r) >> 32) % 95);
	return p;
}

void wgen_init(struct wgen *g, const struct workload *w, struct acked *ins, uint64_t seed,
	       const char *pool, size_t pool_len)
{
	memset(g, 0, sizeof(*g));
	g->w = w;
	g->ins = ins;
	g->pool = pool;
	g->pool_len = pool_len;
	rng_seed(&g->rng, seed);
	if (w->dist == DIST_ZIPFIAN) {
		/* CoreWorkload: the key space includes the inserts expected
		 * during the run (x2 "fudge factor") so that the popular keys do
		 * not move as records are added; keys not inserted yet are
		 * rejected by wgen_keynum. */
		int64_t expected = (int64_t)((double)w->ops * w->prop[OP_INSERT] * 2.0);
		scrambled_init(&g->sz, 0, w->records + expected, ZIPF_THETA);
	} else if (w->dist == DIST_LATEST) {
		latest_init(&g->lt, ins);
	}
}

enum op wgen_op(struct wgen *g)
{
	/* DiscreteGenerator.nextString */
	double sum = 0, v = rng_double(&g->rng);
	for (int i = 0; i < OP_N; i++)
		sum += g->w->prop[i];
	for (int i = 0; i < OP_N; i++) {
		double p = g->w->prop[i] / sum;
		if (p > 0 && v < p)
			return (enum op)i;
		v -= p;
	}
	for (int i = OP_N - 1; i > 0; i--) /* rounding: the last op present */
		if (g->w->prop[i] > 0)
			return (enum op)i;
	return OP_READ;
}

int64_t wgen_keynum(struct wgen *g)
{
	int64_t k, last = acked_last(g->ins);
	do {
		switch (g->w->dist) {
		case DIST_UNIFORM:
			k = rng_range(&g->rng, 0, g->w->records - 1);
			break;
		case DIST_ZIPFIAN:
			/* YCSB takes intValue() of the draw; our key spaces are
			 * far below 2^31, so that is the identity */
			k = scrambled_next(&g->sz, &g->rng);
			break;
		default:
			k = latest_next(&g->lt, &g->rng);
			break;
		}
	} while (k > last);
	return k;
}

size_t wgen_key(int64_t keynum, char *buf)
{
	/* "user" + Long.toString of the hash (zeropadding=1 adds nothing);
	 * by hand, two digits a step: snprintf would be a visible part of a
	 * sub-microsecond operation */
	static const char d2[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
				 "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
				 "8081828384858687888990919293949596979899";
	int64_t h = fnv64(keynum);
	char tmp[24], *p = tmp + sizeof(tmp);
	uint64_t u = h < 0 ? (uint64_t)0 - (uint64_t)h : (uint64_t)h;
	while (u >= 100) {
		unsigned r = (unsigned)(u % 100);
		u /= 100;
		*--p = d2[2 * r + 1];
		*--p = d2[2 * r];
	}
	if (u >= 10) {
		*--p = d2[2 * u + 1];
		*--p = d2[2 * u];
	} else {
		*--p = (char)('0' + u);
	}
	size_t len = 4, n = (size_t)(tmp + sizeof(tmp) - p);
	memcpy(buf, "user", 4);
	if (h < 0)
		buf[len++] = '-';
	memcpy(buf + len, p, n);
	len += n;
	buf[len] = 0;
	return len;
}

const char *wgen_value(struct wgen *g)
{
	return g->pool + rng_next(&g->rng) % g->pool_len;
}

uint32_t wgen_scanlen(struct wgen *g)
{
	return (uint32_t)rng_range(&g->rng, 1, g->w->maxscan);
}
