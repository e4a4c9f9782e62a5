/* SPDX-License-Identifier: MIT */
/*
 * Across hosts: a TCP connection between two preloaded programs moves to
 * zipline's own rdma:// channel (after "Network Sockets over RDMA"). Opt-in only:
 * ZL_PRELOAD_XHOST (zl-run --xhost) names the connections that may switch.
 *
 * Learning that the peer runs the preload, without a byte on the program's
 * connection that a plain peer could see:
 *
 *  1. A preloaded listener that the configuration names also listens on a
 *     side port (its port + ZL_PRELOAD_XHOST_PORT_OFFSET, same address).
 *     A plain program never has it. A helper thread serves it.
 *  2. A preloaded client, in connect(2) and BEFORE its own SYN, binds its
 *     socket (to learn its port) and connects to the side port from the
 *     same source address. The side listener speaks first (a banner with
 *     nonce_s): a client never sends a byte to whatever else may listen
 *     there. The client answers with a claim (its port, the server port,
 *     nonce_c); the listener files it and acknowledges it.
 *  3. Only then does the client's SYN go. The claim is at the server before
 *     the connection exists, so accept(2) matches it by the address pair
 *     (client address = the side connection's source, which a remote
 *     stranger cannot fake past TCP's handshake), or finds none and never
 *     waits for one. Two claims for one connection: neither is believed.
 *
 * Proving which connection a claim speaks for (a claim could come from
 * another process on the client's host): each end, before it trusts the
 * channel with data, must see the other end's proof on the TCP connection
 * itself: the first 16 bytes of each direction are the nonce the other end
 * handed out on the side connection. The server writes nonce_c at accept
 * (the client claimed, so it looks for it); the client writes nonce_s with
 * its first send, once it has seen the server's proof (so the server
 * matched, and looks for it) and only if nothing went before. A receiver
 * recognises the proof (128 random bits) at position 0, or sees
 * application bytes there and never switches that direction: no timing
 * decides what is data. A client that never sends never proves itself;
 * the server's direction then stays on TCP.
 *
 * The channel: zl_rdma_over_socket() sets up an rdma:// channel over the
 * side connection (the transport's own handshake, in-order placement probe
 * and modes, not a second ring); the side connection stays its liveness
 * signal. The process that first uses the socket sets it up, on a thread
 * of its own (both ends block in the handshake at once, and a program
 * that uses both ends in one thread must not wait for itself); a process
 * that forks right after accept(2) and closes its copy thus sets it up in
 * the child that serves. Only a process that holds the socket alone takes
 * the channel (a count of holders in the shared state): a forked copy that
 * took it and then exited would take the connection down with it. What
 * all processes holding the socket must agree on (each direction's TCP
 * position, the proofs, the owner's pid) lives in a memfd, as the rings do
 * on one host, so fork and exec keep one view.
 *
 * Switching, each direction on its own (as sock.c does on one host): the
 * owner, once the peer is proven and the channel is up, sends 'S'{k} on
 * the channel, k = the application bytes sent over TCP, and from then on
 * writes its bytes into the channel. Nothing goes on TCP after 'S', so the
 * receiver reads TCP freely until k bytes, then the channel: bytes sent
 * before the switch arrive first, in order, with no marker in the stream.
 * The TCP connection stays open underneath and is closed with the channel.
 *
 * Failures: before the first application byte every failure (no device,
 * nothing on the side port, a refused or half-done setup, a stranger's
 * claim) leaves the connection on TCP, with one ZL_LOG line. After it, the
 * channel's end without our 'F' (end of stream) message is ECONNRESET, and
 * so is a TCP end before k bytes; a process that is not the owner gets EIO
 * once its direction went into the owner's channel.
 *
 * Channel messages: 'D' + data, 'S' + 8-byte little-endian k, 'F'. A
 * peer's message is checked before use (type, length, k not behind us).
 * The zipline library (and libibverbs with it) is dlopen'ed on first use,
 * so a program never opted in loads neither.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "clock.h"
#include "preload.h"
#include "sockutil.h"

#define XH_VERSION 1
#define BANNER_MAGIC 0x53584c5au /* "ZLXS" */
#define CLAIM_MAGIC 0x43584c5au  /* "ZLXC" */
#define SIDE_US 1000000          /* side connect, banner, claim */
#define SETUP_US 10000000        /* the rdma handshake over the side connection:
				  * each end starts it on its first use */
#define CLAIM_US 30000000        /* a claim no accept matched */
#define PARTIAL_US 1000000       /* a proof's first bytes without the rest */
#define SLICE_US 100000          /* blocking waits look at close this often */
#define MAX_CLAIMS 256
#define MAX_LISTEN 64
#define MAX_ENTRIES 64

__thread int zp_inside; /* our own calls into the zipline library */

/* ---- configuration ---------------------------------------------------- */

struct entry {
	int kind; /* 0 address:port, 1 *:port, 2 subnet */
	uint32_t ip, mask;
	uint16_t port;
};
static struct entry entries[MAX_ENTRIES];
static int nentries;
static bool xh_all, xh_on;
static const char *bad_config;
static pthread_once_t bad_once = PTHREAD_ONCE_INIT;

static void say_bad_config(void)
{
	ZL_LOG(ZL_LOG_WARN, "preload: ZL_PRELOAD_XHOST='%s' is malformed (entries: all, "
	       "ADDR:PORT, *:PORT, ADDR/BITS; at most %d): no connection crosses hosts",
	       bad_config, MAX_ENTRIES);
}

/* Off (nothing named, or a malformed list, said once). */
static bool off(void)
{
	if (bad_config)
		pthread_once(&bad_once, say_bad_config);
	return !xh_on;
}
static int port_offset = 30000;
static int64_t first_wait_us = 1000000;
static char dev_override[64];

static bool parse_ip(const char *s, size_t n, uint32_t *ip)
{
	char b[32];
	struct in_addr a;
	if (n == 0 || n >= sizeof(b))
		return false;
	memcpy(b, s, n);
	b[n] = 0;
	if (inet_pton(AF_INET, b, &a) != 1)
		return false;
	*ip = ntohl(a.s_addr);
	return true;
}

static bool parse_num(const char *s, size_t n, long lo, long hi, long *v)
{
	long x = 0;
	if (n == 0 || n > 5)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		x = x * 10 + (s[i] - '0');
	}
	*v = x;
	return x >= lo && x <= hi;
}

/* One entry: all, ADDR:PORT, *:PORT, ADDR/BITS. */
static bool parse_entry(const char *s, size_t n, struct entry *e)
{
	const char *c = memchr(s, ':', n), *sl = memchr(s, '/', n);
	long v;
	if (c && !sl && parse_num(c + 1, (size_t)(s + n - c - 1), 1, 65535, &v)) {
		e->port = (uint16_t)v;
		if (c - s == 1 && s[0] == '*') {
			e->kind = 1;
			return true;
		}
		e->kind = 0;
		return parse_ip(s, (size_t)(c - s), &e->ip);
	}
	if (sl && !c && parse_num(sl + 1, (size_t)(s + n - sl - 1), 0, 32, &v) &&
	    parse_ip(s, (size_t)(sl - s), &e->ip)) {
		e->kind = 2;
		e->mask = v ? ~0u << (32 - v) : 0;
		e->ip &= e->mask;
		return true;
	}
	return false;
}

/* ZL_PRELOAD_XHOST: entries separated by commas or spaces. Anything
 * malformed makes the whole list empty (one log line): a typo must not
 * switch connections nobody named. */
static pid_t my_pid; /* getpid() is a system call: kept, and renewed at fork */
static void renew_pid(void) { my_pid = getpid(); }

void zx_config(void)
{
	renew_pid();
	pthread_atfork(NULL, NULL, renew_pid);
	const char *s = getenv("ZL_PRELOAD_XHOST"), *e;
	if ((e = getenv("ZL_PRELOAD_XHOST_PORT_OFFSET"))) {
		long v;
		if (parse_num(e, strlen(e), 1, 64511, &v))
			port_offset = (int)v;
		else
			ZL_LOG(ZL_LOG_WARN, "preload: ZL_PRELOAD_XHOST_PORT_OFFSET=%s is not "
			       "1..64511; using %d", e, port_offset);
	}
	if ((e = getenv("ZL_PRELOAD_XHOST_WAIT_MS"))) {
		long v;
		if (parse_num(e, strlen(e), 0, 60000, &v))
			first_wait_us = v * 1000;
		else
			ZL_LOG(ZL_LOG_WARN, "preload: ZL_PRELOAD_XHOST_WAIT_MS=%s is not 0..60000",
			       e);
	}
	if ((e = getenv("ZL_PRELOAD_XHOST_DEV")) && strlen(e) < sizeof(dev_override))
		strcpy(dev_override, e);
	if (!s || !*s)
		return;
	int n = 0;
	bool all = false, ok = true;
	for (const char *p = s; *p && ok;) {
		while (*p == ',' || *p == ' ')
			p++;
		size_t len = strcspn(p, ", ");
		if (!len)
			break;
		if (len == 3 && !memcmp(p, "all", 3))
			all = true;
		else if (n == MAX_ENTRIES || !parse_entry(p, len, &entries[n++]))
			ok = false;
		p += len;
	}
	if (!ok) {
		bad_config = s; /* said at the first connect or listen: logging is
				 * not set up yet in the constructors */
		return;
	}
	nentries = n;
	xh_all = all;
	xh_on = all || n > 0;
}

/* Does the configuration name this connection? remote: the peer's address
 * and port; local: ours (a listener's). */
static bool named(uint32_t rip, uint16_t rport, uint32_t lip, uint16_t lport)
{
	if (xh_all)
		return true;
	for (int i = 0; i < nentries; i++) {
		const struct entry *e = &entries[i];
		if ((e->kind == 2 && (rip & e->mask) == e->ip) ||
		    (e->kind == 1 && (e->port == rport || e->port == lport)) ||
		    (e->kind == 0 && ((e->ip == rip && e->port == rport) ||
				      (e->port == lport && (e->ip == lip || !lip)))))
			return true;
	}
	return false;
}

/* A listener on lip:lport may get claims: it offers the side port. */
static bool listener_named(uint32_t lip, uint16_t lport)
{
	for (int i = 0; i < nentries; i++)
		if (entries[i].kind == 2)
			return true; /* a subnet names clients, whatever the port */
	return named(0xffffffffu, 0, lip, lport);
}

