/* SPDX-License-Identifier: MIT */
/*
 * os_hostile: a hostile client of the one-sided store, with the chunk
 * mapped read-write like every client, never crashes or hangs the server
 * or another client, and never makes an honest GET return bytes that its
 * key's writer did not write.
 *
 * The server runs in this process (4096 slots, 16 MiB of 256 KiB regions,
 * 2 s heartbeat window). H honest processes (zl_kv, store=onesided) own
 * KPH keys each; values carry (key, writer, seq, length) and a pattern
 * derived from them. The attacker process speaks the protocol itself:
 * HELLO, the chunk's memfd from the server's abstract socket (as
 * client.c's map_shm), a region (REGION). For ATTACK_S seconds, while the
 * honest processes put and get their keys and look up absent ones, it
 *   (a) writes garbage into its own region and CASes table entries to
 *       point at it: random bytes; containers with valid CRCs for the
 *       wrong slot or tag (junk keys and honest keys' names); headers
 *       with a valid hcrc but klen 0, klen > 1024, vlen > 1 MiB, lengths
 *       running past its region; a container for an honest key's own slot
 *       and tag whose value CRC is wrong (its GET must be -EBADMSG);
 *   (b) CASes random words into random slots and onto honest keys'
 *       entries: fully random, lock bit set (on the word that was there),
 *       offsets past the chunk, into the table, into other clients' data,
 *       and offset 1 (a hole) with the deleted bit;
 *   (c) fills stretches of empty slots (valid junk containers and garbage)
 *       so that chains get long;
 *   (d) copies honest entries' words to other slots (a valid container,
 *       for the wrong slot);
 *   (e) writes random words, odd ones among them, into the chunk before
 *       the table ([0, table_off): nothing there should matter; where
 *       layout.h has a cleanup sequence word, OS_SEQ_OFF, half of them go
 *       there);
 *   and sends hostile RPCs: heartbeats reporting honest keys' slots as
 *   garbage (they must not become holes) and absurd delete counts,
 *   releases of regions it does not hold.
 * The attacker records every key whose entry it replaced ("hit"). Honest
 * processes check every call:
 *   - a GET of an own key returns 0 and a value that its writer wrote
 *     under a seq whose put succeeded (an older one than the last is
 *     counted and printed: it is not a hostile effect, see os_gc), or
 *     -ENOENT / -EBADMSG / -EAGAIN, recorded per key; a -ENOENT is looked
 *     up again at once (a key that is there again was not lost);
 *   - a GET of an absent key returns -ENOENT or -EAGAIN, never bytes;
 *   - puts return 0 or -EAGAIN;
 *   - no call takes longer than 1.5 s (a 1 s budget per call; scaled-down
 *     sanitizer runs: 5 s).
 * After the attack: every key lost (-ENOENT kept, -EBADMSG) must have been
 * hit; the attacker gives its region back (the collector meets its
 * garbage); it leaves up to 8 lock bits on honest entries (and a cleanup
 * sequence word, where there is one, odd): within two scans no lock bit
 * is left in the table (and the sequence is even again: else every walk
 * that ends at an empty slot would restart until its budget ran out, for
 * good); then the
 * attacker plants garbage entries (offsets past the chunk: the collector's
 * walks never touch them) in empty slots, the honest clients look up
 * absent keys whose home is there, report them with their heartbeats, and
 * at least one must become a hole (gc_holes > 0). Finally every honest key
 * is written again (all puts succeed) and reads back exactly, and the
 * server answers STATS with its scans still going.
 * Exit 0 pass, 1 fail.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "layout.h"
#include "os_lib.h"
#include "os_proto.h"
#include "sockutil.h"

#define H 2
#define NSLOTS 4096u
#define MASK (NSLOTS - 1)
#define ATTACK_S 3
#define CALL_TMO 1000000 /* honest calls: their budget */
#define MAXV 512u
#define MAGIC 0x5a4c4853u /* "ZLHS" */
#define NBAIT 4
#define KPH_MAX 200u
#define NKEYS_MAX (H * KPH_MAX)
#define MAX_SEQ (1u << 22)

enum { P_SETUP, P_ATTACK, P_RECOVER, P_BAIT, P_FINAL };

/* attack kinds, counted when their CAS went in */
enum {
	A_RANDOM_CT, A_NEAR_SLOT, A_NEAR_TAG, A_NEAR_HONEST, A_KLEN0, A_KLEN_BIG, A_VLEN_BIG,
	A_PAST_REGION, A_BAD_VCRC, A_W_RANDOM, A_W_LOCK, A_W_PAST, A_W_TABLE, A_W_DATA,
	A_W_HOLE_DEL, A_FILL_JUNK, A_FILL_GARBAGE, A_COPY, A_SEQ, A_RPC_HB, A_RPC_RELEASE, NA
};
static const char *const a_name[NA] = {
	"random bytes", "valid CRC, wrong slot", "valid CRC, wrong tag",
	"honest key, wrong slot", "klen 0", "klen > 1024", "vlen > 1 MiB",
	"past its region", "bad value CRC", "random word", "lock bit", "offset past chunk",
	"offset in table", "offset in others' data", "hole + deleted", "stretch: junk",
	"stretch: garbage", "honest word copied", "words before the table", "hostile heartbeat",
	"foreign release"
};

struct hstat {
	atomic_ullong puts, put_eagain, gets, absent, eagain, enoent, ebadmsg, transient, stale,
		bait_gets, slow, max_us, final_puts;
};

