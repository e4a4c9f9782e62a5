/* SPDX-License-Identifier: MIT */
/*
 * Runs a libFuzzer target over files without libFuzzer, so every build
 * replays the corpus deterministically under ctest:
 *   corpus_X DIR_OR_FILE...
 * Fails if no input was found (a missing corpus is an error).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return -1;
	}
	uint8_t *buf = NULL;
	size_t n = 0, cap = 0;
	for (;;) {
		if (n == cap) {
			cap = cap ? 2 * cap : 4096;
			uint8_t *nb = realloc(buf, cap);
			if (!nb) {
				fclose(f);
				free(buf);
				return -1;
			}
			buf = nb;
		}
		size_t r = fread(buf + n, 1, cap - n, f);
		if (!r)
			break;
		n += r;
	}
	fclose(f);
	/* exact-size copy so ASan catches over-reads of the input */
	uint8_t *in = malloc(n ? n : 1);
	if (!in) {
		free(buf);
		return -1;
	}
	if (n)
		memcpy(in, buf, n);
	free(buf);
	LLVMFuzzerTestOneInput(in, n);
	free(in);
	return 0;
}

int main(int argc, char **argv)
{
	int count = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st)) {
			perror(argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (run_file(argv[i]))
				return 1;
			count++;
			continue;
		}
		struct dirent **ents;
		int ne = scandir(argv[i], &ents, NULL, alphasort);
		if (ne < 0) {
			perror(argv[i]);
			return 1;
		}
		for (int j = 0; j < ne; j++) {
			char path[4096];
			snprintf(path, sizeof(path), "%s/%s", argv[i], ents[j]->d_name);
			if (ents[j]->d_name[0] != '.' && !stat(path, &st) && S_ISREG(st.st_mode)) {
				if (run_file(path))
					return 1;
				count++;
			}
			free(ents[j]);
		}
		free(ents);
	}
	printf("%d inputs ran without a crash\n", count);
	return count ? 0 : 1;
}
