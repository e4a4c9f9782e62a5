/* SPDX-License-Identifier: MIT */
/*
 * The process's status page, written (status.h has the design).
 *
 * The page is only ever written here, never read back: any process of the
 * user's may write it too, so which slots are taken, how far they go and
 * each slot's sequence count are kept in this process's own memory, and a
 * forged page changes what zl-ss shows, never what we do. Writes of slots
 * take one lock (they come with connections, closes and a server's
 * 100 ms copies, never with a message); a channel's counters are atomics
 * of one writer each and take none (chanstat.c).
 *
 * It calls the kernel directly where the preload takes the libc call over
 * (close, fcntl): its close would come back here.
 */
#include "status.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PAGE_BYTES (sizeof(struct zl_status_hdr) + (size_t)ZL_STATUS_SLOTS * sizeof(struct zl_status_slot))
#define HIGH_FD 512 /* out of the numbers programs expect (as the preload's) */

static _Atomic(struct zl_status_hdr *) page;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* making the page,
							   * every slot write */
static atomic_bool tried;
/* ours, not the page's: */
static _Atomic uint32_t hi;                 /* slots [0, hi) may be in use */
static _Atomic uint8_t types[ZL_STATUS_SLOTS]; /* each slot's type */
static uint32_t seqs[ZL_STATUS_SLOTS];      /* each slot's sequence count */
static int page_fd = -1;
static dev_t page_dev;
static ino_t page_ino; /* (the program may close our fd: a number reused
			* later is not ours to close) */

static int sys_close(int fd) { return (int)syscall(SYS_close, fd); }

/* A sealed memfd of the page's size, above HIGH_FD; -1 if none. */
static int new_fd(void)
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

