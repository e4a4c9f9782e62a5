/* SPDX-License-Identifier: MIT */
/*
 * zl_client: calls to a zl_server (wire formats in wire.h).
 *
 * A call takes a free slot, writes the request (on shm straight into the
 * slot in our page; on rdma by two WRITEs through the windows the server
 * gave us, slot first, then the flag; elsewhere as one channel message),
 * and the reply comes
 * back on the channel carrying the slot and its sequence number. A reply
 * is read in place (zl_recv_peek) and released by the next call.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clock.h"
#include "ringchan.h"
#include "server.h"
#include "sockutil.h"

enum { SLOT_FREE, SLOT_BUSY, SLOT_ABANDONED };

struct zl_client {
	zl_channel *ch;
	bool mbox, rmbox, asym, peeked;
	int err;                 /* sticky: the connection is unusable */
	uint32_t slots, slot_size;
	uint64_t max_req;
	uint64_t busy;           /* bit k: slot k in flight */
	uint32_t nabandoned;     /* slots of calls that timed out */
	uint8_t *page;
	size_t page_len;
	uint8_t *flags_map;
	size_t flags_len;
	_Atomic uint8_t *flags;  /* our K flags */
	/* rdma: requests are built in rbuf (K slots, then K flag bytes) */
	uint8_t *rbuf;
	struct zl_rmem *rm;
	struct zl_rwin w_slots, w_flags;
	uint32_t seq[SRV_MAX_SLOTS];
	uint8_t state[SRV_MAX_SLOTS];
	uint8_t *buf;            /* fragmented replies */
	size_t buf_cap;
	uint8_t *sbuf;           /* requests not built in place */
	size_t sbuf_cap;
};

