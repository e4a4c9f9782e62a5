/* SPDX-License-Identifier: MIT */
/*
 * zipline ping-pong: a client sends one message, an echo server sends it
 * back, one message outstanding at a time. Each sample is one round trip.
 * The echoed payload is checked on every round trip so that a transport
 * that drops, reorders or corrupts messages fails loudly instead of
 * producing good-looking numbers.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zipline.h"
#include "zl-bench.h"

/* ---- payload stamping and checking ------------------------------------ */

/* A size-dependent pattern, so stale bytes of another size never match. */
static void fill_template(uint8_t *tx, size_t size)
{
	for (size_t j = 0; j < size; j++)
		tx[j] = (uint8_t)(j * 7 + 1 + size);
}

/* Make this round trip's message unique: counter in the first 8 bytes
 * (or first byte), a counter-derived last byte. */
static inline void stamp(uint8_t *tx, size_t size, uint64_t ctr)
{
	if (size >= 8)
		memcpy(tx, &ctr, 8);
	else if (size)
		tx[0] = (uint8_t)ctr;
	if (size > 8 || (size > 1 && size < 8))
		tx[size - 1] = (uint8_t)(ctr * 131 + 7);
}

/* First 8 bytes, the middle byte and the last byte must come back. */
static inline int echo_ok(const uint8_t *rx, size_t len, const uint8_t *tx, size_t size)
{
	if (len != size)
		return 0;
	if (!size)
		return 1;
	size_t head = size < 8 ? size : 8;
	return !memcmp(rx, tx, head) && rx[size / 2] == tx[size / 2] &&
	       rx[size - 1] == tx[size - 1];
}

static void report_mismatch(const uint8_t *rx, size_t len, const uint8_t *tx, size_t size)
{
	fprintf(stderr, "zl-bench: ERROR: the echo of a %zu-byte message came back wrong: ", size);
	if (len != size) {
		fprintf(stderr, "got %zu bytes back\n", len);
		return;
	}
	if (size >= 8) {
		uint64_t want, got;
		memcpy(&want, tx, 8);
		memcpy(&got, rx, 8);
		fprintf(stderr, "counter %llu expected %llu, ", (unsigned long long)got,
			(unsigned long long)want);
	}
	fprintf(stderr, "first byte 0x%02x/0x%02x, last byte 0x%02x/0x%02x (got/expected)\n",
		rx[0], tx[0], rx[size - 1], tx[size - 1]);
}

/* ---- echo server ------------------------------------------------------ */

static int server_err(const char *what, int rc)
{
	fprintf(stderr, "zl-bench server: %s: %s (%d)\n", what, zl_strerror(rc), rc);
	return 1;
}

/* The zero-copy answer to a peeked message of len bytes: written in place
 * into our ring. Echoed whole, or with unread (as ucx_perftest's am_lat,
 * whose receiver never touches the data) built from our own buffer with
 * only the bytes the client checks (echo_ok) carried over, so that the
 * rest of the message is never read. */
static int answer_in_place(zl_channel *ch, const uint8_t *in, size_t len, const uint8_t *own,
			   int unread, int64_t to)
{
	void *p;
	int rc = reserve_bounded(ch, len, &p, to);
	if (rc == -EMSGSIZE) /* larger than one record: echo by copy */
		return zl_send(ch, in, len, to);
	if (rc)
		return rc;
	uint8_t *out = p;
	if (unread && len >= 8) {
		memcpy(out, own, len);
		memcpy(out, in, 8);
		out[len / 2] = in[len / 2];
		out[len - 1] = in[len - 1];
	} else {
		memcpy(out, in, len);
	}
	return zl_send_commit(ch, len);
}

