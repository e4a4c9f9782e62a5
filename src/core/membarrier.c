/* SPDX-License-Identifier: MIT */
/* membarrier(2) for the asymmetric fences of the wakeup protocol. */
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ringchan.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool supported;

static int membarrier(int cmd)
{
	return (int)syscall(__NR_membarrier, cmd, 0u, 0);
}

static void do_register(void)
{
	int mask = membarrier(MEMBARRIER_CMD_QUERY);
	supported = mask > 0 && (mask & MEMBARRIER_CMD_GLOBAL_EXPEDITED) &&
		    membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0;
	ZL_LOG(ZL_LOG_DEBUG, "membarrier: %s", supported ? "registered" : "not available");
}

bool zl_membarrier_register(void)
{
	pthread_once(&once, do_register);
	return supported;
}

int zl_membarrier_global(void)
{
	return membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) ? -errno : 0;
}
