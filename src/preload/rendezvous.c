/* SPDX-License-Identifier: MIT */
/*
 * Finding out, outside the stream, that both ends run the preload.
 *
 * A preloaded process that listens on a TCP port or a Unix socket file also
 * listens on an abstract SEQPACKET socket named after it ("zipline-preload/
 * tcp/PORT", or "zipline-preload/unix/DEV-INO" of the socket file). A
 * preloaded client, before its connect(2), connects there (if nobody does,
 * the socket stays a kernel socket) and sends a hello with two fds: its own
 * socket, and the memfd holding both rings. Because the hello is queued
 * before the connection exists, it is always there when the server accepts
 * that connection: accept drains the rendezvous and matches the accepted
 * socket against each hello's socket (the address pair for TCP, the peer
 * inode through sock_diag for Unix sockets). Holding the client's socket is
 * the proof that the hello is the client's: nobody else can pass it. The
 * uid rule holds both ways (SO_PEERCRED on the rendezvous), so a stranger
 * can neither take a server's connections nor offer it rings. A hello that
 * no accept matches (another process accepted, the connect failed) expires.
 * The server then maps the rings and joins (sock.c); the client notices the
 * join on its next call.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "preload.h"
#include "sockutil.h"

#define HELLO_MAGIC 0x5a4c5048u /* "ZLPH" */
#define MAX_PENDING 256
#define PENDING_US 10000000 /* an offer whose connection is not accepted */
#define SILENT_US 1000000    /* a rendezvous connection without its hello */
#define DRAIN 4096           /* connections taken from the rendezvous per look */
#define HIGH_FD 512 /* our fds live above the numbers programs expect */

struct hello {
	uint32_t magic, version, ring_size, pad;
};

/* An offer. Its client's socket is held only until it is connected: then
 * what names the connection is kept instead (a held copy would keep the
 * socket open after the client's close, with no FIN, if another process
 * accepts the connection, as pre-forked workers do). */
struct pending {
	int conn;          /* the rendezvous connection, until its hello came */
	int sock, mem;     /* then the client's socket and memfd */
	uint32_t ring_size;
	int64_t since;
	bool known;        /* sock was connected: the names below, sock closed */
	struct sockaddr_storage self, peer; /* TCP: the client's two ends */
	socklen_t self_len, peer_len;
	uint64_t peer_ino; /* Unix: the inode of the accepted socket */
};

struct rdv {
	int lfd, rfd;      /* the program's listener, our rendezvous */
	struct pending p[MAX_PENDING];
	int np;
};

static pthread_mutex_t rdv_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rdv *rdvs[64];
static int nrdv;

static int high_fd(int fd)
{
	if (fd < 0 || fd >= HIGH_FD)
		return fd;
	int h = zp_real.fcntl(fd, F_DUPFD_CLOEXEC, HIGH_FD);
	if (h < 0)
		return fd;
	zp_real.close(fd);
	return h;
}

/* The rendezvous name for a listening (or connected-to) address. */
static int rdv_addr(const struct sockaddr *a, socklen_t len, struct sockaddr_un *u,
		    socklen_t *ulen)
{
	char key[100];
	if (a->sa_family == AF_INET && len >= sizeof(struct sockaddr_in))
		snprintf(key, sizeof(key), "tcp/%u", ntohs(((const struct sockaddr_in *)a)->sin_port));
	else if (a->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6))
		snprintf(key, sizeof(key), "tcp/%u",
			 ntohs(((const struct sockaddr_in6 *)a)->sin6_port));
	else if (a->sa_family == AF_UNIX && len > offsetof(struct sockaddr_un, sun_path) + 1 &&
		 ((const struct sockaddr_un *)a)->sun_path[0]) {
		char path[sizeof(u->sun_path) + 1];
		size_t n = len - offsetof(struct sockaddr_un, sun_path);
		memcpy(path, ((const struct sockaddr_un *)a)->sun_path, n);
		path[n] = 0;
		struct stat st;
		if (stat(path, &st) || !S_ISSOCK(st.st_mode))
			return -1;
		snprintf(key, sizeof(key), "unix/%llx-%llx", (unsigned long long)st.st_dev,
			 (unsigned long long)st.st_ino);
	} else {
		return -1;
	}
	memset(u, 0, sizeof(*u));
	u->sun_family = AF_UNIX;
	int k = snprintf(u->sun_path + 1, sizeof(u->sun_path) - 1, "zipline-preload/%s", key);
	*ulen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)k);
	return 0;
}

