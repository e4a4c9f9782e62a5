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

/*
 * Rate limits for lines a peer can cause: per cause (one static
 * zl_ratelimit at the call site), at most ZL_LOG_BURST lines per second;
 * the first line of a new second says how many were suppressed before it.
 * ZL_LOG_RL(&rl, level, "fmt", ...).
 */
#define ZL_LOG_BURST 5
struct zl_ratelimit {
	_Atomic long long second; /* zl_now_us() / 1e6 of the current window */
	_Atomic unsigned lines;   /* lines of that second */
	_Atomic unsigned dropped; /* lines suppressed since the last one emitted */
};
/* 0: suppress; otherwise 1 + the number suppressed before this line */
unsigned zl_log_allow(struct zl_ratelimit *rl);
#define ZL_LOG_RL(rl, level, fmt, ...) \
	do { \
		unsigned zl_rl_; \
		if ((int)(level) <= zl_log_level_active && (zl_rl_ = zl_log_allow(rl))) { \
			if (zl_rl_ > 1) \
				zl_log_emit((level), fmt " (%u like it suppressed)", \
					    ##__VA_ARGS__, zl_rl_ - 1); \
			else \
				zl_log_emit((level), fmt, ##__VA_ARGS__); \
		} \
	} while (0)

#endif
