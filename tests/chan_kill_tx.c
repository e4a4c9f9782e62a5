/* SPDX-License-Identifier: MIT */
/*
 * chan_kill_tx SCHEME: a sender killed (SIGKILL) in the middle of a stream.
 * It streams numbered messages of random sizes, some larger than a ring
 * record (fragmented), and counts in shared memory the ones zl_send (with
 * no timeout) has returned 0 for. We read along and kill it at a random
 * point. Then every message it completed arrives, whole and in order (no
 * gap, no duplicate, no torn or partial one, a half-sent fragmented
 * message included), and after them -ECONNRESET, within 5 s. Repeated
 * with different kill points.
 */
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "chanlib.h"

#define TMO 5000000
#define BIG (300 << 10)

static char url[600];
static _Atomic uint64_t *done; /* shared: messages the sender completed */
static uint64_t seed;

static size_t msg_len(uint64_t i)
{
	uint64_t s = seed ^ (i * 0x9e3779b97f4a7c15ull);
	uint64_t r = tl_splitmix(&s);
	return r % 16 == 0 ? BIG - (size_t)(r >> 40) % 1000 : (size_t)(r >> 32) % 2000;
}

static int sender(void *arg)
{
	(void)arg;
	zl_channel *ch = tl_connect(url, TMO);
	static uint8_t buf[BIG];
	for (uint64_t i = 0;; i++) {
		size_t len = msg_len(i);
		tl_fill(buf, len, i);
		CHECK_OK(zl_send(ch, buf, len, -1));
		atomic_store(done, i + 1);
	}
}

static void one_round(const char *scheme, struct tl_rng *rng)
{
	zl_listener *l = tl_listen(scheme, "ring=65536", url, sizeof(url));
	atomic_store(done, 0);
	pid_t pid = tl_fork(sender, NULL, 60);
	zl_channel *ch = tl_accept(l, TMO);
	zl_listener_close(l);
	static uint8_t buf[BIG];
	uint64_t kill_at = 50 + tl_rand_below(rng, 400), got = 0;
	size_t len;
	/* read along, then kill the sender while it streams */
	for (; got < kill_at; got++) {
		CHECK_OK(zl_recv(ch, buf, sizeof(buf), &len, TMO));
		CHECKF(len == msg_len(got), "message %" PRIu64 ": %zu bytes, want %zu", got, len,
		       msg_len(got));
		CHECK_PATTERN(buf, len, got);
	}
	kill(pid, SIGKILL);
	CHECK(waitpid(pid, NULL, 0) == pid);
	uint64_t completed = atomic_load(done);
	int64_t t0 = tl_now_us();
	int rc;
	while ((rc = zl_recv(ch, buf, sizeof(buf), &len, TMO)) == 0) {
		CHECKF(len == msg_len(got), "after the kill, message %" PRIu64 ": %zu bytes, want "
		       "%zu (a partial message?)", got, len, msg_len(got));
		CHECK_PATTERN(buf, len, got);
		got++;
	}
	int64_t el = tl_now_us() - t0;
	CHECKF(rc == -ECONNRESET, "after %" PRIu64 " messages: %d (%s), want -ECONNRESET", got,
	       rc, zl_strerror(rc));
	CHECKF(el < 5000000 || tl_scaled_down(), "-ECONNRESET took %.1f ms", el / 1000.0);
	/* the sender may have placed one more than it could count */
	CHECKF(got == completed || got == completed + 1,
	       "%" PRIu64 " messages arrived, the sender completed %" PRIu64, got, completed);
	CHECK_RC(zl_recv(ch, buf, sizeof(buf), &len, 0), -ECONNRESET);
	zl_close(ch);
	printf("killed after %" PRIu64 " read: %" PRIu64 " completed, %" PRIu64
	       " arrived whole and in order, then -ECONNRESET after %.1f ms\n",
	       kill_at, completed, got, el / 1000.0);
}

int main(int argc, char **argv)
{
	const char *scheme = tl_scheme_arg(argc, argv);
	tl_watchdog(120);
	signal(SIGPIPE, SIG_IGN);
	done = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(done != MAP_FAILED);
	seed = tl_seed();
	struct tl_rng rng = { seed };
	for (int r = 0; r < 5; r++)
		one_round(scheme, &rng);
	printf("chan_kill_tx %s: ok\n", scheme);
	return 0;
}
