/* SPDX-License-Identifier: MIT */
/*
 * YCSB's number generators, reimplemented to draw the same distributions
 * as the Java originals (site.ycsb.generator):
 *   ZipfianGenerator          Gray et al., "Quickly Generating Billion-Record
 *                             Synthetic Databases", SIGMOD 1994
 *   ScrambledZipfianGenerator zipfian over 10^10 items, FNV-hashed mod n
 *   SkewedLatestGenerator     zipfian distance below the newest key
 *   AcknowledgedCounterGenerator  insert keys, visible once acknowledged
 * Each thread has its own struct rng and its own generator copies; only
 * struct acked is shared (atomics).
 */
#ifndef ZLY_GEN_H
#define ZLY_GEN_H

#include <stdatomic.h>
#include <stdint.h>

#define ZIPF_THETA 0.99 /* YCSB's zipfian constant */
/* ScrambledZipfianGenerator's item space and its precomputed zeta
 * (theta 0.99): YCSB never sums 10^10 terms at run time and neither do we. */
#define SCRAMBLED_ITEMS 10000000000LL
#define SCRAMBLED_ZETAN 26.46902820178302

/* xoshiro256**: fast, 2^256 period; seeded through splitmix64. */
struct rng {
	uint64_t s[4];
};

void rng_seed(struct rng *r, uint64_t seed);

static inline uint64_t rng_next(struct rng *r)
{
	uint64_t *s = r->s;
	uint64_t x = s[1] * 5, res = ((x << 7) | (x >> 57)) * 9, t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = (s[3] << 45) | (s[3] >> 19);
	return res;
}

/* Uniform in [0, 1), 53 bits, like Java's nextDouble. */
static inline double rng_double(struct rng *r)
{
	return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* Uniform in [lo, hi] (YCSB UniformLongGenerator). */
int64_t rng_range(struct rng *r, int64_t lo, int64_t hi);

/* YCSB Utils.fnvhash64: FNV-1a over the 8 bytes of v, then Math.abs on
 * the signed result (so INT64_MIN stays negative, as in Java). */
int64_t fnv64(int64_t v);

/* sum_{i=st}^{n-1} 1/(i+1)^theta + init (YCSB zetastatic). Summed term by
 * term up to a few million terms; beyond that by Euler-Maclaurin, which
 * agrees with the sum to ~1e-12 relative. */
double zeta_sum(int64_t st, int64_t n, double theta, double init);

struct zipf {
	int64_t base, items;  /* values base .. base+items-1 */
	double theta, alpha, zeta2, zetan, eta;
	double half_pow_theta; /* 0.5^theta, once: pow() is most of a draw */
	int64_t count_for_zeta; /* item count zetan was computed for */
};

/* ZipfianGenerator(min, max, theta): computes zeta(items) once. */
void zipf_init(struct zipf *z, int64_t min, int64_t max, double theta);
/* ... with a precomputed zetan (YCSB's 4-argument constructor). */
void zipf_init_zeta(struct zipf *z, int64_t min, int64_t max, double theta, double zetan);
/* nextLong(itemcount): when itemcount grows, zetan is extended by the
 * new terms only (as YCSB); eta keeps YCSB's use of the original items. */
int64_t zipf_next_n(struct zipf *z, struct rng *r, int64_t itemcount);
static inline int64_t zipf_next(struct zipf *z, struct rng *r)
{
	return zipf_next_n(z, r, z->items);
}

struct scrambled {
	struct zipf z;
	int64_t min, itemcount;
};

/* ScrambledZipfianGenerator(min, max, theta) over [min, max]. */
void scrambled_init(struct scrambled *s, int64_t min, int64_t max, double theta);
int64_t scrambled_next(struct scrambled *s, struct rng *r);

/*
 * AcknowledgedCounterGenerator: next() hands out insert key numbers in
 * order (one atomic add); last() is the highest number below which every
 * key has been acknowledged, i.e. is readable. Acks arrive out of order
 * from several threads; a window of 2^20 flags tracks them.
 */
#define ACKED_WINDOW (1u << 20)
struct acked {
	_Atomic int64_t next;
	_Atomic int64_t limit;
	atomic_flag lock;
	_Atomic uint8_t *window;
};

int acked_init(struct acked *a, int64_t start); /* 0 or -ENOMEM */
void acked_free(struct acked *a);
static inline int64_t acked_next(struct acked *a)
{
	return atomic_fetch_add_explicit(&a->next, 1, memory_order_relaxed);
}
static inline int64_t acked_last(const struct acked *a)
{
	return atomic_load_explicit(&a->limit, memory_order_acquire);
}
/* 0, or -EOVERFLOW: more than the window unacknowledged. */
int acked_ack(struct acked *a, int64_t v);

/* SkewedLatestGenerator over an acknowledged counter: returns
 * last - zipfian(last), so the newest keys are the most popular. */
struct latest {
	struct zipf z;
	const struct acked *basis;
};

void latest_init(struct latest *l, const struct acked *basis);
int64_t latest_next(struct latest *l, struct rng *r);

#endif
