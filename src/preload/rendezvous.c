/* SPDX-License-Identifier: MIT */
/*
 * Finding out, outside the stream, that both ends of a connection on this
 * host run the preload, and proving to each end that the other is the
 * other end of that very connection.
 *
 * The protocol. A preloaded process that listens on a TCP port or a Unix
 * socket file also listens on an abstract SEQPACKET socket named after it
 * ("zipline-preload/tcp/PORT", or "zipline-preload/unix/DEV-INO" of the
 * socket file). A preloaded client, before its connect(2), connects there
 * (nobody: the socket stays a kernel socket) and sends a hello with the
 * memfd of the rings it made and its claims: its pid, and the fd numbers
 * and socket inodes of its socket and of this rendezvous connection. The
 * hello is queued before the connection exists, so it is there when the
 * server accepts the connection; accept takes it and:
 *   1. asks the kernel (sock_diag) for the inode of the accepted socket's
 *      other end, and for the other end of the rendezvous connection;
 *   2. believes the hello only if /proc/PID/fd of the process it names
 *      shows, right now, both: the client end of the accepted connection at
 *      the fd it claims and the client end of the rendezvous connection at
 *      the other (proof.c; both through one handle on /proc/PID, which a
 *      pid reused meanwhile cannot pass);
 *   3. maps the rings, answers on the rendezvous connection with the same
 *      claims about its own end, and only then sets `joined` in them.
 * The client trusts nothing in its rings until it has proven the answer
 * the same way: `joined` only tells it that an answer is worth looking for
 * (anyone who got the memfd could set it). Proven, it records so in a page
 * that only its own process family shares (struct zp_family: forks see
 * it, the peer does not), sets `client_ok` in the rings and its sends
 * move to the ring. The server's sends move once it sees `client_ok`:
 * until then both directions stay on the kernel stream (sock.c: each
 * direction switches on its own, losslessly), so a client that refuses or
 * never answers costs the connection nothing. A process that forks an
 * accepted, not yet joined socket names itself to the client too (a
 * fork-per-connection server's parent closes its copy), and the client
 * tries each process named.
 *
 * Why the proofs bind the exact connection: an inode names one live socket
 * (never an address pair, which a closed connection hands to the next one
 * from the same port), and only the kernel fills /proc/PID/fd. The server
 * maps rings only from a process proven to hold the client end of the
 * connection it accepted, and the client trusts them only after an answer
 * that came through the other end of its own rendezvous connection, from
 * a process proven to hold the server end. Whoever else got the memfd (a
 * squatter on the name) sees rings that nothing is ever written into.
 *
 * Threat model (the preload grants no process anything the kernel would
 * not; the kernel lets only the holders of a connection's two sockets see
 * its bytes):
 *  - A process of the same uid that is not a party: it can connect to any
 *    rendezvous, send any hello, bind any free name, replay, race and
 *    reset. Its hellos name sockets it does not hold, so they fail step 2;
 *    a stale hello (its connection closed) names an inode that no live
 *    connection has. Squatting a name (the server not preloaded, or not
 *    started yet): it gets the client's empty rings, and its answer fails
 *    the client's proofs, so they stay empty; a server that finds its name
 *    taken stays on the kernel. It can read what /proc shows of others (pids, fd numbers,
 *    inodes): nothing in a hello is secret.
 *  - Another uid: refused on the rendezvous (SO_PEERCRED) unless both ends
 *    set ZL_PRELOAD_ALLOW_OTHER_UID=1; even then /proc/PID/fd of another
 *    uid is readable only with privilege, so such a connection switches
 *    only where each end may inspect the other (root).
 *  - Root, or a process that may ptrace a party: the kernel already gives
 *    it the party's sockets (pidfd_getfd, ptrace); nothing to defend.
 *  - Pre-forked workers: the worker that accepts takes the hello (every
 *    worker holds the rendezvous listener) and answers for itself.
 *  - Fork: both processes map the same rings (refs in sock.c), and a
 *    client's proof is its family's (struct zp_family). A server that forks
 *    before the client's proof names the child too (above). A client that
 *    execs before its proof gives it up: the new image sees a kernel
 *    socket, and so does the rest of its family.
 *  - Fds passed to other processes: a switched socket cannot be passed
 *    (sendmsg refuses with EOPNOTSUPP); a client's not yet proven is given
 *    up (a kernel socket) and passed.
 *  - Residual: a process allowed to inspect a party (PTRACE_MODE_READ:
 *    the same uid, with Yama's ptrace_scope at most 1) can open the memfd
 *    through /proc/PID/fd. With ptrace_scope 0 it may ptrace the party
 *    anyway; with 1 it may not, and the rings are open to it.
 *  - Residual: socket inode numbers are 32 bits and wrap; a process that
 *    burns about 2^32 inodes (socket or pipe creations, about half an hour
 *    of one CPU) while a victim's connection lives could hold a socket
 *    with the inode of the victim's other end.
 * After the switch a peer can still lie in the shared memory: sock.c
 * checks every value it reads there against what the stream carried.
 */
