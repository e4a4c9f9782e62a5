/* SPDX-License-Identifier: MIT */
/*
 * zl-ss: the connections of preloaded processes and the counters of
 * zipline servers and channels, as ss(8) lists the kernel's sockets (docs/man/zl-ss.1).
 *
 * It reads each process's status page (src/core/status.h) through
 * /proc/PID/fd, which the kernel opens only for the same uid or root.
 * The page and the rings it points to are another process's memory: every
 * size, seal, index and string in them is checked before use, and a page
 * that fails is skipped with a note on stderr.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "preload.h"
#include "page.h"
#include "status.h"

static const char usage_text[] =
	"usage: zl-ss [options]\n"
	"\n"
	"Lists the sockets of processes run under zl-run (switched to shared memory or\n"
	"rdma, or kept on the kernel, and why) and the counters of zipline servers.\n"
	"Only processes of your uid are seen (all of them as root).\n"
	"\n"
	"options:\n"
	"  -p, --pid PID   only this process\n"
	"  -k, --kernel    only sockets that stayed kernel sockets\n"
	"  -s, --switched  only sockets that switched\n"
	"      --csv FILE  comma-separated, with a header line, into FILE (- for\n"
	"                  standard output)\n"
	"  -h, --help      this text\n"
	"      --version   the version\n"
	"\n"
	"columns: PID, PROGRAM, FD, PROTO (tcp, tcp6, unix), SIDE (client or server),\n"
	"PATH (ring: shared memory; rdma; kernel; pending: the other end not proven\n"
	"yet; ring>kernel: went back for fd passing or urgent data), LOCAL and PEER\n"
	"addresses, OUT and IN (bytes each way: before the switch and on the ring;\n"
	"after a way back, the kernel's bytes are not counted; a TCP kernel socket's\n"
	"as its tcp_info says, bytes acked and received), WHY (a kernel socket's\n"
	"reason). Servers: URL and their counters; channels (zl_connect, zl_accept):\n"
	"URL, messages and bytes each way (copied every 1024 messages of a side and\n"
	"when a call of it returns without one).\n"
	"\n"
	"exit: 0, also when nothing is listed; 1 when --pid names a process whose\n"
	"status cannot be read; 2 for a bad option.\n";

static bool only_kernel, only_ring, csv;
static int listed;

/* ---- sockets as the kernel lists them (/proc/PID/net) -------------------- */

struct ksock {
	uint64_t ino;
	char proto[8];
	char local[64], peer[64];
	bool counted; /* TCP: bytes from the kernel's tcp_info */
	uint64_t acked, received;
	bool listening;
	unsigned lport; /* TCP: the local port */
};
static struct ksock *ks;
static size_t nks, capks;

static void ks_add(uint64_t ino, const char *proto, const char *l, const char *p)
{
	if (nks == capks) {
		size_t c = capks ? capks * 2 : 256;
		struct ksock *n = realloc(ks, c * sizeof(*n));
		if (!n)
			return;
		ks = n;
		capks = c;
	}
	struct ksock *k = &ks[nks++];
	k->ino = ino;
	k->counted = k->listening = false;
	k->lport = 0;
	snprintf(k->proto, sizeof(k->proto), "%s", proto);
	zlss_clean(k->local, l, sizeof(k->local)); /* (a Unix path is any bytes) */
	zlss_clean(k->peer, p, sizeof(k->peer));
}

/* "0100007F:1F90" (IPv4) or 32 hex digits and a port (IPv6), as Linux
 * prints them: the address's 32-bit words in host order */
static void inet_text(const char *hex, bool v6, char *out, size_t cap)
{
	const char *colon = strchr(hex, ':');
	unsigned port = colon ? (unsigned)strtoul(colon + 1, NULL, 16) : 0;
	size_t nw = v6 ? 4 : 1;
	if (!colon || (size_t)(colon - hex) != nw * 8) {
		snprintf(out, cap, "?");
		return;
	}
	uint8_t b[16];
	for (size_t w = 0; w < nw; w++) {
		char word[9];
		memcpy(word, hex + 8 * w, 8);
		word[8] = '\0';
		uint32_t x = (uint32_t)strtoul(word, NULL, 16);
		memcpy(b + 4 * w, &x, 4); /* host order, as the kernel wrote it */
	}
	char a[64];
	if (!v6)
		snprintf(a, sizeof(a), "%u.%u.%u.%u", b[0], b[1], b[2], b[3]);
	else {
		int n = 0;
		for (int i = 0; i < 16; i += 2)
			n += snprintf(a + n, sizeof(a) - (size_t)n, "%s%x", i ? ":" : "",
				      (unsigned)(b[i] << 8 | b[i + 1]));
	}
	snprintf(out, cap, v6 ? "[%s]:%u" : "%s:%u", a, port);
}

