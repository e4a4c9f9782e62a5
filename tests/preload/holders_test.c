/* SPDX-License-Identifier: MIT */
/*
 * holders_test.c - one socket, many holders: threads and forked processes
 * that call on the same connected socket at once. The kernel makes each
 * call one step under its socket lock and keeps one state per socket (an
 * error told once, the file's O_NONBLOCK); under the preload the same must
 * hold, with the rings and the side's own state shared by every holder.
 * Each case asserts what Linux does; it runs plain and preloaded
 * (sem_run.sh) and must print the same transcript both ways.
 *
 *   holders_test tcp4|tcp6|unix [case-name-substring]
 *
 * stdout: "ok NAME", "FAIL NAME: why" or "skip NAME: why" per case. Exit 0
 * all passed, 1 a case failed, 77 the family is unavailable, 2 usage.
 * Bounds: a 20 s watchdog per case, IO_WAIT_MS per wait.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "sem_util.h"
#include "pair_util.h"
#pragma GCC diagnostic pop

#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>

#define REC 64      /* one record: who, its number, a pattern */
#define RECS 3000   /* per writer */
#define TOTAL (256 << 10)

static void rec_fill(uint8_t *r, int who, uint32_t seq)
{
	r[0] = (uint8_t)who;
	memcpy(r + 1, &seq, sizeof seq);
	for (int k = 5; k < REC; k++)
		r[k] = (uint8_t)(who * 7 + seq + k);
}

static bool rec_ok(const uint8_t *r, int *who, uint32_t *seq)
{
	*who = r[0];
	memcpy(seq, r + 1, sizeof *seq);
	for (int k = 5; k < REC; k++)
		if (r[k] != (uint8_t)(*who * 7 + *seq + k))
			return false;
	return true;
}

/* A child that writes RECS records of its own, one write each. */
static void writer(int fd, int who)
{
	uint8_t r[REC];
	for (uint32_t i = 0; i < RECS; i++) {
		rec_fill(r, who, i);
		if (write(fd, r, REC) != REC)
			_exit(1);
	}
	_exit(0);
}

