/* SPDX-License-Identifier: MIT */
/*
 * kv_hostile ZL-KVD: the seven classes of "hostile local peers" against a
 * running zl-kvd process (not zl_server with test handlers, as the sec_*
 * and srv_* tests do). One zl-kvd listens on shm, tcp and unix at once
 * (unique name, port 0, a socket in a temporary directory); raw peers speak
 * the wire formats themselves (tests/lib/rawshm.c; shm_wire.h, wire.h,
 * stream.h, src/kv/proto.h):
 *   class 1  a shm client clears O_NONBLOCK on every fd zl-kvd passed it,
 *            sets every sleeping flag and floods wake-up records while
 *            honest clients call;
 *   class 2  (root only) a process running as nobody is refused on shm and
 *            unix: by zl_kv_connect, a raw shm hello, a raw unix hello;
 *   class 3  3 silent shm peers and 200 half-open tcp peers (3 bytes of the
 *            stream magic): an honest kv client connects within 1 s on each
 *            transport and its median put and get latencies stay within 1.5x
 *            of a quiet zl-kvd (+20 us; attacked and quiet rounds
 *            interleaved; sanitizer builds only report the ratios);
 *   class 4  the reproducer: a 1 MiB value, then a raw tcp client
 *            sends 400 GETs of it and never reads: zl-kvd logs the pause,
 *            serves far fewer than 400, and its RSS stays within max_queued
 *            (8 MiB) + the K replies taken + SLACK4_KB; zl-kvd lets go of
 *            it once it closes; the same on unix;
 *   class 5  a shm client offering a 1 GiB (and a 2x max_ring) reply ring
 *            is refused (-EMSGSIZE) without zl-kvd's memory growing;
 *   class 6  tcp and unix clients announcing 64 MiB frames (admitted ones
 *            and ones instead of their srv_hello) are dropped, logged, and
 *            zl-kvd's RSS stays low;
 *   class 7  a shm client's fragmented message announcing 16 GiB and 2^62
 *            bytes: dropped, logged, nothing allocated, no crash.
 * After each, honest clients (connected before the attacks, and new ones)
 * put and get correctly on every transport. zl-kvd's stderr goes to a
 * file, grepped for its log lines. The test runs in a child; the parent
 * always stops zl-kvd with SIGTERM and reaps it (it must exit 0), also on a
 * failure or a hang (watchdog), and zl-kvd dies with the parent
 * (PR_SET_PDEATHSIG) should the parent be killed.
 * Exit 0 pass, 1 fail, 77 if zl-kvd cannot run here.
 */
#include <endian.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "proto.h"
#include "rawshm.h"
#include "sockutil.h"
#include "stream.h"
#include "zipline_kv.h"

#define TMO 10000000
#define MIB (1u << 20)
#define BIG_KEY "big"
#define K 4                       /* zl-kvd's default --slots */
#define BUDGET_KB (8 * 1024)      /* zl-kvd's max_queued: the default 8 MiB */
#define SLACK4_KB (8 * 1024)      /* class 4: allocator and channel buffers */
#define RSS5_KB (4 * 1024)        /* class 5: nothing like the ring offered */
#define RSS6_KB (6 * 1024)        /* class 6: nothing like 64 MiB, or 8 MiB sent */
#define RSS7_KB (8 * 1024)        /* class 7 */
#define VM7_KB (256 * 1024)       /* class 7: nothing near the totals announced */

enum { SHM, TCP, UNIX, NTR };
static const char *const tr_name[NTR] = { "shm", "tcp", "unix" };
static char urls[NTR][600];
static char dir[64] = "/tmp/zlkvh-XXXXXX";
static char errfile[128], sockpath[128];
static const char *kvd;
static pid_t kvd_pid;
static zl_kv *before[NTR];
static uint64_t next_id = 1;

/* ---- zl-kvd: state, memory, log --------------------------------------- */

static long kvd_rss(void) { return tl_status_kb(kvd_pid, "VmRSS"); }

static void check_alive(const char *when)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)kvd_pid);
	FILE *f = fopen(path, "r");
	bool ok = false;
	if (f) {
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "State:", 6)) {
				char st = 0;
				ok = sscanf(line + 6, " %c", &st) == 1 && st != 'Z' && st != 'X';
			}
		fclose(f);
	}
	CHECKF(ok, "zl-kvd is gone %s (see %s)", when, errfile);
}

/* zl-kvd's stderr so far (malloc'ed). */
static char *log_text(void)
{
	int fd = open(errfile, O_RDONLY);
	CHECK(fd >= 0);
	size_t cap = 1 << 16, n = 0;
	char *b = malloc(cap);
	CHECK(b);
	for (;;) {
		if (cap - n < 4096)
			CHECK((b = realloc(b, cap *= 2)));
		ssize_t r = read(fd, b + n, cap - n - 1);
		CHECK(r >= 0);
		if (!r)
			break;
		n += (size_t)r;
	}
	close(fd);
	b[n] = 0;
	return b;
}

