/* SPDX-License-Identifier: MIT */
/*
 * The libc calls the preload takes over. Each one hands a switched socket
 * to sock.c or wait.c and everything else to the real call, found with
 * dlsym(RTLD_NEXT). The preload is off (every call is the real one) in
 * setuid and setgid programs (AT_SECURE) and with ZL_PRELOAD=0.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/close_range.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload.h"
#include "status.h"

#define EXPORT __attribute__((visibility("default")))

struct zp_real zp_real;
int zp_spin_us = 50;
uint32_t zp_ring = 256 * 1024; /* see zl-run(1) */
bool zp_allow_other_uid;
static bool disabled;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void leave_at_exit(void)
{
	if (!disabled)
		zp_leave();
}

static void resolve(void)
{
	zp_pid_init();
#define R(f) zp_real.f = dlsym(RTLD_NEXT, #f)
	R(socket);
	R(connect);
	R(listen);
	R(accept4);
	R(close);
	R(shutdown);
	R(read);
	R(write);
	R(readv);
	R(writev);
	R(recvmsg);
	R(sendmsg);
	R(recv);
	R(send);
	R(poll);
	R(ppoll);
	R(epoll_ctl);
	R(epoll_pwait);
	R(fcntl);
	R(ioctl);
	R(dup);
	R(dup3);
	R(setsockopt);
	R(getsockopt);
	R(splice);
	R(sendfile);
#undef R
	const char *e = getenv("ZL_PRELOAD");
	disabled = getauxval(AT_SECURE) || (e && !strcmp(e, "0"));
	if ((e = getenv("ZL_PRELOAD_SPIN_US")))
		zp_spin_us = atoi(e) < 0 ? 0 : atoi(e);
	if ((e = getenv("ZL_PRELOAD_RING"))) {
		long v = atol(e);
		if (v >= 4096 && v <= (64l << 20) && !(v & (v - 1)))
			zp_ring = (uint32_t)v;
		else
			ZL_LOG(ZL_LOG_WARN, "preload: ZL_PRELOAD_RING=%s is not a power of two "
			       "in 4 KiB..64 MiB; using %u", e, zp_ring);
	}
	zp_allow_other_uid = (e = getenv("ZL_PRELOAD_ALLOW_OTHER_UID")) && !strcmp(e, "1");
	zx_config();
	pthread_atfork(NULL, NULL, zp_atfork_child);
	atexit(leave_at_exit); /* before any library's destructor (_dl_fini) */
	if (!disabled && (e = getenv("ZL_PRELOAD_FDS"))) {
		zp_exec_adopt(e);
		unsetenv("ZL_PRELOAD_FDS");
	}
}

static inline void init(void)
{
	if (__builtin_expect(!zp_real.read, 0))
		pthread_once(&once, resolve);
}

__attribute__((constructor)) static void preload_init(void) { init(); }

/* The switched socket behind fd, or NULL (also when the preload is disabled). */
static inline struct zsock *zs(int fd)
{
	init();
	return disabled ? NULL : zp_get(fd);
}

/* ---- connections --------------------------------------------------------- */

EXPORT int connect(int fd, const struct sockaddr *a, socklen_t len)
{
	init();
	if (zp_inside)
		return zp_real.connect(fd, a, len);
	struct zsock *z = disabled || zp_get(fd) ? NULL : zp_connect_offer(fd, a, len);
	if (!z && !disabled && !zp_get(fd))
		z = zx_connect_offer(fd, a, len); /* across hosts, when configured */
	int r = zp_real.connect(fd, a, len), e = errno;
	if (!z && zp_no_switch && (!r || e == EINPROGRESS))
		zp_fell_back(fd, zp_no_switch);
	if (z) {
		if (!r || e == EINPROGRESS) {
			atomic_store(&z->o->nonblock, (zp_real.fcntl(fd, F_GETFL) & O_NONBLOCK) != 0);
			zp_adopt(fd, z);
			zp_epoll_follow(fd, z);
		} else if (z->xh) {
			zx_connect_failed(z);
		} else {
			zp_connect_done(z, 0);
		}
	}
	errno = e;
	return r;
}