#include <errno.h>
#include <fcntl.h>
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
#include "wire.h"

#define MAX_PENDING 256
#define PENDING_US 10000000 /* a hello whose connection is not accepted */
#define SILENT_US 1000000   /* a rendezvous connection without its hello */
#define DRAIN 4096          /* connections taken from the rendezvous per look */
#define HIGH_FD 512         /* our fds live above the numbers programs expect */
#define MAX_NAMED 8         /* processes an answer names, at most */

/* A hello, or a rendezvous connection whose hello has not come yet. */
struct pending {
	int conn, mem;
	bool heard;
	struct zp_wire w;
	int64_t since;
};

struct rdv {
	int lfd, rfd; /* the program's listener, our rendezvous */
	struct pending p[MAX_PENDING];
	int np;
};

static pthread_mutex_t rdv_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rdv *rdvs[64];
static int nrdv;
static struct zl_ratelimit rl_claim, rl_answer, rl_squat;

/* A connection stays a kernel socket: said at info each time (rate
 * limited), and once per process at warn, the level zl-run logs at unless
 * told otherwise, so that a user learns why without a line per success. */
void zp_fell_back(int fd, const char *why)
{
	zp_pub_kernel(fd, why);
	static atomic_bool said;
	static struct zl_ratelimit rl;
	if (!atomic_exchange(&said, true))
		ZL_LOG(ZL_LOG_WARN, "preload: fd %d stays a kernel socket: %s (the first one; "
		       "ZL_LOG=info tells each)", fd, why);
	else
		ZL_LOG_RL(&rl, ZL_LOG_INFO, "preload: fd %d stays a kernel socket: %s", fd, why);
}

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
	static struct zl_ratelimit rl;
	struct ucred cr;
	socklen_t l = sizeof(cr);
	if (zp_real.getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l))
		return false;
	if (cr.uid == geteuid() || zp_allow_other_uid)
		return true;
	ZL_LOG_RL(&rl, ZL_LOG_INFO, "preload: a peer of uid %u is not switched", (unsigned)cr.uid);
	return false;
}

/* One rendezvous message without waiting: 1 taken (*w, and *mem if
 * want_fds), 0 none yet, -1 malformed or the end (every fd it carried
 * closed but the one returned). */
static int recv_wire(int c, uint32_t magic, int want_fds, struct zp_wire *w, int *mem)
{
	union {
		char b[CMSG_SPACE(ZP_WIRE_MAXFDS * sizeof(int))];
		struct cmsghdr align;
	} cb;
	unsigned char buf[sizeof(*w) + 1];
	struct iovec io = { buf, sizeof(buf) };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = cb.b,
			    .msg_controllen = sizeof(cb.b) };
	ssize_t n = zp_real.recvmsg(c, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	int fds[ZP_WIRE_MAXFDS], nf = 0;
	int r = n > 0 ? zp_wire_parse(buf, n, m.msg_flags, cb.b, m.msg_controllen, magic, want_fds,
				      w, fds, &nf)
		      : -1;
	for (int i = r ? 0 : want_fds; i < nf; i++)
		zp_real.close(fds[i]);
	if (r)
		return -1;
	if (want_fds)
		*mem = fds[0];
	return 1;
}

static int send_wire(int c, const struct zp_wire *w, int mem)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cb;
	memset(&cb, 0, sizeof(cb));
	struct iovec io = { (void *)w, sizeof(*w) };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1 };
	if (mem >= 0) {
		m.msg_control = cb.b;
		m.msg_controllen = sizeof(cb.b);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &mem, sizeof(int));
	}
	return zp_real.sendmsg(c, &m, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(*w) ? 0 : -1;
}