/* Lines of zl-kvd's stderr containing s; the last one into last (cap). */
static int log_count(const char *s, char *last, size_t cap)
{
	char *t = log_text();
	int n = 0;
	for (char *p = t; (p = strstr(p, s)); p++) {
		n++;
		if (last) {
			char *a = p, *e = strchr(p, '\n');
			while (a > t && a[-1] != '\n')
				a--;
			snprintf(last, cap, "%.*s", (int)((e ? e : p + strlen(p)) - a), a);
		}
	}
	free(t);
	return n;
}

/* One counter of zl-kvd's STATS line (a STATS request over tcp). */
static uint64_t stat_of(const char *name)
{
	zl_client *c;
	CHECK_OK(zl_client_connect(urls[TCP], NULL, TMO, &c));
	uint8_t req[ZL_KVP_HDR];
	struct zl_kvp_req r = { .op = ZL_KVP_STATS };
	zl_kvp_req_hdr(&r, req);
	const void *p;
	size_t n;
	struct zl_kvp_rep rep;
	CHECK_OK(zl_call(c, ZL_KVP_STATS, req, sizeof(req), &p, &n, TMO));
	CHECK(!zl_kvp_rep_parse(ZL_KVP_STATS, p, n, &rep) && !rep.status);
	char line[ZL_KVP_MAX_STATS + 2] = " ", want[64];
	memcpy(line + 1, rep.body, rep.blen < ZL_KVP_MAX_STATS ? rep.blen : ZL_KVP_MAX_STATS);
	zl_client_close(c);
	snprintf(want, sizeof(want), " %s=", name);
	char *at = strstr(line, want);
	CHECKF(at, "no %s in the stats line: %s", name, line);
	return strtoull(at + strlen(want), NULL, 10);
}

/* ---- honest clients ---------------------------------------------------- */

static zl_kv *kv_open(int tr, int64_t *took_us)
{
	zl_kv *kv = NULL;
	int64_t t0 = tl_now_us();
	int rc = zl_kv_connect(urls[tr], NULL, TMO, &kv);
	if (took_us)
		*took_us = tl_now_us() - t0;
	CHECKF(rc == 0, "honest zl_kv_connect(%s): %s", urls[tr], zl_strerror(rc));
	return kv;
}

static void get_check(zl_kv *kv, const char *key, uint64_t id, size_t len)
{
	const void *v;
	size_t vlen;
	int rc = zl_kv_get(kv, key, strlen(key), &v, &vlen, NULL, TMO);
	CHECKF(rc == 0, "get %s: %s", key, zl_strerror(rc));
	CHECKF(vlen == len, "get %s: %zu bytes, expected %zu", key, vlen, len);
	CHECK_PATTERN(v, vlen, id);
}

/* A put of a fresh value and a get back, and a get of the 1 MiB value. */
static void kv_check(zl_kv *kv, bool big)
{
	char key[32];
	uint64_t id = next_id++;
	size_t len = 1 + (size_t)(id * 997 % 5000);
	static uint8_t val[8192];
	snprintf(key, sizeof(key), "honest-%" PRIu64, id % 64); /* the store stays small */
	tl_fill(val, len, id);
	int rc = zl_kv_put(kv, key, strlen(key), val, len, TMO);
	CHECKF(rc == 0, "put %s: %s", key, zl_strerror(rc));
	get_check(kv, key, id, len);
	if (big)
		get_check(kv, BIG_KEY, 0xb16, MIB);
}

/* After each case: every client connected before, and a new one per
 * transport, put and get correctly; zl-kvd is still there. */
static void after_case(const char *what, bool big)
{
	check_alive(what);
	int64_t took[NTR];
	for (int tr = 0; tr < NTR; tr++) {
		kv_check(before[tr], big);
		zl_kv *kv = kv_open(tr, &took[tr]);
		kv_check(kv, big);
		zl_kv_close(kv);
	}
	printf("  honest after %s: clients from before and new ones OK (new connects: "
	       "shm %" PRId64 " us, tcp %" PRId64 " us, unix %" PRId64 " us)\n",
	       what, took[SHM], took[TCP], took[UNIX]);
}

/* ---- raw stream peers (stream.h, wire.h) -------------------------------- */

static void stream_hello(uint8_t h[ZL_STREAM_HELLO_LEN], uint64_t max_msg)
{
	uint16_t ver = htole16(ZL_PROTO_VERSION), flags = 0;
	uint64_t max = htole64(max_msg);
	memcpy(h, ZL_STREAM_MAGIC, 4);
	memcpy(h + 4, &ver, 2);
	memcpy(h + 6, &flags, 2);
	memcpy(h + 8, &max, 8);
}

/* A nonblocking raw stream client: its hello and, with admit, its
 * srv_hello frame (and, with welcome, the server's hello and welcome
 * read). */