static int wait_child(pid_t p, const char *what)
{
	int st = 0;
	for (double end = now_ms() + IO_WAIT_MS; now_ms() < end; msleep(2)) {
		pid_t r = waitpid(p, &st, WNOHANG);
		if (r == p)
			return WIFEXITED(st) && WEXITSTATUS(st) == 0
				       ? 0
				       : failf("%s: exit %d", what, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
	kill(p, SIGKILL);
	waitpid(p, &st, 0);
	return failf("%s: still running after %d ms", what, IO_WAIT_MS);
}

/* Two processes write on one socket at once: every write arrives whole,
 * each writer's in its order, none lost or doubled. */
static int case_fork_writers_whole(struct ctx *x)
{
	pid_t p[2];
	for (int i = 0; i < 2; i++) {
		p[i] = fork();
		CHECK(p[i] >= 0, "fork: %s", errname(errno));
		if (p[i] == 0)
			writer(x->c, 'A' + i);
	}
	uint8_t buf[REC];
	uint32_t next[2] = { 0, 0 };
	int rc = 0;
	for (int n = 0; n < 2 * RECS && !rc; n++) {
		rc = read_full(x->s, buf, REC, "a record");
		int who;
		uint32_t seq;
		if (!rc && (!rec_ok(buf, &who, &seq) || (who != 'A' && who != 'B')))
			rc = failf("record %d is not whole (a write was cut or mixed)", n);
		else if (!rc && seq != next[who - 'A'])
			rc = failf("writer %c: record %u after %u", who, seq, next[who - 'A']);
		else if (!rc)
			next[who - 'A']++;
	}
	int r0 = wait_child(p[0], "writer A"), r1 = wait_child(p[1], "writer B");
	TRY(rc);
	TRY(r0);
	TRY(r1);
	return expect_quiet(x->s, 20, "after both writers");
}

/* Readers that share the socket: each byte goes to one of them, once. */
struct share {
	int fd;
	_Atomic uint64_t *left; /* bytes not yet read by anyone */
	uint64_t got, sum;
	int err;
};

static void read_share(struct share *sh)
{
	uint8_t b[1000];
	double end = now_ms() + IO_WAIT_MS;
	while (atomic_load(sh->left) > 0 && now_ms() < end) {
		struct pollfd p = { sh->fd, POLLIN, 0 };
		poll(&p, 1, 10);
		ssize_t r = recv(sh->fd, b, sizeof b, MSG_DONTWAIT);
		if (r < 0 && errno != EAGAIN) {
			sh->err = errno;
			return;
		}
		if (r == 0)
			return; /* the end: another reader took the last bytes */
		for (ssize_t i = 0; i < r; i++)
			sh->sum += b[i];
		if (r > 0) {
			sh->got += (uint64_t)r;
			atomic_fetch_sub(sh->left, (uint64_t)r);
		}
	}
}

static void *reader_thread(void *a)
{
	read_share(a);
	return NULL;
}

static uint64_t pattern_sum(void)
{
	static uint8_t b[TOTAL];
	fill_pat(b, TOTAL, 9, 0);
	uint64_t s = 0;
	for (size_t i = 0; i < TOTAL; i++)
		s += b[i];
	return s;
}

/* the accepted end sends TOTAL bytes from a child of its own */
static int send_total(struct ctx *x, pid_t *p)
{
	*p = fork();
	CHECK(*p >= 0, "fork: %s", errname(errno));
	if (*p == 0)
		_exit(send_pattern(x->s, TOTAL, 9, "the bytes") ? 1 : 0);
	close_fd(&x->s);
	return 0;
}

static int check_shares(uint64_t got, uint64_t sum, uint64_t a, uint64_t b)
{
	CHECK(got == TOTAL, "the readers got %llu bytes of %d (%llu and %llu)",
	      (unsigned long long)got, TOTAL, (unsigned long long)a, (unsigned long long)b);
	CHECK(sum == pattern_sum(), "the readers' bytes are not the bytes sent");
	return 0;
}

static int case_thread_readers_once(struct ctx *x)
{
	pid_t p;
	TRY(send_total(x, &p));
	_Atomic uint64_t left = TOTAL;
	struct share sh[2] = { { x->c, &left, 0, 0, 0 }, { x->c, &left, 0, 0, 0 } };
	pthread_t t;
	CHECK(!pthread_create(&t, NULL, reader_thread, &sh[1]), "pthread_create failed");
	read_share(&sh[0]);
	pthread_join(t, NULL);
	TRY(wait_child(p, "the sender"));
	CHECK(!sh[0].err && !sh[1].err, "a reader failed: %s / %s", errname(sh[0].err),
	      errname(sh[1].err));
	TRY(check_shares(sh[0].got + sh[1].got, sh[0].sum + sh[1].sum, sh[0].got, sh[1].got));
	char b; /* and then the end (the sender's exit: poll says it first) */
	TRY(wait_for(x->c, POLLIN, "the end of the stream"));
	EXPECT_RET(recv(x->c, &b, 1, MSG_DONTWAIT), 0);
	return 0;
}

static int case_fork_readers_once(struct ctx *x)
{
	pid_t p;
	TRY(send_total(x, &p));
	/* the count of bytes left, shared with the child as the socket is */
	_Atomic uint64_t *left = mmap(NULL, sizeof(*left), PROT_READ | PROT_WRITE,
				      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(left != MAP_FAILED, "mmap: %s", errname(errno));
	atomic_store(left, TOTAL);
	int pp[2];
	CHECK(!pipe(pp), "pipe: %s", errname(errno));
	pid_t r = fork();
	CHECK(r >= 0, "fork: %s", errname(errno));
	if (r == 0) {
		struct share c = { x->c, left, 0, 0, 0 };
		read_share(&c);
		uint64_t out[3] = { c.got, c.sum, (uint64_t)c.err };
		_exit(write(pp[1], out, sizeof out) == sizeof out ? 0 : 1);
	}
	struct share me = { x->c, left, 0, 0, 0 };
	read_share(&me);
	uint64_t kid[3] = { 0, 0, 0 };
	int rc = wait_child(r, "the other reader");
	if (!rc && read(pp[0], kid, sizeof kid) != sizeof kid)
		rc = failf("the other reader's counts are missing");
	close(pp[0]);
	close(pp[1]);
	munmap(left, sizeof(*left));
	TRY(rc);
	TRY(wait_child(p, "the sender"));
	CHECK(!me.err && !kid[2], "a reader failed: %s / %s", errname(me.err), errname((int)kid[2]));
	TRY(check_shares(me.got + kid[0], me.sum + kid[1], me.got, kid[0]));
	char b; /* and then the end (the sender's exit: poll says it first) */
	TRY(wait_for(x->c, POLLIN, "the end of the stream"));
	EXPECT_RET(recv(x->c, &b, 1, MSG_DONTWAIT), 0);
	return 0;
}

/* A reset is told once, to the first holder that asks: a child's read
 * takes it, and the parent's next read sees the end of the stream. */
/* The peer closes with our bytes unread (a reset), then we fork. */
static int reset_then_fork(struct ctx *x, pid_t *p)
{
	EXPECT_RET(write(x->c, "unread", 6), 6);
	TRY(wait_for(x->s, POLLIN, "our bytes at the peer"));
	close_fd(&x->s);
	TRY(wait_for(x->c, POLLERR, "the reset"));
	*p = fork();
	CHECK(*p >= 0, "fork: %s", errname(errno));
	return 0;
}

static int case_fork_reset_told_once(struct ctx *x)
{
	char b[8];
	pid_t p;
	TRY(reset_then_fork(x, &p));
	if (p == 0)
		_exit(recv(x->c, b, sizeof b, MSG_DONTWAIT) == -1 && errno == ECONNRESET ? 0 : 1);
	TRY(wait_child(p, "the child's read (ECONNRESET)"));
	int err = -1;
	TRY(so_error(x->c, &err));
	CHECK(err == 0, "SO_ERROR after the child took the reset: %s, want 0", errname(err));
	EXPECT_RET(recv(x->c, b, sizeof b, MSG_DONTWAIT), 0);
	return 0;
}

/* The same, the reset taken by a child's send (TCP: a send reports it,
 * then EPIPE; a Unix send says EPIPE and leaves it to the reads) */
static int case_fork_send_takes_reset(struct ctx *x)
{
	char b[8];
	pid_t p;
	TRY(reset_then_fork(x, &p));
	int want = is_tcp(x) ? ECONNRESET : EPIPE;
	if (p == 0)
		_exit(send(x->c, "a", 1, MSG_NOSIGNAL) == -1 && errno == want ? 0 : 1);
	TRY(wait_child(p, "the child's send"));
	EXPECT_ERR(send(x->c, "a", 1, MSG_NOSIGNAL), EPIPE);
	if (is_tcp(x)) {
		EXPECT_RET(recv(x->c, b, sizeof b, MSG_DONTWAIT), 0);
	} else {
		EXPECT_ERR(recv(x->c, b, sizeof b, MSG_DONTWAIT), ECONNRESET);
		EXPECT_RET(recv(x->c, b, sizeof b, MSG_DONTWAIT), 0);
	}
	return 0;
}

/* O_NONBLOCK belongs to the open file, which fork shares: a child that
 * sets it makes the parent's reads nonblocking too. */
static int case_fork_nonblock_shared(struct ctx *x)
{
	char b[8];
	struct timeval tv = { 2, 0 }; /* (a bound, should the read block) */
	CHECK(!setsockopt(x->c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), "SO_RCVTIMEO: %s",
	      errname(errno));
	pid_t p = fork();
	CHECK(p >= 0, "fork: %s", errname(errno));
	if (p == 0)
		_exit(fcntl(x->c, F_SETFL, fcntl(x->c, F_GETFL) | O_NONBLOCK) ? 1 : 0);
	TRY(wait_child(p, "the child's fcntl"));
	CHECK(fcntl(x->c, F_GETFL) & O_NONBLOCK, "F_GETFL: no O_NONBLOCK after the child set it");
	double t0 = now_ms();
	EXPECT_ERR(recv(x->c, b, sizeof b, 0), EAGAIN);
	CHECK(now_ms() - t0 < 1000, "the read waited %.0f ms: it blocked", now_ms() - t0);
	return 0;
}

/* Two holders asleep in a blocking read: each chunk the peer sends wakes
 * one of them, and neither sleeps through a chunk meant for it. */
static int case_fork_sleeping_readers(struct ctx *x)
{
	struct timeval tv = { 3, 0 }; /* (a bound: a missed wake-up shows as EAGAIN) */
	CHECK(!setsockopt(x->c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), "SO_RCVTIMEO: %s",
	      errname(errno));
	pid_t p[2];
	for (int i = 0; i < 2; i++) {
		p[i] = fork();
		CHECK(p[i] >= 0, "fork: %s", errname(errno));
		if (p[i] == 0) {
			char b[64];
			_exit(recv(x->c, b, sizeof b, 0) == 10 ? 0 : 1);
		}
	}
	msleep(100); /* (both asleep) */
	EXPECT_RET(write(x->s, "0123456789", 10), 10);
	msleep(100); /* (one of them woke and read it) */
	EXPECT_RET(write(x->s, "abcdefghij", 10), 10);
	int r0 = wait_child(p[0], "the first sleeping reader");
	int r1 = wait_child(p[1], "the second sleeping reader");
	TRY(r0);
	TRY(r1);
	return 0;
}

static const struct test tests[] = {
	{ "fork_writers_whole", case_fork_writers_whole },
	{ "thread_readers_once", case_thread_readers_once },
	{ "fork_readers_once", case_fork_readers_once },
	{ "fork_reset_told_once", case_fork_reset_told_once },
	{ "fork_send_takes_reset", case_fork_send_takes_reset },
	{ "fork_nonblock_shared", case_fork_nonblock_shared },
	{ "fork_sleeping_readers", case_fork_sleeping_readers },
};

int main(int argc, char **argv)
{
	return pair_main(argc, argv, "holders_test", tests, sizeof tests / sizeof tests[0]);
}
