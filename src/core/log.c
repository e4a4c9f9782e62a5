/* SPDX-License-Identifier: MIT */
/* Logging goes to a user callback, or to stderr when ZL_LOG is set. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"

static zl_log_fn log_fn;
static void *log_arg;
int zl_log_level_active = -1;

static const char *const level_names[] = { "error", "warn", "info", "debug" };

static void stderr_log(enum zl_log_level level, const char *msg, void *arg)
{
	(void)arg;
	char line[600];
	int n = snprintf(line, sizeof(line), "zipline[%d] %s: %s\n", (int)getpid(),
			 level_names[level], msg);
	if (n > 0) {
		ssize_t w = write(STDERR_FILENO, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
		(void)w;
	}
}

__attribute__((constructor)) static void log_init_from_env(void)
{
	const char *e = getenv("ZL_LOG");
	if (!e || !*e)
		return;
	int lvl = -1;
	for (int i = 0; i < 4; i++)
		if (!strcasecmp(e, level_names[i]))
			lvl = i;
	if (lvl < 0 && e[0] >= '0' && e[0] <= '3' && !e[1])
		lvl = e[0] - '0';
	if (lvl >= 0) {
		log_fn = stderr_log;
		zl_log_level_active = lvl;
	}
}

__attribute__((visibility("default")))
void zl_set_log(zl_log_fn fn, void *arg, enum zl_log_level level)
{
	log_arg = arg;
	log_fn = fn;
	zl_log_level_active = fn ? (int)level : -1;
}

void zl_log_emit(enum zl_log_level level, const char *fmt, ...)
{
	zl_log_fn fn = log_fn;
	if (!fn)
		return;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fn(level, msg, log_arg);
}

unsigned zl_log_allow(struct zl_ratelimit *rl)
{
	long long sec = zl_now_us() / 1000000;
	long long was = atomic_load_explicit(&rl->second, memory_order_relaxed);
	if (sec != was && atomic_compare_exchange_strong(&rl->second, &was, sec))
		atomic_store_explicit(&rl->lines, 0, memory_order_relaxed);
	if (atomic_fetch_add_explicit(&rl->lines, 1, memory_order_relaxed) >= ZL_LOG_BURST) {
		atomic_fetch_add_explicit(&rl->dropped, 1, memory_order_relaxed);
		return 0;
	}
	return 1 + atomic_exchange_explicit(&rl->dropped, 0, memory_order_relaxed);
}
