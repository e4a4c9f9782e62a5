/* SPDX-License-Identifier: MIT */
/*
 * Runs a libFuzzer target over files without libFuzzer, so every build
 * replays the corpus deterministically under ctest:
 *   corpus_X [--mutate N SEED] DIR_OR_FILE...
 * Fails if no input was found (a missing corpus is an error). With
 * --mutate, N more inputs follow, each a corpus input changed a few times
 * (bytes flipped, set to edge values, inserted, deleted, or spliced from
 * another input) by a generator seeded with SEED: a brief, reproducible
 * fuzz run without libFuzzer.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static uint8_t **g_inputs; /* the corpus, kept for --mutate */
static size_t *g_sizes, g_ninputs;

static void keep(const uint8_t *p, size_t n)
{
	uint8_t **ni = realloc(g_inputs, (g_ninputs + 1) * sizeof(*ni));
	size_t *ns = realloc(g_sizes, (g_ninputs + 1) * sizeof(*ns));
	if (ni)
		g_inputs = ni;
	if (ns)
		g_sizes = ns;
	uint8_t *c = malloc(n ? n : 1);
	if (!ni || !ns || !c) {
		free(c);
		return;
	}
	memcpy(c, p, n);
	g_inputs[g_ninputs] = c;
	g_sizes[g_ninputs++] = n;
}

static uint64_t g_rng;

static uint64_t rnd(void)
{
	g_rng ^= g_rng << 13;
	g_rng ^= g_rng >> 7;
	g_rng ^= g_rng << 17;
	return g_rng;
}

/* One input: a corpus entry changed 1..8 times. */
static void mutate_one(void)
{
	static const uint8_t edge[] = { 0, 1, 0x7f, 0x80, 0xff, 0xfe, 0x40, 0x10 };
	size_t cap = 65536, n;
	uint8_t *b = malloc(cap);
	if (!b)
		return;
	size_t pick = (size_t)(rnd() % g_ninputs);
	n = g_sizes[pick] < cap ? g_sizes[pick] : cap;
	memcpy(b, g_inputs[pick], n);
	for (int k = 1 + (int)(rnd() % 8); k > 0; k--) {
		size_t at = n ? (size_t)(rnd() % n) : 0;
		switch (rnd() % 5) {
		case 0:
			if (n)
				b[at] ^= (uint8_t)(1u << (rnd() % 8));
			break;
		case 1:
			if (n)
				b[at] = edge[rnd() % sizeof(edge)];
			break;
		case 2: /* insert */
			if (n < cap) {
				memmove(b + at + 1, b + at, n - at);
				b[at] = (uint8_t)rnd();
				n++;
			}
			break;
		case 3: /* delete */
			if (n) {
				memmove(b + at, b + at + 1, n - at - 1);
				n--;
			}
			break;
		default: { /* splice a piece of another input */
			size_t o = (size_t)(rnd() % g_ninputs), on = g_sizes[o];
			size_t from = on ? (size_t)(rnd() % on) : 0, len = on - from;
			len = len > cap - at ? cap - at : len;
			len = len > 64 ? 64 : len;
			memcpy(b + at, g_inputs[o] + from, len);
			n = at + len > n ? at + len : n;
		}
		}
	}
	uint8_t *in = malloc(n ? n : 1); /* exact size, as run_file */
	if (in) {
		memcpy(in, b, n);
		LLVMFuzzerTestOneInput(in, n);
		free(in);
	}
	free(b);
}

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
	keep(in, n);
	LLVMFuzzerTestOneInput(in, n);
	free(in);
	return 0;
}

int main(int argc, char **argv)
{
	int count = 0, first = 1;
	long mutations = 0;
	if (argc > 3 && !strcmp(argv[1], "--mutate")) {
		mutations = atol(argv[2]);
		g_rng = strtoull(argv[3], NULL, 0) * 0x9E3779B97F4A7C15ull | 1;
		first = 4;
	}
	for (int i = first; i < argc; i++) {
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
	for (long m = 0; count && m < mutations; m++)
		mutate_one();
	printf("%d inputs and %ld mutations of them ran without a crash\n", count,
	       count ? mutations : 0);
	return count ? 0 : 1;
}
