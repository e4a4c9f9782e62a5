/* SPDX-License-Identifier: MIT */
/* Containers, CRC32C and the key hash of the one-sided store (layout.h). */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "layout.h"
#include "ring.h"
#include "zipline_kv.h"

/* ---- CRC32C --------------------------------------------------------------- */

static uint32_t crc_table[8][256];
static int crc_hw; /* set once by crc_setup */

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^
					  crc_table[0][crc_table[t - 1][i] & 0xff];
}

/* Slicing by 8 (the fallback; section 4.3.2 found software CRC a limit). */
static uint32_t crc_sw(uint32_t c, const uint8_t *p, size_t n)
{
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		w ^= c;
		c = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^
		    crc_table[5][(w >> 16) & 0xff] ^ crc_table[4][(w >> 24) & 0xff] ^
		    crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
		    crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
		p += 8;
		n -= 8;
	}
	while (n--)
		c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
	return c;
}

#if defined(__x86_64__)
/*
 * The crc32 instruction has a latency of 3 cycles and a throughput of one
 * per cycle: one dependent chain runs at a third of its speed. Long buffers
 * go as three streams of equal length at once, joined by linearity: the
 * state after A|B is shift(state after A, |B|) ^ (state of B from 0), where
 * shift(x, n) (n zero bytes fed to state x) is linear in x, so a table per
 * byte of x holds it for each of the two fixed block lengths.
 */
#define CRC_LONG 8192u
#define CRC_SHORT 256u
static uint32_t crc_long[4][256], crc_short[4][256];

__attribute__((target("sse4.2"))) static uint32_t zeros_hw(uint32_t x, size_t n)
{
	uint64_t c = x;
	for (size_t i = 0; i < n / 8; i++)
		c = __builtin_ia32_crc32di(c, 0);
	return (uint32_t)c;
}

static void make_shift(uint32_t t[4][256], size_t n)
{
	uint32_t basis[32];
	for (int b = 0; b < 32; b++)
		basis[b] = zeros_hw(1u << b, n);
	for (int k = 0; k < 4; k++)
		for (uint32_t v = 0; v < 256; v++) {
			uint32_t x = 0;
			for (int b = 0; b < 8; b++)
				if (v >> b & 1)
					x ^= basis[8 * k + b];
			t[k][v] = x;
		}
}

static uint32_t shift(const uint32_t t[4][256], uint32_t x)
{
	return t[0][x & 0xff] ^ t[1][(x >> 8) & 0xff] ^ t[2][(x >> 16) & 0xff] ^ t[3][x >> 24];
}