static void read_inet(int pid, const char *file, const char *proto, bool v6)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/net/%s", pid, file);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char l[64], r[64];
		unsigned long long ino;
		unsigned st;
		if (sscanf(line, " %*u: %63s %63s %x %*x:%*x %*x:%*x %*x %*u %*u %llu", l, r, &st,
			   &ino) != 4)
			continue;
		char lt[64], rt[64];
		inet_text(l, v6, lt, sizeof(lt));
		inet_text(r, v6, rt, sizeof(rt));
		ks_add(ino, proto, lt, rt);
		if (nks && ks[nks - 1].ino == ino) {
			const char *c = strchr(l, ':');
			ks[nks - 1].lport = c ? (unsigned)strtoul(c + 1, NULL, 16) : 0;
			ks[nks - 1].listening = st == 0x0a; /* TCP_LISTEN */
		}
	}
	fclose(f);
}

static void read_unix(int pid)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/net/unix", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long ino;
		char name[256] = "";
		if (sscanf(line, "%*x: %*x %*x %*x %*x %*x %llu %255s", &ino, name) < 1)
			continue;
		ks_add(ino, "unix", name[0] ? name : "*", "*");
	}
	fclose(f);
}

static int ks_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct ksock *)a)->ino, y = ((const struct ksock *)b)->ino;
	return x < y ? -1 : x > y;
}

/* (ks[] sorted by inode once read: ks_sort) */
static struct ksock *ks_find(uint64_t ino)
{
	struct ksock key = { .ino = ino };
	return nks ? bsearch(&key, ks, nks, sizeof(*ks), ks_cmp) : NULL;
}

/* the listening sockets' ports, apart: accepted() looks at them only */
static struct ksock *lst;
static size_t nlst;

static void ks_sort(void)
{
	qsort(ks, nks, sizeof(*ks), ks_cmp);
	free(lst);
	lst = malloc((nks ? nks : 1) * sizeof(*lst));
	nlst = 0;
	for (size_t i = 0; lst && i < nks; i++)
		if (ks[i].listening)
			lst[nlst++] = ks[i];
}

/* k was accepted (a listener has its local port): the kernel made it after
 * the handshake, so its SYN-ACK is not among its bytes acked */
static bool accepted(const struct ksock *k)
{
	for (size_t i = 0; i < nlst; i++)
		if (lst[i].lport == k->lport && !strcmp(lst[i].proto, k->proto))
			return true;
	return false;
}

/* The bytes of every TCP socket of our network namespace, as ss -ti shows
 * them (sock_diag's tcp_info: bytes acked, bytes received), into ks[]. */
