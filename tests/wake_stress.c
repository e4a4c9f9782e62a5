/* SPDX-License-Identifier: MIT */
/*
 * wake_stress SCHEME [fork|thread] [MESSAGES]: a stress test for lost
 * wake-ups. Two sides, A (listens) and B (connects), in two processes
 * (fork, default) or two threads (thread, run under TSan), each pinned to
 * its own CPU, exchange MESSAGES messages in total (default one million
 * with fork, a quarter of that with threads; both times ZL_TEST_SCALE)
 * over eight channels, in rounds.
 *
 * Channels: two sets of four. Set 0 has 4 KiB rings (senders wait for
 * room) and spins of 0-20 us (different per end, 0 for a third of the
 * runs; a wait sleeps as soon as the peer pauses), set 1 the defaults
 * (1 MiB, 50 us). Each end gives each of the four channels of a set one
 * way of waiting (a random permutation on B's end, so ends differ):
 * blocking zl_recv only (never an fd: asymmetric fences stay on),
 * zl_channel_fd + poll(2) with the automatic arming of an empty
 * zl_recv(..., 0), zl_channel_arm + poll(2) (manual mode, sticky), or a
 * zl_poller of its own. A quarter of the waits on the last three use
 * blocking zl_recv instead.
 *
 * A round (the plan comes from the seed both sides share): one channel,
 * and ping-pong (one message, one reply), one-way (data one way, acks
 * back, up to W in 1..64 unacknowledged, 1..32 on 4 KiB rings) or duplex
 * (data both ways, each with its window, 1..8 on 4 KiB rings; acks
 * piggybacked; see make_plan for these bounds). The receiver of data
 * acknowledges every 1..W messages (its own choice). Messages carry a
 * per-channel number, the round, and a sequence number (data) or
 * acknowledgement, and a pattern; all are checked in order. Before every send and every wait
 * either side may pause: a busy spin of 0-50 us or a sleep of 0-2 ms, with
 * a probability the round chooses per side (none, often spins, some
 * sleeps, many sleeps).
 *
 * The rule: every wait and every send has a 2 s timeout, and a lost
 * wake-up shows as a wait that ends only by its timeout: a timeout
 * anywhere is a FAIL, with a last zl_recv(..., 0) telling whether the
 * message was there all along. A wait or send over 1 s fails too. Each
 * side reports its longest wait (per way of waiting), its longest send,
 * and how often it and its channels slept; waits and sends over 50 ms are
 * listed with the time they began (the sides share CLOCK_MONOTONIC), and
 * the summary gives the CPU time the host stole meanwhile (a VM whose
 * host throttles it stalls both sides at once, typically for 100 ms).
 */
#include <poll.h>
#include <sched.h>

#include "chanlib.h"

#define TMO_US 2000000      /* every wait and every send */
#define MAX_WAIT_US 1000000 /* a wait or send longer than this fails */
#define NSETS 2
#define NSLOTS 4
#define HDR 16
#define MAXLEN 1024
#define SMALL_RING 4096

enum method { M_BLOCK, M_FD, M_ARM, M_POLLER, NMETHODS };
static const char *const mname[NMETHODS] = { "block", "fd-auto", "arm", "poller" };

enum kind { K_DATA = 1, K_ACK = 2 };
enum rtype { R_PINGPONG, R_ONEWAY, R_DUPLEX };
static const char *const rname[] = { "ping-pong", "one-way", "duplex" };

/* Pause profiles, in 1/1024 per operation: busy spins of 0-50 us, sleeps
 * of 0-2 ms. */
struct prof {
	const char *name;
	unsigned spin, sleep;
};
static const struct prof profs[] = {
	{ "none", 0, 0 },
	{ "spins", 256, 0 },
	{ "mixed", 128, 2 },
	{ "sleepy", 32, 16 },
};
#define NPROFS (sizeof(profs) / sizeof(profs[0]))

/* The message header (little-endian host assumed, as the library). */
struct hdr {
	uint32_t n;     /* per channel and direction, from 0 */
	uint16_t kind;  /* K_DATA, K_ACK */
	uint16_t round; /* low 16 bits */
	uint32_t seq;   /* data: 1.. within the round; ack: 0 */
	uint32_t ack;   /* data of the peer received so far in the round */
};
_Static_assert(sizeof(struct hdr) == HDR, "header size");

struct plan {
	int set, slot, type;
	uint32_t n[2]; /* data messages A sends, B sends */
	uint32_t w;    /* window */
	uint32_t maxlen;
	int prof[2];
	bool blk[2];   /* wait with blocking zl_recv this round */
};

struct result {
	uint64_t msgs, rounds;
	int64_t max_wait, max_send;
	int max_method;
	uint32_t max_round;
	uint64_t waits, sleeps, wakeups;
};

