/* SPDX-License-Identifier: MIT */
/*
 * Writes the seed corpora of the preload's fuzz targets (formats in
 * fuzz_preload.h):
 *   gen_preload_corpus WIRE_DIR RING_DIR
 * Run it again after a change of struct zp_wire or struct zp_shared.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "fuzz_preload.h"
#include "preload.h"

static int g_rc;

static void put(const char *dir, const char *name, const void *p, size_t n)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n) {
		perror(path);
		g_rc = 1;
	}
	if (f)
		fclose(f);
}

/* ---- wire ---- */

static void wire(const char *dir, const char *name, int answer, int want, int flags,
		 const struct zp_wire *w, size_t wlen, int nfds, int ncmsg)
{
	unsigned char b[512];
	size_t n = 0;
	b[n++] = (unsigned char)answer;
	b[n++] = (unsigned char)want;
	b[n++] = (unsigned char)flags;
	b[n++] = (unsigned char)(wlen & 0xff);
	b[n++] = (unsigned char)(wlen >> 8);
	memcpy(b + n, w, wlen);
	n += wlen;
	for (int c = 0; c < ncmsg; c++) {
		struct cmsghdr h = { .cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds),
				     .cmsg_level = SOL_SOCKET, .cmsg_type = SCM_RIGHTS };
		memset(b + n, 0, CMSG_SPACE(sizeof(int) * (size_t)nfds));
		memcpy(b + n, &h, sizeof(h));
		for (int i = 0; i < nfds; i++) {
			int fd = 3 + i;
			memcpy(b + n + CMSG_LEN(0) + (size_t)i * sizeof(int), &fd, sizeof(fd));
		}
		n += CMSG_SPACE(sizeof(int) * (size_t)nfds);
	}
	put(dir, name, b, n);
}

/* ---- ring ---- */

static unsigned char g_b[4096];
static size_t g_n;

static void op(int o) { g_b[g_n++] = (unsigned char)o; }
static void u8(unsigned v) { g_b[g_n++] = (unsigned char)v; }
static void u16(unsigned v) { u8(v & 0xff); u8(v >> 8); }
static void poke32(size_t off, uint32_t v)
{
	op(OP_POKE32);
	u16((unsigned)off);
	memcpy(g_b + g_n, &v, 4);
	g_n += 4;
}
static void poke64(size_t off, uint64_t v)
{
	op(OP_POKE64);
	u16((unsigned)off);
	memcpy(g_b + g_n, &v, 8);
	g_n += 8;
}
static void ring(unsigned pos, const char *s)
{
	op(OP_RING);
	u16(pos);
	u8((unsigned)strlen(s));
	memcpy(g_b + g_n, s, strlen(s));
	g_n += strlen(s);
}
static void kern(const char *s, size_t n)
{
	op(OP_KERNEL);
	u8((unsigned)n);
	memcpy(g_b + g_n, s, n);
	g_n += n;
}
static void recv_(unsigned len, unsigned flags)
{
	op(OP_RECV);
	u16(len);
	u8(flags);
}

#define D(side, f) (offsetof(struct zp_shared, dir) + (size_t)(side) * sizeof(struct zp_dir) + \
		    offsetof(struct zp_dir, f))
#define H(f) offsetof(struct zp_shared, f)

