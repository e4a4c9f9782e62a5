/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <time.h>

#include "clock.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#define HAVE_TSC 1
#endif

static int use_tsc;
static double ns_per_tick = 1;
static char name[48] = "clock_gettime";

uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#ifdef HAVE_TSC
/* cpuid 0x80000007 EDX bit 8: the TSC ticks at a constant rate in every
 * P-, C- and T-state, so ticks convert to time with one factor. rdtscp
 * also needs cpuid 0x80000001 EDX bit 27. */
static int tsc_invariant(void)
{
	unsigned a, b, c, d;
	if (__get_cpuid_max(0x80000000, NULL) < 0x80000007)
		return 0;
	if (!__get_cpuid(0x80000001, &a, &b, &c, &d) || !(d & (1u << 27)))
		return 0;
	if (!__get_cpuid(0x80000007, &a, &b, &c, &d))
		return 0;
	return !!(d & (1u << 8));
}
#endif

int clock_init(void)
{
#ifdef HAVE_TSC
	if (tsc_invariant()) {
		unsigned aux;
		uint64_t m0 = mono_ns(), t0 = __rdtscp(&aux), m1, t1;
		/* 20 ms against CLOCK_MONOTONIC: 1e-4 relative or better */
		do {
			m1 = mono_ns();
			t1 = __rdtscp(&aux);
		} while (m1 - m0 < 20000000ull);
		if (t1 > t0) {
			ns_per_tick = (double)(m1 - m0) / (double)(t1 - t0);
			use_tsc = 1;
			snprintf(name, sizeof(name), "rdtscp@%.3fGHz", 1.0 / ns_per_tick);
		}
	}
#endif
	return 0;
}

uint64_t clock_ticks(void)
{
#ifdef HAVE_TSC
	if (use_tsc) {
		unsigned aux;
		return __rdtscp(&aux);
	}
#endif
	return mono_ns();
}

uint64_t clock_ns(uint64_t ticks) { return use_tsc ? (uint64_t)((double)ticks * ns_per_tick) : ticks; }

const char *clock_name(void) { return name; }