struct side {
	int id; /* 0 = A, 1 = B */
	const char *name;
	zl_channel *ch[NSETS][NSLOTS];
	int fd[NSETS][NSLOTS];
	int role[NSETS][NSLOTS];
	zl_poller *poller[NSETS];
	int poll_id[NSETS];
	uint32_t tx_n[NSETS][NSLOTS], rx_n[NSETS][NSLOTS];
	struct tl_rng plan, priv;
	uint8_t buf[MAXLEN], rbuf[MAXLEN];
	/* statistics */
	uint64_t msgs, rounds, sent;
	uint64_t waits[NMETHODS], wait_us[NMETHODS], polls[NMETHODS], spurious[NMETHODS];
	uint64_t busy; /* zl_channel_arm said -EBUSY */
	int64_t max_wait[NMETHODS];
	uint32_t max_round[NMETHODS];
	int64_t max_send;
	uint64_t over_10ms, nslow;
	uint64_t spins, sleeps;
	uint64_t rtypes[3];
	struct result res;
	/* the round in progress, for failure messages */
	const struct plan *p;
	uint32_t round, r_sent, r_acked, r_recvd, r_ack_every;
};

static const char *scheme;
static bool ring_transport; /* shm: readiness is exact (no partial frames) */
static uint64_t seed, target;
static int64_t t_start; /* CLOCK_MONOTONIC: one clock for both processes */
#define SLOW_US 50000  /* waits and sends this long are reported one by one */
#define SLOW_MAX 20
static int spin_small[2]; /* set 0's spin_us, per end */
static char conn_url[NSETS][600];
static zl_listener *lis[NSETS];
static cpu_set_t allowed;
static struct tl_pipe result_pipe;
static struct side sides[2];

/* ---- helpers ------------------------------------------------------------ */

static void pin(int which)
{
	if (CPU_COUNT(&allowed) < 2)
		return;
	for (int cpu = 0, k = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &allowed))
			continue;
		if (k++ == which) {
			cpu_set_t one;
			CPU_ZERO(&one);
			CPU_SET(cpu, &one);
			(void)sched_setaffinity(0, sizeof(one), &one); /* failure: unpinned */
			return;
		}
	}
}

static void pause_op(struct side *sd, const struct prof *pf)
{
	if (!pf->spin && !pf->sleep)
		return;
	uint64_t r = tl_rand_below(&sd->priv, 1024);
	if (r < pf->sleep) {
		sd->sleeps++;
		tl_sleep_us((int64_t)tl_rand_below(&sd->priv, 2001));
	} else if (r < pf->sleep + pf->spin) {
		sd->spins++;
		int64_t end = tl_now_us() + (int64_t)tl_rand_below(&sd->priv, 51);
		while (tl_now_us() < end)
			;
	}
}

static uint64_t pattern_id(int from, int set, int slot, uint32_t n)
{
	return (uint64_t)from << 60 | (uint64_t)set << 56 | (uint64_t)slot << 52 | n;
}

static void info_line(zl_channel *ch, char *buf, size_t cap)
{
	struct zl_channel_info in;
	if (zl_channel_info(ch, &in)) {
		snprintf(buf, cap, "(no info)");
		return;
	}
	snprintf(buf, cap,
		 "sent %" PRIu64 " recv %" PRIu64 " sleeps %" PRIu64 " wakeups_sent %" PRIu64
		 " arms %" PRIu64 " fences %" PRIu64,
		 in.msgs_sent, in.msgs_recv, in.sleeps, in.wakeups_sent, in.arms, in.fences);
}

/* The round in progress, in words. */
static void round_state(const struct side *sd, char *buf, size_t cap)
{
	const struct plan *p = sd->p;
	int s = p->set, c = p->slot;
	char info[256];
	info_line(sd->ch[s][c], info, sizeof(info));
	snprintf(buf, cap,
		 "round %u: %s on set %d slot %d (this end: %s), data A %u B %u, window %u, "
		 "maxlen %u, pauses A %s B %s; this side sent %u, acked %u, received %u "
		 "(acks every %u); channel: %s",
		 sd->round, rname[p->type], s, c, mname[sd->role[s][c]], p->n[0], p->n[1], p->w,
		 p->maxlen, profs[p->prof[0]].name, profs[p->prof[1]].name, sd->r_sent,
		 sd->r_acked, sd->r_recvd, sd->r_ack_every, info);
}

/* CPU time stolen from this (virtual) machine so far, in ms (/proc/stat;
 * -1 if unknown): a host that throttles it stalls both sides at once. */