struct shared {
	atomic_int phase, ready, attacker_ok;
	atomic_int url_set; /* the children are forked before the server's
	                       threads exist (a fork beside them can inherit a
	                       lock one holds: seen as a hang over rdma) */
	char url[640], plain[600];
	atomic_int final_locks; /* lock bits set as the attack ended (-1: not yet) */
	atomic_ullong seq_left; /* the cleanup sequence word the attacker left */
	atomic_int nbait;
	atomic_ullong bait[NBAIT], bait_word[NBAIT];
	struct hstat h[H];
	atomic_ullong a[NA], a_cas_lost, hits_total;
	atomic_uchar hit[NKEYS_MAX];  /* attacker replaced this key's entry */
	atomic_uchar lost[NKEYS_MAX]; /* 1 -ENOENT (kept), 2 -EBADMSG, 4 -EAGAIN */
};
static struct shared *sh;
static struct ost_server srv;
static uint32_t kph;
static uint64_t seed;
static int64_t slow_us;

/* ---- values ------------------------------------------------------------------ */

static uint32_t owner(uint32_t key) { return key / kph; }

static void key_name(uint32_t key, char *k, size_t *klen)
{
	*klen = (size_t)snprintf(k, 32, "h-%u", key);
}

static size_t make_val(uint8_t *v, uint32_t key, uint32_t writer, uint64_t seq)
{
	return ost_make_val(v, MAGIC, MAXV, key, writer, seq);
}

static uint64_t check_val(const char *who, uint32_t key, const void *v, size_t vl)
{
	return ost_check_val(who, MAGIC, MAXV, MAX_SEQ, key, owner(key), v, vl);
}

/* ---- processes ----------------------------------------------------------------- */

static pid_t spawn(int (*fn)(int), int arg)
{
	fflush(NULL);
	pid_t parent = getpid(), pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(T_EXIT_FAIL);
		tl_watchdog(120);
		for (int64_t end = tl_now_us() + 60000000; !atomic_load(&sh->url_set);
		     tl_sleep_us(1000))
			CHECKF(tl_now_us() < end, "no server after 60 s");
		memcpy(srv.url, sh->url, sizeof(srv.url));
		memcpy(srv.plain, sh->plain, sizeof(srv.plain));
		tl_exit(fn(arg));
	}
	return pid;
}

static int phase(void) { return atomic_load(&sh->phase); }

static void wait_phase(int p)
{
	int64_t end = tl_now_us() + 60000000;
	while (phase() < p) {
		CHECKF(tl_now_us() < end, "phase %d never came", p);
		tl_sleep_us(1000);
	}
}

/* ---- honest clients ------------------------------------------------------------- */

static struct hstat *hs;
static int64_t timed_t0;

static void t_start(void) { timed_t0 = tl_now_us(); }

static void t_end(void)
{
	uint64_t dt = (uint64_t)(tl_now_us() - timed_t0);
	if ((int64_t)dt > slow_us)
		hs->slow++;
	if (dt > hs->max_us)
		hs->max_us = dt;
}