static void tcp_bytes(int family)
{
	int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (nl < 0)
		return;
	struct {
		struct nlmsghdr h;
		struct inet_diag_req_v2 r;
	} q = { .h = { .nlmsg_len = sizeof(q), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP },
		.r = { .sdiag_family = (uint8_t)family, .sdiag_protocol = IPPROTO_TCP,
		       .idiag_ext = 1 << (INET_DIAG_INFO - 1), .idiag_states = ~0u } };
	static char buf[65536] __attribute__((aligned(8)));
	bool done = send(nl, &q, sizeof(q), 0) != (ssize_t)sizeof(q);
	while (!done) {
		ssize_t n = recv(nl, buf, sizeof(buf), 0);
		if (n <= 0)
			break;
		for (struct nlmsghdr *h = (void *)buf; !done && NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
			    h->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
				done = true;
				break;
			}
			struct inet_diag_msg *m = NLMSG_DATA(h);
			struct ksock *k = ks_find(m->idiag_inode);
			struct rtattr *a = (void *)(m + 1);
			int rem = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
			for (; k && RTA_OK(a, rem); a = RTA_NEXT(a, rem)) {
				struct tcp_info ti = { 0 };
				size_t l = RTA_PAYLOAD(a);
				if (a->rta_type != INET_DIAG_INFO)
					continue;
				memcpy(&ti, RTA_DATA(a), l < sizeof(ti) ? l : sizeof(ti));
				if (l >= offsetof(struct tcp_info, tcpi_bytes_received) + 8) {
					/* (the kernel counts a connecting socket's SYN
					 * as a byte acked, and our FIN once acked:
					 * FIN_WAIT2, TIME_WAIT) */
					uint64_t ctl = !accepted(k) +
						       (m->idiag_state == 5 || m->idiag_state == 6);
					k->counted = true;
					k->acked = ti.tcpi_bytes_acked > ctl ? ti.tcpi_bytes_acked - ctl : 0;
					k->received = ti.tcpi_bytes_received;
				}
			}
		}
	}
	close(nl);
}

/* ---- another process's memory, checked ---------------------------------- */

/* /proc/PID/fd/FD's link */
static bool fd_link(int pid, int fd, char *out, size_t cap)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	ssize_t n = readlink(path, out, cap - 1);
	if (n < 0)
		return false;
	out[n] = '\0';
	return true;
}

/* the device of memory files (ours, made once): a file at a memfd's name
 * that is not on it is not one */
static dev_t memfd_dev(void)
{
	static dev_t dev;
	static bool known;
	if (!known) {
		int m = memfd_create("zl-ss", MFD_CLOEXEC);
		struct stat st;
		if (m >= 0 && !fstat(m, &st))
			dev = st.st_dev;
		if (m >= 0)
			close(m);
		known = true;
	}
	return dev;
}

/* /proc/PID/fd/FD if it is a memfd named name, opened read-only (*st its
 * stat), or -1. The link is checked first, and the file opened is checked
 * again: the process may put another file at FD in between (a FIFO would
 * block a plain open, hence O_NONBLOCK). */
static int open_memfd(int pid, int fd, const char *name, struct stat *st)
{
	char link[128], want[96], path[64];
	snprintf(want, sizeof(want), "/memfd:%s (deleted)", name);
	if (fd < 0 || !fd_link(pid, fd, link, sizeof(link)) || strcmp(link, want))
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	int m = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (m < 0)
		return -1;
	if (fstat(m, st) || !S_ISREG(st->st_mode) || st->st_dev != memfd_dev()) {
		close(m);
		return -1;
	}
	return m;
}

/* The first len bytes of a sealed memfd named name at /proc/PID/fd/FD,
 * mapped read-only; NULL if it is not one, or shorter */
static void *map_memfd(int pid, int fd, const char *name, size_t len, size_t *mapped)
{
	struct stat st;
	int m = open_memfd(pid, fd, name, &st);
	if (m < 0)
		return NULL;
	int seals = fcntl(m, F_GET_SEALS);
	void *p = NULL;
	/* (sealed against shrinking: the writer cannot make our reads fault) */
	if (seals >= 0 && (seals & F_SEAL_SHRINK) && (size_t)st.st_size >= len) {
		p = mmap(NULL, len, PROT_READ, MAP_SHARED, m, 0);
		if (p == MAP_FAILED)
			p = NULL;
		*mapped = len;
	}
	close(m);
	return p;
}

/* The first len bytes of a memfd named name at /proc/PID/fd/FD, copied
 * (pread: a file that is not sealed may shrink under a mapping) */
static bool read_memfd(int pid, int fd, const char *name, void *buf, size_t len)
{
	struct stat st;
	int m = open_memfd(pid, fd, name, &st);
	if (m < 0)
		return false;
	bool ok = pread(m, buf, len, 0) == (ssize_t)len;
	close(m);
	return ok;
}

/* bytes each way of a switched socket: before the switch and on the rings;
 * *back: it went back to the kernel both ways */
