/* SPDX-License-Identifier: MIT */
/* libzipline-preload internals: see sock.c for the design. */
#ifndef ZP_PRELOAD_H
#define ZP_PRELOAD_H

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/single_threaded.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "log.h"
#include "wire.h"

#define ZP_UNLATCHED UINT64_MAX

/* ---- the real libc calls (intercept.c) ---------------------------------- */

struct zp_real {
	int (*socket)(int, int, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	int (*listen)(int, int);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*close)(int);
	int (*shutdown)(int, int);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*send)(int, const void *, size_t, int);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
	int (*epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
	int (*fcntl)(int, int, ...);
	int (*ioctl)(int, unsigned long, ...);
	int (*dup)(int);
	int (*dup3)(int, int, int);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	ssize_t (*splice)(int, loff_t *, int, loff_t *, size_t, unsigned);
	ssize_t (*sendfile)(int, int, off_t *, size_t);
};
extern struct zp_real zp_real;
extern int zp_spin_us;     /* ZL_PRELOAD_SPIN_US: spin before sleeping */
extern uint32_t zp_ring;   /* ZL_PRELOAD_RING: bytes per direction */
extern bool zp_allow_other_uid;

/* ---- shared memory: one memfd per connection, made by the client ------- */

#define ZP_MAGIC 0x5a4c5052u /* "ZLPR" */
#define ZP_VERSION 6
#define ZP_BACK 2 /* a direction's state: back on the kernel stream (tx.c) */
#define ZP_HDR 4096

/* One direction. The sender owns tail, state, kbytes, closed and
 * tx_sleeping; the receiver owns head and rx_sleeping. A sleeping count is
 * the number of threads asleep for that end's condition; its kick is set
 * by the other end when it sends a wake-up, and cleared by sleepers before
 * they arm, so that one wake-up serves every store until then. */
struct zp_dir {
	_Atomic uint64_t tail;        /* bytes ever written into the ring */
	_Atomic uint64_t kbytes;      /* bytes sent on the kernel stream first */
	_Atomic uint32_t state;       /* 0: kernel stream; 1: the ring, after kbytes;
				       * 2: the kernel stream again (ZP_BACK) */
	_Atomic uint32_t closed;      /* the sender sends no more (EOF after the data) */
	_Atomic uint32_t tx_sleeping; /* senders waiting for room */
	_Atomic uint32_t tx_kick;
	_Atomic uint64_t back_tail;   /* state 2: the ring ends here */
	_Atomic uint64_t kresume;     /* state 2: kernel bytes (data, then wake-ups)
				       * before the kernel stream's data resumes */
	_Atomic uint64_t wakes;       /* wake-up bytes sent on the kernel stream */
	_Atomic uint32_t wr_shut;     /* the sender shut its sending side, on the
				       * ring or (after state 2) the kernel stream */
	_Atomic uint32_t shut_calls;  /* Unix: the sender's shutdown calls: each
				       * wakes the receiver's waiters (an EPOLLET
				       * edge, as Linux's unix_shutdown) */
	_Atomic uint64_t head;        /* bytes ever consumed */
	_Atomic uint32_t rx_sleeping; /* receivers asleep on their socket */
	_Atomic uint32_t rx_kick;
	_Atomic uint32_t rd_shut;     /* the receiver shut its reading side: on a
				       * Unix socket the sender's sends fail (EPIPE);
				       * on TCP its data resets once the receiver
				       * shut its sending side too */
	_Atomic uint32_t krd_shut;    /* ... and its kernel socket's too (both ways
				       * back): the kernel's rules then hold for
				       * data on the kernel stream */
	char pad1[64 - 24];
};

_Static_assert(sizeof(struct zp_dir) == 128, "struct zp_dir: two cache lines, one per end");

struct zp_shared {
	uint32_t magic, version, ring_size, hdr_size; /* the client's, read once */
	_Atomic uint32_t joined;    /* the server mapped them and answered: only a
				     * hint to the client (rendezvous.c) */
	_Atomic uint32_t client_ok; /* the client proved the server: the server's
				     * sends may move to the ring */
	_Atomic uint32_t gone[2];   /* the side's last copy closed */
	_Atomic uint32_t reset[2];  /* ... with bytes unread: the peer gets ECONNRESET */
	_Atomic int32_t unused[2];  /* (was each side's count of its processes:
				     * now its own, struct zp_own) */
	_Atomic uint32_t urg_reset[2]; /* TCP: the length of the urgent send (its
					* last byte the urgent one) whose byte met the peer's
					* reset (zp_peer_refuses_data): the peer's
					* kernel took its mark before resetting */
	char pad[64 - 56];
	struct zp_dir dir[2];     /* 0: client to server, 1: server to client */
};

