/* SPDX-License-Identifier: MIT */
/* libFuzzer target for zl_url_parse: no crash, all fields terminated. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "url.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 4 * ZL_URL_MAX)
		size = 4 * ZL_URL_MAX;
	char *s = malloc(size + 1); /* exact size: ASan sees over-reads */
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = 0;
	struct zl_url u;
	int rc = zl_url_parse(s, &u);
	FUZZ_ASSERT(rc == 0 || rc == -EINVAL);
	if (rc == 0) {
		FUZZ_ASSERT(strlen(s) < ZL_URL_MAX);
		FUZZ_ASSERT(strnlen(u.scheme, sizeof(u.scheme)) < sizeof(u.scheme));
		FUZZ_ASSERT(u.scheme[0]);
		FUZZ_ASSERT(strnlen(u.host, sizeof(u.host)) < sizeof(u.host));
		FUZZ_ASSERT(strnlen(u.port, sizeof(u.port)) < sizeof(u.port));
		FUZZ_ASSERT(strnlen(u.path, sizeof(u.path)) < sizeof(u.path));
		FUZZ_ASSERT(u.nparams >= 0 && u.nparams <= ZL_URL_MAX_PARAMS);
		for (int i = 0; i < u.nparams; i++) {
			FUZZ_ASSERT(strnlen(u.params[i].key, sizeof(u.params[i].key)) <
				    sizeof(u.params[i].key));
			FUZZ_ASSERT(u.params[i].key[0]);
			FUZZ_ASSERT(strnlen(u.params[i].val, sizeof(u.params[i].val)) <
				    sizeof(u.params[i].val));
			FUZZ_ASSERT(zl_url_param(&u, u.params[i].key) != NULL);
		}
		for (const char *c = u.port; *c; c++)
			FUZZ_ASSERT(*c >= '0' && *c <= '9');
		FUZZ_ASSERT(!u.path[0] || u.path[0] == '/');
	}
	free(s);
	return 0;
}
