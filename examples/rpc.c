/* SPDX-License-Identifier: MIT */
/*
 * rpc serve URL COUNT     serve COUNT calls of type 1 (upper-case echo), then exit
 *                         (it prints the URL it listens on: tcp://HOST:0 takes
 *                         a free port)
 * rpc call URL COUNT      make COUNT calls and check each answer
 *
 * A zl_server: one thread serves every client; a handler per request type
 * answers with zl_reply. The client side is zl_client and zl_call. Any
 * transport: shm://NAME, tcp://HOST:PORT, unix:///PATH (see
 * docs/tutorial.md). The caller retries its connection for 5 seconds, so
 * both can be started together.
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zipline.h>

#define T_UPPER 1 /* the request type this server handles */

struct counter {
	zl_server *srv;
	long left;
};

/* Answer with the request's bytes in upper case, built in place in the
 * reply (zl_reply copies from any buffer; this one avoids a copy). */
static int upper(zl_req *rq, void *arg)
{
	struct counter *c = arg;
	size_t len;
	const char *in = zl_req_data(rq, &len);
	void *out;
	int rc = zl_reply_reserve(rq, len, &out);
	if (rc == 0) {
		for (size_t i = 0; i < len; i++)
			((char *)out)[i] = (char)toupper((unsigned char)in[i]);
		rc = zl_reply_commit(rq, len);
	}
	if (--c->left == 0)
		zl_server_stop(c->srv); /* zl_server_run returns */
	return rc;
}

static int serve(const char *url, long count)
{
	zl_server *srv;
	int rc = zl_server_create(NULL, &srv);
	if (rc < 0) {
		fprintf(stderr, "zl_server_create: %s\n", zl_strerror(rc));
		return 1;
	}
	struct counter c = { srv, count };
	if ((rc = zl_server_listen(srv, url, NULL)) < 0 ||
	    (rc = zl_server_handle(srv, T_UPPER, upper, &c)) < 0) {
		fprintf(stderr, "%s: %s\n", url, zl_strerror(rc));
		zl_server_close(srv);
		return 1;
	}
	char bound[256]; /* tcp://HOST:0 is bound to a free port: which one */
	if (zl_server_url(srv, 0, bound, sizeof(bound)) == 0)
		printf("listening on %s\n", bound);
	fflush(stdout);
	rc = zl_server_run(srv, 60 * 1000000LL); /* at most a minute */
	struct zl_server_info info;
	zl_server_info(srv, &info);
	printf("served %llu calls from %llu clients\n", (unsigned long long)info.requests,
	       (unsigned long long)info.clients_total);
	zl_server_close(srv);
	return rc == 0 && c.left == 0 ? 0 : 1; /* (a timeout: fewer calls came) */
}

static int call(const char *url, long count)
{
	zl_client *cli = NULL;
	int rc = -ECONNREFUSED;
	for (int i = 0; i < 50 && rc < 0; i++) { /* the server may still be starting */
		rc = zl_client_connect(url, NULL, 1000000, &cli);
		if (rc < 0)
			nanosleep(&(struct timespec){ 0, 100000000 }, NULL);
	}
	if (rc < 0) {
		fprintf(stderr, "zl_client_connect %s: %s\n", url, zl_strerror(rc));
		return 1;
	}
	for (long i = 0; i < count; i++) {
		char req[32], want[32];
		int n = snprintf(req, sizeof(req), "hello %ld", i);
		snprintf(want, sizeof(want), "HELLO %ld", i);
		const void *rep;
		size_t len;
		rc = zl_call(cli, T_UPPER, req, (size_t)n, &rep, &len, 1000000);
		if (rc < 0) {
			fprintf(stderr, "zl_call %ld: %s\n", i, zl_strerror(rc));
			break;
		}
		if (len != (size_t)n || memcmp(rep, want, len)) {
			fprintf(stderr, "call %ld: wrong answer '%.*s'\n", i, (int)len, (const char *)rep);
			rc = -EPROTO;
			break;
		}
	}
	zl_client_close(cli);
	if (rc == 0)
		printf("%ld calls answered\n", count);
	return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	long count = argc == 4 ? strtol(argv[3], NULL, 10) : 0;
	if (argc != 4 || count <= 0 || (strcmp(argv[1], "serve") && strcmp(argv[1], "call"))) {
		fprintf(stderr, "usage: rpc serve|call URL COUNT\n");
		return 2;
	}
	return !strcmp(argv[1], "serve") ? serve(argv[2], count) : call(argv[2], count);
}
