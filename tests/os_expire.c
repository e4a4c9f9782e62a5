/* SPDX-License-Identifier: MIT */
/*
 * A client of the one-sided store that stops heartbeating loses its
 * session and regions, and its half-done SET never becomes visible; a
 * client that was only stopped (SIGSTOP, then SIGCONT) comes back cleanly.
 *
 * An in-process server with a short heartbeat window (200 ms; 500 ms under
 * sanitizers), small regions (64 of 256 KiB) and max_regions 2. ROUNDS
 * times (20; 5 under sanitizers), with a fresh child each time:
 *   1. The child (forked by a forker process made before the server's
 *      threads exist) connects, PUTs 100 keys of its own (rNN/own/i) and
 *      says so, then PUTs 32 keys of another set (rNN/loop/k) in a loop.
 *   2. The parent stops it with SIGSTOP after a random 1..15 ms, so the
 *      stop lands anywhere in a PUT, and notes the region the server says
 *      the child holds (a peek at the in-process server's state).
 *   3. Within the window + the collector's tick (+ margin): expired grew
 *      by exactly 1 (the parent's own "honest" client keeps its session:
 *      it calls at least every window/8), regions_client is back to the
 *      honest client's one region, the child's regions are quarantined
 *      (collected, but not given out while it may be stopped in the middle
 *      of a write there), regions_free + regions_server + regions_client +
 *      quarantined == all regions (nothing waits for collection), and
 *      gc_runs grew. The child's 100 keys and the honest keys read back
 *      exactly (completed PUTs survive the collection of their region).
 *   4. The honest client overwrites its 512 keys through 8 times the data
 *      space: it must never be handed the stopped child's old region.
 *   5. SIGCONT. The child completes the PUT it was in (its calls find the
 *      session gone and start a new one), then writes 20 marker keys,
 *      reads them and its own keys back, and exits 0; any error from any
 *      call is a failure. Then:
 *      - no byte of the child's lands in the reused region after the
 *        honest client took it (a raw scan of what the honest client wrote
 *        there for the child's key prefixes);
 *      - every honest key reads its exact last value (no corruption);
 *      - the child's own, marker and loop keys read exactly their last
 *        value, except the loop key the child was writing when stopped:
 *        absent (the documented gap: a stale entry published after the
 *        lease check, found invalid) or an intact value of the child's
 *        (printed when it is not the last).
 * At the end every round's keys are checked again, and no region stays
 * quarantined once the children have spoken or gone. Exit 0
 * pass, 1 fail, 77 skip (rdma: the test stops processes and reads the
 * server's shm mapping).
 *
 * A failure says where the child was stopped: its program counter and the
 * word at its stack pointer (the caller, when it stopped in a leaf such as
 * memcpy), from /proc/PID/syscall, as FILE+OFFSET for addr2line -f -i -e.
 * A stop right between a lease check and the write or CAS it guards is the
 * gap docs/onesided.md describes; anywhere else, it is a bug.
 */
#include <errno.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "os_lib.h"
#include "os_proto.h"
#include "os_server.h" /* a peek at the server's sessions and regions */

#define NOWN 100   /* the child's first keys */
#define NLOOP 32   /* the keys it loops on */
#define NMARK 20   /* its keys after SIGCONT */
#define NHON 512   /* the honest client's */
#define MAXR 64    /* rounds at most */
#define VMAGIC 0x4f534558u
#define VHDR 24u
#define MAXV 1200u
#define MEM (16u << 20)
#define RLEN (256u << 10)

enum { K_OWN = 1, K_LOOP, K_MARK, K_HON };

struct shared {
	char url[640];
	_Atomic int go, quit;
	/* forker: spawn round r when spawn != spawned; reaped when it exits */
	_Atomic int spawn, spawned, reaped;
	_Atomic int pid, status;
	/* the child */
	_Atomic int ready, finish, failed;
	_Atomic uint64_t session; /* from the version of its first key */
	_Atomic int cur_key;      /* the loop key it is writing (or about to) */
	_Atomic uint32_t cur_seq;
	_Atomic uint32_t last_seq[NLOOP]; /* 0: never written */
	_Atomic uint64_t puts, after_cont;
	char msg[512];
};

static struct shared *sh;

/* ---- values ---------------------------------------------------------------- */

