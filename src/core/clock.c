/* SPDX-License-Identifier: MIT */
#include <stdatomic.h>

#include "clock.h"
#include "log.h"

/* Where the clocksource is the TSC, clock_gettime is a vDSO call of some
 * 20 ns; with an HPET or ACPI timer (emulators, some VMs) it is a system
 * call plus a device access: 1.6-1.9 us in the Soft-RoCE VM. */
#define SLOW_NS 250

int zl_clock_slow(void)
{
	static _Atomic int slow = -1; /* unknown yet; racing first calls agree */
	int s = atomic_load_explicit(&slow, memory_order_relaxed);
	if (s >= 0)
		return s;
	int64_t best = INT64_MAX;
	for (int i = 0; i < 5; i++) { /* the fastest of a few: preemption only adds */
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		clock_gettime(CLOCK_MONOTONIC, &b);
		int64_t d = (int64_t)(b.tv_sec - a.tv_sec) * 1000000000 + (b.tv_nsec - a.tv_nsec);
		if (d < best)
			best = d;
	}
	s = best > SLOW_NS;
	ZL_LOG(ZL_LOG_INFO, "clock_gettime takes %lld ns here: %s", (long long)best,
	       s ? "slow, spinning reads it less often" : "fast");
	atomic_store_explicit(&slow, s, memory_order_relaxed);
	return s;
}