static uint16_t side_port(uint16_t port)
{
	return (uint16_t)(1024 + ((int)port - 1024 + port_offset + 64512) % 64512);
}

/* ---- the zipline library, loaded on first use ----------------------------- */

static struct {
	int (*over)(int, const char *, uint32_t, int64_t, zl_channel **);
	void (*close)(zl_channel *);
	int (*send)(zl_channel *, const void *, size_t, int64_t);
	int (*reserve)(zl_channel *, size_t, void **);
	int (*commit)(zl_channel *, size_t);
	int (*peek)(zl_channel *, const void **, size_t *, int64_t);
	int (*release)(zl_channel *);
	size_t (*max_inline)(const zl_channel *);
	int (*writable)(zl_channel *, size_t, int64_t);
	int (*fd)(zl_channel *);
	int (*arm)(zl_channel *);
	int (*info)(const zl_channel *, struct zl_channel_info *); /* optional */
} zl;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;
static bool lib_ok;

static void lib_load(void)
{
	const char *path = getenv("ZL_PRELOAD_LIBZIPLINE");
	/* No RDMAV_FORK_SAFE: its MADV_DONTFORK leaves holes in a forked
	 * child's heap (rings come from malloc), and the child would crash in
	 * malloc. The kernels this runs on copy pinned pages into the child
	 * at fork instead, and a child never uses a channel its parent set
	 * up: channels are set up by the process that first uses the socket,
	 * after any fork before that (setup_start). */
	zp_inside++;
	void *h = dlopen(path && *path ? path : ZL_SONAME, RTLD_NOW | RTLD_LOCAL);
	zp_inside--;
	if (!h) {
		ZL_LOG(ZL_LOG_WARN, "preload: cannot load the zipline library (%s): no "
		       "connection crosses hosts", dlerror());
		return;
	}
#define S(f, n) (*(void **)&zl.f = dlsym(h, n))
	bool ok = S(over, "zl_rdma_over_socket") && S(close, "zl_close") && S(send, "zl_send") &&
		  S(reserve, "zl_send_reserve") && S(commit, "zl_send_commit") &&
		  S(peek, "zl_recv_peek") && S(release, "zl_recv_release") &&
		  S(max_inline, "zl_max_inline") && S(writable, "zl_wait_writable") &&
		  S(fd, "zl_channel_fd") && S(arm, "zl_channel_arm");
	S(info, "zl_channel_info");
#undef S
	if (!ok)
		ZL_LOG(ZL_LOG_WARN, "preload: the zipline library has no rdma transport: no "
		       "connection crosses hosts");
	lib_ok = ok;
}

static bool lib(void)
{
	pthread_once(&lib_once, lib_load);
	return lib_ok;
}

/* The RDMA device whose GID table holds ip (IPv4-mapped), from sysfs: the
 * device the connection's own route uses. */
