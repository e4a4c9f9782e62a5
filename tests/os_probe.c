/* SPDX-License-Identifier: MIT */
/*
 * os_probe: the one-sided table's probe counts against Knuth (the Falafel thesis,
 * section 5.3), without a server. A table of 2^20 slots lives in private
 * memory behind a struct os_io whose read, write and cas are plain copies
 * (table.c's client code, unchanged, does the walking). It is filled with
 * distinct random keys (16 B keys, 8 B values: 64 B containers) up to load
 * factors 0.1 .. 0.9; at each, with t.load set to the true load factor
 * (the readahead target):
 *   - every key is read back with os_get. Each GET's probes (t.get.probes
 *     delta) must equal the slots from the key's home to its slot, both
 *     ends included, found independently from the table's memory: probes
 *     count slots examined, not reads. Their mean must be within 10% of
 *     Knuth's successful search, C = 1/2 (1 + 1/(1-a)).
 *   - 2^16 absent keys are looked up: each GET's probes must equal the
 *     slots from home to the first empty one, included; their mean must be
 *     within 10% of Knuth's unsuccessful search, C' = 1/2 (1 + 1/(1-a)^2),
 *     for a <= 0.8. At 0.9 the table itself varies too much for 10% (its
 *     clusters decide C': over 300 simulated 2^20-slot tables the mean over
 *     all homes had a standard deviation of 2.2% and a worst case of 7.4%),
 *     so there it is printed, and only held to 25%.
 *   - t.get.reads and t.get.syncs must equal the read and sync calls the
 *     os_io saw (and GETs never write, CAS or retry here); reads and round
 *     trips (syncs) per GET are printed: what table.c's readahead of
 *     entries and containers, sized from t.load, costs at each load.
 * The sizes: at 2^16 slots a 0.9 table's mean C varies by 3.7% (sd; 10.8%
 * worst of 200 simulated tables), at 2^20 by 0.9% (3.5% worst of 300).
 * Scaled-down (sanitizer) runs take 2^18 slots: over 2000 simulated tables
 * the worst C at 0.9 was 7.2% off, C' 6.7% at 0.8 and 16% at 0.9.
 * Exit 0 pass, 1 fail.
 */
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "table.h"
#include "testlib.h"

#define LG_SLOTS 20        /* 18 in scaled-down (sanitizer) runs */
#define KLEN 16u
#define VLEN 8u
#define CT_SIZE 64u /* os_ct_size(KLEN, VLEN) */
#define NABSENT (1u << 16)
#define TOL 0.10
#define TOL_U90 0.25

struct mem {
	uint8_t *base;
	uint64_t reads, writes, cas, syncs;
};

static int m_read(void *ctx, uint64_t off, void *dst, uint32_t len)
{
	struct mem *m = ctx;
	m->reads++;
	memcpy(dst, m->base + off, len);
	return 0;
}

static int m_write(void *ctx, uint64_t off, const void *src, uint32_t len)
{
	struct mem *m = ctx;
	m->writes++;
	if (m->base + off != src)
		memcpy(m->base + off, src, len);
	return 0;
}

static int m_cas(void *ctx, uint64_t off, uint64_t expect, uint64_t desired, uint64_t *old)
{
	struct mem *m = ctx;
	uint64_t *w = (uint64_t *)(m->base + off);
	m->cas++;
	*old = *w;
	if (*w == expect)
		*w = desired;
	return 0;
}

static int m_sync(void *ctx)
{
	((struct mem *)ctx)->syncs++;
	return 0;
}

static uint64_t seed;
static uint64_t NSLOTS, MASK;

static double dabs(double x) { return x < 0 ? -x : x; }

/* Key i: 8 random bytes and i (distinct by construction); absent keys have
 * the top bit of the index set. */
static void make_key(uint8_t *k, uint64_t i)
{
	uint64_t s = seed ^ (i * 0x9e3779b97f4a7c15ull);
	uint64_t r = tl_splitmix(&s);
	memcpy(k, &r, 8);
	memcpy(k + 8, &i, 8);
}

