/* SPDX-License-Identifier: MIT */
/* Timer selection and TSC calibration against CLOCK_MONOTONIC_RAW. */
#include <stdio.h>
#include <string.h>

#include "timer.h"

int g_timer_use_tsc;

/* Calibration anchor: a (tsc, ns) pair taken at timer_init(). */
static uint64_t anchor_tsc, anchor_ns;

/* Does /proc/cpuinfo promise a TSC that ticks at a constant rate in all
 * C-states (constant_tsc + nonstop_tsc) and can we read it with rdtscp? */
static int tsc_is_invariant(void)
{
#if defined(__x86_64__)
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (!f)
		return 0;
	char line[8192];
	int ok = 0;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "flags", 5))
			continue;
		ok = strstr(line, " constant_tsc") && strstr(line, " nonstop_tsc") &&
		     strstr(line, " rdtscp");
		break; /* the first CPU's flags are representative */
	}
	fclose(f);
	return ok;
#else
	return 0;
#endif
}

/* A (tsc, ns) pair read as close together as we can: the TSC is read on
 * both sides of clock_gettime and the tightest of a few tries is kept. */
static void read_pair(uint64_t *tsc, uint64_t *ns)
{
#if defined(__x86_64__)
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 5; i++) {
		unsigned aux;
		uint64_t a = __rdtscp(&aux);
		uint64_t n = mono_ns();
		uint64_t b = __rdtscp(&aux);
		if (b - a < best) {
			best = b - a;
			*tsc = a + (b - a) / 2;
			*ns = n;
		}
	}
#else
	*ns = mono_ns();
	*tsc = *ns;
#endif
}

int timer_init(enum timer_kind want)
{
	int inv = tsc_is_invariant();
	if (want == TIMER_TSC && !inv) {
#if defined(__x86_64__)
		fprintf(stderr, "zl-bench: note: /proc/cpuinfo lacks constant_tsc/nonstop_tsc/rdtscp; "
				"using the TSC anyway as requested\n");
#else
		fprintf(stderr, "zl-bench: --timer tsc: no TSC on this architecture\n");
		return -1;
#endif
	}
	g_timer_use_tsc = want == TIMER_TSC || (want == TIMER_AUTO && inv);
	read_pair(&anchor_tsc, &anchor_ns);
	if (g_timer_use_tsc) {
		/* A first estimate for the header; later conversions use the
		 * longer span from here to "now", which only gets better. */
		struct timespec d = {0, 20 * 1000 * 1000};
		nanosleep(&d, NULL);
	}
	return 0;
}

const char *timer_name(void)
{
	return g_timer_use_tsc ? "rdtscp" : "clock_monotonic_raw";
}

double timer_ns_per_tick(void)
{
	if (!g_timer_use_tsc)
		return 1.0;
	uint64_t t, n;
	read_pair(&t, &n);
	if (t <= anchor_tsc)
		return 1.0; /* cannot happen with an invariant TSC */
	return (double)(n - anchor_ns) / (double)(t - anchor_tsc);
}

void timer_describe(char *buf, size_t cap)
{
	if (g_timer_use_tsc)
		snprintf(buf, cap,
			 "timer: rdtscp per round trip (invariant TSC, %.1f MHz, calibrated "
			 "against CLOCK_MONOTONIC_RAW over the run)",
			 1e3 / timer_ns_per_tick());
	else
		snprintf(buf, cap,
			 "timer: clock_gettime(CLOCK_MONOTONIC_RAW) per round trip "
			 "(no invariant TSC, or --timer clock)");
}