static bool is_stream(int fd, int *family)
{
	int type = 0, dom = 0;
	socklen_t l = sizeof(type);
	if (zp_real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) || type != SOCK_STREAM)
		return false;
	l = sizeof(dom);
	if (zp_real.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l))
		return false;
	*family = dom;
	return dom == AF_INET || dom == AF_INET6 || dom == AF_UNIX;
}

static bool uid_ok(int fd)
{
	struct ucred cr;
	socklen_t l = sizeof(cr);
	if (zp_real.getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l))
		return false;
	if (cr.uid == geteuid() || zp_allow_other_uid)
		return true;
	ZL_LOG(ZL_LOG_INFO, "preload: a peer of uid %u is not switched", (unsigned)cr.uid);
	return false;
}

/* ---- the listening side ------------------------------------------------ */

void zp_listen_publish(int fd)
{
	int family;
	struct sockaddr_storage a;
	socklen_t len = sizeof(a);
	struct sockaddr_un u;
	socklen_t ulen;
	if (!is_stream(fd, &family) || getsockname(fd, (struct sockaddr *)&a, &len) ||
	    rdv_addr((struct sockaddr *)&a, len, &u, &ulen))
		return;
	int r = zp_real.socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (r < 0)
		return;
	if (bind(r, (struct sockaddr *)&u, ulen) || zp_real.listen(r, 1024)) {
		ZL_LOG(ZL_LOG_INFO, "preload: no rendezvous for listener %d: %s", fd,
		       strerror(errno));
		zp_real.close(r);
		return;
	}
	struct rdv *v = calloc(1, sizeof(*v));
	pthread_mutex_lock(&rdv_lock);
	if (!v || nrdv == (int)(sizeof(rdvs) / sizeof(rdvs[0]))) {
		pthread_mutex_unlock(&rdv_lock);
		free(v);
		zp_real.close(r);
		return;
	}
	v->lfd = fd;
	v->rfd = high_fd(r);
	rdvs[nrdv] = v;
	__atomic_store_n(&nrdv, nrdv + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&rdv_lock);
}

static void learn(struct pending *p);

static void pending_drop(struct rdv *v, int i)
{
	int fds[3] = { v->p[i].conn, v->p[i].sock, v->p[i].mem };
	for (int k = 0; k < 3; k++)
		if (fds[k] >= 0)
			zp_real.close(fds[k]);
	v->p[i] = v->p[--v->np];
}

void zp_listen_close(int fd)
{
	if (!__atomic_load_n(&nrdv, __ATOMIC_ACQUIRE))
		return; /* the common close: no lock */
	pthread_mutex_lock(&rdv_lock);
	for (int i = 0; i < nrdv; i++)
		if (rdvs[i]->lfd == fd) {
			struct rdv *v = rdvs[i];
			while (v->np)
				pending_drop(v, 0);
			zp_real.close(v->rfd);
			free(v);
			rdvs[i] = rdvs[--nrdv];
			break;
		}
	pthread_mutex_unlock(&rdv_lock);
}

/* The hello on rendezvous connection p->conn: 1 taken (p->sock, p->mem),
 * 0 not there yet, -1 refused (the client stays on the kernel). */
