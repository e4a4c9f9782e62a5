/* SPDX-License-Identifier: MIT */
/* The process's status page, written (status.h has the design). It calls
 * the kernel directly where the preload takes the libc call over (close,
 * fcntl): its close would come back here. */
#include "status.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PAGE_BYTES (sizeof(struct zl_status_hdr) + (size_t)ZL_STATUS_SLOTS * sizeof(struct zl_status_slot))
#define HIGH_FD 512 /* out of the numbers programs expect (as the preload's) */

static _Atomic(struct zl_status_hdr *) page;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool tried, atfork_set;

static int sys_close(int fd) { return (int)syscall(SYS_close, fd); }

/* A sealed memfd of the page's size, above HIGH_FD; -1 if none. */
static int page_fd(void)
{
	int fd = memfd_create(ZL_STATUS_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)PAGE_BYTES) ||
	    syscall(SYS_fcntl, fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		sys_close(fd);
		return -1;
	}
	int h = (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, HIGH_FD);
	if (h >= 0) {
		sys_close(fd);
		fd = h;
	}
	return fd;
}

static struct zl_status_hdr *page_new(int *fdp)
{
	int fd = page_fd();
	if (fd < 0)
		return NULL;
	struct zl_status_hdr *h = mmap(NULL, PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED) {
		sys_close(fd);
		return NULL;
	}
	h->magic = ZL_STATUS_MAGIC;
	h->version = ZL_STATUS_VERSION;
	h->hdr_size = sizeof(struct zl_status_hdr);
	h->slot_size = sizeof(struct zl_status_slot);
	h->nslots = ZL_STATUS_SLOTS;
	h->pid = (int32_t)getpid();
	h->role = ZL_STATUS_ROLE;
	*fdp = fd;
	return h;
}

static int page_fd_now = -1;

static struct zl_status_hdr *get_page(void)
{
	struct zl_status_hdr *h = atomic_load_explicit(&page, memory_order_acquire);
	if (__builtin_expect(h != NULL, 1))
		return h;
	pthread_mutex_lock(&lock);
	h = atomic_load(&page);
	if (!h && !tried) {
		tried = true;
		const char *e = getenv("ZL_STATUS");
		if (!(e && !strcmp(e, "0")))
			h = page_new(&page_fd_now);
		if (h && !atfork_set) {
			atfork_set = true;
			pthread_atfork(NULL, NULL, zl_status_atfork_child);
		}
		atomic_store_explicit(&page, h, memory_order_release);
	}
	pthread_mutex_unlock(&lock);
	return h;
}

static inline struct zl_status_slot *slot_of(struct zl_status_hdr *h, int i)
{
	return (struct zl_status_slot *)((char *)h + sizeof(*h)) + i;
}

struct zl_status_slot *zl_status_slot(int i)
{
	if (i < 0 || i >= ZL_STATUS_SLOTS)
		return NULL;
	struct zl_status_hdr *h = get_page();
	if (!h)
		return NULL;
	unsigned hi = atomic_load_explicit(&h->hi, memory_order_relaxed);
	while ((unsigned)i >= hi && !atomic_compare_exchange_weak(&h->hi, &hi, (unsigned)i + 1))
		;
	return slot_of(h, i);
}

void zl_status_begin(struct zl_status_slot *s)
{
	/* another thread writing the same slot: wait for it, a while */
	for (int n = 0;; n++) {
		uint32_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
		if (!(q & 1) || n > 1000) {
			if (atomic_compare_exchange_weak_explicit(&s->seq, &q, q | 1,
								  memory_order_acquire,
								  memory_order_relaxed))
				break;
			continue;
		}
		sched_yield();
	}
	atomic_thread_fence(memory_order_release);
}

void zl_status_end(struct zl_status_slot *s)
{
	uint32_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
	atomic_store_explicit(&s->seq, (q | 1) + 1, memory_order_release);
}

int zl_status_take(uint16_t type)
{
	struct zl_status_hdr *h = get_page();
	if (!h)
		return -1;
	pthread_mutex_lock(&lock);
	int i = 0;
	unsigned hi = atomic_load(&h->hi);
	while ((unsigned)i < hi &&
	       atomic_load_explicit(&slot_of(h, i)->type, memory_order_relaxed) != ZL_ST_FREE)
		i++;
	struct zl_status_slot *s = i < ZL_STATUS_SLOTS ? zl_status_slot(i) : NULL;
	if (s) {
		zl_status_begin(s);
		size_t from = offsetof(struct zl_status_slot, state);
		memset((char *)s + from, 0, sizeof(*s) - from);
		atomic_store_explicit(&s->type, type, memory_order_relaxed);
		s->fd = s->mem_fd = s->own_fd = -1;
		zl_status_end(s);
	}
	pthread_mutex_unlock(&lock);
	return s ? i : -1;
}

void zl_status_clear(int i)
{
	struct zl_status_hdr *h = atomic_load_explicit(&page, memory_order_acquire);
	if (!h || i < 0 || (unsigned)i >= atomic_load_explicit(&h->hi, memory_order_relaxed))
		return;
	struct zl_status_slot *s = slot_of(h, i);
	if (atomic_load_explicit(&s->type, memory_order_relaxed) == ZL_ST_FREE)
		return;
	zl_status_begin(s);
	atomic_store_explicit(&s->type, ZL_ST_FREE, memory_order_relaxed);
	zl_status_end(s);
}

void zl_status_str(char *dst, size_t cap, const char *src)
{
	size_t n = src ? strnlen(src, cap - 1) : 0;
	memcpy(dst, src ? src : "", n);
	memset(dst + n, 0, cap - n);
}

/* The child holds what the parent held (its fds are copies) but is
 * another process: a page of its own, the parent's slots copied. */
void zl_status_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	struct zl_status_hdr *old = atomic_load(&page);
	if (!old)
		return;
	int fd = -1;
	struct zl_status_hdr *h = page_new(&fd);
	unsigned hi = atomic_load(&old->hi);
	/* only the slots in use: the free ones' pages stay untouched */
	for (unsigned i = 0; h && i < hi; i++) {
		struct zl_status_slot *s = slot_of(old, i);
		/* (odd: a thread of the parent's was writing it, mid-way) */
		if (atomic_load(&s->type) != ZL_ST_FREE && !(atomic_load(&s->seq) & 1))
			memcpy(slot_of(h, i), s, sizeof(*s));
	}
	if (h)
		atomic_store(&h->hi, hi);
	munmap(old, PAGE_BYTES);
	sys_close(page_fd_now);
	page_fd_now = fd;
	atomic_store_explicit(&page, h, memory_order_release);
}
