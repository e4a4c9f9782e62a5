/* SPDX-License-Identifier: MIT */
/* Shared by the tools: the CLI conventions every one of them keeps. */
#ifndef ZL_TOOLS_CLI_H
#define ZL_TOOLS_CLI_H

#include <stdio.h>
#include <string.h>

#include "zipline.h"

/* `--version` among the arguments (before a "--"): print the tool's name
 * and the version of the header and of the library linked, return 1 (the
 * caller exits 0); else 0. */
static inline int zl_cli_version(int argc, char **argv, const char *name, int linked)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--version")) {
			printf("%s (zipline) %s", name, ZL_VERSION_STRING);
			if (linked != ZL_VERSION_NUM)
				printf(", library %d.%d.%d", linked / 10000, linked / 100 % 100,
				       linked % 100);
			printf("\n");
			return 1;
		}
	return 0;
}

#endif