EXPORT int listen(int fd, int backlog)
{
	init();
	int r = zp_real.listen(fd, backlog);
	if (!r && !disabled && !zp_inside) {
		int e = errno;
		zp_listen_close(fd); /* listen again: publish once */
		zp_listen_publish(fd);
		zx_listen_close(fd);
		zx_listen_publish(fd);
		errno = e;
	}
	return r;
}

EXPORT int accept4(int fd, struct sockaddr *a, socklen_t *len, int flags)
{
	init();
	int r = zp_real.accept4(fd, a, len, flags);
	if (r >= 0 && !disabled) {
		int e = errno;
		struct zsock *z = zp_accept_match(fd, r);
		if (!z)
			z = zx_accept_match(fd, r);
		if (z) {
			atomic_store(&z->o->nonblock, (flags & SOCK_NONBLOCK) != 0);
			zp_adopt(r, z);
		}
		errno = e;
	}
	return r;
}

EXPORT int accept(int fd, struct sockaddr *a, socklen_t *len) { return accept4(fd, a, len, 0); }

static void forget(int fd)
{
	if (disabled || zp_vforked())
		return;
	zp_forget(fd);
	zl_status_clear(fd);
	zp_epoll_close(fd);
	zp_listen_close(fd);
	zx_listen_close(fd);
}

EXPORT int close(int fd)
{
	init();
	forget(fd);
	return zp_real.close(fd);
}

EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	init();
	if (!(flags & CLOSE_RANGE_CLOEXEC) && !disabled && !zp_vforked())
		for (unsigned fd = first; fd <= last && fd < (1u << 20); fd++) {
			if (zs((int)fd))
				forget((int)fd);
			else
				zl_status_clear((int)fd);
		}
	return (int)syscall(SYS_close_range, first, last, flags);
}

EXPORT int shutdown(int fd, int how)
{
	struct zsock *z = zs(fd);
	if (z)
		return zp_shutdown(z, how);
	zp_left_wake(fd); /* (an edge for a set that has not seen the hand-back yet) */
	return zp_real.shutdown(fd, how);
}

/* ---- data ---------------------------------------------------------------- */

EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	struct zsock *z = zs(fd);
	struct iovec v = { buf, n };
	return z ? zp_recv(z, &v, 1, 0) : zp_real.read(fd, buf, n);
}

EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t cap)
{
	if (n > cap)
		abort(); /* what glibc's check does: the program's own bug */
	return read(fd, buf, n);
}

EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	struct zsock *z = zs(fd);
	struct iovec v = { (void *)buf, n };
	return z ? zp_send(z, &v, 1, 0) : zp_real.write(fd, buf, n);
}

EXPORT ssize_t readv(int fd, const struct iovec *iov, int n)
{
	struct zsock *z = zs(fd);
	if (!z)
		return zp_real.readv(fd, iov, n);
	return n < 0 || n > IOV_MAX ? (errno = EINVAL, -1) : zp_recv(z, iov, n, 0);
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int n)
{
	struct zsock *z = zs(fd);
	if (!z)
		return zp_real.writev(fd, iov, n);
	return n < 0 || n > IOV_MAX ? (errno = EINVAL, -1) : zp_send(z, iov, n, 0);
}

EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	struct zsock *z = zs(fd);
	struct iovec v = { buf, n };
	return z ? zp_recv(z, &v, 1, flags) : zp_real.recv(fd, buf, n, flags);
}

EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t cap, int flags)
{
	if (n > cap)
		abort();
	return recv(fd, buf, n, flags);
}

EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	struct zsock *z = zs(fd);
	struct iovec v = { (void *)buf, n };
	return z ? zp_send(z, &v, 1, flags) : zp_real.send(fd, buf, n, flags);
}

/* A Unix stream socket names the sender if it is bound (the accepted side
 * carries the listener's path); TCP leaves the address alone (length 0).
 * The name is asked of the kernel once (no system call per message). */