/* A client's proof of its server, in memory its forks share and its peer
 * does not: ZP_PENDING until one of them proves the answer or gives up. */
enum { ZP_PENDING, ZP_PROVEN, ZP_GAVE_UP };
struct zp_family {
	_Atomic uint32_t state;
};

/* ---- a zipline socket in this process --------------------------------- */

/* ---- one side's own state: every process that holds it shares it -------- */

/*
 * A socket is one object in the kernel however many processes hold it
 * (fork, exec): an error it told once, where its streams stand, its flags
 * and options are the same for every holder. The preload keeps them here,
 * in a page of a memfd of the side's own, which fork inherits and exec is
 * given (ZL_PRELOAD_FDS), and which never goes to the peer: nothing in it
 * is the peer's word. Its locks make each read and each ring write one
 * step against every other holder's, as the kernel's socket lock does;
 * they are taken only when another thread or process may call too
 * (zp_shared_use), and held only while a call copies, never while it
 * sleeps. A holder that dies holding one leaves it to the next (robust).
 */
#define ZP_OWN_MAGIC 0x4e574f5au /* "ZOWN" */
#define ZP_WR_ENDS 64
struct zp_own {
	uint32_t magic;
	_Atomic int32_t procs;    /* processes holding the side: +1 at a fork,
				   * -1 at a process's last close */
	pthread_mutex_t rx_lock;  /* reads (the ring's head, the kernel stream's
				   * data and wake-ups) */
	_Atomic int32_t sleepers; /* threads of every holder asleep on it (zp_arm):
				   * with more than one the wake-up bytes stay
				   * for them (ZP_CROWDED); a holder killed asleep
				   * leaves them at 1 ms looks, never stuck */
	_Atomic uint64_t rx_k;    /* kernel bytes consumed (receiving) */
	_Atomic uint64_t tx_k;    /* kernel bytes sent (before our switch; written
				   * under lock, read by exec and the switch) */
	_Atomic bool tx_ring;     /* our sends use the ring */
	_Atomic bool peer_eof;    /* the kernel stream ended */
	_Atomic bool nonblock;    /* O_NONBLOCK of the file */
	bool wr_shut, rd_shut;
	bool reset_told;          /* ECONNRESET is reported once, then EOF */
	bool gone_sent;           /* TCP: we sent to a closed peer (its kernel
				   * would reset us: EPIPE from then on) */
	int so_err;               /* a pending error for SO_ERROR (EPIPE) */
	_Atomic int kerr_held;    /* the kernel socket's error, taken by a read
				   * of ours that had bytes already: the
				   * kernel's read would have left it pending
				   * (zp_hold_kerr) */
	_Atomic bool lied;        /* the peer lied: reset_seen, kernel shut */
	_Atomic uint32_t own_wakes; /* our calls that wake the socket's waiters
				     * (shutdown, also one that fails with
				     * ENOTCONN): each an EPOLLET edge */
	_Atomic uint32_t tx_fulls; /* sends that found the ring full (TCP wakes
				    * an edge-triggered writer only after one) */
	_Atomic uint64_t wr_count; /* Unix: our writes to the ring, and where */
	_Atomic uint64_t wr_ends[ZP_WR_ENDS]; /* the last ones end (by count): each
				    * is a buffer of the kernel's, and a read of
				    * the peer's that frees one wakes an
				    * edge-triggered writer (epoll.c) */
	/* back on the kernel stream (tx.c: for fd passing, urgent data) */
	bool tx_back;             /* our sends went back */
	_Atomic bool krd_shut;    /* our SHUT_RD given to the kernel too */
	_Atomic bool back_done;   /* and the peer's: a kernel socket again */
	_Atomic bool peer_back;   /* the peer's did: ours follow */
	_Atomic uint64_t rx_bt, rx_kr; /* its back_tail and kresume, read once
				   * (ZP_UNLATCHED before) */
	_Atomic uint64_t rx_w;    /* wake-up bytes of its kernel stream consumed */
	_Atomic int wake_inflight; /* our wake-ups being sent (tx.c) */
	pthread_mutex_t tx_lock;  /* ring writes against each other and the way
				   * back */
	int app_nodelay;          /* TCP_NODELAY as the program set it (the kernel
	                           * socket has it on: a wake-up must not wait for
	                           * Nagle and a delayed ACK, 40 ms) */
	int64_t rcvtimeo_us, sndtimeo_us; /* 0: none */
	/* what the peer wrote, as first read (peer.c): never read again */
	_Atomic uint64_t rx_kb;   /* its kbytes once its state said 1, or
				   * ZP_UNLATCHED */
	_Atomic bool reset_seen;  /* its reset, or a lie of its: ECONNRESET */
	_Atomic int reset_err;    /* the errno it leaves, fixed when first seen
				   * (zp_reset_err) */
	_Atomic bool closed_seen; /* its end of stream, after closed_tail bytes */
	_Atomic uint64_t closed_tail;
};