static int read_hello(struct pending *p)
{
	struct hello h;
	char cbuf[CMSG_SPACE(2 * sizeof(int))];
	struct iovec io = { &h, sizeof(h) };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	ssize_t n = zp_real.recvmsg(p->conn, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	int fds[2] = { -1, -1 }, nf = 0;
	struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&m) : NULL;
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
		nf = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		memcpy(fds, CMSG_DATA(cm), (size_t)(nf > 2 ? 2 : nf) * sizeof(int));
	}
	int fam, type = 0;
	socklen_t tl = sizeof(type);
	/* a socket and a memfd, in that order: what is not is not held (a
	 * client's socket held as anything else would outlive its close) */
	if (n != (ssize_t)sizeof(h) || nf != 2 || h.magic != HELLO_MAGIC ||
	    h.version != ZP_VERSION || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    !is_stream(fds[0], &fam) || !zp_real.getsockopt(fds[1], SOL_SOCKET, SO_TYPE, &type, &tl)) {
		for (int i = 0; i < nf && i < 2; i++)
			zp_real.close(fds[i]);
		return -1; /* not ours, or malformed */
	}
	zp_real.close(p->conn);
	p->conn = -1;
	p->sock = high_fd(fds[0]);
	p->mem = high_fd(fds[1]);
	p->ring_size = h.ring_size;
	return 1;
}

/* Take the hellos queued on the rendezvous, each on its own connection,
 * all of them: an offer left queued would keep its client's socket open
 * (an fd in flight), so that the client's close sent no FIN. A connection
 * whose hello has not come yet is kept a moment (its client sends it right
 * after connecting, and before its own connect(2)). */
static void take_hellos(struct rdv *v)
{
	int64_t now = zl_now_us();
	for (int i = 0; i < v->np;) {
		struct pending *p = &v->p[i];
		if (now - p->since > (p->conn >= 0 ? SILENT_US : PENDING_US) ||
		    (p->conn >= 0 && read_hello(p) < 0)) {
			pending_drop(v, i);
		} else {
			learn(p);
			i++;
		}
	}
	for (int k = 0; k < DRAIN; k++) {
		int c = zp_real.accept4(v->rfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c < 0)
			return;
		if (!uid_ok(c)) {
			zp_real.close(c);
			continue;
		}
		if (v->np == MAX_PENDING)
			pending_drop(v, 0); /* one of the oldest */
		struct pending *p = &v->p[v->np++];
		*p = (struct pending){ .conn = high_fd(c), .sock = -1, .mem = -1, .since = now };
		if (read_hello(p) < 0)
			pending_drop(v, v->np - 1);
		else
			learn(p);
	}
}

/* The inode of the Unix socket connected to fd (sock_diag), or 0. */
static uint64_t unix_peer_ino(int fd)
{
	struct stat st;
	if (fstat(fd, &st))
		return 0;
	int nl = zp_real.socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (nl < 0)
		return 0;
	struct {
		struct nlmsghdr h;
		struct unix_diag_req r;
	} q = { .h = { .nlmsg_len = sizeof(q), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
		       .nlmsg_flags = NLM_F_REQUEST },
		.r = { .sdiag_family = AF_UNIX, .udiag_ino = (uint32_t)st.st_ino,
		       .udiag_show = UDIAG_SHOW_PEER,
		       .udiag_cookie = { INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE } } };
	uint64_t peer = 0;
	union {
		char b[4096];
		struct nlmsghdr h;
	} buf;
	if (zp_real.send(nl, &q, sizeof(q), 0) == (ssize_t)sizeof(q)) {
		ssize_t n = zp_real.recv(nl, buf.b, sizeof(buf.b), 0);
		struct nlmsghdr *h = &buf.h;
		if (n > 0 && NLMSG_OK(h, (size_t)n) && h->nlmsg_type == SOCK_DIAG_BY_FAMILY) {
			struct unix_diag_msg *d = NLMSG_DATA(h);
			struct rtattr *a = (struct rtattr *)(d + 1);
			int rem = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*d)));
			for (; RTA_OK(a, rem); a = RTA_NEXT(a, rem))
				if (a->rta_type == UNIX_DIAG_PEER && RTA_PAYLOAD(a) >= 4)
					peer = *(uint32_t *)RTA_DATA(a);
		}
	}
	zp_real.close(nl);
	return peer;
}

static bool same_addr(const struct sockaddr_storage *a, socklen_t al,
		      const struct sockaddr_storage *b, socklen_t bl)
{
	return al == bl && !memcmp(a, b, al);
}

