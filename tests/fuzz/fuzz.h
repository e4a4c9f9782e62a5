/* SPDX-License-Identifier: MIT */
/* What every fuzz target shares: the entry point and a check that traps
 * (libFuzzer and the standalone corpus driver both report a trap). */
#ifndef ZL_FUZZ_H
#define ZL_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#define FUZZ_ASSERT(c) \
	do { \
		if (!(c)) \
			__builtin_trap(); \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