static void key_of(char *k, int kind, uint32_t round, uint32_t i)
{
	switch (kind) {
	case K_OWN: snprintf(k, 32, "r%02u/own/%03u", round, i); break;
	case K_LOOP: snprintf(k, 32, "r%02u/loop/%02u", round, i); break;
	case K_MARK: snprintf(k, 32, "r%02u/mark/%02u", round, i); break;
	default: snprintf(k, 32, "h/%03u", i); break;
	}
}

static uint64_t v_id(uint32_t kind, uint32_t round, uint32_t key, uint32_t seq, uint32_t len)
{
	return ((uint64_t)kind << 60) ^ ((uint64_t)round << 48) ^ ((uint64_t)key << 36) ^
	       ((uint64_t)len << 22) ^ seq;
}

static void v_make(uint8_t *v, uint32_t kind, uint32_t round, uint32_t key, uint32_t seq,
		   uint32_t len)
{
	uint32_t h[6] = { VMAGIC, kind, round, key, seq, len };
	memcpy(v, h, VHDR);
	tl_fill(v + VHDR, len - VHDR, v_id(kind, round, key, seq, len));
}

/* NULL if v is an intact value (kind, round, key); its seq in *seq. */
static const char *v_check(const uint8_t *v, size_t len, uint32_t kind, uint32_t round,
			   uint32_t key, uint32_t *seq, char *why, size_t n)
{
	uint32_t h[6];
	if (len < VHDR) {
		snprintf(why, n, "%zu bytes, shorter than any value written", len);
		return why;
	}
	memcpy(h, v, VHDR);
	if (h[0] != VMAGIC || h[1] != kind || h[2] != round || h[3] != key || h[5] != len) {
		snprintf(why, n, "header %08x kind %u round %u key %u seq %u len %u, read %zu bytes",
			 h[0], h[1], h[2], h[3], h[4], h[5], len);
		return why;
	}
	size_t b = tl_verify(v + VHDR, len - VHDR, v_id(kind, round, key, h[4], (uint32_t)len));
	if (b != (size_t)-1) {
		snprintf(why, n, "value seq %u (%zu bytes) corrupt at byte %zu", h[4], len, b + VHDR);
		return why;
	}
	*seq = h[4];
	return NULL;
}

static uint32_t own_len(uint32_t i) { return 64 + (i * 37) % 400; }
static uint32_t mark_len(uint32_t i) { return 100 + i; }
static uint32_t hon_len(uint32_t i, uint32_t gen) { return 200 + (i * 53 + gen * 17) % 1000; }

/* Read key and check it holds exactly (kind, round, key, seq). 0 if so,
 * else the GET's error or -EBADMSG (why says). */
static int read_exact(zl_kv *kv, uint32_t kind, uint32_t round, uint32_t key, uint32_t seq,
		      uint32_t len, char *why, size_t n)
{
	char k[32];
	const void *v;
	size_t vl;
	uint32_t got = 0;
	key_of(k, (int)kind, round, key);
	int rc = zl_kv_get(kv, k, strlen(k), &v, &vl, NULL, OST_TMO);
	if (rc) {
		snprintf(why, n, "%s: GET %s", k, zl_strerror(rc));
		return rc;
	}
	char w2[256];
	if (v_check(v, vl, kind, round, key, &got, w2, sizeof(w2))) {
		snprintf(why, n, "%s: %s", k, w2);
		return -EBADMSG;
	}
	if (got != seq || (len && vl != len)) {
		snprintf(why, n, "%s: seq %u (%zu bytes), want seq %u (%u bytes)", k, got, vl, seq,
			 len);
		return -EBADMSG;
	}
	return 0;
}

/* ---- the child --------------------------------------------------------------- */

__attribute__((noreturn)) static void child_fail(const char *fmt, const char *a, const char *b)
{
	int expect = 0;
	if (atomic_compare_exchange_strong(&sh->failed, &expect, 1))
		snprintf(sh->msg, sizeof(sh->msg), fmt, a, b);
	tl_exit(2);
}

