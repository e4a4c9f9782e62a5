/* SPDX-License-Identifier: MIT */
/* YCSB generators (see gen.h). Comments cite the Java originals. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "gen.h"

void rng_seed(struct rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++) { /* splitmix64 */
		uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		r->s[i] = z ^ (z >> 31);
	}
}

int64_t rng_range(struct rng *r, int64_t lo, int64_t hi)
{
	return lo + (int64_t)(rng_double(r) * (double)(hi - lo + 1));
}

int64_t fnv64(int64_t v)
{
	uint64_t h = 0xcbf29ce484222325ull, val = (uint64_t)v;
	for (int i = 0; i < 8; i++) {
		h ^= val & 0xff;
		val >>= 8; /* Java's >> is arithmetic, but only 8 bytes are used */
		h *= 1099511628211ull;
	}
	int64_t s = (int64_t)h;
	return s < 0 && s != INT64_MIN ? -s : s;
}

/* Terms summed one by one; a run past this switches to Euler-Maclaurin. */
#define ZETA_DIRECT 4000000

/* sum_{i=a}^{b} i^-t for 1 <= a <= b by Euler-Maclaurin, the first terms
 * exact so the remainder is smooth. */
static double zeta_em(double a, double b, double t)
{
	double s = 0;
	for (int k = 0; k < 1000 && a <= b; k++, a++)
		s += pow(a, -t);
	if (a > b)
		return s;
	double integ = fabs(t - 1) < 1e-12 ? log(b / a)
					    : (pow(b, 1 - t) - pow(a, 1 - t)) / (1 - t);
	double f1a = -t * pow(a, -t - 1), f1b = -t * pow(b, -t - 1);
	double f3a = -t * (t + 1) * (t + 2) * pow(a, -t - 3);
	double f3b = -t * (t + 1) * (t + 2) * pow(b, -t - 3);
	return s + integ + (pow(a, -t) + pow(b, -t)) / 2 + (f1b - f1a) / 12 - (f3b - f3a) / 720;
}

double zeta_sum(int64_t st, int64_t n, double theta, double init)
{
	if (n - st > ZETA_DIRECT)
		return init + zeta_em((double)st + 1, (double)n, theta);
	double sum = init;
	for (int64_t i = st; i < n; i++)
		sum += 1.0 / pow((double)(i + 1), theta);
	return sum;
}

void zipf_init_zeta(struct zipf *z, int64_t min, int64_t max, double theta, double zetan)
{
	z->items = max - min + 1;
	z->base = min;
	z->theta = theta;
	z->zeta2 = zeta_sum(0, 2, theta, 0);
	z->half_pow_theta = pow(0.5, theta);
	z->alpha = 1.0 / (1.0 - theta);
	z->zetan = zetan;
	z->count_for_zeta = z->items;
	z->eta = (1 - pow(2.0 / (double)z->items, 1 - theta)) / (1 - z->zeta2 / zetan);
}

void zipf_init(struct zipf *z, int64_t min, int64_t max, double theta)
{
	zipf_init_zeta(z, min, max, theta, zeta_sum(0, max - min + 1, theta, 0));
}

int64_t zipf_next_n(struct zipf *z, struct rng *r, int64_t itemcount)
{
	if (itemcount > z->count_for_zeta) {
		/* more items since: extend zeta by the new terms (YCSB does not
		 * shrink it unless told to, and neither do we) */
		z->zetan = zeta_sum(z->count_for_zeta, itemcount, z->theta, z->zetan);
		z->count_for_zeta = itemcount;
		z->eta = (1 - pow(2.0 / (double)z->items, 1 - z->theta)) / (1 - z->zeta2 / z->zetan);
	}
	double u = rng_double(r), uz = u * z->zetan;
	if (uz < 1.0)
		return z->base;
	if (uz < 1.0 + z->half_pow_theta)
		return z->base + 1;
	return z->base + (int64_t)((double)itemcount * pow(z->eta * u - z->eta + 1, z->alpha));
}

void scrambled_init(struct scrambled *s, int64_t min, int64_t max, double theta)
{
	s->min = min;
	s->itemcount = max - min + 1;
	if (theta == ZIPF_THETA)
		zipf_init_zeta(&s->z, 0, SCRAMBLED_ITEMS, theta, SCRAMBLED_ZETAN);
	else
		zipf_init(&s->z, 0, SCRAMBLED_ITEMS, theta); /* Euler-Maclaurin: fast */
}

int64_t scrambled_next(struct scrambled *s, struct rng *r)
{
	/* C's % truncates toward zero like Java's, INT64_MIN case included */
	return s->min + fnv64(zipf_next(&s->z, r)) % s->itemcount;
}

int acked_init(struct acked *a, int64_t start)
{
	a->window = calloc(ACKED_WINDOW, sizeof(*a->window));
	if (!a->window)
		return -ENOMEM;
	atomic_init(&a->next, start);
	atomic_init(&a->limit, start - 1);
	atomic_flag_clear(&a->lock);
	return 0;
}

void acked_free(struct acked *a)
{
	free((void *)a->window);
	a->window = NULL;
}

int acked_ack(struct acked *a, int64_t v)
{
	const int64_t mask = ACKED_WINDOW - 1;
	_Atomic uint8_t *w = &a->window[v & mask];
	if (atomic_load_explicit(w, memory_order_relaxed))
		return -EOVERFLOW; /* YCSB: "Too many unacknowledged insertion keys." */
	atomic_store_explicit(w, 1, memory_order_release);
	/* Whoever gets the lock advances the limit over every contiguous ack;
	 * a thread that misses it leaves its ack for the next one, as YCSB's
	 * tryLock does. */
	if (atomic_flag_test_and_set_explicit(&a->lock, memory_order_acquire))
		return 0;
	int64_t limit = atomic_load_explicit(&a->limit, memory_order_relaxed), i;
	int64_t stop = limit & mask; /* never wrap onto our own start */
	for (i = limit + 1; (i & mask) != stop; i++) {
		_Atomic uint8_t *s = &a->window[i & mask];
		if (!atomic_load_explicit(s, memory_order_acquire))
			break;
		atomic_store_explicit(s, 0, memory_order_relaxed);
	}
	atomic_store_explicit(&a->limit, i - 1, memory_order_release);
	atomic_flag_clear_explicit(&a->lock, memory_order_release);
	return 0;
}

void latest_init(struct latest *l, const struct acked *basis)
{
	l->basis = basis;
	int64_t items = acked_last(basis); /* ZipfianGenerator(lastValue) */
	zipf_init(&l->z, 0, (items > 1 ? items : 1) - 1, ZIPF_THETA);
}

int64_t latest_next(struct latest *l, struct rng *r)
{
	int64_t max = acked_last(l->basis);
	return max - zipf_next_n(&l->z, r, max);
}