/* Is the hello's socket s the other end of our accepted fd? */
/* Once the offer's socket is connected, keep what names the connection
 * and let the socket go. */
static void learn(struct pending *p)
{
	int fam;
	if (p->known || p->sock < 0 || !is_stream(p->sock, &fam))
		return;
	if (fam == AF_UNIX) {
		if (!(p->peer_ino = unix_peer_ino(p->sock)))
			return; /* not connected yet */
	} else {
		memset(&p->self, 0, sizeof(p->self));
		memset(&p->peer, 0, sizeof(p->peer));
		p->self_len = p->peer_len = sizeof(p->self);
		if (getpeername(p->sock, (struct sockaddr *)&p->peer, &p->peer_len) ||
		    getsockname(p->sock, (struct sockaddr *)&p->self, &p->self_len))
			return;
	}
	p->known = true;
	zp_real.close(p->sock);
	p->sock = -1;
}

/* Is the offer p for the connection we accepted as fd? */
static bool matches(struct pending *p, int fd, int family)
{
	learn(p);
	if (!p->known)
		return false;
	if (family == AF_UNIX) {
		struct stat st;
		return p->peer_ino && !fstat(fd, &st) && p->peer_ino == (uint64_t)st.st_ino;
	}
	struct sockaddr_storage b1, b2;
	socklen_t m1 = sizeof(b1), m2 = sizeof(b2);
	memset(&b1, 0, sizeof(b1));
	memset(&b2, 0, sizeof(b2));
	return !p->peer_ino && !getpeername(fd, (struct sockaddr *)&b1, &m1) &&
	       same_addr(&p->self, p->self_len, &b1, m1) &&
	       !getsockname(fd, (struct sockaddr *)&b2, &m2) &&
	       same_addr(&p->peer, p->peer_len, &b2, m2);
}

struct zsock *zp_map(int mem, uint32_t ring, int side)
{
	size_t len = ZP_HDR + 2 * (size_t)ring;
	if (ring < 4096 || ring > (64u << 20) || (ring & (ring - 1)) ||
	    (side == 1 && zl_memfd_check(mem, len)))
		return NULL;
	struct zsock *z = calloc(1, sizeof(*z));
	if (!z)
		return NULL;
	z->sh = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, mem, 0);
	if (z->sh == MAP_FAILED) {
		free(z);
		return NULL;
	}
	pthread_mutex_init(&z->lock, NULL);
	z->map_len = len;
	z->side = side;
	z->size = ring;
	z->hello_fd = -1;
	z->mem = -1;
	z->ring[0] = (uint8_t *)z->sh + ZP_HDR;
	z->ring[1] = z->ring[0] + ring;
	z->tx = &z->sh->dir[side];
	z->rx = &z->sh->dir[1 - side];
	z->txr = z->ring[side];
	z->rxr = z->ring[1 - side];
	return z;
}