__attribute__((noreturn)) static void child(uint32_t round, uint64_t seed)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	tl_watchdog(120);
	zl_kv *kv = NULL;
	int rc = zl_kv_connect(sh->url, NULL, OST_TMO, &kv);
	if (rc)
		child_fail("child connect %s: %s", sh->url, zl_strerror(rc));
	uint8_t val[MAXV];
	char k[32], why[256];
	for (uint32_t i = 0; i < NOWN; i++) {
		key_of(k, K_OWN, round, i);
		v_make(val, K_OWN, round, i, 0, own_len(i));
		if ((rc = zl_kv_put(kv, k, strlen(k), val, own_len(i), OST_TMO)))
			child_fail("child PUT %s: %s", k, zl_strerror(rc));
	}
	uint64_t ver = 0;
	key_of(k, K_OWN, round, 0);
	if ((rc = zl_kv_get(kv, k, strlen(k), NULL, NULL, &ver, OST_TMO)))
		child_fail("child GET %s: %s", k, zl_strerror(rc));
	atomic_store(&sh->session, ver >> 32);
	atomic_store(&sh->ready, 1);
	struct tl_rng g = { seed ^ ((uint64_t)round << 32) ^ 0x6c6f6f70ull };
	uint32_t seq = 0;
	while (!atomic_load(&sh->finish)) {
		uint32_t key = (uint32_t)tl_rand_below(&g, NLOOP);
		uint32_t len = VHDR + (uint32_t)tl_rand_below(&g, MAXV - VHDR + 1);
		v_make(val, K_LOOP, round, key, ++seq, len);
		key_of(k, K_LOOP, round, key);
		atomic_store_explicit(&sh->cur_seq, seq, memory_order_relaxed);
		atomic_store_explicit(&sh->cur_key, (int)key, memory_order_relaxed);
		rc = zl_kv_put(kv, k, strlen(k), val, len, OST_TMO);
		if (rc)
			child_fail("child PUT %s: %s", k, zl_strerror(rc));
		atomic_store_explicit(&sh->last_seq[key], seq, memory_order_relaxed);
		atomic_fetch_add_explicit(&sh->puts, 1, memory_order_relaxed);
	}
	/* resumed (the parent set finish before SIGCONT): carry on */
	atomic_store(&sh->cur_key, -1);
	for (uint32_t i = 0; i < NMARK; i++) {
		key_of(k, K_MARK, round, i);
		v_make(val, K_MARK, round, i, 0, mark_len(i));
		if ((rc = zl_kv_put(kv, k, strlen(k), val, mark_len(i), OST_TMO)))
			child_fail("child PUT %s after SIGCONT: %s", k, zl_strerror(rc));
		atomic_fetch_add(&sh->after_cont, 1);
	}
	for (uint32_t i = 0; i < NMARK; i++)
		if (read_exact(kv, K_MARK, round, i, 0, mark_len(i), why, sizeof(why)))
			child_fail("child after SIGCONT: %s%s", why, "");
	for (uint32_t i = 0; i < NOWN; i++)
		if (read_exact(kv, K_OWN, round, i, 0, own_len(i), why, sizeof(why)))
			child_fail("child after SIGCONT: %s%s", why, "");
	zl_kv_close(kv);
	tl_exit(0);
}

/* Forked before the server's threads exist: forks the children (a process
 * with threads cannot fork safely under the sanitizers) and reaps them. */
__attribute__((noreturn)) static void forker(uint64_t seed)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	tl_watchdog(600);
	while (!atomic_load(&sh->go))
		tl_sleep_us(1000);
	for (;;) {
		int r;
		while ((r = atomic_load(&sh->spawn)) == atomic_load(&sh->spawned)) {
			if (atomic_load(&sh->quit))
				tl_exit(0);
			tl_sleep_us(200);
		}
		fflush(NULL);
		pid_t pid = fork();
		if (pid < 0)
			tl_exit(1);
		if (!pid)
			child((uint32_t)r, seed);
		atomic_store(&sh->pid, (int)pid);
		atomic_store(&sh->spawned, r);
		int st = 0;
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		atomic_store(&sh->status, st);
		atomic_store(&sh->reaped, r);
	}
}

/* ---- the parent ------------------------------------------------------------ */

static struct ost_server srv;
static zl_client *sc;
static zl_kv *hon;
static int64_t window_us, last_call;
static uint32_t hgen[NHON];
static bool hwritten[NHON];
static uint32_t hnext;
static uint64_t hon_bytes;

/* Kill the child (stopped or not) before failing: FAIL's exit takes the
 * forker with it (PDEATHSIG), and the forker its child. */
#define RFAIL(...)                                                              \
	do {                                                                    \
		int p_ = atomic_load(&sh->pid);                                 \
		if (p_ > 0)                                                     \
			kill(p_, SIGKILL);                                      \
		FAIL(__VA_ARGS__);                                              \
	} while (0)