static void from(struct zsock *z, int fd, struct sockaddr *a, socklen_t *len)
{
	if (!a || !len)
		return;
	socklen_t cap = *len;
	*len = 0;
	if (!z->is_unix)
		return;
	int pl = atomic_load_explicit(&z->peer_name_len, memory_order_acquire);
	if (!pl) {
		pthread_mutex_lock(&z->lock);
		pl = atomic_load_explicit(&z->peer_name_len, memory_order_relaxed);
		socklen_t l = sizeof(z->peer_name);
		if (!pl && !getpeername(fd, (struct sockaddr *)&z->peer_name, &l)) {
			pl = l > sizeof(sa_family_t) ? (int)l : -1; /* (-1: unnamed) */
			atomic_store_explicit(&z->peer_name_len, pl, memory_order_release);
		}
		pthread_mutex_unlock(&z->lock);
	}
	if (pl > 0) {
		memcpy(a, &z->peer_name, (socklen_t)pl < cap ? (socklen_t)pl : cap);
		*len = (socklen_t)pl;
	}
}

EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *a,
			socklen_t *len)
{
	struct zsock *z = zs(fd);
	if (!z) {
		struct iovec v = { buf, n };
		struct msghdr m = { .msg_name = a, .msg_namelen = len ? *len : 0, .msg_iov = &v,
				    .msg_iovlen = 1 };
		ssize_t r = zp_real.recvmsg(fd, &m, flags);
		if (r >= 0 && len)
			*len = m.msg_namelen;
		return r;
	}
	struct iovec v = { buf, n };
	ssize_t r = zp_recv(z, &v, 1, flags);
	if (r >= 0)
		from(z, fd, a, len);
	return r;
}

EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t cap, int flags,
			      struct sockaddr *a, socklen_t *len)
{
	if (n > cap)
		abort();
	return recvfrom(fd, buf, n, flags, a, len);
}

EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *a,
		      socklen_t len)
{
	struct zsock *z = zs(fd);
	if (z) {
		struct iovec v = { (void *)buf, n };
		if (a && z->is_unix) { /* as the kernel: connected already */
			errno = EISCONN;
			return -1;
		}
		return zp_send(z, &v, 1, flags);
	}
	struct iovec v = { (void *)buf, n };
	struct msghdr m = { .msg_name = (void *)a, .msg_namelen = len, .msg_iov = &v,
			    .msg_iovlen = 1 };
	return zp_real.sendmsg(fd, &m, flags);
}

EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	struct zsock *z = zs(fd);
	if (!z)
		return zp_real.recvmsg(fd, m, flags);
	if (m->msg_iovlen > IOV_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	ssize_t r = zp_recvmsg(z, m->msg_iov, (int)m->msg_iovlen, m, flags);
	if (r >= 0)
		from(z, fd, m->msg_name, &m->msg_namelen);
	return r;
}

/* A switched socket among the descriptors m passes (SCM_RIGHTS): its
 * bytes travel in our ring or channel, which the receiving process would
 * not know of (it would read the kernel socket's wake-ups as data, and
 * our close would end the connection under it). */
static bool passes_switched(const struct msghdr *m)
{
	if (!m || !m->msg_control || m->msg_controllen < sizeof(struct cmsghdr))
		return false;
	for (struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)m); c;
	     c = CMSG_NXTHDR((struct msghdr *)m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len < CMSG_LEN(0))
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int pfd;
			memcpy(&pfd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			struct zsock *z = zs(pfd);
			if (z && !zp_give_up(z)) {
				ZL_LOG(ZL_LOG_WARN, "preload: fd %d is switched and cannot be passed "
				       "to another process (SCM_RIGHTS): EOPNOTSUPP", pfd);
				return true;
			}
		}
	}
	return false;
}

EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	struct zsock *z = zs(fd);
	if (!z && passes_switched(m)) {
		errno = EOPNOTSUPP;
		return -1;
	}
	if (!z)
		return zp_real.sendmsg(fd, m, flags);
	if (m->msg_iovlen > IOV_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	/* fds and credentials do not travel in a ring: with them the
	 * connection goes back to the kernel stream (tx.c) */
	return zp_sendmsg(z, m->msg_iov, (int)m->msg_iovlen, m->msg_controllen ? m->msg_control : NULL,
			  m->msg_control ? m->msg_controllen : 0, flags);
}

/* sendfile and splice with a switched socket at one end: splice.c */
EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	init();
	return disabled ? zp_real.sendfile(out, in, off, count) : zp_sendfile(out, in, off, count);
}

EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t count)
{
	return sendfile(out, in, off, count);
}