/* Our claims for a message on rendezvous connection c about socket fd. */
static struct zp_wire claims(uint32_t magic, uint32_t ring, int fd, int c)
{
	return (struct zp_wire){ .magic = magic, .version = ZP_WIRE_VERSION, .ring_size = ring,
				 .pid = (int32_t)getpid(), .sock_fd = fd, .rdv_fd = c,
				 .sock_ino = zp_ino(fd), .rdv_ino = zp_ino(c) };
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
		/* taken: another listener of ours on the port, or a squatter;
		 * either way this listener's connections stay on the kernel */
		ZL_LOG_RL(&rl_squat, ZL_LOG_INFO, "preload: no rendezvous for listener %d (@%s: %s)",
			  fd, u.sun_path + 1, strerror(errno));
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

static void pending_drop(struct rdv *v, int i)
{
	if (v->p[i].conn >= 0)
		zp_real.close(v->p[i].conn);
	if (v->p[i].mem >= 0)
		zp_real.close(v->p[i].mem);
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

/* Room for one more: when full, the oldest entry of the pid that holds the
 * most goes, so that one flooding process evicts its own first. */
static void make_room(struct rdv *v)
{
	if (v->np < MAX_PENDING)
		return;
	int worst = 0, most = 0;
	for (int i = 0; i < v->np; i++) {
		int n = 0, oldest = i;
		for (int j = 0; j < v->np; j++)
			if (v->p[j].w.pid == v->p[i].w.pid) {
				n++;
				if (v->p[j].since < v->p[oldest].since)
					oldest = j;
			}
		if (n > most) {
			most = n;
			worst = oldest;
		}
	}
	pending_drop(v, worst);
}

/* Take what the rendezvous holds: new connections and their hellos. A
 * connection whose hello has not come yet is kept a moment (its client
 * sends it right after connecting, before its own connect(2)). */
static void take_hellos(struct rdv *v)
{
	int64_t now = zl_now_us();
	for (int i = 0; i < v->np;) {
		struct pending *p = &v->p[i];
		int r = p->heard ? 1 : recv_wire(p->conn, ZP_HELLO_MAGIC, 1, &p->w, &p->mem);
		if (r < 0 || now - p->since > (r ? PENDING_US : SILENT_US)) {
			pending_drop(v, i);
			continue;
		}
		p->heard = r > 0;
		i++;
	}
	for (int k = 0; k < DRAIN; k++) {
		int c = zp_real.accept4(v->rfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c < 0)
			return;
		struct ucred cr;
		socklen_t cl = sizeof(cr);
		if (!uid_ok(c) || zp_real.getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl)) {
			zp_real.close(c);
			continue;
		}
		make_room(v);
		struct pending *p = &v->p[v->np++];
		*p = (struct pending){ .conn = high_fd(c), .mem = -1, .since = now, .w.pid = cr.pid };
		int r = recv_wire(p->conn, ZP_HELLO_MAGIC, 1, &p->w, &p->mem);
		if (r < 0)
			pending_drop(v, v->np - 1);
		else
			p->heard = r > 0;
	}
}

/* Our claims for a message on rendezvous connection c about socket fd. */

struct zsock *zp_map(int mem, uint32_t ring, int side, int own)
{
	size_t len = ZP_HDR + 2 * (size_t)ring;
	if (!zp_ring_ok(ring) || (side == 1 && zl_memfd_check(mem, len)))
		return NULL;
	struct zsock *z = calloc(1, sizeof(*z));
	if (!z)
		return NULL;
	z->own_fd = own;
	z->o = own >= 0 ? zp_own_map(own) : zp_own_new(&z->own_fd);
	z->sh = z->o ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, mem, 0) : MAP_FAILED;
	if (z->sh == MAP_FAILED) {
		zp_own_free(z->o, true);
		if (own < 0 && z->own_fd >= 0)
			zp_real.close(z->own_fd);
		free(z);
		return NULL;
	}
	pthread_mutex_init(&z->lock, NULL);
	z->map_len = len;
	z->side = side;
	z->size = ring;
	z->hello_fd = -1;
	z->mem = -1;
	z->trusted = side == 1; /* the server proved its client before mapping */
	z->ring[0] = (uint8_t *)z->sh + ZP_HDR;
	z->ring[1] = z->ring[0] + ring;
	z->tx = &z->sh->dir[side];
	z->rx = &z->sh->dir[1 - side];
	z->txr = z->ring[side];
	z->rxr = z->ring[1 - side];
	return z;
}