static int64_t steal_ms(void)
{
	FILE *f = fopen("/proc/stat", "r");
	unsigned long long v[8];
	int n = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
			   &v[3], &v[4], &v[5], &v[6], &v[7])
		  : 0;
	if (f)
		fclose(f);
	long hz = sysconf(_SC_CLK_TCK);
	return n == 8 && hz > 0 ? (int64_t)(v[7] * 1000 / (unsigned long long)hz) : -1;
}

/* A wait or send over SLOW_US: say when (to match with the peer's). */
static void slow(struct side *sd, const char *what, const char *how, int64_t t0, int64_t dt)
{
	if (++sd->nslow > SLOW_MAX)
		return;
	char st[768];
	round_state(sd, st, sizeof(st));
	printf("%s: slow %s (%s): %.3f ms from t=%.6f s; %s\n", sd->name, what, how, dt / 1e3,
	       (t0 - t_start) / 1e6, st);
}

/* Before failing: give the peer time to time out and report its side. */
static void linger(void) { tl_sleep_us(TMO_US + 500000); }

/* A wait or send that took over 1 s but ended. */
__attribute__((noreturn)) static void too_slow(struct side *sd, const char *what, int64_t dt)
{
	char st[768];
	round_state(sd, st, sizeof(st));
	fprintf(stderr, "%s: %s took %.3f s (over 1 s: a wake-up was late or lost); %s\n",
		sd->name, what, dt / 1e6, st);
	linger();
	FAIL("%s: a %s took over 1 s; rerun with ZL_TEST_SEED=%" PRIu64, sd->name, what, seed);
}

/* A wait ended by its timeout: say whether the message had come. */
__attribute__((noreturn)) static void timed_out(struct side *sd, int m, int64_t t0,
						const char *what)
{
	int s = sd->p->set, c = sd->p->slot;
	int64_t waited = tl_now_us() - t0;
	size_t len = 0;
	int rc = zl_recv(sd->ch[s][c], sd->rbuf, sizeof(sd->rbuf), &len, 0);
	char st[768];
	round_state(sd, st, sizeof(st));
	fprintf(stderr, "%s: %s wait: %s ended by its timeout after %.3f s waiting for message "
		"n=%u; a zl_recv(..., 0) now returns %d (%s)%s; %s\n",
		sd->name, mname[m], what, waited / 1e6, sd->rx_n[s][c], rc, zl_strerror(rc),
		rc == 0 ? ": THE MESSAGE WAS THERE (lost wake-up)" : "", st);
	linger();
	FAIL("%s: a wait timed out; rerun with ZL_TEST_SEED=%" PRIu64, sd->name, seed);
}

/* poll(2) one fd for POLLIN until the absolute deadline; false on timeout */
static bool poll_fd(int fd, int64_t dl)
{
	for (;;) {
		int64_t left = dl - tl_now_us();
		if (left <= 0)
			return false;
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int n = poll(&pf, 1, (int)((left + 999) / 1000));
		if (n < 0 && errno == EINTR)
			continue;
		CHECKF(n >= 0, "poll: %s", strerror(errno));
		if (n > 0)
			return true;
	}
}

/* ---- sending and waiting --------------------------------------------------- */

static void send_msg(struct side *sd, int s, int c, uint32_t round, int kind, uint32_t seq,
		     uint32_t ack, size_t len)
{
	struct hdr h = { .n = sd->tx_n[s][c]++, .kind = (uint16_t)kind,
			 .round = (uint16_t)round, .seq = seq, .ack = ack };
	memcpy(sd->buf, &h, HDR);
	tl_fill(sd->buf + HDR, len - HDR, pattern_id(sd->id, s, c, h.n));
	int64_t t0 = tl_now_us();
	int rc = zl_send(sd->ch[s][c], sd->buf, len, TMO_US);
	int64_t dt = tl_now_us() - t0;
	if (rc) {
		char st[768];
		round_state(sd, st, sizeof(st));
		fprintf(stderr, "%s: zl_send of n=%u (%zu bytes) = %d (%s) after %.3f s; %s\n",
			sd->name, h.n, len, rc, zl_strerror(rc), dt / 1e6, st);
		linger();
		FAIL("%s: a send failed; rerun with ZL_TEST_SEED=%" PRIu64, sd->name, seed);
	}
	if (dt > MAX_WAIT_US)
		too_slow(sd, kind == K_DATA ? "send (data)" : "send (ack)", dt);
	if (dt >= SLOW_US)
		slow(sd, "send", kind == K_DATA ? "data" : "ack", t0, dt);
	if (dt > sd->max_send)
		sd->max_send = dt;
	sd->msgs++;
	sd->sent++;
}

/* Wait for the next message of the round's channel the way m says, check
 * it, and return its header. */
