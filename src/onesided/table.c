/* SPDX-License-Identifier: MIT */
/*
 * Client operations of the one-sided store (the Falafel thesis, section 3.5): FIND,
 * GET, SET and DELETE on the server's table with reads, writes and CAS
 * only. Layout in layout.h.
 *
 * FIND(key) walks the table from slot hash(key) & mask (linear probing):
 * an empty slot ends the walk (absent); a hole is stepped over; any other
 * word's container is read and checked; a locked word (the server is
 * rebuilding the chain) restarts the walk. DELETE CASes word w to w|DEL
 * (same tag; the slot keeps its key, so chains through it stay whole). SET
 * writes a container into the caller's own region for (slot, tag+1), then
 * CASes the slot's word w to (container, tag+1). Entries are never cleared
 * by clients, only by the server's cleanup, under the lock bit.
 *
 * Lock-freedom. A call restarts only when a CAS failed or a word it read
 * changed (or a container it read did not check out, which again means its
 * word changed). Each of these means another client or the server
 * completed a change in the meantime: some call always finishes, so the
 * operations are lock-free (Herlihy), with the server's locks as the one
 * exception: a locked chain holds callers back while the server rebuilds
 * it, a bounded piece of local work. Every call gives up after a bounded
 * time (-EAGAIN), so a dead server cannot hang a client either.
 *
 * Linearizability. GET takes effect when it reads the word it returns the
 * container of, SET and DELETE at their successful CAS. A reader that read
 * word (X, tag T) at slot s accepts the container it then reads at X only
 * if the container says (s, T) and its CRCs hold. Why that container is
 * the one the word meant, even if X was collected and reused meanwhile:
 *   - A container for (s, T) is written only by a SET that read s holding
 *     tag T-1, or by the server moving the word (X', T-1) at s (it writes
 *     the copy as (s, T), then CASes). Tags at a slot only grow: every CAS
 *     that changes the offset also increments the tag (SET, the server's
 *     moves and clears; DELETE changes only the flag). So once s holds tag
 *     T, no one can read T-1 there again, and no new container for (s, T)
 *     can be made, except after 2^30 changes of one slot: a client's call
 *     re-reads before it CASes once it has run 100 ms (the heartbeat
 *     argument of section 4.2.3, with our own bound).
 *   - Several containers for (s, T) can exist (SETs racing for the same
 *     word; only one CAS wins), but the word (X, T) names one offset, so
 *     the container at X that says (s, T) is the winner's: a loser writes
 *     its container in its own region, never at X, and re-seals it for a
 *     new (slot, tag) before trying again.
 *   - A torn read (the region reused while we copy) mixes two containers;
 *     vcrc covers header, key and value, kcrc is inside the header's hcrc:
 *     a mixture passes with probability about 2^-32 per check.
 *   - Containers are complete before their word is published: shm stores
 *     them before a sequentially consistent CAS; on rdma a reader that sees
 *     the word before the bytes have landed fails the CRC and retries.
 * Absence and the server's cleanup. A cleanup moves entries backwards
 * into slots a walk may have read already, and empties the slots they
 * leave: a walk that read part of a chain before and the rest after (or,
 * on shm, one batch word by word) could miss its key and take it for
 * absent (and a SET insert it a second time, into the slot the move
 * left empty: os_gc caught both). So before a walk reports a key absent
 * (to a GET, a DELETE, or a SET that will insert it), it reads the slots
 * it walked again, up to and including the empty one, and starts over
 * unless they hold the same words (compared through a running summary):
 * two equal collects mean the chain was in that state, without the key,
 * at the moment between them. Any cleanup in between changes a word in
 * that range: the slot a key moved into gets a new offset or tag. (A word
 * that changes and changes back needs 2^30 tag changes; DELETE and the
 * lock flip bits one way.) After that moment the key cannot appear in the
 * range but by a SET, and a cleanup re-tags the empty slot too, so an
 * insert's CAS on it fails. A found key needs no such check (its
 * container names the slot and tag read). Absent keys pay one more read
 * of the entries.
 *
 * A word whose container never checks out while the word stays the same
 * was written by a faulty or hostile client. FIND steps over it (counted
 * in garbage, and reported so the server turns it into a hole); GET of a
 * key whose own container is corrupt returns -EBADMSG, never the bytes.
 * Offsets are bounds-checked before any read, lengths come only from a
 * checked header, and a walk ends after nslots probes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "ring.h"
#include "table.h"
#include "zipline_kv.h"

#define ABA_BOUND_US 100000    /* re-read before a CAS after this long */
/* Containers pre-loaded beyond Knuth's expected probes: chains longer than
 * the mean then rarely cost another round trip (at load 0.5: 2.25 round
 * trips per GET with none, 2.09 with two; reads 3.0 and 3.7). */