static bool dev_for(uint32_t ip, char *dev, size_t cap)
{
	if (dev_override[0]) {
		snprintf(dev, cap, "%s", dev_override);
		return true;
	}
	char want[64];
	snprintf(want, sizeof(want), "0000:0000:0000:0000:0000:ffff:%04x:%04x", ip >> 16,
		 ip & 0xffff);
	DIR *d = opendir("/sys/class/infiniband");
	struct dirent *e;
	bool found = false;
	while (d && !found && (e = readdir(d))) {
		if (e->d_name[0] == '.' || strlen(e->d_name) >= 48)
			continue;
		for (int i = 0; i < 16 && !found; i++) {
			char p[160], g[64] = "";
			snprintf(p, sizeof(p), "/sys/class/infiniband/%s/ports/1/gids/%d", e->d_name, i);
			int fd = open(p, O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				break;
			ssize_t n = zp_real.read(fd, g, sizeof(g) - 1);
			zp_real.close(fd);
			g[n > 0 ? n : 0] = 0;
			if (!strncmp(g, want, strlen(want))) {
				snprintf(dev, cap, "%s", e->d_name);
				found = true;
			}
		}
	}
	if (d)
		closedir(d);
	return found;
}

/* ---- small socket helpers (the real calls) ------------------------------ */

static int wait_fd(int fd, short ev, int64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = ev };
		int n = zp_real.poll(&p, 1, zl_poll_ms(deadline));
		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

static bool v4(int fd, bool peer, uint32_t *ip, uint16_t *port)
{
	struct sockaddr_in a;
	socklen_t l = sizeof(a);
	if ((peer ? getpeername(fd, (struct sockaddr *)&a, &l)
		  : getsockname(fd, (struct sockaddr *)&a, &l)) || a.sin_family != AF_INET)
		return false;
	*ip = ntohl(a.sin_addr.s_addr);
	*port = ntohs(a.sin_port);
	return true;
}

static const char *ipstr(uint32_t ip, char *b)
{
	struct in_addr a = { htonl(ip) };
	return inet_ntop(AF_INET, &a, b, INET_ADDRSTRLEN);
}

struct banner {
	uint32_t magic;
	uint16_t version, pad;
	uint8_t nonce[16];
};

struct claim_msg {
	uint32_t magic;
	uint16_t version, c_port, s_port, pad;
	uint32_t s_ip;
	uint8_t nonce[16];
};

/* ---- the connection's cross-host state ------------------------------------ */

enum { G_OPEN = 0, G_PLAIN = 1, G_PROVEN = 2 };
enum { SU_NONE = 0, SU_RUNNING = 1, SU_READY = 2, SU_FAILED = 3 };

/* What every process holding the socket must agree on (fork and exec
 * share it: a memfd, as the rings on one host): where each direction's
 * TCP bytes stand, and which process owns the channel. */
struct zx_sh {
	uint32_t magic, version;
	_Atomic int32_t owner;    /* the pid whose channel it is; -1: nobody's
				   * any more (its owner exec'ed); 0: nobody yet */
	_Atomic int32_t holders;  /* processes holding the socket: +1 at each
				   * fork, -1 at a process's last close (one
				   * that is killed stays counted) */
	_Atomic int gate;         /* position 0 of the peer's stream: G_* */
	_Atomic uint64_t rx_k;    /* TCP bytes read (after the peer's proof) */
	_Atomic uint64_t rx_at;   /* the peer's switch point, once at_known */
	_Atomic bool at_known;
	_Atomic bool rx_rdma;     /* the owner reads the channel now */
	_Atomic bool proof_sent;
	_Atomic bool tx_rdma;     /* the owner sent 'S': our bytes go over rdma */
	_Atomic uint64_t tx_k;    /* application bytes sent over TCP */
	bool server;
	uint8_t mine[16];         /* the peer's proof: what it must write first */
	uint8_t theirs[16];       /* our proof: what we write first */
	int64_t first_by;         /* client: the first send waits for the proof */
	char dev[64], desc[64];
};
#define SH_MAGIC 0x48584c5au /* "ZLXH" */

struct zx {
	struct zx_sh *s;
	int mem;                /* its memfd (for exec) */
	zl_channel *ch;         /* set once, before ready */
	_Atomic bool ready;     /* the channel is up (SU_READY) */
	_Atomic int setup;      /* SU_*: the channel is set up by the process that
				 * first uses the socket, on a thread of its own */
	pthread_mutex_t setup_lock;
	bool thread_alive;      /* the setup thread holds a use (z->users) */
	int side;               /* the side connection, until the setup takes it */
	int ep;                 /* where we sleep: the TCP socket, the channel fd,
				 * and evfd (the setup's end) */
	int evfd;
	bool ev_taken;          /* the setup's end was read off evfd (rx_lock) */
	pthread_mutex_t rx_lock, tx_lock;
	/* receiving (rx_lock) */
	int64_t partial_since;
	uint64_t rd_in;         /* bytes of the peer's messages seen (EPOLLET) */
	bool tcp_eof, fin, reset_told, ch_dead, ep_tcp_off;
	int pend_err;           /* a TCP error a peek took: the next read's */
	bool used;              /* this process used the socket */
	const uint8_t *msg;     /* a peeked 'D' message being read */
	size_t msg_len, msg_off;
	uint8_t *sp;            /* the rest of a message copied out of the ring,
				 * read before msg (EPOLLET looks past one) */
	size_t sp_len, sp_off, sp_cap;
	/* sending (tx_lock) */
	_Atomic uint64_t tx_full; /* sends that found no room (EPOLLET: room
				 * is news after one) */
	size_t rec_max;         /* largest data record */
	int64_t setup_by;       /* a send waits for a setup the peer runs too until */
	_Atomic bool closed;
};


/* This process owns the channel (set it up, or may): only it switches. */
static bool own(const struct zx *x)
{
	return atomic_load_explicit(&x->s->owner, memory_order_relaxed) == my_pid;
}

/* Another process owns it: ours are TCP bytes only. */
static bool foreign(const struct zx *x)
{
	int32_t o = atomic_load_explicit(&x->s->owner, memory_order_relaxed);
	return o != 0 && o != my_pid;
}

static int high(int fd)
{
	int h = fd >= 0 ? zp_real.fcntl(fd, F_DUPFD_CLOEXEC, 512) : -1;
	if (h < 0)
		return fd;
	zp_real.close(fd);
	return h;
}

/* The per-process part around shared state sh (memfd mem). */
static struct zsock *zx_wrap(int fd, int side, int mem, struct zx_sh *sh)
{
	struct zsock *z = calloc(1, sizeof(*z));
	struct zx *x = calloc(1, sizeof(*x));
	if (!z || !x || !(z->o = zp_own_new(NULL))) /* (x->s is what its holders share) */
		goto fail;
	z->own_fd = -1;
	x->s = sh;
	x->mem = mem;
	x->ep = high(epoll_create1(EPOLL_CLOEXEC));
	x->evfd = high(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
	struct epoll_event e1 = { .events = EPOLLIN, .data.u64 = 1 };
	struct epoll_event e2 = { .events = EPOLLIN | EPOLLRDHUP, .data.u64 = 2 };
	if (x->ep < 0 || x->evfd < 0 || zp_real.epoll_ctl(x->ep, EPOLL_CTL_ADD, x->evfd, &e1) ||
	    zp_real.epoll_ctl(x->ep, EPOLL_CTL_ADD, fd, &e2)) {
		if (x->ep >= 0)
			zp_real.close(x->ep);
		if (x->evfd >= 0)
			zp_real.close(x->evfd);
		goto fail;
	}
	x->side = side;
	pthread_mutex_init(&x->rx_lock, NULL);
	pthread_mutex_init(&x->tx_lock, NULL);
	pthread_mutex_init(&x->setup_lock, NULL);
	pthread_mutex_init(&z->lock, NULL);
	z->xh = x;
	z->fd = fd;
	z->hello_fd = -1;
	z->mem = -1;
	return z;
fail:
	if (z)
		zp_own_free(z->o, false);
	free(z);
	free(x);
	if (side >= 0)
		zp_real.close(side);
	munmap(sh, sizeof(*sh));
	zp_real.close(mem);
	return NULL;
}

static struct zsock *zx_new(int fd, int side, const char *dev, bool server, const uint8_t *mine,
			    const uint8_t *theirs)
{
	int mem = high(memfd_create("zipline-xhost", MFD_CLOEXEC));
	struct zx_sh *sh = MAP_FAILED;
	if (mem >= 0 && !ftruncate(mem, sizeof(*sh)))
		sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED, mem, 0);
	if (sh == MAP_FAILED) {
		if (mem >= 0)
			zp_real.close(mem);
		zp_real.close(side);
		return NULL;
	}
	sh->magic = SH_MAGIC;
	sh->version = XH_VERSION;
	sh->holders = 1;
	snprintf(sh->dev, sizeof(sh->dev), "%s", dev);
	sh->server = server;
	memcpy(sh->mine, mine, 16);
	memcpy(sh->theirs, theirs, 16);
	return zx_wrap(fd, side, mem, sh);
}

/* The channel's setup, on its own thread: both ends block in it at once,
 * whichever of their threads first used the socket (a program that uses
 * both ends in one thread, or forks one end away first, never waits for
 * itself). Until it is up, the bytes go over TCP. */
static void *setup_main(void *arg)
{
	struct zsock *z = arg;
	struct zx *x = z->xh;
	zp_inside++;
	zl_channel *ch = NULL;
	int r = zl.over(x->side, x->s->dev, zp_ring, SETUP_US, &ch);
	pthread_mutex_lock(&x->setup_lock);
	x->side = -1; /* the channel's, or closed */
	if (!r && atomic_load(&x->closed))
		r = -EBADF;
	int cfd = r ? -1 : zl.fd(ch);
	struct epoll_event e = { .events = EPOLLIN, .data.u64 = 3 };
	if (!r && (cfd < 0 || zp_real.epoll_ctl(x->ep, EPOLL_CTL_ADD, cfd, &e)))
		r = -ENOMEM;
	if (r) {
		if (ch)
			zl.close(ch);
		if ((r == -EPROTO || r == -ECONNRESET) && atomic_load(&x->closed))
			r = -EBADF; /* our own close ended it */
		if (r == -EPROTO || r == -ECONNRESET) /* setup()'s word for a side EOF */
			ZL_LOG(ZL_LOG_INFO, "preload: fd %d (%s) stays on TCP: the peer ended the "
			       "rdma setup (it closed, or another process of it owns the socket)",
			       z->fd, x->s->desc);
		else if (r != -EBADF)
			ZL_LOG(ZL_LOG_INFO, "preload: fd %d (%s) stays on TCP: rdma setup failed "
			       "(%s)", z->fd, x->s->desc, strerror(-r));
		atomic_store(&x->setup, SU_FAILED);
	} else {
		size_t mi = zl.max_inline(ch);
		x->rec_max = mi > 1 ? mi - 1 : 1;
		if (x->rec_max > (256u << 10))
			x->rec_max = 256u << 10;
		zl.arm(ch); /* its fd fires on the first message */
		x->ch = ch;
		atomic_store(&x->setup, SU_READY);
		atomic_store_explicit(&x->ready, true, memory_order_release);
	}
	uint64_t one = 1; /* a sleeper in ep looks again */
	if (x->evfd >= 0 && zp_real.write(x->evfd, &one, sizeof(one)) < 0)
		ZL_LOG(ZL_LOG_DEBUG, "preload: eventfd: %s", strerror(errno));
	x->thread_alive = false;
	if (atomic_load(&x->closed) && atomic_load(&z->users) == 1) { /* the last: ours */
		zp_real.close(x->ep);
		zp_real.close(x->evfd);
		x->ep = x->evfd = -1;
	}
	pthread_mutex_unlock(&x->setup_lock);
	atomic_fetch_sub(&z->users, 1); /* the zsock may go now */
	zp_inside--;
	return NULL;
}

/* Another process owns the channel: our copy of the side connection must
 * not keep it open (its end is how the peer learns the owner died). */
static void let_side_go(struct zx *x)
{
	if (x->side < 0 || !foreign(x))
		return;
	pthread_mutex_lock(&x->setup_lock);
	if (x->side >= 0 && atomic_load(&x->setup) == SU_NONE) {
		zp_real.close(x->side);
		x->side = -1;
	}
	pthread_mutex_unlock(&x->setup_lock);
}

/* The first use of the socket in this process starts the setup. */
static void setup_start(struct zsock *z)
{
	struct zx *x = z->xh;
	int want = SU_NONE;
	int32_t nobody = 0;
	x->used = true;
	let_side_go(x);
	if (x->side < 0 || !lib()) /* an exec'ed image loads the library here */
		return;
	/* Only a process that holds the socket alone may take the channel: a
	 * forked copy that took it and exited would end the connection for the
	 * others (the channel dies with its owner), which TCP never does. Two
	 * holders that never close one copy stay on TCP. */
	if (atomic_load_explicit(&x->setup, memory_order_relaxed) != SU_NONE ||
	    atomic_load(&x->closed) || x->side < 0 ||
	    (!own(x) && atomic_load(&x->s->holders) > 1) ||
	    (!own(x) && !atomic_compare_exchange_strong(&x->s->owner, &nobody, my_pid)) ||
	    !atomic_compare_exchange_strong(&x->setup, &want, SU_RUNNING))
		return;
	pthread_t t;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	atomic_fetch_add(&z->users, 1);
	x->thread_alive = true;
	x->setup_by = zl_now_us() + first_wait_us;
	int r = pthread_create(&t, &at, setup_main, z);
	pthread_attr_destroy(&at);
	if (r) {
		atomic_fetch_sub(&z->users, 1);
		pthread_mutex_lock(&x->setup_lock);
		x->thread_alive = false;
		zp_real.close(x->side);
		x->side = -1;
		atomic_store(&x->setup, SU_FAILED);
		pthread_mutex_unlock(&x->setup_lock);
		ZL_LOG(ZL_LOG_INFO, "preload: fd %d (%s) stays on TCP: no thread for the rdma "
		       "setup (%s)", z->fd, x->s->desc, strerror(r));
	}
}

static bool ch_ok(struct zx *x)
{
	return atomic_load_explicit(&x->ready, memory_order_acquire) && !x->ch_dead && own(x);
}

/* ---- the listening side: claims and the helper thread -------------------- */

struct claim {
	uint32_t c_ip, s_ip;
	uint16_t c_port, s_port;
	int state;              /* 1 ready, 2 ambiguous (a second claim came) */
	int side;               /* the side connection, for the channel's setup */
	uint8_t nonce_c[16], nonce_s[16];
	int64_t since;
};

struct side {
	int lfd, sfd;           /* the program's listener, our side listener */
	uint32_t ip;
	uint16_t port;
	char dev[64];
};

static pthread_mutex_t cl_lock = PTHREAD_MUTEX_INITIALIZER;
static struct claim claims[MAX_CLAIMS];
static int nclaims;
static struct side sides[MAX_LISTEN];
static int nsides;
static bool helper_running;

static void claim_drop(int i)
{
	if (claims[i].side >= 0)
		zp_real.close(claims[i].side);
	claims[i] = claims[--nclaims];
}

/* One side connection's banner and claim (the helper thread). A silent
 * client costs at most SIDE_US here. */
static void serve_side(int c, const struct side *sd)
{
	char b1[INET_ADDRSTRLEN];
	uint32_t pip, lip;
	uint16_t pport, lport;
	struct banner bn = { .magic = BANNER_MAGIC, .version = XH_VERSION };
	struct claim_msg m;
	int64_t dl = zl_now_us() + SIDE_US;
	if (!v4(c, true, &pip, &pport) || !v4(c, false, &lip, &lport) ||
	    getrandom(bn.nonce, 16, 0) != 16 || zl_write_full(c, &bn, sizeof(bn), dl) ||
	    zl_read_full(c, &m, sizeof(m), dl)) {
		zp_real.close(c);
		return;
	}
	if (m.magic != CLAIM_MAGIC || m.version != XH_VERSION || ntohs(m.s_port) != sd->port ||
	    ntohl(m.s_ip) != lip || !m.c_port || !named(pip, ntohs(m.c_port), lip, sd->port)) {
		ZL_LOG(ZL_LOG_INFO, "preload: a side-port claim from %s refused (malformed, or "
		       "not named by ZL_PRELOAD_XHOST)", ipstr(pip, b1));
		zp_real.close(c);
		return;
	}
	struct claim k = { .c_ip = pip, .s_ip = lip, .c_port = ntohs(m.c_port),
			   .s_port = sd->port, .since = zl_now_us(), .state = 1, .side = high(c) };
	memcpy(k.nonce_c, m.nonce, 16);
	memcpy(k.nonce_s, bn.nonce, 16);
	pthread_mutex_lock(&cl_lock);
	int slot = -1;
	for (int i = 0; i < nclaims; i++)
		if (claims[i].c_ip == k.c_ip && claims[i].c_port == k.c_port &&
		    claims[i].s_port == k.s_port)
			slot = i;
	if (slot >= 0) { /* two claims for one connection: neither is believed */
		if (claims[slot].side >= 0)
			zp_real.close(claims[slot].side);
		claims[slot].side = -1;
		claims[slot].state = 2;
		zp_real.close(k.side);
	} else {
		if (nclaims == MAX_CLAIMS)
			claim_drop(0);
		claims[nclaims++] = k;
		/* the claim is in: its client may send its SYN now */
		uint32_t ack = CLAIM_MAGIC;
		if (zp_real.send(k.side, &ack, 4, MSG_DONTWAIT | MSG_NOSIGNAL) != 4)
			claim_drop(nclaims - 1);
	}
	pthread_mutex_unlock(&cl_lock);
}

static void *helper(void *arg)
{
	(void)arg;
	zp_inside++; /* for good: every call of this thread is ours */
	for (;;) {
		struct pollfd p[MAX_LISTEN + MAX_CLAIMS];
		struct side sd[MAX_LISTEN];
		pthread_mutex_lock(&cl_lock);
		int n = nsides;
		memcpy(sd, sides, sizeof(sd[0]) * (size_t)n);
		int64_t now = zl_now_us();
		for (int i = 0; i < nclaims;) /* no accept came for them */
			if (now - claims[i].since > CLAIM_US)
				claim_drop(i);
			else
				i++;
		pthread_mutex_unlock(&cl_lock);
		for (int i = 0; i < n; i++)
			p[i] = (struct pollfd){ .fd = sd[i].sfd, .events = POLLIN };
		/* and the claims' side connections, for their client's end (its
		 * setup may begin before our accept: data there is no end) */
		int nc = 0;
		int cfd[MAX_CLAIMS];
		int64_t cgen[MAX_CLAIMS];
		pthread_mutex_lock(&cl_lock);
		for (int i = 0; i < nclaims && n + nc < MAX_LISTEN + MAX_CLAIMS; i++)
			if (claims[i].side >= 0) {
				cgen[nc] = claims[i].since;
				cfd[nc++] = claims[i].side;
			}
		pthread_mutex_unlock(&cl_lock);
		for (int i = 0; i < nc; i++)
			p[n + i] = (struct pollfd){ .fd = cfd[i], .events = POLLRDHUP };
		if (zp_real.poll(p, (nfds_t)(n + nc), 200) <= 0)
			continue;
		pthread_mutex_lock(&cl_lock);
		for (int i = 0; i < nc; i++) /* the same claim, not a reused fd */
			for (int j = 0; (p[n + i].revents & (POLLRDHUP | POLLHUP | POLLERR)) &&
					j < nclaims; j++)
				if (claims[j].side == cfd[i] && claims[j].since == cgen[i]) {
					claim_drop(j);
					break;
				}
		pthread_mutex_unlock(&cl_lock);
		for (int i = 0; i < n; i++) {
			if (!p[i].revents)
				continue;
			int c = -1;
			struct side cur = { .sfd = -1 };
			pthread_mutex_lock(&cl_lock);
			for (int j = 0; j < nsides; j++)
				if (sides[j].sfd == sd[i].sfd) { /* its listener now, maybe new */
					cur = sides[j];
					c = zp_real.accept4(cur.sfd, NULL, NULL,
							    SOCK_CLOEXEC | SOCK_NONBLOCK);
				}
			pthread_mutex_unlock(&cl_lock);
			if (c >= 0)
				serve_side(c, &cur);
		}
	}
	return NULL;
}

void zx_listen_publish(int fd)
{
	uint32_t ip;
	uint16_t port;
	int type = 0;
	socklen_t tl = sizeof(type);
	if (off() || zp_inside || !v4(fd, false, &ip, &port) ||
	    zp_real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) || type != SOCK_STREAM ||
	    !listener_named(ip, port))
		return;
	struct side sd = { .lfd = fd, .ip = ip, .port = port };
	char b1[INET_ADDRSTRLEN];
	if (ip && !dev_for(ip, sd.dev, sizeof(sd.dev))) {
		ZL_LOG(ZL_LOG_INFO, "preload: no RDMA device has address %s: connections to "
		       "listener %d stay on TCP", ipstr(ip, b1), fd);
		return;
	}
	if (!lib())
		return;
	int s = zp_real.socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(side_port(port)),
				 .sin_addr.s_addr = htonl(ip) };
	if (s < 0 || zp_real.setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(s, (struct sockaddr *)&a, sizeof(a)) || zp_real.listen(s, 128)) {
		ZL_LOG(ZL_LOG_INFO, "preload: no side port %u for listener %d (%s): its "
		       "connections stay on TCP", side_port(port), fd, strerror(errno));
		if (s >= 0)
			zp_real.close(s);
		return;
	}
	sd.sfd = zp_real.fcntl(s, F_DUPFD_CLOEXEC, 512);
	if (sd.sfd < 0)
		sd.sfd = s;
	else
		zp_real.close(s);
	pthread_mutex_lock(&cl_lock);
	if (nsides == MAX_LISTEN) {
		pthread_mutex_unlock(&cl_lock);
		zp_real.close(sd.sfd);
		return;
	}
	sides[nsides++] = sd;
	if (!helper_running) {
		pthread_t t;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		helper_running = !pthread_create(&t, &at, helper, NULL);
		pthread_attr_destroy(&at);
	}
	pthread_mutex_unlock(&cl_lock);
	ZL_LOG(ZL_LOG_DEBUG, "preload: listener %d (%s:%u) offers rdma on side port %u", fd,
	       ipstr(ip, b1), port, side_port(port));
}