#define RCHECK(cond, ...)                                                       \
	do {                                                                    \
		if (!(cond))                                                    \
			RFAIL("CHECK(%s): %s", #cond, ({                        \
				static char m_[768];                            \
				snprintf(m_, sizeof(m_), __VA_ARGS__);          \
				m_;                                             \
			}));                                                    \
	} while (0)

static struct os_stats_rep stats(void) { return ost_stats(sc); }

static void hon_put(uint32_t i)
{
	char k[32];
	uint8_t v[MAXV];
	uint32_t g = ++hgen[i], len = hon_len(i, g);
	key_of(k, K_HON, 0, i);
	v_make(v, K_HON, 0, i, g, len);
	int rc = zl_kv_put(hon, k, strlen(k), v, len, OST_TMO);
	RCHECK(rc == 0, "honest PUT %s: %s", k, zl_strerror(rc));
	hwritten[i] = true;
	hon_bytes += os_ct_size(strlen(k), len);
	last_call = tl_now_us();
}

/* The honest client calls at least every window/8, so its session (and
 * region) stays while the parent waits. */
static void keepalive(void)
{
	if (tl_now_us() - last_call < window_us / 8)
		return;
	char k[32];
	key_of(k, K_HON, 0, 0);
	int rc = zl_kv_get(hon, k, strlen(k), NULL, NULL, NULL, OST_TMO);
	RCHECK(rc == 0 || rc == -ENOENT, "honest GET %s: %s", k, zl_strerror(rc));
	last_call = tl_now_us();
}

static void wait_us(int64_t us)
{
	for (int64_t end = tl_now_us() + us; tl_now_us() < end;) {
		keepalive();
		int64_t left = end - tl_now_us();
		tl_sleep_us(left < 2000 ? (left > 0 ? left : 0) : 2000);
	}
}

/* How many honest keys do not read back exactly; prints up to 10. */
static int hon_check(const char *when)
{
	int bad = 0;
	char why[320];
	for (uint32_t i = 0; i < NHON; i++) {
		if (!hwritten[i])
			continue;
		if (read_exact(hon, K_HON, 0, i, hgen[i], hon_len(i, hgen[i]), why, sizeof(why))) {
			if (bad++ < 10)
				fprintf(stderr, "%s: honest key %s\n", when, why);
		}
	}
	last_call = tl_now_us();
	return bad;
}

static void own_check(uint32_t round, const char *when)
{
	char why[320];
	for (uint32_t i = 0; i < NOWN; i++) {
		int rc = read_exact(hon, K_OWN, round, i, 0, own_len(i), why, sizeof(why));
		RCHECK(!rc, "round %u, %s: the child's key %s", round, when, why);
	}
	last_call = tl_now_us();
}

/* The stopped child's session's regions, from the server's state. */
static uint32_t child_regions(uint64_t session, uint32_t *held)
{
	uint32_t n = 0;
	pthread_mutex_lock(&srv.os->mu);
	for (uint32_t i = 0; i < srv.os->o.max_clients; i++) {
		struct os_sess *c = &srv.os->sess[i];
		if (c->client && c->session == session) {
			n = c->nheld;
			memcpy(held, c->held, n * sizeof(*held));
		}
	}
	pthread_mutex_unlock(&srv.os->mu);
	return n;
}

/* Whether some live session (only the honest client's, once the child's
 * expired) holds region r. */
static bool held_by_live(uint32_t r)
{
	bool yes = false;
	pthread_mutex_lock(&srv.os->mu);
	for (uint32_t i = 0; i < srv.os->o.max_clients && !yes; i++) {
		struct os_sess *c = &srv.os->sess[i];
		for (uint32_t j = 0; c->client && j < c->nheld; j++)
			yes |= c->held[j] == r;
	}
	pthread_mutex_unlock(&srv.os->mu);
	return yes;
}

static char proc_state(int pid)
{
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return '?';
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

/* addr as "file+0xoffset" from pid's maps, for addr2line -f -e file. */
static void addr_name(int pid, unsigned long long addr, char *out, size_t n)
{
	char path[64], line[512];
	snprintf(out, n, "%#llx", addr);
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi, off;
		char name[400] = "";
		if (sscanf(line, "%llx-%llx %*s %llx %*s %*s %399s", &lo, &hi, &off, name) < 3)
			continue;
		if (addr >= lo && addr < hi) {
			const char *b = strrchr(name, '/');
			snprintf(out, n, "%s+%#llx", b ? b + 1 : name, addr - lo + off);
			break;
		}
	}
	fclose(f);
}