#define PRELOAD_EXTRA 2u
#define ENTRIES_MIN 8u /* entries read at once: one 64-byte line */
#define RA_MIN 128u
#define RA_MAX OS_RA_MAX

uint32_t os_ra_entries(double a)
{
	if (a < 0)
		a = 0;
	if (a > 0.95)
		a = 0.95;
	double c = 0.5 * (1.0 + 1.0 / (1.0 - a));
	uint32_t n = (uint32_t)c;
	return n < c ? n + 1 : n;
}

int os_table_init(struct os_table *t, const struct os_geom *g, const struct os_io *io)
{
	memset(t, 0, sizeof(*t));
	int rc = os_geom_check(g);
	if (rc)
		return rc;
	t->g = *g;
	t->io = *io;
	t->ra_bytes = 256;
	t->buf_cap = (uint32_t)os_ct_size(ZL_KV_MAX_KEY, ZL_KV_MAX_VAL) + RA_MAX;
	t->ents_cap = 64;
	t->buf = malloc(t->buf_cap);
	t->ents_all = malloc(OS_ENTS_BYTES(t)); /* + read_word's, per lane */
	t->pre_all = malloc(OS_PRE_BYTES);
	if (!t->buf || !t->ents_all || !t->pre_all) {
		os_table_fini(t);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < OS_LANES; i++) {
		t->lane[i].ents = t->ents_all + (size_t)i * (t->ents_cap + 1);
		t->lane[i].pre = t->pre_all + (size_t)i * OS_PRELOAD * RA_MAX;
	}
	t->ln = &t->lane[0];
	return 0;
}

void os_table_fini(struct os_table *t)
{
	free(t->buf);
	free(t->ents_all);
	free(t->pre_all);
	t->buf = NULL;
	t->ents_all = NULL;
	t->pre_all = NULL;
}

/* ---- access with counts --------------------------------------------------- */

static int rd(struct os_table *t, struct os_counts *c, uint64_t off, void *dst, uint32_t len)
{
	c->reads++;
	return t->io.read(t->io.ctx, off, dst, len);
}

static int sync_io(struct os_table *t, struct os_counts *c)
{
	c->syncs++;
	return t->io.sync(t->io.ctx);
}

static uint64_t slot_off(const struct os_table *t, uint64_t s)
{
	return t->g.table_off + s * 8;
}

/* Post the read of n entries from slot s on into t->ln->ents (two reads
 * where they wrap). */
static int post_ents(struct os_table *t, struct os_counts *c, uint64_t s, uint32_t n)
{
	uint64_t first = t->g.nslots - s;
	uint64_t *e = t->ln->ents;
	if (n <= first)
		return rd(t, c, slot_off(t, s), e, n * 8);
	int rc = rd(t, c, slot_off(t, s), e, (uint32_t)first * 8);
	return rc ? rc : rd(t, c, slot_off(t, 0), e + first, (uint32_t)(n - first) * 8);
}