struct zsock {
	pthread_mutex_t lock;     /* switching, closing; not the data path */
	int refs;                 /* fds of this process that name it (dup) */
	int side;                 /* 0 client, 1 server */
	int fd;                   /* one fd naming it, for wake-ups */
	struct zp_own *o;         /* the side's own state, which every holder
				   * shares (fork, exec) */
	int own_fd;               /* its memfd (for exec), close-on-exec; -1
				   * across hosts, and once closed (bury) */
	struct zp_shared *sh;
	size_t map_len;
	uint8_t *ring[2];
	struct zp_dir *tx, *rx;
	uint8_t *txr, *rxr;
	uint32_t size;
	bool is_unix;             /* AF_UNIX: HUP as soon as the peer is gone */
	/* a Unix peer's name (recvfrom's address), asked of the kernel once:
	 * fixed at connect; 0 until known */
	_Atomic int peer_name_len;
	struct sockaddr_storage peer_name;
	uint32_t sends;           /* a liveness look every 64 sends */
	int64_t next_look;
	_Atomic int users;        /* threads asleep with it: freed after them */
	int64_t dead_at;          /* closed: freed a while after (see bury) */
	struct zsock *grave_next;
	int hello_fd;             /* the rendezvous connection, until joined */
	int mem;                  /* the memfd (for exec), close-on-exec */
	/* the client until it proved the server (rendezvous.c): nothing the
	 * rings say is believed; both directions stay on the kernel stream */
	_Atomic bool pending;
	struct zp_family *fam;    /* the proof, shared by our forks only */
	_Atomic bool trusted;     /* fam says proven (or we are the server) */
	int64_t join_until;       /* then the answer is given up */
	_Atomic unsigned pend_calls;
	struct zp_wire *named;    /* the processes the answers name */
	int nnamed;
	_Atomic bool joined_seen; /* the server: the client proved us */
	struct zx *xh;            /* across hosts (xhost.c): the rdma channel; then
				   * sh is NULL and every call goes to xhost.c */
};

/* one side's own state (own.c) */
#define ZP_OWN_LOCK_S 10
struct zp_own *zp_own_new(int *fd);  /* a memfd's page (*fd), or the process's
				      * alone (fd NULL); NULL: no memory */
struct zp_own *zp_own_map(int fd);   /* after exec */
void zp_own_free(struct zp_own *o, bool shared); /* (its fd is the caller's) */
int zp_own_lock(pthread_mutex_t *m); /* 0, or -EAGAIN after ZP_OWN_LOCK_S */
bool zp_own_trylock(pthread_mutex_t *m); /* taken now, or false */
void zp_own_unlock(pthread_mutex_t *m);
/* another thread or process of ours may call on the side now */
static inline bool zp_shared_use(struct zsock *z)
{
	return !__libc_single_threaded ||
	       atomic_load_explicit(&z->o->procs, memory_order_relaxed) > 1;
}

/* fd table (sock.c) */
bool zp_vforked(void); /* a vfork child on our memory: leave our table alone */
void zp_pid_init(void); /* (at the preload's start) */
struct zsock *zp_get(int fd);
void zp_set(int fd, struct zsock *z);
void zp_adopt(int fd, struct zsock *z); /* a new switched socket: zp_set, and
					 * its kernel socket set up for wake-ups */
