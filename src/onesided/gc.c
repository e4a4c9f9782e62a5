/* SPDX-License-Identifier: MIT */
/*
 * The one-sided store's collector thread (the Falafel thesis, section 3.6), working
 * beside clients that keep reading and writing:
 *
 * Garbage collection (generational semi-space). A region given back, or
 * taken from a client whose heartbeats stopped, is collected: one walk over
 * the table copies every container an entry points to in that region into
 * the server's current region (only header and key when the entry is
 * deleted: chains still need the key), written for (slot, tag+1), then
 * CASes the entry to the copy with tag+1. A lost CAS means a client changed
 * the entry: the copy is abandoned (its space is not reused, as in the
 * seed) unless the new word still points into the region. After the walk
 * no entry points into the region (clients never move entries, and the
 * region's owner is gone) and it is free. One walk takes as many regions
 * as there are free ones (each needs at most a region of copies). Full
 * server regions (the mature generation) are collected the same way when
 * free regions run short, the one with the largest share of garbage first
 * (entries counted at the last walk, against the copies written there).
 *
 * Table cleanup. Deleted entries and holes are removed chain by chain: the
 * server CASes the lock bit onto the deleted slot and every following one
 * up to and including the first empty one (clients restart when they meet
 * a lock), re-inserts the live entries of that stretch in order, each at
 * its first free slot from its home (or from the stretch's start when its
 * home lies before it: the slots before are occupied, as linear probing
 * requires), and stores the new words from the last slot back to the
 * first. Empty slots get tag+1 (so an insert prepared on them fails); an
 * entry that keeps its slot keeps its word; one that moves gets a copy of
 * its container written for its new (slot, tag) (table.c explains why a
 * container names its slot).
 *
 * Checking what clients wrote. Every container is copied to private memory
 * before it is checked and used; offsets and lengths are bounds-checked. An
 * entry whose container does not check out (hostile or corrupt) becomes a
 * hole when met by a walk, a cleanup, or a client's report (checked twice,
 * 1 ms apart); lock bits the server did not set are cleared by the scan.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "internal.h"
#include "os_server.h"
#include "sockutil.h"

#define TICK_NS 10000000 /* 10 ms */
#define SCAN_EVERY_US 1000000
#define LOCK_TRIES 1000

static _Atomic uint64_t *slot_at(struct zl_kvos *s, uint64_t i)
{
	return (_Atomic uint64_t *)(s->base + s->g.table_off + i * 8);
}

static uint64_t ld(struct zl_kvos *s, uint64_t i)
{
	return atomic_load_explicit(slot_at(s, i), memory_order_acquire);
}

/* The server's CAS on slot i: through the device when its atomics are not
 * the CPU's and our own connection is up (s->loop), else the CPU's: GC
 * moves and holes are safe either way, only cleanup needs the device
 * (gc_cleanup_ok). */
static bool cas(struct zl_kvos *s, uint64_t i, uint64_t *expect, uint64_t desired)
{
	if (!s->loop)
		return atomic_compare_exchange_strong(slot_at(s, i), expect, desired);
	uint64_t want = *expect;
	int rc = zl_os_cas(s->loop, s->g.table_off + i * 8, expect, desired);
	if (rc >= 0)
		return rc == 1;
	ZL_LOG(ZL_LOG_WARN, "onesided: the server's own connection failed (%s)",
	       zl_strerror(rc));
	zl_os_close(s->loop);
	s->loop = NULL;
	*expect = want;
	return atomic_compare_exchange_strong(slot_at(s, i), expect, desired);
}

/* Whether the table may be cleaned: always where the devices' atomics are
 * the CPU's; else once the collector's own connection (made here, on its
 * thread: the serving thread answers its HELLO) is up. Tried once a
 * second at most. */