static int read_ents(struct os_table *t, struct os_counts *c, uint64_t s, uint32_t n)
{
	int rc = post_ents(t, c, s, n);
	return rc ? rc : sync_io(t, c);
}

/* One word again, into the spare word after the entries (memory the
 * access method can reach: registered on rdma), then to *w. */
static int read_word(struct os_table *t, struct os_counts *c, uint64_t s, uint64_t *w)
{
	uint64_t *spare = t->ln->ents + t->ents_cap;
	int rc = rd(t, c, slot_off(t, s), spare, 8);
	if (!rc && !(rc = sync_io(t, c)))
		*w = *spare;
	return rc;
}

/* ---- FIND ----------------------------------------------------------------- */

struct found {
	uint64_t slot, w;
	bool match;
	uint64_t size; /* the match's container size (its bytes in t->buf) */
};

enum { F_DONE = 0, F_RESTART = 1 };

/* Read the container of word w at slot s into t->buf (at least header and
 * key; more as read ahead) and check header and key: 1 valid (*size set,
 * *have bytes of it in t->buf), 0 invalid. */
static int load_ct(struct os_table *t, struct os_counts *c, uint64_t s, uint64_t w,
		   uint64_t *size, uint64_t *have, int *err)
{
	uint64_t pos = (uint64_t)os_e_off(w) * OS_UNIT;
	uint64_t dend = t->g.data_off + t->g.data_len;
	*err = 0;
	if (pos < t->g.data_off || pos > dend - os_ct_size(1, 0))
		return 0;
	uint64_t room = dend - pos;
	uint32_t want = t->ra_bytes;
	if (want > room)
		want = (uint32_t)room;
	struct os_lane *ln = t->ln;
	uint32_t k = 0;
	while (k < OS_PRELOAD && ln->pre_w[k] != w)
		k++;
	if (k < OS_PRELOAD) { /* read with the entries' batch */
		want = ln->pre_len[k];
		memcpy(t->buf, ln->pre + (size_t)k * RA_MAX, want);
		ln->pre_w[k] = 0;
	} else if ((*err = rd(t, c, pos, t->buf, want)) || (*err = sync_io(t, c))) {
		return 0;
	}
	const struct os_ct *h = (const struct os_ct *)t->buf;
	uint64_t sz = os_ct_check_hdr(h, (uint32_t)s, os_e_tag(w));
	if (!sz || sz > room)
		return 0;
	*have = want < sz ? want : sz;
	if (*have < OS_CT_HDR + h->klen) {
		uint64_t need = OS_CT_HDR + h->klen;
		if ((*err = rd(t, c, pos + *have, t->buf + *have, (uint32_t)(need - *have))) ||
		    (*err = sync_io(t, c)))
			return 0;
		*have = need;
	}
	/* read ahead next time what this container took, within bounds: up at
	 * once, down slowly */
	uint32_t next = sz > RA_MAX ? RA_MAX : (uint32_t)sz < RA_MIN ? RA_MIN : (uint32_t)sz;
	t->ra_bytes = next >= t->ra_bytes ? next : ((t->ra_bytes + next) / 2 + 7) & ~7u;
	if (!os_ct_check_key(t->buf))
		return 0;
	*size = sz;
	return 1;
}

/* The rest of a matching container (after have bytes) and its vcrc. */
static int load_rest(struct os_table *t, struct os_counts *c, uint64_t w, uint64_t size,
		     uint64_t have, int *err)
{
	*err = 0;
	if (have < size) {
		uint64_t pos = (uint64_t)os_e_off(w) * OS_UNIT;
		if ((*err = rd(t, c, pos + have, t->buf + have, (uint32_t)(size - have))) ||
		    (*err = sync_io(t, c)))
			return 0;
	}
	return os_ct_check_all(t->buf);
}