static int honest(int h)
{
	char who[16];
	snprintf(who, sizeof(who), "honest %d", h);
	hs = &sh->h[h];
	zl_kv *kv = ost_connect(&srv);
	struct tl_rng rng = { seed ^ (0x40000ull + (uint64_t)h * 7919) };
	uint8_t *val = malloc(MAXV);
	uint64_t *model = calloc(kph, sizeof(uint64_t));
	uint8_t *ok_seq = calloc(MAX_SEQ / 8, 1); /* seqs whose put succeeded */
	CHECK(val && model && ok_seq);
	uint64_t seq = 0;
	uint32_t base = (uint32_t)h * kph;
	const void *v;
	size_t vl;
	char k[32];
	size_t kl;
	int rc;

	for (uint32_t j = 0; j < kph; j++) {
		key_name(base + j, k, &kl);
		size_t n = make_val(val, base + j, (uint32_t)h, ++seq);
		rc = zl_kv_put(kv, k, kl, val, n, CALL_TMO);
		CHECKF(rc == 0, "%s: first put of key %u: %s", who, base + j, zl_strerror(rc));
		model[j] = seq;
		ok_seq[seq / 8] |= (uint8_t)(1u << seq % 8);
	}
	atomic_fetch_add(&sh->ready, 1);
	wait_phase(P_ATTACK);

	while (phase() <= P_RECOVER) {
		CHECK(seq < MAX_SEQ - 2);
		uint32_t r = (uint32_t)tl_rand_below(&rng, 100);
		uint32_t j = (uint32_t)tl_rand_below(&rng, kph), key = base + j;
		key_name(key, k, &kl);
		if (r < 35) {
			size_t n = make_val(val, key, (uint32_t)h, ++seq);
			t_start();
			rc = zl_kv_put(kv, k, kl, val, n, CALL_TMO);
			t_end();
			if (!rc) {
				model[j] = seq;
				ok_seq[seq / 8] |= (uint8_t)(1u << seq % 8);
				hs->puts++;
			} else {
				CHECKF(rc == -EAGAIN, "%s: put of key %u: %s", who, key,
				       zl_strerror(rc));
				hs->put_eagain++;
			}
		} else if (r < 85) {
			t_start();
			rc = zl_kv_get(kv, k, kl, &v, &vl, NULL, CALL_TMO);
			t_end();
			if (rc == -ENOENT) { /* again: a key that is there was not lost */
				t_start();
				rc = zl_kv_get(kv, k, kl, &v, &vl, NULL, CALL_TMO);
				t_end();
				if (rc != -ENOENT) {
					hs->transient++;
					printf("%s: key %u: -ENOENT, then %s at once\n", who, key,
					       zl_strerror(rc));
				}
			}
			hs->gets++;
			if (!rc) {
				uint64_t got = check_val(who, key, v, vl);
				CHECKF(got <= model[j] && ok_seq[got / 8] >> got % 8 & 1,
				       "%s: key %u reads seq %llu, a put that did not succeed "
				       "(last put seq %llu)",
				       who, key, (unsigned long long)got,
				       (unsigned long long)model[j]);
				if (got != model[j]) {
					hs->stale++;
					printf("%s: key %u reads seq %llu, its last put was seq %llu\n",
					       who, key, (unsigned long long)got,
					       (unsigned long long)model[j]);
				}
			} else if (rc == -ENOENT) {
				hs->enoent++;
				atomic_fetch_or(&sh->lost[key], 1);
			} else if (rc == -EBADMSG) {
				hs->ebadmsg++;
				atomic_fetch_or(&sh->lost[key], 2);
			} else if (rc == -EAGAIN) {
				hs->eagain++;
				atomic_fetch_or(&sh->lost[key], 4);
			} else {
				FAIL("%s: get of key %u: %s", who, key, zl_strerror(rc));
			}
		} else {
			char ak[40];
			int al = snprintf(ak, sizeof(ak), "x-%d-%llu", h,
					  (unsigned long long)tl_rand(&rng));
			t_start();
			rc = zl_kv_get(kv, ak, (size_t)al, &v, &vl, NULL, CALL_TMO);
			t_end();
			CHECKF(rc == -ENOENT || rc == -EAGAIN,
			       "%s: get of absent key %s: %s (%zu bytes)", who, ak, zl_strerror(rc),
			       rc ? 0 : vl);
			hs->absent++;
			if (rc)
				hs->eagain += rc == -EAGAIN;
		}
	}

	/* absent keys whose home is one of the planted garbage entries */
	wait_phase(P_BAIT);
	int64_t end = tl_now_us() + 30000000;
	while (atomic_load(&sh->nbait) < NBAIT) {
		CHECKF(tl_now_us() < end, "%s: no garbage planted", who);
		tl_sleep_us(1000);
	}
	char bk[NBAIT][32];
	for (int b = 0; b < NBAIT; b++) {
		uint64_t slot = atomic_load(&sh->bait[b]);
		for (uint64_t i = 0;; i++) {
			int n = snprintf(bk[b], sizeof(bk[b]), "b-%d-%llu", h, (unsigned long long)i);
			if ((os_hash(bk[b], (size_t)n) & MASK) == slot)
				break;
			CHECK(i < 100000000);
		}
	}
	for (uint64_t i = 0; phase() < P_FINAL; i++) {
		const char *bkey = bk[i % NBAIT];
		t_start();
		rc = zl_kv_get(kv, bkey, strlen(bkey), &v, &vl, NULL, CALL_TMO);
		t_end();
		CHECKF(rc == -ENOENT || rc == -EAGAIN, "%s: get of absent key %s: %s", who, bkey,
		       zl_strerror(rc));
		hs->bait_gets++;
		tl_sleep_us(200);
	}

	/* all keys again; every put must go in, every key read back exactly */
	for (uint32_t j = 0; j < kph; j++) {
		key_name(base + j, k, &kl);
		size_t n = make_val(val, base + j, (uint32_t)h, ++seq);
		t_start();
		rc = zl_kv_put(kv, k, kl, val, n, CALL_TMO);
		t_end();
		CHECKF(rc == 0, "%s: put of key %u after the attack: %s", who, base + j,
		       zl_strerror(rc));
		model[j] = seq;
		hs->final_puts++;
	}
	for (uint32_t j = 0; j < kph; j++) {
		key_name(base + j, k, &kl);
		t_start();
		rc = zl_kv_get(kv, k, kl, &v, &vl, NULL, CALL_TMO);
		t_end();
		CHECKF(rc == 0, "%s: key %u after the attack: %s", who, base + j, zl_strerror(rc));
		uint64_t got = check_val(who, base + j, v, vl);
		CHECKF(got == model[j], "%s: key %u after the attack reads seq %llu, not %llu", who,
		       base + j, (unsigned long long)got, (unsigned long long)model[j]);
	}
	zl_kv_close(kv);
	free(val);
	free(model);
	free(ok_seq);
	return 0;
}

/* ---- the chunk, mapped as client.c's map_shm does ------------------------------ */

/* HELLO on c, then the chunk's memfd from the server's abstract socket. */

/* ---- the attacker ------------------------------------------------------------- */

static uint8_t *cb; /* the chunk, mapped read-write */
static struct os_hello_rep hr;
static zl_client *acli;
static uint64_t roff, rlen, rpos, dend;
static uint32_t my_region;
static struct tl_rng arng;

static uint64_t arand(void) { return tl_rand(&arng); }
static uint64_t arand_below(uint64_t n) { return tl_rand_below(&arng, n); }

static _Atomic uint64_t *slotp(uint64_t s)
{
	return (_Atomic uint64_t *)(cb + hr.table_off + (s & MASK) * 8);
}

static uint64_t ldw(uint64_t s) { return atomic_load(slotp(s)); }

/* The honest key whose container word w points at (CRCs not checked), or
 * -1. */
