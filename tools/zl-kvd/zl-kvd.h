/* SPDX-License-Identifier: MIT */
/* zl-kvd's parts. */
#ifndef ZL_KVD_TOOL_H
#define ZL_KVD_TOOL_H

#include <errno.h>

#include "zipline.h"
#include "zipline_kv.h"

/* --stats for a URL with store=onesided: print the collector's counters.
 * Exit status 0 or 1. */
int kvd_os_stats(const char *url);

#endif