/* Post the pre-load of the containers of the first m occupied entries
 * just read: a collision chain then costs no further round trip. The
 * first batch of a walk takes as many as Knuth's expected probes
 * (os_ra_entries) and PRELOAD_EXTRA; a walk that goes on is in a long
 * chain and takes the whole batch. The number posted, or io's error. */
static int post_preload(struct os_table *t, struct os_counts *c, uint32_t n, uint32_t m)
{
	struct os_lane *ln = t->ln;
	uint32_t k = 0;
	uint64_t dend = t->g.data_off + t->g.data_len;
	memset(ln->pre_w, 0, sizeof(ln->pre_w));
	if (m > OS_PRELOAD)
		m = OS_PRELOAD;
	for (uint32_t j = 0; j < n && k < m; j++) {
		uint64_t w = ln->ents[j], pos = (uint64_t)os_e_off(w) * OS_UNIT;
		if (os_e_locked(w) || os_e_off(w) == OS_OFF_EMPTY)
			break;
		if (os_e_off(w) == OS_OFF_HOLE || pos < t->g.data_off ||
		    pos > dend - os_ct_size(1, 0))
			continue;
		uint32_t len = t->ra_bytes < dend - pos ? t->ra_bytes : (uint32_t)(dend - pos);
		int rc = rd(t, c, pos, ln->pre + (size_t)k * RA_MAX, len);
		if (rc)
			return rc;
		ln->pre_w[k] = w;
		ln->pre_len[k++] = len;
	}
	return (int)k;
}

static int preload(struct os_table *t, struct os_counts *c, uint32_t n, uint32_t m)
{
	int k = post_preload(t, c, n, m);
	return k > 0 ? sync_io(t, c) : k;
}

/* Fold word w into a walk's summary (order matters). */
static uint64_t fold(uint64_t h, uint64_t w)
{
	return zl_mix64(h ^ w) + 0x9e3779b97f4a7c15ull;
}

/* Whether slots [from, from+n) still hold the words whose summary is sum:
 * 1 yes, 0 no, or an io error. */
static int unchanged(struct os_table *t, struct os_counts *c, uint64_t from, uint64_t n,
		     uint64_t sum)
{
	uint64_t mask = t->g.nslots - 1, h = 0;
	while (n) {
		uint32_t k = n < t->ents_cap ? (uint32_t)n : t->ents_cap;
		int rc = read_ents(t, c, from, k);
		if (rc)
			return rc;
		for (uint32_t i = 0; i < k; i++)
			h = fold(h, t->ln->ents[i]);
		from = (from + k) & mask;
		n -= k;
	}
	return h == sum;
}
/* Word w at slot s pointed at no valid container: F_RESTART if the word
 * changed meanwhile (the container moved), else 0 and it is counted as
 * garbage (a faulty client's: reported to the server), or an io error. */
static int garbage(struct os_table *t, struct os_counts *c, uint64_t s, uint64_t w)
{
	uint64_t again;
	int rc = read_word(t, c, s, &again);
	if (rc)
		return rc;
	if (again != w)
		return F_RESTART;
	t->garbage++;
	t->garbage_slot = s;
	return 0;
}

/* Entries a walk reads at once, and the containers pre-loaded with its
 * first batch. */
static uint32_t walk_batch(const struct os_table *t)
{
	uint32_t n = ENTRIES_MIN > os_ra_entries(t->load) ? ENTRIES_MIN : os_ra_entries(t->load);
	if (n > t->ents_cap)
		n = t->ents_cap;
	return n > t->g.nslots ? (uint32_t)t->g.nslots : n;
}

static uint32_t first_preload(const struct os_table *t)
{
	return os_ra_entries(t->load) + PRELOAD_EXTRA;
}

