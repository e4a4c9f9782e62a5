/* SPDX-License-Identifier: MIT */
/*
 * attack_peer.c - the attacker of attack_test.c: a process that is not
 * party to the victims' connections, run without the preload, so that
 * every call it makes is the kernel's. It speaks the rendezvous protocol
 * (src/preload/wire.h) by hand: replays and forges hellos, squats a
 * rendezvous name and answers with false claims, or, as a real party,
 * lies in the shared memory.
 *
 *   attack_peer FAM IN OUT   commands, a line each on fd IN; a line back on
 *                            fd OUT each: "ok RESULT FIGURE" or "FAIL why"
 * Commands: "target PORT PATH PID" (the server to attack), "replay X N",
 * "forge PID FD", "check", "squat", "answer", "squat-check", "lie KIND";
 * the functions below say what each does and what RESULT means.
 * Every wait is bounded; a 300 s alarm ends it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "sem_util.h"
#pragma GCC diagnostic pop

#include <dirent.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "attack.h"
#include "preload.h" /* struct zp_shared, ZP_*; wire.h */

static int g_fam;

static int rdv_connect(int fam, uint16_t port, const char *path)
{
	struct sockaddr_un u;
	socklen_t len = rdv_name(fam, port, path, &u);
	int c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (c >= 0 && connect(c, (struct sockaddr *)&u, len)) {
		close(c);
		return -1;
	}
	return c;
}

static int make_mem(void)
{
	size_t len = ZP_HDR + 2 * (size_t)RING;
	int fd = memfd_create("attacker", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	struct zp_shared h;
	memset(&h, 0, sizeof h);
	h.magic = ZP_MAGIC;
	h.version = ZP_VERSION;
	h.ring_size = RING;
	h.hdr_size = ZP_HDR;
	if (fd < 0 || ftruncate(fd, (off_t)len) || pwrite(fd, &h, sizeof h, 0) != sizeof h ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL))
		return -1;
	return fd;
}

static int send_msg(int c, const struct zp_wire *w, int fd)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr a;
	} u;
	memset(&u, 0, sizeof u);
	struct iovec io = { (void *)w, sizeof *w };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1 };
	if (fd >= 0) {
		m.msg_control = u.b;
		m.msg_controllen = sizeof u.b;
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof fd);
	}
	return sendmsg(c, &m, MSG_NOSIGNAL | MSG_DONTWAIT) == sizeof *w ? 0 : -1;
}

/* a message within ms: 1 (and *mem if it carried an fd), 0 none, -1 end */
static int recv_msg(int c, struct zp_wire *w, int *mem, int ms)
{
	union {
		char b[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr a;
	} u;
	struct iovec io = { w, sizeof *w };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = u.b,
			    .msg_controllen = sizeof u.b };
	if (wait_ev(c, POLLIN, ms) <= 0)
		return 0;
	ssize_t n = recvmsg(c, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n <= 0)
		return n < 0 && errno == EAGAIN ? 0 : -1;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	if (mem)
		*mem = cm && cm->cmsg_type == SCM_RIGHTS ? *(int *)CMSG_DATA(cm) : -1;
	return 1;
}

static struct zp_wire claims(uint32_t magic, int fd, int c)
{
	return (struct zp_wire){ .magic = magic, .version = ZP_WIRE_VERSION, .ring_size = RING,
				 .pid = getpid(), .sock_fd = fd, .rdv_fd = c,
				 .sock_ino = ino_of(fd), .rdv_ino = ino_of(c) };
}

static struct zp_shared *map_ring(int mem, uint32_t ring)
{
	void *p = mmap(NULL, ZP_HDR + 2 * (size_t)ring, PROT_READ | PROT_WRITE, MAP_SHARED, mem, 0);
	return p == MAP_FAILED ? NULL : p;
}

static struct zp_shared *map_mem(int mem) { return map_ring(mem, RING); }

/* The other end of the connection whose socket has inode ino (as a
 * squatter finds it): TCP from /proc/net/tcp, Unix sockets from
 * sock_diag. 0 if not found. */
