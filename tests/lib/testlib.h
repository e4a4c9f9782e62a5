/* SPDX-License-Identifier: MIT */
/*
 * Minimal test helpers (liburing style): a test is a small program that exits
 * 0 on success, 1 on failure and 77 when skipped. Every CHECK prints
 * file:line and, for return codes, zl_strerror() of the value.
 */
#ifndef ZL_TESTLIB_H
#define ZL_TESTLIB_H

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zipline.h"

#define T_EXIT_PASS 0
#define T_EXIT_FAIL 1
#define T_EXIT_SKIP 77

__attribute__((noreturn)) static inline void tl_exit(int code)
{
	fflush(NULL);
	_exit(code);
}

#define FAIL(...)                                                        \
	do {                                                             \
		fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);    \
		fprintf(stderr, __VA_ARGS__);                            \
		fprintf(stderr, "\n");                                   \
		tl_exit(T_EXIT_FAIL);                                    \
	} while (0)

#define SKIP(...)                                                        \
	do {                                                             \
		printf("SKIP: ");                                        \
		printf(__VA_ARGS__);                                     \
		printf("\n");                                            \
		tl_exit(T_EXIT_SKIP);                                    \
	} while (0)

#define CHECK(cond)                                                              \
	do {                                                                     \
		if (!(cond))                                                     \
			FAIL("CHECK(%s)", #cond);                                \
	} while (0)

#define CHECKF(cond, ...)                                                        \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "%s:%d: CHECK(%s): ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                            \
			fprintf(stderr, "\n");                                   \
			tl_exit(T_EXIT_FAIL);                                    \
		}                                                                \
	} while (0)

/* expr must return exactly want (an int like 0 or -EAGAIN). */
#define CHECK_RC(expr, want)                                                     \
	do {                                                                     \
		int rc_ = (int)(expr);                                           \
		int want_ = (int)(want);                                         \
		if (rc_ != want_)                                                \
			FAIL("%s returned %d (%s), expected %d (%s)", #expr, rc_, \
			     zl_strerror(rc_), want_, zl_strerror(want_));       \
	} while (0)

#define CHECK_OK(expr) CHECK_RC(expr, 0)

/* expr must return one of two values; evaluates to the value returned. */
#define CHECK_RC2(expr, a, b)                                                    \
	({                                                                       \
		int rc_ = (int)(expr);                                           \
		if (rc_ != (int)(a) && rc_ != (int)(b))                          \
			FAIL("%s returned %d (%s), expected %d (%s) or %d (%s)", \
			     #expr, rc_, zl_strerror(rc_), (int)(a),             \
			     zl_strerror((int)(a)), (int)(b), zl_strerror((int)(b))); \
		rc_;                                                             \
	})

#define CHECK_EQ_U64(got, want)                                                  \
	do {                                                                     \
		uint64_t g_ = (uint64_t)(got), w_ = (uint64_t)(want);            \
		if (g_ != w_)                                                    \
			FAIL("%s == %" PRIu64 ", expected %s == %" PRIu64, #got, \
			     g_, #want, w_);                                     \
	} while (0)

/* ---- time ------------------------------------------------------------- */

static inline int64_t tl_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline void tl_sleep_us(int64_t us)
{
	struct timespec ts = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000 };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ---- watchdog: a hang becomes a failure -------------------------------- */

static void tl_watchdog_fire(int sig)
{
	(void)sig;
	static const char msg[] = "FAIL: watchdog expired (test hung)\n";
	ssize_t w = write(2, msg, sizeof(msg) - 1);
	(void)w;
	_exit(T_EXIT_FAIL);
}

/* Kill the process with exit code 1 after `seconds` (0 disarms). Per
 * process: alarms are not inherited across fork, so children call it too. */
static inline void tl_watchdog(unsigned seconds)
{
	signal(SIGALRM, tl_watchdog_fire);
	alarm(seconds);
}

/* ---- deterministic data ----------------------------------------------- */

static inline uint64_t tl_splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* xorshift-based PRNG for test decisions */
struct tl_rng {
	uint64_t s;
};

static inline uint64_t tl_rand(struct tl_rng *r) { return tl_splitmix(&r->s); }

/* uniform in [0, n) (n > 0) */
static inline uint64_t tl_rand_below(struct tl_rng *r, uint64_t n)
{
	return n ? tl_rand(r) % n : 0;
}

/* Seed from ZL_TEST_SEED if set, else from the clock; printed so a failure
 * can be reproduced. */
static inline uint64_t tl_seed(void)
{
	const char *e = getenv("ZL_TEST_SEED");
	uint64_t s = e ? strtoull(e, NULL, 0) : (uint64_t)tl_now_us() ^ ((uint64_t)getpid() << 32);
	printf("seed: ZL_TEST_SEED=%" PRIu64 "\n", s);
	return s;
}

/* Fill buf with the pattern of message `id` (any length; a shorter fill is a
 * prefix of a longer one). */
static inline void tl_fill(void *buf, size_t len, uint64_t id)
{
	uint8_t *p = (uint8_t *)buf;
	uint64_t s = id * 0x2545F4914F6CDD1Dull;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t v = tl_splitmix(&s);
		memcpy(p + i, &v, 8);
	}
	if (i < len) {
		uint64_t v = tl_splitmix(&s);
		memcpy(p + i, &v, len - i);
	}
}

/* Returns the offset of the first wrong byte, or (size_t)-1 if all match. */
static inline size_t tl_verify(const void *buf, size_t len, uint64_t id)
{
	const uint8_t *p = (const uint8_t *)buf;
	uint64_t s = id * 0x2545F4914F6CDD1Dull;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t v = tl_splitmix(&s);
		if (memcmp(p + i, &v, 8)) {
			for (size_t j = 0; j < 8; j++)
				if (p[i + j] != ((uint8_t *)&v)[j])
					return i + j;
		}
	}
	if (i < len) {
		uint64_t v = tl_splitmix(&s);
		for (size_t j = 0; i + j < len; j++)
			if (p[i + j] != ((uint8_t *)&v)[j])
				return i + j;
	}
	return (size_t)-1;
}

#define CHECK_PATTERN(buf, len, id)                                              \
	do {                                                                     \
		size_t bad_ = tl_verify((buf), (len), (id));                     \
		if (bad_ != (size_t)-1)                                          \
			FAIL("message %" PRIu64 " (len %zu) corrupt at byte %zu", \
			     (uint64_t)(id), (size_t)(len), bad_);               \
	} while (0)

/* Scale factor for long tests: ZL_TEST_SCALE=0.1 runs a tenth of the work
 * (used by slow sanitizer builds). */
static inline uint64_t tl_scaled(uint64_t n)
{
	const char *e = getenv("ZL_TEST_SCALE");
	if (!e)
		return n;
	double f = strtod(e, NULL);
	if (f <= 0)
		return n;
	uint64_t v = (uint64_t)((double)n * f);
	return v ? v : 1;
}

/* A scaled-down (sanitizer) run: many times slower, so timing bounds only
 * report. */
static inline bool tl_scaled_down(void)
{
	const char *e = getenv("ZL_TEST_SCALE");
	return e && strtod(e, NULL) < 1.0;
}

#endif