static int find(struct os_table *t, struct os_counts *c, const void *key, uint32_t klen,
		uint64_t home, bool want_all, struct found *f)
{
	uint64_t mask = t->g.nslots - 1, s = home & mask, sum = 0;
	uint32_t n = walk_batch(t), i = n;
	if (t->ln->primed && t->ln->home == home) { /* os_prime read the first step */
		n = t->ln->n;
		i = 0;
	}
	t->ln->primed = false;
	for (uint64_t probes = 0; probes < t->g.nslots; probes++, s = (s + 1) & mask, i++) {
		int rc;
		if (i == n) {
			uint32_t m = probes ? n : first_preload(t);
			if ((rc = read_ents(t, c, s, n)) || (rc = preload(t, c, n, m)))
				return rc;
			i = 0;
		}
		uint64_t w = t->ln->ents[i];
		c->probes++;
		sum = fold(sum, w);
		if (os_e_locked(w))
			return F_RESTART;
		if (os_e_off(w) == OS_OFF_EMPTY) {
			/* absent, if the walk saw one state of the chain (the top) */
			if ((rc = unchanged(t, c, home & mask, probes + 1, sum)) != 1)
				return rc < 0 ? rc : F_RESTART;
			*f = (struct found){ .slot = s, .w = w };
			return F_DONE;
		}
		if (os_e_off(w) == OS_OFF_HOLE)
			continue;
		uint64_t size = 0, have = 0;
		int ok = load_ct(t, c, s, w, &size, &have, &rc);
		if (rc)
			return rc;
		if (!ok) {
			if ((rc = garbage(t, c, s, w)))
				return rc;
			continue;
		}
		const struct os_ct *h = (const struct os_ct *)t->buf;
		if (h->klen != klen || memcmp(t->buf + OS_CT_HDR, key, klen))
			continue;
		*f = (struct found){ .slot = s, .w = w, .match = true, .size = size };
		if (want_all && !os_e_deleted(w) && !load_rest(t, c, w, size, have, &rc)) {
			if (rc || (rc = garbage(t, c, s, w)))
				return rc;
			return -EBADMSG;
		}
		return F_DONE;
	}
	int rc = unchanged(t, c, home & mask, t->g.nslots, sum);
	if (rc != 1)
		return rc < 0 ? rc : F_RESTART;
	return -ENOSPC;
}

/* Pause before restart number r: spin first, then sleep up to 1 ms. */
static void backoff(uint32_t r)
{
	if (r < 4)
		return;
	long ns = r < 14 ? 1000l << (r - 4) : 1000000l;
	struct timespec ts = { 0, ns };
	nanosleep(&ts, NULL);
}

/* Run find until it settles or the call's budget is spent. */
static int find_settled(struct os_table *t, struct os_counts *c, const void *key,
			uint32_t klen, uint64_t home, bool want_all, struct found *f,
			int64_t start, uint32_t *round)
{
	for (;; (*round)++) {
		int rc = find(t, c, key, klen, home, want_all, f);
		if (rc != F_RESTART)
			return rc;
		c->retries++;
		if (!t->budget_us)
			return -EAGAIN;
		if (!start)
			start = zl_now_us(); /* GETs read the clock only on a restart */
		else if (zl_now_us() - start > t->budget_us)
			return -EAGAIN;
		backoff(*round);
		if (t->renew && (rc = t->renew(t->renew_arg)))
			return rc;
	}
}

/* ---- GET, SET, DELETE ----------------------------------------------------- */

int os_get(struct os_table *t, const void *key, uint32_t klen, const uint8_t **val,
	   uint32_t *vlen, uint64_t *version)
{
	struct found f;
	uint32_t round = 0;
	t->get.ops++;
	int rc = find_settled(t, &t->get, key, klen, os_hash(key, klen), true, &f, 0, &round);
	if (rc)
		return rc == -ENOSPC ? -ENOENT : rc; /* a full table without it */
	if (!f.match || os_e_deleted(f.w))
		return -ENOENT;
	const struct os_ct *h = (const struct os_ct *)t->buf;
	*val = t->buf + OS_CT_HDR + h->klen;
	*vlen = h->vlen;
	*version = h->version;
	return 0;
}

