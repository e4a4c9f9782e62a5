/* SPDX-License-Identifier: MIT */
/*
 * The one-sided store is linearizable per key (table.c's argument, checked
 * from outside): NPROC forked clients run random SET, GET and DELETE on
 * NKEYS keys for a bounded time against an in-process server with a tiny
 * table (long probe chains, cleanups under lock bits) and small regions
 * (the collector moves containers while clients read). Every operation is
 * logged with its invocation and response time (CLOCK_MONOTONIC, ns) in
 * memory shared before fork; afterwards the parent checks the history.
 *
 * Odd clients send their operations in batches of 1..8 (zl_kv_batch):
 * each logged with the batch's times, so they may take effect in any
 * order among themselves.
 *
 * Values identify their write: from 16 bytes on, a header (magic|writer,
 * per-writer seq, key, length) and a pattern seeded by all four, so a torn,
 * truncated or misdirected value is detected (by the reading child, which
 * logs what it saw); values of 0..15 bytes are a pattern of (key, length)
 * only, so the checker accepts any write of that key and length.
 *
 * The check, per key, with W the key's writes (successful SETs and
 * DELETEs; a SET or DELETE that failed with an error other than -ENOSPC
 * or -ENOENT counts as maybe applied, response at infinity; -ENOSPC means
 * nothing was written), and M(t) = the largest invocation among writes
 * that responded before t (a write certainly after every write that
 * ended before it began):
 *   - GET returning the value of SET w: w wrote this key, this length and
 *     this pattern, w.inv < get.resp, and not M(get.inv) > w.resp (no write
 *     w2 with w.resp < w2.inv and w2.resp < get.inv: w was certainly
 *     overwritten before the GET began);
 *   - GET returning -ENOENT (and DELETE returning -ENOENT): the initial
 *     absence (no write responded before the call began) or some DELETE d
 *     with d.inv < resp and d.resp >= M(inv) could be the latest write;
 *   - DELETE returning 0: likewise some SET could be the latest write.
 * Each check is O(log n) with writes sorted by response (prefix maximum of
 * invocations) and candidates sorted by invocation (prefix maximum of
 * responses). These are necessary conditions; when they hold, an exact
 * check follows (per key, which is enough: linearizability is local), a
 * sweep that keeps every reachable configuration (see exact_key). First,
 * in-process, the checker must flag synthetic histories with a stale read,
 * a stale absence, a read from the future, a torn value, a
 * deleted-then-read key, two DELETEs of one SET and a new-then-old pair of
 * reads, and pass their correct twins.
 *
 * The clients are forked before the server's threads exist: a lock
 * another thread holds at fork (the sanitizers' allocator's, for one)
 * stays locked in the child. They learn the URL through the shared page.
 */
#include <errno.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "os_lib.h"
#include "os_proto.h"

#define NPROC 4
#define NKEYS 8
#define CAP (1u << 20) /* records per process, at most */
#define HDR 16u
#define MAXLEN 2048u
#define MAGIC 0x4f534c00u /* "OSL" | writer */
#define INF INT64_MAX

enum { OP_GET = 1, OP_SET, OP_DEL };
enum { BAD_NONE, BAD_MAGIC, BAD_KEY, BAD_LEN, BAD_PATTERN };
static const char *bad_name[] = { "ok", "bad magic/writer", "value of another key",
				  "length differs from its header", "pattern broken" };

struct rec {
	int64_t inv, resp; /* ns */
	int32_t rc;
	uint32_t seq;     /* SET: its seq (from 1); GET: the value's */
	uint32_t len;     /* SET: written; GET: read */
	uint32_t aux;     /* GET with bad: first wrong byte / header word */
	uint8_t op, key;
	uint8_t writer;   /* SET: its writer; GET: the value's, 0xff short */
	uint8_t bad;      /* GET: BAD_* */
};

struct shared {
	char url[640]; /* the server's, once url_set */
	_Atomic uint32_t url_set, ready, go, n[NPROC];
	struct rec log[NPROC][CAP];
};

static char keys[NKEYS][16];
static size_t klens[NKEYS];

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- values ---------------------------------------------------------------- */

static uint64_t val_id(uint32_t writer, uint32_t seq, uint32_t key, uint32_t len)
{
	return ((uint64_t)writer << 56) ^ ((uint64_t)key << 48) ^ ((uint64_t)len << 32) ^ seq;
}

static uint64_t short_id(uint32_t key, uint32_t len)
{
	return 0x5e5e0000ull + key * 16 + len;
}

static void make_val(uint8_t *v, uint32_t writer, uint32_t seq, uint32_t key, uint32_t len)
{
	if (len < HDR) {
		tl_fill(v, len, short_id(key, len));
		return;
	}
	uint32_t h[4] = { MAGIC | writer, seq, key, len };
	memcpy(v, h, HDR);
	tl_fill(v + HDR, len - HDR, val_id(writer, seq, key, len));
}

/* Decode a value read for key into r (writer, seq, len, bad, aux). */
static void read_val(struct rec *r, const uint8_t *v, uint32_t len, uint32_t key)
{
	r->len = len;
	r->bad = BAD_NONE;
	if (len < HDR) {
		r->writer = 0xff;
		size_t b = tl_verify(v, len, short_id(key, len));
		if (b != (size_t)-1)
			r->bad = BAD_PATTERN, r->aux = (uint32_t)b;
		return;
	}
	uint32_t h[4];
	memcpy(h, v, HDR);
	r->writer = (uint8_t)(h[0] & 0xff);
	r->seq = h[1];
	if ((h[0] & ~0xffu) != MAGIC || (h[0] & 0xff) >= NPROC) {
		r->bad = BAD_MAGIC, r->aux = h[0];
	} else if (h[2] != key) {
		r->bad = BAD_KEY, r->aux = h[2];
	} else if (h[3] != len) {
		r->bad = BAD_LEN, r->aux = h[3];
	} else {
		size_t b = tl_verify(v + HDR, len - HDR, val_id(r->writer, h[1], key, len));
		if (b != (size_t)-1)
			r->bad = BAD_PATTERN, r->aux = (uint32_t)(b + HDR);
	}
}

