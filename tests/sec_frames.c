/* SPDX-License-Identifier: MIT */
/*
 * sec_frames SCHEME (tcp, unix): a stream client cannot make a zl_server
 * buffer a frame of its choosing (ff807dc: its listeners accept at most
 * max_req plus a request header; a stream buffers a frame as it arrives).
 * Four raw clients at once (wire format: src/transport/stream/stream.h)
 * send a valid stream hello, then a frame header announcing 64 MiB and
 * SEND_BYTES of it, and stall; two of them first get admitted (a srv_hello
 * frame, the welcome frame back), two send the big frame instead of their
 * srv_hello. The server must drop all four (close their sockets), its RSS
 * (this process: it serves on a thread) must not grow by RSS_MAX_KB, and an
 * honest client, calling between the attackers' writes, must keep getting
 * correct replies in bounded time, as must a new one afterwards.
 */
#include <endian.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include "sockutil.h"
#include "srvlib.h"
#include "stream.h"
#include "wire.h"

#define TMO 5000000
#define NATT 4
#define BIG (64u << 20)
#define SEND_BYTES (8u << 20)
#define RSS_MAX_KB (6 * 1024)

static int xfer_ok(int r, const char *what)
{
	CHECKF(r == 0, "raw client: %s: %s", what, zl_strerror(r));
	return r;
}

/* A raw client up to the point where it announces the big frame. */
static int raw_client(const char *url, bool admitted)
{
	int fd = tl_raw_connect(url);
	CHECK(fcntl(fd, F_SETFL, O_NONBLOCK) == 0);
	int64_t dl = tl_now_us() + TMO;
	uint8_t h[ZL_STREAM_HELLO_LEN], peer[ZL_STREAM_HELLO_LEN];
	uint16_t ver = htole16(ZL_PROTO_VERSION), flags = 0;
	uint64_t max = htole64(1 << 20);
	memcpy(h, ZL_STREAM_MAGIC, 4);
	memcpy(h + 4, &ver, 2);
	memcpy(h + 6, &flags, 2);
	memcpy(h + 8, &max, 8);
	xfer_ok(zl_write_full(fd, h, sizeof(h), dl), "hello");
	xfer_ok(zl_read_full(fd, peer, sizeof(peer), dl), "the server's hello");
	CHECK(!memcmp(peer, ZL_STREAM_MAGIC, 4));
	if (admitted) { /* frames: u32 length, then the bytes */
		struct {
			uint32_t len;
			struct srv_hello h;
		} __attribute__((packed)) m = { htole32(sizeof(struct srv_hello)),
						{ .magic = SRV_MAGIC, .version = SRV_VERSION,
						  .size = sizeof(struct srv_hello) } };
		xfer_ok(zl_write_full(fd, &m, sizeof(m), dl), "srv_hello");
		uint32_t len;
		struct srv_welcome w;
		xfer_ok(zl_read_full(fd, &len, 4, dl), "welcome");
		CHECK(le32toh(len) == sizeof(w));
		xfer_ok(zl_read_full(fd, &w, sizeof(w), dl), "welcome");
		CHECK(w.magic == SRV_MAGIC && w.status == 0);
	}
	uint32_t big = htole32(BIG);
	xfer_ok(zl_write_full(fd, &big, 4, dl), "the big frame's header");
	return fd;
}

int main(int argc, char **argv)
{
	const char *scheme = tl_scheme_arg(argc, argv);
	tl_watchdog(60);
	struct tl_srv s;
	tl_srv_start(&s, scheme, NULL, NULL);
	zl_client *honest = tl_client(s.url, TMO);
	tl_call_check(honest, 1, 100, 0, TMO);
	long rss0 = tl_rss_kb();

	int fd[NATT];
	size_t sent[NATT] = { 0 };
	bool gone[NATT] = { false };
	for (int i = 0; i < NATT; i++)
		fd[i] = raw_client(s.url, i < 2);
	printf("%d raw clients announced %u-byte frames\n", NATT, BIG);
	static uint8_t chunk[65536];
	memset(chunk, 0xa5, sizeof(chunk));
	int64_t end = tl_now_us() + 3000000, worst = 0;
	uint64_t calls = 0, slow = 0;
	for (int busy = NATT; busy && tl_now_us() < end;) {
		busy = 0;
		for (int i = 0; i < NATT; i++) {
			if (gone[i] || sent[i] >= SEND_BYTES)
				continue;
			busy++;
			ssize_t n = send(fd[i], chunk, sizeof(chunk), MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n > 0)
				sent[i] += (size_t)n;
			else if (errno != EAGAIN)
				gone[i] = true; /* EPIPE, ECONNRESET: dropped */
		}
		int64_t t0 = tl_now_us(); /* the honest client, meanwhile */
		tl_call_check(honest, 1 + (int)(calls % 4), calls % 600, calls + 1, TMO);
		int64_t dt = tl_now_us() - t0;
		worst = dt > worst ? dt : worst;
		slow += dt > TL_SLOW_US;
		calls++;
	}
	long rss = tl_rss_kb();
	for (int i = 0; i < NATT; i++)
		printf("raw client %d (%s): %zu bytes of the frame went out%s\n", i,
		       i < 2 ? "admitted" : "no srv_hello", sent[i], gone[i] ? ", then dropped" : "");
	printf("RSS %ld kB (%+ld kB); honest: %" PRIu64 " calls during\n", rss, rss - rss0, calls);
	CHECKF(rss - rss0 < RSS_MAX_KB, "the server's RSS grew by %ld kB", rss - rss0);
	for (int i = 0; i < NATT; i++) {
		CHECKF(tl_dropped(fd[i], 5000), "raw client %d was not dropped", i);
		close(fd[i]);
	}
	struct zl_server_info info;
	CHECK_OK(zl_server_info(s.srv, &info));
	CHECKF(info.clients_dropped >= 2, "%" PRIu64 " clients dropped", info.clients_dropped);

	tl_call_check(honest, 2, 500, 99, TMO);
	zl_client_close(honest);
	zl_client *after = tl_client(s.url, TMO);
	for (int i = 0; i < 100; i++) {
		int64_t t0 = tl_now_us();
		tl_call_check(after, 3, (size_t)i * 10, 1000 + (uint64_t)i, TMO);
		int64_t dt = tl_now_us() - t0;
		worst = dt > worst ? dt : worst;
		slow += dt > TL_SLOW_US;
	}
	zl_client_close(after);
	tl_check_latency("honest calls", TL_SLOW_US, worst, slow);
	tl_srv_stop(&s);
	printf("PASS\n");
	return T_EXIT_PASS;
}