static int64_t honest_key_of(uint64_t w)
{
	uint64_t pos = (uint64_t)os_e_off(w) * OS_UNIT;
	if (os_e_off(w) <= OS_OFF_HOLE || pos < hr.data_off || pos + OS_CT_HDR + 16 > dend)
		return -1;
	struct os_ct h;
	memcpy(&h, cb + pos, sizeof(h));
	if (h.klen < 3 || h.klen > 15)
		return -1;
	char k[16] = { 0 };
	memcpy(k, cb + pos + OS_CT_HDR, h.klen);
	unsigned id;
	int used = 0;
	if (k[0] != 'h' || k[1] != '-' || sscanf(k + 2, "%u%n", &id, &used) != 1 ||
	    used != (int)h.klen - 2 || id >= H * kph)
		return -1;
	return id;
}

/* CAS slot s from *expect to nw; on success, the key whose entry was
 * replaced is marked hit. */
static bool acas(uint64_t s, uint64_t expect, uint64_t nw, int kind)
{
	uint64_t e = expect;
	if (!atomic_compare_exchange_strong(slotp(s), &e, nw)) {
		sh->a_cas_lost++;
		return false;
	}
	int64_t id = honest_key_of(expect);
	if (id >= 0) {
		atomic_store(&sh->hit[id], 1);
		sh->hits_total++;
	}
	sh->a[kind]++;
	return true;
}

/* A slot whose word points at an honest key's container, or a random one
 * when none turns up. */
static uint64_t honest_slot(void)
{
	uint64_t s = arand_below(NSLOTS);
	for (uint32_t i = 0; i < NSLOTS; i++, s = (s + 1) & MASK)
		if (honest_key_of(ldw(s)) >= 0)
			return s;
	return s;
}

static uint64_t target_slot(void) { return arand_below(2) ? honest_slot() : arand_below(NSLOTS); }

/* Room for n bytes in our region (from the start again when full). */
static uint64_t alloc(uint64_t n)
{
	n = (n + 7) & ~7ull;
	if (rpos + n > rlen)
		rpos = 0;
	uint64_t off = roff + rpos;
	rpos += n;
	return off;
}

static uint64_t word_at(uint64_t off, uint32_t tag, uint64_t flags)
{
	return os_e_make((uint32_t)(off / OS_UNIT), tag, flags);
}

/* A container with valid CRCs for (slot, tag) in our region. */
static uint64_t put_ct(const char *key, uint32_t klen, uint32_t vlen, uint32_t slot,
		       uint32_t tag)
{
	uint64_t off = alloc(os_ct_size(klen, vlen));
	uint8_t *b = cb + off;
	memcpy(b + OS_CT_HDR, key, klen);
	for (uint32_t i = 0; i < vlen; i++)
		b[OS_CT_HDR + klen + i] = (uint8_t)arand();
	os_ct_seal(b, klen, vlen, slot, tag, arand());
	return off;
}

/* A header with a valid hcrc and the given lengths at off. */
static void put_hdr(uint64_t off, uint32_t klen, uint32_t vlen, uint32_t slot, uint32_t tag)
{
	struct os_ct h = { .klen = klen, .vlen = vlen, .slot = slot, .tag = tag,
			   .kcrc = (uint32_t)arand(), .version = arand() };
	h.hcrc = os_crc32c(0, (const uint8_t *)&h + 4, OS_CT_HDR - 4);
	memcpy(cb + off, &h, sizeof(h));
}

static void junk_key(char *k, uint32_t *klen)
{
	*klen = (uint32_t)snprintf(k, 32, "j-%llu", (unsigned long long)arand());
}

static void rpc(int type, const void *req, size_t len)
{
	const void *p;
	size_t n;
	int rc = zl_call(acli, type, req, len, &p, &n, OST_TMO);
	CHECKF(rc == 0, "attacker: RPC %d: %s", type, zl_strerror(rc));
}