/* ---- the checker ----------------------------------------------------------- */

struct hist {
	int nw;
	const struct rec *r[NPROC];
	uint32_t n[NPROC];
};

struct ev {
	int64_t inv, resp;
	const struct rec *r;
};

/* Events sorted by one time, with the prefix maximum of the other. */
struct idx {
	struct ev *e;
	int64_t *pmax;
	size_t n, cap;
};

static void idx_add(struct idx *x, int64_t inv, int64_t resp, const struct rec *r)
{
	if (x->n == x->cap) {
		x->cap = x->cap ? 2 * x->cap : 64;
		x->e = realloc(x->e, x->cap * sizeof(*x->e));
		CHECK(x->e);
	}
	x->e[x->n++] = (struct ev){ inv, resp, r };
}

static int by_resp(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;
	return x->resp < y->resp ? -1 : x->resp > y->resp;
}

static int by_inv(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;
	return x->inv < y->inv ? -1 : x->inv > y->inv;
}

/* resp_sorted: sort by resp, pmax of inv; else by inv, pmax of resp. */
static void idx_build(struct idx *x, bool resp_sorted)
{
	if (x->n)
		qsort(x->e, x->n, sizeof(*x->e), resp_sorted ? by_resp : by_inv);
	x->pmax = malloc((x->n + 1) * sizeof(int64_t));
	CHECK(x->pmax);
	int64_t m = INT64_MIN;
	for (size_t i = 0; i < x->n; i++) {
		int64_t v = resp_sorted ? x->e[i].inv : x->e[i].resp;
		if (v > m)
			m = v;
		x->pmax[i] = m;
	}
}

static void idx_free(struct idx *x)
{
	free(x->e);
	free(x->pmax);
	memset(x, 0, sizeof(*x));
}

/* The prefix maximum over the events whose sort time is < t (INT64_MIN:
 * none). */
