/* SPDX-License-Identifier: MIT */
/* Containers, CRC32C and the key hash of the one-sided store (layout.h). */
#include <errno.h>
#include <string.h>

#include "layout.h"
#include "ring.h"
#include "zipline_kv.h"

/* ---- CRC32C --------------------------------------------------------------- */

static uint32_t crc_table[8][256];
static int crc_hw = -1; /* -1: not decided yet */

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
__attribute__((target("sse4.2"))) static uint32_t crc_hw_x86(uint32_t c, const uint8_t *p,
							      size_t n)
{
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

uint32_t os_crc32c(uint32_t crc, const void *p, size_t n)
{
	int hw = __atomic_load_n(&crc_hw, __ATOMIC_ACQUIRE);
	if (hw < 0) {
		crc_init(); /* idempotent: racing threads write the same table */
#if defined(__x86_64__)
		__builtin_cpu_init();
		hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#else
		hw = 0;
#endif
		__atomic_store_n(&crc_hw, hw, __ATOMIC_RELEASE);
	}
	uint32_t c = ~crc;
#if defined(__x86_64__)
	if (hw)
		return ~crc_hw_x86(c, p, n);
#endif
	return ~crc_sw(c, p, n);
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
	if (g->table_off > g->chunk_len || g->nslots * 8 > g->chunk_len - g->table_off)
		return -EPROTO;
	if (g->data_len != (uint64_t)g->nregions * g->region_len || g->data_off > g->chunk_len ||
	    g->data_len > g->chunk_len - g->data_off)
		return -EPROTO;
	bool overlap = g->table_off < g->data_off + g->data_len &&
		       g->data_off < g->table_off + g->nslots * 8;
	return overlap ? -EPROTO : 0;
}