/* Where a stopped process is, for the failure reports: its program
 * counter from /proc/PID/syscall ("-1 sp pc" when it is not in a system
 * call) and the word at its stack pointer (the return address when it
 * stopped in a leaf such as memcpy), as offsets into the mappings that
 * hold them (addr2line -f -e FILE OFFSET). */
static void where_stopped(int pid, char *out, size_t n)
{
	char path[64], buf[256];
	long long nr = 0;
	unsigned long long sp = 0, pc = 0, ret = 0;
	snprintf(out, n, "pc unknown");
	snprintf(path, sizeof(path), "/proc/%d/syscall", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	size_t k = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[k] = 0;
	if (sscanf(buf, "%lld", &nr) != 1)
		return;
	if (nr != -1) {
		snprintf(out, n, "in system call %lld", nr);
		return;
	}
	if (sscanf(buf, "%*d %llx %llx", &sp, &pc) != 2)
		return;
	struct iovec l = { &ret, sizeof(ret) }, r = { (void *)(uintptr_t)sp, sizeof(ret) };
	char a[160], b[160] = "?";
	addr_name(pid, pc, a, sizeof(a));
	if (process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)sizeof(ret))
		addr_name(pid, ret, b, sizeof(b));
	snprintf(out, n, "stopped at %s, [sp] %s", a, b);
}

/* Where in [0, len) of region r the child's keys of this round occur (a
 * container the child wrote there), or -1. */