static int stream_raw(int tr, bool admit, bool welcome)
{
	int fd = tl_raw_connect(urls[tr]);
	CHECK(fcntl(fd, F_SETFL, O_NONBLOCK) == 0);
	int64_t dl = tl_now_us() + TMO;
	uint8_t h[ZL_STREAM_HELLO_LEN], peer[ZL_STREAM_HELLO_LEN];
	stream_hello(h, 64ull << 20);
	CHECK_OK(zl_write_full(fd, h, sizeof(h), dl));
	if (welcome) {
		CHECK_OK(zl_read_full(fd, peer, sizeof(peer), dl));
		CHECK(!memcmp(peer, ZL_STREAM_MAGIC, 4));
	}
	if (admit) {
		struct {
			uint32_t len;
			struct srv_hello h;
		} __attribute__((packed)) m = { htole32(sizeof(struct srv_hello)),
						{ .magic = SRV_MAGIC, .version = SRV_VERSION,
						  .size = sizeof(struct srv_hello) } };
		CHECK_OK(zl_write_full(fd, &m, sizeof(m), dl));
		if (welcome) {
			uint32_t len;
			struct srv_welcome w;
			CHECK_OK(zl_read_full(fd, &len, 4, dl));
			CHECK(le32toh(len) == sizeof(w));
			CHECK_OK(zl_read_full(fd, &w, sizeof(w), dl));
			CHECKF(w.magic == SRV_MAGIC && w.status == 0 && w.slots == K,
			       "welcome: status %d, %u slots", w.status, w.slots);
		}
	}
	return fd;
}

/* ---- class 1: shared fd flags, wake-up floods ------------------------- */

struct flood {
	int sock;
	int ms;
	long n;
};

static void *flood_thread(void *arg)
{
	struct flood *f = arg;
	f->n = raw_shm_flood(f->sock, f->ms);
	return NULL;
}

static void class1(void)
{
	printf("class 1: a shm client clears O_NONBLOCK on every fd it got, sets every "
	       "sleeping flag, floods wake-ups\n");
	long rss0 = kvd_rss();
	struct raw_srv c;
	CHECK_OK(raw_srv_join(&c, urls[SHM], 65536, TMO));
	/* all it received: zl-kvd's ring memfd, the flag array, its page */
	raw_clear_flags(c.s.peer_fd);
	raw_clear_flags(c.fds[0]);
	raw_clear_flags(c.fds[1]);
	struct shm_ctl *ctl[2] = { raw_ctl(c.s.map), raw_ctl(c.s.peer_map) };
	for (int i = 0; i < 2; i++) {
		atomic_store(&ctl[i]->rx_sleeping, 1);
		atomic_store(&ctl[i]->tx_sleeping, 1);
	}
	atomic_store(&((struct srv_page_ctl *)c.page)->srv_sleeping, 1);
	/* honest calls on every transport while the flood goes on */
	struct flood f = { .sock = c.s.sock, .ms = 1500 };
	struct tl_thread th;
	tl_thread_start(&th, flood_thread, &f);
	int64_t end = tl_now_us() + 1500000, worst = 0;
	uint64_t calls = 0;
	while (tl_now_us() < end) {
		int64_t t0 = tl_now_us();
		kv_check(before[calls % NTR], false);
		int64_t dt = tl_now_us() - t0;
		worst = dt > worst ? dt : worst;
		calls++;
	}
	tl_thread_join(&th, 10000);
	long rss1 = kvd_rss();
	raw_srv_close(&c);
	printf("  raw client: %ld wake-up records sent; honest: %" PRIu64 " put+get during, "
	       "worst %" PRId64 " us; zl-kvd RSS %ld -> %ld kB\n",
	       f.n, calls, worst, rss0, rss1);
	CHECKF(f.n >= 1000, "only %ld wake-up records went out", f.n);
	CHECKF(calls >= 10, "only %" PRIu64 " honest put+get in 1.5 s", calls);
	if (!tl_scaled_down())
		CHECKF(worst < 1000000, "an honest put+get took %" PRId64 " us", worst);
	after_case("class 1", false);
}

/* ---- class 2: the uid rule (root only) -------------------------------- */

static uid_t nobody_uid;
static gid_t nobody_gid;