/* The CAS that ends a SET or DELETE, of f's word to nw: 0 done, 1 go round
 * again (the word changed, or was read more than ABA_BOUND_US ago), or an
 * error (-EAGAIN when the call's budget is spent). */
static int publish(struct os_table *t, struct os_counts *c, const struct found *f, uint64_t nw,
		   int64_t t0, int64_t start, uint32_t round)
{
	int rc;
	if (zl_now_us() - t0 <= ABA_BOUND_US) {
		uint64_t old = 0;
		c->cas++;
		if ((rc = t->io.cas(t->io.ctx, slot_off(t, f->slot), f->w, nw, &old)) ||
		    (rc = sync_io(t, c)))
			return rc;
		if (old == f->w)
			return 0;
		c->retries++;
	}
	if (zl_now_us() - start > t->budget_us)
		return -EAGAIN;
	backoff(round);
	return t->renew && (rc = t->renew(t->renew_arg)) ? rc : 1;
}

/* Seal the container for f's slot and tag (only re-seal one sealed
 * before) and write it to w->off: the lease is checked before the region
 * is written, and again before the word may be published. */
static int write_ct(struct os_table *t, const struct os_wctx *w, const void *key,
		    uint32_t klen, const void *val, uint32_t vlen, const struct found *f,
		    uint32_t tag, bool sealed)
{
	int rc;
	if (!sealed) {
		memcpy(w->local + OS_CT_HDR, key, klen);
		memcpy(w->local + OS_CT_HDR + klen, val, vlen);
		os_ct_seal(w->local, klen, vlen, (uint32_t)f->slot, tag, w->version);
	} else {
		os_ct_reseal(w->local, (uint32_t)f->slot, tag);
	}
	if (w->may_commit && (rc = w->may_commit(w->arg)))
		return rc;
	t->set.writes++;
	if ((rc = t->io.write(t->io.ctx, w->off, w->local, (uint32_t)os_ct_size(klen, vlen))))
		return rc;
	return w->may_commit ? w->may_commit(w->arg) : 0;
}

int os_set(struct os_table *t, const void *key, uint32_t klen, const void *val,
	   uint32_t vlen, uint64_t expected, const struct os_wctx *w)
{
	uint64_t home = os_hash(key, klen);
	bool sealed = false;
	int64_t start = zl_now_us();
	t->set.ops++;
	for (uint32_t round = 0;; round++) {
		struct found f;
		int64_t t0 = t->ln->primed ? t->primed_at : zl_now_us();
		int rc = find_settled(t, &t->set, key, klen, home, false, &f, start, &round);
		if (rc)
			return rc;
		bool live = f.match && !os_e_deleted(f.w);
		if (expected != UINT64_MAX) {
			uint64_t have = live ? ((const struct os_ct *)t->buf)->version : 0;
			if (have != expected)
				return -ESTALE;
		}
		uint32_t tag = os_tag_next(os_e_tag(f.w));
		if ((rc = write_ct(t, w, key, klen, val, vlen, &f, tag, sealed)))
			return rc;
		sealed = true;
		uint64_t nw = os_e_make((uint32_t)(w->off / OS_UNIT), tag, 0);
		if ((rc = publish(t, &t->set, &f, nw, t0, start, round)) != 1)
			return rc;
	}
}

int os_del(struct os_table *t, const void *key, uint32_t klen)
{
	uint64_t home = os_hash(key, klen);
	int64_t start = zl_now_us();
	t->del.ops++;
	for (uint32_t round = 0;; round++) {
		struct found f;
		int64_t t0 = t->ln->primed ? t->primed_at : zl_now_us();
		int rc = find_settled(t, &t->del, key, klen, home, false, &f, start, &round);
		if (rc)
			return rc == -ENOSPC ? -ENOENT : rc;
		if (!f.match || os_e_deleted(f.w))
			return -ENOENT;
		if ((rc = publish(t, &t->del, &f, f.w | OS_DEL, t0, start, round)) != 1)
			return rc;
	}
}