static struct hdr wait_msg(struct side *sd, const struct plan *p, uint32_t round, int m)
{
	int s = p->set, c = p->slot;
	zl_channel *ch = sd->ch[s][c];
	int fd = sd->fd[s][c];
	size_t len = 0;
	int rc;
	int64_t t0 = tl_now_us(), dl = t0 + TMO_US;
	switch (m) {
	case M_BLOCK:
		rc = zl_recv(ch, sd->rbuf, sizeof(sd->rbuf), &len, TMO_US);
		if (rc == -ETIMEDOUT)
			timed_out(sd, m, t0, "zl_recv(2 s)");
		break;
	case M_FD:
		/* the zl_channel_fd contract: sleep only after -EAGAIN */
		for (bool woke = false;; woke = true) {
			rc = zl_recv(ch, sd->rbuf, sizeof(sd->rbuf), &len, 0);
			if (rc != -EAGAIN)
				break;
			if (woke)
				sd->spurious[m]++;
			sd->polls[m]++;
			if (!poll_fd(fd, dl)) {
				rc = zl_recv(ch, sd->rbuf, sizeof(sd->rbuf), &len, 0);
				if (rc == -EAGAIN)
					timed_out(sd, m, t0, "poll(2 s) on zl_channel_fd");
				break;
			}
		}
		break;
	case M_ARM: {
		/* as an event loop: sometimes arm without looking first */
		bool look = tl_rand_below(&sd->priv, 2);
		for (;;) {
			if (look) {
				rc = zl_recv(ch, sd->rbuf, sizeof(sd->rbuf), &len, 0);
				if (rc != -EAGAIN)
					break;
			}
			int a = zl_channel_arm(ch);
			if (a == -EBUSY) {
				sd->busy++;
				rc = zl_recv(ch, sd->rbuf, sizeof(sd->rbuf), &len, 0);
				CHECKF(rc != -EAGAIN, "%s: round %u: zl_channel_arm said -EBUSY, then "
				       "zl_recv(..., 0) said -EAGAIN", sd->name, round);
				break;
			}
			CHECKF(a == 0, "%s: zl_channel_arm = %d (%s)", sd->name, a, zl_strerror(a));
			sd->polls[m]++;
			if (!poll_fd(fd, dl)) {
				rc = zl_recv(ch, sd->rbuf, sizeof(sd->rbuf), &len, 0);
				if (rc == -EAGAIN)
					timed_out(sd, m, t0, "poll(2 s) on the armed zl_channel_fd");
				break;
			}
			rc = zl_recv(ch, sd->rbuf, sizeof(sd->rbuf), &len, 0);
			if (rc != -EAGAIN)
				break;
			sd->spurious[m]++;
			look = false; /* just looked */
		}
		break;
	}
	case M_POLLER: {
		bool look = tl_rand_below(&sd->priv, 2);
		for (;;) {
			if (look) {
				rc = zl_recv(ch, sd->rbuf, sizeof(sd->rbuf), &len, 0);
				if (rc != -EAGAIN)
					break;
			}
			look = true;
			int64_t left = dl - tl_now_us();
			struct zl_poll_event ev[4];
			int n = left > 0 ? zl_poller_wait(sd->poller[s], ev, 4, left) : -ETIMEDOUT;
			sd->polls[m]++;
			if (n == -ETIMEDOUT) {
				rc = zl_recv(ch, sd->rbuf, sizeof(sd->rbuf), &len, 0);
				if (rc == -EAGAIN)
					timed_out(sd, m, t0, "zl_poller_wait(2 s)");
				break;
			}
			CHECKF(n == 1 && ev[0].id == sd->poll_id[s],
			       "%s: zl_poller_wait = %d (%s), id %d", sd->name, n, zl_strerror(n),
			       n > 0 ? ev[0].id : -1);
			CHECKF(ev[0].events & (ZL_POLLIN | ZL_POLLERR | ZL_POLLHUP),
			       "%s: zl_poller_wait: events 0x%x", sd->name, ev[0].events);
			rc = zl_recv(ch, sd->rbuf, sizeof(sd->rbuf), &len, 0);
			if (rc != -EAGAIN)
				break;
			/* a stream's socket turns readable with part of a frame */
			CHECKF(!ring_transport, "%s: round %u: zl_poller_wait reported ZL_POLLIN "
			       "(0x%x), then zl_recv(..., 0) said -EAGAIN", sd->name, round,
			       ev[0].events);
			sd->spurious[m]++;
			look = false;
		}
		break;
	}
	default:
		FAIL("method %d", m);
	}
	int64_t dt = tl_now_us() - t0;
	CHECKF(rc == 0, "%s: round %u: %s wait on set %d slot %d for n=%u: %d (%s) after %.3f s; "
	       "rerun with ZL_TEST_SEED=%" PRIu64,
	       sd->name, round, mname[m], s, c, sd->rx_n[s][c], rc, zl_strerror(rc), dt / 1e6,
	       seed);
	if (dt > MAX_WAIT_US) {
		char what[32];
		snprintf(what, sizeof(what), "wait (%s)", mname[m]);
		too_slow(sd, what, dt);
	}
	sd->waits[m]++;
	sd->wait_us[m] += (uint64_t)dt;
	if (dt > sd->max_wait[m]) {
		sd->max_wait[m] = dt;
		sd->max_round[m] = round;
	}
	sd->over_10ms += dt > 10000;
	if (dt >= SLOW_US)
		slow(sd, "wait", mname[m], t0, dt);

