/* SPDX-License-Identifier: MIT */
/*
 * zl-ycsb's generators (tools/zl-ycsb/gen.c) draw YCSB's distributions:
 *  - zipfian: a chi-square test over 10^6 draws against the exact
 *    distribution of Gray et al.'s algorithm (which YCSB uses; it is
 *    Zipf's law exactly for ranks 0 and 1 and k^-theta in shape beyond),
 *    and a rank test: the log-log slope of frequency by rank is -theta.
 *    Both statistics must also reject a generator with a wrong theta,
 *    which shows the test can fail.
 *  - zeta: Euler-Maclaurin matches the direct sum and YCSB's constant.
 *  - scrambled zipfian: in range, the hottest keys are fnv64(0), fnv64(1)
 *    mod n, the hottest has probability 1/zeta(10^10).
 *  - latest and the acknowledged counter: the newest key is the hottest,
 *    also after inserts; out-of-order acks hold the limit back.
 *  - keys: "user" + FNV-64 as YCSB's buildKeyName (user6284781860667377211
 *    is YCSB's first key), and the operation mix of a workload.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "ycsb.h"

#define DRAWS 1000000
#define ITEMS 1000
#define RLO 9 /* the rank test's ranks: the k^-theta part of Gray's algorithm */
#define RHI 500

static int failures;

#define CHECK(cond, ...)                                                                  \
	do {                                                                              \
		if (!(cond)) {                                                            \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);                       \
			printf(__VA_ARGS__);                                              \
			printf("\n");                                                     \
			failures++;                                                       \
		}                                                                         \
	} while (0)

/* The exact pmf of Gray's algorithm (zipf_next_n) over n items:
 * rank 0 for u*zetan < 1, rank 1 below 1 + 0.5^theta, else
 * floor(n * (eta*u - eta + 1)^alpha), i.e. rank k for u in
 * [u(k), u(k+1)) with u(k) = ((k/n)^(1-theta) - 1)/eta + 1. */
static void gray_pmf(const struct zipf *z, double *p)
{
	double n = (double)z->items, u0 = (1 + pow(0.5, z->theta)) / z->zetan;
	for (int64_t k = 0; k < z->items; k++) {
		double a = (pow((double)k / n, 1 - z->theta) - 1) / z->eta + 1;
		double b = (pow((double)(k + 1) / n, 1 - z->theta) - 1) / z->eta + 1;
		a = a < u0 ? u0 : a > 1 ? 1 : a;
		b = b < u0 ? u0 : b > 1 ? 1 : b;
		p[k] = b > a ? b - a : 0;
	}
	p[0] += 1 / z->zetan;
	p[1] += pow(0.5, z->theta) / z->zetan;
}

/* Upper critical value of chi-square with df degrees of freedom at
 * significance 0.001 (Wilson-Hilferty; z = 3.090). */
static double chi2_crit(int df)
{
	double k = 2.0 / (9.0 * df), t = 1 - k + 3.090 * sqrt(k);
	return df * t * t * t;
}

/* Chi-square of observed counts against pmf p over n bins, merging
 * adjacent bins until each expects at least 20 draws. */
static double chi2(const uint64_t *obs, const double *p, int n, uint64_t draws, int *df)
{
	double stat = 0, e = 0, o = 0;
	int bins = 0;
	for (int k = 0; k < n; k++) {
		e += p[k] * (double)draws;
		o += (double)obs[k];
		if (e >= 20 || k == n - 1) {
			stat += (o - e) * (o - e) / e;
			bins++;
			e = o = 0;
		}
	}
	*df = bins - 1;
	return stat;
}

/* Least-squares slope of log(count) on log(rank+1) over ranks [lo, hi). */
static double rank_slope(const uint64_t *obs, int lo, int hi)
{
	double sx = 0, sy = 0, sxx = 0, sxy = 0, m = 0;
	for (int k = lo; k < hi; k++) {
		if (!obs[k])
			continue;
		double x = log(k + 1.0), y = log((double)obs[k]);
		sx += x, sy += y, sxx += x * x, sxy += x * y, m++;
	}
	return (m * sxy - sx * sy) / (m * sxx - sx * sx);
}

static void draw(double theta, uint64_t seed, uint64_t *obs)
{
	struct zipf z;
	struct rng r;
	zipf_init(&z, 0, ITEMS - 1, theta);
	rng_seed(&r, seed);
	memset(obs, 0, ITEMS * sizeof(*obs));
	for (int i = 0; i < DRAWS; i++) {
		int64_t v = zipf_next(&z, &r);
		if (v < 0 || v >= ITEMS) {
			printf("FAIL: zipfian drew %lld outside [0, %d)\n", (long long)v, ITEMS);
			failures++;
			return;
		}
		obs[v]++;
	}
}