int main(void)
{
	tl_watchdog(240);
	seed = tl_seed();
	NSLOTS = 1ull << (tl_scaled_down() ? LG_SLOTS - 2 : LG_SLOTS);
	MASK = NSLOTS - 1;
	CHECK(os_ct_size(KLEN, VLEN) == CT_SIZE);
	const uint64_t nmax = (uint64_t)(0.9 * NSLOTS + 0.5);
	struct os_geom g = { .table_off = 4096, .nslots = NSLOTS };
	g.data_off = g.table_off + NSLOTS * 8;
	g.region_len = (nmax + 16) * CT_SIZE;
	g.nregions = 1;
	g.data_len = g.region_len;
	g.chunk_len = g.data_off + g.data_len;
	CHECK_OK(os_geom_check(&g));

	struct mem m = { .base = calloc(1, g.chunk_len) };
	uint64_t *slot_of = malloc(nmax * sizeof(uint64_t));
	uint32_t *to_empty = malloc(NSLOTS * sizeof(uint32_t));
	if (!m.base || !slot_of || !to_empty)
		SKIP("cannot allocate %llu MiB", (unsigned long long)(g.chunk_len >> 20));
	struct os_io io = { m_read, m_write, m_cas, m_sync, &m };
	struct os_table t;
	CHECK_OK(os_table_init(&t, &g, &io));
	t.budget_us = 10000000; /* restarts: none expected, but a slow (sanitizer) run may
				   take table.c's re-read path */
	uint64_t *words = (uint64_t *)(m.base + g.table_off);

	printf("%llu slots, %u B containers, %u absent keys per load\n",
	       (unsigned long long)NSLOTS, CT_SIZE, NABSENT);
	printf("                                   |                             "
	       "| per GET       | per absent GET\n");
	printf(" load  Knuth C  measured   ratio  | Knuth C'  measured   ratio  |  reads  waits "
	       "|  reads  waits\n");
	uint64_t n = 0;
	int failed = 0;
	for (int lf = 1; lf <= 9; lf++) {
		double a_target = lf / 10.0;
		uint64_t target = (uint64_t)(a_target * NSLOTS + 0.5);
		/* fill up to the target with fresh keys ("only if absent") */
		for (; n < target; n++) {
			uint8_t key[KLEN];
			make_key(key, n);
			uint64_t off = g.data_off + n * CT_SIZE;
			struct os_wctx w = { .off = off, .local = m.base + off, .version = n + 1 };
			t.load = (double)n / NSLOTS;
			int rc = os_set(&t, key, KLEN, &n, VLEN, 0, &w);
			CHECKF(rc == 0, "insert of key %llu at load %.3f: %s", (unsigned long long)n,
			       t.load, zl_strerror(rc));
		}
		double a = (double)n / NSLOTS;
		t.load = a;

		/* where every key is, from the table's memory alone */
		uint64_t occupied = 0;
		for (uint64_t s = 0; s < NSLOTS; s++) {
			uint32_t o = os_e_off(words[s]);
			if (o == OS_OFF_EMPTY)
				continue;
			CHECKF(o > OS_OFF_HOLE && !os_e_deleted(words[s]) && !os_e_locked(words[s]),
			       "slot %llu: word %#llx", (unsigned long long)s,
			       (unsigned long long)words[s]);
			uint64_t i = ((uint64_t)o * OS_UNIT - g.data_off) / CT_SIZE;
			CHECK(i < n);
			slot_of[i] = s;
			occupied++;
		}
		CHECK_EQ_U64(occupied, n);
		/* distance from each slot to the first empty one at or after it */
		uint64_t e = 0;
		while (os_e_off(words[e]) != OS_OFF_EMPTY)
			e++;
		uint32_t d = 0;
		for (uint64_t k = 0; k < NSLOTS; k++) {
			uint64_t s = (e - k) & MASK;
			d = os_e_off(words[s]) == OS_OFF_EMPTY ? 0 : d + 1;
			to_empty[s] = d;
		}

		/* successful search: every key */
		struct os_counts c0 = t.get;
		struct mem m0 = m;
		for (uint64_t i = 0; i < n; i++) {
			uint8_t key[KLEN];
			make_key(key, i);
			uint64_t home = os_hash(key, KLEN) & MASK;
			uint64_t want = ((slot_of[i] - home) & MASK) + 1;
			uint64_t p0 = t.get.probes;
			const uint8_t *v;
			uint32_t vl;
			uint64_t ver;
			int rc = os_get(&t, key, KLEN, &v, &vl, &ver);
			CHECKF(rc == 0, "GET of key %llu: %s", (unsigned long long)i, zl_strerror(rc));
			CHECKF(vl == VLEN && !memcmp(v, &i, VLEN) && ver == i + 1,
			       "GET of key %llu: wrong value", (unsigned long long)i);
			uint64_t got = t.get.probes - p0;
			CHECKF(got == want,
			       "GET of key %llu (home %llu, slot %llu): %llu probes counted, %llu slots "
			       "examined",
			       (unsigned long long)i, (unsigned long long)home,
			       (unsigned long long)slot_of[i], (unsigned long long)got,
			       (unsigned long long)want);
		}
		uint64_t ops = t.get.ops - c0.ops;
		CHECK_EQ_U64(t.get.reads - c0.reads, m.reads - m0.reads);
		CHECK_EQ_U64(t.get.syncs - c0.syncs, m.syncs - m0.syncs);
		CHECK(m.writes == m0.writes && m.cas == m0.cas);
		CHECK_EQ_U64(t.get.retries, c0.retries);
		double cs = (double)(t.get.probes - c0.probes) / ops;
		double rs = (double)(t.get.reads - c0.reads) / ops;
		double ss = (double)(t.get.syncs - c0.syncs) / ops;
		double ks = 0.5 * (1 + 1 / (1 - a));

		/* unsuccessful search: absent keys */
		c0 = t.get;
		m0 = m;
		for (uint64_t q = 0; q < NABSENT; q++) {
			uint8_t key[KLEN];
			make_key(key, (1ull << 63) | q);
			uint64_t home = os_hash(key, KLEN) & MASK;
			uint64_t p0 = t.get.probes;
			const uint8_t *v;
			uint32_t vl;
			uint64_t ver;
			CHECK_RC(os_get(&t, key, KLEN, &v, &vl, &ver), -ENOENT);
			uint64_t got = t.get.probes - p0, want = to_empty[home] + 1ull;
			CHECKF(got == want,
			       "absent GET (home %llu): %llu probes counted, %llu slots examined",
			       (unsigned long long)home, (unsigned long long)got,
			       (unsigned long long)want);
		}
		ops = t.get.ops - c0.ops;
		double cu = (double)(t.get.probes - c0.probes) / ops;
		double ru = (double)(t.get.reads - c0.reads) / ops;
		double su = (double)(t.get.syncs - c0.syncs) / ops;
		CHECK_EQ_U64(t.get.reads - c0.reads, m.reads - m0.reads);
		double ku = 0.5 * (1 + 1 / ((1 - a) * (1 - a)));

		double tol_u = lf == 9 ? TOL_U90 : TOL;
		bool bad_s = dabs(cs / ks - 1) > TOL, bad_u = dabs(cu / ku - 1) > tol_u;
		printf(" %.2f  %7.3f  %8.3f  %6.3f%s | %8.3f  %8.3f  %6.3f%s | %6.3f %6.3f | %6.3f "
		       "%6.3f\n",
		       a, ks, cs, cs / ks, bad_s ? "!" : " ", ku, cu, cu / ku,
		       bad_u ? "!" : lf == 9 ? "*" : " ", rs, ss, ru, su);
		if (bad_s)
			fprintf(stderr, "FAIL: load %.2f: successful search %.3f probes, Knuth %.3f\n",
				a, cs, ks);
		if (bad_u)
			fprintf(stderr,
				"FAIL: load %.2f: unsuccessful search %.3f probes, Knuth %.3f\n", a,
				cu, ku);
		failed |= bad_s || bad_u;
	}
	printf("(*: C' at 0.9 held to %.0f%%, the others to %.0f%%. reads: one-sided reads "
	       "posted (t.get.reads); waits: round trips (t.get.syncs))\n",
	       TOL_U90 * 100, TOL * 100);
	os_table_fini(&t);
	free(m.base);
	free(slot_of);
	free(to_empty);
	if (failed)
		tl_exit(T_EXIT_FAIL);
	printf("os_probe: ok\n");
	return 0;
}
