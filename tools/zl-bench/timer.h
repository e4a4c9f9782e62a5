/* SPDX-License-Identifier: MIT */
/*
 * Per-round-trip timestamps. On x86-64 with an invariant TSC we read the TSC
 * with rdtscp (a few ns, no syscall, no vDSO page) and convert ticks to ns
 * with a frequency calibrated against CLOCK_MONOTONIC_RAW over the whole run.
 * Without an invariant TSC a tick is simply a CLOCK_MONOTONIC_RAW nanosecond.
 */
#ifndef ZLB_TIMER_H
#define ZLB_TIMER_H

#include <stdint.h>
#include <time.h>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

enum timer_kind { TIMER_AUTO, TIMER_TSC, TIMER_CLOCK };

/* Read-mostly state; use_tsc is tested on every timer_now(). */
extern int g_timer_use_tsc;

/* Pick the timer (TIMER_AUTO: TSC if invariant) and start calibrating.
 * Returns 0, or -1 if TIMER_TSC was forced but is unavailable. */
int timer_init(enum timer_kind want);

/* Short name for CSV and headers: "rdtscp" or "clock_monotonic_raw". */
const char *timer_name(void);

/* One header line describing the timer and its calibration. */
void timer_describe(char *buf, size_t cap);

/* Nanoseconds per tick, calibrated from timer_init() up to now. */
double timer_ns_per_tick(void);

/* Monotonic nanoseconds (CLOCK_MONOTONIC_RAW), for deadlines and elapsed. */
static inline uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The timestamp taken once per round trip. */
static inline uint64_t timer_now(void)
{
#if defined(__x86_64__)
	if (g_timer_use_tsc) {
		unsigned aux;
		uint64_t t = __rdtscp(&aux);
		/* rdtscp waits for earlier instructions; the lfence keeps later
		 * ones (the next send) from starting before the read. */
		_mm_lfence();
		return t;
	}
#endif
	return mono_ns();
}

#endif