static int64_t scan_region(uint32_t r, uint64_t len, uint32_t round, char *what, size_t n)
{
	const uint8_t *base = srv.os->base + srv.os->g.data_off + (uint64_t)r * RLEN;
	char needle[32];
	const char *kinds[] = { "own", "loop", "mark" };
	for (int k = 0; k < 3; k++) {
		snprintf(needle, sizeof(needle), "r%02u/%s/", round, kinds[k]);
		const uint8_t *p = memmem(base, len, needle, strlen(needle));
		if (p) {
			int64_t at = p - base;
			struct os_ct h = { 0 };
			if (at >= (int64_t)OS_CT_HDR)
				memcpy(&h, p - OS_CT_HDR, sizeof(h));
			snprintf(what, n,
				 "key \"%.*s\" at byte %lld of the region (the header before it: klen "
				 "%u vlen %u slot %u tag %u version %#llx)",
				 (int)strnlen((const char *)p, 16), (const char *)p, (long long)at,
				 h.klen, h.vlen, h.slot, h.tag, (unsigned long long)h.version);
			return at;
		}
	}
	return -1;
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const bool slow = tl_scaled_down();
	const uint32_t rounds = (uint32_t)(tl_scaled(20) < MAXR ? tl_scaled(20) : MAXR);
	window_us = slow ? 500000 : 200000;
	tl_watchdog(slow ? 240 : 150);
	uint64_t seed = tl_seed();
	struct tl_rng g = { seed };
	if (ost_rdma())
		SKIP("peeks at the server's shm mapping and stops processes: shm only");
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	atomic_store(&sh->pid, -1);
	fflush(NULL);
	pid_t fpid = fork();
	CHECK(fpid >= 0);
	if (!fpid)
		forker(seed);

	struct zl_kvos_opts o;
	zl_kvos_opts_init(&o);
	o.mem = MEM;
	o.region_len = RLEN;
	o.max_regions = 2;
	o.nslots = 16384;
	o.max_clients = 16;
	o.hb_window_us = window_us;
	ost_start(&srv, &o);
	const uint32_t nregions = MEM / RLEN;
	CHECK_OK(zl_client_connect(srv.plain, NULL, OST_TMO, &sc));
	hon = ost_connect(&srv);
	for (uint32_t i = 0; i < NHON; i++)
		hon_put(hnext++ % NHON);
	CHECKF(hon_check("at the start") == 0, "honest keys wrong at the start");
	snprintf(sh->url, sizeof(sh->url), "%s", srv.url);
	atomic_store(&sh->go, 1);

	const uint64_t maxct = os_ct_size(16, MAXV);
	uint32_t reused = 0, gap_absent = 0, not_last = 0, stops_early = 0;
	int64_t t_start = tl_now_us(), exp_min = INT64_MAX, exp_max = 0, exp_sum = 0;
	uint64_t puts_total = 0;
	for (uint32_t round = 1; round <= rounds; round++) {
		char why[320];
		/* the honest client holds a region */
		hon_put(hnext++ % NHON);
		struct os_stats_rep st0 = stats();

		/* 1. a fresh child */
		atomic_store(&sh->ready, 0);
		atomic_store(&sh->finish, 0);
		atomic_store(&sh->session, 0);
		atomic_store(&sh->cur_key, -1);
		atomic_store(&sh->puts, 0);
		atomic_store(&sh->after_cont, 0);
		for (int i = 0; i < NLOOP; i++)
			atomic_store(&sh->last_seq[i], 0);
		atomic_store(&sh->spawn, (int)round);
		int64_t t0 = tl_now_us();
		while (!atomic_load(&sh->ready)) {
			RCHECK(atomic_load(&sh->reaped) != (int)round,
			       "round %u: the child exited before it was ready (status %#x): %s",
			       round, atomic_load(&sh->status), sh->msg);
			RCHECK(tl_now_us() - t0 < 20000000, "round %u: the child not ready in 20 s",
			       round);
			keepalive();
			tl_sleep_us(500);
		}
		int pid = atomic_load(&sh->pid);
		RCHECK(atomic_load(&sh->spawned) == (int)round && pid > 0, "round %u: no pid", round);
		uint64_t csession = atomic_load(&sh->session);

		/* 2. stop it somewhere in its loop */
		wait_us(1000 + (int64_t)tl_rand_below(&g, 14001));
		RCHECK(!kill(pid, SIGSTOP), "SIGSTOP: %s", strerror(errno));
		int64_t t_stop = tl_now_us();
		while (proc_state(pid) != 'T') {
			RCHECK(tl_now_us() - t_stop < 5000000, "round %u: the child did not stop",
			       round);
			tl_sleep_us(100);
		}
		char where[512];
		where_stopped(pid, where, sizeof(where));
		int cur = atomic_load(&sh->cur_key);
		uint32_t cur_seq = atomic_load(&sh->cur_seq);
		uint64_t puts = atomic_load(&sh->puts);
		if (!puts)
			stops_early++;
		puts_total += puts;
		/* a request it sent just before is answered by now */
		wait_us(20000);
		uint32_t held[OS_MAX_HELD];
		uint32_t nheld = child_regions(csession, held);
		struct os_stats_rep st1 = stats();
		bool expired_early = st1.expired != st0.expired;
		RCHECK(expired_early || st1.regions_client == 1 + nheld,
		       "round %u: %llu client regions with the child stopped (it holds %u, the "
		       "honest client 1)",
		       round, (unsigned long long)st1.regions_client, nheld);

		/* 3. its session expires, its region is collected */
		struct os_stats_rep st2;
		int64_t t_exp = 0;
		for (;;) {
			st2 = stats();
			if (!t_exp && st2.expired > st0.expired)
				t_exp = tl_now_us();
			if (t_exp && st2.regions_client == 1 && st2.quarantined >= nheld &&
			    st2.regions_free + st2.regions_server + st2.regions_client +
					    st2.quarantined == nregions &&
			    st2.gc_runs > st0.gc_runs)
				break;
			RCHECK(tl_now_us() - t_stop < window_us + 10000 + (slow ? 4000000 : 1500000),
			       "round %u: %.0f ms after SIGSTOP (window %lld ms): expired %llu -> %llu, "
			       "regions %llu client, %llu free + %llu server + %llu client + %llu "
			       "quarantined of %u, gc_runs %llu -> %llu",
			       round, (double)(tl_now_us() - t_stop) / 1e3, (long long)window_us / 1000,
			       (unsigned long long)st0.expired, (unsigned long long)st2.expired,
			       (unsigned long long)st2.regions_client,
			       (unsigned long long)st2.regions_free,
			       (unsigned long long)st2.regions_server,
			       (unsigned long long)st2.regions_client,
			       (unsigned long long)st2.quarantined, nregions,
			       (unsigned long long)st0.gc_runs, (unsigned long long)st2.gc_runs);
			keepalive();
			tl_sleep_us(2000);
		}
		RCHECK(st2.expired == st0.expired + 1 && st2.dropped == st0.dropped,
		       "round %u: expired %llu -> %llu, dropped %llu -> %llu (want exactly the "
		       "child's session to expire)",
		       round, (unsigned long long)st0.expired, (unsigned long long)st2.expired,
		       (unsigned long long)st0.dropped, (unsigned long long)st2.dropped);
		int64_t e = t_exp - t_stop;
		exp_sum += e;
		exp_min = e < exp_min ? e : exp_min;
		exp_max = e > exp_max ? e : exp_max;
		RCHECK(child_regions(csession, held + nheld) == 0,
		       "round %u: the expired session still holds regions", round);
		own_check(round, "after its session expired");
		int bad = hon_check("after the child's session expired");
		RCHECK(!bad, "round %u: %d honest keys wrong after the child's expiry", round, bad);

		/* 4. the honest client writes through many regions: the stopped
		 * child's old regions are quarantined (it may be in the middle of
		 * a write there), so it must never get one; if it did, it fills
		 * that region almost to its end and the scans below look for the
		 * child's bytes in it */
		int64_t rc_reg = -1;
		uint64_t rc_pos = 0, budget = 8ull * MEM, b0 = hon_bytes;
		for (uint32_t j = 0; nheld && hon_bytes - b0 < budget; j++) {
			if (rc_reg < 0) {
				bool before[OS_MAX_HELD];
				for (uint32_t q = 0; q < nheld; q++)
					before[q] = held_by_live(held[q]);
				uint32_t i = hnext++ % NHON;
				char k[32];
				key_of(k, K_HON, 0, i);
				hon_put(i);
				for (uint32_t q = 0; q < nheld; q++) {
					if (!before[q] && held_by_live(held[q])) {
						rc_reg = held[q];
						rc_pos = os_ct_size(strlen(k), hon_len(i, hgen[i]));
					}
				}
			} else {
				if (rc_pos + 2 * maxct > RLEN)
					break;
				uint32_t i = hnext++ % NHON;
				char k[32];
				key_of(k, K_HON, 0, i);
				hon_put(i);
				rc_pos += os_ct_size(strlen(k), hon_len(i, hgen[i]));
			}
		}
		if (rc_reg >= 0) {
			reused++;
			RCHECK(held_by_live((uint32_t)rc_reg), "round %u: lost region %lld", round,
			       (long long)rc_reg);
		}
		RCHECK(rc_reg < 0, "round %u: the server gave the stopped child's region %lld to "
		       "the honest client (it must stay quarantined until the child speaks)",
		       round, (long long)rc_reg);
		bad = hon_check("before SIGCONT");
		RCHECK(!bad, "round %u: %d honest keys wrong before SIGCONT", round, bad);
		char what[256] = "";
		int64_t at = -1;
		if (rc_reg >= 0)
			at = scan_region((uint32_t)rc_reg, rc_pos, round, what, sizeof(what));
		RCHECK(at < 0, "round %u: before SIGCONT, a key of the child's in what the honest "
		       "client wrote: %s", round, what);

		/* 5. SIGCONT: the child finishes its PUT, writes its markers, exits */
		atomic_store(&sh->finish, 1);
		RCHECK(!kill(pid, SIGCONT), "SIGCONT: %s", strerror(errno));
		int64_t t_cont = tl_now_us();
		while (atomic_load(&sh->reaped) != (int)round) {
			RCHECK(tl_now_us() - t_cont < 20000000,
			       "round %u: the child did not finish in 20 s after SIGCONT (%llu marker "
			       "PUTs done)",
			       round, (unsigned long long)atomic_load(&sh->after_cont));
			keepalive();
			tl_sleep_us(500);
		}
		int st = atomic_load(&sh->status);
		atomic_store(&sh->pid, -1);

		/* the evidence first, then the verdicts */
		bool still = rc_reg >= 0 && held_by_live((uint32_t)rc_reg);
		if (still)
			at = scan_region((uint32_t)rc_reg, rc_pos, round, what, sizeof(what));
		bad = hon_check("after the child resumed");
		if (at >= 0 || bad)
			fprintf(stderr,
				"round %u: the child (stopped after %llu loop PUTs, writing loop key %d "
				"seq %u; %s) resumed and wrote into region %lld, which the server had given "
				"to the honest client after the child's session expired: %s; %d honest "
				"keys damaged\n",
				round, (unsigned long long)puts, cur, cur_seq, where, (long long)rc_reg,
				at >= 0 ? what : "(no child key found in the bytes the honest client wrote)",
				bad);
		RCHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "round %u: the child %s %d: %s", round,
		       WIFEXITED(st) ? "exited" : "was killed by signal",
		       WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), sh->msg);
		RCHECK(at < 0, "round %u: the resumed child wrote into the honest client's region "
		       "(%s)", round, what);
		RCHECK(!bad, "round %u: %d honest keys wrong after the child resumed", round, bad);
		own_check(round, "after the child resumed");
		for (uint32_t i = 0; i < NMARK; i++) {
			int rc = read_exact(hon, K_MARK, round, i, 0, mark_len(i), why, sizeof(why));
			RCHECK(!rc, "round %u: marker %s", round, why);
		}
		for (uint32_t k = 0; k < NLOOP; k++) {
			uint32_t last = atomic_load(&sh->last_seq[k]);
			int rc = read_exact(hon, K_LOOP, round, k, last, 0, why, sizeof(why));
			if (!rc || (int)k != cur || (rc != -ENOENT && rc != -EBADMSG)) {
				RCHECK(!rc || (!last && rc == -ENOENT), "round %u: loop key %s", round,
				       why);
				continue;
			}
			/* the key it was writing when stopped: absent, or intact */
			char kk[32];
			const void *v;
			size_t vl;
			uint32_t got;
			key_of(kk, K_LOOP, round, k);
			rc = zl_kv_get(hon, kk, strlen(kk), &v, &vl, NULL, OST_TMO);
			if (rc == -ENOENT) {
				gap_absent++;
				printf("round %u: the key the child was writing when stopped (%s, seq "
				       "%u) is absent: the documented gap (stale entry published)\n",
				       round, kk, cur_seq);
				continue;
			}
			RCHECK(rc == 0, "round %u: in-flight key %s: %s", round, kk, zl_strerror(rc));
			char w2[256];
			RCHECK(!v_check(v, vl, K_LOOP, round, k, &got, w2, sizeof(w2)),
			       "round %u: in-flight key %s: %s", round, kk, w2);
			not_last++;
			printf("round %u: in-flight key %s holds seq %u, not the last written (%u)\n",
			       round, kk, got, last);
		}
		last_call = tl_now_us();
		printf("round %u: stopped after %.1f ms (%llu loop PUTs, in loop key %d), expired "
		       "%.0f ms after SIGSTOP, region %lld %s (%s)\n",
		       round, (double)(t_stop - t0) / 1e3, (unsigned long long)puts, cur,
		       (double)e / 1e3, nheld ? (long long)held[0] : -1LL,
		       rc_reg >= 0 ? "reused by the honest client" : "not reused", where);
	}

	/* everything once more */
	for (uint32_t r = 1; r <= rounds; r++)
		own_check(r, "at the end");
	CHECKF(hon_check("at the end") == 0, "honest keys wrong at the end");
	struct zl_kv_info info = { .size = sizeof(info) };
	CHECK_OK(zl_kv_info(hon, &info));
	struct os_stats_rep sf = stats();
	printf("%u rounds in %.2f s: %llu loop PUTs before the stops (%u stops before any), "
	       "expiry %.0f..%.0f ms after SIGSTOP (mean %.0f; window %lld ms); the child's "
	       "region reused by the honest client in %u rounds; in-flight key absent in %u, "
	       "older in %u; honest client met %llu garbage entries; server: %llu expired, %llu "
	       "dropped, %llu collections, %llu copies, %llu holes\n",
	       rounds, (double)(tl_now_us() - t_start) / 1e6, (unsigned long long)puts_total,
	       stops_early, (double)exp_min / 1e3, (double)exp_max / 1e3,
	       (double)exp_sum / 1e3 / rounds, (long long)window_us / 1000, reused, gap_absent,
	       not_last, (unsigned long long)info.garbage, (unsigned long long)sf.expired,
	       (unsigned long long)sf.dropped, (unsigned long long)sf.gc_runs,
	       (unsigned long long)sf.gc_copied, (unsigned long long)sf.gc_holes);
	CHECKF(reused == 0, "the honest client got a stopped child's region in %u of %u rounds",
	       reused, rounds);
	/* the children spoke again or went: nothing stays quarantined */
	struct os_stats_rep sq;
	for (int64_t t0 = tl_now_us(); (sq = stats()).quarantined; tl_sleep_us(10000)) {
		CHECKF(tl_now_us() - t0 < 5000000, "%llu regions still quarantined 5 s after the "
		       "last child", (unsigned long long)sq.quarantined);
		keepalive();
	}
	atomic_store(&sh->quit, 1);
	int fst = 0;
	CHECK(waitpid(fpid, &fst, 0) == fpid && WIFEXITED(fst) && WEXITSTATUS(fst) == 0);
	zl_kv_close(hon);
	zl_client_close(sc);
	ost_stop(&srv);
	munmap(sh, sizeof(*sh));
	printf("os_expire: ok\n");
	return 0;
}