static int nobody_peer(void *arg)
{
	(void)arg;
	CHECKF(!setgroups(0, NULL) && !setgid(nobody_gid) && !setuid(nobody_uid),
	       "cannot become nobody: %s", strerror(errno));
	prctl(PR_SET_PDEATHSIG, SIGKILL); /* cleared by the change of credentials */
	const int trs[2] = { SHM, UNIX };
	for (int i = 0; i < 2; i++)
		for (int allow = 0; allow < 2; allow++) {
			struct zl_opts o;
			zl_opts_init(&o);
			o.allow_other_uid = allow;
			zl_kv *kv = NULL;
			int rc = zl_kv_connect(urls[trs[i]], &o, TMO, &kv);
			CHECKF(rc == -EPERM, "zl_kv_connect(%s) as nobody (allow_other_uid %d): %s",
			       urls[trs[i]], allow, zl_strerror(rc));
			printf("  nobody: zl_kv_connect %s (allow_other_uid %d): %s\n",
			       tr_name[trs[i]], allow, zl_strerror(rc));
		}
	struct raw_shm r;
	raw_shm_hello(&r, urls[SHM], 65536);
	int rc = raw_shm_answer(&r, TMO);
	CHECKF(rc == -EPERM, "raw shm hello as nobody: %s", zl_strerror(rc));
	raw_shm_close(&r);
	printf("  nobody: raw shm hello: refusal hello with status %s\n", zl_strerror(rc));
	int fd = tl_raw_connect(urls[UNIX]);
	uint8_t h[ZL_STREAM_HELLO_LEN], peer[ZL_STREAM_HELLO_LEN];
	stream_hello(h, 1 << 20);
	int64_t dl = tl_now_us() + TMO;
	int wr = zl_write_full(fd, h, sizeof(h), dl);
	CHECK_OK(zl_read_full(fd, peer, sizeof(peer), dl));
	uint16_t flags;
	memcpy(&flags, peer + 6, 2);
	CHECKF(!memcmp(peer, ZL_STREAM_MAGIC, 4) && (le16toh(flags) & ZL_STREAM_F_EPERM),
	       "raw unix hello as nobody: answer flags %#x", le16toh(flags));
	CHECKF(tl_dropped(fd, 5000), "raw unix peer (nobody) not dropped");
	close(fd);
	printf("  nobody: raw unix hello (%s): answered with ZL_STREAM_F_EPERM, closed\n",
	       wr ? "not all of it went" : "sent");
	return 0;
}

static void class2(void)
{
	printf("class 2: the uid rule, zl-kvd running as uid %d\n", (int)geteuid());
	struct passwd *pw = getpwnam("nobody");
	if (geteuid() != 0 || !pw || pw->pw_uid == 0) {
		printf("  SKIP (77) class 2 only: %s\n",
		       geteuid() ? "needs root (a child setuid's to nobody)" : "no user nobody");
		return;
	}
	nobody_uid = pw->pw_uid;
	nobody_gid = pw->pw_gid;
	/* the file system lets nobody reach the socket: only zl-kvd's rule refuses */
	CHECKF(chmod(sockpath, 0777) == 0, "chmod %s: %s", sockpath, strerror(errno));
	long rss0 = kvd_rss();
	pid_t pid = tl_fork(nobody_peer, NULL, 60);
	tl_reap_ok(pid, 40000);
	printf("  tcp: no uid rule (not applicable); zl-kvd RSS %ld -> %ld kB\n", rss0,
	       kvd_rss());
	after_case("class 2", false);
}

/* ---- class 3: stalled handshakes -------------------------------------- */

#define MAX_RAW 512
static int raw[MAX_RAW], nraw;

static void keep(int fd)
{
	CHECK(nraw < MAX_RAW);
	raw[nraw++] = fd;
}

static void stall(void)
{
	for (int i = 0; i < 3; i++)
		keep(tl_raw_connect(urls[SHM]));
	for (int i = 0; i < 200; i++) {
		int fd = tl_raw_connect(urls[TCP]);
		CHECK(send(fd, ZL_STREAM_MAGIC, 3, MSG_NOSIGNAL) == 3);
		keep(fd);
	}
	tl_sleep_us(100000);
}

