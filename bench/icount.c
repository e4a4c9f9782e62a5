/* SPDX-License-Identifier: MIT */
/* Instructions per message on the shm path, without any waiting: one process
 * holds both ends of a channel and alternates zl_send and zl_recv of SIZE
 * bytes, so the message is always there (with BATCH > 1: one zl_sendv of
 * BATCH messages, then BATCH zl_recv). Run under callgrind (icount.sh):
 * the count is exact and does not depend on the machine's load.
 *   icount N SIZE [BATCH] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "zipline.h"

static zl_listener *l;
static zl_channel *srv;

static void *acceptor(void *a)
{
	(void)a;
	zl_accept(l, 5000000, &srv);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10000;
	size_t size = argc > 2 ? (size_t)atoi(argv[2]) : 64;
	int batch = argc > 3 ? atoi(argv[3]) : 1;
	struct zl_msgvec v[64];
	char url[64], buf[4096] = { 1 };
	size_t len;
	zl_channel *cli;
	pthread_t t;
	if (size > sizeof(buf) || batch < 1 || batch > 64 || n % batch)
		return 2;
	for (int i = 0; i < batch; i++)
		v[i] = (struct zl_msgvec){ buf, size };
	snprintf(url, sizeof(url), "shm://icount-%d", (int)getpid());
	if (zl_listen(url, NULL, &l) || pthread_create(&t, NULL, acceptor, NULL))
		return 1;
	if (zl_connect(url, NULL, 5000000, &cli) || pthread_join(t, NULL) || !srv)
		return 1;
	for (int i = 0; i < n && batch == 1; i++)
		if (zl_send(cli, buf, size, 1000000) || zl_recv(srv, buf, sizeof(buf), &len, 1000000))
			return 3;
	for (int i = 0; i < n && batch > 1; i += batch) {
		if (zl_sendv(cli, v, (size_t)batch, 1000000) != batch)
			return 3;
		for (int k = 0; k < batch; k++)
			if (zl_recv(srv, buf, sizeof(buf), &len, 1000000))
				return 3;
	}
	zl_close(cli);
	zl_close(srv);
	zl_listener_close(l);
	return 0;
}
