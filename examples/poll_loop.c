/* SPDX-License-Identifier: MIT */
/*
 * poll_loop [--poller] URL [CLIENTS [COUNT]]
 *
 * One thread serves a listener and several channels with poll(2) on
 * zl_listener_fd and zl_channel_fd, echoing every message; with --poller,
 * with a zl_poller instead (it spins over shm rings before it sleeps, and
 * takes the listener like any fd). To show it off,
 * it forks CLIENTS (default 3) clients that each send COUNT (default 1000)
 * messages and check the echoes; it exits when all of them are done.
 * CLIENTS 0 serves forever.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zipline.h>

#define MAX_CHANNELS 64

static int client(const char *url, int id, long count)
{
	zl_channel *ch;
	int rc = zl_connect(url, NULL, 5000000, &ch);
	if (rc < 0) {
		fprintf(stderr, "client %d: zl_connect: %s\n", id, zl_strerror(rc));
		return 1;
	}
	for (long i = 0; i < count; i++) {
		char out[64], in[64];
		size_t len;
		int n = snprintf(out, sizeof(out), "client %d message %ld", id, i);
		rc = zl_send(ch, out, (size_t)n, 5000000);
		if (rc == 0)
			rc = zl_recv(ch, in, sizeof(in), &len, 5000000);
		if (rc < 0 || len != (size_t)n || memcmp(in, out, len)) {
			fprintf(stderr, "client %d: message %ld: %s\n", id, i,
				rc < 0 ? zl_strerror(rc) : "bad echo");
			zl_close(ch);
			return 1;
		}
	}
	zl_close(ch);
	return 0;
}

/* Drain one channel: echo everything that is there. Returns 0 while the
 * channel lives, or the error that ended it. */
static int drain(zl_channel *ch)
{
	char buf[4096];
	size_t len;
	int rc;
	while ((rc = zl_recv(ch, buf, sizeof(buf), &len, 0)) == 0)
		if ((rc = zl_send(ch, buf, len, 1000000)) < 0)
			return rc;
	return rc == -EAGAIN ? 0 : rc;
}

/* Accept one channel; NULL when none (or no room). */
static zl_channel *take(zl_listener *l, int n)
{
	zl_channel *c;
	int rc = zl_accept(l, 0, &c);
	if (rc == 0 && n < MAX_CHANNELS)
		return c;
	if (rc == 0)
		zl_close(c);
	else if (rc != -EAGAIN)
		fprintf(stderr, "zl_accept: %s\n", zl_strerror(rc));
	return NULL;
}

/* Serve with poll(2) until `clients` channels closed (0: forever). */
static int serve_poll(zl_listener *l, int clients, int *accepted)
{
	/* pfd[0] is the listener, pfd[1..n] the channels in ch[1..n]. */
	struct pollfd pfd[MAX_CHANNELS + 1];
	zl_channel *ch[MAX_CHANNELS + 1];
	int n = 0, closed = 0, status = 0, rc;
	pfd[0].fd = zl_listener_fd(l);
	pfd[0].events = POLLIN;

	while (clients == 0 || closed < clients) {
		int ready = poll(pfd, (nfds_t)n + 1, clients ? 10000 : -1);
		if (ready < 0 && errno == EINTR)
			continue;
		if (ready <= 0) {
			fprintf(stderr, "poll: %s\n", ready ? strerror(errno) : "idle for 10 s");
			status = 1;
			break;
		}
		zl_channel *c;
		if ((pfd[0].revents & POLLIN) && (c = take(l, n))) {
			n++;
			(*accepted)++;
			ch[n] = c;
			pfd[n].fd = zl_channel_fd(c);
			pfd[n].events = POLLIN;
			pfd[n].revents = POLLIN; /* may already hold messages */
		}
		for (int i = 1; i <= n; i++) {
			if (!pfd[i].revents)
				continue;
			pfd[i].revents = 0;
			rc = drain(ch[i]);
			if (rc == 0)
				continue;
			if (rc != -ECONNRESET) {
				fprintf(stderr, "channel %d: %s\n", i, zl_strerror(rc));
				status = 1;
			}
			zl_close(ch[i]);
			ch[i] = ch[n];
			pfd[i] = pfd[n];
			n--;
			i--; /* look at the one moved here */
			closed++;
		}
	}
	for (int i = 1; i <= n; i++)
		zl_close(ch[i]);
	return status;
}

