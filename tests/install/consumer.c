/* SPDX-License-Identifier: MIT */
/* Built against an installed zipline by tests/install/run.sh. */
#include <errno.h>
#include <stdio.h>
#include <zipline.h>

int main(void)
{
	printf("zl_version() = %d (header %d, %s)\n", zl_version(), ZL_VERSION_NUM,
	       ZL_VERSION_STRING);
	printf("zl_strerror(-ETIMEDOUT) = %s\n", zl_strerror(-ETIMEDOUT));
	return zl_version() == ZL_VERSION_NUM ? 0 : 1;
}