static uint64_t other_end_of(int fam, uint64_t ino)
{
	if (fam == AF_UNIX) {
		struct {
			struct nlmsghdr h;
			struct unix_diag_req r;
		} q = { .h = { .nlmsg_len = sizeof q, .nlmsg_type = SOCK_DIAG_BY_FAMILY,
			       .nlmsg_flags = NLM_F_REQUEST },
			.r = { .sdiag_family = AF_UNIX, .udiag_ino = (uint32_t)ino,
			       .udiag_show = UDIAG_SHOW_PEER, .udiag_cookie = { ~0u, ~0u } } };
		union {
			char b[4096];
			struct nlmsghdr h;
		} buf;
		int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
		uint64_t peer = 0;
		ssize_t n = nl >= 0 && send(nl, &q, sizeof q, 0) == sizeof q ? recv(nl, buf.b, sizeof buf.b, 0) : -1;
		if (n > 0 && NLMSG_OK(&buf.h, (size_t)n) && buf.h.nlmsg_type == SOCK_DIAG_BY_FAMILY) {
			struct rtattr *a = (struct rtattr *)((char *)NLMSG_DATA(&buf.h) +
							     NLMSG_ALIGN(sizeof(struct unix_diag_msg)));
			int rem = (int)(buf.h.nlmsg_len - NLMSG_LENGTH(NLMSG_ALIGN(sizeof(struct unix_diag_msg))));
			for (; RTA_OK(a, rem); a = RTA_NEXT(a, rem))
				if (a->rta_type == UNIX_DIAG_PEER)
					peer = *(uint32_t *)RTA_DATA(a);
		}
		if (nl >= 0)
			close(nl);
		return peer;
	}
	char line[512], l0[64] = "", r0[64] = "";
	unsigned long long in;
	FILE *f = fopen("/proc/net/tcp", "re");
	for (int pass = 0; f && pass < 2; pass++) {
		rewind(f);
		while (fgets(line, sizeof line, f)) {
			char l[64], r[64];
			if (sscanf(line, " %*d: %63s %63s %*x %*s %*s %*s %*d %*d %llu", l, r, &in) != 3)
				continue;
			if (!pass && in == ino) {
				snprintf(l0, sizeof l0, "%s", l);
				snprintf(r0, sizeof r0, "%s", r);
			} else if (pass && l0[0] && !strcmp(l, r0) && !strcmp(r, l0)) {
				fclose(f);
				return in;
			}
		}
	}
	if (f)
		fclose(f);
	return 0;
}

/* The fd of process pid that holds socket ino, or -1. */
static int fd_holding(pid_t pid, uint64_t ino)
{
	char p[64], want[64], link[64];
	snprintf(p, sizeof p, "/proc/%d/fd", (int)pid);
	snprintf(want, sizeof want, "socket:[%llu]", (unsigned long long)ino);
	DIR *d = opendir(p);
	int fd = -1;
	for (struct dirent *e; d && fd < 0 && (e = readdir(d));) {
		char q[384];
		snprintf(q, sizeof q, "%s/%s", p, e->d_name);
		ssize_t n = readlink(q, link, sizeof link - 1);
		if (n > 0 && (link[n] = 0, !strcmp(link, want)))
			fd = atoi(e->d_name);
	}
	if (d)
		closedir(d);
	return fd;
}

struct held {
	int c, mem, s;
};
static struct held g_held[64];
static int g_nheld;

/* replay X: offers for our own connections from port X, reset before the
 * server accepts them */
static int act_replay(uint16_t port, uint16_t x, int n)
{
	int made = 0;
	for (int i = 0; i < n && g_nheld < 64; i++) {
		struct sockaddr_storage ss, me;
		socklen_t len = addr_of(AF_INET, port, NULL, &ss);
		addr_of(AF_INET, x, NULL, &me);
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		CHECK(!bind(s, (struct sockaddr *)&me, len), "bind :%u: %s", x, errname(errno));
		int c = rdv_connect(AF_INET, port, NULL), mem = make_mem();
		if (c < 0) { /* refused: another uid */
			close(s);
			return made;
		}
		CHECK(mem >= 0, "memfd: %s", errname(errno));
		struct zp_wire w = claims(ZP_HELLO_MAGIC, s, c);
		if (send_msg(c, &w, mem)) { /* refused: the server closed it */
			CHECK(errno == EPIPE || errno == ECONNRESET, "hello: %s", errname(errno));
			close(s);
			close(c);
			close(mem);
			return made;
		}
		CHECK(!connect(s, (struct sockaddr *)&ss, len), "connect: %s", errname(errno));
		struct linger lg = { 1, 0 };
		setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
		close(s); /* a reset */
		g_held[g_nheld++] = (struct held){ c, mem, -1 };
		made++;
	}
	return made;
}

