/* SPDX-License-Identifier: MIT */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gnuplot.h"

static int have_gnuplot(void)
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

int gnuplot_open(FILE **g)
{
	if (!have_gnuplot()) {
		printf("note: gnuplot not found on PATH; no PNG written (apt-get install gnuplot-nox)\n");
		return 1;
	}
	*g = popen("gnuplot", "w");
	return *g ? 0 : -1;
}