static void calm(void)
{
	while (nraw)
		close(raw[--nraw]);
	tl_sleep_us(100000); /* zl-kvd drops them meanwhile */
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static int64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* A new client connects within 1 s; the medians of its puts and gets (ns). */
static void honest_timed(int tr, const char *what, int64_t med[2])
{
	int64_t t0 = tl_now_us();
	zl_kv *kv = NULL;
	int rc = zl_kv_connect(urls[tr], NULL, 1000000, &kv);
	int64_t took = tl_now_us() - t0;
	CHECKF(rc == 0, "%s: honest client on %s: %s after %" PRId64 " us", what, urls[tr],
	       zl_strerror(rc), took);
	int calls = tl_scaled(1000) < 1000 ? (int)tl_scaled(1000) : 1000;
	static int64_t t[2][1000];
	uint8_t val[64], key[16];
	for (int i = 0; i < calls; i++) {
		snprintf((char *)key, sizeof(key), "lat-%d", i % 50);
		tl_fill(val, sizeof(val), (uint64_t)i);
		int64_t a = now_ns();
		rc = zl_kv_put(kv, key, strlen((char *)key), val, sizeof(val), TMO);
		int64_t b = now_ns();
		CHECKF(rc == 0, "put: %s", zl_strerror(rc));
		const void *v;
		size_t vlen;
		rc = zl_kv_get(kv, key, strlen((char *)key), &v, &vlen, NULL, TMO);
		int64_t c = now_ns();
		CHECKF(rc == 0 && vlen == sizeof(val), "get: %s", zl_strerror(rc));
		CHECK_PATTERN(v, vlen, (uint64_t)i);
		t[0][i] = b - a;
		t[1][i] = c - b;
	}
	zl_kv_close(kv);
	for (int k = 0; k < 2; k++) {
		qsort(t[k], (size_t)calls, sizeof(t[k][0]), cmp64);
		med[k] = t[k][calls / 2];
	}
	printf("  %s: %s connected in %" PRId64 " us, median put %" PRId64 " ns, get %" PRId64
	       " ns\n", what, tr_name[tr], took, med[0], med[1]);
}

#define ROUNDS 3
static void class3(void)
{
	printf("class 3: 3 silent shm peers + 200 half-open tcp peers (3 bytes of the "
	       "magic)\n");
	long rss0 = kvd_rss();
	int dropped0 = log_count("in its handshake", NULL, 0);
	for (int tr = 0; tr < NTR; tr++) {
		int64_t att[2] = { INT64_MAX, INT64_MAX }, quiet[2] = { INT64_MAX, INT64_MAX };
		for (int r = 0; r < ROUNDS; r++) {
			int64_t m[2];
			stall();
			honest_timed(tr, "attacked", m);
			for (int k = 0; k < 2; k++)
				att[k] = m[k] < att[k] ? m[k] : att[k];
			calm();
			honest_timed(tr, "quiet", m);
			for (int k = 0; k < 2; k++)
				quiet[k] = m[k] < quiet[k] ? m[k] : quiet[k];
		}
		for (int k = 0; k < 2; k++) {
			const char *op = k ? "get" : "put";
			printf("  %s %s: best median attacked %" PRId64 " ns, quiet %" PRId64
			       " ns (ratio %.2f)\n", tr_name[tr], op, att[k], quiet[k],
			       (double)att[k] / (double)quiet[k]);
			if (tl_scaled_down())
				continue; /* many times slower, and noisier: report only */
			CHECKF(att[k] * 2 <= quiet[k] * 3 + 40000,
			       "%s %s: median %" PRId64 " ns attacked, %" PRId64 " ns quiet",
			       tr_name[tr], op, att[k], quiet[k]);
		}
	}
	char last[512] = "";
	int dropped = log_count("in its handshake", last, sizeof(last)) - dropped0;
	printf("  zl-kvd RSS %ld -> %ld kB; %d log lines on peers dropped in their handshake, "
	       "last: %s\n", rss0, kvd_rss(), dropped, last);
	after_case("class 3", false);
}

/* ---- class 4: a client that never reads its replies ------------------- */

/* The raw GET requests of the reproducer: frames of srv_hdr + kv request. */
static size_t get_frame(uint8_t *buf, uint32_t i)
{
	const size_t klen = strlen(BIG_KEY);
	uint32_t len = htole32((uint32_t)(sizeof(struct srv_hdr) + ZL_KVP_HDR + klen));
	struct srv_hdr h = { .type = ZL_KVP_GET, .slot = (uint16_t)(i % K),
			     .len = (uint32_t)(ZL_KVP_HDR + klen) };
	atomic_store(&h.seq, 1 + i / K); /* as if each had been answered */
	struct zl_kvp_req r = { .op = ZL_KVP_GET, .klen = (uint32_t)klen };
	memcpy(buf, &len, 4);
	memcpy(buf + 4, &h, sizeof(h));
	zl_kvp_req_hdr(&r, buf + 4 + sizeof(h));
	memcpy(buf + 4 + sizeof(h) + ZL_KVP_HDR, BIG_KEY, klen);
	return 4 + sizeof(h) + ZL_KVP_HDR + klen;
}

static void class4(int tr)
{
	printf("class 4: put a 1 MiB value, a raw %s client sends 400 GETs of it and "
	       "never reads\n", tr_name[tr]);
	static uint8_t big[MIB];
	tl_fill(big, MIB, 0xb16);
	CHECK_OK(zl_kv_put(before[tr], BIG_KEY, strlen(BIG_KEY), big, MIB, TMO));
	for (int i = 0; i < 2; i++) /* warm-up: every transport's reply path */
		for (int t = 0; t < NTR; t++)
			get_check(before[t], BIG_KEY, 0xb16, MIB);
	uint64_t gets0 = stat_of("get");
	int paused0 = log_count("pausing client", NULL, 0);
	long rss0 = kvd_rss();

	int fd = stream_raw(tr, true, false); /* reads nothing, ever */
	static uint8_t req[400 * 64];
	size_t n = 0;
	for (uint32_t i = 0; i < 400; i++)
		n += get_frame(req + n, i);
	int64_t t0 = tl_now_us();
	CHECK_OK(zl_write_full(fd, req, n, t0 + TMO));
	int64_t wrote = tl_now_us() - t0;
	/* wait for the pause, watching zl-kvd's memory */
	long peak = rss0;
	char line[512] = "";
	int64_t paused_at = -1, end = t0 + 20000000;
	while (tl_now_us() < end) {
		long r = kvd_rss();
		peak = r > peak ? r : peak;
		if (paused_at < 0 && log_count("pausing client", line, sizeof(line)) > paused0)
			paused_at = tl_now_us();
		if (paused_at >= 0 && tl_now_us() - paused_at > 1000000)
			break; /* and a second more */
		tl_sleep_us(10000);
	}
	long rss1 = kvd_rss();
	uint64_t served = stat_of("get") - gets0;
	printf("  attacker: 400 GETs (%zu bytes) written in %" PRId64 " us, nothing read; "
	       "zl-kvd served %" PRIu64 " of them\n", n, wrote, served);
	printf("  zl-kvd RSS %ld kB before, peak %ld kB (%+ld), %ld kB now; allowed %+d kB "
	       "(max_queued %d + %d replies taken + slack %d)\n", rss0, peak, peak - rss0,
	       rss1, BUDGET_KB + K * 1024 + SLACK4_KB, BUDGET_KB, K * 1024, SLACK4_KB);
	printf("  log: %s\n", line);
	CHECKF(paused_at >= 0, "no \"pausing client\" line in zl-kvd's stderr (%s) in 20 s",
	       errfile);
	CHECKF(served < 100, "zl-kvd served %" PRIu64 " GETs to a client that reads nothing",
	       served);
	CHECKF(peak - rss0 < BUDGET_KB + K * 1024 + SLACK4_KB,
	       "zl-kvd's RSS grew by %ld kB beside a client that never reads", peak - rss0);
	after_case(tr == TCP ? "class 4 (tcp; attacker still connected)"
			     : "class 4 (unix; attacker still connected)", true);

	uint64_t clients = stat_of("clients");
	close(fd);
	int64_t t1 = tl_now_us();
	uint64_t now = clients;
	while ((now = stat_of("clients")) >= clients && tl_now_us() - t1 < 5000000)
		tl_sleep_us(20000);
	printf("  attacker closed: zl-kvd clients %" PRIu64 " -> %" PRIu64 " after %" PRId64
	       " us, RSS %ld kB\n", clients, now, tl_now_us() - t1, kvd_rss());
	CHECKF(now < clients, "zl-kvd still counts the paused attacker 5 s after it closed");
	after_case(tr == TCP ? "class 4 (tcp)" : "class 4 (unix)", true);
}

/* ---- class 5: a peer-chosen reply ring -------------------------------- */

static void class5(void)
{
	const uint32_t rings[] = { 1u << 30, 8u << 20 }; /* 8 MiB: 2x max_ring */
	for (int i = 0; i < 2; i++) {
		printf("class 5: a shm client offers a reply ring of %u bytes\n", rings[i]);
		long rss0 = kvd_rss(), vm0 = tl_status_kb(kvd_pid, "VmSize");
		int lines0 = log_count("\n", NULL, 0);
		struct raw_srv c;
		int rc = raw_srv_join(&c, urls[SHM], rings[i], TMO);
		raw_srv_close(&c);
		tl_sleep_us(50000);
		long rss1 = kvd_rss(), vm1 = tl_status_kb(kvd_pid, "VmSize");
		char last[512] = "";
		bool logged = log_count("\n", last, sizeof(last)) > lines0;
		printf("  refused: %s; zl-kvd RSS %ld -> %ld kB, VmSize %ld -> %ld kB; log: %s\n",
		       zl_strerror(rc), rss0, rss1, vm0, vm1, logged ? last : "(no line)");
		CHECK_RC(rc, -EMSGSIZE);
		CHECKF(rss1 - rss0 < RSS5_KB, "zl-kvd's RSS grew by %ld kB", rss1 - rss0);
		CHECKF(vm1 - vm0 < (long)(rings[i] / 2048), "zl-kvd's VmSize grew by %ld kB",
		       vm1 - vm0);
	}
	struct raw_srv c; /* max_ring itself is fine */
	CHECK_OK(raw_srv_join(&c, urls[SHM], 4u << 20, TMO));
	raw_srv_close(&c);
	printf("  a ring of 4 MiB (max_ring): welcomed\n");
	after_case("class 5", true);
}

/* ---- class 6: huge stream frames -------------------------------------- */

#define NATT 4
#define FRAME (64u << 20)
#define SEND_BYTES (8u << 20)

static void class6(int tr)
{
	printf("class 6: %s: %d raw clients announce %u-byte frames (2 admitted, 2 instead "
	       "of their srv_hello), send up to %u bytes\n", tr_name[tr], NATT, FRAME,
	       SEND_BYTES);
	int drops0 = log_count("dropping", NULL, 0);
	uint64_t dropped0 = stat_of("clients_dropped");
	long rss0 = kvd_rss();
	int fd[NATT];
	size_t sent[NATT] = { 0 };
	bool gone[NATT] = { false };
	for (int i = 0; i < NATT; i++) {
		fd[i] = stream_raw(tr, i < 2, true);
		uint32_t h = htole32(FRAME);
		CHECK_OK(zl_write_full(fd[i], &h, 4, tl_now_us() + TMO));
	}
	static uint8_t chunk[65536];
	memset(chunk, 0xa5, sizeof(chunk));
	long peak = rss0;
	uint64_t calls = 0;
	int64_t end = tl_now_us() + 3000000;
	for (int busy = NATT; busy && tl_now_us() < end;) {
		busy = 0;
		for (int i = 0; i < NATT; i++) {
			if (gone[i] || sent[i] >= SEND_BYTES)
				continue;
			busy++;
			ssize_t n = send(fd[i], chunk, sizeof(chunk), MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n > 0)
				sent[i] += (size_t)n;
			else if (errno != EAGAIN)
				gone[i] = true; /* EPIPE, ECONNRESET: dropped */
		}
		kv_check(before[tr], false); /* an honest client meanwhile */
		calls++;
		long r = kvd_rss();
		peak = r > peak ? r : peak;
	}
	for (int i = 0; i < NATT; i++) {
		CHECKF(tl_dropped(fd[i], 5000), "raw client %d was not dropped", i);
		close(fd[i]);
		printf("  raw client %d (%s): %zu bytes of the frame went out, dropped\n", i,
		       i < 2 ? "admitted" : "no srv_hello", sent[i]);
	}
	long r = kvd_rss();
	peak = r > peak ? r : peak;
	char last[512] = "";
	int drops = log_count("dropping", last, sizeof(last)) - drops0;
	uint64_t dropped = stat_of("clients_dropped") - dropped0;
	printf("  zl-kvd RSS %ld kB, peak %+ld kB; %" PRIu64 " honest put+get during; "
	       "clients_dropped +%" PRIu64 ", %d \"dropping\" log lines, last: %s\n",
	       rss0, peak - rss0, calls, dropped, drops, last);
	CHECKF(peak - rss0 < RSS6_KB, "zl-kvd's RSS grew by %ld kB", peak - rss0);
	CHECKF(dropped >= 2, "clients_dropped grew by %" PRIu64 ", expected 2", dropped);
	CHECKF(drops >= NATT, "%d \"dropping\" lines in zl-kvd's log for %d peers", drops, NATT);
	after_case(tr == TCP ? "class 6 (tcp)" : "class 6 (unix)", true);
}

/* ---- class 7: fragmented message totals ------------------------------- */

static void class7(uint64_t total)
{
	printf("class 7: a shm client's FIRST fragment announces %" PRIu64 " bytes\n", total);
	int drops0 = log_count("dropping client", NULL, 0);
	uint64_t dropped0 = stat_of("clients_dropped");
	long rss0 = kvd_rss(), vm0 = tl_status_kb(kvd_pid, "VmSize");
	struct raw_srv c;
	CHECK_OK(raw_srv_join(&c, urls[SHM], 65536, TMO));
	uint8_t p[64]; /* the total, then 56 bytes of it */
	tl_fill(p, sizeof(p), total);
	memcpy(p, &total, 8);
	raw_shm_put(&c.s, p, sizeof(p), ZL_REC_FIRST);
	CHECKF(tl_dropped(c.s.sock, 5000), "the raw client was not dropped");
	raw_srv_close(&c);
	check_alive("after the fragment");
	long rss1 = kvd_rss(), vm1 = tl_status_kb(kvd_pid, "VmSize");
	char last[512] = "";
	int drops = log_count("dropping client", last, sizeof(last)) - drops0;
	uint64_t dropped = stat_of("clients_dropped") - dropped0;
	printf("  dropped (clients_dropped +%" PRIu64 "); zl-kvd RSS %ld -> %ld kB, VmSize %ld "
	       "-> %ld kB; log: %s\n", dropped, rss0, rss1, vm0, vm1, last);
	CHECKF(dropped == 1, "clients_dropped grew by %" PRIu64, dropped);
	CHECKF(drops == 1, "%d \"dropping client\" lines", drops);
	CHECKF(rss1 - rss0 < RSS7_KB, "zl-kvd's RSS grew by %ld kB", rss1 - rss0);
	CHECKF(vm1 - vm0 < VM7_KB, "zl-kvd's VmSize grew by %ld kB", vm1 - vm0);
	after_case("class 7", true);
}

/* ---- the test, in a child ----------------------------------------------- */

static int run_cases(void *arg)
{
	(void)arg;
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int tr = 0; tr < NTR; tr++) { /* connected before every attack */
		before[tr] = kv_open(tr, NULL);
		kv_check(before[tr], false);
	}
	int64_t t0 = tl_now_us();
	class2(); /* first: its child is forked before any thread exists */
	class1();
	class3();
	class4(TCP); /* the reproducer */
	class4(UNIX);
	class5();
	class6(TCP);
	class6(UNIX);
	class7(16ull << 30);
	class7(1ull << 62);
	for (int tr = 0; tr < NTR; tr++)
		zl_kv_close(before[tr]);
	printf("all cases in %.1f s\n", (double)(tl_now_us() - t0) / 1e6);
	return T_EXIT_PASS;
}

