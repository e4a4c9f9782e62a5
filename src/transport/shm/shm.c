/* SPDX-License-Identifier: MIT */
/*
 * shm://NAME: two rings in memfd memory on one host.
 *
 * Rendezvous: an abstract SOCK_SEQPACKET socket "\0zipline/NAME" (no file,
 * nothing world-readable). Each side creates the ring it RECEIVES on (a
 * sealed memfd: a control page, then the ring) and sends it with its hello
 * over SCM_RIGHTS. The peer is checked with SO_PEERCRED: another uid is
 * refused unless allow_other_uid says otherwise, root included.
 *
 * Everything received is checked before use: hello size, magic, version,
 * ring size (at most max_peer_ring: we map it and write into it), and that
 * the memfd has the promised size and can no longer shrink (so the peer
 * cannot make our accesses fault).
 *
 * Wake-ups (trust): nothing we block on may be shared with the peer. An fd
 * passed over SCM_RIGHTS shares its file status flags, so a peer could clear
 * O_NONBLOCK on it and make our read or write of it block for good. So the
 * connected socket itself carries the wake-ups, as one-byte records: each
 * end is its owner's own open file, and every call on it is MSG_DONTWAIT.
 * The socket also stays the liveness signal (EOF or RDHUP: the peer closed
 * or died).
 *
 * One socket serves two directions, and two threads may wait on one channel
 * (a receiver for data, a sender for room). Whoever drains the socket
 * forwards the other direction's records to a private eventfd (lfd[d], never
 * passed to anyone), and a waiter for direction d polls the socket and
 * lfd[d]: a wake-up drained by the other thread still reaches it. A peer
 * that floods the socket gets EAGAIN-dropped wake-ups on its own channel
 * only; our drains read a bounded number of records per call.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "ringchan.h"
#include "shm_wire.h"
#include "sockutil.h"


/* Records one drain reads at most: a peer cannot hold us in a drain. */
#define DRAIN_MAX 64

struct shm_side {
	uint8_t *map;
	size_t map_len;
	int fd[NFDS]; /* memfd (closed after mmap) */
};

struct shm_chan {
	struct zl_ringchan rc;
	int sock;
	int epfd;
	int lfd[2]; /* private eventfds, by enum zl_dir: forwarded wake-ups */
	_Atomic bool lfd_set[2]; /* lfd[d] may hold a count */
	struct shm_side me, peer;
};

struct shm_listener {
	struct zl_listener base;
	int fd;
	char name[256];
	struct zl_opts opts;
};

#define SC(rc) ((struct shm_chan *)(rc))
static inline struct shm_ctl *ctl_of(struct shm_side *s) { return (struct shm_ctl *)s->map; }

/* ---- link operations -------------------------------------------------- */

static int shm_arm(struct zl_ringchan *rc, enum zl_dir d)
{
	struct shm_chan *c = SC(rc);
	if (d == ZL_DIR_RX)
		atomic_store(&ctl_of(&c->me)->rx_sleeping, 1);
	else
		atomic_store(&ctl_of(&c->peer)->tx_sleeping, 1);
	return 0;
}

static void shm_demand(struct zl_ringchan *rc)
{
	atomic_store_explicit(&ctl_of(&SC(rc)->peer)->tx_sleeping, ZL_TX_DEMAND,
			      memory_order_relaxed);
}

