/* SPDX-License-Identifier: MIT */
/* zl-ss: a status page (src/core/status.h) read as another process's
 * memory: every field checked, every string cleaned (page.c). */
#ifndef ZLSS_PAGE_H
#define ZLSS_PAGE_H

#include <stddef.h>
#include <stdint.h>

/* one slot in use, as read: strings NUL-terminated, printable, no comma */
struct zlss_slot {
	uint32_t index;
	uint16_t type;   /* ZL_ST_SOCKET (then fd == index), _SERVER, _CHANNEL */
	uint16_t state;  /* ZL_ST_SOCKET: ZL_SS_PENDING .. ZL_SS_KERNEL */
	int32_t fd, mem_fd, own_fd;
	uint8_t side;    /* 0 or 1 */
	uint64_t ino;
	char why[80], name[80];
	uint64_t ctr[8];
};

/* The page of process pid, len bytes at p (a mapping another process may
 * write while we read): 1 after cb for each slot in use that reads whole,
 * or 0 if p is not such a page (nothing called). */
int zlss_page(const void *p, size_t len, int32_t pid,
	      void (*cb)(const struct zlss_slot *s, void *arg), void *arg);

/* src (at most cap bytes, its NUL or not) into dst[cap]: printable, commas
 * and control bytes as '?' */
void zlss_clean(char *dst, const char *src, size_t cap);

#endif
