/* SPDX-License-Identifier: MIT */
/*
 * zerocopy [URL [COUNT]]
 *
 * A producer writes COUNT (default 100000) fixed-size ticks straight into
 * the channel with zl_send_reserve / zl_send_commit, and a consumer (a
 * forked child) reads them in place with zl_recv_peek / zl_recv_release.
 * On shm:// (the default, shm://zl-zerocopy-PID) a tick is written once,
 * into the consumer's ring, and read where it lies.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zipline.h>

struct tick {
	uint64_t seq;
	uint64_t price;  /* fixed point, 1e-4 */
	uint32_t qty;
	char symbol[12];
};

static int consumer(const char *url, uint64_t count)
{
	zl_channel *ch;
	int rc = zl_connect(url, NULL, 5000000, &ch);
	if (rc < 0) {
		fprintf(stderr, "consumer: zl_connect %s: %s\n", url, zl_strerror(rc));
		return 1;
	}
	uint64_t n = 0, volume = 0;
	for (;;) {
		const void *p;
		size_t len;
		rc = zl_recv_peek(ch, &p, &len, 5000000);
		if (rc < 0)
			break;
		/* The bytes may be in memory the producer can write: copy what
		 * is checked before relying on it. */
		struct tick t;
		if (len != sizeof(t)) {
			fprintf(stderr, "consumer: unexpected length %zu\n", len);
			zl_recv_release(ch);
			break;
		}
		memcpy(&t, p, sizeof(t));
		zl_recv_release(ch);
		if (t.seq != n) {
			fprintf(stderr, "consumer: tick %" PRIu64 " out of order\n", t.seq);
			break;
		}
		volume += t.qty;
		n++;
	}
	zl_close(ch);
	if (rc != -ECONNRESET || n != count) {
		fprintf(stderr, "consumer: %" PRIu64 " of %" PRIu64 " ticks, last: %s\n",
			n, count, zl_strerror(rc));
		return 1;
	}
	printf("consumer: %" PRIu64 " ticks read in place, volume %" PRIu64 "\n", n,
	       volume);
	return 0;
}

static int producer(zl_listener *l, uint64_t count)
{
	zl_channel *ch;
	int rc = zl_accept(l, 5000000, &ch);
	if (rc < 0) {
		fprintf(stderr, "producer: zl_accept: %s\n", zl_strerror(rc));
		return 1;
	}
	printf("producer: ticks of %zu bytes, up to %zu bytes in place\n",
	       sizeof(struct tick), zl_max_inline(ch));
	for (uint64_t i = 0; i < count && rc == 0; i++) {
		void *p;
		while ((rc = zl_send_reserve(ch, sizeof(struct tick), &p)) == -EAGAIN)
			if ((rc = zl_wait_writable(ch, sizeof(struct tick), 5000000)) < 0)
				break;
		if (rc < 0)
			break;
		struct tick *t = p; /* write the fields in place */
		memset(t, 0, sizeof(*t));
		t->seq = i;
		t->price = 1000000 + i % 100;
		t->qty = (uint32_t)(i % 10) + 1;
		memcpy(t->symbol, "ZIPL", 5);
		rc = zl_send_commit(ch, sizeof(*t));
	}
	if (rc < 0)
		fprintf(stderr, "producer: %s\n", zl_strerror(rc));
	else
		printf("producer: %" PRIu64 " ticks committed\n", count);
	fflush(stdout);
	zl_close(ch); /* the consumer sees -ECONNRESET after the last tick */
	return rc < 0;
}

int main(int argc, char **argv)
{
	char url[128];
	if (argc > 1)
		snprintf(url, sizeof(url), "%s", argv[1]);
	else
		snprintf(url, sizeof(url), "shm://zl-zerocopy-%d", (int)getpid());
	uint64_t count = argc > 2 ? strtoull(argv[2], NULL, 10) : 100000;

	zl_listener *l;
	int rc = zl_listen(url, NULL, &l);
	if (rc < 0) {
		fprintf(stderr, "zl_listen %s: %s\n", url, zl_strerror(rc));
		return 1;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) { /* the listener copy in the child is simply not used */
		int rc_child = consumer(url, count);
		fflush(stdout);
		_exit(rc_child);
	}

	int status = producer(l, count);
	zl_listener_close(l);
	int ws;
	if (waitpid(pid, &ws, 0) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
		status = 1;
	return status;
}
