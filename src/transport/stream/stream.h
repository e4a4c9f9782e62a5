/* SPDX-License-Identifier: MIT */
/*
 * tcp:// and unix:// share one channel: length-prefixed frames over a
 * nonblocking stream socket.
 *
 * Wire format (all little-endian):
 *   hello, 16 bytes, sent by both sides right after connect/accept:
 *     "ZLST" | u16 ZL_PROTO_VERSION | u16 flags (0) | u64 max_msg
 *   frame: u32 payload length | payload
 * Each side rejects incoming frames above its own max_msg (-EPROTO) and
 * refuses to send frames above the peer's (-EMSGSIZE).
 */
#ifndef ZL_STREAM_H
#define ZL_STREAM_H

#include <stdbool.h>

#include "internal.h"

#define ZL_STREAM_MAGIC "ZLST"
#define ZL_STREAM_HELLO_LEN 16
/* hello flag: unix, the sender refuses us (another uid); the connection
 * closes after this hello */
#define ZL_STREAM_F_EPERM 1u

/* Wrap a connected, nonblocking socket whose handshake is done. Takes fd
 * (closes it on failure). */
int zl_stream_chan_new(int fd, bool is_unix, const struct zl_opts *o,
		       uint64_t peer_max_msg, zl_channel **out);

/* ppoll one fd until deadline (microsecond precision). Returns 1 ready
 * (*revents set if non-NULL), 0 on timeout or EINTR, or -errno. */
int zl_stream_poll(int fd, short events, int64_t deadline, short *revents);

#endif