static void zsock_discard(struct zsock *z)
{
	munmap(z->sh, z->map_len);
	if (z->fam)
		munmap(z->fam, sizeof(*z->fam));
	if (z->mem >= 0)
		zp_real.close(z->mem);
	if (z->hello_fd >= 0)
		zp_real.close(z->hello_fd);
	pthread_mutex_destroy(&z->lock);
	zp_own_free(z->o, true);
	if (z->own_fd >= 0)
		zp_real.close(z->own_fd);
	free(z);
}

/* A proven client's rings (its memfd mem, taken) and our answer on
 * rendezvous connection c (kept in the zsock until the client's proof);
 * NULL if they are not what a client makes, or no answer went out. */
static struct zsock *join(int fd, int c, int mem, uint32_t ring)
{
	struct zsock *z = zp_map(mem, ring, 1, -1);
	if (!z) {
		ZL_LOG_RL(&rl_answer, ZL_LOG_INFO, "preload: accepted fd %d: the client's rings are "
			  "not a sealed memfd of their size", fd);
		zp_real.close(mem);
		zp_real.close(c);
		return NULL;
	}
	z->mem = high_fd(mem);
	/* read once: the client may change them any time after */
	uint32_t magic = z->sh->magic, version = z->sh->version, rs = z->sh->ring_size,
		 hdr = z->sh->hdr_size;
	struct zp_wire a = claims(ZP_ANSWER_MAGIC, ring, fd, c);
	if (magic != ZP_MAGIC || version != ZP_VERSION || rs != ring || hdr != ZP_HDR ||
	    atomic_load(&z->sh->joined) || send_wire(c, &a, -1)) {
		ZL_LOG_RL(&rl_answer, ZL_LOG_INFO, "preload: accepted fd %d: %s", fd,
			  magic != ZP_MAGIC || version != ZP_VERSION || rs != ring ||
			  hdr != ZP_HDR || atomic_load(&z->sh->joined)
				  ? "the client's rings are not what a client makes"
				  : "no answer went out");
		zsock_discard(z);
		zp_real.close(c);
		return NULL;
	}
	z->hello_fd = c; /* the client's proof of us needs it open */
	atomic_store_explicit(&z->sh->joined, 1, memory_order_release);
	return z;
}

struct zsock *zp_accept_match(int lfd, int fd)
{
	int family;
	if (!__atomic_load_n(&nrdv, __ATOMIC_ACQUIRE) || !is_stream(fd, &family))
		return NULL;
	int conn = -1, mem = -1;
	struct zp_wire w = { 0 };
	pthread_mutex_lock(&rdv_lock);
	struct rdv *v = NULL;
	for (int i = 0; i < nrdv; i++)
		if (rdvs[i]->lfd == lfd)
			v = rdvs[i];
	if (v) {
		take_hellos(v);
		uint64_t other = v->np ? zp_other_end(fd) : 0;
		for (int i = 0; other && i < v->np && conn < 0;) {
			struct pending *p = &v->p[i];
			if (!p->heard || p->w.sock_ino != other) {
				i++;
				continue;
			}
			if (zp_holds(p->w.pid, p->w.sock_fd, other, p->w.rdv_fd,
				     zp_other_end(p->conn))) {
				w = p->w;
				conn = p->conn;
				mem = p->mem;
				p->conn = p->mem = -1;
			} else {
				/* it names this connection and does not hold it */
				ZL_LOG_RL(&rl_claim, ZL_LOG_INFO, "preload: a claim on accepted fd "
					  "%d by pid %d is false: not switched for it", fd,
					  (int)p->w.pid);
			}
			pending_drop(v, i);
		}
		if (conn < 0)
			zp_fell_back(fd, v->np ? "no offer proven for this accepted connection"
					    : "the client is not preloaded");
	}
	pthread_mutex_unlock(&rdv_lock);
	struct zsock *z = conn >= 0 ? join(fd, conn, mem, w.ring_size) : NULL;
	if (!z) {
		if (conn >= 0)
			zp_fell_back(fd, "the client's rings were refused");
		return NULL;
	}
	z->fd = fd;
	z->is_unix = family == AF_UNIX;
	ZL_LOG(ZL_LOG_DEBUG, "preload: accepted fd %d: joined the rings of pid %d", fd, (int)w.pid);
	return z;
}