static bool ring_bytes(int pid, const struct zlss_slot *s, uint64_t *out, uint64_t *in,
		       bool *back)
{
	size_t ml = 0;
	const struct zp_shared *sh = map_memfd(pid, s->mem_fd, "zipline-preload", ZP_HDR, &ml);
	static struct zp_own o; /* (large: not on the stack) */
	bool own = read_memfd(pid, s->own_fd, "zipline-own", &o, sizeof(o)) &&
		   o.magic == ZP_OWN_MAGIC;
	bool ok = sh && sh->magic == ZP_MAGIC && s->side <= 1;
	if (ok) {
		*out = atomic_load(&sh->dir[s->side].tail) + (own ? atomic_load(&o.tx_k) : 0);
		*in = atomic_load(&sh->dir[1 - s->side].head) + (own ? atomic_load(&o.rx_k) : 0);
	}
	*back = own && atomic_load(&o.back_done);
	if (sh)
		munmap((void *)sh, ml);
	return ok;
}

/* ---- listing ------------------------------------------------------------- */

/* text: a blank line between the socket table and the other lines */
static bool sockets_shown;
static void sep(void)
{
	if (sockets_shown)
		printf("\n");
	sockets_shown = false;
}


static void row(const char *cols[], int n)
{
	for (int i = 0; i < n; i++) {
		if (csv)
			printf("%s%s", i ? "," : "", cols[i]);
		else
			printf(i == n - 1 ? "%s" : i == 1 ? "%-12s " : i >= 5 && i <= 6 ? "%-22s "
									 : "%-8s ", cols[i]);
	}
	printf("\n");
}

static void header(void)
{
	static bool said;
	if (said)
		return;
	said = true;
	const char *h[] = { "PID", "PROGRAM", "FD", "PROTO", "SIDE", "LOCAL", "PEER", "PATH",
			    "OUT", "IN", "WHY" };
	row(h, 11);
}

static void show_socket(int pid, const char *comm, const struct zlss_slot *s)
{
	char link[64], want[64];
	snprintf(want, sizeof(want), "socket:[%" PRIu64 "]", s->ino);
	if (s->fd < 0 || !fd_link(pid, s->fd, link, sizeof(link)) || strcmp(link, want))
		return; /* closed, or another socket there now */
	bool kernel = s->state == ZL_SS_KERNEL;
	char out[32] = "-", in[32] = "-";
	if ((only_kernel && !kernel) || (only_ring && kernel))
		return;
	const struct ksock *k = ks_find(s->ino);
	if (kernel && k && k->counted) {
		snprintf(out, sizeof(out), "%" PRIu64, k->acked);
		snprintf(in, sizeof(in), "%" PRIu64, k->received);
	}
	char fd[16], pidt[16], why[96];
	const char *path = s->state == ZL_SS_RING ? "ring" : s->state == ZL_SS_RDMA ? "rdma"
			 : s->state == ZL_SS_PENDING ? "pending" : kernel ? "kernel" : "?";
	uint64_t bo, bi;
	bool back = false;
	if (s->state == ZL_SS_RING && ring_bytes(pid, s, &bo, &bi, &back)) {
		snprintf(out, sizeof(out), "%" PRIu64, bo);
		snprintf(in, sizeof(in), "%" PRIu64, bi);
	}
	if (back)
		path = "ring>kernel";
	snprintf(fd, sizeof(fd), "%d", s->fd);
	snprintf(pidt, sizeof(pidt), "%d", pid);
	snprintf(why, sizeof(why), "%s", kernel ? s->why : "");
	const char *c[] = { pidt, comm, fd, k ? k->proto : "?", s->side ? "server" : "client",
			    k ? k->local : "?", k ? k->peer : "?", path, out, in,
			    why[0] ? why : "-" };
	if (kernel)
		c[4] = "-"; /* (not known for a socket that never switched) */
	header();
	row(c, 11);
	listed++;
	sockets_shown = !csv;
}

