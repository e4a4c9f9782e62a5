/* SPDX-License-Identifier: MIT */
#ifndef ZL_LOG_H
#define ZL_LOG_H

#include "zipline.h"

extern int zl_log_level_active; /* highest level that is delivered, -1: none */

void zl_log_emit(enum zl_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ZL_LOG(ZL_LOG_WARN, "fmt", ...): costs one load when the level is off. */
#define ZL_LOG(level, ...) \
	do { \
		if ((int)(level) <= zl_log_level_active) \
			zl_log_emit((level), __VA_ARGS__); \
	} while (0)

#endif