static int mbox_attach(struct zl_client *c, const struct srv_welcome *w, int fds[2])
{
	c->flags_len = w->flags_len;
	c->page_len = w->page_len;
	if ((uint64_t)w->flag_base + w->slots > w->flags_len ||
	    w->page_len < srv_page_len(w->slots, w->slot_size) ||
	    zl_memfd_check(fds[0], c->flags_len) || zl_memfd_check(fds[1], c->page_len))
		return -EPROTO;
	c->flags_map = mmap(NULL, c->flags_len, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	if (c->flags_map == MAP_FAILED) {
		c->flags_map = NULL;
		return -errno;
	}
	c->page = mmap(NULL, c->page_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		       fds[1], 0);
	if (c->page == MAP_FAILED) {
		c->page = NULL;
		return -errno;
	}
	c->flags = (_Atomic uint8_t *)(c->flags_map + w->flag_base);
	c->asym = (w->flags & SRV_F_MEMBARRIER) && zl_membarrier_register();
	return 0;
}

static int rmbox_attach(struct zl_client *c, const struct srv_welcome *w)
{
	size_t slots_len = (size_t)w->slots * w->slot_size;
	if (!c->ch->os || w->slots_win.len != slots_len || w->flags_win.len != w->slots)
		return -EPROTO;
	c->w_slots = (struct zl_rwin){ w->slots_win.addr, w->slots_win.rkey, w->slots_win.len };
	c->w_flags = (struct zl_rwin){ w->flags_win.addr, w->flags_win.rkey, w->flags_win.len };
	size_t n = srv_round_up(slots_len + w->slots, 4096);
	c->rbuf = aligned_alloc(4096, n);
	if (!c->rbuf)
		return -ENOMEM;
	memset(c->rbuf, 0, n);
	return c->ch->os->reg(c->ch, c->rbuf, n, &c->rm);
}

static int welcome(struct zl_client *c, int64_t deadline, int64_t timeout_us)
{
	struct srv_welcome w;
	size_t n = 0;
	int fds[2] = { -1, -1 }, nf = 0;
	int shm = zl_shm_sock(c->ch);
	int r;
	do /* on shm, skip wake-up records that came before the welcome */
		r = shm >= 0 ? zl_recv_fds(shm, &w, sizeof(w), &n, fds, 2, &nf, deadline)
			     : zl_recv(c->ch, &w, sizeof(w), &n, timeout_us);
	while (shm >= 0 && !r && n == 1 && nf == 0);
	if (r == -EMSGSIZE || (!r && (n != sizeof(w) || w.magic != SRV_MAGIC ||
				      w.size != sizeof(w) || w.version != SRV_VERSION)))
		r = -EPROTO;
	if (!r && w.status)
		r = w.status < 0 && w.status > -4096 ? w.status : -EPROTO;
	if (!r && (w.slots < 1 || w.slots > SRV_MAX_SLOTS || w.slot_size < 64 ||
		   w.slot_size % 64 || w.slot_size > 65536 || !w.max_req ||
		   ((w.flags & SRV_F_MBOX) != 0) != (shm >= 0) || (shm >= 0 && nf != 2) ||
		   ((w.flags & SRV_F_RMBOX) && shm >= 0)))
		r = -EPROTO;
	if (!r) {
		c->slots = w.slots;
		c->slot_size = w.slot_size;
		c->max_req = w.max_req;
		c->mbox = shm >= 0;
		c->rmbox = w.flags & SRV_F_RMBOX;
		if (c->mbox)
			r = mbox_attach(c, &w, fds);
		else if (c->rmbox)
			r = rmbox_attach(c, &w);
	}
	for (int i = 0; i < nf; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (r == -EPROTO)
		ZL_LOG(ZL_LOG_ERROR, "client: the peer is not a compatible zl_server");
	return r;
}

zl_channel *zl_client_channel(const zl_client *cli) { return cli->ch; }

ZL_API int zl_client_connect(const char *url, const struct zl_opts *opts, int64_t timeout_us,
			     zl_client **out)
{
	if (!out)
		return -EINVAL;
	int64_t deadline = zl_deadline(timeout_us);
	struct zl_opts o;
	zl_opts_init(&o);
	o.ring_size = 256 * 1024; /* replies; ring= in the URL overrides */
	struct zl_client *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	int r = zl_connect(url, opts ? opts : &o, timeout_us, &c->ch);
	if (!r) {
		struct srv_hello h = { .magic = SRV_MAGIC, .version = SRV_VERSION,
				       .size = sizeof(h),
				       .flags = zl_membarrier_register() ? SRV_F_MEMBARRIER : 0 };
		r = zl_send(c->ch, &h, sizeof(h), timeout_us);
	}
	if (!r)
		r = welcome(c, deadline, deadline == ZL_NEVER ? -1 : deadline - zl_now_us());
	if (r) {
		zl_client_close(c);
		return r == -EAGAIN ? -ETIMEDOUT : r;
	}
	*out = c;
	return 0;
}

ZL_API void zl_client_close(zl_client *c)
{
	if (!c)
		return;
	if (c->rm)
		c->ch->os->dereg(c->rm);
	free(c->rbuf);
	if (c->ch)
		zl_close(c->ch);
	if (c->page)
		munmap(c->page, c->page_len);
	if (c->flags_map)
		munmap(c->flags_map, c->flags_len);
	free(c->buf);
	free(c->sbuf);
	free(c);
}

ZL_API int zl_client_slots(const zl_client *c) { return c ? (int)c->slots : -EINVAL; }

void zl_call_abandon(zl_client *c, int tag)
{
	if (tag >= 0 && (uint32_t)tag < c->slots && c->state[tag] == SLOT_BUSY) {
		c->state[tag] = SLOT_ABANDONED;
		c->nabandoned++;
	}
}

bool zl_call_needs_channel(const zl_client *c, size_t len)
{
	return (c->mbox || c->rmbox) && len > c->slot_size - sizeof(struct srv_hdr);
}

int srv_client_rwin(const zl_client *c, zl_channel **ch, struct zl_rwin *slots,
		    struct zl_rwin *flags)
{
	if (!c->rmbox)
		return -ENOENT;
	*ch = c->ch;
	*slots = c->w_slots;
	*flags = c->w_flags;
	return 0;
}

/* ---- sending ----------------------------------------------------------- */

static void ring_doorbell(struct zl_client *c)
{
	struct srv_page_ctl *ctl = (struct srv_page_ctl *)c->page;
	if (c->asym)
		atomic_signal_fence(memory_order_seq_cst);
	else
		atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&ctl->srv_sleeping, memory_order_relaxed) &&
	    atomic_exchange_explicit(&ctl->srv_sleeping, 0, memory_order_relaxed))
		zl_shm_kick(c->ch); /* a full socket: the server has wake-ups queued */
}

/* A slot header's fields but the sequence number, which each caller
 * publishes in its own way. */
static void set_hdr(struct srv_hdr *h, uint32_t k, uint8_t type, uint8_t fl, size_t len)
{
	h->type = type;
	h->flags = fl;
	h->slot = (uint16_t)k;
	h->len = (uint32_t)len;
}

/* Write the slot header (sequence number last) and raise the flag. */
static void announce(struct zl_client *c, uint32_t k, uint8_t type, uint8_t fl, size_t len)
{
	struct srv_hdr *h = (struct srv_hdr *)(c->page + SRV_CTL_SIZE + (size_t)k * c->slot_size);
	set_hdr(h, k, type, fl, len);
	atomic_store_explicit(&h->seq, c->seq[k], memory_order_release);
	atomic_store_explicit(&c->flags[k], type, memory_order_release);
	ring_doorbell(c);
}

/* rdma: WRITE slot k's header and len bytes after it from rbuf, then the
 * flag (RC executes the two in order), then wake the server if it sleeps. */