void zp_forget(int fd); /* fd no longer names its zsock (close, dup2 over) */
bool zp_linger_abort(int fd); /* SO_LINGER on with 0 s: close resets (TCP) */
int zp_so_error(struct zsock *z, int kerr); /* SO_ERROR: the peer's reset once */
void zp_hold_kerr(struct zsock *z, int err); /* a kernel error a read took late */
int zp_take_kerr(struct zsock *z);          /* it, once (0: none) */

/* What the peer wrote, checked (peer.c): a client trusts nothing in its
 * rings before it proved the server (rendezvous.c) */
static inline bool zp_trusted(struct zsock *z)
{
	if (__builtin_expect(atomic_load_explicit(&z->trusted, memory_order_relaxed), 1))
		return true;
	if (!z->fam || atomic_load_explicit(&z->fam->state, memory_order_acquire) != ZP_PROVEN)
		return false;
	atomic_store_explicit(&z->trusted, true, memory_order_relaxed);
	return true;
}
void zp_lie(struct zsock *z, const char *what); /* the peer lied: the connection ends */
bool zp_peer_reset(struct zsock *z);   /* its reset, or a lie: sticky */
bool zp_peer_closed(struct zsock *z);  /* its end of stream, with its final tail */
bool zp_peer_gone(struct zsock *z);    /* its side closed for good */
bool zp_peer_rd_shut(struct zsock *z); /* a Unix peer shut its reading side */
bool zp_peer_wr_shut(struct zsock *z);      /* it sends no more */
bool zp_peer_fin(struct zsock *z);          /* ... by a shutdown */
bool zp_peer_urg_reset(struct zsock *z);    /* its urgent byte met our reset */
uint32_t zp_peer_urg_off(struct zsock *z);  /* ... after this many bytes */
void zp_kernel_failed(struct zsock *z, int err); /* its reset, told by a kernel call */
int zp_kerr_once(struct zsock *z, int kerr);   /* a kernel error, or 0: the played reset told */
int zp_reset_err(struct zsock *z);          /* the peer's reset's errno */
/* wr_shut, which another thread's shutdown may set (zp_shutdown) */
static inline bool zp_wr_shut(struct zsock *z)
{
	return __atomic_load_n(&z->o->wr_shut, __ATOMIC_ACQUIRE);
}
bool zp_peer_fin_first(struct zsock *z);    /* its FIN came before its reset */
bool zp_peer_refuses_data(struct zsock *z); /* a TCP peer shut both ways: our
					     * data resets the connection */
uint64_t zp_rx_switch(struct zsock *z); /* its kbytes once switched, or ZP_UNLATCHED */
bool zp_rx_left(struct zsock *z, uint64_t *left); /* input still on the kernel stream,
						      * *left bytes of it */
int64_t zp_rx_avail(struct zsock *z);  /* bytes in its ring, -1: a lie */
int64_t zp_tx_free(struct zsock *z);   /* room in ours, -1: a lie */

/* between sock.c, rx.c and tx.c */
void zp_notify(struct zsock *z, _Atomic uint32_t *sleeping, _Atomic uint32_t *kick);
#define NOTIFY_RX(z) zp_notify((z), &(z)->tx->rx_sleeping, &(z)->tx->rx_kick)
#define NOTIFY_TX(z) zp_notify((z), &(z)->rx->tx_sleeping, &(z)->rx->tx_kick)
void zp_switch_tx(struct zsock *z); /* our sends move to the ring (under z->lock) */
/* our sends go back to the kernel stream, losslessly (under z->lock) */
void zp_switch_back(struct zsock *z);
bool zp_rx_back(struct zsock *z); /* the peer's sends went back (read once) */
void zp_skip_wakes(struct zsock *z); /* its wake-ups before its data resumes */
uint64_t zp_wakes_due(struct zsock *z); /* ... of them still to consume */
void zp_back_done(struct zsock *z); /* both ways back and drained: a kernel socket */
void zp_kernel_rd_shut(struct zsock *z); /* both ways back: the kernel keeps our
					  * SHUT_RD (under z->lock) */
void zp_ring_copy(uint8_t *ring, uint32_t size, uint64_t pos, const struct iovec *iov, int n,
		  size_t off, size_t len, bool to_ring);
