/* SPDX-License-Identifier: MIT */
/*
 * shm:// handshakes that are well-formed messages but lie: each must be
 * refused with -EPROTO by zl_accept, without a crash, and the listener must
 * go on serving a good client. Covers what the acceptor checks before it
 * maps anything: magic, version, sizes, the fds' count, the memfd's size
 * and seals, and the ring size against the listener's max_peer_ring
 * (-EMSGSIZE).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "chanlib.h"
#include "shm_wire.h"

static char name[64];

static struct shm_hello good_hello(void)
{
	struct shm_hello h = { .magic = SHM_MAGIC, .version = SHM_VERSION,
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
	int nfds;        /* fds to send: the memfd, then /dev/null */
	int seal;        /* seal the memfd */
	size_t mem_len;  /* memfd size */
	size_t len;      /* bytes of the hello sent */
	void (*edit)(struct shm_hello *h);
	int want;        /* 0: -EPROTO */
};

static void bad_magic(struct shm_hello *h) { h->magic ^= 1; }
static void bad_version(struct shm_hello *h) { h->version = 1; }
static void bad_ring(struct shm_hello *h) { h->ring_size = 5000; }
static void huge_ring(struct shm_hello *h) { h->ring_size = 1u << 31; }
static void big_ring(struct shm_hello *h) { h->ring_size = 16384; }
static void bad_ctl(struct shm_hello *h) { h->ctl_size = 64; }
static void bad_size(struct shm_hello *h) { h->hello_size = 12; }

static void check_lie(zl_listener *l, const struct lie *c)
{
	struct shm_hello h = good_hello();
	if (c->edit)
		c->edit(&h);
	int fds[3];
	fds[0] = make_memfd(c->mem_len, c->seal);
	for (int i = 1; i < 3; i++)
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	char url[128];
	snprintf(url, sizeof(url), "shm://%s", name);
	int s = tl_raw_connect(url);
	tl_send_fds(s, &h, c->len, fds, c->nfds);
	zl_channel *ch = NULL;
	int r = zl_accept(l, 2000000, &ch);
	int want = c->want ? c->want : -EPROTO;
	if (r != want)
		FAIL("%s: zl_accept = %d (%s), want %d", c->what, r, zl_strerror(r), want);
	struct shm_hello ans;
	if (recv(s, &ans, sizeof(ans), MSG_DONTWAIT) == (ssize_t)sizeof(ans) &&
	    ans.status != want)
		FAIL("%s: refusal status %d, want %d", c->what, ans.status, want);
	printf("refused: %s\n", c->what);
	close(s);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	snprintf(name, sizeof(name), "shmtest-%d", (int)getpid());
	char url[128];
	snprintf(url, sizeof(url), "shm://%s", name);
	zl_listener *l;
	struct zl_opts o;
	zl_opts_init(&o);
	o.max_peer_ring = 8192;
	int r = zl_listen(url, &o, &l);
	if (r)
		FAIL("zl_listen: %s", zl_strerror(r));
	size_t full = CTL_SIZE + 4096, hs = sizeof(struct shm_hello);
	const struct lie lies[] = {
		{ "wrong magic", 1, 1, full, hs, bad_magic, 0 },
		{ "wrong protocol version (1: eventfd wake-ups)", 1, 1, full, hs, bad_version, 0 },
		{ "ring size not a power of two", 1, 1, full, hs, bad_ring, 0 },
		{ "ring size beyond 1 GiB", 1, 1, full, hs, huge_ring, 0 },
		{ "ring beyond max_peer_ring", 1, 1, CTL_SIZE + 16384, hs, big_ring, -EMSGSIZE },
		{ "wrong control block size", 1, 1, full, hs, bad_ctl, 0 },
		{ "hello size field wrong", 1, 1, full, hs, bad_size, 0 },
		{ "hello cut short", 1, 1, full, hs - 8, NULL, 0 },
		{ "no fds", 0, 1, full, hs, NULL, 0 },
		{ "three fds (version 1's memfd and two eventfds)", 3, 1, full, hs, NULL, 0 },
		{ "memfd not sealed (could shrink under us)", 1, 0, full, hs, NULL, 0 },
		{ "memfd smaller than the ring", 1, 1, full - 4096, hs, NULL, 0 },
	};
	for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++)
		check_lie(l, &lies[i]);

	/* and a good client still gets through */
	pid_t pid = fork();
	if (!pid) {
		zl_channel *ch;
		char small[160]; /* within the listener's max_peer_ring */
		snprintf(small, sizeof(small), "%s?ring=8192", url);
		if (zl_connect(small, NULL, 2000000, &ch))
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