/* Echo every message until the client closes. Returns 0 on a clean close. */
static int echo_loop(zl_channel *ch, const struct pp_opts *o)
{
	/* also the unread answers' source: as large as any peeked message */
	size_t cap = zl_max_inline(ch) > 65536 ? zl_max_inline(ch) : 65536, len;
	char *buf = calloc(1, cap);
	int64_t to = o->timeout_us;
	int rc;
	if (!buf)
		return server_err("malloc", -ENOMEM);
	for (;;) {
		if (o->zerocopy) {
			const void *in;
			rc = zl_recv_peek(ch, &in, &len, to);
			if (rc == 0) {
				rc = answer_in_place(ch, in, len, (uint8_t *)buf, o->unread, to);
				int rr = zl_recv_release(ch);
				if (!rc)
					rc = rr;
				if (rc)
					break;
				continue;
			}
			if (rc != -EMSGSIZE)
				break;
			/* fragmented message: the copy path below reads it */
		}
		rc = zl_recv(ch, buf, cap, &len, to);
		if (rc == -EMSGSIZE) {
			char *nb = realloc(buf, len);
			if (!nb) {
				rc = -ENOMEM;
				break;
			}
			buf = nb;
			cap = len;
			continue;
		}
		if (rc)
			break;
		rc = zl_send(ch, buf, len, to);
		if (rc)
			break;
	}
	free(buf);
	if (rc == -ECONNRESET)
		return 0; /* the client is done */
	return server_err("echo", rc);
}

/* One wait of an event-loop server: 0 once something may be ready.
 * *polls counts its poll(2) calls. */
static int loop_wait(zl_channel *ch, int fd, zl_poller *p, enum pp_loop loop, int64_t to,
		     uint64_t *polls)
{
	if (loop == LOOP_POLLER) {
		struct zl_poll_event ev;
		int n = zl_poller_wait(p, &ev, 1, to);
		return n > 0 ? 0 : n;
	}
	if (loop == LOOP_ARM) {
		int r = zl_channel_arm(ch);
		if (r)
			return r == -EBUSY ? 0 : r;
	}
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	(*polls)++;
	int n = poll(&pfd, 1, to < 0 ? -1 : (int)(to / 1000));
	return n > 0 ? 0 : n == 0 ? -ETIMEDOUT : -errno;
}

/* The server's own counts per round trip: every system call (the
 * channel's, the poll(2) calls of the loop, the poller's epoll_wait). */
static void print_loop_counts(zl_channel *ch, zl_poller *p, const struct pp_opts *o,
			      uint64_t msgs, uint64_t polls)
{
	static const char *const names[] = {"block", "poll", "arm", "poller"};
	struct zl_channel_info ci;
	struct zl_poller_info pi = {0};
	double m = msgs ? (double)msgs : 1;
	zl_channel_info(ch, &ci);
	if (p)
		zl_poller_info(p, &pi);
	uint64_t sys = ci.syscalls + polls + pi.kernel_looks + pi.sleeps;
	printf("echo server (--loop %s), per round trip over %llu: system calls %.4f, arms "
	       "%.4f, membarriers %.4f, sleeps %.4f, wake-ups sent %.4f\n",
	       names[o->loop], (unsigned long long)msgs, (double)sys / m,
	       (double)(ci.arms + pi.arms) / m, (double)ci.fences / m,
	       (double)(ci.sleeps + pi.sleeps + polls) / m, (double)ci.wakeups_sent / m);
	fflush(stdout);
}

/* Echo through an event loop (--loop poll, arm, poller): read every message
 * there with zl_recv(..., 0), then wait. 0 on a clean close. */
static int event_loop(zl_channel *ch, const struct pp_opts *o)
{
	size_t cap = 65536, len;
	char *buf = malloc(cap);
	zl_poller *p = NULL;
	int fd = -1, rc = buf ? 0 : -ENOMEM;
	uint64_t msgs = 0, polls = 0;
	if (!rc && o->loop == LOOP_POLLER) {
		rc = zl_poller_create(-1, &p);
		if (!rc && (rc = zl_poller_add_channel(p, ch, ZL_POLLIN, NULL)) > 0)
			rc = 0;
	} else if (!rc) {
		fd = zl_channel_fd(ch);
		rc = fd < 0 ? fd : 0;
	}
	while (!rc) {
		rc = zl_recv(ch, buf, cap, &len, 0);
		if (rc == -EAGAIN) {
			rc = loop_wait(ch, fd, p, o->loop, o->timeout_us, &polls);
		} else if (rc == -EMSGSIZE) {
			char *nb = realloc(buf, len);
			rc = nb ? 0 : -ENOMEM;
			if (nb)
				buf = nb, cap = len;
		} else if (!rc) {
			rc = zl_send(ch, buf, len, o->timeout_us);
			msgs++;
		}
	}
	if (rc == -ECONNRESET)
		print_loop_counts(ch, p, o, msgs, polls);
	zl_poller_destroy(p);
	free(buf);
	return rc == -ECONNRESET ? 0 : server_err("echo", rc);
}