/* The same loop on a zl_poller: items carry their channel as user data
 * (the listener carries NULL). */
static int serve_poller(zl_listener *l, int clients, int *accepted)
{
	zl_poller *p;
	int rc = zl_poller_create(-1, &p);
	if (rc < 0 || (rc = zl_poller_add_listener(p, l, NULL)) < 0) {
		fprintf(stderr, "zl_poller: %s\n", zl_strerror(rc));
		return 1;
	}
	int n = 0, closed = 0, status = 0;
	while (clients == 0 || closed < clients) {
		struct zl_poll_event ev[16];
		int k = zl_poller_wait(p, ev, 16, clients ? 10000000 : -1);
		if (k == -EINTR)
			continue;
		if (k < 0) {
			fprintf(stderr, "zl_poller_wait: %s\n", zl_strerror(k));
			status = 1;
			break;
		}
		for (int i = 0; i < k; i++) {
			zl_channel *c = ev[i].user;
			if (!c) {
				if ((c = take(l, n)) && zl_poller_add_channel(p, c, ZL_POLLIN, c) >= 0) {
					n++;
					(*accepted)++;
				} else if (c) {
					zl_close(c);
				}
				continue;
			}
			if ((rc = drain(c)) == 0)
				continue;
			if (rc != -ECONNRESET) {
				fprintf(stderr, "channel %d: %s\n", ev[i].id, zl_strerror(rc));
				status = 1;
			}
			zl_poller_del(p, ev[i].id);
			zl_close(c);
			n--;
			closed++;
		}
	}
	struct zl_poller_info info;
	zl_poller_info(p, &info);
	printf("poll_loop: zl_poller: %llu waits, %llu sleeps, %llu arms\n",
	       (unsigned long long)info.waits, (unsigned long long)info.sleeps,
	       (unsigned long long)info.arms);
	zl_poller_destroy(p); /* channels still open are closed at exit */
	return status;
}

int main(int argc, char **argv)
{
	int use_poller = argc > 1 && !strcmp(argv[1], "--poller");
	argc -= use_poller;
	argv += use_poller;
	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: %s [--poller] URL [CLIENTS [COUNT]]\n", argv[0]);
		return 2;
	}
	const char *url = argv[1];
	int clients = argc > 2 ? atoi(argv[2]) : 3;
	long count = argc > 3 ? strtol(argv[3], NULL, 10) : 1000;
	if (clients < 0 || clients > MAX_CHANNELS) {
		fprintf(stderr, "CLIENTS must be 0..%d\n", MAX_CHANNELS);
		return 2;
	}

	zl_listener *l;
	int rc = zl_listen(url, NULL, &l);
	if (rc < 0) {
		fprintf(stderr, "zl_listen %s: %s\n", url, zl_strerror(rc));
		return 1;
	}
	fflush(stdout);
	pid_t pids[MAX_CHANNELS];
	for (int i = 0; i < clients; i++) {
		pids[i] = fork();
		if (pids[i] < 0) {
			perror("fork");
			return 1;
		}
		if (pids[i] == 0) {
			int rc_child = client(url, i, count);
			fflush(stdout);
			_exit(rc_child);
		}
	}
	int accepted = 0;
	int status = use_poller ? serve_poller(l, clients, &accepted)
				: serve_poll(l, clients, &accepted);
	printf("poll_loop: %d channels served by one thread\n", accepted);
	zl_listener_close(l);
	for (int i = 0; i < clients; i++) {
		int ws;
		if (waitpid(pids[i], &ws, 0) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws))
			status = 1;
	}
	return status;
}