/* a new page (its fd into page_fd), or NULL */
static struct zl_status_hdr *page_new(void)
{
	int fd = new_fd();
	if (fd < 0)
		return NULL;
	struct stat st;
	struct zl_status_hdr *h = fstat(fd, &st) ? MAP_FAILED
			: mmap(NULL, PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
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
	page_fd = fd;
	page_dev = st.st_dev;
	page_ino = st.st_ino;
	return h;
}

/* our page fd, if the program has not closed it (or put another file at
 * its number) */
static bool page_fd_ours(void)
{
	struct stat st;
	return page_fd >= 0 && !fstat(page_fd, &st) && st.st_dev == page_dev &&
	       st.st_ino == page_ino;
}

static struct zl_status_hdr *get_page(void)
{
	struct zl_status_hdr *h = atomic_load_explicit(&page, memory_order_acquire);
	if (__builtin_expect(h != NULL, 1) || atomic_load_explicit(&tried, memory_order_acquire))
		return h;
	pthread_mutex_lock(&lock);
	h = atomic_load(&page);
	if (!h && !atomic_load(&tried)) {
		const char *e = getenv("ZL_STATUS");
		if (!(e && !strcmp(e, "0")))
			h = page_new();
		if (h)
			pthread_atfork(NULL, NULL, zl_status_atfork_child);
		atomic_store_explicit(&page, h, memory_order_release);
		atomic_store_explicit(&tried, true, memory_order_release);
	}
	pthread_mutex_unlock(&lock);
	return h;
}

static inline struct zl_status_slot *slot_of(struct zl_status_hdr *h, uint32_t i)
{
	return (struct zl_status_slot *)((char *)h + sizeof(*h)) + i;
}

static inline uint32_t index_of(struct zl_status_slot *s)
{
	return (uint32_t)(s - slot_of(atomic_load_explicit(&page, memory_order_relaxed), 0));
}

struct zl_status_slot *zl_status_slot(int i)
{
	if (i < 0 || i >= ZL_STATUS_SLOTS)
		return NULL;
	struct zl_status_hdr *h = get_page();
	if (!h)
		return NULL;
	uint32_t n = atomic_load_explicit(&hi, memory_order_relaxed);
	while ((uint32_t)i >= n && !atomic_compare_exchange_weak(&hi, &n, (uint32_t)i + 1))
		;
	return slot_of(h, (uint32_t)i);
}

/* under lock: the slot's count odd (being written) or even (written) */
static void seq_step(uint32_t i, struct zl_status_slot *s)
{
	atomic_store_explicit(&s->seq, ++seqs[i], memory_order_release);
}

void zl_status_begin(struct zl_status_slot *s)
{
	pthread_mutex_lock(&lock);
	/* (the page's copy of hi, for zl-ss, under the lock: never smaller
	 * than a slot written; never read here) */
	struct zl_status_hdr *h = atomic_load_explicit(&page, memory_order_relaxed);
	atomic_store_explicit(&h->hi, atomic_load(&hi), memory_order_release);
	seq_step(index_of(s), s);
	atomic_thread_fence(memory_order_release);
}

void zl_status_type(struct zl_status_slot *s, uint16_t type)
{
	atomic_store_explicit(&types[index_of(s)], (uint8_t)type, memory_order_relaxed);
	atomic_store_explicit(&s->type, type, memory_order_relaxed);
}

void zl_status_end(struct zl_status_slot *s)
{
	seq_step(index_of(s), s);
	pthread_mutex_unlock(&lock);
}

int zl_status_take(uint16_t type)
{
	struct zl_status_hdr *h = get_page();
	if (!h)
		return -1;
	pthread_mutex_lock(&lock);
	uint32_t i = 0, n = atomic_load(&hi);
	while (i < n && atomic_load_explicit(&types[i], memory_order_relaxed) != ZL_ST_FREE)
		i++;
	if (i < ZL_STATUS_SLOTS)
		atomic_store_explicit(&types[i], (uint8_t)type, memory_order_relaxed);
	pthread_mutex_unlock(&lock);
	struct zl_status_slot *s = i < ZL_STATUS_SLOTS ? zl_status_slot((int)i) : NULL;
	if (!s)
		return -1;
	zl_status_begin(s);
	size_t from = offsetof(struct zl_status_slot, state);
	memset((char *)s + from, 0, sizeof(*s) - from);
	zl_status_type(s, type);
	s->fd = s->mem_fd = s->own_fd = -1;
	zl_status_end(s);
	return (int)i;
}

void zl_status_clear(int i)
{
	struct zl_status_hdr *h = atomic_load_explicit(&page, memory_order_acquire);
	if (!h || i < 0 || (uint32_t)i >= atomic_load_explicit(&hi, memory_order_relaxed) ||
	    atomic_load_explicit(&types[i], memory_order_relaxed) == ZL_ST_FREE)
		return;
	struct zl_status_slot *s = slot_of(h, (uint32_t)i);
	zl_status_begin(s);
	zl_status_type(s, ZL_ST_FREE);
	zl_status_end(s);
}

void zl_status_str(char *dst, size_t cap, const char *src)
{
	size_t n = src ? strnlen(src, cap - 1) : 0;
	memcpy(dst, src ? src : "", n);
	memset(dst + n, 0, cap - n);
}

/* The child holds what the parent held (its fds are copies) but is
 * another process: a page of its own, the slots in use copied. */
void zl_status_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	struct zl_status_hdr *old = atomic_load(&page);
	if (!old)
		return;
	if (page_fd_ours())
		sys_close(page_fd);
	page_fd = -1;
	struct zl_status_hdr *h = page_new();
	uint32_t n = atomic_load(&hi);
	for (uint32_t i = 0; i < n; i++) {
		if (seqs[i] & 1) { /* a thread of the parent's was writing it */
			seqs[i]++;
			atomic_store(&types[i], ZL_ST_FREE);
		}
		if (h && atomic_load(&types[i]) != ZL_ST_FREE) {
			memcpy(slot_of(h, i), slot_of(old, i), sizeof(struct zl_status_slot));
			atomic_store(&slot_of(h, i)->seq, seqs[i]);
			atomic_store(&slot_of(h, i)->type, atomic_load(&types[i]));
		}
	}
	if (h)
		atomic_store(&h->hi, n);
	munmap(old, PAGE_BYTES);
	atomic_store_explicit(&page, h, memory_order_release);
}

/* dlclose of the library (or the end of the process): the page's fd goes;
 * its mapping stays, for a thread that may still write it */
__attribute__((destructor)) static void status_fini(void)
{
	if (page_fd_ours())
		sys_close(page_fd);
	page_fd = -1;
}