/* ---- zl-kvd: start and stop --------------------------------------------- */

/* Start zl-kvd on every transport; its stdout through *outfd. */
static pid_t spawn_kvd(int *outfd)
{
	char shm[64], unx[160];
	snprintf(shm, sizeof(shm), "shm://zlkvh-%d", (int)getpid());
	snprintf(sockpath, sizeof(sockpath), "%s/kvd.sock", dir);
	snprintf(unx, sizeof(unx), "unix://%s", sockpath);
	char *args[] = { (char *)kvd, "--listen", shm, "--listen", "tcp://127.0.0.1:0",
			 "--listen", unx, NULL };
	int p[2];
	CHECK(!pipe(p));
	fflush(NULL);
	pid_t parent = getpid(), pid = fork();
	CHECK(pid >= 0);
	if (!pid) {
		prctl(PR_SET_PDEATHSIG, SIGTERM); /* also stopped if we are killed */
		if (getppid() != parent)
			_exit(127);
		dup2(p[1], 1);
		int e = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (e >= 0)
			dup2(e, 2);
		close(p[0]);
		unsetenv("ZL_LOG"); /* its log lines through its own handler, to stderr */
		execv(kvd, args);
		_exit(127);
	}
	close(p[1]);
	*outfd = p[0];
	return pid;
}