static void attack_once(int *fills)
{
	uint32_t r = (uint32_t)arand_below(1000);
	char k[32];
	uint32_t kl;
	if (r < 60) { /* (a) random bytes */
		uint64_t s = target_slot(), w = ldw(s), n = 32 + arand_below(2048);
		uint64_t off = alloc(n);
		for (uint64_t i = 0; i < n; i += 8) {
			uint64_t x = arand();
			memcpy(cb + off + i, &x, n - i < 8 ? n - i : 8);
		}
		acas(s, w, word_at(off, os_tag_next(os_e_tag(w)), 0), A_RANDOM_CT);
	} else if (r < 200) { /* (a) valid CRCs, wrong slot or tag */
		uint64_t s = target_slot(), w = ldw(s);
		uint32_t tag = os_tag_next(os_e_tag(w));
		int kind = r < 110 ? A_NEAR_SLOT : r < 160 ? A_NEAR_TAG : A_NEAR_HONEST;
		if (kind == A_NEAR_HONEST)
			kl = (uint32_t)snprintf(k, sizeof(k), "h-%llu",
						(unsigned long long)arand_below(H * kph));
		else
			junk_key(k, &kl);
		uint32_t cslot = kind == A_NEAR_TAG ? (uint32_t)s : (uint32_t)((s + 1 + arand_below(7)) & MASK);
		uint32_t ctag = kind == A_NEAR_TAG ? os_tag_next(tag) : tag;
		uint64_t off = put_ct(k, kl, (uint32_t)arand_below(300), cslot, ctag);
		acas(s, w, word_at(off, tag, 0), kind);
	} else if (r < 300) { /* (a) lengths out of bounds, valid hcrc, right slot and tag */
		uint64_t s = target_slot(), w = ldw(s);
		uint32_t tag = os_tag_next(os_e_tag(w));
		int kind = A_KLEN0 + (int)arand_below(4);
		uint64_t off;
		if (kind == A_KLEN0) {
			off = alloc(64);
			put_hdr(off, 0, (uint32_t)arand_below(64), (uint32_t)s, tag);
		} else if (kind == A_KLEN_BIG) {
			off = alloc(64);
			put_hdr(off, ZL_KV_MAX_KEY + 1 + (uint32_t)arand_below(1u << 31),
				(uint32_t)arand_below(64), (uint32_t)s, tag);
		} else if (kind == A_VLEN_BIG) {
			off = alloc(64);
			put_hdr(off, 4, ZL_KV_MAX_VAL + 1 + (uint32_t)arand_below(1u << 31),
				(uint32_t)s, tag);
		} else { /* a valid header and key at our region's end, a value running
			  * past it (past the chunk's end, when ours is the last region) */
			off = roff + rlen - 64;
			junk_key(k, &kl);
			memcpy(cb + off + OS_CT_HDR, k, kl);
			struct os_ct h = { .klen = kl, .vlen = ZL_KV_MAX_VAL - (uint32_t)arand_below(4096),
					   .slot = (uint32_t)s, .tag = tag, .version = arand() };
			h.kcrc = os_crc32c(0, k, kl);
			h.hcrc = os_crc32c(0, (const uint8_t *)&h + 4, OS_CT_HDR - 4);
			memcpy(cb + off, &h, sizeof(h));
		}
		acas(s, w, word_at(off, tag, 0), kind);
	} else if (r < 340) { /* (a) an honest key's own slot and tag, a wrong value CRC */
		uint64_t s = honest_slot(), w = ldw(s);
		int64_t id = honest_key_of(w);
		if (id < 0 || os_e_locked(w))
			return;
		uint32_t tag = os_tag_next(os_e_tag(w));
		kl = (uint32_t)snprintf(k, sizeof(k), "h-%lld", (long long)id);
		uint32_t vlen = 24 + (uint32_t)arand_below(400);
		uint64_t off = put_ct(k, kl, vlen, (uint32_t)s, tag);
		cb[off + OS_CT_HDR + kl + arand_below(vlen)] ^= 0x5a; /* after sealing */
		acas(s, w, word_at(off, tag, 0), A_BAD_VCRC);
	} else if (r < 700) { /* (b) words */
		uint64_t s = target_slot(), w = ldw(s), nw;
		uint32_t tag = (uint32_t)arand();
		int kind = A_W_RANDOM + (int)arand_below(6);
		uint64_t units = hr.chunk_len / OS_UNIT;
		switch (kind) {
		case A_W_RANDOM:
			nw = arand();
			if (os_e_off(nw) == OS_OFF_EMPTY)
				nw |= 2;
			break;
		case A_W_LOCK:
			if (arand_below(10)) /* rarely: each costs honest calls their budget */
				return;
			nw = w | OS_LOCK;
			break;
		case A_W_PAST:
			nw = os_e_make((uint32_t)(units + arand_below(UINT32_MAX - units)), tag,
				       arand() & OS_DEL);
			break;
		case A_W_TABLE:
			nw = os_e_make((uint32_t)((hr.table_off + arand_below(NSLOTS * 8)) / 8),
				       tag, 0);
			break;
		case A_W_DATA:
			nw = os_e_make((uint32_t)((hr.data_off + arand_below(hr.data_len)) / 8), tag,
				       0);
			break;
		default:
			nw = os_e_make(OS_OFF_HOLE, tag, OS_DEL);
			break;
		}
		acas(s, w, nw, kind);
	} else if (r < 706) { /* (c) a stretch of empty slots filled */
		if (*fills >= 4)
			return;
		(*fills)++;
		uint64_t s = arand_below(NSLOTS), len = 64 + arand_below(96);
		for (uint64_t i = 0; i < len; i++, s = (s + 1) & MASK) {
			uint64_t w = ldw(s);
			if (os_e_off(w) != OS_OFF_EMPTY || os_e_locked(w))
				continue;
			uint32_t tag = os_tag_next(os_e_tag(w));
			if (arand_below(10) < 6) {
				junk_key(k, &kl);
				acas(s, w, word_at(put_ct(k, kl, 16, (uint32_t)s, tag), tag, 0),
				     A_FILL_JUNK);
			} else {
				acas(s, w, os_e_make((uint32_t)(hr.chunk_len / 8 + 1 + arand_below(1000)),
						     tag, 0),
				     A_FILL_GARBAGE);
			}
		}
	} else if (r < 900 && r >= 880) { /* (e) the chunk's words before the table */
		uint64_t off = arand_below(hr.table_off / 8) * 8, x = arand();
#ifdef OS_SEQ_OFF
		if (arand_below(2))
			off = OS_SEQ_OFF; /* the cleanup sequence */
#endif
		atomic_store((_Atomic uint64_t *)(cb + off), arand_below(2) ? x | 1 : x);
		sh->a[A_SEQ]++;
	} else if (r < 900) { /* (d) an honest word copied to another slot */
		uint64_t from = honest_slot(), hw = ldw(from);
		if (honest_key_of(hw) < 0 || os_e_locked(hw))
			return;
		uint64_t s = arand_below(3) ? (from + 1 + arand_below(16)) & MASK : target_slot();
		if (s == from)
			return;
		acas(s, ldw(s), hw, A_COPY);
	} else if (r < 960) { /* hostile heartbeat */
		struct os_hb_req q = { .deletes = arand_below(2) ? arand() : arand_below(100) };
		uint64_t s = honest_slot();
		q.garbage_slot = arand_below(4) ? s + 1 : arand();
		rpc(OS_HEARTBEAT, &q, sizeof(q));
		sh->a[A_RPC_HB]++;
	} else { /* a release of a region we do not hold */
		struct os_region_req q = { .release = (uint32_t)arand_below(hr.nregions),
					   .want = 0 };
		if (q.release == my_region)
			return;
		rpc(OS_REGION, &q, sizeof(q));
		sh->a[A_RPC_RELEASE]++;
	}
}