/* If the listener reports its URL without the query (?busy_poll=1...),
 * give the client the same options the server was started with. */
static void merge_query(const char *orig, const char *got, char *out, size_t cap)
{
	const char *q = strchr(orig, '?');
	if (q && !strchr(got, '?'))
		snprintf(out, cap, "%s%s", got, q);
	else
		snprintf(out, cap, "%s", got);
}

static const char *data_path(const struct pp_opts *o)
{
	if (o->unread)
		return "zero-copy (zl_send_reserve/commit, zl_recv_peek/release), payload unread: "
		       "the server answers from its own buffer with the checked bytes carried over";
	return o->zerocopy ? "zero-copy (zl_send_reserve/commit, zl_recv_peek/release)"
			   : "copy (zl_send / zl_recv)";
}

/* The server side. notify_fd >= 0: we are the forked child; report
 * "OK <url>" or "ERR <text>" there once listening. */
static int server_main(const struct pp_opts *o, int notify_fd)
{
	zl_listener *l;
	char got[600], url[700];
	if (pin_self(o->cpu_server)) {
		if (notify_fd >= 0)
			dprintf(notify_fd, "ERR cannot pin the echo server to cpu%d\n", o->cpu_server);
		return 1;
	}
	int rc = zl_listen(o->url, NULL, &l);
	if (rc) {
		if (notify_fd >= 0)
			dprintf(notify_fd, "ERR zl_listen(%s): %s\n", o->url, zl_strerror(rc));
		else
			server_err("zl_listen", rc);
		return 1;
	}
	if (zl_listener_url(l, got, sizeof(got)))
		snprintf(got, sizeof(got), "%s", o->url);
	merge_query(o->url, got, url, sizeof(url));
	if (notify_fd >= 0) {
		dprintf(notify_fd, "OK %s\n", url);
		close(notify_fd);
	} else {
		printf("zl-bench server: listening on %s (data path: %s), waiting up to %.0f s for a "
		       "client\n",
		       url, data_path(o), (double)o->timeout_us / 1e6);
		fflush(stdout);
	}
	zl_channel *ch;
	rc = zl_accept(l, o->timeout_us, &ch);
	zl_listener_close(l);
	if (rc)
		return server_err("zl_accept", rc);
	rc = o->loop == LOOP_BLOCK ? echo_loop(ch, o) : event_loop(ch, o);
	zl_close(ch);
	if (notify_fd < 0 && !rc)
		printf("zl-bench server: client closed the channel; done\n");
	return rc;
}

static int server_child(void *arg, int wfd)
{
	return server_main(arg, wfd);
}

/* ---- client ----------------------------------------------------------- */

/* n round trips of one size; samples == NULL for the warm-up. Returns 0,
 * a negative zipline error (with *what set), or 1 after a mismatch.
 * Messages alternate between tx[0] and tx[1], so that each echo is checked
 * against its message while the next message travels: the check is off the
 * timed path, as a server's work on a reply would overlap the next request
 * (it cost about 3% of a 64 B shm round trip on the path). */