/* Read the "listening URL" lines; false if zl-kvd's stdout ended first. */
static bool read_urls(int fd)
{
	char buf[4096];
	size_t n = 0;
	int64_t end = tl_now_us() + 20000000;
	for (;;) {
		int lines = 0;
		for (size_t i = 0; i < n; i++)
			lines += buf[i] == '\n';
		if (lines >= NTR)
			break;
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int left = (int)((end - tl_now_us()) / 1000);
		CHECKF(left > 0 && poll(&pfd, 1, left) == 1, "zl-kvd printed no URLs in 20 s");
		ssize_t r = read(fd, buf + n, sizeof(buf) - 1 - n);
		CHECK(r >= 0);
		if (!r)
			return false;
		n += (size_t)r;
	}
	buf[n] = 0;
	char *line = buf;
	for (int tr = 0; tr < NTR; tr++) {
		char *nl = strchr(line, '\n');
		*nl = 0;
		CHECKF(!strncmp(line, "listening ", 10) &&
		       !strncmp(line + 10, tr_name[tr], strlen(tr_name[tr])),
		       "zl-kvd printed \"%s\"", line);
		snprintf(urls[tr], sizeof(urls[tr]), "%s", line + 10);
		line = nl + 1;
	}
	return true;
}

/* Wait for zl-kvd (up to timeout_ms, then SIGKILL): its exit code, 128 +
 * signal, or -1 if it had to be killed. */