	struct hdr h;
	CHECKF(len >= HDR && len <= MAXLEN, "%s: message of %zu bytes", sd->name, len);
	memcpy(&h, sd->rbuf, HDR);
	uint32_t want = sd->rx_n[s][c]++;
	CHECKF(h.n == want && h.round == (uint16_t)round,
	       "%s: set %d slot %d: got message n=%u of round %u, expected n=%u of round %u",
	       sd->name, s, c, h.n, h.round, want, round & 0xffff);
	CHECK_PATTERN(sd->rbuf + HDR, len - HDR, pattern_id(1 - sd->id, s, c, h.n));
	sd->msgs++;
	return h;
}

/* ---- rounds ---------------------------------------------------------------- */

static void make_plan(struct tl_rng *r, struct plan *p)
{
	static const uint32_t lens[] = { HDR, 48, 112, 256, MAXLEN };
	memset(p, 0, sizeof(*p));
	p->set = (int)tl_rand_below(r, NSETS);
	p->slot = (int)tl_rand_below(r, NSLOTS);
	uint64_t t = tl_rand_below(r, 8);
	p->type = t < 2 ? R_PINGPONG : t < 5 ? R_ONEWAY : R_DUPLEX;
	int dir = (int)tl_rand_below(r, 2);
	bool small = p->set == 0;
	switch (p->type) {
	case R_PINGPONG:
		p->n[dir] = 1 + (uint32_t)tl_rand_below(r, 100);
		p->w = 1;
		break;
	case R_ONEWAY:
		/* 4 KiB rings: see below */
		p->n[dir] = 1 + (uint32_t)tl_rand_below(r, 800);
		p->w = 1u << tl_rand_below(r, small ? 6 : 7); /* 1..32 or 1..64 */
		break;
	default:
		p->n[0] = 1 + (uint32_t)tl_rand_below(r, 500);
		p->n[1] = 1 + (uint32_t)tl_rand_below(r, 500);
		p->w = 1u << tl_rand_below(r, small ? 4 : 7); /* 1..8 or 1..64 */
		break;
	}
	/* In a 4 KiB ring, what may be unread must fit with room to spare:
	 * a side waiting in zl_send for room neither publishes its read
	 * position nor serves the peer's demand for it, so when both ends
	 * wait in zl_send each may see up to rpos_every (1 KiB) of the ring
	 * it writes as still used. Unread at most: one-way, the acker's acks
	 * (32 records of 64 bytes); duplex, a window of data and as many acks
	 * (8 of at most 192 bytes and 8 of 64). The data sender of a one-way
	 * round still waits for room: the acker receives all the while. */
	p->maxlen = lens[tl_rand_below(r, sizeof(lens) / sizeof(lens[0]))];
	if (small && p->type == R_DUPLEX && p->maxlen > 112)
		p->maxlen = 112;
	/* half the one-way rounds in 4 KiB rings fill them: senders sleep
	 * waiting for room, and the receiver must wake them */
	if (small && p->type == R_ONEWAY && tl_rand_below(r, 2))
		p->maxlen = MAXLEN;
	for (int i = 0; i < 2; i++) {
		p->prof[i] = (int)tl_rand_below(r, NPROFS);
		p->blk[i] = tl_rand_below(r, 4) == 0;
	}
}

/*
 * One round. Data goes out while the window allows (seq = sent + 1,
 * carrying ack = recvd); otherwise the side waits for a message. A data
 * receiver acknowledges once ack_every messages are unacknowledged, and at
 * the last one, with a pure ack unless it is about to send data anyway.
 * The round ends for a side once all its data is acknowledged and all the
 * peer's data received; then nothing of the round is left in flight either
 * way (the peer sends a pure ack only when its count of our data grows).
 */
