/* SPDX-License-Identifier: MIT */
/*
 * The streaming baseline without zipline: the same framed messages (a
 * 4-byte little-endian length, then the payload) over a plain TCP socket on
 * 127.0.0.1 (TCP_NODELAY, as zipline's tcp://) or a Unix stream socket.
 * The sender writes each message with one writev(2), or --batch messages
 * per writev; the receiver reads into a 256 KiB buffer, takes the frames out
 * of it (a frame larger than what is buffered is read straight into the
 * message buffer) and checks every message as zipline's receiver does.
 * The counts go back as bare 8-byte words. Every wait is bounded by
 * --timeout (SO_RCVTIMEO, SO_SNDTIMEO).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "stream.h"

#define RBUF (256u << 10)

struct raw_args {
	const struct stream_opts *o;
	int lfd;
};

static void set_timeouts(int fd, int64_t us)
{
	struct timeval tv = { .tv_sec = us / 1000000, .tv_usec = us % 1000000 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* Read exactly n bytes: 0, or -1 (reported). */
static int read_all(int fd, void *p, size_t n, const char *who)
{
	uint8_t *b = p;
	while (n) {
		ssize_t k = read(fd, b, n);
		if (k > 0) {
			b += k;
			n -= (size_t)k;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		fprintf(stderr, "zl-bench %s: read: %s\n", who,
			k == 0 ? "end of stream" : errno == EAGAIN ? "timed out" : strerror(errno));
		return -1;
	}
	return 0;
}

static int write_all(int fd, const void *p, size_t n, const char *who)
{
	const uint8_t *b = p;
	while (n) {
		ssize_t k = write(fd, b, n);
		if (k > 0) {
			b += k;
			n -= (size_t)k;
		} else if (!(k < 0 && errno == EINTR)) {
			fprintf(stderr, "zl-bench %s: write: %s\n", who,
				k < 0 && errno == EAGAIN ? "timed out" : strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* writev every byte of iov[0, n) (modified). */
static int writev_all(int fd, struct iovec *iov, int n)
{
	while (n) {
		ssize_t k = writev(fd, iov, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			fprintf(stderr, "zl-bench raw stream: writev: %s\n",
				k < 0 && errno == EAGAIN ? "timed out" : strerror(errno));
			return -1;
		}
		while (n && (size_t)k >= iov->iov_len) {
			k -= (ssize_t)iov->iov_len;
			iov++, n--;
		}
		if (n) {
			iov->iov_base = (uint8_t *)iov->iov_base + k;
			iov->iov_len -= (size_t)k;
		}
	}
	return 0;
}

/* The receiver: frames out of rbuf[head, tail). */
static int raw_receive(int fd, const struct stream_opts *o)
{
	size_t cap = 8;
	for (int s = 0; s < o->nsizes; s++)
		cap = o->sizes[s] > cap ? o->sizes[s] : cap;
	uint8_t *rbuf = malloc(RBUF), *msg = malloc(cap);
	size_t head = 0, tail = 0;
	uint64_t seq = 1, every = stream_credit_every(o);
	int ret = 1;
	if (!rbuf || !msg)
		goto out;
	for (int s = 0; s < o->nsizes; s++) {
		uint64_t n = stream_count(o, o->sizes[s]);
		for (uint64_t i = 0; i < n; i++) {
			while (tail - head < 4) {
				if (head) {
					memmove(rbuf, rbuf + head, tail - head);
					tail -= head, head = 0;
				}
				ssize_t k = read(fd, rbuf + tail, RBUF - tail);
				if (k <= 0 && !(k < 0 && errno == EINTR)) {
					fprintf(stderr, "zl-bench raw stream receiver: read: %s\n",
						k == 0 ? "end of stream" : strerror(errno));
					goto out;
				}
				tail += k > 0 ? (size_t)k : 0;
			}
			uint32_t len;
			memcpy(&len, rbuf + head, 4);
			len = le32toh(len);
			head += 4;
			if (len > cap) {
				st_check_fail("raw stream receiver", msg, len, o->sizes[s], seq);
				goto out;
			}
			size_t have = tail - head < len ? tail - head : len;
			memcpy(msg, rbuf + head, have);
			head += have;
			if (have < len &&
			    read_all(fd, msg + have, len - have, "raw stream receiver"))
				goto out;
			if (head == tail)
				head = tail = 0;
			if (st_check("raw stream receiver", msg, len, o->sizes[s], seq++))
				goto out;
			if (o->window && (i + 1) % every == 0 && i + 1 < n) {
				uint64_t c = i + 1;
				if (write_all(fd, &c, 8, "raw stream receiver"))
					goto out;
			}
		}
		if (write_all(fd, &n, 8, "raw stream receiver"))
			goto out;
	}
	ret = 0;
out:
	free(rbuf);
	free(msg);
	return ret;
}

static int raw_child(void *arg, int wfd)
{
	struct raw_args *a = arg;
	if (pin_self(a->o->cpu_rx))
		return 1;
	dprintf(wfd, "OK\n");
	close(wfd);
	int fd = accept(a->lfd, NULL, NULL);
	if (fd < 0) {
		perror("zl-bench raw stream receiver: accept");
		return 1;
	}
	close(a->lfd);
	set_timeouts(fd, a->o->timeout_us);
	int r = raw_receive(fd, a->o);
	close(fd);
	return r;
}

static int await(int fd, uint64_t *have, uint64_t want)
{
	while (*have < want) {
		uint64_t v;
		if (read_all(fd, &v, 8, "raw stream"))
			return 1;
		if (v <= *have) {
			fprintf(stderr, "zl-bench raw stream: bad count from the receiver\n");
			return 1;
		}
		*have = v;
	}
	return 0;
}

static int raw_send_size(int fd, const struct stream_opts *o, size_t size, uint64_t n,
			 uint8_t *tx, size_t stride, uint64_t *seq, uint64_t *ns)
{
	struct iovec iov[2 * ST_MAX_BATCH];
	uint32_t hdr = htole32((uint32_t)size), batch = o->batch ? o->batch : 1;
	uint64_t credited = 0, t0 = mono_ns();
	for (uint64_t i = 0; i < n;) {
		uint64_t k = n - i < batch ? n - i : batch;
		if (o->window) {
			if (i - credited >= o->window && await(fd, &credited, i - o->window + 1))
				return 1;
			if (k > o->window - (i - credited))
				k = o->window - (i - credited);
		}
		for (uint64_t j = 0; j < k; j++) {
			st_stamp(tx + j * stride, size, *seq + j);
			iov[2 * j] = (struct iovec){ &hdr, 4 };
			iov[2 * j + 1] = (struct iovec){ tx + j * stride, size };
		}
		if (writev_all(fd, iov, (int)(2 * k)))
			return 1;
		*seq += k;
		i += k;
	}
	if (await(fd, &credited, n))
		return 1;
	*ns = mono_ns() - t0;
	return 0;
}

/* A listening socket on 127.0.0.1:0 or a fresh Unix path; the peer's
 * address in *sa. */
static int raw_listen(int unix_sock, struct sockaddr_storage *sa, socklen_t *salen)
{
	int fd = socket(unix_sock ? AF_UNIX : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	memset(sa, 0, sizeof(*sa));
	if (unix_sock) {
		struct sockaddr_un *u = (struct sockaddr_un *)sa;
		u->sun_family = AF_UNIX;
		snprintf(u->sun_path, sizeof(u->sun_path), "/tmp/zl-bench-raw-%d.sock", (int)getpid());
		unlink(u->sun_path);
		*salen = sizeof(*u);
	} else {
		struct sockaddr_in *in = (struct sockaddr_in *)sa;
		in->sin_family = AF_INET;
		in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		*salen = sizeof(*in);
	}
	if (bind(fd, (struct sockaddr *)sa, *salen) || listen(fd, 1) ||
	    getsockname(fd, (struct sockaddr *)sa, salen)) {
		close(fd);
		return -1;
	}
	return fd;
}

int stream_raw_run(const struct stream_opts *o, int unix_sock, struct stream_res *r, int run)
{
	struct sockaddr_storage sa;
	socklen_t salen = sizeof(sa);
	int lfd = raw_listen(unix_sock, &sa, &salen), fd = -1, ret = 1;
	if (lfd < 0) {
		perror("zl-bench raw stream: listen");
		return 1;
	}
	struct raw_args a = { o, lfd };
	pid_t pid = start_peer(raw_child, &a, o->cpu_tx, "raw stream");
	uint8_t *tx = stream_tx_alloc(o);
	close(lfd);
	if (pid < 0 || !tx)
		goto out;
	fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (!unix_sock)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, salen)) {
		perror("zl-bench raw stream: connect");
		goto out;
	}
	set_timeouts(fd, o->timeout_us);
	uint64_t seq = 1;
	for (int s = 0; s < o->nsizes; s++) {
		uint64_t n = stream_count(o, o->sizes[s]), ns;
		size_t stride = stream_tx_fill(o, tx, o->sizes[s]);
		if (raw_send_size(fd, o, o->sizes[s], n, tx, stride, &seq, &ns))
			goto out;
		r->msgs[s] = n;
		r->mps[s][run] = (double)n * 1e9 / (double)(ns ? ns : 1);
		r->nruns[s] = run + 1;
	}
	ret = 0;
out:
	if (fd >= 0)
		close(fd);
	if (unix_sock)
		unlink(((struct sockaddr_un *)&sa)->sun_path);
	free(tx);
	if (pid > 0) {
		int st = reap_child(pid, ret ? 200 : (int)(o->timeout_us / 1000));
		if (st)
			explain_status("the raw stream receiver", st);
		ret |= st != 0;
	}
	return ret;
}