/* forge PID FD: a hello that claims the socket process PID holds at FD
 * (read from its /proc/PID/fd), from us, who do not hold it */
static int act_forge(uint16_t port, pid_t pid, int fd)
{
	char p[64], link[64];
	unsigned long long ino = 0;
	snprintf(p, sizeof p, "/proc/%d/fd/%d", (int)pid, fd);
	ssize_t n = readlink(p, link, sizeof link - 1);
	if (n <= 0) /* another uid: /proc does not show it; claim a guess */
		ino = 1;
	else if (link[n] = 0, sscanf(link, "socket:[%llu]", &ino) != 1)
		return failf("%s is %s, not a socket", p, link);
	int c = rdv_connect(g_fam, port, NULL), mem = make_mem();
	if (c < 0) {
		close(mem);
		return 0; /* refused: another uid */
	}
	struct zp_wire w = claims(ZP_HELLO_MAGIC, mem, c);
	w.sock_ino = ino;
	w.sock_fd = fd; /* its number, in our fd table: not the socket */
	g_held[g_nheld++] = (struct held){ c, mem, -1 };
	if (send_msg(c, &w, mem)) { /* refused: the server closed it */
		CHECK(errno == EPIPE || errno == ECONNRESET, "forged hello: %s", errname(errno));
		return 0;
	}
	return 1;
}

/* check: nothing we offered was joined or answered */
static int act_check(void)
{
	int rc = 0;
	for (int i = 0; i < g_nheld; i++) {
		struct held *h = &g_held[i];
		struct zp_shared *sh = h->mem >= 0 ? map_mem(h->mem) : NULL;
		struct zp_wire w;
		if (sh && (atomic_load(&sh->joined) || atomic_load(&sh->dir[1].tail) ||
			   atomic_load(&sh->dir[1].state)))
			rc = failf("TAKEOVER: the server joined rings we offered (joined %u, tail %llu)",
				   atomic_load(&sh->joined),
				   (unsigned long long)atomic_load(&sh->dir[1].tail));
		else if (h->c >= 0 && recv_msg(h->c, &w, NULL, 0) > 0)
			rc = failf("TAKEOVER: an answer came to an offer of ours");
		if (sh)
			munmap(sh, ZP_HDR + 2 * (size_t)RING);
		if (h->c >= 0)
			close(h->c);
		if (h->mem >= 0)
			close(h->mem);
		if (h->s >= 0)
			close(h->s);
	}
	g_nheld = 0;
	return rc;
}

/* squat: the rendezvous name of the plain server, taken before any client */
static int g_squat = -1;
static uint32_t g_squat_ring; /* the clients' ring size */

static int act_squat(uint16_t port, const char *path)
{
	struct sockaddr_un u;
	socklen_t len = rdv_name(g_fam, port, path, &u);
	g_squat = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	CHECK(g_squat >= 0 && !bind(g_squat, (struct sockaddr *)&u, len) && !listen(g_squat, 64),
	      "squatting @%s: %s", u.sun_path + 1, errname(errno));
	return 0;
}

/* answer: the next client's hello, answered with the strongest false
 * claims (the real server's pid and the fd that holds the connection),
 * `joined` set and a false reply in its ring. 1 answered, 0 no hello came
 * (the client refused us at the uid rule). */