int zp_iov_sub(const struct iovec *iov, int n, size_t off, size_t max, struct iovec *tmp);
int64_t zp_deadline_of(struct zsock *z, int flags, bool rx);

/* the data path (sock.c): results as the libc calls, errno set */
ssize_t zp_recv(struct zsock *z, const struct iovec *iov, int n, int flags);
/* with the caller's control buffer m (msg_control, msg_controllen in and
 * out, msg_flags out): ancillary data comes with kernel stream bytes only */
ssize_t zp_recvmsg(struct zsock *z, const struct iovec *iov, int n, struct msghdr *m, int flags);
ssize_t zp_send(struct zsock *z, const struct iovec *iov, int n, int flags);
/* total bytes a TCP peer's reset drops (zp_peer_refuses_data): total the
 * first time, then -1 EPIPE */
ssize_t zp_send_dropped(struct zsock *z, size_t total, int flags);
/* a send after our SHUT_WR or a Unix peer's SHUT_RD: -1, the peer's reset
 * once (TCP), then EPIPE */
ssize_t zp_send_shut(struct zsock *z, int flags);
/* with ancillary data (ctl, ctllen: fds, credentials) or MSG_OOB, which
 * send our direction back to the kernel stream (zp_switch_back) */
ssize_t zp_sendmsg(struct zsock *z, const struct iovec *iov, int n, const void *ctl, size_t ctllen,
		   int flags);
ssize_t zp_epipe(int flags); /* EPIPE, and SIGPIPE unless MSG_NOSIGNAL */
int zp_shutdown(struct zsock *z, int how);
int zp_fionread(struct zsock *z);
size_t zp_tx_room(struct zsock *z); /* what a send takes now; SIZE_MAX: kernel */
/* readiness without waiting: POLLIN/OUT/RDHUP/HUP as the kernel would say */
short zp_ready(struct zsock *z, short events);
/* Before sleeping on the socket: ask the peer for a wake-up (*armed: what
 * was asked for). Returns ZP_READY if the socket is ready meanwhile (do not
 * sleep), ZP_CROWDED if another thread of ours sleeps on it already: its
 * wake-ups stay undrained for it, so we sleep without POLLIN for at most
 * 1 ms at a time instead (zp_drain drains only when no other thread is
 * armed). zp_disarm after the sleep. */
#define ZP_READY 1
#define ZP_CROWDED 2
int zp_arm(struct zsock *z, short events, short *armed);
void zp_disarm(struct zsock *z, short armed);
/* the socket turned readable while switched: read wake-ups (unless
 * another thread is armed), notice EOF */
void zp_drain(struct zsock *z);
/* after the kernel stream's end: is the peer's socket closed for good? (a
 * wake-up byte to it fails, or makes it answer with a reset) */
bool zp_probe(struct zsock *z);
/* the peer's bytes still come on the kernel stream (sent before its switch) */
bool zp_rx_on_kernel(struct zsock *z);
/* the switch that waits for the other end (sock.c: zp_poll_join) */
void zp_poll_join(struct zsock *z);
/* a client not joined yet stays a kernel socket for good; true if z was
 * one (fd passing: a kernel socket can be passed) */
bool zp_give_up(struct zsock *z);
void zp_fork_prepare(void);
void zp_fork_failed(void);
void zp_atfork_child(void);

/* splice and sendfile with a switched socket at one end (splice.c) */
ssize_t zp_splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len, unsigned flags);
ssize_t zp_sendfile(int out, int in, off_t *off, size_t count);

/* exec: hand switched sockets to the new image (sock.c) */
char *zp_exec_state(bool keep); /* "ZL_PRELOAD_FDS=..." (malloc) or NULL */
void zp_exec_failed(void);      /* undo zp_exec_state */
void zp_exec_adopt(const char *state);

/* rendezvous (rendezvous.c) */
struct zsock *zp_map(int mem, uint32_t ring, int side, int own); /* own: the
								   * side's memfd after exec, -1 a new one */
void zp_listen_publish(int fd);
struct zsock *zp_connect_offer(int fd, const struct sockaddr *a, socklen_t len);
extern __thread const char *zp_no_switch; /* why zp_connect_offer offered
					  * nothing for a local address (no
					  * preloaded listener there, another
					  * uid's), or NULL */