static int run_copy(zl_channel *ch, size_t size, uint8_t *const tx[2], uint8_t *rx, uint64_t n,
		    uint64_t *samples, uint64_t *ctr, int64_t to, const char **what)
{
	size_t len = 0;
	int rc;
	uint64_t prev = timer_now();
	for (uint64_t i = 0; i < n; i++) {
		uint8_t *t = tx[i & 1];
		stamp(t, size, (*ctr)++);
		rc = zl_send(ch, t, size, to);
		if (rc) {
			*what = "zl_send";
			return rc;
		}
		if (i && !echo_ok(rx, len, tx[(i - 1) & 1], size)) {
			report_mismatch(rx, len, tx[(i - 1) & 1], size);
			return 1;
		}
		rc = zl_recv(ch, rx, size, &len, to);
		if (rc) {
			*what = "zl_recv";
			return rc;
		}
		/* one timestamp per round trip: the end of this one starts the
		 * next, so the samples add up exactly to the elapsed time */
		uint64_t now = timer_now();
		if (samples)
			samples[i] = now - prev;
		prev = now;
	}
	if (n && !echo_ok(rx, len, tx[(n - 1) & 1], size)) {
		report_mismatch(rx, len, tx[(n - 1) & 1], size);
		return 1;
	}
	return 0;
}

/* Check a peeked echo in place, then release it. */
static int check_release(zl_channel *ch, const void *in, size_t len, const uint8_t *t,
			 size_t size, const char **what)
{
	if (!echo_ok(in, len, t, size)) {
		report_mismatch(in, len, t, size);
		return 1;
	}
	int rc = zl_recv_release(ch);
	if (rc)
		*what = "zl_recv_release";
	return rc;
}

/* As run_copy with zl_send_reserve/commit and zl_recv_peek/release: each
 * echo is held (peeked) until the next message has been committed, then
 * checked in place and released while that message travels. */
static int run_zerocopy(zl_channel *ch, size_t size, uint8_t *const tx[2], uint64_t n,
			uint64_t *samples, uint64_t *ctr, int64_t to, const char **what)
{
	const void *in = NULL;
	size_t len = 0;
	int rc;
	uint64_t prev = timer_now();
	for (uint64_t i = 0; i < n; i++) {
		uint8_t *t = tx[i & 1];
		void *out;
		stamp(t, size, (*ctr)++);
		rc = reserve_bounded(ch, size, &out, to);
		if (rc) {
			*what = "zl_send_reserve";
			return rc;
		}
		memcpy(out, t, size); /* "produce" the message in place */
		rc = zl_send_commit(ch, size);
		if (rc) {
			*what = "zl_send_commit";
			return rc;
		}
		if (i && (rc = check_release(ch, in, len, tx[(i - 1) & 1], size, what)))
			return rc;
		rc = zl_recv_peek(ch, &in, &len, to);
		if (rc) {
			*what = "zl_recv_peek";
			return rc;
		}
		uint64_t now = timer_now();
		if (samples)
			samples[i] = now - prev;
		prev = now;
	}
	return n ? check_release(ch, in, len, tx[(n - 1) & 1], size, what) : 0;
}

static void print_header(const struct pp_opts *o, const char *url);