static int act_answer(pid_t srv)
{
	CHECK(wait_ev(g_squat, POLLIN, 5000) > 0, "no client came to the squatted name");
	int c = accept4(g_squat, NULL, NULL, SOCK_CLOEXEC), mem = -1;
	struct zp_wire h;
	CHECK(c >= 0, "accept: %s", errname(errno));
	if (recv_msg(c, &h, &mem, 2000) <= 0 || mem < 0) {
		close(c);
		return 0;
	}
	uint64_t j = 0;
	int a = -1;
	for (int i = 0; i < 200 && a < 0; i++) { /* until the server accepted it */
		if ((j = other_end_of(g_fam, h.sock_ino)))
			a = fd_holding(srv, j);
		if (a < 0)
			msleep(10);
	}
	CHECK(a >= 0, "the server's end of the client's connection was not found");
	struct zp_wire w = claims(ZP_ANSWER_MAGIC, c, c);
	w.ring_size = h.ring_size;
	w.pid = srv;
	w.sock_fd = a;
	w.sock_ino = j;
	w.rdv_fd = a;
	CHECK(zp_ring_ok(h.ring_size), "the client's ring size %u", h.ring_size);
	struct zp_shared *sh = map_ring(mem, h.ring_size);
	CHECK(sh, "mapping the client's rings: %s", errname(errno));
	uint8_t *r1 = (uint8_t *)sh + ZP_HDR + h.ring_size;
	fill_pat(r1, RESP, 0xbad, 0); /* a false reply */
	atomic_store(&sh->dir[1].kbytes, 0);
	atomic_store(&sh->dir[1].tail, RESP);
	atomic_store(&sh->dir[1].state, 1);
	CHECK(!send_msg(c, &w, -1), "answer: %s", errname(errno));
	atomic_store(&sh->joined, 1);
	g_held[g_nheld++] = (struct held){ c, mem, -1 };
	g_squat_ring = h.ring_size;
	munmap(sh, ZP_HDR + 2 * (size_t)h.ring_size);
	return 1;
}

/* after the client's exchange: it wrote nothing into the rings */
static int act_squat_check(void)
{
	int rc = 0;
	for (int i = 0; i < g_nheld; i++) {
		struct zp_shared *sh = map_ring(g_held[i].mem, g_squat_ring);
		if (sh && (atomic_load(&sh->client_ok) || atomic_load(&sh->dir[0].state) ||
			   atomic_load(&sh->dir[0].tail)))
			rc = failf("SQUAT: the client trusted our answer (client_ok %u, tail %llu)",
				   atomic_load(&sh->client_ok),
				   (unsigned long long)atomic_load(&sh->dir[0].tail));
		if (sh)
			munmap(sh, ZP_HDR + 2 * (size_t)g_squat_ring);
		close(g_held[i].c);
		close(g_held[i].mem);
	}
	g_nheld = 0;
	return rc;
}

/* lie KIND: a party's lie; 1 the server ended the connection (within 3 s),
 * 0 refused at the rendezvous (another uid) */
/* A wake-up after a lie: sent, or refused because the server already saw
 * the lie (it may look at the ring before any wake-up) and ended the
 * connection; the read loop after it checks the end. */
static bool wake(int s)
{
	return send(s, "", 1, MSG_NOSIGNAL) == 1 || errno == EPIPE || errno == ECONNRESET;
}