EXPORT ssize_t splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len,
		      unsigned flags)
{
	init();
	return disabled ? zp_real.splice(in, off_in, out, off_out, len, flags)
			: zp_splice(in, off_in, out, off_out, len, flags);
}

/* ---- control -------------------------------------------------------------- */

static int fcntl_common(int fd, int cmd, unsigned long arg)
{
	struct zsock *z = zs(fd);
	int r = zp_real.fcntl(fd, cmd, arg);
	if (r < 0 || !z)
		return r;
	if (cmd == F_SETFL)
		atomic_store(&z->o->nonblock, (arg & O_NONBLOCK) != 0);
	else if ((cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && !zp_vforked())
		zp_set(r, z);
	return r;
}

EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	unsigned long arg = va_arg(ap, unsigned long);
	va_end(ap);
	return fcntl_common(fd, cmd, arg);
}

EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	unsigned long arg = va_arg(ap, unsigned long);
	va_end(ap);
	return fcntl_common(fd, cmd, arg);
}

EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	struct zsock *z = zs(fd);
	if (z && req == FIONREAD) {
		if (!arg) {
			errno = EFAULT;
			return -1;
		}
		*(int *)arg = zp_fionread(z);
		return 0;
	}
	/* an urgent byte that met our reset (TCP) left its mark behind all
	 * we have not read: we stand at it once nothing is left */
	if (z && !z->xh && req == SIOCATMARK && zp_peer_urg_reset(z)) {
		if (!arg) {
			errno = EFAULT;
			return -1;
		}
		*(int *)arg = zp_fionread(z) == 0 && zp_peer_urg_off(z) == 0; /* (the bytes
			before the mark went with the reset: the reader never reaches it) */
		return 0;
	}
	/* the urgent mark is on the kernel stream, behind whatever the ring
	 * still holds */
	uint64_t left;
	if (z && !z->xh && req == SIOCATMARK && !(zp_rx_left(z, &left) && left == UINT64_MAX)) {
		if (!arg) {
			errno = EFAULT;
			return -1;
		}
		*(int *)arg = 0;
		return 0;
	}
	int r = zp_real.ioctl(fd, req, arg);
	if (!r && z && req == FIONBIO && arg)
		atomic_store(&z->o->nonblock, *(int *)arg != 0);
	return r;
}

EXPORT int dup(int fd)
{
	struct zsock *z = zs(fd);
	int r = zp_real.dup(fd);
	if (r >= 0 && z && !zp_vforked())
		zp_set(r, z);
	return r;
}

EXPORT int dup3(int old, int new, int flags)
{
	struct zsock *z = zs(old);
	if (z && zp_vforked()) /* (its table is its own: ours stays) */
		z = NULL;
	else if (old != new && zs(new))
		forget(new); /* dup3 closes it */
	else if (old != new && !zp_vforked())
		zl_status_clear(new);
	int r = zp_real.dup3(old, new, flags);
	if (r >= 0 && z)
		zp_set(r, z);
	return r;
}

EXPORT int dup2(int old, int new)
{
	if (old == new) {
		init();
		return zp_real.fcntl(old, F_GETFD) < 0 ? -1 : new;
	}
	return dup3(old, new, 0);
}

static bool nodelay(struct zsock *z, int level, int opt)
{
	return z && z->o->app_nodelay >= 0 && level == IPPROTO_TCP && opt == TCP_NODELAY;
}

EXPORT int getsockopt(int fd, int level, int opt, void *v, socklen_t *len)
{
	struct zsock *z = zs(fd);
	int r = zp_real.getsockopt(fd, level, opt, v, len);
	if (!r && nodelay(z, level, opt) && *len >= sizeof(int))
		*(int *)v = z->o->app_nodelay; /* the program's view, not the wake-ups' */
	else if (!r && z && level == SOL_SOCKET && opt == SO_ERROR && *len >= sizeof(int))
		*(int *)v = zp_so_error(z, *(int *)v);
	return r;
}