static int client_main(const struct pp_opts *o, const char *url, pid_t server,
		       const struct sink *sink, struct result *res)
{
	zl_channel *ch = NULL;
	uint8_t *tx = NULL, *rx = NULL;
	uint64_t *samples = NULL, ctr = 1;
	size_t maxsz = 1;
	int rc, ret = 1;

	for (int i = 0; i < o->nsizes; i++)
		if (o->sizes[i] > maxsz)
			maxsz = o->sizes[i];
	tx = malloc(2 * maxsz); /* two messages: see run_copy */
	rx = malloc(maxsz);
	/* preallocated and touched: no allocation or page fault when timing */
	samples = malloc(o->iters * sizeof(*samples));
	if (!tx || !rx || !samples) {
		fprintf(stderr, "zl-bench: out of memory\n");
		goto out;
	}
	memset(samples, 0, o->iters * sizeof(*samples));
	memset(rx, 0, maxsz);

	rc = zl_connect(url, NULL, o->timeout_us, &ch);
	if (rc) {
		fprintf(stderr, "zl-bench: zl_connect(%s): %s (%d)\n", url, zl_strerror(rc), rc);
		goto out;
	}
	if (!o->quiet_header)
		print_header(o, url);
	pid_t pids[2] = {0, server};
	int npids = server > 0 ? 2 : 1;

	for (int s = 0; s < o->nsizes; s++) {
		size_t size = o->sizes[s];
		const char *what = "";
		int zc = o->zerocopy;
		if (zc && size > zl_max_inline(ch)) {
			printf("note: %zu B is larger than one record (zl_max_inline = %zu): copy "
			       "path for this size\n",
			       size, zl_max_inline(ch));
			zc = 0;
		}
		uint8_t *const txs[2] = {tx, tx + maxsz};
		fill_template(txs[0], size);
		fill_template(txs[1], size);
		rc = zc ? run_zerocopy(ch, size, txs, o->warmup, NULL, &ctr, o->timeout_us, &what)
			: run_copy(ch, size, txs, rx, o->warmup, NULL, &ctr, o->timeout_us, &what);
		struct load_snap l0, l1;
		load_snap(&l0, pids, npids);
		uint64_t t0 = mono_ns();
		if (!rc)
			rc = zc ? run_zerocopy(ch, size, txs, o->iters, samples, &ctr, o->timeout_us,
					       &what)
				: run_copy(ch, size, txs, rx, o->iters, samples, &ctr, o->timeout_us,
					   &what);
		uint64_t t1 = mono_ns();
		load_snap(&l1, pids, npids);
		if (rc) {
			if (rc < 0)
				fprintf(stderr, "zl-bench: size %zu: %s: %s (%d)\n", size, what,
					zl_strerror(rc), rc);
			goto out;
		}
		res[s].size = size;
		res[s].iters = o->iters;
		report_result(samples, o->iters, t1 - t0, &l0, &l1, sink, &res[s]);
	}
	ret = 0;
out:
	zl_close(ch);
	free(samples);
	free(tx);
	free(rx);
	return ret;
}

static void print_header(const struct pp_opts *o, const char *url)
{
	int v = zl_version();
	printf("zl-bench pingpong: zipline %d.%d.%d, %s", v / 10000, v / 100 % 100, v % 100,
	       o->url);
	if (strcmp(url, o->url))
		printf(" (connecting to %s)", url);
	printf("\ndata path: %s\n", data_path(o));
	printf("RTT (round trip), microseconds: %llu timed round trips per size after %llu "
	       "warm-up; every echo checked, while the next message travels\n",
	       (unsigned long long)o->iters, (unsigned long long)o->warmup);
	report_setup(o->cpu_client, o->cpu_server, o->mode == PP_BOTH);
	if (o->mode == PP_CLIENT)
		printf("note: a server on this host counts as co-tenant load in the warnings\n");
	report_columns();
}

int pingpong_run(const struct pp_opts *o, const struct sink *sink, struct result *res)
{
	if (o->mode == PP_SERVER)
		return server_main(o, -1);
	if (o->mode == PP_CLIENT) {
		if (pin_self(o->cpu_client))
			return 1;
		return client_main(o, o->url, 0, sink, res);
	}

	int rfd;
	char line[800];
	pid_t pid = spawn_child(server_child, (void *)o, &rfd);
	if (pid < 0)
		return 1;
	int timeout_ms = (int)(o->timeout_us / 1000);
	if (read_line(rfd, line, sizeof(line), timeout_ms) < 0 || strncmp(line, "OK ", 3)) {
		fprintf(stderr, "zl-bench: echo server for %s did not start: %s\n", o->url,
			strncmp(line, "ERR ", 4) ? "no answer" : line + 4);
		close(rfd);
		kill_child(pid);
		return 1;
	}
	close(rfd);
	const char *url = line + 3;
	if (pin_self(o->cpu_client)) {
		kill_child(pid);
		return 1;
	}
	int rc = client_main(o, url, pid, sink, res);
	if (rc) {
		/* give the server a moment to print why it failed, if it did */
		explain_status("the echo server", reap_child(pid, 200));
		return 1;
	}
	int st = reap_child(pid, 5000);
	if (st != 0) {
		explain_status("the echo server", st);
		return 1;
	}
	return 0;
}