void zx_listen_close(int fd)
{
	if (!xh_on)
		return;
	pthread_mutex_lock(&cl_lock);
	for (int i = 0; i < nsides; i++)
		if (sides[i].lfd == fd) {
			/* the helper accepts only on fds still listed here (under
			 * the lock): a number the program reuses is never ours */
			zp_real.close(sides[i].sfd);
			/* its claims can never be accepted now: their fds go with it */
			for (int k = 0; k < nclaims;)
				if (claims[k].s_port == sides[i].port &&
				    (!sides[i].ip || claims[k].s_ip == sides[i].ip))
					claim_drop(k);
				else
					k++;
			sides[i] = sides[--nsides];
			break;
		}
	pthread_mutex_unlock(&cl_lock);
}

struct zsock *zx_accept_match(int lfd, int fd)
{
	uint32_t pip, lip;
	uint16_t pport, lport;
	if (!xh_on || zp_inside || !v4(fd, true, &pip, &pport) || !v4(fd, false, &lip, &lport))
		return NULL;
	pthread_mutex_lock(&cl_lock);
	struct side sd = { .lfd = -1 };
	for (int i = 0; i < nsides; i++)
		if (sides[i].lfd == lfd)
			sd = sides[i];
	int slot = -1;
	for (int i = 0; sd.lfd >= 0 && i < nclaims; i++)
		if (claims[i].c_ip == pip && claims[i].c_port == pport && claims[i].s_port == lport)
			slot = i;
	/* its client waited for the claim's answer before its SYN: a claim
	 * is here before its connection, or never */
	struct claim k = { .side = -1 };
	if (slot >= 0) {
		k = claims[slot];
		claims[slot] = claims[--nclaims];
	}
	pthread_mutex_unlock(&cl_lock);
	if (k.side < 0) {
		if (slot >= 0)
			ZL_LOG(ZL_LOG_INFO, "preload: accepted fd %d stays on TCP (two claims "
			       "for it)", fd);
		return NULL;
	}
	/* our proof, the first bytes of our direction: the client looks for it */
	if (zp_real.send(fd, k.nonce_c, 16, MSG_DONTWAIT | MSG_NOSIGNAL) != 16) {
		ZL_LOG(ZL_LOG_INFO, "preload: accepted fd %d stays on TCP (proof not sent: %s)",
		       fd, strerror(errno));
		zp_real.close(k.side);
		return NULL;
	}
	struct zsock *z = zx_new(fd, k.side, sd.dev, true, k.nonce_s, k.nonce_c);
	if (!z)
		return NULL; /* the client sees our proof and no more: it stays on TCP */
	z->xh->s->proof_sent = true;
	char b1[INET_ADDRSTRLEN];
	snprintf(z->xh->s->desc, sizeof(z->xh->s->desc), "%s:%u", ipstr(pip, b1), pport);
	ZL_LOG(ZL_LOG_DEBUG, "preload: accepted fd %d from %s: claimed by a preloaded client",
	       fd, z->xh->s->desc);
	return z;
}

/* ---- the connecting side ------------------------------------------------- */

/* The source address the kernel would pick for dst. */
static bool route_src(uint32_t dst, uint32_t *src)
{
	int u = zp_real.socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(9),
				 .sin_addr.s_addr = htonl(dst) };
	uint16_t p;
	bool ok = u >= 0 && !zp_real.connect(u, (struct sockaddr *)&a, sizeof(a)) &&
		  v4(u, false, src, &p);
	if (u >= 0)
		zp_real.close(u);
	return ok;
}

struct zsock *zx_connect_offer(int fd, const struct sockaddr *a, socklen_t len)
{
	int type = 0;
	socklen_t tl = sizeof(type);
	if (off() || zp_inside || !a || a->sa_family != AF_INET || len < sizeof(struct sockaddr_in))
		return NULL;
	const struct sockaddr_in *d = (const struct sockaddr_in *)a;
	uint32_t dip = ntohl(d->sin_addr.s_addr), cip;
	uint16_t dport = ntohs(d->sin_port), cport;
	char b1[INET_ADDRSTRLEN], dev[64];
	if ((dip >> 24) == 127 || !named(dip, dport, 0, 0) ||
	    zp_real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) || type != SOCK_STREAM ||
	    !v4(fd, false, &cip, &cport))
		return NULL;
	const char *why = NULL;
	if (!cip && !route_src(dip, &cip))
		why = "no route";
	else if (!dev_for(cip, dev, sizeof(dev)))
		why = "no RDMA device has our address";
	else if (!lib())
		why = "no zipline rdma library";
	if (why) {
		ZL_LOG(ZL_LOG_INFO, "preload: fd %d to %s:%u stays on TCP: %s", fd, ipstr(dip, b1),
		       dport, why);
		return NULL;
	}
	if (!cport) { /* our port, for the claim: bind before the SYN */
		struct sockaddr_in me = { .sin_family = AF_INET };
		uint32_t bip;
		if (bind(fd, (struct sockaddr *)&me, sizeof(me)) || !v4(fd, false, &bip, &cport))
			return NULL;
	}
	/* the side connection, from our address */
	int s = zp_real.socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(cip) };
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(side_port(dport)),
				   .sin_addr.s_addr = htonl(dip) };
	int64_t dl = zl_now_us() + SIDE_US;
	struct banner bn;
	struct claim_msg m = { .magic = CLAIM_MAGIC, .version = XH_VERSION,
			       .c_port = htons(cport), .s_port = htons(dport),
			       .s_ip = htonl(dip) };
	int r = s < 0 ? -errno : 0, err = 0;
	socklen_t el = sizeof(err);
	if (!r && (bind(s, (struct sockaddr *)&src, sizeof(src)) ||
		   (zp_real.connect(s, (struct sockaddr *)&dst, sizeof(dst)) && errno != EINPROGRESS)))
		r = -errno;
	if (!r && !(r = wait_fd(s, POLLOUT, dl)) &&
	    (zp_real.getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el) || err))
		r = -(err ? err : errno);
	if (r) {
		ZL_LOG(ZL_LOG_INFO, "preload: fd %d to %s:%u stays on TCP: no preloaded listener "
		       "(side port %u: %s)", fd, ipstr(dip, b1), dport, side_port(dport),
		       strerror(-r));
		if (s >= 0)
			zp_real.close(s);
		return NULL;
	}
	uint32_t ack = 0;
	if ((r = zl_read_full(s, &bn, sizeof(bn), dl)) || bn.magic != BANNER_MAGIC ||
	    bn.version != XH_VERSION || getrandom(m.nonce, 16, 0) != 16 ||
	    (r = zl_write_full(s, &m, sizeof(m), dl)) || (r = zl_read_full(s, &ack, 4, dl)) ||
	    ack != CLAIM_MAGIC) {
		ZL_LOG(ZL_LOG_INFO, "preload: fd %d to %s:%u stays on TCP: side port %u does not "
		       "answer as the preload (%s)", fd, ipstr(dip, b1), dport, side_port(dport),
		       r ? strerror(-r) : "bad banner");
		zp_real.close(s);
		return NULL;
	}
	struct zsock *z = zx_new(fd, high(s), dev, false, m.nonce, bn.nonce);
	if (!z)
		return NULL;
	z->xh->s->first_by = zl_now_us() + first_wait_us;
	snprintf(z->xh->s->desc, sizeof(z->xh->s->desc), "%s:%u", ipstr(dip, b1), dport);
	return z;
}