static int reap_kvd(int timeout_ms)
{
	int rc = tl_wait_child(kvd_pid, timeout_ms);
	kvd_pid = 0;
	return rc;
}

static void show_log_tail(void)
{
	char *t = log_text();
	size_t n = strlen(t);
	fprintf(stderr, "---- zl-kvd stderr (%s), last part ----\n%s\n----\n", errfile,
		t + (n > 3000 ? n - 3000 : 0));
	free(t);
}

static void cleanup_files(void)
{
	unlink(sockpath);
	unlink(errfile);
	rmdir(dir);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 2) {
		fprintf(stderr, "usage: kv_hostile ZL-KVD\n");
		return T_EXIT_FAIL;
	}
	kvd = argv[1];
	if (access(kvd, X_OK))
		SKIP("zl-kvd cannot run here: %s: %s", kvd, strerror(errno));
	CHECK(mkdtemp(dir) && chmod(dir, 0777) == 0); /* 0777: class 2's nobody */
	snprintf(errfile, sizeof(errfile), "%s/kvd.err", dir);
	int outfd;
	kvd_pid = spawn_kvd(&outfd);
	if (!read_urls(outfd)) {
		int rc = reap_kvd(10000);
		show_log_tail();
		cleanup_files();
		if (rc == 127 || rc == 1) /* exec failed, or a listener cannot be set up */
			SKIP("zl-kvd cannot run here (exit %d, stderr above)", rc);
		FAIL("zl-kvd exited with %d before listening", rc);
	}
	close(outfd);
	printf("zl-kvd (pid %d) listening on %s %s %s; stderr in %s\n", (int)kvd_pid, urls[SHM],
	       urls[TCP], urls[UNIX], errfile);

	int64_t t0 = tl_now_us();
	pid_t worker = tl_fork(run_cases, NULL, 160);
	int wrc = tl_wait_child(worker, 165000);
	printf("cases: %s %d after %.1f s\n", wrc < 0 ? "timed out, killed" : "exit", wrc,
	       (double)(tl_now_us() - t0) / 1e6);

	/* always: SIGTERM, and zl-kvd must exit cleanly (0, its final line) */
	int st, krc;
	bool was_alive = waitpid(kvd_pid, &st, WNOHANG) == 0;
	if (was_alive) {
		kill(kvd_pid, SIGTERM);
		krc = reap_kvd(10000);
	} else {
		krc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	}
	char last[512] = "";
	bool final = log_count("zl-kvd: exit ", last, sizeof(last)) == 1;
	printf("zl-kvd: %s, %s %d; %s\n", was_alive ? "stopped with SIGTERM" : "was gone",
	       krc < 0 ? "still there 10 s later, SIGKILLed" : "exit", krc,
	       final ? last : "no final stats line");
	bool ok = wrc == 0 && was_alive && krc == 0 && final;
	if (!ok) {
		show_log_tail();
		printf("FAIL (zl-kvd's stderr kept in %s)\n", errfile);
		unlink(sockpath);
		return T_EXIT_FAIL;
	}
	cleanup_files();
	printf("PASS\n");
	return T_EXIT_PASS;
}