static void run_round(struct side *sd, const struct plan *p, uint32_t round)
{
	int me = sd->id, s = p->set, c = p->slot;
	int m = p->blk[me] ? M_BLOCK : sd->role[s][c];
	const struct prof *pf = &profs[p->prof[me]];
	uint32_t my_total = p->n[me], peer_total = p->n[1 - me], w = p->w;
	uint32_t sent = 0, acked = 0, recvd = 0, last_ack = 0;
	uint32_t ack_every = 1 + (uint32_t)tl_rand_below(&sd->priv, w);
	sd->rtypes[p->type]++;
	sd->p = p;
	sd->round = round;
	sd->r_ack_every = ack_every;
	while (acked < my_total || recvd < peer_total) {
		sd->r_sent = sent;
		sd->r_acked = acked;
		sd->r_recvd = recvd;
		if (sent < my_total && sent - acked < w) {
			pause_op(sd, pf);
			size_t len = HDR + tl_rand_below(&sd->priv, p->maxlen - HDR + 1);
			send_msg(sd, s, c, round, K_DATA, ++sent, recvd, len);
			last_ack = recvd;
			continue;
		}
		pause_op(sd, pf);
		struct hdr h = wait_msg(sd, p, round, m);
		if (h.kind == K_DATA) {
			CHECKF(h.seq == recvd + 1 && recvd < peer_total,
			       "%s: round %u: data seq %u, expected %u of %u", sd->name, round, h.seq,
			       recvd + 1, peer_total);
			recvd++;
		} else {
			CHECKF(h.kind == K_ACK && h.seq == 0, "%s: round %u: kind %u seq %u",
			       sd->name, round, h.kind, h.seq);
		}
		CHECKF(h.ack >= acked && h.ack <= sent, "%s: round %u: ack %u, acked %u, sent %u",
		       sd->name, round, h.ack, acked, sent);
		acked = h.ack;
		bool can_send = sent < my_total && sent - acked < w;
		if (!can_send && recvd > last_ack &&
		    (recvd - last_ack >= ack_every || recvd == peer_total)) {
			pause_op(sd, pf);
			send_msg(sd, s, c, round, K_ACK, 0, recvd, HDR);
			last_ack = recvd;
		}
	}
	sd->rounds++;
}

/* ---- the two sides ------------------------------------------------------ */

/* The way of waiting of each channel on this end: slot c's is method c
 * on A's end, a permutation (per set, from the seed) on B's. */
static void roles_of(int id, int role[NSETS][NSLOTS])
{
	struct tl_rng r = { seed ^ 0x726f6c6573ull };
	for (int s = 0; s < NSETS; s++) {
		for (int c = 0; c < NSLOTS; c++)
			role[s][c] = c;
		for (int c = NSLOTS - 1; id == 1 && c > 0; c--) {
			int k = (int)tl_rand_below(&r, (uint64_t)c + 1), t = role[s][c];
			role[s][c] = role[s][k];
			role[s][k] = t;
		}
	}
}

static void setup_side(struct side *sd)
{
	roles_of(sd->id, sd->role);
	for (int s = 0; s < NSETS; s++) {
		int64_t pspin = s == 0 ? spin_small[sd->id] : -1;
		CHECK_OK(zl_poller_create(pspin, &sd->poller[s]));
		for (int c = 0; c < NSLOTS; c++) {
			zl_channel *ch = sd->ch[s][c];
			sd->fd[s][c] = -1;
			switch (sd->role[s][c]) {
			case M_FD:
			case M_ARM: /* manual mode from its first zl_channel_arm */
				sd->fd[s][c] = zl_channel_fd(ch);
				CHECKF(sd->fd[s][c] >= 0, "zl_channel_fd = %d", sd->fd[s][c]);
				break;
			case M_POLLER:
				sd->poll_id[s] = zl_poller_add_channel(sd->poller[s], ch, ZL_POLLIN, NULL);
				CHECKF(sd->poll_id[s] >= 0, "zl_poller_add_channel = %d (%s)",
				       sd->poll_id[s], zl_strerror(sd->poll_id[s]));
				break;
			default: /* blocking only: never asks for an fd */
				break;
			}
		}
	}
}