static void test_zipfian(void)
{
	static uint64_t obs[ITEMS];
	static double p[ITEMS];
	struct zipf z;
	int df;
	zipf_init(&z, 0, ITEMS - 1, ZIPF_THETA);
	gray_pmf(&z, p);
	double sum = 0;
	for (int k = 0; k < ITEMS; k++)
		sum += p[k];
	CHECK(fabs(sum - 1) < 1e-9, "pmf sums to %.12f", sum);

	draw(ZIPF_THETA, 42, obs);
	double s = chi2(obs, p, ITEMS, DRAWS, &df), crit = chi2_crit(df);
	printf("zipfian 0.99, %d items, %d draws: chi2 %.1f, df %d, critical (p=0.001) %.1f\n",
	       ITEMS, DRAWS, s, df, crit);
	CHECK(s < crit, "theta 0.99 rejected: chi2 %.1f >= %.1f", s, crit);
	double slope = rank_slope(obs, RLO, RHI);
	printf("  rank test: log-log slope over ranks %d..%d = %.4f (want -0.99 +- 0.02)\n", RLO + 1,
	       RHI, slope);
	CHECK(fabs(slope + ZIPF_THETA) < 0.02, "slope %.4f", slope);
	/* For the record (not a check): against Zipf's law itself the
	 * statistic is large, because Gray's algorithm, like YCSB, gives
	 * ranks >= 2 a continuous approximation (at 1000 items, rank 2 gets ~17% too much). */
	static double zipf_law[ITEMS];
	for (int k = 0; k < ITEMS; k++)
		zipf_law[k] = pow(k + 1.0, -ZIPF_THETA) / z.zetan;
	printf("  (vs Zipf's law itself: chi2 %.0f; expected, see the comment)\n",
	       chi2(obs, zipf_law, ITEMS, DRAWS, &df));

	/* The same statistics must reject draws with a wrong theta. */
	const double wrong[] = {0.95, 0.9};
	for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
		draw(wrong[i], 43, obs);
		s = chi2(obs, p, ITEMS, DRAWS, &df);
		slope = rank_slope(obs, RLO, RHI);
		printf("  wrong theta %.2f vs the 0.99 pmf: chi2 %.1f (must exceed %.1f), slope "
		       "%.4f\n", wrong[i], s, crit, slope);
		CHECK(s > crit, "theta %.2f not rejected by chi2 (%.1f)", wrong[i], s);
		CHECK(fabs(slope + ZIPF_THETA) >= 0.02, "theta %.2f not rejected by slope", wrong[i]);
	}
}

static void test_zeta(void)
{
	double direct = 0;
	for (int64_t i = 1; i <= 5000000; i++)
		direct += 1.0 / pow((double)i, ZIPF_THETA);
	double em = zeta_sum(0, 5000000, ZIPF_THETA, 0); /* > 4e6 terms: Euler-Maclaurin */
	printf("zeta(5e6): direct %.12f, Euler-Maclaurin %.12f\n", direct, em);
	CHECK(fabs(em - direct) < 1e-9 * direct, "zeta mismatch");
	double big = zeta_sum(0, SCRAMBLED_ITEMS, ZIPF_THETA, 0);
	printf("zeta(1e10) = %.14f, YCSB's constant %.14f\n", big, SCRAMBLED_ZETAN);
	CHECK(fabs(big - SCRAMBLED_ZETAN) < 1e-8 * SCRAMBLED_ZETAN, "zeta(1e10) off");
	/* incremental growth (SkewedLatest) equals a fresh computation */
	struct zipf z;
	struct rng r;
	rng_seed(&r, 1);
	zipf_init(&z, 0, 999, ZIPF_THETA);
	zipf_next_n(&z, &r, 5000);
	double fresh = zeta_sum(0, 5000, ZIPF_THETA, 0);
	CHECK(fabs(z.zetan - fresh) < 1e-9 * fresh, "incremental zeta %.12f vs %.12f", z.zetan,
	      fresh);
}

static void test_scrambled(void)
{
	enum { N = 10000 };
	static uint64_t obs[N];
	struct scrambled sz;
	struct rng r;
	scrambled_init(&sz, 0, N - 1, ZIPF_THETA);
	rng_seed(&r, 7);
	int bad = 0;
	for (int i = 0; i < DRAWS; i++) {
		int64_t v = scrambled_next(&sz, &r);
		if (v < 0 || v >= N)
			bad++;
		else
			obs[v]++;
	}
	CHECK(!bad, "%d scrambled draws out of range", bad);
	int64_t top = 0, distinct = 0;
	for (int k = 0; k < N; k++) {
		top = obs[k] > obs[top] ? k : top;
		distinct += obs[k] > 0;
	}
	double f = (double)obs[top] / DRAWS, want = 1 / SCRAMBLED_ZETAN;
	printf("scrambled zipfian over %d: hottest key %lld (%.4f of draws, want %.4f), "
	       "%lld keys drawn\n", N, (long long)top, f, want, (long long)distinct);
	CHECK(top == fnv64(0) % N, "hottest is %lld, not fnv64(0) %% n = %lld", (long long)top,
	      (long long)(fnv64(0) % N));
	CHECK(fabs(f - want) < 0.002, "hottest frequency %.4f", f);
	int64_t second = fnv64(1) % N;
	CHECK(obs[second] > obs[top] / 3 && obs[second] < obs[top], "second hottest off");
	CHECK(distinct > N * 99 / 100, "only %lld of %d keys drawn", (long long)distinct, N);
}

