/* SPDX-License-Identifier: MIT */
/*
 * echo_server URL [CLIENTS]
 *
 * Listen on URL (shm://NAME, tcp://HOST:PORT, unix:///path) and send every
 * message back to its sender. Serves one client at a time; exits after
 * CLIENTS clients (default: serve until SIGINT or SIGTERM).
 *
 *   ./echo_server unix:///tmp/echo.sock &
 *   ./echo_client unix:///tmp/echo.sock
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zipline.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* Echo until the peer goes away. Returns 0 on a clean end, else -errno. */
static int serve(zl_channel *ch)
{
	size_t cap = 64 * 1024, len;
	char *buf = malloc(cap);
	int rc;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		rc = zl_recv(ch, buf, cap, &len, 100000); /* 100 ms, to see signals */
		if (rc == -ETIMEDOUT) {
			if (stop)
				break;
			continue;
		}
		if (rc == -EMSGSIZE) { /* the message waits for a bigger buffer */
			char *bigger = realloc(buf, len);
			if (!bigger) {
				rc = -ENOMEM;
				break;
			}
			buf = bigger;
			cap = len;
			continue;
		}
		if (rc < 0)
			break;
		rc = zl_send(ch, buf, len, -1);
		if (rc < 0)
			break;
	}
	free(buf);
	return rc == -ECONNRESET ? 0 : rc;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: %s URL [CLIENTS]\n", argv[0]);
		return 2;
	}
	long clients = argc > 2 ? strtol(argv[2], NULL, 10) : 0;

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	zl_listener *l;
	int rc = zl_listen(argv[1], NULL, &l);
	if (rc < 0) {
		fprintf(stderr, "zl_listen %s: %s\n", argv[1], zl_strerror(rc));
		return 1;
	}
	char url[512];
	if (zl_listener_url(l, url, sizeof(url)) == 0)
		printf("listening on %s\n", url);
	fflush(stdout);

	int status = 0;
	for (long served = 0; !stop && (clients <= 0 || served < clients);) {
		zl_channel *ch;
		rc = zl_accept(l, 100000, &ch); /* 100 ms, to see signals */
		if (rc == -ETIMEDOUT)
			continue;
		if (rc < 0) { /* e.g. -EPROTO: a bad peer; keep serving */
			fprintf(stderr, "zl_accept: %s\n", zl_strerror(rc));
			continue;
		}
		struct zl_channel_info info;
		zl_channel_info(ch, &info);
		printf("client %ld: %s, peer pid %d\n", served + 1, info.transport,
		       (int)info.peer_pid);
		rc = serve(ch);
		zl_channel_info(ch, &info);
		printf("client %ld: %llu messages echoed%s%s\n", served + 1,
		       (unsigned long long)info.msgs_recv, rc ? ", error: " : "",
		       rc ? zl_strerror(rc) : "");
		fflush(stdout);
		if (rc)
			status = 1;
		zl_close(ch);
		served++;
	}
	zl_listener_close(l);
	return status;
}
