/* SPDX-License-Identifier: MIT */
/* Timestamps: rdtscp calibrated against CLOCK_MONOTONIC where the TSC is
 * invariant (the BME latency thesis's method), else clock_gettime. */
#ifndef ZL_PROTO_CLOCK_H
#define ZL_PROTO_CLOCK_H

#include <stdint.h>

/* Pick and calibrate the source (about 20 ms); 0 or -errno. */
int clock_init(void);
uint64_t clock_ticks(void);
uint64_t clock_ns(uint64_t ticks);
/* e.g. "rdtscp@2.10GHz" or "clock_gettime" (no comma: it goes in CSV) */
const char *clock_name(void);
/* CLOCK_MONOTONIC in ns, for deadlines */
uint64_t mono_ns(void);

#endif