/* After a fork: this process holds the not yet proven socket too. */
void zp_name_child(struct zsock *z, int fd)
{
	if (z->side != 1 || z->hello_fd < 0)
		return;
	struct zp_wire a = claims(ZP_ANSWER_MAGIC, z->size, fd, z->hello_fd);
	send_wire(z->hello_fd, &a, -1);
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

__thread const char *zp_no_switch;

struct zsock *zp_connect_offer(int fd, const struct sockaddr *a, socklen_t len)
{
	zp_no_switch = NULL;
	int family;
	struct sockaddr_un u;
	socklen_t ulen;
	if (!a || !is_stream(fd, &family) || a->sa_family != family || !local_dest(a) ||
	    rdv_addr(a, len, &u, &ulen))
		return NULL;
	int c = zp_real.socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c < 0)
		return NULL;
	bool reached = !zp_real.connect(c, (struct sockaddr *)&u, ulen);
	if (!reached || !uid_ok(c)) {
		/* said once the connection is made (connect) */
		zp_no_switch = reached ? "the listener is another uid's" : "no preloaded listener there";
		zp_real.close(c);
		return NULL; /* nobody preloaded listens there: a kernel socket */
	}
	c = high_fd(c);
	int mem = zl_memfd_sealed("zipline-preload", ZP_HDR + 2 * (size_t)zp_ring);
	struct zsock *z = mem >= 0 ? zp_map(mem, zp_ring, 0, -1) : NULL;
	if (z) {
		z->mem = high_fd(mem);
		z->hello_fd = c;
		z->fam = mmap(NULL, sizeof(*z->fam), PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	} else if (mem >= 0) {
		zp_real.close(mem);
	}
	if (!z || z->fam == MAP_FAILED) {
		if (z)
			z->fam = NULL;
		goto fail;
	}
	z->sh->magic = ZP_MAGIC;
	z->sh->version = ZP_VERSION;
	z->sh->ring_size = zp_ring;
	z->sh->hdr_size = ZP_HDR;
	struct zp_wire h = claims(ZP_HELLO_MAGIC, zp_ring, fd, c);
	if (send_wire(c, &h, z->mem))
		goto fail;
	z->join_until = zl_now_us() + PENDING_US + 1000000;
	atomic_store(&z->pending, true);
	z->fd = fd;
	z->is_unix = family == AF_UNIX;
	return z;
fail:
	ZL_LOG(ZL_LOG_DEBUG, "preload: fd %d: no hello sent (%s)", fd, strerror(errno));
	if (z)
		zsock_discard(z);
	else
		zp_real.close(c);
	return NULL;
}

void zp_connect_done(struct zsock *z, int ok)
{
	if (!ok)
		zsock_discard(z);
}

void zp_join_free(struct zsock *z)
{
	free(z->named);
	z->named = NULL;
	z->nnamed = 0;
}

/* The answer and the processes named since are kept until one of them is
 * proven: a fork-per-connection server's parent may close its copy before
 * we look, and its child's naming come after. */
int zp_client_join(struct zsock *z)
{
	if (z->hello_fd < 0 || (!z->named && !(z->named = calloc(MAX_NAMED, sizeof(*z->named)))))
		return -1;
	int fresh = 0, r = 0;
	while (z->nnamed < MAX_NAMED && (r = recv_wire(z->hello_fd, ZP_ANSWER_MAGIC, 0,
						       &z->named[z->nnamed], NULL)) == 1) {
		z->nnamed++;
		fresh++;
	}
	bool over = r < 0 || z->nnamed == MAX_NAMED || zl_now_us() > z->join_until;
	int who = -1;
	if (fresh || r < 0) {
		uint64_t srv = zp_other_end(z->fd), rdv = zp_other_end(z->hello_fd);
		for (int i = 0; i < z->nnamed && who < 0; i++) {
			const struct zp_wire *a = &z->named[i];
			if (a->ring_size == z->size && a->sock_ino == srv && a->rdv_ino == rdv &&
			    zp_holds(a->pid, a->sock_fd, srv, a->rdv_fd, rdv))
				who = i;
		}
	}
	if (who < 0 && !over)
		return 0;
	if (who < 0) {
		zp_fell_back(z->fd, z->nnamed ? "no answer came from the other end" : "no answer");
		zp_join_free(z);
		return -1;
	}
	ZL_LOG(ZL_LOG_DEBUG, "preload: fd %d switched to shared memory (the server, pid %d, is "
	       "proven)", z->fd, (int)z->named[who].pid);
	zp_join_free(z);
	zp_real.close(z->hello_fd);
	z->hello_fd = -1;
	return 1;
}
