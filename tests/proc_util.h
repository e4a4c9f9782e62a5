/* SPDX-License-Identifier: MIT */
/* What /proc says of this process, for tests that bound their memory. */
#ifndef ZL_TESTS_PROC_UTIL_H
#define ZL_TESTS_PROC_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Resident set size in kB, or -1. */
static inline long rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	long kb = -1;
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, "VmRSS:", 6))
			kb = atol(line + 6);
	if (f)
		fclose(f);
	return kb;
}

#endif