/* the connect failed: nothing was said on the connection */
void zx_connect_failed(struct zsock *z)
{
	zx_free(z);
}

/* ---- position 0 and the switch ------------------------------------------- */

/* Look at the first bytes of the peer's direction (rx_lock): its proof, or
 * application bytes (then this direction's peer is not proven). */
static void gate(struct zsock *z)
{
	struct zx *x = z->xh;
	if (x->s->gate != G_OPEN)
		return;
	uint8_t b[16];
	ssize_t n = zp_real.recv(z->fd, b, 16, MSG_PEEK | MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n < 0)
		x->pend_err = errno; /* the kernel reports it once: keep it */
	if (n <= 0 || memcmp(b, x->s->mine, (size_t)n)) {
		x->s->gate = G_PLAIN;
		ZL_LOG(ZL_LOG_INFO, "preload: fd %d (%s): the peer sent no proof: our sends "
		       "stay on TCP", z->fd, x->s->desc);
		return;
	}
	if (n < 16) { /* a 16-byte write split: the rest is a moment away */
		int64_t now = zl_now_us();
		if (!x->partial_since)
			x->partial_since = now;
		else if (now - x->partial_since > PARTIAL_US)
			x->s->gate = G_PLAIN;
		return;
	}
	if (zp_real.recv(z->fd, b, 16, MSG_DONTWAIT) != 16) {
		x->s->gate = G_PLAIN; /* cannot be: the bytes were there */
		return;
	}
	x->s->gate = G_PROVEN;
}

/* Our sends move to the channel once the peer proved itself (tx_lock):
 * first our own proof if nothing went before it (the client's; the
 * server's went at accept), then 'S'{tx_k}. */
static void tx_progress(struct zsock *z, bool sending)
{
	struct zx *x = z->xh;
	if (atomic_load_explicit(&x->s->tx_rdma, memory_order_relaxed) || x->s->gate != G_PROVEN ||
	    z->o->wr_shut || atomic_load(&x->closed))
		return;
	/* Only a send of the program's writes our proof (a reader's write
	 * would meet a peer that closed with a reset, where TCP gives EOF),
	 * and 'S' waits for it while it may still go first. */
	if (!sending && !x->s->proof_sent && !x->s->tx_k)
		return;
	bool no = false;
	if (!x->s->tx_k && atomic_compare_exchange_strong(&x->s->proof_sent, &no, true) &&
	    zp_real.send(z->fd, x->s->theirs, 16, MSG_DONTWAIT | MSG_NOSIGNAL) != 16) {
		x->ch_dead = true; /* nothing (or all of it) went: stay on TCP */
		return;
	}
	if (!ch_ok(x))
		return;
	uint8_t m[9] = { 'S' };
	for (int i = 0; i < 8; i++)
		m[1 + i] = (uint8_t)(x->s->tx_k >> (8 * i));
	zp_inside++;
	int r = zl.send(x->ch, m, sizeof(m), SLICE_US);
	zp_inside--;
	if (r) {
		x->ch_dead = true;
		ZL_LOG(ZL_LOG_INFO, "preload: fd %d (%s): the rdma channel failed before our "
		       "switch (%s): our sends stay on TCP", z->fd, x->s->desc, strerror(-r));
		return;
	}
	atomic_store(&x->s->tx_rdma, true);
	ZL_LOG(ZL_LOG_INFO, "preload: fd %d (%s) switched to rdma (our sends, after %llu "
	       "TCP bytes)", z->fd, x->s->desc, (unsigned long long)x->s->tx_k);
}

/* The peer's next message in place, without waiting (rx_lock). */
static int peek(struct zx *x, const uint8_t **b, size_t *len)
{
	const void *p;
	zp_inside++;
	int r = zl.peek(x->ch, &p, len, 0);
	zp_inside--;
	*b = p;
	return r;
}

/* The peer's 'S'{k}, if it came (rx_lock). */
static void look_switch(struct zsock *z)
{
	struct zx *x = z->xh;
	if (x->s->at_known || !ch_ok(x) || x->msg)
		return;
	const uint8_t *b;
	size_t len;
	int r = peek(x, &b, &len);
	if (r == -EAGAIN)
		return;
	if (r || len != 9 || b[0] != 'S') {
		if (!r) {
			ZL_LOG(ZL_LOG_WARN, "preload: fd %d (%s): the peer broke the switch "
			       "protocol", z->fd, x->s->desc);
			zl.release(x->ch);
			x->reset_told = false;
			x->s->at_known = true;
			x->s->rx_at = UINT64_MAX; /* never reached: the TCP end resets */
		}
		x->ch_dead = true;
		return;
	}
	uint64_t k = 0;
	for (int i = 0; i < 8; i++)
		k |= (uint64_t)b[1 + i] << (8 * i);
	zl.release(x->ch);
	x->s->at_known = true;
	x->s->rx_at = k < x->s->rx_k ? UINT64_MAX : k; /* behind what we read: broken */
}

/* ---- receiving ------------------------------------------------------------- */

static size_t iov_total(const struct iovec *iov, int n)
{
	size_t t = 0;
	for (int i = 0; i < n; i++)
		t += iov[i].iov_len;
	return t;
}

/* Copy len bytes between buf and the iovecs from byte off. */
static void iov_copy(const struct iovec *iov, int n, size_t off, uint8_t *buf, size_t len,
		     bool to_iov)
{
	for (int i = 0; i < n && len; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		size_t c = iov[i].iov_len - off < len ? iov[i].iov_len - off : len;
		if (to_iov)
			memcpy((uint8_t *)iov[i].iov_base + off, buf, c);
		else
			memcpy(buf, (uint8_t *)iov[i].iov_base + off, c);
		buf += c;
		len -= c;
		off = 0;
	}
}

/* The channel ended without the peer's 'F': did its TCP connection end
 * cleanly (a close whose 'F' found no room says so with a FIN; so does a
 * process that died, as over TCP)? It may come a moment after the side
 * connection's end: looked at for up to 100 ms. */
