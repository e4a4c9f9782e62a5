/* SPDX-License-Identifier: MIT */
/*
 * chan_basic SCHEME [fork|thread]: connect/accept with the peer in a forked
 * child (default) or a thread; messages of many sizes both ways, ping-pong
 * and in bursts (boundaries kept); -EMSGSIZE leaves the message queued;
 * zl_channel_info is sane.
 */
#include "chanlib.h"

static const size_t sizes[] = { 0, 1, 7, 8, 63, 64, 65, 4095, 4096, 65536 };
#define NS (sizeof(sizes) / sizeof(sizes[0]))
#define TMO 5000000
#define BIG 65536

static const char *scheme;
static char url[600];

static size_t sum_sizes(void)
{
	size_t s = 0;
	for (size_t i = 0; i < NS; i++)
		s += sizes[i];
	return s;
}

static void check_info(zl_channel *ch, uint64_t sent, uint64_t recvd, uint64_t bsent,
		       uint64_t brecv, int peer_pid)
{
	struct zl_channel_info in;
	memset(&in, 0x5a, sizeof(in));
	CHECK_OK(zl_channel_info(ch, &in));
	CHECKF(!strcmp(in.transport, scheme), "transport \"%.8s\"", in.transport);
	if (!strcmp(scheme, "shm"))
		CHECK_EQ_U64(in.ring_size, 1u << 20); /* default */
	else if (!strcmp(scheme, "tcp") || !strcmp(scheme, "unix"))
		CHECK_EQ_U64(in.ring_size, 0);
	CHECK_EQ_U64(in.max_msg, 64ull << 20);
	CHECK_EQ_U64(in.msgs_sent, sent);
	CHECK_EQ_U64(in.msgs_recv, recvd);
	CHECK_EQ_U64(in.bytes_sent, bsent);
	CHECK_EQ_U64(in.bytes_recv, brecv);
	if (!strcmp(scheme, "tcp"))
		CHECK(in.peer_pid == -1);
	else if (!strcmp(scheme, "shm") || !strcmp(scheme, "unix"))
		CHECKF(in.peer_pid == peer_pid, "peer_pid %d, expected %d", (int)in.peer_pid,
		       peer_pid);
	CHECK_RC(zl_channel_info(ch, NULL), -EINVAL);
	CHECK_RC(zl_channel_info(NULL, &in), -EINVAL);
}

static int client(void *arg)
{
	int server_pid = (int)(intptr_t)arg;
	zl_channel *ch = tl_connect(url, TMO);
	uint8_t *buf = malloc(BIG);
	CHECK(buf);
	/* ping-pong: each size, echoed back */
	for (size_t i = 0; i < NS; i++) {
		tl_send_pattern(ch, sizes[i], i, TMO);
		tl_recv_expect(ch, buf, BIG, sizes[i], 1000 + i, TMO);
	}
	/* a burst each way: boundaries must be kept */
	for (size_t i = 0; i < NS; i++)
		tl_send_pattern(ch, sizes[i], 100 + i, TMO);
	for (size_t i = 0; i < NS; i++)
		tl_recv_expect(ch, buf, BIG, sizes[i], 200 + i, TMO);

	/* too small a buffer: -EMSGSIZE, *len set, message still there */
	size_t len = 0;
	CHECK_RC(zl_recv(ch, buf, 10, &len, TMO), -EMSGSIZE);
	CHECK_EQ_U64(len, 100);
	len = 0;
	CHECK_RC(zl_recv(ch, buf, 99, &len, 0), -EMSGSIZE);
	CHECK_EQ_U64(len, 100);
	len = 0;
	CHECK_RC(zl_recv(ch, NULL, 0, &len, 0), -EMSGSIZE);
	CHECK_EQ_U64(len, 100);
	tl_recv_expect(ch, buf, 100, 100, 300, 0);
	/* empty message into no buffer at all */
	len = 7;
	CHECK_OK(zl_recv(ch, NULL, 0, &len, TMO));
	CHECK_EQ_U64(len, 0);
	/* nothing more */
	CHECK_RC(zl_recv(ch, buf, BIG, &len, 0), -EAGAIN);

	/* argument checks */
	CHECK_RC(zl_send(ch, NULL, 5, 0), -EINVAL);
	CHECK_RC(zl_recv(ch, NULL, 5, &len, 0), -EINVAL);
	CHECK_RC(zl_recv(ch, buf, 5, NULL, 0), -EINVAL);
	CHECK_RC(zl_send(NULL, buf, 5, 0), -EINVAL);
	CHECK_RC(zl_recv(NULL, buf, 5, &len, 0), -EINVAL);

	size_t s = sum_sizes();
	check_info(ch, 2 * NS, 2 * NS + 2, 2 * s, 2 * s + 100, server_pid);
	tl_send_pattern(ch, 3, 999, TMO); /* done */
	/* wait until the server saw "done", then close */
	tl_recv_expect(ch, buf, BIG, 1, 998, TMO);
	zl_close(ch);
	free(buf);
	return 0;
}

static void *client_thread(void *arg)
{
	return (void *)(intptr_t)client(arg);
}

int main(int argc, char **argv)
{
	scheme = tl_scheme_arg(argc, argv);
	bool thread_mode = argc > 2 && !strcmp(argv[2], "thread");
	tl_watchdog(60);
	zl_listener *l = tl_listen(scheme, "", url, sizeof(url));

	struct tl_thread th;
	pid_t pid = -1;
	int client_pid = (int)getpid();
	if (thread_mode) {
		tl_thread_start(&th, client_thread, (void *)(intptr_t)getpid());
	} else {
		pid = tl_fork(client, (void *)(intptr_t)getpid(), 50);
		client_pid = (int)pid;
	}
	zl_channel *ch = tl_accept(l, TMO);
	uint8_t *buf = malloc(BIG);
	CHECK(buf);
	for (size_t i = 0; i < NS; i++) {
		tl_recv_expect(ch, buf, BIG, sizes[i], i, TMO);
		tl_send_pattern(ch, sizes[i], 1000 + i, TMO);
	}
	for (size_t i = 0; i < NS; i++)
		tl_recv_expect(ch, buf, BIG, sizes[i], 100 + i, TMO);
	for (size_t i = 0; i < NS; i++)
		tl_send_pattern(ch, sizes[i], 200 + i, TMO);
	tl_send_pattern(ch, 100, 300, TMO);
	tl_send_pattern(ch, 0, 301, TMO);
	tl_recv_expect(ch, buf, BIG, 3, 999, TMO);
	size_t s = sum_sizes();
	check_info(ch, 2 * NS + 2, 2 * NS + 1, 2 * s + 100, 2 * s + 3, client_pid);
	tl_send_pattern(ch, 1, 998, TMO);

	/* the client closes: everything was read, so -ECONNRESET */
	size_t len;
	CHECK_RC(zl_recv(ch, buf, BIG, &len, TMO), -ECONNRESET);
	CHECK_RC(zl_recv(ch, buf, BIG, &len, 0), -ECONNRESET);
	if (thread_mode)
		CHECK(tl_thread_join(&th, 10000) == NULL);
	else
		tl_reap_ok(pid, 10000);
	zl_close(ch);
	zl_listener_close(l);
	free(buf);
	printf("chan_basic %s (%s): ok\n", scheme, thread_mode ? "thread" : "fork");
	return T_EXIT_PASS;
}