static void heartbeat_plain(void)
{
	struct os_hb_req q = { 0 };
	rpc(OS_HEARTBEAT, &q, sizeof(q));
}

static int attacker(int unused)
{
	(void)unused;
	arng.s = seed ^ 0xa77ac4ull;
	CHECK_OK(zl_client_connect(srv.plain, NULL, OST_TMO, &acli));
	cb = ost_map_chunk(acli, &hr, PROT_READ | PROT_WRITE);
	CHECK(hr.nslots == NSLOTS);
	const void *p;
	size_t n;
	dend = hr.data_off + hr.data_len;
	struct os_region_req rq = { .release = OS_NONE, .want = 1 };
	CHECK_OK(zl_call(acli, OS_REGION, &rq, sizeof(rq), &p, &n, OST_TMO));
	struct os_region_rep rr;
	CHECK(n == sizeof(rr));
	memcpy(&rr, p, n);
	CHECKF(rr.status == 0, "attacker: REGION: %d", rr.status);
	roff = rr.off;
	rlen = rr.len;
	my_region = rr.region;
	atomic_store(&sh->attacker_ok, 1);

	wait_phase(P_ATTACK);
	int fills = 0;
	int64_t next_hb = tl_now_us();
	while (phase() == P_ATTACK) {
		attack_once(&fills);
		if (tl_now_us() >= next_hb) { /* keep the region */
			heartbeat_plain();
			next_hb = tl_now_us() + 300000;
		}
		tl_sleep_us(700);
	}
	/* a last few lock bits, on honest keys' entries */
	int nl = 0;
	for (int i = 0; i < 8; i++) {
		uint64_t s = honest_slot(), w = ldw(s);
		if (!os_e_locked(w) && acas(s, w, w | OS_LOCK, A_W_LOCK))
			nl++;
	}
#ifdef OS_SEQ_OFF
	/* and the cleanup sequence left odd ("a cleanup is running") */
	uint64_t sq = (atomic_load((_Atomic uint64_t *)(cb + OS_SEQ_OFF)) | 1) + 2;
	atomic_store((_Atomic uint64_t *)(cb + OS_SEQ_OFF), sq);
	atomic_store(&sh->seq_left, sq);
	sh->a[A_SEQ]++;
#endif
	atomic_store(&sh->final_locks, nl);
	/* give the region back: the collector walks over our garbage */
	rq = (struct os_region_req){ .release = my_region, .want = 0 };
	rpc(OS_REGION, &rq, sizeof(rq));

	/* garbage for honest clients to find and report: offsets past the chunk
	 * (no collector's walk touches those), in empty slots between empty
	 * ones */
	wait_phase(P_BAIT);
	int nb = 0;
	for (uint64_t i = 0, s = arand_below(NSLOTS); nb < NBAIT && i < NSLOTS; i++) {
		s = (s + 61) & MASK;
		uint64_t w = ldw(s);
		if (os_e_off(ldw(s - 1)) != OS_OFF_EMPTY || os_e_off(w) != OS_OFF_EMPTY ||
		    os_e_off(ldw(s + 1)) != OS_OFF_EMPTY || os_e_locked(w))
			continue;
		uint64_t bw = os_e_make((uint32_t)(hr.chunk_len / 8 + 100 + (uint64_t)nb),
					os_tag_next(os_e_tag(w)), 0);
		uint64_t e = w;
		if (!atomic_compare_exchange_strong(slotp(s), &e, bw))
			continue;
		atomic_store(&sh->bait[nb], s);
		atomic_store(&sh->bait_word[nb], bw);
		nb++;
	}
	CHECKF(nb == NBAIT, "attacker: only %d empty slots for garbage", nb);
	atomic_store(&sh->nbait, nb);
	wait_phase(P_FINAL);
	munmap(cb, hr.chunk_len);
	zl_client_close(acli);
	return 0;
}

/* ---- this process --------------------------------------------------------------- */

static zl_client *cli;

static void stats(struct os_stats_rep *out)
{
	int64_t t0 = tl_now_us();
	*out = ost_stats(cli);
	CHECKF(tl_now_us() - t0 < 2000000, "STATS took %lld us", (long long)(tl_now_us() - t0));
}

static const uint8_t *view; /* the chunk, read-only */
static struct os_hello_rep vh;

static uint64_t table_word(uint64_t s)
{
	return __atomic_load_n((const uint64_t *)(view + vh.table_off + (s & MASK) * 8),
			       __ATOMIC_ACQUIRE);
}

static uint32_t locked_words(void)
{
	uint32_t n = 0;
	for (uint64_t s = 0; s < NSLOTS; s++)
		n += os_e_locked(table_word(s));
	return n;
}

/* Wait for the scans to advance by n (at most 10 s). */
static void wait_scans(uint64_t n)
{
	struct os_stats_rep r0, r;
	stats(&r0);
	int64_t end = tl_now_us() + 10000000;
	do {
		CHECKF(tl_now_us() < end, "the collector's scans stopped at %llu",
		       (unsigned long long)r0.scans);
		tl_sleep_us(20000);
		stats(&r);
	} while (r.scans < r0.scans + n);
}

