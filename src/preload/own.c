/* SPDX-License-Identifier: MIT */
/*
 * One side's own state (struct zp_own, preload.h has why): made with the
 * side, inherited by fork, given to exec, and the locks that make a read
 * or a ring write one step against another holder's.
 *
 * Threat model: the page is ours alone (a memfd never sent to the peer,
 * close-on-exec except across an exec of ours), so what is in it is
 * trusted as our own memory; a holder of ours that dies holding a lock
 * leaves it consistent (every store under it is a whole one), and the
 * next holder takes it (robust mutex). A holder that stops holding one
 * (SIGSTOP) stops the others' reads or writes, as a stopped thread that
 * holds a kernel socket's lock would: bounded, each call fails with
 * EAGAIN after ZP_OWN_LOCK_S seconds.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "preload.h"

#define OWN_LEN 4096
_Static_assert(sizeof(struct zp_own) <= OWN_LEN, "struct zp_own: one page");

static int init_lock(pthread_mutex_t *m, bool shared)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	if (shared) {
		pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
		pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	}
	int r = pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
	return -r;
}

static void init_state(struct zp_own *o)
{
	o->magic = ZP_OWN_MAGIC;
	atomic_init(&o->procs, 1);
	atomic_init(&o->rx_kb, ZP_UNLATCHED);
	atomic_init(&o->closed_tail, ZP_UNLATCHED);
	atomic_init(&o->rx_bt, ZP_UNLATCHED);
	atomic_init(&o->rx_kr, ZP_UNLATCHED);
}

struct zp_own *zp_own_new(int *fd)
{
	if (!fd) { /* one process's (across hosts: xhost.c shares its own) */
		struct zp_own *o = calloc(1, sizeof(*o));
		if (!o)
			return NULL;
		init_state(o);
		if (init_lock(&o->rx_lock, false) || init_lock(&o->tx_lock, false)) {
			free(o);
			return NULL;
		}
		return o;
	}
	*fd = memfd_create("zipline-own", MFD_CLOEXEC);
	if (*fd < 0)
		return NULL;
	if (*fd < 512) { /* out of the program's way, as the rings' memfd */
		int h = zp_real.fcntl(*fd, F_DUPFD_CLOEXEC, 512);
		if (h >= 0) {
			zp_real.close(*fd);
			*fd = h;
		}
	}
	struct zp_own *o = MAP_FAILED;
	if (!ftruncate(*fd, OWN_LEN))
		o = mmap(NULL, OWN_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	if (o == MAP_FAILED || init_lock(&o->rx_lock, true) || init_lock(&o->tx_lock, true)) {
		if (o != MAP_FAILED)
			zp_own_free(o, true);
		zp_real.close(*fd);
		*fd = -1;
		return NULL;
	}
	init_state(o);
	return o;
}

struct zp_own *zp_own_map(int fd)
{
	struct stat st;
	if (fstat(fd, &st) || st.st_size != OWN_LEN)
		return NULL;
	struct zp_own *o = mmap(NULL, OWN_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (o == MAP_FAILED)
		return NULL;
	if (o->magic != ZP_OWN_MAGIC) {
		munmap(o, OWN_LEN);
		return NULL;
	}
	return o;
}

void zp_own_free(struct zp_own *o, bool shared)
{
	if (!o)
		return;
	if (!shared) {
		pthread_mutex_destroy(&o->rx_lock);
		pthread_mutex_destroy(&o->tx_lock);
		free(o);
		return;
	}
	munmap(o, OWN_LEN); /* (other holders may still use its locks) */
}

int zp_own_lock(pthread_mutex_t *m)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_sec += ZP_OWN_LOCK_S;
	int r = pthread_mutex_timedlock(m, &t);
	if (r == EOWNERDEAD) /* a holder of ours died in a call: its stores
			      * are whole, the state is consistent */
		r = pthread_mutex_consistent(m);
	if (r == ETIMEDOUT) {
		static _Atomic int64_t said;
		int64_t now = zl_now_us(), was = atomic_load(&said);
		if (now - was > 10 * 1000000 && atomic_compare_exchange_strong(&said, &was, now))
			ZL_LOG(ZL_LOG_WARN, "preload: another holder of a socket kept it for "
			       "%d s (stopped?): the call fails with EAGAIN", ZP_OWN_LOCK_S);
		return -EAGAIN;
	}
	return -r;
}

bool zp_own_trylock(pthread_mutex_t *m)
{
	int r = pthread_mutex_trylock(m);
	if (r == EOWNERDEAD)
		r = pthread_mutex_consistent(m);
	return r == 0;
}

void zp_own_unlock(pthread_mutex_t *m)
{
	pthread_mutex_unlock(m);
}