static void seq(const char *dir, const char *name, int side)
{
	unsigned char out[4098];
	out[0] = (unsigned char)side;
	out[1] = 0;
	memcpy(out + 2, g_b, g_n);
	put(dir, name, out, g_n + 2);
	g_n = 0;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: gen_preload_corpus WIRE_DIR RING_DIR\n");
		return 2;
	}
	const char *wd = argv[1], *rd = argv[2];
	struct zp_wire h = { ZP_HELLO_MAGIC, ZP_WIRE_VERSION, 256 * 1024, 1234, 5, 512, 7777, 8888 };
	struct zp_wire a = h;
	a.magic = ZP_ANSWER_MAGIC;
	wire(wd, "hello", 0, 1, 0, &h, sizeof(h), 1, 1);
	wire(wd, "answer", 1, 0, 0, &a, sizeof(a), 0, 0);
	wire(wd, "answer_fd", 1, 0, 0, &a, sizeof(a), 1, 1);
	wire(wd, "hello_short", 0, 1, 0, &h, 20, 1, 1);
	wire(wd, "hello_trunc", 0, 1, 2, &h, sizeof(h), 1, 1);
	wire(wd, "hello_2cmsg", 0, 1, 0, &h, sizeof(h), 1, 2);
	wire(wd, "hello_9fds", 0, 1, 0, &h, sizeof(h), 9, 1);
	struct zp_wire bad = h;
	bad.ring_size = 12288;
	wire(wd, "hello_npot", 0, 1, 0, &bad, sizeof(bad), 1, 1);
	bad = h;
	bad.pid = -1;
	wire(wd, "hello_pid", 0, 1, 0, &bad, sizeof(bad), 1, 1);

	/* the peer (client) switches after 3 kernel bytes, then 5 ring bytes */
	kern("abc", 3);
	poke64(D(0, kbytes), 3);
	poke32(D(0, state), 1);
	ring(0, "hello");
	poke64(D(0, tail), 5);
	recv_(100, 0);
	recv_(100, 0);
	op(OP_SEND);
	u16(300);
	op(OP_READY);
	u8(7);
	seq(rd, "server_switch", 1);
	/* the server switches (we are the client) and ends its stream */
	ring(0, "data!");
	poke32(D(1, state), 1);
	poke64(D(1, tail), 5);
	poke32(D(1, closed), 1);
	recv_(3, 1);
	recv_(10, 2);
	recv_(10, 0);
	op(OP_FIONREAD);
	seq(rd, "client_eof", 0);
	/* lies: kbytes beyond the kernel stream's end; a tail past the ring;
	 * bytes after the end; a head ahead of our tail */
	kern("ab", 2);
	poke64(D(0, kbytes), 1ull << 63);
	poke32(D(0, state), 1);
	op(OP_PEER_END);
	u8(0);
	recv_(10, 0);
	recv_(10, 0);
	seq(rd, "lie_kbytes", 1);
	poke32(D(0, state), 1);
	poke64(D(0, tail), 3 * 4096);
	recv_(10, 0);
	op(OP_READY);
	u8(3);
	seq(rd, "lie_tail", 1);
	poke32(D(0, state), 1);
	poke64(D(0, tail), 2);
	poke32(D(0, closed), 1);
	recv_(1, 0);
	poke64(D(0, tail), 9);
	recv_(10, 0);
	seq(rd, "lie_after_end", 1);
	poke32(H(client_ok), 1);
	op(OP_SEND);
	u16(100);
	poke64(D(1, head), 5000);
	op(OP_SEND);
	u16(100);
	seq(rd, "lie_head", 1);
	/* the peer switches, wakes us twice, goes back to the kernel stream
	 * (for fd passing or urgent data) and sends there again */
	kern("ab", 2);
	poke64(D(0, kbytes), 2);
	poke32(D(0, state), 1);
	ring(0, "xyz");
	poke64(D(0, tail), 3);
	kern("\0\0", 2);
	poke64(D(0, back_tail), 3);
	poke64(D(0, kresume), 4);
	poke32(D(0, state), 2);
	kern("DATA", 4);
	recv_(10, 0);
	recv_(10, 0);
	op(OP_DRAIN);
	recv_(10, 0);
	recv_(10, 0);
	op(OP_SEND);
	u16(10);
	seq(rd, "peer_back", 1);
	/* the peer's reset, its wake-ups, our shutdown */
	poke32(D(0, state), 1);
	poke32(H(reset[0]), 1);
	kern("\0\0\0", 3);
	op(OP_DRAIN);
	recv_(5, 0);
	recv_(5, 0);
	op(OP_SHUTDOWN);
	u8(2);
	op(OP_SEND);
	u16(1);
	seq(rd, "reset", 1);
	return g_rc;
}