__attribute__((target("sse4.2"))) static uint32_t crc3_hw(uint32_t c, const uint8_t **pp,
							  size_t *np, size_t len,
							  const uint32_t t[4][256])
{
	const uint8_t *p = *pp;
	while (*np >= 3 * len) {
		uint64_t a = c, b = 0, d = 0;
		for (size_t i = 0; i < len; i += 8) {
			uint64_t x, y, z;
			memcpy(&x, p + i, 8);
			memcpy(&y, p + len + i, 8);
			memcpy(&z, p + 2 * len + i, 8);
			a = __builtin_ia32_crc32di(a, x);
			b = __builtin_ia32_crc32di(b, y);
			d = __builtin_ia32_crc32di(d, z);
		}
		c = shift(t, shift(t, (uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)d;
		p += 3 * len;
		*np -= 3 * len;
	}
	*pp = p;
	return c;
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw_x86(uint32_t c, const uint8_t *p,
							      size_t n)
{
	c = crc3_hw(c, &p, &n, CRC_LONG, crc_long);
	c = crc3_hw(c, &p, &n, CRC_SHORT, crc_short);
	uint64_t c64 = c;
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c64 = __builtin_ia32_crc32di(c64, w);
		p += 8;
		n -= 8;
	}
	c = (uint32_t)c64;
	while (n--)
		c = __builtin_ia32_crc32qi(c, *p++);
	return c;
}
#endif

static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_setup(void)
{
	crc_init();
	crc_hw = 0;
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("sse4.2")) {
		make_shift(crc_long, CRC_LONG);
		make_shift(crc_short, CRC_SHORT);
		crc_hw = 1;
	}
#endif
}

/* The table version, whatever the CPU has (tests compare the two). */
uint32_t os_crc32c_sw(uint32_t crc, const void *p, size_t n)
{
	pthread_once(&crc_once, crc_setup);
	return ~crc_sw(~crc, p, n);
}

uint32_t os_crc32c(uint32_t crc, const void *p, size_t n)
{
	pthread_once(&crc_once, crc_setup);
#if defined(__x86_64__)
	if (crc_hw)
		return ~crc_hw_x86(~crc, p, n);
#endif
	return ~crc_sw(~crc, p, n);
}

/* ---- hash ----------------------------------------------------------------- */

uint64_t os_hash(const void *key, size_t klen)
{
	const uint8_t *p = key;
	uint64_t h = zl_mix64(klen ^ 0x9e3779b97f4a7c15ull);
	while (klen >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		h = zl_mix64(h ^ w) + 0x9e3779b97f4a7c15ull;
		p += 8;
		klen -= 8;
	}
	uint64_t w = 0;
	memcpy(&w, p, klen);
	return zl_mix64(h ^ w ^ (uint64_t)klen << 56);
}

/* ---- containers ----------------------------------------------------------- */

static uint32_t hdr_crc(const struct os_ct *h)
{
	return os_crc32c(0, (const uint8_t *)h + 4, OS_CT_HDR - 4);
}

static void seal_tail(uint8_t *b)
{
	struct os_ct *h = (struct os_ct *)b;
	h->hcrc = hdr_crc(h);
	uint32_t v = os_crc32c(0, b, OS_CT_HDR + h->klen + h->vlen);
	memcpy(b + OS_CT_HDR + h->klen + h->vlen, &v, 4);
}

void os_ct_seal(void *ct, uint32_t klen, uint32_t vlen, uint32_t slot, uint32_t tag,
		uint64_t version)
{
	uint8_t *b = ct;
	struct os_ct *h = ct;
	h->klen = klen;
	h->vlen = vlen;
	h->slot = slot;
	h->tag = tag;
	h->kcrc = os_crc32c(0, b + OS_CT_HDR, klen);
	h->version = version;
	seal_tail(b);
}

void os_ct_reseal(void *ct, uint32_t slot, uint32_t tag)
{
	struct os_ct *h = ct;
	h->slot = slot;
	h->tag = tag;
	seal_tail(ct);
}

uint64_t os_ct_check_hdr(const struct os_ct *h, uint32_t slot, uint32_t tag)
{
	if (h->hcrc != hdr_crc(h) || h->slot != slot || h->tag != tag)
		return 0;
	if (!h->klen || h->klen > ZL_KV_MAX_KEY || h->vlen > ZL_KV_MAX_VAL)
		return 0;
	return os_ct_size(h->klen, h->vlen);
}

bool os_ct_check_key(const void *ct)
{
	const struct os_ct *h = ct;
	return os_crc32c(0, (const uint8_t *)ct + OS_CT_HDR, h->klen) == h->kcrc;
}

bool os_ct_check_all(const void *ct)
{
	const struct os_ct *h = ct;
	const uint8_t *b = ct;
	uint32_t v;
	memcpy(&v, b + OS_CT_HDR + h->klen + h->vlen, 4);
	return os_crc32c(0, b, OS_CT_HDR + h->klen + h->vlen) == v;
}

int os_geom_check(const struct os_geom *g)
{
	uint64_t units = g->chunk_len / OS_UNIT;
	if (!g->nslots || (g->nslots & (g->nslots - 1)) || g->nslots > (1ull << 32))
		return -EPROTO;
	if (g->table_off % OS_UNIT || g->data_off % OS_UNIT || g->region_len % OS_UNIT)
		return -EPROTO;
	if (g->data_off <= OS_UNIT * OS_OFF_HOLE || units > UINT32_MAX || !g->nregions ||
	    g->region_len < os_ct_size(1, 0))
		return -EPROTO;
	if (g->table_off < 8 || g->table_off > g->chunk_len ||
	    g->nslots * 8 > g->chunk_len - g->table_off || g->data_off < 8)
		return -EPROTO;
	if (g->data_len != (uint64_t)g->nregions * g->region_len || g->data_off > g->chunk_len ||
	    g->data_len > g->chunk_len - g->data_off)
		return -EPROTO;
	bool overlap = g->table_off < g->data_off + g->data_len &&
		       g->data_off < g->table_off + g->nslots * 8;
	return overlap ? -EPROTO : 0;
}