static int shm_wake(struct zl_ringchan *rc, enum zl_dir d)
{
	uint8_t tag = d == ZL_DIR_RX ? SHM_WAKE_RX : SHM_WAKE_TX;
	zl_rc_syscall(rc, 1);
	ssize_t w = send(SC(rc)->sock, &tag, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
	(void)w; /* EAGAIN: wake-ups are queued, the peer will wake; EPIPE: gone */
	return 0;
}

static void efd_drain(int fd)
{
	uint64_t v;
	ssize_t r = read(fd, &v, 8);
	(void)r;
}

/* Read the wake-ups queued on the socket (at most DRAIN_MAX), forward the
 * other direction's to its private eventfd, and clear our own (d).
 * -ECONNRESET if the socket said the peer is gone, else 0. */
static int drain(struct shm_chan *c, enum zl_dir d)
{
	bool fwd[2] = { false, false }, gone = false;
	uint8_t tag[DRAIN_MAX];
	struct iovec iov[DRAIN_MAX];
	struct mmsghdr mm[DRAIN_MAX];
	memset(mm, 0, sizeof(mm));
	for (int i = 0; i < DRAIN_MAX; i++) {
		iov[i] = (struct iovec){ &tag[i], 1 };
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	uint64_t calls = 1;
	int n = recvmmsg(c->sock, mm, DRAIN_MAX, MSG_DONTWAIT, NULL);
	if (n < 0)
		gone = errno != EAGAIN && errno != EINTR;
	gone |= n == 0; /* EOF */
	for (int i = 0; i < n; i++) {
		if (mm[i].msg_len == 0) /* EOF after the records */
			gone = true;
		else if (tag[i] == SHM_WAKE_RX || tag[i] == SHM_WAKE_TX)
			fwd[tag[i] == SHM_WAKE_RX ? ZL_DIR_RX : ZL_DIR_TX] = true;
	}
	uint64_t one = 1;
	enum zl_dir o = d == ZL_DIR_RX ? ZL_DIR_TX : ZL_DIR_RX;
	if (fwd[o]) {
		calls++;
		ssize_t w = write(c->lfd[o], &one, 8);
		(void)w; /* a full counter is readable all the same */
		/* after the write: a drain that sees the flag finds the count */
		atomic_store_explicit(&c->lfd_set[o], true, memory_order_release);
	}
	/* our private eventfd holds something only if the other direction's
	 * drain forwarded it: read it only then */
	if (atomic_exchange_explicit(&c->lfd_set[d], false, memory_order_acquire)) {
		calls++;
		efd_drain(c->lfd[d]);
	}
	zl_rc_syscall(&c->rc, calls);
	return gone ? -ECONNRESET : 0;
}

static int shm_drain(struct zl_ringchan *rc) { return drain(SC(rc), ZL_DIR_RX); }

/* RDHUP or HUP on the socket: the peer closed, died or shut it down. */
static bool hung_up(short revents) { return revents & (POLLRDHUP | POLLHUP | POLLERR); }

static int shm_alive(struct zl_ringchan *rc)
{
	zl_rc_syscall(rc, 1);
	struct pollfd p = { .fd = SC(rc)->sock, .events = POLLRDHUP };
	return poll(&p, 1, 0) > 0 && hung_up(p.revents) ? -ECONNRESET : 0;
}

static int shm_sleep(struct zl_ringchan *rc, enum zl_dir d, int64_t deadline)
{
	struct shm_chan *c = SC(rc);
	struct pollfd p[2] = {
		{ .fd = c->sock, .events = POLLIN | POLLRDHUP },
		{ .fd = c->lfd[d], .events = POLLIN },
	};
	zl_rc_syscall(rc, 1);
	int n = poll(p, 2, zl_poll_ms(deadline));
	if (n > 0 && hung_up(p[0].revents))
		return -ECONNRESET;
	if (n > 0)
		return drain(c, d);
	return 0;
}

static int shm_sock(struct zl_ringchan *rc) { return SC(rc)->sock; }

static int shm_fd(struct zl_ringchan *rc)
{
	struct shm_chan *c = SC(rc);
	if (c->epfd >= 0)
		return c->epfd;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return -errno;
	struct epoll_event e1 = { .events = EPOLLIN | EPOLLRDHUP, .data.fd = c->sock };
	struct epoll_event e2 = { .events = EPOLLIN, .data.fd = c->lfd[ZL_DIR_RX] };
	if (epoll_ctl(ep, EPOLL_CTL_ADD, c->sock, &e1) ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, c->lfd[ZL_DIR_RX], &e2)) {
		int e = -errno;
		close(ep);
		return e;
	}
	c->epfd = ep;
	return ep;
}

static void side_free(struct shm_side *s)
{
	if (s->map)
		munmap(s->map, s->map_len);
	for (int i = 0; i < NFDS; i++)
		if (s->fd[i] >= 0)
			close(s->fd[i]);
	s->map = NULL;
}

static void shm_destroy(struct zl_ringchan *rc)
{
	struct shm_chan *c = SC(rc);
	zl_ringchan_fini(rc);
	side_free(&c->me);
	side_free(&c->peer);
	for (int i = 0; i < 2; i++)
		if (c->lfd[i] >= 0)
			close(c->lfd[i]);
	if (c->epfd >= 0)
		close(c->epfd);
	if (c->sock >= 0)
		close(c->sock);
	free(c);
}

static void shm_publish(struct zl_ringchan *rc, uint64_t rpos)
{
	atomic_store_explicit(&ctl_of(&SC(rc)->me)->rpos, rpos, memory_order_release);
}

static void shm_publish_max(struct zl_ringchan *rc, uint64_t rpos)
{
	_Atomic uint64_t *p = &ctl_of(&SC(rc)->me)->rpos;
	uint64_t cur = atomic_load_explicit(p, memory_order_relaxed);
	while (rpos > cur && !atomic_compare_exchange_weak_explicit(p, &cur, rpos,
								     memory_order_release,
								     memory_order_relaxed))
		;
}

static const struct zl_ring_link_ops shm_link = {
	.name = "shm",
	.arm = shm_arm,
	.demand = shm_demand,
	.wake = shm_wake,
	.sleep = shm_sleep,
	.alive = shm_alive,
	.drain = shm_drain,
	.fd = shm_fd,
	.sock = shm_sock,
	.destroy = shm_destroy,
};

/* ---- setup ------------------------------------------------------------- */

static struct shm_chan *chan_new(int sock)
{
	struct shm_chan *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->sock = sock;
	c->epfd = -1;
	for (int i = 0; i < NFDS; i++)
		c->me.fd[i] = c->peer.fd[i] = -1;
	c->lfd[0] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	c->lfd[1] = c->lfd[0] < 0 ? -1 : eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c->lfd[1] < 0) {
		if (c->lfd[0] >= 0)
			close(c->lfd[0]);
		free(c);
		return NULL;
	}
	return c;
}