static bool tcp_ended(struct zsock *z)
{
	struct pollfd p = { .fd = z->fd, .events = POLLIN | POLLRDHUP };
	char b;
	return zp_real.poll(&p, 1, 100) > 0 &&
	       zp_real.recv(z->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* The peer's next message (rx_lock): 1 a 'D' held in msg, 2 its 'F' came,
 * 0 nothing yet, -ECONNRESET the channel ended without 'F', -EPROTO a
 * malformed message (nothing after it is trusted). */
static int next_msg(struct zsock *z)
{
	struct zx *x = z->xh;
	if (x->msg)
		return 1;
	if (x->fin)
		return 2;
	const uint8_t *b;
	size_t len;
	int r = peek(x, &b, &len);
	if (r == -EAGAIN)
		return 0;
	if (r) {
		ZL_LOG(ZL_LOG_DEBUG, "preload: fd %d (%s): the rdma channel ended without the "
		       "peer's end of stream (%s)", z->fd, x->s->desc, strerror(-r));
		return -ECONNRESET;
	}
	if (len == 1 && b[0] == 'F') {
		zl.release(x->ch);
		x->fin = true;
		return 2;
	}
	if (len < 2 || b[0] != 'D') {
		zl.release(x->ch);
		ZL_LOG(ZL_LOG_WARN, "preload: fd %d (%s): a malformed message from the peer", z->fd,
		       x->s->desc);
		x->fin = true;
		return -EPROTO;
	}
	x->msg = b + 1;
	x->msg_len = len - 1;
	x->msg_off = 0;
	x->rd_in += len - 1;
	return 1;
}

/* Copy the held message's rest out of the ring, so that the next one can
 * be looked at (rx_lock). */
static void spill(struct zx *x)
{
	if (!x->msg || x->sp_off < x->sp_len)
		return;
	size_t need = x->msg_len - x->msg_off;
	if (need > x->sp_cap) {
		uint8_t *b = realloc(x->sp, need);
		if (!b)
			return;
		x->sp = b;
		x->sp_cap = need;
	}
	memcpy(x->sp, x->msg + x->msg_off, need);
	x->sp_len = need;
	x->sp_off = 0;
	zl.release(x->ch);
	x->msg = NULL;
}

/* One look (rx_lock): >0 bytes, 0 end, -EAGAIN nothing now, -errno. */
static ssize_t rx_once(struct zsock *z, const struct iovec *iov, int n, size_t off, size_t want,
		       int flags)
{
	struct zx *x = z->xh;
	gate(z);
	if (x->s->gate == G_OPEN)
		return -EAGAIN;
	if (x->pend_err && !(flags & MSG_PEEK)) {
		int e = x->pend_err;
		x->pend_err = 0;
		return -e;
	}
	if (x->pend_err)
		return -x->pend_err;
	for (int round = 0; round < 3; round++) {
		if (!atomic_load_explicit(&x->s->rx_rdma, memory_order_relaxed)) {
			if (x->s->at_known && x->s->rx_k == x->s->rx_at) {
				if (!own(x)) /* the rest is in another process's channel */
					return -EIO;
				atomic_store(&x->s->rx_rdma, true);
				ZL_LOG(ZL_LOG_DEBUG, "preload: fd %d (%s): receives come over rdma",
				       z->fd, x->s->desc);
				continue;
			}
			uint64_t max = x->s->at_known ? x->s->rx_at - x->s->rx_k : UINT64_MAX;
			struct iovec tmp[64];
			int k = 0;
			size_t o = off, left = want < max ? want : (size_t)max;
			for (int i = 0; i < n && left && k < 64; i++) {
				if (o >= iov[i].iov_len) {
					o -= iov[i].iov_len;
					continue;
				}
				size_t c = iov[i].iov_len - o < left ? iov[i].iov_len - o : left;
				tmp[k].iov_base = (uint8_t *)iov[i].iov_base + o;
				tmp[k++].iov_len = c;
				left -= c;
				o = 0;
			}
			struct msghdr m = { .msg_iov = tmp, .msg_iovlen = (size_t)k };
			ssize_t r = zp_real.recvmsg(z->fd, &m, (flags & MSG_PEEK) | MSG_DONTWAIT);
			if (r > 0) {
				if (!(flags & MSG_PEEK))
					x->s->rx_k += (uint64_t)r;
				return r;
			}
			if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
				if (flags & MSG_PEEK)
					x->pend_err = errno;
				return -errno;
			}
			if (r == 0)
				x->tcp_eof = true;
			look_switch(z);
			if (x->s->at_known && x->s->rx_k == x->s->rx_at)
				continue;
			if (r == 0)
				return x->s->at_known ? -ECONNRESET : 0; /* the end before k: died */
			return -EAGAIN;
		}
		if (!own(x))
			return -EIO;
		if (x->sp_off < x->sp_len) {
			size_t c = x->sp_len - x->sp_off < want ? x->sp_len - x->sp_off : want;
			iov_copy(iov, n, off, x->sp + x->sp_off, c, true);
			if (!(flags & MSG_PEEK))
				x->sp_off += c;
			return (ssize_t)c;
		}
		int t = next_msg(z);
		if (t == 0)
			return -EAGAIN;
		if (t == 2)
			return 0;
		if (t < 0) {
			if (t == -EPROTO)
				return -ECONNRESET;
			if (!x->reset_told && tcp_ended(z)) { /* the end without 'F' */
				x->fin = true;
				return 0;
			}
			if (x->reset_told)
				return 0;
			x->reset_told = true;
			return -ECONNRESET;
		}
		size_t c = x->msg_len - x->msg_off < want ? x->msg_len - x->msg_off : want;
		iov_copy(iov, n, off, (uint8_t *)x->msg + x->msg_off, c, true);
		if (!(flags & MSG_PEEK) && (x->msg_off += c) == x->msg_len) {
			zl.release(x->ch);
			x->msg = NULL;
		}
		return (ssize_t)c;
	}
	return -EAGAIN;
}

static int64_t deadline_of(struct zsock *z, int flags, int64_t t)
{
	if ((flags & MSG_DONTWAIT) || atomic_load_explicit(&z->o->nonblock, memory_order_relaxed))
		return 0;
	return t > 0 ? zl_now_us() + t : ZL_NEVER;
}

/* The setup's wake-up, once it is read (rx_lock): else every sleep on ep
 * would end at once. */
static void drain_ev(struct zx *x)
{
	uint64_t v;
	/* written once: a read per arm after that would be a wasted call */
	if (!x->ev_taken && atomic_load(&x->setup) >= SU_READY && x->evfd >= 0 &&
	    zp_real.read(x->evfd, &v, sizeof(v)) == sizeof(v)) {
		x->ev_taken = true;
		ZL_LOG(ZL_LOG_DEBUG, "preload: %s: the rdma setup ended", x->s->desc);
	}
}

/* Sleep until the socket may have moved (no lock held): the TCP socket or
 * the channel (armed), at most SLICE_US or cap. */
static int nap(struct zsock *z, int64_t deadline, int64_t cap_us, bool arm)
{
	struct zx *x = z->xh;
	if (arm) {
		int a = 0;
		pthread_mutex_lock(&x->rx_lock);
		drain_ev(x);
		bool held = x->msg != NULL;
		if (ch_ok(x) && !held) {
			zp_inside++;
			a = zl.arm(x->ch);
			zp_inside--;
		}
		pthread_mutex_unlock(&x->rx_lock);
		if (a == -EBUSY || held)
			return 0;
	}
	int64_t now = zl_now_us(), end = now + (cap_us < SLICE_US ? cap_us : SLICE_US);
	if (deadline < end)
		end = deadline;
	struct epoll_event ev[2];
	atomic_fetch_add(&z->users, 1);
	int r = zp_real.epoll_pwait(x->ep, ev, 2, zl_poll_ms(end), NULL);
	atomic_fetch_sub(&z->users, 1);
	if (r < 0 && errno == EINTR)
		return -EINTR;
	if (deadline != ZL_NEVER && zl_now_us() >= deadline)
		return -ETIMEDOUT;
	return atomic_load(&x->closed) ? -EBADF : 0;
}

ssize_t zx_recv(struct zsock *z, const struct iovec *iov, int n, int flags)
{
	struct zx *x = z->xh;
	size_t total = iov_total(iov, n), got = 0;
	if (!total)
		return 0;
	setup_start(z);
	int64_t deadline = deadline_of(z, flags, z->o->rcvtimeo_us), spin_end = -1;
	bool all = (flags & MSG_WAITALL) && !(flags & MSG_PEEK);
	for (;;) {
		pthread_mutex_lock(&x->rx_lock);
		ssize_t r = atomic_load(&x->closed) ? -EBADF
						     : rx_once(z, iov, n, got, total - got, flags);
		bool edge = x->tcp_eof && !x->ep_tcp_off &&
			    atomic_load_explicit(&x->s->rx_rdma, memory_order_relaxed);
		if (edge) { /* an ended TCP socket would wake every sleep */
			zp_real.epoll_ctl(x->ep, EPOLL_CTL_DEL, z->fd, NULL);
			x->ep_tcp_off = true;
		}
		bool partial = x->s->gate == G_OPEN && x->partial_since;
		pthread_mutex_unlock(&x->rx_lock);
		if (x->s->gate == G_PROVEN && !pthread_mutex_trylock(&x->tx_lock)) {
			tx_progress(z, false); /* a reader may switch its sends */
			pthread_mutex_unlock(&x->tx_lock);
		}
		if (r > 0) {
			got += (size_t)r;
			if (!all || got == total)
				return (ssize_t)got;
			continue;
		}
		if (r == 0 || (r != -EAGAIN && got))
			return (ssize_t)got;
		if (r != -EAGAIN) {
			errno = (int)-r;
			return -1;
		}
		if ((got && !all) || z->o->rd_shut) /* shut for reading: what came, then 0 */
			return (ssize_t)got;
		if (!deadline) {
			errno = EAGAIN;
			return got ? (ssize_t)got : -1;
		}
		/* a reply over rdma comes within microseconds: spin a while (as
		 * sock.c's waits do) before the arm and the sleep */
		if (zp_spin_us > 0 && atomic_load(&x->s->rx_rdma)) {
			int64_t now = zl_now_us();
			if (spin_end < 0)
				spin_end = now + zp_spin_us;
			if (now < spin_end && now < deadline) {
				for (int i = 0; i < 64; i++)
					zl_cpu_relax();
				continue;
			}
		}
		int w = nap(z, deadline, partial ? 1000 : SLICE_US, true);
		if (w) {
			errno = w == -ETIMEDOUT ? EAGAIN : -w;
			return got ? (ssize_t)got : -1;
		}
	}
}

/* ---- sending ------------------------------------------------------------- */


/* Our sends are still on TCP, the channel's setup runs here and the peer's
 * handshake has come (it runs too): worth a short wait. */
static bool setup_waits(struct zsock *z)
{
	struct zx *x = z->xh;
	if (atomic_load(&x->s->tx_rdma) || atomic_load(&x->setup) != SU_RUNNING ||
	    x->s->gate == G_PLAIN || zl_now_us() >= x->setup_by)
		return false;
	bool peer = false;
	char b;
	pthread_mutex_lock(&x->setup_lock);
	if (atomic_load(&x->setup) == SU_RUNNING && x->side >= 0)
		peer = zp_real.recv(x->side, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 1;
	pthread_mutex_unlock(&x->setup_lock);
	return peer;
}

/* The client's first send waits (bounded) for the server's proof, so that
 * its own proof can still go first and the server may switch too. */
static int first_wait(struct zsock *z, int64_t deadline)
{
	struct zx *x = z->xh;
	if (!deadline) /* a nonblocking send goes now (poll has waited, zx_ready) */
		return 0;
	while (!x->s->server && !x->s->proof_sent && !x->s->tx_k && x->s->gate == G_OPEN &&
	       zl_now_us() < x->s->first_by) {
		pthread_mutex_lock(&x->rx_lock);
		gate(z);
		pthread_mutex_unlock(&x->rx_lock);
		if (x->s->gate != G_OPEN)
			break;
		if (!deadline)
			return -EAGAIN;
		int64_t end = x->s->first_by < deadline ? x->s->first_by : deadline;
		struct pollfd p = { .fd = z->fd, .events = POLLIN | POLLRDHUP };
		int64_t cap = end - zl_now_us();
		if (cap > 1000 && x->partial_since)
			cap = 1000;
		zp_real.poll(&p, 1, cap <= 0 ? 0 : (int)((cap + 999) / 1000));
		if (deadline != ZL_NEVER && zl_now_us() >= deadline)
			return -ETIMEDOUT;
	}
	/* the setup runs at both ends (the peer's handshake is on the side
	 * connection): the first bytes wait for it, bounded, to go over rdma */
	while (setup_waits(z)) {
		if (!deadline)
			return -EAGAIN;
		struct pollfd p = { .fd = x->evfd, .events = POLLIN };
		int64_t end = x->setup_by < deadline ? x->setup_by : deadline;
		int64_t cap = end - zl_now_us();
		zp_real.poll(&p, 1, cap <= 0 ? 0 : (int)((cap + 999) / 1000));
		if (deadline != ZL_NEVER && zl_now_us() >= deadline)
			return -ETIMEDOUT;
	}
	return 0;
}

ssize_t zx_send(struct zsock *z, const struct iovec *iov, int n, int flags)
{
	struct zx *x = z->xh;
	size_t total = iov_total(iov, n), sent = 0;
	if (z->o->wr_shut)
		return zp_epipe(flags);
	setup_start(z);
	int64_t deadline = deadline_of(z, flags, z->o->sndtimeo_us);
	pthread_mutex_lock(&x->tx_lock);
	int w = first_wait(z, deadline);
	if (w) {
		pthread_mutex_unlock(&x->tx_lock);
		errno = w == -ETIMEDOUT ? EAGAIN : -w;
		return -1;
	}
	tx_progress(z, true);
	if (atomic_load(&x->s->tx_rdma) && !own(x)) {
		pthread_mutex_unlock(&x->tx_lock);
		errno = EIO; /* our bytes go through another process's channel */
		return -1;
	}
	if (!atomic_load_explicit(&x->s->tx_rdma, memory_order_relaxed)) {
		struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n };
		ssize_t r = zp_real.sendmsg(z->fd, &m, flags);
		if (r > 0)
			x->s->tx_k += (uint64_t)r;
		else if (errno == EAGAIN || errno == EWOULDBLOCK)
			atomic_fetch_add(&x->tx_full, 1);
		pthread_mutex_unlock(&x->tx_lock);
		return r;
	}
	ssize_t ret;
	for (;;) {
		if (atomic_load(&x->closed)) {
			ret = -EBADF;
			break;
		}
		if (sent == total) {
			ret = (ssize_t)sent;
			break;
		}
		size_t c = total - sent < x->rec_max ? total - sent : x->rec_max;
		void *p;
		zp_inside++;
		int r = zl.reserve(x->ch, 1 + c, &p);
		if (r == -EAGAIN && c > 4096)
			r = zl.reserve(x->ch, 1 + (c = 4096), &p);
		zp_inside--;
		if (r == -EMSGSIZE && x->rec_max > 64) {
			x->rec_max /= 2;
			continue;
		}
		if (!r) {
			*(uint8_t *)p = 'D';
			iov_copy(iov, n, sent, (uint8_t *)p + 1, c, false);
			zp_inside++;
			r = zl.commit(x->ch, 1 + c);
			zp_inside--;
			if (!r) {
				sent += c;
				continue;
			}
		}
		if (r == -EAGAIN && sent) {
			ret = (ssize_t)sent;
			break;
		}
		if (r == -EAGAIN && deadline) {
			zp_inside++;
			r = zl.writable(x->ch, 1 + (c < 4096 ? c : 4096), SLICE_US);
			zp_inside--;
			if (!r || r == -ETIMEDOUT) {
				if (deadline != ZL_NEVER && zl_now_us() >= deadline) {
					ret = -EAGAIN;
					break;
				}
				continue;
			}
		}
		if (r == -EAGAIN) {
			atomic_fetch_add(&x->tx_full, 1);
			ret = -EAGAIN;
			break;
		}
		ZL_LOG(ZL_LOG_DEBUG, "preload: fd %d (%s): send on the rdma channel: %s", z->fd,
		       x->s->desc, strerror(-r));
		ret = sent ? (ssize_t)sent : -EPIPE;
		break;
	}
	pthread_mutex_unlock(&x->tx_lock);
	if (ret == -EPIPE)
		return zp_epipe(flags);
	if (ret < 0) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

/* our end of stream on the channel: 'F' (tx_lock) */
static int send_fin(struct zsock *z, int64_t timeout_us)
{
	struct zx *x = z->xh;
	uint8_t f = 'F';
	zp_inside++;
	int r = zl.send(x->ch, &f, 1, timeout_us);
	zp_inside--;
	return r;
}

int zx_shutdown(struct zsock *z, int how)
{
	struct zx *x = z->xh;
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&x->tx_lock);
	bool rdma = atomic_load(&x->s->tx_rdma);
	if (rdma && !own(x)) {
		pthread_mutex_unlock(&x->tx_lock);
		errno = EIO;
		return -1;
	}
	if (how != SHUT_RD && !z->o->wr_shut) {
		z->o->wr_shut = true;
		if (rdma)
			if (send_fin(z, 5000000)) /* no room for it: the TCP end says it */
				zp_real.shutdown(z->fd, SHUT_WR);
	}
	pthread_mutex_unlock(&x->tx_lock);
	if (how != SHUT_WR)
		z->o->rd_shut = true;
	if (how == SHUT_RD || rdma) /* the TCP socket stays open under the channel */
		return zp_real.fcntl(z->fd, F_GETFD) < 0 ? -1 : 0;
	return zp_real.shutdown(z->fd, SHUT_WR);
}

/* ---- readiness -------------------------------------------------------- */

static bool tcp_writable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	return zp_real.poll(&p, 1, 0) > 0 && (p.revents & (POLLOUT | POLLERR | POLLHUP));
}

