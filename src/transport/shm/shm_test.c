/* SPDX-License-Identifier: MIT */
/*
 * shm:// handshakes that are well-formed messages but lie: each must be
 * refused with -EPROTO by zl_accept, without a crash, and the listener must
 * go on serving a good client. Covers what the acceptor checks before it
 * maps anything: magic, version, sizes, the fds' count and kinds, the
 * memfd's size and seals.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "chanlib.h"
#include "shm_wire.h"

static char name[64];

static struct shm_hello good_hello(void)
{
	struct shm_hello h = { .magic = SHM_MAGIC, .version = ZL_PROTO_VERSION,
			       .hello_size = sizeof(h), .ring_size = 4096,
			       .key = 0x123456789abcdefull, .max_msg = 1 << 20,
			       .ctl_size = CTL_SIZE };
	return h;
}

/* A memfd of len bytes, sealed against shrinking or not. */
static int make_memfd(size_t len, int seal)
{
	int fd = memfd_create("shm_test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, (off_t)len) ||
	    (seal && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW)))
		FAIL("memfd: %s", strerror(errno));
	return fd;
}

struct lie {
	const char *what;
	int nfds;        /* fds to send */
	int seal;        /* seal the memfd */
	size_t mem_len;  /* memfd size */
	int pipes;       /* wake fds are pipes, not eventfds */
	size_t len;      /* bytes of the hello sent */
	void (*edit)(struct shm_hello *h);
};

static void bad_magic(struct shm_hello *h) { h->magic ^= 1; }
static void bad_version(struct shm_hello *h) { h->version = 999; }
static void bad_ring(struct shm_hello *h) { h->ring_size = 5000; }
static void huge_ring(struct shm_hello *h) { h->ring_size = 1u << 31; }
static void bad_ctl(struct shm_hello *h) { h->ctl_size = 64; }
static void bad_size(struct shm_hello *h) { h->hello_size = 12; }

static void check_lie(zl_listener *l, const struct lie *c)
{
	struct shm_hello h = good_hello();
	if (c->edit)
		c->edit(&h);
	int fds[3], p[2] = { -1, -1 }, q[2] = { -1, -1 };
	fds[FD_MEM] = make_memfd(c->mem_len, c->seal);
	if (c->pipes) {
		if (pipe(p) || pipe(q))
			FAIL("pipe");
		fds[FD_RX] = p[1];
		fds[FD_TX] = q[1];
	} else {
		fds[FD_RX] = eventfd(0, EFD_CLOEXEC);
		fds[FD_TX] = eventfd(0, EFD_CLOEXEC);
	}
	char url[128];
	snprintf(url, sizeof(url), "shm://%s", name);
	int s = tl_raw_connect(url);
	tl_send_fds(s, &h, c->len, fds, c->nfds);
	zl_channel *ch = NULL;
	int r = zl_accept(l, 2000000, &ch);
	if (r != -EPROTO)
		FAIL("%s: zl_accept = %d (%s), want -EPROTO", c->what, r, zl_strerror(r));
	printf("refused: %s\n", c->what);
	close(s);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	for (int i = 0; i < 2; i++) {
		if (p[i] >= 0 && p[i] != fds[FD_RX])
			close(p[i]);
		if (q[i] >= 0 && q[i] != fds[FD_TX])
			close(q[i]);
	}
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	snprintf(name, sizeof(name), "shmtest-%d", (int)getpid());
	char url[128];
	snprintf(url, sizeof(url), "shm://%s", name);
	zl_listener *l;
	int r = zl_listen(url, NULL, &l);
	if (r)
		FAIL("zl_listen: %s", zl_strerror(r));
	size_t full = CTL_SIZE + 4096, hs = sizeof(struct shm_hello);
	const struct lie lies[] = {
		{ "wrong magic", 3, 1, full, 0, hs, bad_magic },
		{ "wrong protocol version", 3, 1, full, 0, hs, bad_version },
		{ "ring size not a power of two", 3, 1, full, 0, hs, bad_ring },
		{ "ring size beyond 1 GiB", 3, 1, full, 0, hs, huge_ring },
		{ "wrong control block size", 3, 1, full, 0, hs, bad_ctl },
		{ "hello size field wrong", 3, 1, full, 0, hs, bad_size },
		{ "hello cut short", 3, 1, full, 0, hs - 8, NULL },
		{ "no fds", 0, 1, full, 0, hs, NULL },
		{ "two fds", 2, 1, full, 0, hs, NULL },
		{ "memfd not sealed (could shrink under us)", 3, 0, full, 0, hs, NULL },
		{ "memfd smaller than the ring", 3, 1, full - 4096, 0, hs, NULL },
		{ "wake fds are pipes, not eventfds", 3, 1, full, 1, hs, NULL },
	};
	for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++)
		check_lie(l, &lies[i]);

	/* and a good client still gets through */
	pid_t pid = fork();
	if (!pid) {
		zl_channel *ch;
		if (zl_connect(url, NULL, 2000000, &ch))
			_exit(1);
		int rc = zl_send(ch, "ok", 3, 2000000);
		zl_close(ch);
		_exit(rc ? 1 : 0);
	}
	zl_channel *ch;
	char buf[8];
	size_t len;
	if ((r = zl_accept(l, 2000000, &ch)) || (r = zl_recv(ch, buf, sizeof(buf), &len, 2000000)))
		FAIL("good client after the lies: %s", zl_strerror(r));
	zl_close(ch);
	zl_listener_close(l);
	printf("PASS: %zu lying handshakes refused, then a good client served\n",
	       sizeof(lies) / sizeof(lies[0]));
	return 0;
}