static int act_lie(const char *kind, uint16_t port, const char *path, double *ms)
{
	struct sockaddr_storage ss;
	socklen_t len = addr_of(g_fam, port, path, &ss);
	int s = socket(g_fam, SOCK_STREAM | SOCK_CLOEXEC, 0), c = rdv_connect(g_fam, port, path);
	int mem = make_mem();
	CHECK(s >= 0 && mem >= 0, "socket/memfd: %s", errname(errno));
	if (c < 0) {
		close(s);
		close(mem);
		return 0;
	}
	struct zp_wire w = claims(ZP_HELLO_MAGIC, s, c);
	if (send_msg(c, &w, mem)) { /* refused: the server closed it */
		int e = errno;
		close(s);
		close(c);
		close(mem);
		CHECK(e == EPIPE || e == ECONNRESET, "hello: %s", errname(e));
		return 0;
	}
	CHECK(!connect(s, (struct sockaddr *)&ss, len), "connect: %s", errname(errno));
	struct zp_shared *sh = map_mem(mem);
	CHECK(sh, "mmap: %s", errname(errno));
	int r = recv_msg(c, &w, NULL, 3000), rc = 0;
	for (double end = now_ms() + 1000; r > 0 && !atomic_load(&sh->joined) && now_ms() < end;)
		msleep(1); /* the server sets it just after its answer */
	if (r <= 0 || !atomic_load(&sh->joined))
		goto out; /* refused */
	atomic_store(&sh->client_ok, 1);
	struct zp_dir *d = &sh->dir[0];
	uint8_t *r0 = (uint8_t *)sh + ZP_HDR;
	if (!strcmp(kind, "eof")) { /* kbytes beyond where our kernel stream ends */
		uint32_t h[2] = { 77, REQ }; /* a true header: the server waits for the rest */
		CHECK(write(s, h, sizeof h) == sizeof h, "write: %s", errname(errno));
		atomic_store(&d->kbytes, 1ull << 63);
		atomic_store(&d->state, 1);
		shutdown(s, SHUT_WR);
	} else if (!strcmp(kind, "tail")) { /* more than a ring ahead */
		atomic_store(&d->kbytes, 0);
		atomic_store(&d->state, 1);
		atomic_store(&d->tail, 3ull * RING);
		CHECK(wake(s), "wake-up: %s", errname(errno));
	} else if (!strcmp(kind, "head")) { /* a true request, then a head ahead */
		uint32_t h[2] = { 77, REQ };
		memcpy(r0, h, sizeof h);
		fill_pat(r0 + sizeof h, REQ, 77, 0);
		atomic_store(&d->kbytes, 0);
		atomic_store(&d->state, 1);
		atomic_store(&d->tail, sizeof h + REQ);
		CHECK(wake(s), "wake-up: %s", errname(errno));
		double end = now_ms() + 3000;
		while (!atomic_load(&sh->dir[1].tail) && now_ms() < end)
			msleep(1);
		/* past anything the server may write before it looks again */
		atomic_store(&sh->dir[1].head, atomic_load(&sh->dir[1].tail) + 2ull * RING);
		send(s, "", 1, MSG_NOSIGNAL);
	} else {
		rc = failf("unknown lie %s", kind);
		goto out;
	}
	double t0 = now_ms();
	char b[64];
	ssize_t n = 1;
	while (n > 0 && wait_ev(s, POLLIN, 3000) > 0)
		n = read(s, b, sizeof b); /* wake-ups, until the end */
	*ms = now_ms() - t0;
	rc = n <= 0 && *ms < 3000 ? 1 : failf("LIE: the server did not end the liar's "
					      "connection within 3 s (%s)", kind);
out:
	munmap(sh, ZP_HDR + 2 * (size_t)RING);
	close(s);
	close(c);
	close(mem);
	return rc;
}

/* Commands, a line each on in: "replay X N", "check", "squat",
 * "answer", "squat-check", "lie KIND"; a line back on out each. */
static int attacker_main(int in, int out)
{
	uint16_t port = 0;
	char path[108] = "";
	pid_t srv = 0;
	signal(SIGPIPE, SIG_IGN);
	alarm(300);
	FILE *f = fdopen(in, "r");
	char line[128];
	if (getenv("LD_PRELOAD") && strstr(getenv("LD_PRELOAD"), "zipline-preload"))
		return dprintf(out, "FAIL the attacker runs preloaded\n"), 1;
	while (f && fgets(line, sizeof line, f)) {
		char arg[32] = "";
		unsigned x = 0, n = 0;
		int r = 0;
		double ms = 0;
		g_msg[0] = 0;
		int pid;
		if (sscanf(line, "target %u %107s %d", &x, path, &pid) == 3) {
			port = (uint16_t)x;
			srv = pid;
		} else if (sscanf(line, "replay %u %u", &x, &n) == 2)
			r = act_replay(port, (uint16_t)x, (int)n);
		else if (sscanf(line, "forge %d %u", &pid, &x) == 2)
			r = act_forge(port, pid, (int)x);
		else if (!strncmp(line, "check", 5))
			r = act_check();
		else if (!strncmp(line, "squat-check", 11))
			r = act_squat_check();
		else if (!strncmp(line, "squat", 5))
			r = act_squat(port, path);
		else if (!strncmp(line, "answer", 6))
			r = act_answer(srv);
		else if (sscanf(line, "lie %31s", arg) == 1)
			r = act_lie(arg, port, path, &ms);
		if (r < 0)
			dprintf(out, "FAIL %s\n", g_msg);
		else
			dprintf(out, "ok %d %.1f\n", r, ms);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4 || (strcmp(argv[1], "tcp4") && strcmp(argv[1], "unix"))) {
		fprintf(stderr, "usage: attack_peer tcp4|unix IN OUT (run by attack_test)\n");
		return 2;
	}
	g_fam = !strcmp(argv[1], "unix") ? AF_UNIX : AF_INET;
	return attacker_main(atoi(argv[2]), atoi(argv[3]));
}
