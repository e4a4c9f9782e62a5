/* SPDX-License-Identifier: MIT */
/*
 * sec_frag: the total of a fragmented message is the peer's word. A raw
 * shm peer writes a valid FIRST fragment record (src/core/ring.h: its
 * payload starts with the u64 total) into the ring it sends on,
 * announcing 16 GiB, and in another run 2^62 bytes.
 *   plain channel: zl_recv and zl_recv_peek must fail with -EPROTO (before
 *     ff807dc the peek returned -EMSGSIZE with *len = the total, for the
 *     caller to allocate), and nothing may be allocated (VmSize);
 *   zl_server (it assembles fragmented requests in a buffer sized by the
 *     peek): the client is dropped (its socket closed), the server
 *     allocates nothing (VmSize, RSS: it serves on a thread of this
 *     process), and honest clients, connected before and after, are
 *     served.
 */
#include "rawshm.h"
#include "srvlib.h"

#define TMO 5000000
#define VM_MAX_KB (256 * 1024) /* nothing near the totals announced */
#define RSS_MAX_KB (32 * 1024)

static const uint64_t totals[] = { 16ull << 30, 1ull << 62 };

/* The attack: a FIRST record announcing total, with 56 bytes of it. */
static void first(struct raw_shm *r, uint64_t total)
{
	uint8_t p[64];
	tl_fill(p, sizeof(p), total);
	memcpy(p, &total, 8);
	raw_shm_put(r, p, sizeof(p), ZL_REC_FIRST);
}

static void check_mem(long vm0, long rss0, const char *what)
{
	long vm = tl_status_kb(0, "VmSize"), rss = tl_rss_kb();
	CHECKF(vm - vm0 < VM_MAX_KB, "%s: VmSize grew by %ld kB", what, vm - vm0);
	CHECKF(rss - rss0 < RSS_MAX_KB, "%s: RSS grew by %ld kB", what, rss - rss0);
}

static void chan_case(uint64_t total, bool peek)
{
	printf("plain channel, FIRST fragment announcing %" PRIu64 " bytes, %s\n", total,
	       peek ? "zl_recv_peek" : "zl_recv");
	char url[600];
	zl_listener *l = tl_listen("shm", NULL, url, sizeof(url));
	struct raw_shm r;
	raw_shm_hello(&r, url, 65536);
	zl_channel *ch = tl_accept(l, TMO);
	CHECK_OK(raw_shm_answer(&r, TMO));
	zl_listener_close(l);
	long vm0 = tl_status_kb(0, "VmSize"), rss0 = tl_rss_kb();
	first(&r, total);
	uint8_t buf[256];
	const void *p;
	size_t len = 0;
	if (peek)
		CHECK_RC(zl_recv_peek(ch, &p, &len, TMO), -EPROTO);
	else
		CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, TMO), -EPROTO);
	CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, 0), -EPIPE); /* and it stays failed */
	check_mem(vm0, rss0, "plain channel");
	zl_close(ch);
	raw_shm_close(&r);
}

static void server_case(struct tl_srv *s, zl_client *before, uint64_t total)
{
	printf("zl_server, raw client's FIRST fragment announces %" PRIu64 " bytes\n", total);
	struct zl_server_info i0, i1;
	CHECK_OK(zl_server_info(s->srv, &i0));
	long vm0 = tl_status_kb(0, "VmSize"), rss0 = tl_rss_kb();
	struct raw_srv c;
	CHECK_OK(raw_srv_join(&c, s->url, 65536, TMO));
	first(&c.s, total);
	CHECKF(tl_dropped(c.s.sock, 5000), "the raw client was not dropped");
	raw_srv_close(&c);
	check_mem(vm0, rss0, "zl_server");
	CHECK_OK(zl_server_info(s->srv, &i1));
	CHECK(i1.clients_dropped == i0.clients_dropped + 1);
	tl_call_check(before, 1, 300, total % 1000, TMO);
	zl_client *after = tl_client(s->url, TMO);
	tl_call_check(after, 2, 3000, total % 1000 + 1, TMO);
	zl_client_close(after);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tl_watchdog(60);
	for (int i = 0; i < 2; i++) {
		chan_case(totals[i], false);
		chan_case(totals[i], true);
	}
	struct tl_srv s;
	tl_srv_start(&s, "shm", NULL, NULL);
	zl_client *before = tl_client(s.url, TMO);
	tl_call_check(before, 1, 100, 1, TMO);
	for (int i = 0; i < 2; i++)
		server_case(&s, before, totals[i]);
	zl_client_close(before);
	tl_srv_stop(&s);
	printf("PASS\n");
	return T_EXIT_PASS;
}
