/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the preload's rendezvous messages (zp_wire_parse):
 * any data and control bytes; the verdict is consistent with what it
 * returns, every fd the control bytes hold is reported (at most
 * ZP_WIRE_MAXFDS), and nothing outside the given bytes is read (exact-size
 * copies: ASan sees over-reads). Input format in fuzz_preload.h.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fuzz.h"
#include "fuzz_preload.h"
#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 5)
		return 0;
	uint32_t magic = data[0] & 1 ? ZP_ANSWER_MAGIC : ZP_HELLO_MAGIC;
	int want = data[1] % 3, flags = (data[2] & 1 ? MSG_TRUNC : 0) | (data[2] & 2 ? MSG_CTRUNC : 0);
	size_t n = (size_t)data[3] | (size_t)data[4] << 8;
	data += 5;
	size -= 5;
	if (n > size)
		n = size;
	uint8_t *buf = malloc(n ? n : 1), *ctl = malloc(size - n ? size - n : 1);
	if (!buf || !ctl) {
		free(buf);
		free(ctl);
		return 0;
	}
	memcpy(buf, data, n);
	memcpy(ctl, data + n, size - n);
	struct zp_wire w;
	int fds[ZP_WIRE_MAXFDS], nf = -1;
	int r = zp_wire_parse(buf, (ssize_t)n, flags, size - n ? ctl : NULL, size - n, magic, want,
			      &w, fds, &nf);
	FUZZ_ASSERT(r == 0 || r == -1);
	FUZZ_ASSERT(nf >= 0 && nf <= ZP_WIRE_MAXFDS);
	if (r == 0) {
		FUZZ_ASSERT(n == sizeof(w) && nf == want && !flags);
		FUZZ_ASSERT(w.magic == magic && w.version == ZP_WIRE_VERSION);
		FUZZ_ASSERT(zp_ring_ok(w.ring_size) && w.pid > 0 && w.sock_fd >= 0 && w.rdv_fd >= 0);
		FUZZ_ASSERT(w.sock_ino && w.rdv_ino);
		for (int i = 0; i < nf; i++)
			FUZZ_ASSERT(fds[i] >= 0);
	}
	free(buf);
	free(ctl);
	return 0;
}