static void show_server(int pid, const char *comm, const struct zlss_slot *s)
{
	if (only_kernel || only_ring)
		return;
	const char *name = s->name;
	static const char *names[ZL_SC_N] = { "clients",  "accepted", "dropped",
					      "requests", "rejected", "spurious",
					      "recovered", "handshakes_failed" };
	if (csv) { /* a row of its own: the counters in WHY */
		char pidt[16], ctr[256];
		int n = 0;
		for (int i = 0; i < ZL_SC_N; i++)
			n += snprintf(ctr + n, sizeof(ctr) - (size_t)n, "%s%s=%" PRIu64, i ? ";" : "",
				      names[i], s->ctr[i]);
		snprintf(pidt, sizeof(pidt), "%d", pid);
		const char *c[] = { pidt, comm, "-", "-", "server", name, "-", "server", "-", "-", ctr };
		row(c, 11);
		return;
	}
	sep();
	printf("server pid %d (%s) %s:", pid, comm, name);
	for (int i = 0; i < ZL_SC_N; i++)
		printf(" %s %" PRIu64, names[i], s->ctr[i]);
	printf("\n");
	listed++;
}

static void show_channel(int pid, const char *comm, const struct zlss_slot *s)
{
	if (only_kernel || only_ring)
		return;
	char pidt[16], out[24], in[24], msgs[64];
	const char *name = s->name;
	uint64_t ms = s->ctr[ZL_CC_MSGS_SENT], bs = s->ctr[ZL_CC_BYTES_SENT],
		 mr = s->ctr[ZL_CC_MSGS_RECV], br = s->ctr[ZL_CC_BYTES_RECV];
	if (csv) {
		snprintf(pidt, sizeof(pidt), "%d", pid);
		snprintf(out, sizeof(out), "%" PRIu64, bs);
		snprintf(in, sizeof(in), "%" PRIu64, br);
		snprintf(msgs, sizeof(msgs), "msgs_sent=%" PRIu64 ";msgs_recv=%" PRIu64, ms, mr);
		const char *c[] = { pidt, comm, "-", "-", "channel", name, "-", "channel", out, in, msgs };
		row(c, 11);
		return;
	}
	sep();
	printf("channel pid %d (%s) %s: sent %" PRIu64 " messages %" PRIu64 " bytes, received %" PRIu64
	       " messages %" PRIu64 " bytes\n", pid, comm, name, ms, bs, mr, br);
	listed++;
}

struct page_ctx {
	int pid;
	const char *comm;
};

static void show_slot(const struct zlss_slot *s, void *arg)
{
	const struct page_ctx *c = arg;
	if (s->type == ZL_ST_SOCKET)
		show_socket(c->pid, c->comm, s);
	else if (s->type == ZL_ST_SERVER)
		show_server(c->pid, c->comm, s);
	else if (s->type == ZL_ST_CHANNEL)
		show_channel(c->pid, c->comm, s);
}

/* pid as the process sees itself (the last of NSpid: it may live in a pid
 * namespace of its own), which its page says */
static int32_t own_pid(int pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	FILE *f = fopen(path, "r");
	int32_t in = pid;
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "NSpid:", 6)) {
			char *t = strrchr(line, '\t');
			in = t ? (int32_t)strtol(t + 1, NULL, 10) : pid;
			break;
		}
	if (f)
		fclose(f);
	return in;
}

/* one status page of pid at fd; false if it is not a valid one */
static bool show_page(int pid, int fd, const char *comm)
{
	/* (a page is of this size: a larger file is read no further, so
	 * that no page can make us read more) */
	size_t len = 0, full = sizeof(struct zl_status_hdr) +
				(size_t)ZL_STATUS_SLOTS * sizeof(struct zl_status_slot);
	const void *h = map_memfd(pid, fd, ZL_STATUS_NAME, full, &len);
	if (!h)
		return false;
	struct page_ctx c = { pid, comm };
	int ok = zlss_page(h, len, own_pid(pid), show_slot, &c);
	munmap((void *)h, len);
	return ok;
}

