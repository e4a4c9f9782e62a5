/* SPDX-License-Identifier: MIT */
/*
 * CRC32C of the one-sided store's containers: the check value of
 * "123456789", and the hardware path (three interleaved streams joined by
 * shift tables, then 8-byte and byte steps) against the table path at
 * every length to 3 x 8 KiB + 1 KiB, every alignment, and chained calls.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "layout.h"
#include "testlib.h"

int main(void)
{
	CHECK(os_crc32c(0, "123456789", 9) == 0xe3069283u);
	CHECK(os_crc32c_sw(0, "123456789", 9) == 0xe3069283u);
	CHECK(os_crc32c(0, "", 0) == 0);
	size_t max = 3 * 8192 + 1024 + 64;
	uint8_t *b = malloc(max + 8);
	CHECK(b);
	srand(7);
	for (size_t i = 0; i < max + 8; i++)
		b[i] = (uint8_t)rand();
	for (size_t n = 0; n <= max; n += n < 1024 ? 1 : 37) {
		size_t off = n % 8;
		uint32_t hw = os_crc32c(0x12345678u, b + off, n);
		uint32_t sw = os_crc32c_sw(0x12345678u, b + off, n);
		CHECKF(hw == sw, "length %zu offset %zu: %08x against %08x", n, off, hw, sw);
		size_t h = n / 3; /* chained: crc(A|B) = crc(crc(A), B) */
		CHECKF(os_crc32c(os_crc32c(0x12345678u, b + off, h), b + off + h, n - h) == sw,
		       "chained at %zu of %zu", h, n);
	}
	/* the speed, for the record (bytes per ns, 1 MiB) */
	uint8_t *m = calloc(1, 1 << 20);
	CHECK(m);
	struct timespec t0, t1;
	uint32_t c = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 50; i++)
		c = os_crc32c(c, m, 1 << 20);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
	printf("os_crc: ok; %.2f bytes/ns (crc %08x)\n", 50.0 * (1 << 20) / ns, c);
	free(m);
	free(b);
	return 0;
}