static int announce_rdma(struct zl_client *c, uint32_t k, uint8_t type, uint8_t fl, size_t len)
{
	const struct zl_onesided_ops *os = c->ch->os;
	uint8_t *slot = c->rbuf + (size_t)k * c->slot_size;
	uint8_t *flag = c->rbuf + (size_t)c->slots * c->slot_size + k;
	struct srv_hdr *h = (struct srv_hdr *)slot;
	set_hdr(h, k, type, fl, len);
	atomic_store_explicit(&h->seq, c->seq[k], memory_order_relaxed); /* one WRITE */
	*flag = type;
	uint32_t n = (uint32_t)sizeof(*h) + (fl & SRV_F_CHAN ? 0 : (uint32_t)len);
	int r = os->write(c->ch, c->rm, slot, n, &c->w_slots, k * c->slot_size);
	if (!r)
		r = os->write(c->ch, c->rm, flag, 1, &c->w_flags, k);
	if (!r)
		r = c->ch->ops->poke(c->ch);
	return r;
}

/* A request as one channel message: header and body. */
static int send_msg(struct zl_client *c, uint32_t k, uint8_t type, const void *req, size_t len,
		    int64_t timeout_us)
{
	struct srv_hdr h = { .type = type, .slot = (uint16_t)k, .len = (uint32_t)len };
	atomic_init(&h.seq, c->seq[k]);
	size_t n = sizeof(h) + len;
	uint8_t *p;
	int r = zl_send_reserve(c->ch, n, (void **)&p);
	if (!r) {
		memcpy(p, &h, sizeof(h));
		if (len)
			memcpy(p + sizeof(h), req, len);
		return zl_send_commit(c->ch, n);
	}
	if (r != -EAGAIN && r != -EMSGSIZE)
		return r;
	if (zl_grow(&c->sbuf, &c->sbuf_cap, n))
		return -ENOMEM;
	memcpy(c->sbuf, &h, sizeof(h));
	if (len)
		memcpy(c->sbuf + sizeof(h), req, len);
	return zl_send(c->ch, c->sbuf, n, timeout_us);
}

static void release_reply(struct zl_client *c)
{
	if (c->peeked) {
		zl_recv_release(c->ch);
		c->peeked = false;
	}
}

ZL_API int zl_call_send(zl_client *c, int type, const void *req, size_t len,
			int64_t timeout_us)
{
	if (!c || type < 1 || type > 255 || (!req && len))
		return -EINVAL;
	if (c->err)
		return c->err;
	if (len > c->max_req)
		return -EMSGSIZE;
	uint64_t all = c->slots == 64 ? ~0ull : (1ull << c->slots) - 1;
	if ((c->busy & all) == all)
		return -EBUSY;
	uint32_t k = (uint32_t)__builtin_ctzll(~c->busy);
	c->seq[k]++;
	int r = 0;
	bool fits = len <= c->slot_size - sizeof(struct srv_hdr);
	if (c->mbox && fits) {
		uint8_t *slot = c->page + SRV_CTL_SIZE + (size_t)k * c->slot_size;
		if (len)
			memcpy(slot + sizeof(struct srv_hdr), req, len);
		announce(c, k, (uint8_t)type, 0, len);
	} else if (c->rmbox && fits) {
		uint8_t *slot = c->rbuf + (size_t)k * c->slot_size;
		if (len)
			memcpy(slot + sizeof(struct srv_hdr), req, len);
		r = announce_rdma(c, k, (uint8_t)type, 0, len);
	} else if (c->rmbox || c->mbox) {
		/* The doorbell first: the server reads a mailbox client's
		 * channel after a doorbell (serve.c), without a wake-up per
		 * message, and a message larger than its ring needs it reading.
		 * Once the doorbell is out, a failed send leaves the server
		 * waiting for that message: the connection is done. */
		if (c->rmbox)
			r = announce_rdma(c, k, (uint8_t)type, SRV_F_CHAN, len);
		else
			announce(c, k, (uint8_t)type, SRV_F_CHAN, len);
		if (!r && (r = send_msg(c, k, (uint8_t)type, req, len, timeout_us)))
			c->err = -ECONNRESET;
	} else {
		r = send_msg(c, k, (uint8_t)type, req, len, timeout_us);
	}
	if (r) {
		c->seq[k]--; /* nothing went out */
		if (r != -ETIMEDOUT && r != -EAGAIN && r != -ENOMEM)
			c->err = r == -EPIPE ? -ECONNRESET : r;
		return r;
	}
	c->busy |= 1ull << k;
	c->state[k] = SLOT_BUSY;
	return (int)k;
}

/* ---- receiving --------------------------------------------------------- */

/* A wait bound that reads the clock only when one call may wait more than
 * once: when replies of abandoned calls may come first. */