short zx_ready(struct zsock *z, short events)
{
	struct zx *x = z->xh;
	short r = 0;
	setup_start(z);
	if ((events & (POLLIN | POLLRDHUP)) && !atomic_load(&x->closed) &&
	    !pthread_mutex_trylock(&x->rx_lock)) {
		gate(z);
		if (x->s->gate != G_OPEN) {
			uint8_t b;
			struct iovec v = { &b, 1 };
			ssize_t k = x->msg || x->sp_off < x->sp_len
					    ? 1 : rx_once(z, &v, 1, 0, 1, MSG_PEEK);
			if (k > 0)
				r |= POLLIN;
			else if (k != -EAGAIN)
				r |= POLLIN | POLLRDHUP;
			/* the end behind the bytes, as the kernel says it */
			if (k > 0 && (events & POLLRDHUP) && !atomic_load(&x->s->rx_rdma)) {
				struct pollfd p = { .fd = z->fd, .events = POLLRDHUP };
				if (zp_real.poll(&p, 1, 0) > 0 && (p.revents & POLLRDHUP))
					r |= POLLRDHUP;
			} else if (k > 0 && (events & POLLRDHUP) && ch_ok(x) &&
				   (!x->msg || x->msg_len - x->msg_off <= 65536)) {
				spill(x);
				if (next_msg(z) == 2)
					r |= POLLRDHUP;
			}
		}
		pthread_mutex_unlock(&x->rx_lock);
		if (x->s->gate == G_PROVEN && !pthread_mutex_trylock(&x->tx_lock)) {
			tx_progress(z, false);
			pthread_mutex_unlock(&x->tx_lock);
		}
	}
	if (z->o->rd_shut)
		r |= POLLIN | POLLRDHUP;
	if ((events & POLLOUT) && !z->o->wr_shut) {
		if (atomic_load(&x->s->tx_rdma) && !own(x)) {
			r |= POLLOUT | POLLERR;
		} else if (atomic_load(&x->s->tx_rdma)) {
			/* what a send takes at least when it finds no room; a sender
			 * busy meanwhile says the same as no room */
			size_t need = 1 + (x->rec_max < 4096 ? x->rec_max : 4096);
			if (!pthread_mutex_trylock(&x->tx_lock)) {
				int w = -EAGAIN;
				if (!atomic_load(&x->closed)) {
					zp_inside++;
					w = zl.writable(x->ch, need, 0);
					zp_inside--;
				}
				pthread_mutex_unlock(&x->tx_lock);
				if (w != -EAGAIN)
					r |= w ? POLLOUT | POLLERR : POLLOUT;
			}
		} else {
			if (!x->s->server && x->s->gate == G_OPEN && !pthread_mutex_trylock(&x->rx_lock)) {
				gate(z);
				pthread_mutex_unlock(&x->rx_lock);
			}
			if (!(x->s->server || x->s->proof_sent || x->s->tx_k || x->s->gate != G_OPEN ||
			      zl_now_us() >= x->s->first_by) || setup_waits(z))
				goto out_w;
			if (tcp_writable(z->fd))
				r |= POLLOUT;
		}
	} else if (events & POLLOUT) {
		r |= POLLOUT; /* as the kernel: writing fails at once */
	}
out_w:
	if ((x->fin || x->tcp_eof) && z->o->wr_shut)
		r |= POLLHUP;
	if (!atomic_load(&x->s->rx_rdma)) { /* input on TCP: its error and hang-up */
		struct pollfd p = { .fd = z->fd, .events = 0 };
		if (zp_real.poll(&p, 1, 0) > 0)
			r |= p.revents & (POLLERR | POLLHUP);
		if (x->pend_err) /* the kernel's error, taken by our peek */
			r |= POLLERR;
	}
	return (short)(r & (events | POLLERR | POLLHUP));
}

int zx_arm(struct zsock *z, short events, short *armed)
{
	struct zx *x = z->xh;
	*armed = 0;
	atomic_fetch_add(&z->users, 1);
	*armed = events;
	if (zx_ready(z, events))
		return ZP_READY;
	int crowded = 0;
	/* no wake-up says "room" or "the proof's rest": look again in 1 ms */
	if (((events & POLLOUT) && (atomic_load(&x->s->tx_rdma) || !x->s->server)) ||
	    x->partial_since)
		crowded = ZP_CROWDED;
	if (events & POLLIN) {
		if (pthread_mutex_trylock(&x->rx_lock))
			return crowded | ZP_CROWDED;
		int a = 0;
		drain_ev(x);
		if (ch_ok(x) && !x->msg) {
			zp_inside++;
			a = zl.arm(x->ch);
			zp_inside--;
		}
		pthread_mutex_unlock(&x->rx_lock);
		if (a == -EBUSY)
			return ZP_READY;
	}
	return crowded;
}

void zx_disarm(struct zsock *z, short armed)
{
	(void)armed;
	atomic_fetch_sub(&z->users, 1);
}

/* SO_ERROR: a TCP error one of our peeks took from the kernel (gate) is
 * the program's, reported once, as the kernel would have (kerr: what the
 * kernel socket says now). */