static void report(struct side *sd, double secs)
{
	uint64_t waits = 0;
	int64_t mx = 0;
	int mm = 0;
	for (int m = 0; m < NMETHODS; m++) {
		waits += sd->waits[m];
		if (sd->max_wait[m] > mx) {
			mx = sd->max_wait[m];
			mm = m;
		}
	}
	printf("%s: %" PRIu64 " messages (%" PRIu64 " sent) in %" PRIu64 " rounds (%" PRIu64
	       " ping-pong, %" PRIu64 " one-way, %" PRIu64 " duplex), %.1f s; %" PRIu64
	       " waits, %" PRIu64 " over 10 ms; pauses: %" PRIu64 " spins, %" PRIu64
	       " sleeps; longest send %.3f ms; zl_channel_arm said -EBUSY %" PRIu64 " times\n",
	       sd->name, sd->msgs, sd->sent, sd->rounds, sd->rtypes[0], sd->rtypes[1],
	       sd->rtypes[2], secs, waits, sd->over_10ms, sd->spins, sd->sleeps,
	       sd->max_send / 1e3, sd->busy);
	for (int m = 0; m < NMETHODS; m++)
		printf("%s:   %-7s waits %8" PRIu64 " (mean %6.1f us, longest %8.3f ms in round "
		       "%u), polls %7" PRIu64 ", spurious wake-ups %" PRIu64 "\n",
		       sd->name, mname[m], sd->waits[m],
		       sd->waits[m] ? (double)sd->wait_us[m] / (double)sd->waits[m] : 0.0,
		       sd->max_wait[m] / 1e3, sd->max_round[m], sd->polls[m], sd->spurious[m]);
	uint64_t sleeps = 0, wakeups = 0;
	for (int s = 0; s < NSETS; s++)
		for (int c = 0; c < NSLOTS; c++) {
			struct zl_channel_info in;
			CHECK_OK(zl_channel_info(sd->ch[s][c], &in));
			sleeps += in.sleeps;
			wakeups += in.wakeups_sent;
			printf("%s:   set %d (spin_us %3d) slot %d %-7s: sent %7" PRIu64 " recv %7" PRIu64
			       " sleeps %6" PRIu64 " wakeups_sent %6" PRIu64 " arms %6" PRIu64
			       " fences %6" PRIu64 "\n",
			       sd->name, s, s == 0 ? spin_small[sd->id] : 50, c, mname[sd->role[s][c]],
			       in.msgs_sent, in.msgs_recv, in.sleeps, in.wakeups_sent, in.arms,
			       in.fences);
		}
	for (int s = 0; s < NSETS; s++) {
		struct zl_poller_info pi;
		CHECK_OK(zl_poller_info(sd->poller[s], &pi));
		printf("%s:   poller %d: waits %" PRIu64 " sleeps %" PRIu64 " arms %" PRIu64 "\n",
		       sd->name, s, pi.waits, pi.sleeps, pi.arms);
	}
	sd->res = (struct result){ .msgs = sd->msgs, .rounds = sd->rounds, .max_wait = mx,
				   .max_send = sd->max_send, .max_method = mm,
				   .max_round = sd->max_round[mm], .waits = waits,
				   .sleeps = sleeps, .wakeups = wakeups };
}

static void close_side(struct side *sd)
{
	for (int s = 0; s < NSETS; s++)
		zl_poller_destroy(sd->poller[s]);
	for (int s = 0; s < NSETS; s++)
		for (int c = 0; c < NSLOTS; c++)
			zl_close(sd->ch[s][c]);
}

/* Rounds until the messages exchanged (both ways) reach the target. Both
 * sides count the same: a round leaves nothing in flight. */
static void run_side(struct side *sd)
{
	setup_side(sd);
	int64_t t0 = tl_now_us();
	struct plan p;
	for (uint32_t round = 0; sd->msgs < target; round++) {
		make_plan(&sd->plan, &p);
		run_round(sd, &p, round);
	}
	report(sd, (tl_now_us() - t0) / 1e6);
}

static void connect_side_b(struct side *sd)
{
	for (int s = 0; s < NSETS; s++)
		for (int c = 0; c < NSLOTS; c++) {
			zl_channel *ch = tl_connect(conn_url[s], 10000000);
			uint8_t hello[2] = { (uint8_t)s, (uint8_t)c };
			CHECK_OK(zl_send(ch, hello, sizeof(hello), 10000000));
			sd->ch[s][c] = ch;
		}
}

static void accept_side_a(struct side *sd)
{
	for (int s = 0; s < NSETS; s++) {
		for (int i = 0; i < NSLOTS; i++) {
			zl_channel *ch = tl_accept(lis[s], 10000000);
			uint8_t hello[2];
			size_t len;
			CHECK_OK(zl_recv(ch, hello, sizeof(hello), &len, 10000000));
			CHECK(len == 2 && hello[0] == s && hello[1] < NSLOTS && !sd->ch[s][hello[1]]);
			sd->ch[s][hello[1]] = ch;
		}
		zl_listener_close(lis[s]);
	}
}

static void init_side(struct side *sd, int id)
{
	memset(sd, 0, sizeof(*sd));
	sd->id = id;
	sd->name = id ? "B" : "A";
	sd->plan.s = seed;
	sd->priv.s = seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(id + 1));
}

static int side_b_proc(void *arg)
{
	(void)arg;
	pin(1);
	struct side *sd = &sides[1];
	init_side(sd, 1);
	connect_side_b(sd);
	run_side(sd);
	tl_pipe_put(&result_pipe, &sd->res, sizeof(sd->res));
	close_side(sd);
	return 0;
}

static void *side_b_thread(void *arg)
{
	(void)arg;
	pin(1);
	struct side *sd = &sides[1];
	init_side(sd, 1);
	connect_side_b(sd);
	run_side(sd);
	close_side(sd);
	return NULL;
}