/* Create the ring we receive on. */
static int side_create(struct shm_side *s, uint32_t ring_size)
{
	s->map_len = CTL_SIZE + (size_t)ring_size;
	s->fd[FD_MEM] = zl_memfd_sealed("zipline-shm", s->map_len);
	if (s->fd[FD_MEM] < 0)
		return s->fd[FD_MEM];
	s->map = mmap(NULL, s->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		      s->fd[FD_MEM], 0);
	if (s->map == MAP_FAILED) {
		s->map = NULL;
		return -errno;
	}
	return 0;
}

/* Check and map what the peer sent. */
static int side_adopt(struct shm_side *s, const struct shm_hello *h)
{
	s->map_len = CTL_SIZE + (size_t)h->ring_size;
	if (zl_memfd_check(s->fd[FD_MEM], s->map_len)) {
		ZL_LOG(ZL_LOG_ERROR, "shm: peer's ring memory is not a sealed memfd of %zu bytes",
		       s->map_len);
		return -EPROTO;
	}
	s->map = mmap(NULL, s->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		      s->fd[FD_MEM], 0);
	if (s->map == MAP_FAILED) {
		s->map = NULL;
		return -errno;
	}
	close(s->fd[FD_MEM]);
	s->fd[FD_MEM] = -1;
	return 0;
}

static int send_hello(int sock, const struct shm_hello *h, const int *fds, int nfds)
{
	return zl_send_fds(sock, h, sizeof(*h), fds, nfds);
}

/* Receive a hello and exactly NFDS fds (or none, for a refusal). */
static int recv_hello(int sock, const struct zl_opts *o, struct shm_hello *h, int *fds,
		      int64_t deadline)
{
	size_t got = 0;
	int nf = 0, all[NFDS + 1]; /* one more, to tell extra fds apart */
	int r = zl_recv_fds(sock, h, sizeof(*h), &got, all, NFDS + 1, &nf, deadline);
	for (int i = 0; i < nf; i++) {
		if (i < NFDS)
			fds[i] = all[i]; /* the caller closes them */
		else
			close(all[i]);
	}
	if (r == -EPROTO)
		ZL_LOG(ZL_LOG_ERROR, "shm: truncated handshake");
	if (r)
		return r;
	if (got != sizeof(*h) || h->magic != SHM_MAGIC || h->hello_size != sizeof(*h)) {
		ZL_LOG(ZL_LOG_ERROR, "shm: malformed handshake (%zu bytes)", got);
		return -EPROTO;
	}
	if (h->version != SHM_VERSION) {
		ZL_LOG(ZL_LOG_ERROR, "shm: peer speaks protocol %u, we speak %u", h->version,
		       SHM_VERSION);
		return -EPROTO;
	}
	if (h->status)
		return h->status < 0 && h->status > -4096 ? h->status : -EPROTO;
	if (nf != NFDS || h->ring_size < 4096 || h->ring_size > (1u << 30) ||
	    (h->ring_size & (h->ring_size - 1)) || h->ctl_size != CTL_SIZE ) {
		ZL_LOG(ZL_LOG_ERROR, "shm: handshake with bad ring parameters (ring %u, %d fds)",
		       h->ring_size, nf);
		return -EPROTO;
	}
	if (h->ring_size > o->max_peer_ring) {
		ZL_LOG(ZL_LOG_ERROR, "shm: refusing a peer ring of %u bytes (max_peer_ring %u)",
		       h->ring_size, o->max_peer_ring);
		return -EMSGSIZE;
	}
	return 0;
}