static pid_t pids[H + 1];

static void check_children(const char *when)
{
	for (int k = 0; k <= H; k++) {
		int st;
		if (pids[k] && waitpid(pids[k], &st, WNOHANG) == pids[k]) {
			pids[k] = 0;
			FAIL("%s: %s ended early: %s %d", when, k < H ? "an honest process" : "the attacker",
			     WIFEXITED(st) ? "exit" : "signal",
			     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		}
	}
}

static void kill_children(void)
{
	for (int k = 0; k <= H; k++)
		if (pids[k] > 0) {
			kill(pids[k], SIGKILL);
			waitpid(pids[k], NULL, 0);
		}
}

int main(void)
{
	tl_watchdog(200);
	seed = tl_seed();
	bool scaled = tl_scaled_down();
	kph = scaled ? 100 : KPH_MAX;
	slow_us = scaled ? 5000000 : 1500000;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	atomic_store(&sh->final_locks, -1);

	struct zl_kvos_opts o;
	zl_kvos_opts_init(&o);
	o.mem = 16u << 20;
	o.region_len = 256u << 10;
	o.nslots = NSLOTS;
	o.max_regions = 2;
	o.hb_window_us = 2000000;
	for (int h = 0; h < H; h++)
		pids[h] = spawn(honest, h);
	pids[H] = spawn(attacker, 0);
	ost_start(&srv, &o);
	memcpy(sh->url, srv.url, sizeof(sh->url));
	memcpy(sh->plain, srv.plain, sizeof(sh->plain));
	atomic_store(&sh->url_set, 1);
	CHECK_OK(zl_client_connect(srv.plain, NULL, OST_TMO, &cli));
	view = ost_map_chunk(cli, &vh, PROT_READ);
	CHECK(vh.nslots == NSLOTS);
	printf("%d honest processes with %u keys each, one attacker, %u slots, %d s of attack\n",
	       H, kph, NSLOTS, ATTACK_S);
	int64_t end = tl_now_us() + 60000000;
	while (atomic_load(&sh->ready) < H || !atomic_load(&sh->attacker_ok)) {
		CHECKF(tl_now_us() < end, "processes not ready after 60 s");
		check_children("setup");
		tl_sleep_us(2000);
	}
	struct os_stats_rep st;
	atomic_store(&sh->phase, P_ATTACK);
	int64_t t_attack = tl_now_us();
	while (tl_now_us() - t_attack < ATTACK_S * 1000000ll) {
		tl_sleep_us(100000);
		check_children("attack");
		stats(&st); /* the server answers all along */
	}
	atomic_store(&sh->phase, P_RECOVER);
	uint64_t went_in = 0;
	for (int i = 0; i < A_RPC_HB; i++)
		went_in += sh->a[i];
	printf("attack over: %llu of the attacker's CASes went in (%llu lost races), %llu "
	       "replaced honest keys' entries\n",
	       (unsigned long long)went_in, (unsigned long long)sh->a_cas_lost,
	       (unsigned long long)sh->hits_total);

	/* the attacker's lock bits: gone within two scans */
	end = tl_now_us() + 10000000;
	while (atomic_load(&sh->final_locks) < 0) {
		CHECKF(tl_now_us() < end, "the attacker did not stop");
		check_children("recovery");
		tl_sleep_us(1000);
	}
	uint32_t locked0 = locked_words();
	wait_scans(2);
	uint32_t locked = locked_words();
	for (int i = 0; locked && i < 100; i++) { /* a cleanup's own, for a moment */
		tl_sleep_us(5000);
		locked = locked_words();
	}
	printf("lock bits in the table: %u when the attack stopped (%d set last), %u two scans "
	       "later\n",
	       locked0, atomic_load(&sh->final_locks), locked);
	CHECKF(locked == 0, "%u lock bits left in the table two scans after the attack", locked);
#ifdef OS_SEQ_OFF
	uint64_t sq = __atomic_load_n((const uint64_t *)(view + OS_SEQ_OFF), __ATOMIC_ACQUIRE);
	for (int i = 0; sq & 1 && i < 100; i++) { /* a cleanup's own, for a moment */
		tl_sleep_us(5000);
		sq = __atomic_load_n((const uint64_t *)(view + OS_SEQ_OFF), __ATOMIC_ACQUIRE);
	}
	printf("cleanup sequence word: the attacker left %#llx, two scans later %#llx\n",
	       (unsigned long long)sh->seq_left, (unsigned long long)sq);
	CHECKF(!(sq & 1),
	       "the cleanup sequence word is still odd (%#llx) two scans after the attacker left "
	       "it odd (%#llx): every walk that ends at an empty slot restarts until its budget "
	       "runs out (GETs of absent keys and inserts: -EAGAIN)",
	       (unsigned long long)sq, (unsigned long long)sh->seq_left);
#endif
	check_children("recovery");

	/* planted garbage, reported by honest clients, becomes a hole */
	struct os_stats_rep st0;
	stats(&st0);
	atomic_store(&sh->phase, P_BAIT);
	end = tl_now_us() + 30000000;
	while (atomic_load(&sh->nbait) < NBAIT) {
		CHECKF(tl_now_us() < end, "no garbage planted");
		check_children("bait");
		tl_sleep_us(1000);
	}
	int holed = 0;
	int64_t t_bait = tl_now_us();
	end = t_bait + (scaled ? 12000000 : 4000000);
	while (!holed && tl_now_us() < end) {
		for (int b = 0; b < NBAIT; b++) {
			uint64_t w = table_word(sh->bait[b]), bw = sh->bait_word[b];
			/* a hole, or emptied by a cleanup after it was one (tag + 2) */
			if (os_e_off(w) == OS_OFF_HOLE ||
			    (w != bw && ((os_e_tag(w) - os_e_tag(bw)) & OS_TAG_MASK) >= 2))
				holed++;
		}
		check_children("bait");
		tl_sleep_us(2000);
	}
	struct os_stats_rep st1;
	stats(&st1);
	printf("garbage planted in %d empty slots: %d became holes %.2f s after honest clients "
	       "began to look there (gc_holes %llu -> %llu, holes %llu)\n",
	       NBAIT, holed, (double)(tl_now_us() - t_bait) / 1e6,
	       (unsigned long long)st0.gc_holes, (unsigned long long)st1.gc_holes,
	       (unsigned long long)st1.holes);
	CHECKF(holed > 0, "no reported garbage entry became a hole within %.0f s",
	       (double)(end - t_bait) / 1e6);
	CHECK(st1.gc_holes > 0 || st1.holes > 0);

	atomic_store(&sh->phase, P_FINAL);
	int fails = 0;
	for (int k = 0; k <= H; k++) {
		int rc = -1, st2;
		int64_t dl = tl_now_us() + 60000000;
		pid_t r;
		while ((r = waitpid(pids[k], &st2, WNOHANG)) == 0 && tl_now_us() < dl)
			tl_sleep_us(2000);
		if (r == pids[k])
			rc = WIFEXITED(st2) ? WEXITSTATUS(st2) : 128 + WTERMSIG(st2);
		pids[k] = 0;
		if (rc) {
			fprintf(stderr, "%s: %s\n", k < H ? "an honest process" : "the attacker",
				rc < 0 ? "did not finish within 60 s" : "failed");
			fails++;
		}
	}
	if (fails) {
		kill_children();
		FAIL("%d processes failed", fails);
	}

	/* what the attack did */
	printf("attacks that went in:");
	for (int i = 0; i < NA; i++)
		printf("%s %s %llu", i ? "," : "", a_name[i], (unsigned long long)sh->a[i]);
	printf("\n");
	uint64_t puts = 0, pe = 0, gets = 0, absent = 0, eagain = 0, enoent = 0, ebad = 0,
		 trans = 0, stale = 0, bait = 0, slow = 0, max_us = 0;
	for (int h = 0; h < H; h++) {
		struct hstat *x = &sh->h[h];
		puts += x->puts, pe += x->put_eagain, gets += x->gets, absent += x->absent;
		eagain += x->eagain, enoent += x->enoent, ebad += x->ebadmsg;
		trans += x->transient, stale += x->stale, bait += x->bait_gets, slow += x->slow;
		max_us = x->max_us > max_us ? x->max_us : max_us;
	}
	printf("honest: %llu puts (%llu -EAGAIN), %llu gets of own keys (%llu -ENOENT, %llu "
	       "-EBADMSG, %llu -EAGAIN, %llu -ENOENT that were not, %llu older values), %llu "
	       "absent keys, %llu lookups of planted garbage; slowest call %.3f s\n",
	       (unsigned long long)puts, (unsigned long long)pe, (unsigned long long)gets,
	       (unsigned long long)enoent, (unsigned long long)ebad, (unsigned long long)eagain,
	       (unsigned long long)trans, (unsigned long long)stale, (unsigned long long)absent,
	       (unsigned long long)bait, (double)max_us / 1e6);
	uint32_t nhit = 0, nlost = 0, unexplained = 0;
	for (uint32_t key = 0; key < H * kph; key++) {
		nhit += atomic_load(&sh->hit[key]) != 0;
		uint8_t l = atomic_load(&sh->lost[key]);
		if (!(l & 3))
			continue;
		nlost++;
		if (!atomic_load(&sh->hit[key])) {
			fprintf(stderr, "key %u: %s%s, but the attacker never replaced its entry\n",
				key, l & 1 ? "-ENOENT " : "", l & 2 ? "-EBADMSG" : "");
			unexplained++;
		}
	}
	printf("keys: %u of %u hit by the attacker, %u lost for a while (all hit: %s)\n", nhit,
	       H * kph, nlost, unexplained ? "no" : "yes");
	CHECKF(!unexplained, "%u keys lost that the attacker did not hit", unexplained);
	CHECKF(!slow, "%llu honest calls took longer than %.1f s (slowest %.3f s)",
	       (unsigned long long)slow, (double)slow_us / 1e6, (double)max_us / 1e6);
	for (int i = 0; i < NA; i++)
		CHECKF(sh->a[i] > 0, "attack \"%s\" never went in", a_name[i]);
	CHECKF(ebad > 0 || sh->a[A_BAD_VCRC] == 0 || scaled,
	       "no honest GET met a container with a bad value CRC");

	wait_scans(1); /* the collector still going */
	struct os_stats_rep st2;
	stats(&st2);
	printf("server: gc_runs %llu gc_copied %llu gc_holes %llu cleanups %llu scans %llu live "
	       "%llu holes %llu\n",
	       (unsigned long long)st2.gc_runs, (unsigned long long)st2.gc_copied,
	       (unsigned long long)st2.gc_holes, (unsigned long long)st2.cleanups,
	       (unsigned long long)st2.scans, (unsigned long long)st2.live,
	       (unsigned long long)st2.holes);
	munmap((void *)view, vh.chunk_len);
	zl_client_close(cli);
	ost_stop(&srv);
	munmap(sh, sizeof(*sh));
	printf("os_hostile: ok\n");
	return 0;
}
