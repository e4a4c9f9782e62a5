/* SPDX-License-Identifier: MIT */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gnuplot.h"

int have_gnuplot(void)
{
	const char *path = getenv("PATH");
	char file[PATH_MAX + 16];
	while (path && *path) {
		size_t n = strcspn(path, ":");
		snprintf(file, sizeof(file), "%.*s/gnuplot", (int)n, path);
		if (n && !access(file, X_OK))
			return 1;
		path += n + (path[n] == ':');
	}
	return 0;
}