static void make_hello(struct shm_hello *h, const struct zl_opts *o, uint64_t key, int status)
{
	memset(h, 0, sizeof(*h));
	h->magic = SHM_MAGIC;
	h->version = SHM_VERSION;
	h->hello_size = sizeof(*h);
	h->status = status;
	h->ring_size = o->ring_size;
	h->key = key;
	h->max_msg = o->max_msg;
	h->ctl_size = CTL_SIZE;
	h->flags = SHM_F_LINES | (zl_membarrier_register() ? SHM_F_MEMBARRIER : 0);
}

static int random_key(uint64_t *key)
{
	if (getrandom(key, sizeof(*key), 0) != sizeof(*key))
		return -errno;
	*key = zl_ring_key(*key);
	return 0;
}

/* Wire up the ring channel once both sides are mapped. */
static void chan_setup(struct shm_chan *c, const struct zl_opts *o, uint64_t my_key,
		       const struct shm_hello *peer, int32_t pid)
{
	struct zl_ringchan *rc = &c->rc;
	struct shm_ctl *mine = ctl_of(&c->me), *theirs = ctl_of(&c->peer);
	rc->link = &shm_link;
	zl_ring_tx_init(&rc->tx, c->peer.map + CTL_SIZE, peer->ring_size, peer->key,
			&theirs->rpos, NULL, NULL);
	zl_ring_rx_init(&rc->rx, c->me.map + CTL_SIZE, o->ring_size, my_key, o->rpos_every,
			NULL, NULL);
	zl_ring_rx_set_layout(&rc->rx, ZL_LAYOUT_LEN_FIRST, true);
	zl_ring_tx_set_lines(&rc->tx, peer->flags & SHM_F_LINES);
	zl_ring_rx_set_lines(&rc->rx, peer->flags & SHM_F_LINES);
	rc->peer_rx_sleeping = &theirs->rx_sleeping;
	rc->peer_tx_sleeping = &mine->tx_sleeping;
	rc->sym_req = &mine->sym_req;
	rc->sym_ack = &mine->sym_ack;
	rc->peer_sym_req = &theirs->sym_req;
	rc->peer_sym_ack = &theirs->sym_ack;
	rc->publish_rpos = shm_publish;
	rc->publish_rpos_max = shm_publish_max;
	zl_ringchan_init(rc, o, peer->max_msg, "shm");
	rc->stats.peer_pid = pid;
	rc->asym = zl_membarrier_register() && (peer->flags & SHM_F_MEMBARRIER);
}

/* Both directions of the handshake; the connector speaks first. */
static int handshake(int sock, const struct zl_opts *o, bool connector, int64_t deadline,
		     zl_channel **out)
{
	struct shm_chan *c = chan_new(sock);
	if (!c) {
		close(sock);
		return -ENOMEM;
	}
	struct shm_hello mine, theirs;
	uint64_t key = 0;
	int32_t pid = -1;
	int refuse = zl_check_peer_uid(sock, o->allow_other_uid, "shm", &pid);
	int r = refuse;
	if (!r)
		r = random_key(&key);
	if (!r)
		r = side_create(&c->me, o->ring_size);
	if (connector) { /* our hello, or the reason we refuse, then theirs */
		make_hello(&mine, o, key, refuse);
		if (!r || refuse) {
			int sr = send_hello(sock, &mine, c->me.fd, r ? 0 : NFDS);
			r = r ? r : sr;
		}
		if (!r)
			r = recv_hello(sock, o, &theirs, c->peer.fd, deadline);
		if (!r)
			r = side_adopt(&c->peer, &theirs);
	} else {
		/* their hello even when we refuse: closing on it unread would
		 * turn our refusal into ECONNRESET on their side */
		int hr = recv_hello(sock, o, &theirs, c->peer.fd, deadline);
		r = r ? r : hr;
		if (!r)
			r = side_adopt(&c->peer, &theirs);
		make_hello(&mine, o, key, r == -EPERM || r == -EMSGSIZE ? r : r ? -EPROTO : 0);
		int sr = send_hello(sock, &mine, c->me.fd, r ? 0 : NFDS);
		r = r ? r : sr;
	}
	if (r) {
		shm_destroy(&c->rc);
		return r;
	}
	close(c->me.fd[FD_MEM]);
	c->me.fd[FD_MEM] = -1;
	chan_setup(c, o, key, &theirs, pid);
	*out = &c->rc.base;
	return 0;
}