static void test_latest(void)
{
	enum { N = 1000 };
	static uint64_t obs[N + 20];
	struct acked a;
	struct latest l;
	struct rng r;
	CHECK(acked_init(&a, N) == 0, "acked_init");
	CHECK(acked_last(&a) == N - 1, "last %lld", (long long)acked_last(&a));
	latest_init(&l, &a);
	rng_seed(&r, 9);
	for (int i = 0; i < DRAWS / 4; i++) {
		int64_t v = latest_next(&l, &r);
		if (v < 0 || v > N - 1) {
			CHECK(0, "latest drew %lld", (long long)v);
			break;
		}
		obs[v]++;
	}
	CHECK(obs[N - 1] > obs[N - 2] && obs[N - 2] > obs[N - 10] && obs[N - 10] > obs[N / 2],
	      "newest keys not the hottest");
	/* out-of-order acks: 1000 1001 1002 handed out, 1001 acked first */
	int64_t k0 = acked_next(&a), k1 = acked_next(&a), k2 = acked_next(&a);
	CHECK(k0 == N && k1 == N + 1 && k2 == N + 2, "counter %lld %lld %lld", (long long)k0,
	      (long long)k1, (long long)k2);
	acked_ack(&a, k1);
	CHECK(acked_last(&a) == N - 1, "limit moved past an unacked key");
	acked_ack(&a, k0);
	CHECK(acked_last(&a) == N + 1, "limit %lld, want %d", (long long)acked_last(&a), N + 1);
	acked_ack(&a, k2);
	CHECK(acked_last(&a) == N + 2, "limit %lld", (long long)acked_last(&a));
	memset(obs, 0, sizeof(obs));
	for (int i = 0; i < DRAWS / 4; i++) {
		int64_t v = latest_next(&l, &r);
		if (v >= 0 && v <= N + 2)
			obs[v]++;
		else
			CHECK(0, "latest drew %lld after inserts", (long long)v);
	}
	CHECK(obs[N + 2] > obs[N + 1] && obs[N + 1] > obs[N - 1],
	      "after inserts the newest keys are not the hottest");
	acked_free(&a);
}

static void test_keys_and_ops(void)
{
	char key[KEY_MAX];
	size_t n = wgen_key(0, key);
	CHECK(n == strlen("user6284781860667377211") && !strcmp(key, "user6284781860667377211"),
	      "key 0 is %s", key);
	wgen_key(1, key);
	CHECK(!strcmp(key, "user8517097267634966620"), "key 1 is %s", key);
	for (int64_t i = 0; i < 200000; i++) { /* the hand-made formatting */
		char want[KEY_MAX];
		snprintf(want, sizeof(want), "user%lld", (long long)fnv64(i * 7919));
		if (wgen_key(i * 7919, key) != strlen(want) || strcmp(key, want)) {
			CHECK(0, "key %lld: %s, want %s", (long long)i * 7919, key, want);
			break;
		}
	}

	struct workload w = {.records = 1000, .ops = 100000, .fieldcount = 10, .fieldlength = 100};
	struct acked a;
	struct wgen g;
	uint64_t cnt[OP_N] = {0};
	CHECK(workload_set(&w, 'e') == 0 && acked_init(&a, w.records) == 0, "setup");
	wgen_init(&g, &w, &a, 5, "x", 1);
	for (int i = 0; i < 100000; i++)
		cnt[wgen_op(&g)]++;
	printf("workload e mix over 1e5: scan %llu insert %llu\n", (unsigned long long)cnt[OP_SCAN],
	       (unsigned long long)cnt[OP_INSERT]);
	CHECK(cnt[OP_SCAN] + cnt[OP_INSERT] == 100000 && llabs((long long)cnt[OP_INSERT] - 5000) < 400,
	      "workload e mix");
	uint32_t lo = 1000, hi = 0;
	for (int i = 0; i < 10000; i++) {
		uint32_t s = wgen_scanlen(&g);
		lo = s < lo ? s : lo;
		hi = s > hi ? s : hi;
	}
	CHECK(lo == 1 && hi == 100, "scan lengths %u..%u", lo, hi);
	for (int i = 0; i < 10000; i++) {
		int64_t k = wgen_keynum(&g);
		if (k < 0 || k >= w.records) {
			CHECK(0, "key %lld not loaded yet", (long long)k);
			break;
		}
	}
	acked_free(&a);
}

int main(void)
{
	test_zeta();
	test_zipfian();
	test_scrambled();
	test_latest();
	test_keys_and_ops();
	printf("%s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
