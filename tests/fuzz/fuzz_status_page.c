/* SPDX-License-Identifier: MIT */
/* libFuzzer target for zl-ss's reading of a status page (tools/zl-ss/
 * page.c), which another process of the user's writes: no crash, no read
 * past the page, and every slot handed on is one zl-ss may print (strings
 * ended, printable, no comma; a socket at its own fd's index). The input
 * is the page itself, of process FUZZ_PID. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "page.h"
#include "status.h"

#define FUZZ_PID 4242

static void check(const struct zlss_slot *s, void *arg)
{
	uint32_t *n = arg;
	(*n)++;
	FUZZ_ASSERT(s->type == ZL_ST_SOCKET || s->type == ZL_ST_SERVER || s->type == ZL_ST_CHANNEL);
	if (s->type == ZL_ST_SOCKET)
		FUZZ_ASSERT(s->fd == (int32_t)s->index && s->state >= ZL_SS_PENDING &&
			    s->state <= ZL_SS_KERNEL);
	FUZZ_ASSERT(s->side <= 1);
	const char *str[] = { s->why, s->name };
	for (int k = 0; k < 2; k++) {
		size_t l = strnlen(str[k], sizeof(s->why));
		FUZZ_ASSERT(l < sizeof(s->why));
		for (size_t i = 0; i < l; i++)
			FUZZ_ASSERT(str[k][i] >= 0x20 && str[k][i] < 0x7f && str[k][i] != ',');
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 1 << 20)
		size = 1 << 20;
	/* exact size, aligned as a mapping: ASan sees a read past it */
	void *p = aligned_alloc(64, (size + 63) & ~(size_t)63);
	if (!p)
		return 0;
	memset(p, 0, (size + 63) & ~(size_t)63);
	memcpy(p, data, size);
	uint32_t n = 0;
	int ok = zlss_page(p, size, FUZZ_PID, check, &n);
	FUZZ_ASSERT(ok == 0 || ok == 1);
	if (ok) {
		const struct zl_status_hdr *h = p;
		FUZZ_ASSERT(n <= h->hi && h->hi <= h->nslots &&
			    sizeof(*h) + (size_t)h->nslots * sizeof(struct zl_status_slot) <= size);
	} else {
		FUZZ_ASSERT(n == 0);
	}
	free(p);
	return 0;
}