static int make_addr(const struct zl_url *u, struct sockaddr_un *a, socklen_t *len)
{
	size_t n = strlen(u->host);
	if (zl_opts_check_keys(u))
		return -EINVAL;
	if (n == 0 || n > 100 || u->port[0] || (u->path[0] && strcmp(u->path, "/"))) {
		ZL_LOG(ZL_LOG_ERROR, "shm: need shm://NAME (letters, digits, . _ -; at most 100)");
		return -EINVAL;
	}
	for (const char *p = u->host; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-')) {
			ZL_LOG(ZL_LOG_ERROR, "shm: need shm://NAME (letters, digits, . _ -; at most 100)");
			return -EINVAL;
		}
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	int k = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "zipline/%s", u->host);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)k);
	return 0;
}

/* ---- listener ---------------------------------------------------------- */

static int shm_take(zl_listener *l) { return zl_sock_take(((struct shm_listener *)l)->fd, 0); }

/* One SEQPACKET message is the whole hello. An empty message peeks as 0
 * bytes, like a hang-up: only the hang-up is a peer that left (finish
 * refuses the empty message). */
static int shm_ready(zl_listener *l, int fd)
{
	(void)l;
	int r = zl_sock_ready(fd, 1, NULL, 0);
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };
	if (r != -ECONNRESET || (poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP))))
		return r;
	return 1;
}

static int shm_finish(zl_listener *l, int fd, zl_channel **out, void **half, int *wfd)
{
	struct shm_listener *sl = (struct shm_listener *)l;
	return handshake(fd, &sl->opts, false, zl_now_us() + sl->opts.handshake_timeout_us, out);
}

static int shm_listener_fd(const zl_listener *l) { return ((const struct shm_listener *)l)->fd; }

static int shm_listener_url(const zl_listener *l, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "shm://%s", ((const struct shm_listener *)l)->name);
	return n < 0 || (size_t)n >= cap ? -ENOSPC : 0;
}

static void shm_listener_close(zl_listener *l)
{
	struct shm_listener *sl = (struct shm_listener *)l;
	close(sl->fd);
	free(sl);
}

static const struct zl_listener_ops shm_listener_ops = {
	.take = shm_take,
	.ready = shm_ready,
	.finish = shm_finish,
	.fd = shm_listener_fd,
	.url = shm_listener_url,
	.close = shm_listener_close,
};

static int shm_listen(const struct zl_url *u, const struct zl_opts *o, zl_listener **out)
{
	struct sockaddr_un a;
	socklen_t alen;
	if (make_addr(u, &a, &alen))
		return -EINVAL;
	struct shm_listener *sl = calloc(1, sizeof(*sl));
	if (!sl)
		return -ENOMEM;
	sl->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (sl->fd < 0 || bind(sl->fd, (struct sockaddr *)&a, alen) || listen(sl->fd, 128)) {
		int e = -errno;
		if (sl->fd >= 0)
			close(sl->fd);
		free(sl);
		return e;
	}
	sl->base.ops = &shm_listener_ops;
	sl->opts = *o;
	snprintf(sl->name, sizeof(sl->name), "%s", u->host);
	*out = &sl->base;
	return 0;
}

static int shm_connect(const struct zl_url *u, const struct zl_opts *o, int64_t timeout_us,
		       zl_channel **out)
{
	struct sockaddr_un a;
	socklen_t alen;
	if (make_addr(u, &a, &alen))
		return -EINVAL;
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	/* a full backlog gives EAGAIN on a nonblocking unix socket: retry */
	int64_t deadline = zl_deadline(timeout_us);
	while (connect(s, (struct sockaddr *)&a, alen)) {
		int e = errno;
		if (e != EAGAIN || zl_now_us() >= deadline) {
			close(s);
			return e == EAGAIN ? ZL_TIMEOUT_ERR(timeout_us) : -e;
		}
		usleep(1000);
	}
	int64_t hs = zl_now_us() + o->handshake_timeout_us;
	return handshake(s, o, true, hs < deadline ? hs : deadline, out);
}

const struct zl_transport zl_transport_shm = {
	.scheme = "shm",
	.listen = shm_listen,
	.connect = shm_connect,
};

int zl_shm_sock(const zl_channel *ch)
{
	if (!ch || ch->ops != &zl_ringchan_ops ||
	    ((const struct zl_ringchan *)ch)->link != &shm_link)
		return -EINVAL;
	return ((const struct shm_chan *)ch)->sock;
}

int zl_shm_kick(zl_channel *ch)
{
	if (zl_shm_sock(ch) < 0)
		return -EINVAL;
	return shm_wake((struct zl_ringchan *)ch, ZL_DIR_RX);
}