EXPORT int setsockopt(int fd, int level, int opt, const void *v, socklen_t len)
{
	struct zsock *z = zs(fd);
	if (nodelay(z, level, opt)) { /* kept on underneath; checked as the kernel does */
		int on = 1;
		int r = zp_real.setsockopt(fd, level, opt, len >= sizeof(int) ? &on : v, len);
		if (!r)
			z->o->app_nodelay = *(const int *)v != 0;
		return r;
	}
	int r = zp_real.setsockopt(fd, level, opt, v, len);
	if (!r && z && level == SOL_SOCKET && (opt == SO_RCVTIMEO || opt == SO_SNDTIMEO) &&
	    len >= sizeof(struct timeval)) {
		const struct timeval *t = v;
		int64_t us = (int64_t)t->tv_sec * 1000000 + t->tv_usec;
		if (opt == SO_RCVTIMEO)
			z->o->rcvtimeo_us = us;
		else
			z->o->sndtimeo_us = us;
	}
	return r;
}

/* ---- readiness ------------------------------------------------------------ */

/* glibc declares poll's array write-only for its fortified callers; here
 * it is the caller's, already filled in */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
static bool any_switched(const struct pollfd *fds, nfds_t n)
{
	init();
	if (disabled)
		return false;
	for (nfds_t i = 0; i < n; i++)
		if (fds[i].fd >= 0 && zp_get(fds[i].fd))
			return true;
	return false;
}

EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	if (!any_switched(fds, n))
		return zp_real.poll(fds, n, timeout);
	return zp_poll(fds, n, timeout < 0 ? -1 : (int64_t)timeout * 1000, NULL);
}

EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t cap)
{
	if (n > cap / sizeof(*fds))
		abort();
	return poll(fds, n, timeout);
}

EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *t, const sigset_t *mask)
{
	if (!any_switched(fds, n))
		return zp_real.ppoll(fds, n, t, mask);
	int64_t us = t ? (int64_t)t->tv_sec * 1000000 + (t->tv_nsec + 999) / 1000 : -1;
	return zp_poll(fds, n, us, mask);
}

EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *t,
		       const sigset_t *mask, size_t cap)
{
	if (n > cap / sizeof(*fds))
		abort();
	return ppoll(fds, n, t, mask);
}

/* select and pselect as poll, when a switched socket is in the sets. */
static int select_common(int n, fd_set *r, fd_set *w, fd_set *x, int64_t us,
			 const sigset_t *mask, bool *done)
{
	*done = false;
	init();
	if (disabled || n <= 0 || n > FD_SETSIZE)
		return 0;
	struct pollfd p[FD_SETSIZE];
	nfds_t k = 0;
	bool sw = false;
	for (int fd = 0; fd < n; fd++) {
		short ev = (short)((r && FD_ISSET(fd, r) ? POLLIN : 0) |
				   (w && FD_ISSET(fd, w) ? POLLOUT : 0) |
				   (x && FD_ISSET(fd, x) ? POLLPRI : 0));
		if (!ev)
			continue;
		sw |= zp_get(fd) != NULL;
		p[k++] = (struct pollfd){ .fd = fd, .events = ev };
	}
	if (!sw)
		return 0;
	*done = true;
	int rc = zp_poll(p, k, us, mask);
	if (rc < 0)
		return rc;
	if (r)
		FD_ZERO(r);
	if (w)
		FD_ZERO(w);
	if (x)
		FD_ZERO(x);
	int bits = 0;
	for (nfds_t i = 0; i < k; i++) {
		short v = p[i].revents;
		if (v & POLLNVAL) {
			errno = EBADF;
			return -1;
		}
		if (r && (p[i].events & POLLIN) && (v & (POLLIN | POLLHUP | POLLERR)))
			FD_SET(p[i].fd, r), bits++;
		if (w && (p[i].events & POLLOUT) && (v & (POLLOUT | POLLERR)))
			FD_SET(p[i].fd, w), bits++;
		if (x && (p[i].events & POLLPRI) && (v & POLLPRI))
			FD_SET(p[i].fd, x), bits++;
	}
	return bits;
}

EXPORT int select(int n, fd_set *r, fd_set *w, fd_set *x, struct timeval *t)
{
	bool done;
	int64_t us = t ? (int64_t)t->tv_sec * 1000000 + t->tv_usec : -1;
	int rc = select_common(n, r, w, x, us, NULL, &done);
	if (done)
		return rc;
	static int (*sel)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	if (!sel)
		sel = dlsym(RTLD_NEXT, "select");
	return sel(n, r, w, x, t);
}