static bool cleanup_ok(struct zl_kvos *s)
{
	if (!atomic_load(&s->devcas) || s->loop)
		return true;
	int64_t now = zl_now_us();
	if (now < s->loop_retry)
		return false;
	s->loop_retry = now + 1000000;
	char url[sizeof(s->loop_url)];
	pthread_mutex_lock(&s->mu);
	memcpy(url, s->loop_url, sizeof(url));
	pthread_mutex_unlock(&s->mu);
	if (!url[0]) {
		ZL_LOG(ZL_LOG_WARN, "onesided: no rdma listener to CAS through: no cleanup");
		return false;
	}
	int rc = zl_os_connect(url, NULL, 5000000, &s->loop);
	if (rc) {
		ZL_LOG(ZL_LOG_WARN, "onesided: the server's own connection to %s: %s; no cleanup",
		       url, zl_strerror(rc));
		s->loop = NULL;
	}
	return s->loop != NULL;
}

int64_t os_region_of(const struct zl_kvos *s, uint64_t off)
{
	if (off < s->g.data_off || off >= s->g.data_off + s->g.data_len)
		return -1;
	return (int64_t)((off - s->g.data_off) / s->g.region_len);
}

/* Copy the container of word w at slot i into s->buf and check it. Its
 * size, or 0 if it is not a valid container for that word. */
static uint64_t load_valid(struct zl_kvos *s, uint64_t i, uint64_t w)
{
	uint64_t pos = (uint64_t)os_e_off(w) * OS_UNIT, dend = s->g.data_off + s->g.data_len;
	if (pos < s->g.data_off || pos > dend - os_ct_size(1, 0))
		return 0;
	memcpy(s->buf, s->base + pos, OS_CT_HDR);
	uint64_t size = os_ct_check_hdr((const struct os_ct *)s->buf, (uint32_t)i, os_e_tag(w));
	if (!size || size > dend - pos)
		return 0;
	memcpy(s->buf + OS_CT_HDR, s->base + pos + OS_CT_HDR, size - OS_CT_HDR);
	if (!os_ct_check_key(s->buf) || (!os_e_deleted(w) && !os_ct_check_all(s->buf)))
		return 0;
	return size;
}

/* Room for n bytes in the server's current region: its chunk offset, or 0
 * when no region is free. */
