/* SPDX-License-Identifier: MIT */
/*
 * One-way streaming (zl-bench stream, stream-compare): what every method
 * shares. A sender streams messages of one size, numbered from 1 across the
 * whole run; the receiver checks every one (its length, its sequence number
 * in the first 8 bytes, and a word derived from that number in every 64-byte
 * line and at the end), so a dropped, duplicated, reordered or torn message
 * fails the run. After the last message of a size the receiver answers with
 * an 8-byte count; the sender's clock runs from its first send to that answer.
 */
#ifndef ZLB_STREAM_H
#define ZLB_STREAM_H

#include <stdint.h>
#include <string.h>

#include "zl-bench.h"

#define ST_MAX_RUNS 64
#define ST_MAX_BATCH 512 /* writev: two iovecs a message, IOV_MAX 1024 */

struct stream_opts {
	const char *url;       /* zipline methods */
	size_t sizes[ZLB_MAX_SIZES];
	int nsizes;
	uint64_t iters;        /* messages per size and run ... */
	uint64_t bytes;        /* ... at most this many bytes' worth (at least 64) */
	int runs;
	uint32_t window;       /* 0: as many in flight as the ring or socket holds */
	uint32_t batch;        /* messages per send call (zl_sendv, writev) */
	int zerocopy;          /* zipline: zl_send_reserve/commit, zl_recv_peek */
	int cpu_tx, cpu_rx;
	int64_t timeout_us;
	enum pp_mode mode;     /* stream: both sides, or one (--server: receiver) */
	int quiet;             /* stream-compare prints its own headers */
};

/* One method's figures: per size, one per run. */
struct stream_res {
	uint64_t msgs[ZLB_MAX_SIZES];
	double mps[ZLB_MAX_SIZES][ST_MAX_RUNS]; /* messages per second */
	int nruns[ZLB_MAX_SIZES];
};

/* Messages per size and run. */
static inline uint64_t stream_count(const struct stream_opts *o, size_t size)
{
	uint64_t n = size ? o->bytes / size : o->iters;
	if (n < 64)
		n = 64;
	return n < o->iters ? n : o->iters;
}

/* The receiver's count messages: every window/2 messages when a window is
 * set (never at the last one), and the final one. */
static inline uint64_t stream_credit_every(const struct stream_opts *o)
{
	return o->window > 1 ? o->window / 2 : 1;
}

static inline uint64_t st_word(uint64_t seq, uint64_t off)
{
	uint64_t x = seq * 0x9e3779b97f4a7c15ull ^ (off + 1) * 0xbf58476d1ce4e5b9ull;
	return x ^ x >> 29;
}

/* Write message seq's marks into buf[0, n). */
static inline void st_stamp(uint8_t *buf, size_t n, uint64_t seq)
{
	if (n < 8) {
		for (size_t i = 0; i < n; i++)
			buf[i] = (uint8_t)(seq * 131 + i * 7 + 1);
		return;
	}
	memcpy(buf, &seq, 8);
	for (size_t off = 64; off + 8 <= n; off += 64) {
		uint64_t w = st_word(seq, off);
		memcpy(buf + off, &w, 8);
	}
	if (n >= 16 && (n - 8) % 64) {
		uint64_t w = st_word(seq, n);
		memcpy(buf + n - 8, &w, 8);
	}
}

/* The sender's buffer: --batch messages of the largest size, each on its
 * own 64-byte boundary (NULL, with a message, when out of memory); and
 * its batch of messages of size, filled (returns their stride). */
uint8_t *stream_tx_alloc(const struct stream_opts *o);
size_t stream_tx_fill(const struct stream_opts *o, uint8_t *tx, size_t size);

/* 0 if buf[0, len) is message seq of n bytes; else print what is wrong
 * (who: the method) and return 1. */
int st_check_fail(const char *who, const uint8_t *buf, size_t len, size_t n, uint64_t seq);

static inline int st_check(const char *who, const uint8_t *buf, size_t len, size_t n,
			   uint64_t seq)
{
	if (len != n || n < 8)
		return st_check_fail(who, buf, len, n, seq);
	uint64_t w;
	memcpy(&w, buf, 8);
	if (w != seq)
		return st_check_fail(who, buf, len, n, seq);
	for (size_t off = 64; off + 8 <= n; off += 64) {
		memcpy(&w, buf + off, 8);
		if (w != st_word(seq, off))
			return st_check_fail(who, buf, len, n, seq);
	}
	if (n >= 16 && (n - 8) % 64) {
		memcpy(&w, buf + n - 8, 8);
		if (w != st_word(seq, n))
			return st_check_fail(who, buf, len, n, seq);
	}
	return 0;
}

/* Methods (stream.c, rawstream.c, spscstream.c): one run over every size,
 * the receiver forked and pinned; mps[s][run] filled. 0, or 1 (reported). */
int stream_zl_run(const struct stream_opts *o, struct stream_res *r, int run);
int stream_raw_run(const struct stream_opts *o, int unix_sock, struct stream_res *r, int run);
int stream_spsc_run(const struct stream_opts *o, struct stream_res *r, int run);
/* ucx_perftest -t test (ucp_am_bw, ucp_put_bw) on shm: 0, 1 failed, 3 not
 * installed. */
int stream_ucx_run(const struct stream_opts *o, const char *test, struct stream_res *r, int run);

/* Median, min and max over the runs of size index s. */
void stream_spread(const struct stream_res *r, int s, double *min, double *med, double *max);
void stream_print_header(void);
void stream_print_rows(const char *label, const struct stream_opts *o, const struct stream_res *r);
void stream_csv(FILE *f, const char *method, const char *url, const struct stream_opts *o,
		const struct stream_res *r);

/* zl-bench stream (one URL) and stream-compare. 0, or 1. */
int stream_run(const struct stream_opts *o, const char *csv);
int stream_spsc_cmd(const struct stream_opts *o, const char *csv);
int stream_compare_run(const struct stream_opts *o, const char *csv, const char *png);

#endif