void zp_fell_back(int fd, const char *why); /* a connection stays a kernel socket:
					     * one warn line per process, then info */
void zp_connect_done(struct zsock *z, int ok);
struct zsock *zp_accept_match(int lfd, int fd);
void zp_listen_close(int fd);
/* the client's proof of the answer, under z->lock: 1 proven, 0 not yet,
 * -1 none will come */
int zp_client_join(struct zsock *z);
void zp_name_child(struct zsock *z, int fd); /* fork: the child names itself */
void zp_join_free(struct zsock *z);          /* what a join kept */

/* proofs (proof.c) */
uint64_t zp_ino(int fd);       /* a socket's inode, 0 if fd is none */
uint64_t zp_other_end(int fd); /* the other end's, if on this host; else 0 */
/* pid holds sockets ino1 at fd1 and ino2 at fd2, now */
bool zp_holds(int32_t pid, int fd1, uint64_t ino1, int fd2, uint64_t ino2);

/* across hosts (xhost.c): the same calls for a socket with z->xh */
extern __thread int zp_inside; /* > 0: our own calls into the zipline library */
void zx_config(void);
void zx_listen_publish(int fd);
void zx_listen_close(int fd);
struct zsock *zx_accept_match(int lfd, int fd);
struct zsock *zx_connect_offer(int fd, const struct sockaddr *a, socklen_t len);
void zx_connect_failed(struct zsock *z);
ssize_t zx_recv(struct zsock *z, const struct iovec *iov, int n, int flags);
ssize_t zx_send(struct zsock *z, const struct iovec *iov, int n, int flags);
int zx_shutdown(struct zsock *z, int how);
short zx_ready(struct zsock *z, short events);
int zx_arm(struct zsock *z, short events, short *armed);
void zx_disarm(struct zsock *z, short armed);
int zx_kfd(struct zsock *z); /* the fd to sleep on instead of the socket */
int zx_so_error(struct zsock *z, int kerr); /* SO_ERROR: a peek's error, once */
int zx_fionread(struct zsock *z);
size_t zx_tx_room(struct zsock *z);
void zx_closed(struct zsock *z); /* the last fd closed */
void zx_free(struct zsock *z);
void zx_atfork_child(struct zsock *z);
void zx_fork_count(struct zsock *z, int d);
void zp_leave(void); /* sock.c: a process leaving closes its switched sockets */
uint64_t zx_rx_mark(struct zsock *z);
/* exec: "X<fd>:<mem>:<side>;" into e, the two fds kept open across it
 * (*mem, *side: to close again on failure); the new image adopts it */
int zx_exec_entry(struct zsock *z, int fd, char *e, size_t cap, int *mem, int *side);
void zx_exec_adopt(const char *entry);
uint64_t zx_tx_mark(struct zsock *z);
/* the fd the kernel waits on for socket fd */
static inline int zp_kfd(struct zsock *z, int fd) { return z && z->xh ? zx_kfd(z) : fd; }

/* clients that gave up their join so far (sock.c), for epoll sets */
extern _Atomic unsigned zp_gave_up;
/* where the socket handed back to the kernel at fd stood: the peer's ring
 * tail, its own_wakes and its kernel shutdowns since (false: not known) */
bool zp_left_of(int fd, uint64_t *rtail, uint32_t *wakes);
void zp_left_wake(int fd); /* a kernel shutdown at fd */

/* what zl-ss lists (publish.c): fd's switched socket, or why fd stays a
 * kernel socket */
void zp_pub_socket(int fd, struct zsock *z);
void zp_pub_kernel(int fd, const char *why);

/* waiting (wait.c) */
int zp_poll(struct pollfd *fds, nfds_t n, int64_t timeout_us, const sigset_t *mask);
int zp_epoll_ctl(int ep, int op, int fd, struct epoll_event *ev);
int zp_epoll_wait(int ep, struct epoll_event *evs, int max, int timeout_ms,
		  const sigset_t *mask);
void zp_epoll_close(int fd);
void zp_epoll_follow(int fd, struct zsock *z); /* fd switched in connect */
/* wait for the socket (events) until deadline (ZL_NEVER); 0 or -errno */
int zp_wait_one(struct zsock *z, short events, int64_t deadline);

#endif
