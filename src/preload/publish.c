/* SPDX-License-Identifier: MIT */
/* What the preload publishes for zl-ss (src/core/status.h): per fd, a
 * preloaded socket's path, with its rings' memfd and its side's own page
 * (zl-ss counts the bytes from them), or why it stays a kernel socket.
 * Written when that changes (a connect, an accept, a dup, a proof, a way
 * back, a close), never by a read or a write. */
#include <stdatomic.h>

#include "preload.h"
#include "status.h"

/* fd's slot, opened for writing as a socket in state st; NULL: none */
static struct zl_status_slot *open_slot(int fd, uint16_t st)
{
	struct zl_status_slot *s = zl_status_slot(fd);
	if (!s)
		return NULL;
	uint64_t ino = zp_ino(fd); /* (before the slot is held) */
	zl_status_begin(s);
	zl_status_type(s, ZL_ST_SOCKET);
	s->state = st;
	s->fd = fd;
	s->mem_fd = s->own_fd = -1;
	s->ino = ino;
	s->why[0] = '\0';
	return s;
}

void zp_pub_socket(int fd, struct zsock *z)
{
	struct zl_status_slot *s =
		open_slot(fd, z->xh ? ZL_SS_RDMA
			  : atomic_load_explicit(&z->pending, memory_order_relaxed) ? ZL_SS_PENDING
										      : ZL_SS_RING);
	if (!s)
		return;
	s->mem_fd = z->xh ? -1 : z->mem;
	s->own_fd = z->own_fd;
	s->side = (uint8_t)z->side;
	zl_status_end(s);
}

void zp_pub_kernel(int fd, const char *why)
{
	struct zl_status_slot *s = open_slot(fd, ZL_SS_KERNEL);
	if (!s)
		return;
	zl_status_str(s->why, sizeof(s->why), why);
	zl_status_end(s);
}
