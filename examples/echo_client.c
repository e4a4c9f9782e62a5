/* SPDX-License-Identifier: MIT */
/*
 * echo_client URL [COUNT [SIZE]]
 *
 * Connect to an echo_server at URL, send COUNT messages (default 1000) of
 * SIZE bytes (default 64), check that each comes back unchanged, and print
 * the round-trip times. Retries the connection for 5 seconds, so it can be
 * started together with the server.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zipline.h>

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* Connect, retrying while nobody listens yet. */
static int connect_retry(const char *url, int64_t total_us, zl_channel **ch)
{
	int64_t end = now_ns() + total_us * 1000;
	int rc;
	for (;;) {
		rc = zl_connect(url, NULL, 1000000, ch);
		if ((rc != -ECONNREFUSED && rc != -ENOENT) || now_ns() > end)
			return rc;
		nanosleep(&(struct timespec){ .tv_nsec = 20000000 }, NULL);
	}
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: %s URL [COUNT [SIZE]]\n", argv[0]);
		return 2;
	}
	long count = argc > 2 ? strtol(argv[2], NULL, 10) : 1000;
	long size = argc > 3 ? strtol(argv[3], NULL, 10) : 64;
	if (count < 1 || size < 0) {
		fprintf(stderr, "COUNT must be > 0 and SIZE >= 0\n");
		return 2;
	}

	zl_channel *ch;
	int rc = connect_retry(argv[1], 5000000, &ch);
	if (rc < 0) {
		fprintf(stderr, "zl_connect %s: %s\n", argv[1], zl_strerror(rc));
		return 1;
	}

	char *out = malloc((size_t)size + 1), *in = malloc((size_t)size + 1);
	int64_t *rtt = malloc(sizeof(*rtt) * (size_t)count);
	if (!out || !in || !rtt) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	int status = 0;
	for (long i = 0; i < count; i++) {
		for (long j = 0; j < size; j++)
			out[j] = (char)(i + j);
		int64_t t0 = now_ns();
		rc = zl_send(ch, out, (size_t)size, 5000000);
		size_t len = 0;
		if (rc == 0)
			rc = zl_recv(ch, in, (size_t)size + 1, &len, 5000000);
		rtt[i] = now_ns() - t0;
		if (rc < 0) {
			fprintf(stderr, "message %ld: %s\n", i, zl_strerror(rc));
			status = 1;
			count = i;
			break;
		}
		if (len != (size_t)size || memcmp(in, out, len) != 0) {
			fprintf(stderr, "message %ld came back different\n", i);
			status = 1;
			count = i;
			break;
		}
	}
	if (count > 0) {
		qsort(rtt, (size_t)count, sizeof(*rtt), cmp_i64);
		printf("%ld messages of %ld bytes echoed; round trip: "
		       "min %.1f us, median %.1f us, p99 %.1f us, max %.1f us\n",
		       count, size, rtt[0] / 1e3, rtt[count / 2] / 1e3,
		       rtt[count * 99 / 100] / 1e3, rtt[count - 1] / 1e3);
	}
	zl_close(ch);
	free(out);
	free(in);
	free(rtt);
	return status;
}