EXPORT int pselect(int n, fd_set *r, fd_set *w, fd_set *x, const struct timespec *t,
		   const sigset_t *mask)
{
	bool done;
	int64_t us = t ? (int64_t)t->tv_sec * 1000000 + (t->tv_nsec + 999) / 1000 : -1;
	int rc = select_common(n, r, w, x, us, mask, &done);
	if (done)
		return rc;
	static int (*ps)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
			 const sigset_t *);
	if (!ps)
		ps = dlsym(RTLD_NEXT, "pselect");
	return ps(n, r, w, x, t, mask);
}

EXPORT int epoll_ctl(int ep, int op, int fd, struct epoll_event *ev)
{
	init();
	return disabled || zp_inside ? zp_real.epoll_ctl(ep, op, fd, ev)
				     : zp_epoll_ctl(ep, op, fd, ev);
}

EXPORT int epoll_wait(int ep, struct epoll_event *evs, int max, int timeout)
{
	init();
	return disabled ? zp_real.epoll_pwait(ep, evs, max, timeout, NULL)
		   : zp_epoll_wait(ep, evs, max, timeout, NULL);
}

EXPORT int epoll_pwait(int ep, struct epoll_event *evs, int max, int timeout,
		       const sigset_t *mask)
{
	init();
	return disabled ? zp_real.epoll_pwait(ep, evs, max, timeout, mask)
		   : zp_epoll_wait(ep, evs, max, timeout, mask);
}

/* ---- exec ------------------------------------------------------------------ */

extern char **environ;

/* envp for the new image, with the switched sockets' state (see sock.c). */
static char **exec_env(char *const envp[], char **state)
{
	bool keep = false;
	size_t n = 0;
	for (; envp && envp[n]; n++)
		if (!strncmp(envp[n], "LD_PRELOAD=", 11) && strstr(envp[n], "zipline-preload"))
			keep = true;
	*state = disabled ? NULL : zp_exec_state(keep);
	if (!*state)
		return (char **)envp;
	char **e = malloc((n + 2) * sizeof(*e));
	if (!e)
		return (char **)envp;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(envp[i], "ZL_PRELOAD_FDS=", 15))
			e[k++] = envp[i];
	e[k++] = *state;
	e[k] = NULL;
	return e;
}

static void exec_undo(char *const envp[], char **e, char *state)
{
	int err = errno;
	zp_exec_failed();
	if (e != (char **)envp)
		free(e);
	free(state);
	errno = err;
}

typedef int (*exec_fn)(const char *, char *const[], char *const[]);

/* The real execve or execvpe (name), with the switched sockets' state. */
static int exec_with(const char *name, exec_fn *fn, const char *file, char *const argv[],
		     char *const envp[])
{
	init();
	if (!*fn)
		*fn = (exec_fn)dlsym(RTLD_NEXT, name);
	char *state;
	char **e = exec_env(envp, &state);
	int r = (*fn)(file, argv, e);
	exec_undo(envp, e, state);
	return r;
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	static exec_fn fn;
	return exec_with("execve", &fn, path, argv, envp);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	static exec_fn fn;
	return exec_with("execvpe", &fn, file, argv, envp);
}

EXPORT int execv(const char *path, char *const argv[]) { return execve(path, argv, environ); }

EXPORT int execvp(const char *file, char *const argv[]) { return execvpe(file, argv, environ); }

/* ---- fork ------------------------------------------------------------------ */

/* The leaving process's switched sockets are closed first (zp_leave);
 * exit() comes here through atexit (registered in init). */
EXPORT void _exit(int status)
{
	static void (*ex)(int);
	if (!ex)
		ex = (void (*)(int))dlsym(RTLD_NEXT, "_exit");
	if (!disabled && !zp_inside)
		zp_leave();
	ex(status);
	__builtin_unreachable();
}

EXPORT pid_t fork(void)
{
	init();
	static pid_t (*fk)(void);
	if (!fk)
		fk = dlsym(RTLD_NEXT, "fork");
	if (!disabled)
		zp_fork_prepare();
	pid_t p = fk();
	if (p < 0 && !disabled)
		zp_fork_failed();
	return p;
}
