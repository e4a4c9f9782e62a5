/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for what a switched socket of the preload reads from
 * its peer (src/preload/sock.c): the fuzzer is the peer. It stores
 * anything anywhere in the shared header (positions, kbytes, states, end
 * and reset flags, sleeper counts), writes ring bytes, and sends bytes on
 * the kernel stream (wake-up records, or data before a switch), between
 * our reads, writes, readiness checks and shutdowns, all nonblocking. No
 * call may crash, overflow, block, or return more than it was asked for;
 * readiness has only the bits that poll can report. Input format in
 * fuzz_preload.h.
 */
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "fuzz_preload.h"
#include "preload.h"
#include "sockutil.h"

#define RING 4096u

static size_t take(const uint8_t **d, size_t *n, void *out, size_t k)
{
	size_t c = k < *n ? k : *n;
	memset(out, 0, k);
	memcpy(out, *d, c);
	*d += c;
	*n -= c;
	return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool init;
	static uint8_t buf[3 * 256 + 65536];
	if (!init) {
		fuzz_preload_init();
		signal(SIGPIPE, SIG_IGN);
		init = true;
	}
	uint8_t hd[2];
	if (take(&data, &size, hd, 2) < 2)
		return 0;
	int side = hd[0] & 1, sp[2];
	size_t len = ZP_HDR + 2 * (size_t)RING;
	int mem = zl_memfd_sealed("fuzz", len);
	if (mem < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp)) {
		if (mem >= 0)
			close(mem);
		return 0;
	}
	struct zsock *z = zp_map(mem, RING, side, -1);
	uint8_t *peer = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, mem, 0);
	FUZZ_ASSERT(z && peer != MAP_FAILED);
	if (side == 0) { /* a client that proved its server */
		z->fam = mmap(NULL, sizeof(*z->fam), PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		FUZZ_ASSERT(z->fam != MAP_FAILED);
		atomic_store(&z->fam->state, ZP_PROVEN);
	}
	z->mem = mem;
	z->fd = sp[0];
	z->is_unix = hd[1] & 1;
	atomic_store(&z->o->nonblock, true);
	zp_set(sp[0], z);
	uint8_t *peer_ring = peer + ZP_HDR + (size_t)(1 - side) * RING;
	int peer_fd = sp[1];
	while (size) {
		uint8_t op = data[0] % OP_COUNT;
		data++;
		size--;
		uint8_t a[8];
		uint16_t k16;
		ssize_t r;
		switch (op) {
		case OP_POKE32:
		case OP_POKE64: {
			take(&data, &size, &k16, 2);
			size_t w = op == OP_POKE32 ? 4 : 8, off = (k16 % ZP_HDR) & ~(w - 1);
			take(&data, &size, a, w);
			if (w == 4)
				__atomic_store_n((uint32_t *)(peer + off), *(uint32_t *)a, __ATOMIC_RELEASE);
			else
				__atomic_store_n((uint64_t *)(peer + off), *(uint64_t *)a, __ATOMIC_RELEASE);
			break;
		}
		case OP_RING: {
			take(&data, &size, &k16, 2);
			take(&data, &size, a, 1);
			size_t n = take(&data, &size, buf, a[0]);
			for (size_t i = 0; i < n; i++)
				peer_ring[(k16 + i) % RING] = buf[i];
			break;
		}
		case OP_KERNEL:
			take(&data, &size, a, 1);
			if (peer_fd >= 0)
				send(peer_fd, data, a[0] < size ? a[0] : size, MSG_DONTWAIT | MSG_NOSIGNAL);
			data += a[0] < size ? a[0] : size;
			size -= a[0] < size ? a[0] : size;
			break;
		case OP_RECV: {
			take(&data, &size, &k16, 2);
			take(&data, &size, a, 1);
			size_t n = k16 % sizeof(buf);
			struct iovec v = { buf, n };
			int fl = MSG_DONTWAIT | (a[0] & 1 ? MSG_PEEK : 0) | (a[0] & 2 ? MSG_WAITALL : 0);
			r = zp_recv(z, &v, 1, fl);
			FUZZ_ASSERT(r >= -1 && r <= (ssize_t)n);
			break;
		}
		case OP_READV: {
			take(&data, &size, a, 3);
			struct iovec v[3] = { { buf, a[0] }, { buf + 256, a[1] }, { buf + 512, a[2] } };
			r = zp_recv(z, v, 3, MSG_DONTWAIT);
			FUZZ_ASSERT(r >= -1 && r <= (ssize_t)a[0] + a[1] + a[2]);
			break;
		}
		case OP_SEND: {
			take(&data, &size, &k16, 2);
			size_t n = k16 % sizeof(buf);
			struct iovec v = { buf, n };
			r = zp_send(z, &v, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
			FUZZ_ASSERT(r >= -1 && r <= (ssize_t)n);
			break;
		}
		case OP_READY: {
			take(&data, &size, a, 1);
			short want = (short)((a[0] & 1 ? POLLIN : 0) | (a[0] & 2 ? POLLOUT : 0) |
					     (a[0] & 4 ? POLLRDHUP : 0));
			short got = zp_ready(z, want);
			FUZZ_ASSERT(!(got & ~(want | POLLERR | POLLHUP)));
			break;
		}
		case OP_FIONREAD:
			FUZZ_ASSERT(zp_fionread(z) >= 0);
			break;
		case OP_PEER_END:
			take(&data, &size, a, 1);
			if (peer_fd >= 0 && (a[0] & 1)) {
				close(peer_fd);
				peer_fd = -1;
			} else if (peer_fd >= 0) {
				shutdown(peer_fd, SHUT_WR);
			}
			break;
		case OP_SHUTDOWN:
			take(&data, &size, a, 1);
			zp_shutdown(z, a[0] % 3);
			break;
		case OP_DRAIN:
			zp_drain(z);
			zp_poll_join(z);
			break;
		}
	}
	zp_forget(sp[0]); /* the last close: our end of stream or reset */
	close(sp[0]);
	if (peer_fd >= 0)
		close(peer_fd);
	munmap(peer, len);
	return 0;
}
