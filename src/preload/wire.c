/* SPDX-License-Identifier: MIT */
/* The rendezvous messages' checks (wire.h). Reads only the bytes it is
 * given, with every length checked before use: the fuzz target
 * fuzz_preload_wire feeds it arbitrary data and control bytes. */
#include <string.h>
#include <sys/socket.h>

#include "wire.h"

int zp_wire_parse(const void *buf, ssize_t n, int msg_flags, const void *ctl, size_t ctllen,
		  uint32_t magic, int want_fds, struct zp_wire *out, int *fds, int *nfds)
{
	const unsigned char *c = ctl;
	bool bad = false;
	*nfds = 0;
	/* every fd first (the caller closes them all), then the verdict */
	for (size_t off = 0; c && off + sizeof(struct cmsghdr) <= ctllen;) {
		struct cmsghdr h;
		memcpy(&h, c + off, sizeof(h));
		if (h.cmsg_len < CMSG_LEN(0) || h.cmsg_len > ctllen - off) {
			bad = true;
			break;
		}
		if (h.cmsg_level == SOL_SOCKET && h.cmsg_type == SCM_RIGHTS) {
			size_t k = (h.cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < k; i++) {
				int fd;
				memcpy(&fd, c + off + CMSG_LEN(0) + i * sizeof(int), sizeof(fd));
				if (*nfds < ZP_WIRE_MAXFDS)
					fds[(*nfds)++] = fd;
				else
					bad = true;
			}
		} else {
			bad = true; /* nothing else is ever sent */
		}
		off += CMSG_ALIGN(h.cmsg_len);
	}
	if (bad || n != (ssize_t)sizeof(*out) || (msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    *nfds != want_fds)
		return -1;
	memcpy(out, buf, sizeof(*out));
	if (out->magic != magic || out->version != ZP_WIRE_VERSION ||
	    !zp_ring_ok(out->ring_size) || out->pid <= 0 || out->sock_fd < 0 ||
	    out->rdv_fd < 0 || !out->sock_ino || !out->rdv_ino)
		return -1;
	for (int i = 0; i < *nfds; i++)
		if (fds[i] < 0)
			return -1;
	return 0;
}