struct wt {
	int64_t timeout;
	int64_t deadline;
	bool armed;
};

static struct wt wt_start(const struct zl_client *c, int64_t timeout_us)
{
	struct wt w = { .timeout = timeout_us };
	if (c->nabandoned && timeout_us > 0) {
		w.deadline = zl_deadline(timeout_us);
		w.armed = true;
	}
	return w;
}

/* Time left as a timeout argument (0 if past). */
static int64_t wt_left(const struct wt *w)
{
	if (!w->armed)
		return w->timeout;
	int64_t left = w->deadline - zl_now_us();
	return left > 0 ? left : 0;
}

/* Remember a failure that leaves the connection unusable. */
static int fail(struct zl_client *c, int r)
{
	if (r == -EPROTO)
		ZL_LOG(ZL_LOG_ERROR, "client: malformed reply from the server");
	if (r != -ETIMEDOUT && r != -EAGAIN && r != -ENOMEM)
		c->err = r == -EPIPE ? -ECONNRESET : r;
	return r;
}

/* The next reply, whichever slot it answers; frees that slot. 0 with *k,
 * *status, *rep, *len; or -ETIMEDOUT, -EAGAIN, -ECONNRESET, -EPROTO. */
static int next_reply(struct zl_client *c, const struct wt *w, uint32_t *k,
		      int *status, const void **rep, size_t *len)
{
	const uint8_t *p;
	size_t n;
	release_reply(c);
	bool poll = w->timeout == 0;
	int r = zl_recv_peek(c->ch, (const void **)&p, &n, wt_left(w));
	if (!r) {
		c->peeked = true;
	} else if (r == -EMSGSIZE) { /* fragmented: gather it in our buffer */
		r = zl_grow(&c->buf, &c->buf_cap, n);
		if (!r)
			r = zl_recv(c->ch, c->buf, c->buf_cap, &n, wt_left(w));
		p = c->buf;
	}
	if (r)
		return fail(c, r == -EAGAIN && !poll ? -ETIMEDOUT : r);
	struct srv_rep h;
	if (n < sizeof(h))
		return fail(c, -EPROTO);
	memcpy(&h, p, sizeof(h));
	if (h.slot >= c->slots || c->state[h.slot] == SLOT_FREE || h.seq != c->seq[h.slot] ||
	    h.status > 0 || h.status <= -4096)
		return fail(c, -EPROTO);
	*k = h.slot;
	*status = h.status;
	*rep = p + sizeof(h);
	*len = n - sizeof(h);
	c->busy &= ~(1ull << h.slot);
	return 0;
}

/* Wait for a reply to a live call; replies to abandoned calls are dropped. */
static int recv_live(struct zl_client *c, const struct wt *w, int *tag,
		     const void **rep, size_t *len)
{
	*tag = -1;
	if (c->err)
		return c->err;
	for (;;) {
		uint32_t k;
		int status;
		int r = next_reply(c, w, &k, &status, rep, len);
		if (r)
			return r;
		bool abandoned = c->state[k] == SLOT_ABANDONED;
		c->nabandoned -= abandoned;
		c->state[k] = SLOT_FREE;
		if (!abandoned) {
			*tag = (int)k;
			return status;
		}
	}
}

ZL_API int zl_call_recv(zl_client *c, int *tag, const void **rep, size_t *replen,
			int64_t timeout_us)
{
	int t;
	if (!c || !rep || !replen)
		return -EINVAL;
	struct wt w = wt_start(c, timeout_us);
	int r = recv_live(c, &w, &t, rep, replen);
	if (tag)
		*tag = t;
	return r;
}

ZL_API int zl_call(zl_client *c, int type, const void *req, size_t len, const void **rep,
		   size_t *replen, int64_t timeout_us)
{
	if (!c || !rep || !replen)
		return -EINVAL;
	if (c->err) /* before the slots: a failed call leaves its slot busy */
		return c->err;
	for (uint32_t k = 0; k < c->slots; k++)
		if (c->state[k] == SLOT_BUSY)
			return -EBUSY; /* pipelined calls are open */
	struct wt w = wt_start(c, timeout_us);
	int tag;
	while ((tag = zl_call_send(c, type, req, len, wt_left(&w))) == -EBUSY) {
		/* every slot belongs to an abandoned call: take one back */
		uint32_t k;
		int status;
		int r = next_reply(c, &w, &k, &status, rep, replen);
		if (r)
			return r;
		c->nabandoned--;
		c->state[k] = SLOT_FREE;
	}
	if (tag < 0)
		return tag;
	int t;
	int r = recv_live(c, &w, &t, rep, replen);
	if (t < 0 && (r == -ETIMEDOUT || r == -EAGAIN)) {
		c->state[tag] = SLOT_ABANDONED;
		c->nabandoned++;
	}
	return r;
}
