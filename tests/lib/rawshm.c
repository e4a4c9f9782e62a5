/* SPDX-License-Identifier: MIT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "rawshm.h"
#include "clock.h"
#include "sockutil.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>

void raw_clear_flags(int fd)
{
	CHECKF(fcntl(fd, F_SETFL, 0) == 0, "F_SETFL on fd %d: %s", fd, strerror(errno));
}

void raw_shm_hello(struct raw_shm *r, const char *url, uint32_t ring)
{
	memset(r, 0, sizeof(*r));
	r->peer_fd = -1;
	r->fd = memfd_create("raw-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	CHECK(r->fd >= 0);
	CHECKF(!ftruncate(r->fd, (off_t)CTL_SIZE + ring) &&
	       !fcntl(r->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW),
	       "memfd of %u bytes: %s", CTL_SIZE + ring, strerror(errno));
	/* only the control page: we never read our ring */
	r->map_len = CTL_SIZE;
	r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	CHECK(r->map != MAP_FAILED);
	uint64_t key;
	CHECK(getrandom(&key, sizeof(key), 0) == sizeof(key));
	struct shm_hello h = { .magic = SHM_MAGIC, .version = SHM_VERSION,
			       .hello_size = sizeof(h), .ring_size = ring,
			       .key = zl_ring_key(key), .max_msg = 1 << 20,
			       .ctl_size = CTL_SIZE };
	r->sock = tl_raw_connect(url);
	tl_send_fds(r->sock, &h, sizeof(h), &r->fd, 1);
}

int raw_shm_answer(struct raw_shm *r, int64_t timeout_us)
{
	struct shm_hello *h = &r->peer;
	size_t got = 0;
	int fds[2], nf = 0;
	int rc = zl_recv_fds(r->sock, h, sizeof(*h), &got, fds, 2, &nf, zl_deadline(timeout_us));
	CHECKF(rc == 0, "no shm hello from the peer: %s", zl_strerror(rc));
	CHECKF(got == sizeof(*h) && h->magic == SHM_MAGIC && h->version == SHM_VERSION,
	       "malformed shm hello (%zu bytes)", got);
	if (h->status) {
		CHECKF(nf == 0, "a refusal with %d fds", nf);
		return h->status;
	}
	CHECKF(nf == 1, "shm hello with %d fds, expected 1", nf);
	r->peer_fd = fds[0];
	r->peer_len = CTL_SIZE + (size_t)h->ring_size;
	r->peer_map = mmap(NULL, r->peer_len, PROT_READ | PROT_WRITE, MAP_SHARED, r->peer_fd, 0);
	CHECK(r->peer_map != MAP_FAILED);
	zl_ring_tx_init(&r->tx, r->peer_map + CTL_SIZE, h->ring_size, h->key,
			&raw_ctl(r->peer_map)->rpos, NULL, NULL);
	return 0;
}

int raw_shm_connect(struct raw_shm *r, const char *url, uint32_t ring, int64_t timeout_us)
{
	raw_shm_hello(r, url, ring);
	return raw_shm_answer(r, timeout_us);
}

void raw_shm_put(struct raw_shm *r, const void *p, uint32_t len, uint8_t type)
{
	void *dst;
	int rc = zl_ring_tx_reserve(&r->tx, len, type, &dst);
	CHECKF(rc == 0, "raw record of %u bytes: %s", len, zl_strerror(rc));
	memcpy(dst, p, len);
	CHECK_OK(zl_ring_tx_commit(&r->tx, len));
	uint8_t wake = SHM_WAKE_RX;
	ssize_t w = send(r->sock, &wake, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
	(void)w; /* a full socket: the peer has wake-ups queued */
}

long raw_shm_flood(int sock, int ms)
{
	long n = 0;
	int64_t end = tl_now_us() + (int64_t)ms * 1000;
	int big = 4 << 20; /* room for thousands of records (SO_SNDBUFFORCE: root) */
	if (setsockopt(sock, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)))
		setsockopt(sock, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	while (tl_now_us() < end) {
		uint8_t wake = n % 2 ? SHM_WAKE_TX : SHM_WAKE_RX;
		if (send(sock, &wake, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1) {
			n++;
			continue;
		}
		if (errno != EAGAIN)
			break; /* the peer is gone */
		struct pollfd p = { .fd = sock, .events = POLLOUT };
		poll(&p, 1, 1);
	}
	return n;
}

void raw_shm_close(struct raw_shm *r)
{
	if (r->peer_map)
		munmap(r->peer_map, r->peer_len);
	if (r->map)
		munmap(r->map, r->map_len);
	if (r->peer_fd >= 0)
		close(r->peer_fd);
	close(r->fd);
	close(r->sock);
	memset(r, 0, sizeof(*r));
}

int raw_srv_join(struct raw_srv *c, const char *url, uint32_t ring, int64_t timeout_us)
{
	memset(c, 0, sizeof(*c));
	c->fds[0] = c->fds[1] = -1;
	int rc = raw_shm_connect(&c->s, url, ring, timeout_us);
	if (rc)
		return rc;
	struct srv_hello h = { .magic = SRV_MAGIC, .version = SRV_VERSION, .size = sizeof(h) };
	raw_shm_put(&c->s, &h, sizeof(h), ZL_REC_MSG);
	/* the welcome, after any wake-up records */
	int64_t dl = zl_deadline(timeout_us);
	size_t got;
	int nf;
	do
		rc = zl_recv_fds(c->s.sock, &c->w, sizeof(c->w), &got, c->fds, 2, &nf, dl);
	while (!rc && got == 1 && nf == 0);
	CHECKF(rc == 0, "no welcome: %s", zl_strerror(rc));
	CHECKF(got == sizeof(c->w) && c->w.magic == SRV_MAGIC && c->w.version == SRV_VERSION,
	       "malformed welcome (%zu bytes)", got);
	if (c->w.status)
		return c->w.status;
	CHECKF(nf == 2 && (c->w.flags & SRV_F_MBOX), "welcome with %d fds, flags %#x", nf,
	       c->w.flags);
	c->page = mmap(NULL, c->w.page_len, PROT_READ | PROT_WRITE, MAP_SHARED, c->fds[1], 0);
	CHECK(c->page != MAP_FAILED);
	return 0;
}

void raw_srv_close(struct raw_srv *c)
{
	if (c->page)
		munmap(c->page, c->w.page_len);
	for (int i = 0; i < 2; i++)
		if (c->fds[i] >= 0)
			close(c->fds[i]);
	raw_shm_close(&c->s);
}
