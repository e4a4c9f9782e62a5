/* SPDX-License-Identifier: MIT */
/*
 * rdma: rogue clients attack the mailbox while honest clients call (run in
 * the Soft-RoCE VM). Each rdma client may WRITE only through two type-2
 * memory windows bound to its own queue pair (src/server/serve.c). A rogue,
 * on a fresh connection each time, tries:
 *   victim  the victim's own window keys and addresses (which this test
 *           hands it), on the rogue's queue pair;
 *   slots   its own slot window, just past its end;
 *   flags   its own flag window, just past its end: the next client's flags.
 * Every WRITE must fail on the rogue's connection (its calls then fail), the
 * victim and the honest clients must get every reply right, and the server
 * must drop the rogues and keep serving.
 */
#include "srvlib.h"
#include "internal.h"
#include "server.h"

#define T_OUT 20000000

enum attack { A_VICTIM, A_SLOTS, A_FLAGS };
static const char *const attack_name[] = { "victim", "slots", "flags" };

/* Post the attack's WRITEs from a registered buffer, then wait for the
 * rogue's connection to fail. */
static void attack(const char *url, enum attack a, zl_client *victim)
{
	zl_client *r = tl_client(url, T_OUT);
	tl_call_check(r, 1, 10, 1, T_OUT); /* an honest client so far */
	zl_channel *rch, *vch;
	struct zl_rwin rs, rf, vs, vf;
	CHECK_OK(srv_client_rwin(r, &rch, &rs, &rf));
	CHECK_OK(srv_client_rwin(victim, &vch, &vs, &vf));
	static uint8_t buf[4096] __attribute__((aligned(4096)));
	memset(buf, 0xab, sizeof(buf));
	struct zl_rmem *m;
	CHECK_OK(rch->os->reg(rch, buf, sizeof(buf), &m));
	struct zl_rwin slot = a == A_VICTIM ? vs : rs, flag = a == A_VICTIM ? vf : rf;
	uint32_t soff = 0, foff = 0;
	if (a == A_SLOTS) { /* stretch our own window: the NIC must refuse */
		soff = slot.len;
		slot.len += 64;
	} else if (a == A_FLAGS) {
		foff = flag.len;
		flag.len += 8;
	}
	int rc = rch->os->write(rch, m, buf, 64, &slot, soff);
	if (!rc)
		rc = rch->os->write(rch, m, buf, 1, &flag, foff);
	CHECKF(rc == 0 || rc == -ECONNRESET, "posting the attack: %s", zl_strerror(rc));
	/* the failed WRITE fails our queue pair: calls fail, none hangs */
	const void *rep;
	size_t n;
	for (int i = 0; i < 500 && rc != -ECONNRESET; i++) {
		rc = zl_call(r, 1, "x", 1, &rep, &n, 100000);
		if (rc == 0)
			tl_sleep_us(10000);
	}
	printf("attack %s: the rogue's call returns %s\n", attack_name[a], zl_strerror(rc));
	CHECKF(rc == -ECONNRESET, "attack %s: the rogue kept working (%s)", attack_name[a],
	       zl_strerror(rc));
	rch->os->dereg(m);
	zl_client_close(r);
}

int main(void)
{
	tl_watchdog(300);
	if (!getenv("ZL_TEST_URL_rdma"))
		SKIP("needs the rdma VM (tests/vm/rdma-suite.sh sets ZL_TEST_URL_rdma)");
	struct tl_srv s;
	tl_srv_start(&s, "rdma", NULL, NULL);
	_Atomic int stop = 0;
	struct tl_honest h[2];
	tl_honest_start(h, 2, s.url, &stop);
	zl_client *victim = tl_client(s.url, T_OUT);
	uint64_t id = 0;
	for (int a = A_VICTIM; a <= A_FLAGS; a++) {
		for (int i = 0; i < 20; i++)
			tl_call_check(victim, 1 + i % 4, (size_t)i * 37, ++id, T_OUT);
		attack(s.url, (enum attack)a, victim);
		for (int i = 0; i < 20; i++)
			tl_call_check(victim, 1 + i % 4, (size_t)i * 37, ++id, T_OUT);
	}
	atomic_store(&stop, 1);
	uint64_t calls, slow;
	int64_t worst = tl_honest_join(h, 2, &calls, &slow);
	/* the rogues are gone; the victim and a new client are served */
	struct zl_server_info info;
	int64_t end = tl_now_us() + 10000000;
	do {
		CHECK_OK(zl_server_info(s.srv, &info));
	} while (info.clients != 1 && tl_now_us() < end && (tl_sleep_us(10000), 1));
	printf("honest: %" PRIu64 " calls (%" PRIu64 " over %d us), worst %" PRId64
	       " us; victim: %" PRIu64 " calls; server: %" PRIu64 " clients left, %" PRIu64
	       " requests\n", calls, slow, TL_SLOW_US, worst, id, info.clients, info.requests);
	CHECKF(info.clients == 1, "%" PRIu64 " clients still attached", info.clients);
	zl_client *after = tl_client(s.url, T_OUT);
	tl_call_check(after, 1, 10, 5, T_OUT);
	tl_call_check(victim, 2, 300, ++id, T_OUT);
	zl_client_close(after);
	zl_client_close(victim);
	tl_srv_stop(&s);
	return 0;
}
