/* SPDX-License-Identifier: MIT */
/*
 * The one-sided store's memory (the Falafel thesis, sections 3.3, 3.4, 4.2):
 * one chunk, shared with every client (shm: a memfd; rdma: one registered
 * region), in 8-byte units:
 *
 *   [0, table_off)          nothing (all geometry comes from the server's
 *                           HELLO reply, never from memory a client can
 *                           write)
 *   [table_off, +8*nslots)  the hash table: nslots 64-bit entries
 *   [data_off, +data_len)   the data space: nregions regions of region_len
 *                           bytes, each owned by one client or the server
 *
 * Entry (one 64-bit word, changed only by compare-and-swap):
 *   bits  0..31  off: container position in 8-byte units from the chunk's
 *                start; 0 = empty slot, 1 = hole (a slot the server took
 *                back from a garbage entry: occupied, no key)
 *   bits 32..61  tag: grows by one with every change of what the slot
 *                points to (SET, the server's moves and clears), so a CAS
 *                prepared on an older word fails (no ABA)
 *   bit  62      lock: the server is rebuilding this slot's chain
 *   bit  63      deleted: the key is gone (the slot keeps its key, so the
 *                chains through it stay whole)
 *
 * Container (8-byte aligned, written once before any entry points at it):
 *   struct os_ct (32 bytes), key, value, u32 vcrc, padding to 8.
 * CRC32C throughout: hcrc over header bytes 4..31 (which include slot, tag
 * and kcrc), kcrc over the key, vcrc over header, key and value. slot and
 * tag name the entry the container was written for: a reader accepts a
 * container only if they equal the slot it came from and the tag of the
 * word it read there (see table.c for why).
 */
#ifndef ZL_OS_LAYOUT_H
#define ZL_OS_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OS_UNIT 8u
#define OS_OFF_EMPTY 0u
#define OS_OFF_HOLE 1u
#define OS_TAG_MASK ((1u << 30) - 1)
#define OS_LOCK (1ull << 62)
#define OS_DEL (1ull << 63)

static inline uint32_t os_e_off(uint64_t w) { return (uint32_t)w; }
static inline uint32_t os_e_tag(uint64_t w) { return (uint32_t)(w >> 32) & OS_TAG_MASK; }
static inline bool os_e_locked(uint64_t w) { return w & OS_LOCK; }
static inline bool os_e_deleted(uint64_t w) { return w & OS_DEL; }
static inline uint64_t os_e_make(uint32_t off, uint32_t tag, uint64_t flags)
{
	return (uint64_t)off | (uint64_t)(tag & OS_TAG_MASK) << 32 | flags;
}
static inline uint32_t os_tag_next(uint32_t tag) { return (tag + 1) & OS_TAG_MASK; }

struct os_ct {
	uint32_t hcrc;
	uint32_t klen;
	uint32_t vlen;
	uint32_t slot;
	uint32_t tag;
	uint32_t kcrc;
	uint64_t version;
};
#define OS_CT_HDR ((uint32_t)sizeof(struct os_ct))

/* Bytes a container of these lengths takes (a multiple of OS_UNIT). */
static inline uint64_t os_ct_size(uint64_t klen, uint64_t vlen)
{
	return (OS_CT_HDR + klen + vlen + 4 + OS_UNIT - 1) & ~(uint64_t)(OS_UNIT - 1);
}

/* The chunk's geometry, as the server hands it out (never read from the
 * shared chunk by anyone). */
struct os_geom {
	uint64_t chunk_len;
	uint64_t table_off;
	uint64_t nslots;     /* a power of two */
	uint64_t data_off;   /* a multiple of OS_UNIT, > OS_UNIT */
	uint64_t data_len;   /* nregions * region_len */
	uint64_t region_len; /* a multiple of OS_UNIT */
	uint32_t nregions;
};

/* 0 if g is self-consistent and fits 32-bit unit offsets, else -EPROTO. */
int os_geom_check(const struct os_geom *g);

/* CRC32C (Castagnoli): SSE4.2 crc32 where the CPU has it, else a table. */
uint32_t os_crc32c(uint32_t crc, const void *p, size_t n);
uint32_t os_crc32c_sw(uint32_t crc, const void *p, size_t n);

/* The home slot hash of a key: 64 bits, well mixed. */
uint64_t os_hash(const void *key, size_t klen);

/* Fill a container's header and CRCs in place: ct points at a buffer of
 * os_ct_size(klen, vlen) bytes with the key and value already after the
 * header. */
void os_ct_seal(void *ct, uint32_t klen, uint32_t vlen, uint32_t slot, uint32_t tag,
		uint64_t version);
/* Re-seal a container for another slot and tag (a SET that lost its CAS;
 * the server's moves). The key and value stay. */
void os_ct_reseal(void *ct, uint32_t slot, uint32_t tag);

/* Checks of bytes read from the chunk (a private copy). */
/* The header: hcrc, lengths within limits, slot and tag as expected.
 * Returns the container's size, or 0 if the header is not one. */
uint64_t os_ct_check_hdr(const struct os_ct *h, uint32_t slot, uint32_t tag);
/* hdr + key (the first OS_CT_HDR + klen bytes): kcrc. */
bool os_ct_check_key(const void *ct);
/* The whole container: vcrc. */
bool os_ct_check_all(const void *ct);

#endif
