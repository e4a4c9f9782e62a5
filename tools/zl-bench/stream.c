/* SPDX-License-Identifier: MIT */
/*
 * zl-bench stream: one-way streaming over one zipline URL (see stream.h).
 * The receiver is a forked child on its own CPU (or, with --server and
 * --client, a process of its own, e.g. on another host); it answers with
 * its count of messages, every window/2 messages when --window is set and
 * after the last one of each size.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stream.h"

/* ---- checks and reports, for every method ------------------------------- */

int st_check_fail(const char *who, const uint8_t *buf, size_t len, size_t n, uint64_t seq)
{
	if (len != n) {
		fprintf(stderr, "zl-bench %s: ERROR: message %llu: %zu bytes, expected %zu (a "
				"torn, dropped or foreign message)\n",
			who, (unsigned long long)seq, len, n);
		return 1;
	}
	if (n < 8) {
		for (size_t i = 0; i < n; i++)
			if (buf[i] != (uint8_t)(seq * 131 + i * 7 + 1)) {
				fprintf(stderr, "zl-bench %s: ERROR: message %llu of %zu bytes: byte "
						"%zu wrong (dropped, duplicated, reordered or torn)\n",
					who, (unsigned long long)seq, n, i);
				return 1;
			}
		return 0;
	}
	uint64_t got;
	memcpy(&got, buf, 8);
	if (got != seq) {
		const char *why = got > seq ? "messages were dropped or reordered"
			: got + 1 == seq ? "a message was duplicated"
					 : "a message came again or out of order";
		fprintf(stderr, "zl-bench %s: ERROR: expected message %llu, got %llu (%s)\n", who,
			(unsigned long long)seq, (unsigned long long)got, why);
		return 1;
	}
	fprintf(stderr, "zl-bench %s: ERROR: message %llu of %zu bytes is torn: a word of its "
			"payload belongs to another message\n",
		who, (unsigned long long)seq, n);
	return 1;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

void stream_spread(const struct stream_res *r, int s, double *min, double *med, double *max)
{
	double v[ST_MAX_RUNS];
	int n = r->nruns[s];
	*min = *med = *max = 0;
	if (!n)
		return;
	memcpy(v, r->mps[s], sizeof(double) * (size_t)n);
	qsort(v, (size_t)n, sizeof(double), cmp_d);
	*min = v[0];
	*max = v[n - 1];
	*med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void stream_print_header(void)
{
	printf("%-24s %8s %9s %28s %26s\n", "method", "size", "msgs/run",
	       "msgs/s median [min-max]", "GB/s median [min-max]");
}

void stream_print_rows(const char *label, const struct stream_opts *o, const struct stream_res *r)
{
	for (int s = 0; s < o->nsizes; s++) {
		double lo, med, hi;
		if (!r->nruns[s])
			continue;
		stream_spread(r, s, &lo, &med, &hi);
		char a[32], b[32], c[32], range[112], gb[96];
		fmt_rate(a, sizeof(a), med);
		fmt_rate(b, sizeof(b), lo);
		fmt_rate(c, sizeof(c), hi);
		snprintf(range, sizeof(range), "%s [%s-%s]", a, b, c);
		double f = (double)o->sizes[s] / 1e9;
		snprintf(gb, sizeof(gb), "%.3f [%.3f-%.3f]", med * f, lo * f, hi * f);
		printf("%-24s %8zu %9llu %28s %26s\n", label, o->sizes[s],
		       (unsigned long long)r->msgs[s], range, gb);
	}
	fflush(stdout);
}

void stream_csv(FILE *f, const char *method, const char *url, const struct stream_opts *o,
		const struct stream_res *r)
{
	if (!f)
		return;
	for (int s = 0; s < o->nsizes; s++)
		for (int k = 0; k < r->nruns[s]; k++)
			fprintf(f, "%s,%s,%zu,%llu,%u,%u,%d,%.0f,%.4f\n", method, url, o->sizes[s],
				(unsigned long long)r->msgs[s], o->window, o->batch, k,
				r->mps[s][k], r->mps[s][k] * (double)o->sizes[s] / 1e9);
	fflush(f);
}

/* ---- the zipline receiver ------------------------------------------------ */

static int rx_err(const char *what, int rc)
{
	fprintf(stderr, "zl-bench stream receiver: %s: %s (%d)\n", what, zl_strerror(rc), rc);
	return 1;
}

static int send_count(zl_channel *ch, uint64_t v, int64_t to)
{
	int rc = zl_send(ch, &v, 8, to);
	return rc ? rx_err("zl_send of the count", rc) : 0;
}

/* The next message: in place (*peeked) with --zerocopy where it is one
 * record, else copied into buf. */
static int recv_one(zl_channel *ch, const struct stream_opts *o, uint8_t *buf, size_t cap,
		    const void **p, size_t *len, bool *peeked)
{
	if (o->zerocopy) {
		int rc = zl_recv_peek(ch, p, len, o->timeout_us);
		if (rc != -EMSGSIZE) {
			*peeked = !rc;
			return rc;
		}
	}
	*p = buf;
	return zl_recv(ch, buf, cap, len, o->timeout_us);
}

/* Receive and check every message of every size of one run. */
static int zl_receive(zl_channel *ch, const struct stream_opts *o, uint64_t *seq)
{
	size_t cap = 8;
	for (int s = 0; s < o->nsizes; s++)
		cap = o->sizes[s] > cap ? o->sizes[s] : cap;
	uint8_t *buf = malloc(cap);
	if (!buf)
		return rx_err("malloc", -ENOMEM);
	int ret = 1;
	uint64_t every = stream_credit_every(o);
	for (int s = 0; s < o->nsizes; s++) {
		uint64_t n = stream_count(o, o->sizes[s]);
		for (uint64_t i = 0; i < n; i++) {
			size_t len;
			const void *p = buf;
			bool peeked = false;
			int rc = recv_one(ch, o, buf, cap, &p, &len, &peeked);
			if (rc) {
				rx_err(o->zerocopy ? "zl_recv_peek" : "zl_recv", rc);
				fprintf(stderr, "zl-bench stream receiver: at message %llu (%zu B)\n",
					(unsigned long long)*seq, o->sizes[s]);
				goto out;
			}
			rc = st_check("stream receiver", p, len, o->sizes[s], (*seq)++);
			if (peeked)
				zl_recv_release(ch);
			if (rc)
				goto out;
			if (o->window && (i + 1) % every == 0 && i + 1 < n &&
			    send_count(ch, i + 1, o->timeout_us))
				goto out;
		}
		if (send_count(ch, n, o->timeout_us))
			goto out;
	}
	ret = 0;
out:
	free(buf);
	return ret;
}

/* Listen, report the URL (notify_fd >= 0: to the parent), serve the runs.
 * runs: how many runs this receiver serves. */
static int zl_receiver(const struct stream_opts *o, int notify_fd, int runs)
{
	zl_listener *l;
	char got[600];
	if (pin_self(o->cpu_rx))
		return 1;
	int rc = zl_listen(o->url, NULL, &l);
	if (rc) {
		if (notify_fd >= 0)
			dprintf(notify_fd, "ERR zl_listen(%s): %s\n", o->url, zl_strerror(rc));
		return rx_err("zl_listen", rc);
	}
	if (zl_listener_url(l, got, sizeof(got)))
		snprintf(got, sizeof(got), "%s", o->url);
	if (notify_fd >= 0) {
		dprintf(notify_fd, "OK %s\n", got);
		close(notify_fd);
	} else {
		printf("zl-bench stream: receiving on %s\n", got);
		fflush(stdout);
	}
	zl_channel *ch;
	rc = zl_accept(l, o->timeout_us, &ch);
	zl_listener_close(l);
	if (rc)
		return rx_err("zl_accept", rc);
	uint64_t seq = 1;
	int ret = 0;
	for (int r = 0; r < runs && !ret; r++)
		ret = zl_receive(ch, o, &seq);
	if (!ret) { /* the sender closes first: wait for its end */
		uint64_t v;
		size_t len;
		rc = zl_recv(ch, &v, 8, &len, o->timeout_us);
		if (!rc || rc == -EMSGSIZE) {
			fprintf(stderr, "zl-bench stream receiver: ERROR: a message after the last "
					"one (%zu bytes): duplicated or foreign\n", len);
			ret = 1;
		} else if (rc != -ECONNRESET) {
			ret = rx_err("waiting for the sender's close", rc);
		}
	}
	zl_close(ch);
	return ret;
}

static int receiver_child(void *arg, int wfd)
{
	return zl_receiver(arg, wfd, 1);
}

/* ---- the zipline sender -------------------------------------------------- */

/* A fault to inject, so that a test can see the receiver's checks fail:
 * ZL_BENCH_STREAM_FAULT=drop:N, dup:N or torn:N (message N is left out,
 * sent twice, or sent with a word of another message in its second line). */
enum fault { F_NONE, F_DROP, F_DUP, F_TORN };

static enum fault fault_at(uint64_t *at)
{
	static const char *const names[] = { "drop:", "dup:", "torn:" };
	const char *e = getenv("ZL_BENCH_STREAM_FAULT");
	for (int k = 0; e && k < 3; k++)
		if (!strncmp(e, names[k], strlen(names[k]))) {
			*at = strtoull(e + strlen(names[k]), NULL, 10);
			return (enum fault)(k + 1);
		}
	return F_NONE;
}

/* zl_send of message seq, or what the fault says instead. */
static int send_msg(zl_channel *ch, uint8_t *p, size_t size, uint64_t seq, int64_t to,
		    enum fault f, uint64_t at)
{
	if (__builtin_expect(f != F_NONE && seq == at, 0)) {
		if (f == F_DROP)
			return 0;
		if (f == F_TORN && size >= 72)
			p[64] ^= 1;
		if (f == F_DUP && zl_send(ch, p, size, to))
			return -EPIPE;
	}
	return zl_send(ch, p, size, to);
}

/* --zerocopy: message seq written straight into the ring in one pass (as
 * a producer would write its message there; marking it in the ring after
 * the copy, a second pass over lines the receiver is about to read, cost
 * 2x at 4 KiB), or what the fault says instead; copied where it does not
 * fit one record. */
static int send_zc(zl_channel *ch, uint8_t *tx, size_t size, uint64_t seq, int64_t to,
		   enum fault f, uint64_t at)
{
	bool hit = f != F_NONE && seq == at;
	if (size > zl_max_inline(ch)) {
		st_stamp(tx, size, seq);
		return send_msg(ch, tx, size, seq, to, f, at);
	}
	if (hit && f == F_DROP)
		return 0;
	for (int k = hit && f == F_DUP ? 2 : 1; k > 0; k--) {
		void *p;
		int rc;
		while ((rc = zl_send_reserve(ch, size, &p)) == -EAGAIN)
			if ((rc = zl_wait_writable(ch, size, to)))
				return rc;
		if (rc)
			return rc;
		st_stamp(tx, size, seq);
		memcpy(p, tx, size);
		if (hit && f == F_TORN && size >= 72)
			((uint8_t *)p)[64] ^= 1;
		if ((rc = zl_send_commit(ch, size)))
			return rc;
	}
	return 0;
}

/* Messages seq..seq+k-1 with zl_sendv (the fault applied to the vector),
 * until all are accepted. */
static int send_batch(zl_channel *ch, uint8_t *tx, size_t stride, size_t size, uint64_t k,
		      uint64_t seq, int64_t to, enum fault f, uint64_t at)
{
	struct zl_msgvec v[ST_MAX_BATCH + 1];
	size_t n = 0;
	for (uint64_t j = 0; j < k; j++) {
		uint8_t *p = tx + j * stride;
		st_stamp(p, size, seq + j);
		if (f != F_NONE && seq + j == at) {
			if (f == F_DROP)
				continue;
			if (f == F_TORN && size >= 72)
				p[64] ^= 1;
			if (f == F_DUP)
				v[n++] = (struct zl_msgvec){ p, size };
		}
		v[n++] = (struct zl_msgvec){ p, size };
	}
	for (size_t i = 0; i < n;) {
		int r = zl_sendv(ch, v + i, n - i, to);
		if (r <= 0)
			return r ? r : -EPROTO;
		i += (size_t)r;
	}
	return 0;
}

/* Wait for the receiver's count to pass want. */
static int await_count(zl_channel *ch, uint64_t *have, uint64_t want, int64_t to)
{
	while (*have < want) {
		uint64_t v;
		size_t len;
		int rc = zl_recv(ch, &v, 8, &len, to);
		if (rc) {
			fprintf(stderr, "zl-bench stream: waiting for the receiver's count: %s (%d)\n",
				zl_strerror(rc), rc);
			return 1;
		}
		if (len != 8 || v <= *have) {
			fprintf(stderr, "zl-bench stream: bad count from the receiver\n");
			return 1;
		}
		*have = v;
	}
	return 0;
}

/* n messages of size from tx (batch buffers of stride bytes); the elapsed
 * time until the receiver's final count. */
static int zl_send_size(zl_channel *ch, const struct stream_opts *o, size_t size, uint64_t n,
			uint8_t *tx, size_t stride, uint64_t *seq, uint64_t *ns)
{
	uint64_t credited = 0, t0 = mono_ns(), at = 0;
	uint32_t batch = o->batch ? o->batch : 1;
	enum fault f = fault_at(&at);
	for (uint64_t i = 0; i < n;) {
		uint64_t k = n - i < batch ? n - i : batch;
		if (o->window) {
			if (i - credited >= o->window &&
			    await_count(ch, &credited, i - o->window + 1, o->timeout_us))
				return 1;
			if (k > o->window - (i - credited))
				k = o->window - (i - credited);
		}
		int rc = 0;
		if (batch > 1) {
			rc = send_batch(ch, tx, stride, size, k, *seq, o->timeout_us, f, at);
		} else if (o->zerocopy) {
			rc = send_zc(ch, tx, size, *seq, o->timeout_us, f, at);
		} else {
			st_stamp(tx, size, *seq);
			rc = send_msg(ch, tx, size, *seq, o->timeout_us, f, at);
		}
		if (rc) {
			fprintf(stderr, "zl-bench stream: %s of message %llu (%zu B): %s (%d)\n",
				batch > 1 ? "zl_sendv" : o->zerocopy ? "zl_send_reserve/commit" : "zl_send",
				(unsigned long long)*seq, size,
				zl_strerror(rc), rc);
			return 1;
		}
		*seq += k;
		i += k;
	}
	if (await_count(ch, &credited, n, o->timeout_us))
		return 1;
	*ns = mono_ns() - t0;
	return 0;
}

uint8_t *stream_tx_alloc(const struct stream_opts *o)
{
	size_t maxsz = 8;
	for (int s = 0; s < o->nsizes; s++)
		maxsz = o->sizes[s] > maxsz ? o->sizes[s] : maxsz;
	uint32_t batch = o->batch ? o->batch : 1;
	maxsz = (maxsz + 63) & ~(size_t)63;
	uint8_t *tx = calloc(batch, maxsz);
	if (!tx)
		fprintf(stderr, "zl-bench stream: out of memory for %u x %zu B\n", batch, maxsz);
	return tx;
}

size_t stream_tx_fill(const struct stream_opts *o, uint8_t *tx, size_t size)
{
	/* the batch's messages lie next to each other (a stride of the
	 * largest size would put them in the same cache sets) */
	size_t stride = (size + 63) & ~(size_t)63;
	for (uint32_t j = 0; j < (o->batch ? o->batch : 1); j++)
		memset(tx + j * stride, 0x5a, size);
	return stride;
}

/* One run over every size on ch. */
static int zl_sender(const struct stream_opts *o, zl_channel *ch, struct stream_res *r, int run,
		     uint64_t *seq)
{
	uint8_t *tx = stream_tx_alloc(o);
	int ret = 1;
	if (!tx)
		return 1;
	for (int s = 0; s < o->nsizes; s++) {
		uint64_t n = stream_count(o, o->sizes[s]), ns;
		size_t stride = stream_tx_fill(o, tx, o->sizes[s]);
		if (zl_send_size(ch, o, o->sizes[s], n, tx, stride, seq, &ns))
			goto out;
		r->msgs[s] = n;
		r->mps[s][run] = (double)n * 1e9 / (double)(ns ? ns : 1);
		r->nruns[s] = run + 1;
	}
	ret = 0;
out:
	free(tx);
	return ret;
}

static zl_channel *connect_to(const char *url, const struct stream_opts *o)
{
	zl_channel *ch = NULL;
	int rc = zl_connect(url, NULL, o->timeout_us, &ch);
	if (rc)
		fprintf(stderr, "zl-bench stream: zl_connect(%s): %s (%d)\n", url, zl_strerror(rc),
			rc);
	return ch;
}

int stream_zl_run(const struct stream_opts *o, struct stream_res *r, int run)
{
	int rfd;
	char line[800];
	pid_t pid = spawn_child(receiver_child, (void *)o, &rfd);
	if (pid < 0)
		return 1;
	if (read_line(rfd, line, sizeof(line), (int)(o->timeout_us / 1000)) < 0 ||
	    strncmp(line, "OK ", 3)) {
		fprintf(stderr, "zl-bench stream: the receiver for %s did not start: %s\n", o->url,
			strncmp(line, "ERR ", 4) ? "no answer" : line + 4);
		close(rfd);
		kill_child(pid);
		return 1;
	}
	close(rfd);
	uint64_t seq = 1;
	zl_channel *ch = pin_self(o->cpu_tx) ? NULL : connect_to(line + 3, o);
	int rc = ch ? zl_sender(o, ch, r, run, &seq) : 1;
	zl_close(ch);
	int st = reap_child(pid, rc ? 200 : (int)(o->timeout_us / 1000));
	if (st)
		explain_status("the stream receiver", st);
	return rc || st ? 1 : 0;
}

/* ---- zl-bench stream ------------------------------------------------------ */

static void stream_describe(const struct stream_opts *o)
{
	printf("one-way stream: per size min(%llu, %llu B / size) messages (at least 64), %d "
	       "run(s); window %s, batch %u%s; every message checked by the receiver (length, "
	       "sequence number, a word per 64-byte line)\n",
	       (unsigned long long)o->iters, (unsigned long long)o->bytes, o->runs,
	       o->window ? "set" : "the ring or socket buffer", o->batch ? o->batch : 1,
	       o->zerocopy ? ", zero copy (written into the ring, checked in place)" : "");
	if (o->window)
		printf("window: at most %u messages in flight (the receiver counts back every %llu)\n",
		       o->window, (unsigned long long)stream_credit_every(o));
	char pin[128];
	describe_pin(pin, sizeof(pin), o->cpu_tx, o->cpu_rx, o->mode == PP_BOTH);
	printf("%s (client = sender, server = receiver)\n", pin);
}

static FILE *csv_open(const char *csv)
{
	FILE *f = csv ? fopen(csv, "a") : NULL;
	if (csv && !f)
		perror(csv);
	if (f && ftell(f) == 0)
		fprintf(f, "method,url,size,msgs,window,batch,run,msgs_per_s,gb_per_s\n");
	return f;
}

int stream_spsc_cmd(const struct stream_opts *o, const char *csv)
{
	FILE *f = csv_open(csv);
	struct stream_res *r = calloc(1, sizeof(*r));
	int rc = r && (f || !csv) ? 0 : 1;
	struct stream_opts so = *o;
	so.window = 0;
	so.batch = 1;
	printf("zl-bench spsc --stream: the streaming floor, a bare copying ring of fixed slots\n");
	stream_describe(&so);
	for (int k = 0; k < o->runs && !rc; k++)
		rc = stream_spsc_run(&so, r, k);
	if (!rc) {
		stream_print_header();
		stream_print_rows("spsc floor", &so, r);
		stream_csv(f, "spsc", "bare copying ring", &so, r);
	}
	if (f)
		fclose(f);
	free(r);
	return rc;
}

int stream_run(const struct stream_opts *o, const char *csv)
{
	if (o->mode == PP_SERVER)
		return zl_receiver(o, -1, o->runs);
	FILE *f = csv_open(csv);
	struct stream_res *r = calloc(1, sizeof(*r));
	int rc = r && (f || !csv) ? 0 : 1;
	printf("zl-bench stream: %s\n", o->url);
	stream_describe(o);
	if (o->mode == PP_CLIENT) {
		/* one channel for all runs: the receiver serves o->runs */
		uint64_t seq = 1;
		zl_channel *ch = rc || pin_self(o->cpu_tx) ? NULL : connect_to(o->url, o);
		rc = ch ? 0 : 1;
		for (int k = 0; k < o->runs && !rc; k++)
			rc = zl_sender(o, ch, r, k, &seq);
		zl_close(ch);
	} else {
		for (int k = 0; k < o->runs && !rc; k++)
			rc = stream_zl_run(o, r, k);
	}
	if (!rc) {
		stream_print_header();
		stream_print_rows(o->url, o, r);
		stream_csv(f, "zipline", o->url, o, r);
	}
	if (f)
		fclose(f);
	free(r);
	return rc;
}
