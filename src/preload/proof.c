/* SPDX-License-Identifier: MIT */
/*
 * What the kernel says about who holds which socket, for the rendezvous's
 * proofs (rendezvous.c has the argument):
 *  - the inode of the socket at the other end of a connection on this host,
 *    from sock_diag: an exact lookup of the reversed address pair for TCP
 *    (inet_diag), the peer of the socket for Unix sockets (unix_diag);
 *  - whether a process holds, right now, a socket of a given inode at a
 *    given fd, from its /proc/PID/fd (which the kernel shows only to a
 *    process allowed to inspect that one).
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
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preload.h"

uint64_t zp_ino(int fd)
{
	struct stat st;
	return fstat(fd, &st) || !S_ISSOCK(st.st_mode) ? 0 : (uint64_t)st.st_ino;
}

/* One sock_diag request and the first answer: the diag message (its
 * first len bytes into out), attributes for unix_diag's peer into *peer. */
static int diag(const void *req, size_t rlen, void *out, size_t len, uint64_t *peer)
{
	int nl = zp_real.socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (nl < 0)
		return -1;
	union {
		char b[4096];
		struct nlmsghdr h;
	} buf;
	int rc = -1;
	if (zp_real.send(nl, req, rlen, 0) == (ssize_t)rlen) {
		ssize_t n = zp_real.recv(nl, buf.b, sizeof(buf.b), 0);
		struct nlmsghdr *h = &buf.h;
		if (n > 0 && NLMSG_OK(h, (size_t)n) && h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
		    h->nlmsg_len >= NLMSG_LENGTH(len)) {
			memcpy(out, NLMSG_DATA(h), len);
			rc = 0;
			if (peer) {
				struct rtattr *a = (struct rtattr *)((char *)NLMSG_DATA(h) +
								     NLMSG_ALIGN(len));
				int rem = (int)(h->nlmsg_len - NLMSG_LENGTH(NLMSG_ALIGN(len)));
				for (*peer = 0; RTA_OK(a, rem); a = RTA_NEXT(a, rem))
					if (a->rta_type == UNIX_DIAG_PEER && RTA_PAYLOAD(a) >= 4)
						*peer = *(uint32_t *)RTA_DATA(a);
			}
		}
	}
	zp_real.close(nl);
	return rc;
}

static uint64_t unix_other_end(int fd)
{
	uint64_t ino = zp_ino(fd), peer = 0;
	struct {
		struct nlmsghdr h;
		struct unix_diag_req r;
	} q = { .h = { .nlmsg_len = sizeof(q), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
		       .nlmsg_flags = NLM_F_REQUEST },
		.r = { .sdiag_family = AF_UNIX, .udiag_ino = (uint32_t)ino,
		       .udiag_show = UDIAG_SHOW_PEER,
		       .udiag_cookie = { INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE } } };
	struct unix_diag_msg d;
	if (!ino || ino > UINT32_MAX || diag(&q, sizeof(q), &d, sizeof(d), &peer) ||
	    d.udiag_ino != ino)
		return 0;
	return peer;
}

/* TCP: the socket whose local end is our peer's address and whose remote
 * end is ours. A v4-mapped pair is looked up as IPv4 (the kernel keeps
 * such a connection's other end in its IPv4 tables when it is an IPv4
 * socket, and finds an IPv6 one either way). */
static uint64_t tcp_other_end(int fd)
{
	struct sockaddr_storage l, p;
	socklen_t ll = sizeof(l), pl = sizeof(p);
	if (getsockname(fd, (struct sockaddr *)&l, &ll) || getpeername(fd, (struct sockaddr *)&p, &pl) ||
	    l.ss_family != p.ss_family)
		return 0;
	struct {
		struct nlmsghdr h;
		struct inet_diag_req_v2 r;
	} q;
	memset(&q, 0, sizeof(q));
	q.h.nlmsg_len = sizeof(q);
	q.h.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	q.h.nlmsg_flags = NLM_F_REQUEST;
	q.r.sdiag_protocol = IPPROTO_TCP;
	q.r.idiag_states = ~0u;
	q.r.id.idiag_cookie[0] = q.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
	if (l.ss_family == AF_INET) {
		const struct sockaddr_in *a = (void *)&l, *b = (void *)&p;
		q.r.sdiag_family = AF_INET;
		q.r.id.idiag_sport = b->sin_port;
		q.r.id.idiag_dport = a->sin_port;
		memcpy(q.r.id.idiag_src, &b->sin_addr, 4);
		memcpy(q.r.id.idiag_dst, &a->sin_addr, 4);
	} else if (l.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (void *)&l, *b = (void *)&p;
		q.r.sdiag_family = AF_INET6;
		q.r.id.idiag_sport = b->sin6_port;
		q.r.id.idiag_dport = a->sin6_port;
		memcpy(q.r.id.idiag_src, &b->sin6_addr, 16);
		memcpy(q.r.id.idiag_dst, &a->sin6_addr, 16);
	} else {
		return 0;
	}
	struct inet_diag_msg d;
	if (diag(&q, sizeof(q), &d, sizeof(d), NULL) || d.id.idiag_sport != q.r.id.idiag_sport ||
	    d.id.idiag_dport != q.r.id.idiag_dport)
		return 0;
	return d.idiag_inode;
}

uint64_t zp_other_end(int fd)
{
	int dom = 0;
	socklen_t l = sizeof(dom);
	if (zp_real.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l))
		return 0;
	return dom == AF_UNIX ? unix_other_end(fd) : tcp_other_end(fd);
}

/* fd/<fd> under the process directory dir names the socket ino */
static bool holds_at(int dir, int fd, uint64_t ino)
{
	char path[32], link[64], want[64];
	snprintf(path, sizeof(path), "fd/%d", fd);
	ssize_t n = readlinkat(dir, path, link, sizeof(link) - 1);
	if (n <= 0)
		return false;
	link[n] = 0;
	snprintf(want, sizeof(want), "socket:[%llu]", (unsigned long long)ino);
	return !strcmp(link, want);
}

bool zp_holds(int32_t pid, int fd1, uint64_t ino1, int fd2, uint64_t ino2)
{
	char path[32];
	if (pid <= 0 || fd1 < 0 || fd2 < 0 || !ino1 || !ino2)
		return false;
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	/* Both looks through one directory handle: it stays bound to the
	 * process it was opened for (a pid reused meanwhile makes them fail). */
	int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return false;
	bool ok = holds_at(dir, fd1, ino1) && holds_at(dir, fd2, ino2);
	zp_real.close(dir);
	return ok;
}
