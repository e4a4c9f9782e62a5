/* SPDX-License-Identifier: MIT */
/*
 * sec_ring: a peer cannot make us map a ring of its choosing (ff807dc).
 * The shm hello names the size of the ring its sender receives on, which
 * the other side maps (populated) and writes into: a raw peer offers a
 * real sealed memfd of 1 GiB (free until touched). A plain zl_listener
 * refuses it (max_peer_ring, default 64 MiB) and so does a zl_server
 * (max_ring, default 4 MiB): -EMSGSIZE from zl_accept and in the refusal
 * hello's status; our RSS stays small (< RSS_MAX_KB growth) and both
 * stay usable. A ring within the limit works: a plain channel carries
 * messages both ways, the server welcomes the raw client, and an honest
 * client with a reply ring of max_ring gets its replies.
 */
#include "rawshm.h"
#include "srvlib.h"

#define TMO 5000000
#define GIB (1u << 30)
#define RSS_MAX_KB (64 * 1024)

static long rss0;

static void check_rss(const char *when)
{
	long rss = tl_rss_kb();
	printf("  RSS %ld kB (%+ld kB) %s\n", rss, rss - rss0, when);
	CHECKF(rss - rss0 < RSS_MAX_KB, "RSS grew by %ld kB %s", rss - rss0, when);
}

/* A raw peer offering ring bytes to the plain listener l: want. */
static void plain(zl_listener *l, const char *url, uint32_t ring, int want)
{
	printf("plain listener, raw peer offers a ring of %u bytes: want %s\n", ring,
	       zl_strerror(want));
	struct raw_shm r;
	raw_shm_hello(&r, url, ring);
	zl_channel *ch = NULL;
	CHECK_RC(zl_accept(l, TMO, &ch), want);
	CHECK_RC(raw_shm_answer(&r, TMO), want);
	if (!want) { /* the peer's message arrives, ours goes into its ring */
		uint8_t buf[2000];
		tl_fill(buf, 1000, 4);
		raw_shm_put(&r, buf, 1000, ZL_REC_MSG);
		tl_recv_expect(ch, buf, sizeof(buf), 1000, 4, TMO);
		tl_send_pattern(ch, 1000, 5, TMO);
		uint64_t lw = 0; /* the len word of the first record in our ring */
		CHECK(pread(r.fd, &lw, 8, CTL_SIZE) == 8);
		CHECK(lw == (1000 | (uint64_t)ZL_REC_MSG << 32));
		zl_close(ch);
	}
	raw_shm_close(&r);
	check_rss("");
}

static void server(const char *url, uint32_t ring, int want)
{
	printf("zl_server, raw client offers a ring of %u bytes: want %s\n", ring,
	       zl_strerror(want));
	struct raw_srv c;
	CHECK_RC(raw_srv_join(&c, url, ring, TMO), want);
	raw_srv_close(&c);
	check_rss("");
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tl_watchdog(60);
	rss0 = tl_rss_kb();

	char url[600], small[600];
	zl_listener *l = tl_listen("shm", NULL, url, sizeof(url)); /* max_peer_ring 64 MiB */
	plain(l, url, GIB, -EMSGSIZE);
	plain(l, url, 1u << 20, 0);
	zl_listener_close(l);
	l = tl_listen("shm", "max_peer_ring=1048576", small, sizeof(small));
	plain(l, small, 2u << 20, -EMSGSIZE);
	plain(l, small, 1u << 20, 0);
	zl_listener_close(l);

	struct zl_server_opts so;
	zl_server_opts_init(&so);
	struct tl_srv s;
	tl_srv_start(&s, "shm", NULL, &so);
	server(s.url, GIB, -EMSGSIZE);
	server(s.url, so.max_ring * 2, -EMSGSIZE);
	server(s.url, so.max_ring, 0);

	printf("honest clients: default ring, and a reply ring of max_ring\n");
	zl_client *c = tl_client(s.url, TMO);
	tl_call_check(c, 1, 300, 1, TMO);
	zl_client_close(c);
	struct zl_opts o;
	zl_opts_init(&o);
	o.ring_size = so.max_ring;
	CHECK_OK(zl_client_connect(s.url, &o, TMO, &c));
	tl_call_check(c, 2, 400, 2, TMO);
	zl_client_close(c);
	check_rss("at the end");
	tl_srv_stop(&s);
	printf("PASS\n");
	return T_EXIT_PASS;
}