int zx_so_error(struct zsock *z, int kerr)
{
	struct zx *x = z->xh;
	if (kerr)
		return kerr;
	pthread_mutex_lock(&x->rx_lock);
	int e = x->pend_err;
	x->pend_err = 0;
	pthread_mutex_unlock(&x->rx_lock);
	return e;
}

int zx_kfd(struct zsock *z)
{
	return z->xh->ep;
}

int zx_fionread(struct zsock *z)
{
	struct zx *x = z->xh;
	int k = 0;
	pthread_mutex_lock(&x->rx_lock);
	if (x->msg) {
		k = (int)(x->msg_len - x->msg_off);
	} else if (!atomic_load(&x->s->rx_rdma) && x->s->gate != G_OPEN) {
		if (zp_real.ioctl(z->fd, FIONREAD, &k) || k < 0)
			k = 0;
		if (x->s->at_known && (uint64_t)k > x->s->rx_at - x->s->rx_k)
			k = (int)(x->s->rx_at - x->s->rx_k);
	}
	pthread_mutex_unlock(&x->rx_lock);
	return k;
}

size_t zx_tx_room(struct zsock *z)
{
	struct zx *x = z->xh;
	if (!atomic_load(&x->s->tx_rdma))
		return SIZE_MAX;
	pthread_mutex_lock(&x->tx_lock);
	int w = -EAGAIN;
	if (!atomic_load(&x->closed)) {
		zp_inside++;
		w = zl.writable(x->ch, 4097, 0);
		zp_inside--;
	}
	pthread_mutex_unlock(&x->tx_lock);
	return w ? 0 : 4096;
}

/* ---- the end ---------------------------------------------------------- */

/* What the channel cost, at close (info level): the verbs work per
 * message of a real program. */
static void say_counts(struct zsock *z, struct zx *x)
{
	struct zl_channel_info in;
	if (!zl.info || zl_log_level_active < ZL_LOG_INFO || zl.info(x->ch, &in))
		return;
	ZL_LOG(ZL_LOG_INFO, "preload: fd %d (%s): rdma channel at close: %llu messages sent, "
	       "%llu received; %llu work requests in %llu posts (%llu signaled), %llu receives "
	       "posted, %llu wake-ups sent, %llu arms, %llu sleeps", z->fd, x->s->desc,
	       (unsigned long long)in.msgs_sent, (unsigned long long)in.msgs_recv,
	       (unsigned long long)in.verbs.wr_posted, (unsigned long long)in.verbs.post_calls,
	       (unsigned long long)in.verbs.wr_signaled,
	       (unsigned long long)in.verbs.recv_post_calls, (unsigned long long)in.wakeups_sent,
	       (unsigned long long)in.arms, (unsigned long long)in.sleeps);
}

/* The program's last fd for it closed: our end of stream on the channel,
 * then the channel (the peer sees its side connection end with the TCP
 * connection, which the caller closes next). A forked child never touches
 * a channel its parent set up. */
void zx_closed(struct zsock *z)
{
	struct zx *x = z->xh;
	atomic_fetch_sub(&x->s->holders, 1);
	if (x->mem >= 0) { /* the mapping stays for racing threads; the fd goes */
		zp_real.close(x->mem);
		x->mem = -1;
	}
	if (!own(x)) { /* nothing of a channel here: our fds only */
		pthread_mutex_lock(&x->setup_lock);
		atomic_store(&x->closed, true);
		if (x->side >= 0 && atomic_load(&x->setup) == SU_NONE) {
			zp_real.close(x->side);
			x->side = -1;
		}
		if (atomic_load(&z->users) == (int)x->thread_alive) {
			zp_real.close(x->ep);
			zp_real.close(x->evfd);
			x->ep = x->evfd = -1;
		}
		pthread_mutex_unlock(&x->setup_lock);
		return;
	}
	/* Bytes we leave unread in the channel: TCP would answer with a reset,
	 * and so do we (unread TCP bytes make the kernel do it), as for a
	 * program's abortive close (SO_LINGER 0 s, already on the TCP socket).
	 * The peer's proof is no such byte. A process that never used the
	 * socket is handing it to another (fork-per-connection servers): it
	 * looks at nothing. */
	bool unread = false;
	pthread_mutex_lock(&x->tx_lock);
	pthread_mutex_lock(&x->rx_lock);
	if (x->used) {
		gate(z);
		unread = zp_linger_abort(z->fd) || x->msg || x->sp_off < x->sp_len ||
			 (atomic_load(&x->s->rx_rdma) && ch_ok(x) && next_msg(z) == 1);
	}
	atomic_store(&x->closed, true);
	if (atomic_load(&x->s->tx_rdma) && !z->o->wr_shut && !unread)
		if (send_fin(z, 100000)) /* the ring stays full: the TCP end says it */
			zp_real.shutdown(z->fd, SHUT_WR);
	if (unread) {
		struct linger l = { 1, 0 };
		zp_real.setsockopt(z->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	}
	pthread_mutex_lock(&x->setup_lock);
	if (atomic_load(&x->ready)) {
		if (x->msg)
			zl.release(x->ch);
		x->msg = NULL;
		zp_inside++;
		say_counts(z, x);
		zl.close(x->ch);
		zp_inside--;
		x->ch = NULL;
		atomic_store(&x->ready, false);
	} else if (x->side >= 0 && atomic_load(&x->setup) == SU_NONE) {
		zp_real.close(x->side);
		x->side = -1;
	} else if (x->side >= 0) { /* a running setup ends at once, and sees closed */
		zp_real.shutdown(x->side, SHUT_RDWR);
	}
	x->ch_dead = true;
	if (atomic_load(&z->users) == (int)x->thread_alive) { /* else freed with the zsock */
		zp_real.close(x->ep);
		zp_real.close(x->evfd);
		x->ep = x->evfd = -1;
	}
	pthread_mutex_unlock(&x->setup_lock);
	pthread_mutex_unlock(&x->rx_lock);
	pthread_mutex_unlock(&x->tx_lock);
}

/* No thread uses it any more (bury). */
void zx_free(struct zsock *z)
{
	struct zx *x = z->xh;
	if (atomic_load(&x->ready) && own(x)) {
		zp_inside++;
		zl.close(x->ch);
		zp_inside--;
	}
	munmap(x->s, sizeof(*x->s));
	if (x->mem >= 0)
		zp_real.close(x->mem);
	if (x->side >= 0)
		zp_real.close(x->side);
	if (x->ep >= 0)
		zp_real.close(x->ep);
	if (x->evfd >= 0)
		zp_real.close(x->evfd);
	free(x->sp);
	pthread_mutex_destroy(&x->rx_lock);
	pthread_mutex_destroy(&x->tx_lock);
	pthread_mutex_destroy(&x->setup_lock);
	free(x);
	z->xh = NULL;
	pthread_mutex_destroy(&z->lock);
	zp_own_free(z->o, false);
	free(z);
}

/* fork (sock.c, once per socket, before it: the parent may close its copy
 * before the child runs a line; d -1 if the fork failed) */
void zx_fork_count(struct zsock *z, int d)
{
	atomic_fetch_add(&z->xh->s->holders, d);
}

/* fork: the owner (a pid in the shared state) keeps its channel; a socket
 * nobody owns yet goes to the process that uses it first once it is the
 * only holder (setup_start). */
void zx_atfork_child(struct zsock *z)
{
	struct zx *x = z->xh;
	pthread_mutex_init(&x->rx_lock, NULL);
	pthread_mutex_init(&x->tx_lock, NULL);
	pthread_mutex_init(&x->setup_lock, NULL);
}

/* EPOLLET (wait.c): marks that move when bytes arrive, and when a send
 * found no room. */
uint64_t zx_rx_mark(struct zsock *z)
{
	struct zx *x = z->xh;
	pthread_mutex_lock(&x->rx_lock);
	if (ch_ok(x) && !atomic_load(&x->closed)) {
		if (!atomic_load(&x->s->rx_rdma))
			look_switch(z);
		if (atomic_load(&x->s->rx_rdma) || x->s->at_known) {
			spill(x);
			next_msg(z); /* the peer's next message counts as arrived */
		}
	}
	uint64_t m = x->rd_in + x->fin + x->s->rx_k;
	int k = 0;
	if (!atomic_load(&x->s->rx_rdma) && !zp_real.ioctl(z->fd, FIONREAD, &k) && k > 0)
		m += (uint64_t)k;
	pthread_mutex_unlock(&x->rx_lock);
	return m;
}

uint64_t zx_tx_mark(struct zsock *z)
{
	return atomic_load(&z->xh->tx_full);
}

/* ---- exec ---------------------------------------------------------------- */

int zx_exec_entry(struct zsock *z, int fd, char *e, size_t cap, int *mem, int *side)
{
	struct zx *x = z->xh;
	*mem = *side = -1;
	if (zp_real.fcntl(x->mem, F_SETFD, 0))
		return 0;
	*mem = x->mem;
	int sd = -1; /* the side connection, for a setup nobody began */
	if (x->side >= 0 && atomic_load(&x->setup) == SU_NONE && !zp_real.fcntl(x->side, F_SETFD, 0))
		*side = sd = x->side;
	return snprintf(e, cap, "X%d:%d:%d;", fd, x->mem, sd);
}

void zx_exec_adopt(const char *st)
{
	int fd, mem, side;
	if (sscanf(st, "%d:%d:%d;", &fd, &mem, &side) != 3 || fd < 0 || mem < 0)
		return;
	struct zx_sh *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED, mem, 0);
	if (sh == MAP_FAILED || sh->magic != SH_MAGIC || sh->version != XH_VERSION) {
		ZL_LOG(ZL_LOG_ERROR, "preload: cannot adopt cross-host fd %d after exec", fd);
		if (sh != MAP_FAILED)
			munmap(sh, sizeof(*sh));
		return;
	}
	/* a channel this pid owned went with the old image: nobody's now */
	int32_t me = my_pid;
	atomic_compare_exchange_strong(&sh->owner, &me, -1);
	if (side >= 0 && atomic_load(&sh->owner) != 0) {
		zp_real.close(side);
		side = -1;
	}
	struct zsock *z = zx_wrap(fd, high(side), high(mem), sh);
	if (!z)
		return;
	atomic_store(&z->o->nonblock, (zp_real.fcntl(fd, F_GETFL) & O_NONBLOCK) != 0);
	zp_adopt(fd, z);
}
