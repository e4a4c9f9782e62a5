/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the zl_server tests: a server on its own thread with test
 * handlers, and a checked call.
 *   every type but the ones below: echo, each byte XOR the type (even
 *     types answer through zl_reply_reserve when it fits, odd ones through
 *     zl_reply)
 *   TL_T_DEFER: deferred, answered (echo) after the server's next poll
 *   TL_T_FAIL: the handler returns -EDOM without replying
 *   TL_T_NONE: no handler (-EOPNOTSUPP)
 *   TL_T_SLOW: echo after spinning busy_us (tl_srv.busy_us)
 */
#ifndef ZL_SRVLIB_H
#define ZL_SRVLIB_H

#include <stdatomic.h>

#include "chanlib.h"

#define TL_T_DEFER 7
#define TL_T_FAIL 8
#define TL_T_SLOW 9
#define TL_T_NONE 200

struct tl_srv {
	zl_server *srv;
	char url[600];
	struct tl_thread th;
	_Atomic int quit;
	int64_t busy_us;
	zl_req *deferred[4096];
	int ndeferred;
	uint8_t *buf;
	size_t cap;
};

/* Create a server (o may be NULL) listening on a fresh URL of scheme
 * (plus params), register the handlers, and serve on a thread. Exits 77 if
 * the transport is not built. */
void tl_srv_start(struct tl_srv *t, const char *scheme, const char *params,
		  const struct zl_server_opts *o);
/* Stop the thread (within 10 s) and close the server. */
void tl_srv_stop(struct tl_srv *t);

/* The echo a request of (type, data) gets. */
void tl_echo(int type, const void *in, size_t len, void *out);

/* Call with the pattern of id (len bytes) and check the echo. */
void tl_call_check(zl_client *c, int type, size_t len, uint64_t id, int64_t timeout_us);

zl_client *tl_client(const char *url, int64_t timeout_us);

/* Honest clients: threads calling with random types (1..4) and sizes
 * (< 600 B), checking every reply and timing every call, until *stop. */
struct tl_honest {
	const char *url;
	int id;
	_Atomic int *stop;
	struct tl_thread th;
	uint64_t calls, slow; /* slow: calls over TL_SLOW_US */
	int64_t worst_us;
};
void tl_honest_start(struct tl_honest *h, int n, const char *url, _Atomic int *stop);
/* Join them; FAIL if one made no call. Returns the worst call in us and
 * adds up the slow ones in *slow. */
int64_t tl_honest_join(struct tl_honest *h, int n, uint64_t *calls, uint64_t *slow);

/* Latency bounds of the server tests. A server held up by a stalled or
 * hostile client delays every call it holds up (by a close linger of
 * 100 ms, or timeouts of seconds), and keeps doing so; the scheduling noise
 * of a loaded 2-core host delays a call past 100 ms only now and then (but
 * then the calls of all three honest clients at once). So a test FAILs
 * when more than TL_SLOW_MAX calls were slower than its bound or any took
 * TL_SLOW_NEVER_US. Only at full speed: sanitizer builds
 * (ZL_TEST_SCALE < 1) run many times slower and only report. */
#define TL_SLOW_US 100000
#define TL_SLOW_MAX 3
#define TL_SLOW_NEVER_US 1000000
void tl_check_latency(const char *what, int64_t bound_us, int64_t worst_us, uint64_t slow);

#endif