int main(int argc, char **argv)
{
	scheme = tl_scheme_arg(argc, argv);
	bool threads = argc > 2 && !strcmp(argv[2], "thread");
	CHECKF(argc <= 2 || threads || !strcmp(argv[2], "fork"), "mode %s: fork or thread",
	       argv[2]);
	ring_transport = !strcmp(scheme, "shm");
	tl_watchdog(threads && tl_scaled_down() ? 590 : 290);
	seed = tl_seed();
	uint64_t n = argc > 3 ? strtoull(argv[3], NULL, 0) : threads ? 250000 : 1000000;
	target = tl_scaled(n);
	CHECK(!sched_getaffinity(0, sizeof(allowed), &allowed));
	t_start = tl_now_us();
	int64_t steal0 = steal_ms();

	struct tl_rng r = { seed ^ 0x7370696eull };
	for (int i = 0; i < 2; i++)
		spin_small[i] = tl_rand_below(&r, 3) == 0 ? 0 : (int)tl_rand_below(&r, 21);
	for (int s = 0; s < NSETS; s++) {
		char pa[64] = "", pb[64] = "", url[600], lurl[600];
		if (s == 0) {
			snprintf(pa, sizeof(pa), "ring=%d&spin_us=%d", SMALL_RING, spin_small[0]);
			snprintf(pb, sizeof(pb), "ring=%d&spin_us=%d", SMALL_RING, spin_small[1]);
		}
		tl_make_url(scheme, pa, url, sizeof(url));
		int rc = zl_listen(url, NULL, &lis[s]);
		if (rc == -EPROTONOSUPPORT)
			SKIP("transport %s is not built in", scheme);
		CHECKF(rc == 0, "zl_listen(%s) = %d (%s)", url, rc, zl_strerror(rc));
		CHECK_OK(zl_listener_url(lis[s], lurl, sizeof(lurl)));
		tl_conn_url(scheme, pb, lurl, conn_url[s], sizeof(conn_url[s]));
	}
	printf("%s, %s: %" PRIu64 " messages; set 0: ring %d, spin_us A %d B %d; set 1: "
	       "defaults; CPUs available %d\n",
	       scheme, threads ? "two threads" : "two processes", target, SMALL_RING,
	       spin_small[0], spin_small[1], CPU_COUNT(&allowed));

	struct side *sa = &sides[0];
	init_side(sa, 0);
	int64_t t0 = tl_now_us();
	struct result rb;
	pid_t pid = -1;
	struct tl_thread th;
	if (threads) {
		tl_thread_start(&th, side_b_thread, NULL);
	} else {
		tl_pipe_init(&result_pipe);
		pid = tl_fork(side_b_proc, NULL, 280);
	}
	pin(0);
	accept_side_a(sa);
	run_side(sa);
	if (threads) {
		tl_thread_join(&th, 30000);
		rb = sides[1].res;
	} else {
		tl_pipe_get(&result_pipe, &rb, sizeof(rb), 30000);
	}
	close_side(sa);
	if (!threads)
		tl_reap_ok(pid, 30000);
	double secs = (tl_now_us() - t0) / 1e6;
	const struct result *ra = &sa->res;
	CHECKF(ra->msgs == rb.msgs && ra->rounds == rb.rounds,
	       "A counted %" PRIu64 " messages in %" PRIu64 " rounds, B %" PRIu64 " in %" PRIu64,
	       ra->msgs, ra->rounds, rb.msgs, rb.rounds);
	const struct result *w = ra->max_wait >= rb.max_wait ? ra : &rb;
	int64_t steal1 = steal_ms();
	printf("%s, %s: %" PRIu64 " messages in %" PRIu64 " rounds, %.1f s (%.1f us/message); "
	       "waits A %" PRIu64 " B %" PRIu64 ", channel sleeps A %" PRIu64 " B %" PRIu64
	       ", wake-ups sent A %" PRIu64 " B %" PRIu64 "; longest wait %.3f ms (%s, %s, round "
	       "%u), longest send %.3f ms; no timeouts; CPU time stolen by the host %" PRId64
	       " ms\n",
	       scheme, threads ? "threads" : "processes", ra->msgs, ra->rounds, secs,
	       secs * 1e6 / (double)ra->msgs, ra->waits, rb.waits, ra->sleeps, rb.sleeps,
	       ra->wakeups, rb.wakeups, w->max_wait / 1e3, w == ra ? "A" : "B",
	       mname[w->max_method], w->max_round,
	       (ra->max_send > rb.max_send ? ra->max_send : rb.max_send) / 1e3,
	       steal0 >= 0 && steal1 >= 0 ? steal1 - steal0 : (int64_t)-1);
	return T_EXIT_PASS;
}