static int64_t idx_before(const struct idx *x, int64_t t, bool resp_sorted)
{
	size_t lo = 0, hi = x->n; /* first index with time >= t */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int64_t v = resp_sorted ? x->e[mid].resp : x->e[mid].inv;
		if (v < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? x->pmax[lo - 1] : INT64_MIN;
}

struct key_ix {
	struct idx w;         /* writes by resp, pmax inv: M(t) */
	struct idx del;       /* deletes by inv, pmax resp */
	struct idx set;       /* sets by inv, pmax resp */
	struct idx shrt[HDR]; /* short sets of each length, by inv */
};

struct cstats {
	uint64_t ops, gets, sets, dels, checks, get_hit, get_miss, del_hit, del_miss;
	uint64_t enospc, eagain, other_err, exact;
	int first_err; /* an unexpected error code seen, 0: none */
};

static int64_t w_resp(const struct rec *r)
{
	return r->rc == 0 ? r->resp : INF; /* a failed write may have applied */
}

static const char *opname(int op)
{
	return op == OP_GET ? "GET" : op == OP_SET ? "SET" : op == OP_DEL ? "DEL" : "?";
}

static int fmt_rec(char *b, size_t n, const struct hist *h, const struct rec *r)
{
	int w = -1;
	for (int i = 0; i < h->nw; i++)
		if (r >= h->r[i] && r < h->r[i] + h->n[i])
			w = i;
	int64_t t0 = INT64_MAX;
	for (int i = 0; i < h->nw; i++)
		if (h->n[i] && h->r[i][0].inv < t0)
			t0 = h->r[i][0].inv;
	char val[48] = "";
	if (r->op != OP_DEL && !r->rc) {
		if (r->writer == 0xff)
			snprintf(val, sizeof(val), " (short value)");
		else
			snprintf(val, sizeof(val), " (value of client %u seq %u)", r->writer, r->seq);
	}
	return snprintf(b, n, "%s by client %d (op #%td) key %u at [%lld, %lld] ns, rc %d, len %u%s",
			opname(r->op), w, w >= 0 ? r - h->r[w] : (ptrdiff_t)-1, r->key,
			(long long)(r->inv - t0), (long long)(r->resp - t0), r->rc, r->len, val);
}

/* Describe a write that certainly follows w's response and precedes t. */
static void explain_over(char *why, size_t n, const struct hist *h, const struct key_ix *k,
			 int64_t after, int64_t before)
{
	const struct ev *best = NULL; /* the latest such write */
	for (size_t i = 0; i < k->w.n; i++) {
		const struct ev *e = &k->w.e[i];
		if (e->inv > after && e->resp < before && (!best || e->inv > best->inv))
			best = e;
	}
	if (best) {
		size_t l = strlen(why);
		snprintf(why + l, n - l, "; overwritten by ");
		l = strlen(why);
		fmt_rec(why + l, n - l, h, best->r);
	}
}

/* Can one of the candidates (sorted by inv, pmax resp) be the latest write
 * for a read [inv, resp] with M = m? */
static bool any_latest(const struct idx *c, int64_t resp, int64_t m)
{
	int64_t best = idx_before(c, resp, false);
	return best != INT64_MIN && best >= m;
}

/* ---- the exact check ----------------------------------------------------- */

/*
 * The checks above are necessary, not sufficient: two DELETEs that both
 * succeed after one SET, or a GET that sees a SET and a later GET that
 * sees the value before it, pass each op's own test. Linearizability is
 * local (Herlihy and Wing), so an exact check per key is an exact check of
 * the whole history: a sweep over the key's invocations and responses in
 * time order (invocations first on equal times), keeping every reachable
 * configuration (what the key holds, which pending operations have taken
 * effect); at a response, the operation must take effect in some
 * configuration, after any pending ones it needs (just-in-time
 * linearization; Lowe). With few processes the sets stay tiny. An
 * operation that failed with an error may or may not have taken effect:
 * it stays pending for good.
 */
enum { K_GET, K_SET, K_DEL };

struct kop {
	const struct rec *r;
	int32_t reads; /* GET: the SET read (its kop), -1 absent, -2 a short value */
	uint8_t kind;
	int8_t res; /* DELETE: 1 found, 0 absent, -1 unknown (failed) */
	bool open;  /* failed: never responds */
};

struct cfg {
	int32_t state; /* the SET whose value the key holds, -1 absent */
	uint64_t mask; /* pending slots that have taken effect */
};

static bool k_apply(const struct kop *ko, const struct kop *p, int32_t st, int32_t self,
		    int32_t *ns)
{
	switch (p->kind) {
	case K_SET:
		*ns = self;
		return true;
	case K_DEL:
		*ns = -1;
		return p->res < 0 || (p->res == 1) == (st >= 0);
	default:
		*ns = st;
		if (p->reads == -1)
			return st == -1;
		if (p->reads == -2)
			return st >= 0 && ko[st].r->len == p->r->len;
		return st == p->reads;
	}
}

static bool cfg_has(const struct cfg *c, size_t n, struct cfg x)
{
	for (size_t i = 0; i < n; i++)
		if (c[i].state == x.state && c[i].mask == x.mask)
			return true;
	return false;
}

struct cfgv {
	struct cfg *c;
	size_t n, cap;
};

static void cfg_push(struct cfgv *v, struct cfg x)
{
	if (v->n == v->cap) {
		v->cap = v->cap ? 2 * v->cap : 64;
		v->c = realloc(v->c, v->cap * sizeof(*v->c));
		CHECK(v->c);
	}
	v->c[v->n++] = x;
}

struct tix {
	int64_t t;
	int32_t i;
};

static int by_t(const void *a, const void *b)
{
	int64_t x = ((const struct tix *)a)->t, y = ((const struct tix *)b)->t;
	return x < y ? -1 : x > y;
}

#define MAX_CFG 4096 /* a handful in practice */

/* One key. 0 if linearizable, else 1 and why. *open_over: too many
 * operations that never responded to track (the check was not made). */
static int exact_key(const struct hist *h, const struct kop *ko, size_t n, char *why,
		     size_t whylen, bool *open_over)
{
	struct tix *byinv = malloc((n + 1) * sizeof(*byinv)), *byresp = malloc((n + 1) * sizeof(*byresp));
	CHECK(byinv && byresp);
	size_t nr = 0;
	for (size_t i = 0; i < n; i++) {
		byinv[i] = (struct tix){ ko[i].r->inv, (int32_t)i };
		if (!ko[i].open)
			byresp[nr++] = (struct tix){ ko[i].r->resp, (int32_t)i };
	}
	qsort(byinv, n, sizeof(*byinv), by_t);
	qsort(byresp, nr, sizeof(*byresp), by_t);
	int32_t slot_op[64];
	uint64_t used = 0;
	int32_t *slot_of = malloc((n + 1) * sizeof(int32_t));
	CHECK(slot_of);
	struct cfgv cur = { 0 }, nxt = { 0 }, seen = { 0 }, stack = { 0 };
	cfg_push(&cur, (struct cfg){ -1, 0 });
	int bad = 0;
	size_t a = 0, b = 0;
	while (!bad && b < nr) {
		if (a < n && byinv[a].t <= byresp[b].t) {
			int32_t o = byinv[a++].i;
			if (used == ~0ull) {
				*open_over = true;
				break;
			}
			int j = __builtin_ctzll(~used);
			used |= 1ull << j;
			slot_op[j] = o;
			slot_of[o] = j;
			continue;
		}
		int32_t o = byresp[b++].i;
		int j = slot_of[o];
		nxt.n = seen.n = stack.n = 0;
		for (size_t i = 0; i < cur.n; i++) {
			cfg_push(&stack, cur.c[i]);
			cfg_push(&seen, cur.c[i]);
		}
		while (stack.n && seen.n < MAX_CFG) {
			struct cfg c = stack.c[--stack.n];
			if (c.mask >> j & 1) {
				struct cfg d = { c.state, c.mask & ~(1ull << j) };
				if (!cfg_has(nxt.c, nxt.n, d))
					cfg_push(&nxt, d);
				continue;
			}
			for (uint64_t m = used & ~c.mask; m; m &= m - 1) {
				int p = __builtin_ctzll(m);
				struct cfg d = { 0, c.mask | 1ull << p };
				if (!k_apply(ko, &ko[slot_op[p]], c.state, slot_op[p], &d.state))
					continue;
				if (cfg_has(seen.c, seen.n, d))
					continue;
				cfg_push(&seen, d);
				cfg_push(&stack, d);
			}
		}
		if (seen.n >= MAX_CFG) {
			snprintf(why, whylen, "exact check: more than %d configurations", MAX_CFG);
			bad = 1;
			break;
		}
		used &= ~(1ull << j);
		if (!nxt.n) {
			char a1[256], a2[256] = "absent";
			fmt_rec(a1, sizeof(a1), h, ko[o].r);
			if (cur.c[0].state >= 0)
				fmt_rec(a2, sizeof(a2), h, ko[cur.c[0].state].r);
			int l = snprintf(why, whylen,
					 "not linearizable: %s cannot take effect in any order of "
					 "the operations pending with it; before them the key held "
					 "(one of %zu): %s; pending:",
					 a1, cur.n, a2);
			for (uint64_t m = used; m && l > 0 && (size_t)l < whylen; m &= m - 1) {
				fmt_rec(a1, sizeof(a1), h, ko[slot_op[__builtin_ctzll(m)]].r);
				l += snprintf(why + l, whylen - (size_t)l, " [%s]", a1);
			}
			bad = 1;
			break;
		}
		struct cfgv t = cur;
		cur = nxt;
		nxt = t;
	}
	free(cur.c);
	free(nxt.c);
	free(seen.c);
	free(stack.c);
	free(byinv);
	free(byresp);
	free(slot_of);
	return bad;
}

/* Every key; the SETs by (writer, seq) come from check(). */
static uint64_t exact_check(const struct hist *h, const struct rec **const *sets, char *why,
			    size_t whylen, uint64_t *nchecked, bool *skipped)
{
	int32_t *pos[NPROC] = { 0 };
	for (int w = 0; w < h->nw; w++) {
		pos[w] = malloc((h->n[w] + 1) * sizeof(int32_t));
		CHECK(pos[w]);
	}
	struct kop *ko = NULL;
	size_t cap = 0;
	uint64_t bad = 0;
	*nchecked = 0;
	*skipped = false;
	bool has[256] = { 0 };
	for (int w = 0; w < h->nw; w++)
		for (uint32_t i = 0; i < h->n[w]; i++)
			has[h->r[w][i].key] = true;
	for (int key = 0; key < 256 && !bad; key++) {
		size_t n = 0;
		if (!has[key])
			continue;
		for (int pass = 0; pass < 2; pass++) { /* SETs first: GETs name them */
			for (int w = 0; w < h->nw; w++) {
				for (uint32_t i = 0; i < h->n[w]; i++) {
					const struct rec *r = &h->r[w][i];
					if (r->key != key || (r->op == OP_SET) != (pass == 0))
						continue;
					if (n == cap) {
						cap = cap ? 2 * cap : 1024;
						ko = realloc(ko, cap * sizeof(*ko));
						CHECK(ko);
					}
					struct kop k = { .r = r, .open = r->rc && r->rc != -ENOENT };
					if (r->op == OP_SET) {
						if (r->rc == -ENOSPC)
							continue;
						k.kind = K_SET;
						pos[w][i] = (int32_t)n;
					} else if (r->op == OP_DEL) {
						k.kind = K_DEL;
						k.res = k.open ? -1 : r->rc == 0;
					} else {
						if (r->rc && r->rc != -ENOENT)
							continue; /* no answer: no constraint */
						k.kind = K_GET;
						if (r->rc)
							k.reads = -1;
						else if (r->writer == 0xff)
							k.reads = -2;
						else {
							/* check() made sure the SET exists */
							const struct rec *sr = sets[r->writer][r->seq];
							k.reads = pos[r->writer][sr - h->r[r->writer]];
						}
					}
					ko[n++] = k;
				}
			}
		}
		if (!n)
			continue;
		bool over = false;
		bad += (uint64_t)exact_key(h, ko, n, why, whylen, &over);
		*skipped |= over;
		*nchecked += n;
	}
	free(ko);
	for (int w = 0; w < h->nw; w++)
		free(pos[w]);
	return bad;
}

/* Check a history; 0 if linearizable per key, else the number of
 * violations, the first described in why. */
static uint64_t check(const struct hist *h, struct cstats *st, char *why, size_t whylen)
{
	uint64_t bad = 0;
	why[0] = 0;
	memset(st, 0, sizeof(*st));
	struct key_ix *kx = calloc(256, sizeof(*kx));
	const struct rec **sets[NPROC] = { 0 };
	uint32_t nsets[NPROC] = { 0 };
	CHECK(kx);
#define VIOLATION(...)                                                         \
	do {                                                                   \
		if (!bad++)                                                    \
			snprintf(why, whylen, __VA_ARGS__);                    \
	} while (0)

	/* writes per key; SETs by (writer, seq) */
	for (int w = 0; w < h->nw; w++) {
		sets[w] = calloc(h->n[w] + 2, sizeof(*sets[w]));
		CHECK(sets[w]);
		for (uint32_t i = 0; i < h->n[w]; i++) {
			const struct rec *r = &h->r[w][i];
			struct key_ix *k = &kx[r->key];
			st->ops++;
			if (r->op == OP_SET) {
				st->sets++;
				if (r->seq != ++nsets[w])
					VIOLATION("log: SET seq %u of client %d, expected %u",
						  r->seq, w, nsets[w]);
				sets[w][r->seq] = r;
				if (r->rc == -ENOSPC) {
					st->enospc++;
					continue; /* nothing written */
				}
				idx_add(&k->w, r->inv, w_resp(r), r);
				idx_add(&k->set, r->inv, w_resp(r), r);
				if (r->len < HDR)
					idx_add(&k->shrt[r->len], r->inv, w_resp(r), r);
			} else if (r->op == OP_DEL) {
				st->dels++;
				if (r->rc == -ENOENT)
					continue;
				idx_add(&k->w, r->inv, w_resp(r), r);
				idx_add(&k->del, r->inv, w_resp(r), r);
			} else {
				st->gets++;
				continue;
			}
			if (r->rc && r->rc != -ENOENT && r->rc != -ENOSPC) {
				if (r->rc == -EAGAIN) {
					st->eagain++;
				} else {
					st->other_err++;
					if (!st->first_err)
						st->first_err = r->rc;
				}
			}
		}
	}
	for (int k = 0; k < 256; k++) {
		idx_build(&kx[k].w, true);
		idx_build(&kx[k].del, false);
		idx_build(&kx[k].set, false);
		for (unsigned l = 0; l < HDR; l++)
			idx_build(&kx[k].shrt[l], false);
	}

	char a[256], b[256];
	for (int w = 0; w < h->nw; w++) {
		for (uint32_t i = 0; i < h->n[w]; i++) {
			const struct rec *r = &h->r[w][i];
			const struct key_ix *k = &kx[r->key];
			if (r->op == OP_SET)
				continue;
			bool is_get = r->op == OP_GET;
			if (r->rc && r->rc != -ENOENT) {
				if (is_get && r->rc != -EAGAIN)
					VIOLATION("%s failed: %s",
						  (fmt_rec(a, sizeof(a), h, r), a),
						  zl_strerror(r->rc));
				if (is_get && r->rc == -EAGAIN)
					st->eagain++;
				continue;
			}
			/* M: the latest invocation of a write done before r began */
			int64_t m = idx_before(&k->w, r->inv, true);
			st->checks++;
			if (r->rc == -ENOENT) {
				*(is_get ? &st->get_miss : &st->del_miss) += 1;
				/* the initial absence, or a DELETE, may be the latest */
				if (m == INT64_MIN || any_latest(&k->del, r->resp, m))
					continue;
				fmt_rec(a, sizeof(a), h, r);
				VIOLATION("stale absence: %s, but no DELETE can be the latest write "
					  "(a write responded before it began)", a);
				if (bad == 1)
					explain_over(why, whylen, h, k, INT64_MIN, r->inv);
				continue;
			}
			if (!is_get) { /* DELETE 0: some SET may be the latest */
				st->del_hit++;
				if (any_latest(&k->set, r->resp, m))
					continue;
				fmt_rec(a, sizeof(a), h, r);
				VIOLATION("DELETE found a key no SET can have written last: %s", a);
				continue;
			}
			st->get_hit++;
			if (r->bad) {
				fmt_rec(a, sizeof(a), h, r);
				VIOLATION("torn or misdirected value: %s: %s (%u, 0x%x)", a,
					  bad_name[r->bad < 5 ? r->bad : 0], r->aux, r->aux);
				continue;
			}
			if (r->writer == 0xff) { /* short: any SET of this length */
				if (r->len < HDR && any_latest(&k->shrt[r->len], r->resp, m))
					continue;
				fmt_rec(a, sizeof(a), h, r);
				VIOLATION("stale or unwritten short value: %s: no SET of length %u "
					  "can be the latest write", a, r->len);
				continue;
			}
			const struct rec *s = r->writer < h->nw && r->seq <= nsets[r->writer]
						      ? sets[r->writer][r->seq]
						      : NULL;
			const char *what = !s ? NULL
					   : s->key != r->key || s->len != r->len
						   ? "%s read the value of another SET: %s"
					   : s->rc == -ENOSPC
						   ? "%s read the value of a SET that failed with -ENOSPC: %s"
					   : s->inv >= r->resp ? "read from the future: %s read the value of %s"
					   : m > w_resp(s)     ? "stale read: %s returned the value of %s"
							       : "";
			if (what && !*what)
				continue; /* fine */
			fmt_rec(a, sizeof(a), h, r);
			if (!s) {
				VIOLATION("%s read a value no SET wrote (client %u seq %u)", a,
					  r->writer, r->seq);
				continue;
			}
			fmt_rec(b, sizeof(b), h, s);
			VIOLATION(what, a, b);
			if (bad == 1 && !strncmp(what, "stale", 5))
				explain_over(why, whylen, h, k, w_resp(s), r->inv);
		}
	}
#undef VIOLATION
	if (!bad) {
		bool skipped;
		bad = exact_check(h, (const struct rec **const *)sets, why, whylen, &st->exact,
				  &skipped);
		if (skipped)
			printf("exact check: too many operations without a response, not made\n");
	}
	for (int k = 0; k < 256; k++) {
		idx_free(&kx[k].w);
		idx_free(&kx[k].del);
		idx_free(&kx[k].set);
		for (unsigned l = 0; l < HDR; l++)
			idx_free(&kx[k].shrt[l]);
	}
	for (int w = 0; w < h->nw; w++)
		free(sets[w]);
	free(kx);
	return bad;
}

/* ---- the checker can fail ---------------------------------------------- */

static struct rec R(uint8_t op, uint8_t key, int64_t inv, int64_t resp, int rc, uint8_t writer,
		    uint32_t seq, uint32_t len)
{
	return (struct rec){ .op = op, .key = key, .inv = inv, .resp = resp, .rc = rc,
			     .writer = writer, .seq = seq, .len = len };
}

static uint64_t check2(struct rec *c0, uint32_t n0, struct rec *c1, uint32_t n1, char *why)
{
	struct hist h = { .nw = 2, .r = { c0, c1 }, .n = { n0, n1 } };
	struct cstats st;
	return check(&h, &st, why, 512);
}

static void self_check(void)
{
	char why[512];
	/* client 0 writes key 3: seq 1 at [10, 20], seq 2 at [30, 40]; client 1
	 * reads. Values of 100 bytes (identified). */
	struct rec c0[4] = { R(OP_SET, 3, 10, 20, 0, 0, 1, 100), R(OP_SET, 3, 30, 40, 0, 0, 2, 100) };
	struct rec c1[4];
	struct {
		struct rec get;
		bool ok;
		const char *what;
	} cases[] = {
		{ R(OP_GET, 3, 50, 60, 0, 0, 2, 100), true, "latest" },
		{ R(OP_GET, 3, 25, 35, 0, 0, 1, 100), true, "concurrent, old" },
		{ R(OP_GET, 3, 25, 35, 0, 0, 2, 100), true, "concurrent, new" },
		{ R(OP_GET, 3, 5, 15, -ENOENT, 0, 0, 0), true, "absent, concurrent with the first" },
		{ R(OP_GET, 3, 50, 60, 0, 0, 1, 100), false, "stale read" },
		{ R(OP_GET, 3, 21, 29, -ENOENT, 0, 0, 0), false, "stale absence" },
		{ R(OP_GET, 3, 2, 8, 0, 0, 1, 100), false, "read from the future" },
		{ R(OP_GET, 4, 50, 60, 0, 0, 2, 100), false, "another key's value" },
		{ R(OP_GET, 3, 50, 60, 0, 0, 2, 99), false, "another length" },
		{ R(OP_GET, 3, 50, 60, 0, 0, 3, 100), false, "a value never written" },
		{ R(OP_GET, 3, 50, 60, -EBADMSG, 0, 0, 0), false, "GET error" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		c1[0] = cases[i].get;
		uint64_t v = check2(c0, 2, c1, 1, why);
		CHECKF(!v == cases[i].ok, "self-check \"%s\": %llu violations (%s)", cases[i].what,
		       (unsigned long long)v, why);
		if (!cases[i].ok)
			printf("self-check: %-28s flagged: %s\n", cases[i].what, why);
	}
	/* torn (as the reading child logs it) */
	c1[0] = R(OP_GET, 3, 50, 60, 0, 0, 2, 100);
	c1[0].bad = BAD_PATTERN;
	c1[0].aux = 77;
	CHECK(check2(c0, 2, c1, 1, why) == 1);
	printf("self-check: %-28s flagged: %s\n", "torn value", why);
	/* deletes: DEL at [41, 45] after seq 2; then a GET at [50, 60] */
	c0[2] = R(OP_DEL, 3, 41, 45, 0, 0, 0, 0);
	c1[0] = R(OP_GET, 3, 50, 60, -ENOENT, 0, 0, 0);
	CHECKF(check2(c0, 3, c1, 1, why) == 0, "self-check: absent after DEL: %s", why);
	c1[0] = R(OP_GET, 3, 43, 60, 0, 0, 2, 100);
	CHECKF(check2(c0, 3, c1, 1, why) == 0, "self-check: concurrent with DEL: %s", why);
	c1[0] = R(OP_GET, 3, 50, 60, 0, 0, 2, 100);
	CHECK(check2(c0, 3, c1, 1, why) == 1);
	printf("self-check: %-28s flagged: %s\n", "read after DELETE", why);
	c1[0] = R(OP_DEL, 3, 50, 60, 0, 0, 0, 0);
	CHECK(check2(c0, 3, c1, 1, why) == 1);
	printf("self-check: %-28s flagged: %s\n", "DELETE after DELETE", why);
	/* a SET after the DEL: absent is stale again */
	c0[3] = R(OP_SET, 3, 46, 48, 0, 0, 3, 5);
	c1[0] = R(OP_GET, 3, 50, 60, -ENOENT, 0, 0, 0);
	CHECK(check2(c0, 4, c1, 1, why) == 1);
	printf("self-check: %-28s flagged: %s\n", "absent after SET", why);
	/* short values: any SET of that length of the key */
	c1[0] = R(OP_GET, 3, 50, 60, 0, 0xff, 0, 5);
	CHECKF(check2(c0, 4, c1, 1, why) == 0, "self-check: short value: %s", why);
	c1[0] = R(OP_GET, 3, 50, 60, 0, 0xff, 0, 6);
	CHECK(check2(c0, 4, c1, 1, why) == 1);
	printf("self-check: %-28s flagged: %s\n", "short value never written", why);
	/* a SET that failed (not -ENOSPC) may have been applied */
	c0[3].rc = -EAGAIN;
	c1[0] = R(OP_GET, 3, 50, 60, 0, 0xff, 0, 5);
	CHECKF(check2(c0, 4, c1, 1, why) == 0, "self-check: maybe-applied SET: %s", why);
	c0[3].rc = -ENOSPC;
	c1[0] = R(OP_GET, 3, 50, 60, 0, 0xff, 0, 5);
	CHECK(check2(c0, 4, c1, 1, why) == 1);

	/* what only the exact check sees: two DELETEs of one SET, and a GET
	 * that sees the value of a SET after another GET saw the absence the
	 * SET ended... and the other way round */
	c0[0] = R(OP_SET, 3, 10, 20, 0, 0, 1, 100);
	c0[1] = R(OP_DEL, 3, 30, 50, 0, 0, 0, 0);
	c1[0] = R(OP_DEL, 3, 35, 45, 0, 0, 0, 0);
	CHECK(check2(c0, 2, c1, 1, why) == 1 && strstr(why, "not linearizable"));
	printf("self-check: %-28s flagged: %s\n", "two DELETEs of one SET", why);
	c1[0].rc = -ENOENT;
	CHECKF(check2(c0, 2, c1, 1, why) == 0, "self-check: DELETE, DELETE absent: %s", why);
	c0[0] = R(OP_SET, 3, 10, 50, 0, 0, 1, 100);
	c1[0] = R(OP_GET, 3, 20, 25, 0, 0, 1, 100);
	c1[1] = R(OP_GET, 3, 30, 35, -ENOENT, 0, 0, 0);
	CHECK(check2(c0, 1, c1, 2, why) == 1 && strstr(why, "not linearizable"));
	printf("self-check: %-28s flagged: %s\n", "new, then old", why);
	c1[0] = R(OP_GET, 3, 20, 25, -ENOENT, 0, 0, 0);
	c1[1] = R(OP_GET, 3, 30, 35, 0, 0, 1, 100);
	CHECKF(check2(c0, 1, c1, 2, why) == 0, "self-check: old, then new: %s", why);

	/* the reader's decoding catches a flipped byte, a wrong key, a cut */
	uint8_t v[600];
	struct rec r;
	make_val(v, 2, 9, 5, 600);
	read_val(&r, v, 600, 5);
	CHECK(!r.bad && r.writer == 2 && r.seq == 9 && r.len == 600);
	read_val(&r, v, 599, 5);
	CHECK(r.bad == BAD_LEN);
	read_val(&r, v, 600, 4);
	CHECK(r.bad == BAD_KEY);
	v[300] ^= 1;
	read_val(&r, v, 600, 5);
	CHECK(r.bad == BAD_PATTERN && r.aux == 300);
	make_val(v, 2, 9, 5, 7);
	read_val(&r, v, 7, 5);
	CHECK(!r.bad && r.writer == 0xff);
	read_val(&r, v, 7, 6);
	CHECK(r.bad == BAD_PATTERN);
	printf("self-check: ok\n");
}

/* ---- the clients ----------------------------------------------------------- */

static uint32_t rand_len(struct tl_rng *g)
{
	uint64_t p = tl_rand_below(g, 100);
	if (p < 6)
		return (uint32_t)tl_rand_below(g, HDR);
	if (p < 36)
		return HDR + (uint32_t)tl_rand_below(g, 113);
	return HDR + (uint32_t)tl_rand_below(g, MAXLEN - HDR + 1);
}

/* 1..8 random operations through one zl_kv_batch, logged from n on, each
 * with the batch's invocation and response: they overlap, so the check
 * allows them any order among themselves. The new n. */
static uint32_t batch(zl_kv *kv, struct rec *log, uint32_t n, int id, uint32_t *seq,
		      struct tl_rng *g)
{
	static uint8_t vals[8][MAXLEN], outs[8][MAXLEN];
	struct zl_kv_op o[8];
	uint32_t m = 1 + (uint32_t)tl_rand_below(g, 8);
	if (m > CAP - n)
		m = CAP - n;
	for (uint32_t i = 0; i < m; i++) {
		struct rec *r = &log[n + i];
		uint32_t k = (uint32_t)tl_rand_below(g, NKEYS);
		uint64_t p = tl_rand_below(g, 100);
		*r = (struct rec){ .key = (uint8_t)k };
		o[i] = (struct zl_kv_op){ .key = keys[k], .klen = klens[k] };
		if (p < 50) {
			r->op = OP_GET;
			o[i].op = ZL_KV_OP_GET;
			o[i].buf = outs[i];
			o[i].cap = MAXLEN;
		} else if (p < 85) {
			r->op = OP_SET;
			r->writer = (uint8_t)id;
			r->seq = ++*seq;
			r->len = rand_len(g);
			make_val(vals[i], (uint32_t)id, r->seq, k, r->len);
			o[i].op = ZL_KV_OP_PUT;
			o[i].val = vals[i];
			o[i].vlen = r->len;
		} else {
			r->op = OP_DEL;
			o[i].op = ZL_KV_OP_DEL;
		}
	}
	int64_t inv = now_ns();
	int rc = zl_kv_batch(kv, o, m, OST_TMO);
	int64_t resp = now_ns();
	CHECKF(rc == 0, "zl_kv_batch of %u: %s", m, zl_strerror(rc));
	for (uint32_t i = 0; i < m; i++) {
		struct rec *r = &log[n + i];
		r->inv = inv;
		r->resp = resp;
		r->rc = o[i].rc;
		if (r->op == OP_GET && !r->rc)
			read_val(r, outs[i], (uint32_t)o[i].vlen, r->key);
	}
	return n + m;
}

static void client(struct shared *sh, int id, uint64_t seed, int64_t run_ns)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	tl_watchdog(60);
	for (int64_t t = tl_now_us(); !atomic_load(&sh->url_set); tl_sleep_us(1000))
		CHECKF(tl_now_us() - t < 20000000, "client %d: no server after 20 s", id);
	zl_kv *kv = NULL;
	int rc = zl_kv_connect(sh->url, NULL, OST_TMO, &kv);
	CHECKF(rc == 0, "client %d: zl_kv_connect(%s): %s", id, sh->url, zl_strerror(rc));
	struct tl_rng g = { seed * 31 + (uint64_t)id };
	uint8_t *val = malloc(MAXLEN);
	CHECK(val);
	atomic_fetch_add(&sh->ready, 1);
	for (int64_t t = tl_now_us(); !atomic_load(&sh->go); tl_sleep_us(100))
		CHECKF(tl_now_us() - t < 20000000, "client %d: no start", id);
	struct rec *log = sh->log[id];
	uint32_t seq = 0, n = 0;
	int64_t end = now_ns() + run_ns;
	while (n < CAP) {
		int64_t t = now_ns();
		if (t >= end)
			break;
		if (id & 1) { /* odd clients: batches */
			n = batch(kv, log, n, id, &seq, &g);
			atomic_store_explicit(&sh->n[id], n, memory_order_release);
			continue;
		}
		struct rec *r = &log[n];
		uint32_t k = (uint32_t)tl_rand_below(&g, NKEYS);
		uint64_t p = tl_rand_below(&g, 100);
		*r = (struct rec){ .key = (uint8_t)k };
		if (p < 50) {
			const void *v = NULL;
			size_t vl = 0;
			r->op = OP_GET;
			r->inv = now_ns();
			r->rc = zl_kv_get(kv, keys[k], klens[k], &v, &vl, NULL, OST_TMO);
			r->resp = now_ns();
			if (!r->rc)
				read_val(r, v, (uint32_t)vl, k);
		} else if (p < 85) {
			r->op = OP_SET;
			r->writer = (uint8_t)id;
			r->seq = ++seq;
			r->len = rand_len(&g);
			make_val(val, (uint32_t)id, seq, k, r->len);
			r->inv = now_ns();
			r->rc = zl_kv_put(kv, keys[k], klens[k], val, r->len, OST_TMO);
			r->resp = now_ns();
		} else {
			r->op = OP_DEL;
			r->inv = now_ns();
			r->rc = zl_kv_del(kv, keys[k], klens[k], OST_TMO);
			r->resp = now_ns();
		}
		atomic_store_explicit(&sh->n[id], ++n, memory_order_release);
	}
	free(val);
	zl_kv_close(kv);
	tl_exit(0);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tl_watchdog(120);
	self_check();
	for (int k = 0; k < NKEYS; k++)
		klens[k] = (size_t)snprintf(keys[k], sizeof(keys[k]), "lin/%d", k);
	uint64_t seed = tl_seed();
	int64_t run_ns = 1500 * 1000000ll; /* sanitizers: fewer operations in it */

	/* the clients first: fork only while this process has one thread (a
	 * lock another thread holds at fork, such as the sanitizers'
	 * allocator's, stays locked in the child) */
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (sh == MAP_FAILED)
		SKIP("mmap of %zu MiB shared: %s", sizeof(*sh) >> 20, strerror(errno));
	pid_t pids[NPROC];
	fflush(NULL);
	for (int i = 0; i < NPROC; i++) {
		pids[i] = fork();
		CHECK(pids[i] >= 0);
		if (!pids[i])
			client(sh, i, seed, run_ns);
	}

	/* a tiny table (long chains; a cleanup at every scan, once a second)
	 * and small regions (collections under the readers) */
	struct zl_kvos_opts o;
	zl_kvos_opts_init(&o);
	o.mem = 16u << 20;
	o.region_len = 256u << 10;
	o.max_regions = 2;
	o.nslots = 16;
	o.hb_window_us = 200000; /* heartbeats tell deletes: cleanups */
	struct ost_server s;
	ost_start(&s, &o);
	snprintf(sh->url, sizeof(sh->url), "%s", s.url);
	atomic_store(&sh->url_set, 1);
	for (int64_t t = tl_now_us(); atomic_load(&sh->ready) < NPROC; tl_sleep_us(1000))
		CHECKF(tl_now_us() - t < 20000000, "clients not connected after 20 s (%u of %d)",
		       atomic_load(&sh->ready), NPROC);
	int64_t t0 = now_ns();
	atomic_store(&sh->go, 1);
	int failed = 0;
	for (int i = 0; i < NPROC; i++) {
		int st = 0;
		int64_t w0 = tl_now_us();
		pid_t p;
		while ((p = waitpid(pids[i], &st, WNOHANG)) == 0 && tl_now_us() - w0 < 60000000)
			tl_sleep_us(2000);
		if (p != pids[i]) {
			kill(pids[i], SIGKILL);
			waitpid(pids[i], &st, 0);
			fprintf(stderr, "client %d did not finish in 60 s\n", i);
			failed = 1;
		} else if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "client %d: %s %d\n", i,
				WIFEXITED(st) ? "exit" : "signal",
				WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			failed = 1;
		}
	}
	double secs = (double)(now_ns() - t0) / 1e9;
	struct hist h = { .nw = NPROC };
	uint64_t total = 0;
	for (int i = 0; i < NPROC; i++) {
		h.r[i] = sh->log[i];
		h.n[i] = atomic_load(&sh->n[i]);
		total += h.n[i];
	}
	if (failed)
		FAIL("a client failed (see above); %llu operations logged",
		     (unsigned long long)total);

	/* the server's side of it */
	struct os_stats_rep sr = { 0 };
	zl_client *cli = NULL;
	if (!zl_client_connect(s.plain, NULL, OST_TMO, &cli)) {
		const void *p;
		size_t n;
		if (!zl_call(cli, OS_STATS, "", 0, &p, &n, OST_TMO) && n == sizeof(sr))
			memcpy(&sr, p, sizeof(sr));
		zl_client_close(cli);
	}
	struct cstats st;
	char why[2048];
	int64_t c0 = now_ns();
	uint64_t bad = check(&h, &st, why, sizeof(why));
	double csecs = (double)(now_ns() - c0) / 1e9;
	printf("%d clients, %d keys: %llu ops in %.2f s (%.0f ops/s): %llu GET (%llu hit, %llu "
	       "absent), %llu SET (%llu -ENOSPC), %llu DEL (%llu hit, %llu absent); "
	       "%llu -EAGAIN, %llu other errors\n",
	       NPROC, NKEYS, (unsigned long long)st.ops, secs, (double)st.ops / secs,
	       (unsigned long long)st.gets, (unsigned long long)st.get_hit,
	       (unsigned long long)st.get_miss, (unsigned long long)st.sets,
	       (unsigned long long)st.enospc, (unsigned long long)st.dels,
	       (unsigned long long)st.del_hit, (unsigned long long)st.del_miss,
	       (unsigned long long)st.eagain, (unsigned long long)st.other_err);
	printf("server: %llu collections (%llu copies), %llu cleanups (%llu moved), %llu scans\n",
	       (unsigned long long)sr.gc_runs, (unsigned long long)sr.gc_copied,
	       (unsigned long long)sr.cleanups, (unsigned long long)sr.cleanup_moved,
	       (unsigned long long)sr.scans);
	printf("checked %llu reads and DELETEs against the history, then %llu operations "
	       "exactly, in %.2f s\n",
	       (unsigned long long)st.checks, (unsigned long long)st.exact, csecs);
	if (bad)
		FAIL("%llu violations; the first: %s (seed %llu)", (unsigned long long)bad, why,
		     (unsigned long long)seed);
	CHECKF(st.other_err == 0, "%llu operations failed with unexpected errors, first %s",
	       (unsigned long long)st.other_err, zl_strerror(st.first_err));
	CHECKF(st.get_hit && st.get_miss && st.del_hit && st.sets > st.enospc,
	       "the history is too thin to mean anything");
	munmap(sh, sizeof(*sh));
	ost_stop(&s);
	printf("os_lin: ok\n");
	return 0;
}