/* every status page of pid; the number of valid ones */
static int show_pid(int pid)
{
	char path[64], comm[64] = "?";
	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	FILE *f = fopen(path, "r");
	if (f) {
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(f);
	}
	char cl[64];
	zlss_clean(cl, comm, sizeof(cl));
	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int pages = 0;
	bool net = false;
	struct dirent *e;
	char link[128], want[64];
	snprintf(want, sizeof(want), "/memfd:%s (deleted)", ZL_STATUS_NAME);
	ino_t seen[16]; /* (a page at many fds is read once) */
	int nseen = 0;
	while ((e = readdir(d))) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);
		if (*end || fd < 0 || !fd_link(pid, (int)fd, link, sizeof(link)) || strcmp(link, want))
			continue;
		struct stat st;
		snprintf(path, sizeof(path), "/proc/%d/fd/%ld", pid, fd);
		bool again = false;
		if (!stat(path, &st))
			for (int i = 0; i < nseen; i++)
				again |= seen[i] == st.st_ino;
		if (again)
			continue;
		if (nseen == 16) {
			fprintf(stderr, "zl-ss: pid %d: more than 16 status pages: the rest skipped\n",
				pid);
			break;
		}
		seen[nseen++] = st.st_ino;
		if (!net) { /* the addresses, from the process's own namespace
			     * (read once for all the processes in it) */
			static ino_t ns_read;
			struct stat ns;
			snprintf(path, sizeof(path), "/proc/%d/ns/net", pid);
			bool known = !stat(path, &ns);
			if (!known || ns.st_ino != ns_read) {
				nks = 0;
				read_inet(pid, "tcp", "tcp", false);
				read_inet(pid, "tcp6", "tcp6", true);
				read_unix(pid);
				ks_sort();
				tcp_bytes(AF_INET); /* (ours: the same namespace, mostly) */
				tcp_bytes(AF_INET6);
				ns_read = known ? ns.st_ino : 0;
			}
			net = true;
		}
		if (show_page(pid, (int)fd, cl))
			pages++;
		else
			fprintf(stderr, "zl-ss: pid %d: fd %ld is not a status page it could have "
				"written: skipped\n", pid, fd);
	}
	closedir(d);
	return pages;
}

int main(int argc, char **argv)
{
	if (zl_cli_version(argc, argv, "zl-ss", zl_version()))
		return 0;
	static const struct option lo[] = {
		{ "pid", required_argument, NULL, 'p' }, { "kernel", no_argument, NULL, 'k' },
		{ "switched", no_argument, NULL, 's' },      { "csv", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },      { "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	long only_pid = -1;
	int o;
	opterr = 0;
	while ((o = getopt_long(argc, argv, "p:ksh", lo, NULL)) != -1) {
		char *end;
		switch (o) {
		case 'p':
			errno = 0;
			only_pid = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || only_pid <= 0 || only_pid > 4194304) {
				fprintf(stderr, "zl-ss: --pid: '%s' is not a process id (zl-ss --help)\n",
					optarg);
				return 2;
			}
			break;
		case 'k': only_kernel = true; break;
		case 's': only_ring = true; break;
		case 'c':
			csv = true;
			if (strcmp(optarg, "-") && !freopen(optarg, "w", stdout)) {
				fprintf(stderr, "zl-ss: --csv: cannot write '%s': %s\n", optarg,
					strerror(errno));
				return 2;
			}
			break;
		case 'h': fputs(usage_text, stdout); return 0;
		default:
			if (optopt && optopt != 'p')
				fprintf(stderr, "zl-ss: bad option '-%c' (zl-ss --help)\n", optopt);
			else
				fprintf(stderr, "zl-ss: bad or incomplete option '%s' (zl-ss --help)\n",
					argv[optind - 1]);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "zl-ss: unexpected argument '%s' (zl-ss --help)\n", argv[optind]);
		return 2;
	}
	if (only_kernel && only_ring) {
		fprintf(stderr, "zl-ss: --kernel and --switched exclude each other (zl-ss --help)\n");
		return 2;
	}
	if (csv)
		header();
	if (only_pid > 0) {
		if (show_pid((int)only_pid) < 0) {
			fprintf(stderr, "zl-ss: pid %ld: its fds cannot be read (%s)\n", only_pid,
				strerror(errno));
			return 1;
		}
		return 0;
	}
	DIR *d = opendir("/proc");
	if (!d) {
		fprintf(stderr, "zl-ss: /proc: %s\n", strerror(errno));
		return 1;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (!*end && pid > 0)
			show_pid((int)pid); /* (other uids' fds cannot be read: not ours to list) */
	}
	closedir(d);
	return 0;
}