struct zsock *zp_accept_match(int lfd, int fd)
{
	int family;
	if (!is_stream(fd, &family))
		return NULL;
	struct zsock *z = NULL;
	pthread_mutex_lock(&rdv_lock);
	struct rdv *v = NULL;
	for (int i = 0; i < nrdv; i++)
		if (rdvs[i]->lfd == lfd)
			v = rdvs[i];
	if (v) {
		take_hellos(v);
		for (int i = 0; i < v->np; i++) {
			if (v->p[i].conn >= 0 || !matches(&v->p[i], fd, family))
				continue;
			z = zp_map(v->p[i].mem, v->p[i].ring_size, 1);
			if (z && (z->sh->magic != ZP_MAGIC || z->sh->version != ZP_VERSION ||
				  z->sh->ring_size != z->size || z->sh->hdr_size != ZP_HDR ||
				  atomic_load(&z->sh->joined))) {
				munmap(z->sh, z->map_len);
				free(z);
				z = NULL;
			}
			if (z) { /* kept for exec */
				z->mem = v->p[i].mem;
				v->p[i].mem = -1;
			}
			pending_drop(v, i);
			break;
		}
	}
	if (!z && v)
		ZL_LOG(ZL_LOG_DEBUG, "preload: accepted fd %d stays a kernel socket (%d offers "
		       "pending, none for it)", fd, v->np);
	pthread_mutex_unlock(&rdv_lock);
	if (!z)
		return NULL;
	z->fd = fd;
	z->is_unix = family == AF_UNIX;
	atomic_store(&z->sh->refs[1], 1);
	/* we have sent nothing on the kernel stream: the ring from byte 0 */
	atomic_store_explicit(&z->tx->kbytes, 0, memory_order_relaxed);
	atomic_store_explicit(&z->tx->state, 1, memory_order_release);
	atomic_store_explicit(&z->tx_ring, true, memory_order_relaxed);
	atomic_store_explicit(&z->sh->joined, 1, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load(&z->tx->rx_sleeping) && !atomic_exchange(&z->tx->rx_kick, 1)) {
		static const char b = 0;
		zp_real.send(fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
	}
	ZL_LOG(ZL_LOG_DEBUG, "preload: accepted fd %d switched to shared memory", fd);
	return z;
}

/* ---- the connecting side ----------------------------------------------- */

static bool local_dest(const struct sockaddr *a)
{
	if (a->sa_family == AF_UNIX)
		return true;
	if (a->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
	const struct in6_addr *x = &((const struct sockaddr_in6 *)a)->sin6_addr;
	return IN6_IS_ADDR_LOOPBACK(x) ||
	       (IN6_IS_ADDR_V4MAPPED(x) && x->s6_addr[12] == 127);
}

struct zsock *zp_connect_offer(int fd, const struct sockaddr *a, socklen_t len)
{
	int family;
	struct sockaddr_un u;
	socklen_t ulen;
	if (!a || !is_stream(fd, &family) || a->sa_family != family || !local_dest(a) ||
	    rdv_addr(a, len, &u, &ulen))
		return NULL;
	int c = zp_real.socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c < 0)
		return NULL;
	if (zp_real.connect(c, (struct sockaddr *)&u, ulen) || !uid_ok(c)) {
		ZL_LOG(ZL_LOG_DEBUG, "preload: fd %d: no preloaded listener there (%s)", fd,
		       strerror(errno));
		zp_real.close(c);
		return NULL; /* nobody preloaded listens there: a kernel socket */
	}
	size_t mlen = ZP_HDR + 2 * (size_t)zp_ring;
	int mem = zl_memfd_sealed("zipline-preload", mlen);
	struct zsock *z = mem >= 0 ? zp_map(mem, zp_ring, 0) : NULL;
	if (z) {
		z->sh->magic = ZP_MAGIC;
		z->sh->version = ZP_VERSION;
		z->sh->ring_size = zp_ring;
		z->sh->hdr_size = ZP_HDR;
		atomic_store(&z->sh->refs[0], 1);
		struct hello h = { .magic = HELLO_MAGIC, .version = ZP_VERSION, .ring_size = zp_ring };
		int fds[2] = { fd, mem };
		char cbuf[CMSG_SPACE(sizeof(fds))];
		memset(cbuf, 0, sizeof(cbuf));
		struct iovec io = { &h, sizeof(h) };
		struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = cbuf,
				    .msg_controllen = sizeof(cbuf) };
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(fds));
		memcpy(CMSG_DATA(cm), fds, sizeof(fds));
		if (zp_real.sendmsg(c, &m, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(h)) {
			ZL_LOG(ZL_LOG_DEBUG, "preload: fd %d: offer not sent (%s)", fd, strerror(errno));
			munmap(z->sh, z->map_len);
			pthread_mutex_destroy(&z->lock);
			free(z);
			z = NULL;
		}
	}
	if (z)
		z->mem = high_fd(mem);
	else if (mem >= 0)
		zp_real.close(mem);
	zp_real.close(c);
	if (z) {
		z->fd = fd;
		z->is_unix = family == AF_UNIX;
	}
	return z;
}

void zp_connect_done(struct zsock *z, int ok)
{
	if (ok)
		return;
	munmap(z->sh, z->map_len);
	if (z->mem >= 0)
		zp_real.close(z->mem);
	pthread_mutex_destroy(&z->lock);
	free(z);
}
