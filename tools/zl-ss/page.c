/* SPDX-License-Identifier: MIT */
/* zl-ss: a status page checked (page.h). The page is another process's,
 * and it may write it while we read: the header is read once, each slot
 * copied under its sequence count, and nothing read is used unchecked. */
#include "page.h"

#include <ctype.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "status.h"

void zlss_clean(char *dst, const char *src, size_t cap)
{
	size_t i = 0;
	for (; i < cap - 1 && src[i]; i++)
		dst[i] = isprint((unsigned char)src[i]) && src[i] != ',' ? src[i] : '?';
	dst[i] = '\0';
}

int zlss_page(const void *p, size_t len, int32_t pid,
	      void (*cb)(const struct zlss_slot *s, void *arg), void *arg)
{
	const struct zl_status_hdr *h = p;
	if (len < sizeof(*h))
		return 0;
	uint32_t nslots = h->nslots, role = h->role;
	if (h->magic != ZL_STATUS_MAGIC || h->version != ZL_STATUS_VERSION ||
	    h->hdr_size != sizeof(*h) || h->slot_size != sizeof(struct zl_status_slot) ||
	    nslots > ZL_STATUS_SLOTS || h->pid != pid ||
	    (len - sizeof(*h)) / sizeof(struct zl_status_slot) < nslots)
		return 0;
	uint32_t hi = atomic_load_explicit(&h->hi, memory_order_acquire);
	if (hi > nslots)
		return 0;
	const struct zl_status_slot *slots = (const void *)(h + 1);
	int budget = 4096; /* retries for torn slots, in all: a page whose every
			    * slot stays "being written" costs one look each */
	for (uint32_t i = 0; i < hi; i++) {
		struct zl_status_slot s;
		bool got = false;
		for (int t = 0; !got && (t == 0 || (t < 100 && budget-- > 0)); t++) {
			uint32_t q = atomic_load_explicit(&slots[i].seq, memory_order_acquire);
			memcpy((char *)&s + sizeof(s.seq), (const char *)&slots[i] + sizeof(s.seq),
			       sizeof(s) - sizeof(s.seq));
			atomic_thread_fence(memory_order_acquire);
			got = !(q & 1) && atomic_load_explicit(&slots[i].seq, memory_order_relaxed) == q;
		}
		if (!got)
			continue; /* torn, or a writer that never ends: not shown */
		struct zlss_slot o = { .index = i, .type = s.type, .state = s.state, .fd = s.fd,
				       .mem_fd = s.mem_fd, .own_fd = s.own_fd,
				       .side = s.side ? 1 : 0, .ino = s.ino };
		bool sock = o.type == ZL_ST_SOCKET && role == ZL_STATUS_PRELOAD &&
			    o.fd == (int32_t)i && o.state >= ZL_SS_PENDING && o.state <= ZL_SS_KERNEL;
		if (!sock && o.type != ZL_ST_SERVER && o.type != ZL_ST_CHANNEL)
			continue;
		zlss_clean(o.why, s.why, sizeof(o.why));
		zlss_clean(o.name, s.name, sizeof(o.name));
		for (int c = 0; c < 8; c++)
			o.ctr[c] = atomic_load_explicit(&s.ctr[c], memory_order_relaxed);
		cb(&o, arg);
	}
	return 1;
}
