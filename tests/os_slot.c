/* SPDX-License-Identifier: MIT */
/*
 * An expired session's memory window belongs to its client until that
 * client speaks again or its connection ends: another client's new session
 * never takes it (server.c: free_slot). Over rdma the server used to give
 * the first unused session slot to the next HELLO and close the window an
 * expired session had kept there, while its client, only slow, could
 * still be reading through it: that client's next READ failed its queue
 * pair and every later call returned -ECONNRESET (seen in os_lin over rdma
 * with batching clients, one VM run in seven).
 *
 * In order, against an in-process server (os_lib.h) with a 20 s heartbeat
 * window, so that B makes no heartbeat of its own before step 4 (checked):
 *   1. B connects and PUTs a key; its session is then made to look silent
 *      (its last heartbeat moved back past the window, under the server's
 *      lock) and the collector expires it (expired grows by 1);
 *   2. A connects, PUTs and GETs a key of its own;
 *   3. B GETs its key and A's, through its old window: 0 and the values
 *      (before the fix, over rdma: -ECONNRESET), with no renewal between;
 *      and A's session is not in B's slot while B's window is kept there;
 *   4. once B's heartbeat is due, B's next GET renews: its new session
 *      takes B's own slot back (the old window closed, a new one opened)
 *      and every open window is a live session's: none is left behind.
 * shm has no windows: there steps 2 and 4 check only what applies.
 * Run on shm here and over rdma in the VM suite (ZL_OS_TEST_SCHEME=rdma).
 */
#include "os_lib.h"
#include "clock.h" /* the server's clock, for a session's last heartbeat */
#include "os_server.h"

#define WINDOW_US 20000000 /* B heartbeats 5 s after its HELLO: steps 1-3 are well within */

static struct ost_server srv;

static uint64_t sessions_begun(void)
{
	pthread_mutex_lock(&srv.os->mu);
	uint64_t n = srv.os->next_session;
	pthread_mutex_unlock(&srv.os->mu);
	return n;
}

/* The slot of the newest session (the last HELLO), or -1. */
static int newest_slot(void)
{
	int at = -1;
	pthread_mutex_lock(&srv.os->mu);
	for (uint32_t i = 0; i < srv.os->o.max_clients; i++)
		if (srv.os->sess[i].client && srv.os->sess[i].session == srv.os->next_session)
			at = (int)i;
	pthread_mutex_unlock(&srv.os->mu);
	return at;
}

/* Open windows that no live session owns (in a slot without a session,
 * and not kept for a client that still has no newer one). */
static int stray_windows(void)
{
	int n = 0;
	pthread_mutex_lock(&srv.os->mu);
	for (uint32_t i = 0; i < srv.os->o.max_clients; i++) {
		const struct os_sess *c = &srv.os->sess[i];
		if (c->win && c->client != c->win_client)
			n++;
	}
	pthread_mutex_unlock(&srv.os->mu);
	return n;
}

static void get_is(zl_kv *kv, const char *k, const char *want, const char *who)
{
	const void *v;
	size_t vl;
	int rc = zl_kv_get(kv, k, strlen(k), &v, &vl, NULL, OST_TMO);
	CHECKF(rc == 0, "%s: GET %s: %s", who, k, zl_strerror(rc));
	CHECKF(vl == strlen(want) && !memcmp(v, want, vl), "%s: GET %s: wrong value", who, k);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tl_watchdog(60);
	struct zl_kvos_opts o;
	zl_kvos_opts_init(&o);
	o.mem = 16u << 20;
	o.region_len = 1u << 20;
	o.hb_window_us = WINDOW_US;
	ost_start(&srv, &o);
	zl_client *sc = NULL;
	CHECK_OK(zl_client_connect(srv.plain, NULL, OST_TMO, &sc));

	/* a first client, so that the server's own connection, if it makes
	 * one (gc.c: the device's CAS), is there before B's HELLO */
	zl_kv *w = ost_connect(&srv);
	CHECK_OK(zl_kv_put(w, "w", 1, "w", 1, OST_TMO));
	zl_kv_close(w);
	tl_sleep_us(300000);

	/* 1: B's session expires while B holds its window */
	zl_kv *b = ost_connect(&srv);
	int bslot = newest_slot();
	CHECK(bslot >= 0);
	CHECK_OK(zl_kv_put(b, "b", 1, "bee", 3, OST_TMO));
	pthread_mutex_lock(&srv.os->mu);
	uint32_t held = srv.os->sess[bslot].nheld;
	pthread_mutex_unlock(&srv.os->mu);
	CHECKF(held > 0, "slot %d is not B's: it holds no region", bslot);
	uint64_t expired0 = ost_stats(sc).expired;
	pthread_mutex_lock(&srv.os->mu);
	struct os_sess *bs = &srv.os->sess[bslot];
	bs->last_hb = zl_now_us() - 2 * WINDOW_US;
	bool windows = bs->win != NULL;
	pthread_mutex_unlock(&srv.os->mu);
	for (int64_t t0 = tl_now_us(); ost_stats(sc).expired == expired0; tl_sleep_us(1000))
		CHECKF(tl_now_us() - t0 < 5000000, "B's session not expired after 5 s");
	printf("B's session expired in slot %d (%s)\n", bslot,
	       windows ? "its window kept" : "no windows: shm");

	/* 2: A's new session goes elsewhere while B's window is kept */
	zl_kv *a = ost_connect(&srv);
	int aslot = newest_slot();
	CHECK(aslot >= 0);
	CHECK_OK(zl_kv_put(a, "a", 1, "ay", 2, OST_TMO));
	get_is(a, "a", "ay", "A");

	/* 3: B, only slow, still reads through its old window */
	uint64_t begun = sessions_begun();
	get_is(b, "b", "bee", "B (expired, not told yet)");
	get_is(b, "a", "ay", "B (expired, not told yet)");
	CHECKF(sessions_begun() == begun, "B renewed before it read: the test was too slow");
	CHECKF(!windows || aslot != bslot, "A's session took slot %d, closing B's window", aslot);
	printf("A in slot %d; B read after its session expired\n", aslot);

	/* 4: B's heartbeat finds its session gone: a new one, in its own slot */
	tl_sleep_us(WINDOW_US / 4 + 100000);
	get_is(b, "a", "ay", "B (renewing)");
	CHECKF(sessions_begun() == begun + 1, "B did not start a new session");
	int nb = newest_slot();
	CHECKF(!windows || nb == bslot, "B's new session is in slot %d, not its own %d", nb, bslot);
	CHECKF(stray_windows() == 0, "%d windows left without their session", stray_windows());
	CHECK_OK(zl_kv_put(b, "b", 1, "bumble", 6, OST_TMO));
	get_is(a, "b", "bumble", "A");

	zl_kv_close(a);
	zl_kv_close(b);
	zl_client_close(sc);
	ost_stop(&srv);
	printf("ok\n");
	return 0;
}