/* ---- pipelining ----------------------------------------------------------- */

void os_lane(struct os_table *t, uint32_t i, bool primed)
{
	t->ln = &t->lane[i < OS_LANES ? i : 0];
	if (!primed)
		t->ln->primed = false;
}

int os_prime(struct os_table *t, const struct os_key *k, uint32_t n)
{
	struct os_counts *c = &t->batch;
	uint64_t mask = t->g.nslots - 1;
	uint32_t per = walk_batch(t), posted = 0;
	int rc = 0;
	if (n > OS_LANES)
		n = OS_LANES;
	t->primed_at = zl_now_us();
	for (uint32_t i = 0; i < n && !rc; i++) {
		struct os_lane *ln = &t->lane[i];
		ln->primed = false;
		ln->home = os_hash(k[i].key, k[i].klen);
		ln->n = per;
		t->ln = ln;
		rc = post_ents(t, c, ln->home & mask, per);
	}
	if (!rc)
		rc = sync_io(t, c);
	for (uint32_t i = 0; i < n && !rc; i++) {
		t->ln = &t->lane[i];
		int m = post_preload(t, c, per, first_preload(t));
		if (m < 0)
			rc = m;
		posted += m > 0 ? (uint32_t)m : 0;
	}
	if (!rc && posted)
		rc = sync_io(t, c);
	for (uint32_t i = 0; i < n; i++)
		t->lane[i].primed = !rc;
	t->ln = &t->lane[0];
	return rc;
}

/* The CAS of a posted SET or DELETE: f's word to nw, its result at the
 * next sync. OS_UNPOSTED when the word was read too long ago to trust
 * its tag (the ABA bound). */
static int post_cas(struct os_table *t, struct os_counts *c, const struct found *f,
		    uint64_t nw, int64_t t0, struct os_post *p)
{
	if (zl_now_us() - t0 > ABA_BOUND_US)
		return OS_UNPOSTED;
	c->cas++;
	p->expect = f->w;
	p->old = ~f->w;
	int rc = t->io.cas(t->io.ctx, slot_off(t, f->slot), f->w, nw, &p->old);
	return rc ? rc : OS_POSTED;
}

int os_set_post(struct os_table *t, const void *key, uint32_t klen, const void *val,
		uint32_t vlen, const struct os_wctx *w, struct os_post *p)
{
	uint64_t size = os_ct_size(klen, vlen);
	int64_t start = zl_now_us(), t0 = t->ln->primed ? t->primed_at : start;
	uint32_t round = 0;
	struct found f;
	if (size > OS_LSTAGE)
		return OS_UNPOSTED;
	t->set.ops++;
	int rc = find_settled(t, &t->set, key, klen, os_hash(key, klen), false, &f, start, &round);
	if (rc)
		return rc;
	uint32_t tag = os_tag_next(os_e_tag(f.w));
	if ((rc = write_ct(t, w, key, klen, val, vlen, &f, tag, false)))
		return rc;
	uint64_t nw = os_e_make((uint32_t)(w->off / OS_UNIT), tag, 0);
	return post_cas(t, &t->set, &f, nw, t0, p);
}

int os_del_post(struct os_table *t, const void *key, uint32_t klen, struct os_post *p)
{
	int64_t start = zl_now_us(), t0 = t->ln->primed ? t->primed_at : start;
	uint32_t round = 0;
	struct found f;
	t->del.ops++;
	int rc = find_settled(t, &t->del, key, klen, os_hash(key, klen), false, &f, start, &round);
	if (rc)
		return rc == -ENOSPC ? -ENOENT : rc;
	if (!f.match || os_e_deleted(f.w))
		return -ENOENT;
	return post_cas(t, &t->del, &f, f.w | OS_DEL, t0, p);
}