static uint64_t srv_alloc(struct zl_kvos *s, uint64_t n)
{
	if (s->has_cur && s->g.region_len - s->cur_pos >= n) {
		uint64_t off = s->g.data_off + (uint64_t)s->cur * s->g.region_len + s->cur_pos;
		s->cur_pos += n;
		return off;
	}
	pthread_mutex_lock(&s->mu);
	if (s->has_cur)
		s->rstate[s->cur] = R_SRV_FULL;
	s->has_cur = false;
	for (uint32_t r = 0; r < s->g.nregions && s->nfree; r++) {
		if (s->rstate[r] == R_FREE) {
			s->rstate[r] = R_SRV_CUR;
			s->nfree--;
			s->has_cur = true;
			s->cur = r;
			s->cur_pos = 0;
			s->rents[r] = UINT64_MAX; /* unknown until a walk counts it */
			break;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return s->has_cur ? srv_alloc(s, n) : 0;
}

/* Write s->buf (a valid container of size bytes, key kept; value dropped
 * when del) as a copy for (slot, tag). Its offset, or 0 (no room). */
static uint64_t put_copy(struct zl_kvos *s, uint64_t slot, uint32_t tag, bool del)
{
	struct os_ct *h = (struct os_ct *)s->buf;
	if (del)
		os_ct_seal(s->buf, h->klen, 0, (uint32_t)slot, tag, h->version);
	else
		os_ct_reseal(s->buf, (uint32_t)slot, tag);
	uint64_t size = os_ct_size(h->klen, h->vlen);
	uint64_t off = srv_alloc(s, size);
	if (off) {
		memcpy(s->base + off, s->buf, size);
		s->rcopied[s->cur]++; /* only this thread writes it; read under mu */
	}
	return off;
}

static void to_hole(struct zl_kvos *s, uint64_t i, uint64_t w)
{
	if (cas(s, i, &w, os_e_make(OS_OFF_HOLE, os_tag_next(os_e_tag(w)), 0)))
		s->c_holes++;
}

/* ---- garbage collection --------------------------------------------------- */

static bool in_set(struct zl_kvos *s, uint64_t w, const uint8_t *set)
{
	uint32_t o = os_e_off(w);
	if (o <= OS_OFF_HOLE)
		return false;
	int64_t r = os_region_of(s, (uint64_t)o * OS_UNIT);
	return r >= 0 && set[r];
}

/* Move slot i's container out of the regions in set. false: no room. */
static bool move_out(struct zl_kvos *s, uint64_t i, uint64_t w, const uint8_t *set)
{
	while (in_set(s, w, set) && !os_e_locked(w)) {
		if (!load_valid(s, i, w)) {
			to_hole(s, i, w);
			w = ld(s, i);
			continue;
		}
		uint32_t tag = os_tag_next(os_e_tag(w));
		uint64_t off = put_copy(s, i, tag, os_e_deleted(w));
		if (!off)
			return false;
		if (cas(s, i, &w, os_e_make((uint32_t)(off / OS_UNIT), tag, w & OS_DEL))) {
			s->c_copied++;
			return true;
		}
	}
	return true;
}

/* Choose this walk's regions (under mu): when free regions run short, the
 * full server region with the largest share of garbage first; then the
 * regions given back or taken from silent clients, at most as many as are
 * free (each needs at most one region of copies, and frees one, so a walk
 * never leaves fewer free regions than it found). Returns how many. */
static uint32_t choose(struct zl_kvos *s, uint8_t *set)
{
	if (s->nfree < s->g.nregions / 8 + RESERVE + 1) {
		int64_t best = -1;
		double share = 0.9; /* at least 10% garbage to be worth a walk */
		for (uint32_t r = 0; r < s->g.nregions; r++) {
			if (s->rstate[r] != R_SRV_FULL || !s->rcopied[r] || s->rents[r] == UINT64_MAX)
				continue;
			double f = (double)s->rents[r] / (double)s->rcopied[r];
			if (f < share)
				share = f, best = r;
		}
		if (best >= 0)
			s->rstate[best] = R_COLLECT;
	}
	uint32_t k = s->nfree ? s->nfree : 1, n = 0;
	for (uint32_t r = 0; r < s->g.nregions && n < k; r++)
		if (s->rstate[r] == R_COLLECT)
			set[r] = 1, n++;
	return n;
}

/* One walk: collect the chosen regions, count entries per region. Returns
 * whether there was anything to do. */
static bool collect(struct zl_kvos *s)
{
	uint8_t *set = calloc(s->g.nregions, 1);
	uint64_t *ents = calloc(s->g.nregions, sizeof(uint64_t));
	if (!set || !ents) {
		free(set);
		free(ents);
		return false;
	}
	pthread_mutex_lock(&s->mu);
	uint32_t n = choose(s, set);
	pthread_mutex_unlock(&s->mu);
	bool ok = true;
	for (uint64_t i = 0; n && ok && i < s->g.nslots; i++) {
		uint64_t w = ld(s, i);
		ok = move_out(s, i, w, set);
		w = ld(s, i);
		int64_t r = os_e_off(w) > OS_OFF_HOLE ? os_region_of(s, os_e_off(w) * OS_UNIT) : -1;
		if (r >= 0)
			ents[r]++;
	}
	pthread_mutex_lock(&s->mu);
	if (n && ok) {
		for (uint32_t r = 0; r < s->g.nregions; r++) {
			if (s->rstate[r] == R_SRV_CUR)
				ents[r] = UINT64_MAX; /* still filling: not counted whole */
			if (!set[r])
				continue;
			s->rcopied[r] = 0;
			if (s->rquar[r]) {
				s->rstate[r] = R_QUAR;
			} else {
				s->rstate[r] = R_FREE;
				s->nfree++;
			}
		}
		memcpy(s->rents, ents, s->g.nregions * sizeof(uint64_t));
		s->st.gc_runs++;
	} else if (n) {
		ZL_LOG(ZL_LOG_WARN, "onesided: no free region to collect into; will retry");
	}
	pthread_mutex_unlock(&s->mu);
	free(ents);
	free(set);
	return n && ok;
}

/* ---- table cleanup -------------------------------------------------------- */

/* Restore or publish words[0..n) at slots from i, last first. */
static void store_back(struct zl_kvos *s, uint64_t i, const uint64_t *words, uint64_t n)
{
	uint64_t mask = s->g.nslots - 1;
	while (n--)
		atomic_store_explicit(slot_at(s, (i + n) & mask), words[n], memory_order_release);
}

/* Rebuild the stretch from slot i (deleted or a hole) to the next empty
 * slot. Returns the number of slots it covered (0: gave up). */
static uint64_t clean_from(struct zl_kvos *s, uint64_t i)
{
	uint64_t mask = s->g.nslots - 1, n = 0, cap = 64;
	uint64_t *old = malloc(cap * 8), *nw = NULL;
	for (;;) { /* lock up to and including the first empty slot */
		if (!old || n == s->g.nslots)
			goto undo;
		if (n == cap) {
			uint64_t *p = realloc(old, (cap *= 2) * 8);
			if (!p)
				goto undo;
			old = p;
		}
		uint64_t w = ld(s, (i + n) & mask);
		int tries = 0;
		while (!os_e_locked(w) && !cas(s, (i + n) & mask, &w, w | OS_LOCK))
			if (++tries == LOCK_TRIES)
				goto undo;
		if (os_e_locked(w))
			goto undo; /* not ours: the scan clears it */
		old[n++] = w;
		if (os_e_off(w) == OS_OFF_EMPTY)
			break;
	}
	nw = malloc(n * 8);
	if (!nw)
		goto undo;
	for (uint64_t k = 0; k < n; k++)
		nw[k] = os_e_make(OS_OFF_EMPTY, os_tag_next(os_e_tag(old[k])), 0);
	for (uint64_t k = 0; k < n; k++) {
		uint64_t w = old[k];
		if (os_e_off(w) <= OS_OFF_HOLE || os_e_deleted(w))
			continue;
		if (!load_valid(s, (i + k) & mask, w))
			continue; /* garbage: dropped */
		const struct os_ct *h = (const struct os_ct *)s->buf;
		uint64_t home = os_hash(s->buf + OS_CT_HDR, h->klen) & mask;
		uint64_t d = (home - i) & mask, p = d <= k ? d : 0;
		while (p < k && os_e_off(nw[p]) != OS_OFF_EMPTY)
			p++; /* p <= k: see the top */
		if (os_e_off(nw[p]) != OS_OFF_EMPTY)
			goto undo;
		if (p == k) {
			nw[p] = w;
			continue;
		}
		uint32_t tag = os_e_tag(nw[p]);
		uint64_t off = put_copy(s, (i + p) & mask, tag, false);
		if (!off)
			goto undo;
		nw[p] = os_e_make((uint32_t)(off / OS_UNIT), tag, 0);
		s->c_moved++;
	}
	store_back(s, i, nw, n);
	free(old);
	free(nw);
	return n;
undo:
	for (uint64_t k = 0; k < n; k++)
		old[k] &= ~OS_LOCK;
	if (old)
		store_back(s, i, old, n);
	free(old);
	free(nw);
	return 0;
}

static void cleanup(struct zl_kvos *s)
{
	for (uint64_t i = 0; i < s->g.nslots; i++) {
		uint64_t w = ld(s, i);
		if (os_e_off(w) != OS_OFF_EMPTY && !os_e_locked(w) &&
		    (os_e_deleted(w) || os_e_off(w) == OS_OFF_HOLE)) {
			uint64_t n = clean_from(s, i);
			if (n)
				i += n - 1;
		}
	}
	pthread_mutex_lock(&s->mu);
	s->st.cleanups++;
	s->deletes_told = 0;
	pthread_mutex_unlock(&s->mu);
}

/* ---- scan, repairs, expiry, the memfd ------------------------------------- */

/* Count the table (and clear lock bits no one of ours set). */
static void scan(struct zl_kvos *s)
{
	uint64_t live = 0, del = 0, holes = 0, empty = 0;
	for (uint64_t i = 0; i < s->g.nslots; i++) {
		uint64_t w = ld(s, i);
		if (os_e_locked(w)) {
			uint64_t e = w;
			cas(s, i, &e, w & ~OS_LOCK);
			w &= ~OS_LOCK;
		}
		if (os_e_off(w) == OS_OFF_EMPTY)
			empty++;
		else if (os_e_off(w) == OS_OFF_HOLE)
			holes++;
		else if (os_e_deleted(w))
			del++;
		else
			live++;
	}
	pthread_mutex_lock(&s->mu);
	s->st.live = live;
	s->st.deleted = del;
	s->st.holes = holes;
	s->st.scans++;
	s->load_ppm = (uint32_t)((s->g.nslots - empty) * 1000000 / s->g.nslots);
	bool clean = (del + holes) * 8 > s->g.nslots || s->deletes_told * 8 > s->g.nslots;
	pthread_mutex_unlock(&s->mu);
	if (clean && (del + holes) && cleanup_ok(s))
		cleanup(s);
}

static void sleep_ns(long ns)
{
	struct timespec ts = { 0, ns };
	nanosleep(&ts, NULL);
}

static void repairs(struct zl_kvos *s)
{
	uint64_t q[OS_REPAIRS];
	pthread_mutex_lock(&s->mu);
	uint32_t n = s->nrepair;
	memcpy(q, s->repair, n * sizeof(q[0]));
	s->nrepair = 0;
	pthread_mutex_unlock(&s->mu);
	for (uint32_t k = 0; k < n; k++) {
		uint64_t w = ld(s, q[k]);
		if (os_e_off(w) <= OS_OFF_HOLE || os_e_locked(w) || load_valid(s, q[k], w))
			continue;
		sleep_ns(1000000); /* a writer's bytes may still be landing (rdma) */
		if (ld(s, q[k]) == w && !load_valid(s, q[k], w))
			to_hole(s, q[k], w);
	}
}

static void expire(struct zl_kvos *s)
{
	int64_t now = zl_now_us();
	pthread_mutex_lock(&s->mu);
	for (uint32_t i = 0; i < s->o.max_clients; i++) {
		struct os_sess *c = &s->sess[i];
		if (c->client && now - c->last_hb > s->o.hb_window_us) {
			ZL_LOG(ZL_LOG_INFO, "onesided: session %llu expired (%lld us silent)",
			       (unsigned long long)c->session, (long long)(now - c->last_hb));
			/* the client may only be stopped, in the middle of a write:
			 * its regions are collected but not given out again until
			 * it speaks or its connection ends, and its window stays
			 * open (a call of a client that was only slow must not
			 * kill its connection) until the client speaks again or its
			 * connection ends (server.c: free_slot) */
			os_sess_drop(s, c, true);
			s->st.expired++;
		}
	}
	pthread_mutex_unlock(&s->mu);
}

/* Hand the chunk's memfd to each process of our uid that connects. */
static void serve_memfd(struct zl_kvos *s)
{
	for (int k = 0; k < 16; k++) {
		int c = accept4(s->lsock, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c < 0)
			return;
		int32_t pid;
		if (!zl_check_peer_uid(c, 0, "onesided client", &pid))
			(void)zl_send_fds(c, "ZLOS", 4, &s->memfd, 1);
		close(c);
	}
}

void *os_collector(void *arg)
{
	struct zl_kvos *s = arg;
	while (!atomic_load(&s->stop)) {
		if (atomic_load(&s->devcas) && !s->loop)
			(void)cleanup_ok(s); /* the device's CAS for the moves too */
		serve_memfd(s);
		expire(s);
		repairs(s);
		bool busy = collect(s);
		if (zl_now_us() >= s->next_scan) {
			scan(s);
			s->next_scan = zl_now_us() + SCAN_EVERY_US;
		}
		pthread_mutex_lock(&s->mu);
		s->st.gc_copied = s->c_copied;
		s->st.gc_holes = s->c_holes;
		s->st.cleanup_moved = s->c_moved;
		pthread_mutex_unlock(&s->mu);
		if (!busy) { /* more regions may be waiting: go on at once */
			/* a connecting client gets the memfd at once */
			struct pollfd p = { .fd = s->lsock, .events = POLLIN };
			poll(&p, 1, TICK_NS / 1000000);
		}
	}
	zl_os_close(s->loop); /* its goodbye waits 100 ms at most */
	s->loop = NULL;
	return NULL;
}
