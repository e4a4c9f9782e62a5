/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the channel tests. Every channel test takes the transport
 * scheme as argv[1] ("shm", "tcp", "unix", ...) and runs the same code on
 * each: tl_listen() makes a unique URL, listens (exit 77 if the transport is
 * not built), and returns the URL peers connect to.
 */
#ifndef ZL_CHANLIB_H
#define ZL_CHANLIB_H

#include <pthread.h>
#include <sys/types.h>

#include "testlib.h"

/* argv[1], or exit 77/1 with a usage message. */
const char *tl_scheme_arg(int argc, char **argv);

/* A unique URL for scheme: shm://zltest-PID-N, tcp://127.0.0.1:0,
 * unix:///tmp/zltest-PID-N.sock, with "?params" appended if non-empty.
 * The environment variable ZL_TEST_URL_<scheme> (e.g. ZL_TEST_URL_rdma)
 * replaces the part before the parameters. */
void tl_make_url(const char *scheme, const char *params, char *buf, size_t cap);

/* Listen on a fresh URL. conn_url (cap >= 600) gets the URL to connect to
 * (zl_listener_url, plus params). Exits 77 on -EPROTONOSUPPORT. */
zl_listener *tl_listen(const char *scheme, const char *params, char *conn_url, size_t cap);

/* The URL to connect to, from a listener's URL lurl: params and
 * ZL_TEST_CONNECT_<scheme> appended. */
void tl_conn_url(const char *scheme, const char *params, const char *lurl, char *conn_url,
		 size_t cap);

zl_channel *tl_accept(zl_listener *l, int64_t timeout_us);
zl_channel *tl_connect(const char *url, int64_t timeout_us);

/* An in-process connected pair (a helper thread connects while the caller
 * accepts; joined before return). The listener is closed. */
void tl_pair(const char *scheme, const char *params, zl_channel **server, zl_channel **client);

/* Fork a peer process that runs fn(arg) and exits with its return value.
 * The child dies with the parent (PR_SET_PDEATHSIG) and has its own
 * watchdog of `watchdog_s` seconds. */
pid_t tl_fork(int (*fn)(void *), void *arg, unsigned watchdog_s);

/* Wait up to timeout_ms for the child. Returns its exit code, 128+signal if
 * killed by a signal, or -1 on timeout (the child is then killed). */
int tl_wait_child(pid_t pid, int timeout_ms);

/* Same as tl_wait_child but FAIL unless it exits 0. */
void tl_reap_ok(pid_t pid, int timeout_ms);

/* Threads with a bounded join. */
struct tl_thread {
	pthread_t th;
	void *(*fn)(void *);
	void *arg;
	void *ret;
	int done; /* atomic */
};
void tl_thread_start(struct tl_thread *t, void *(*fn)(void *), void *arg);
/* FAIL if the thread did not finish within timeout_ms. */
void *tl_thread_join(struct tl_thread *t, int timeout_ms);

/* A pipe for simple cross-process signalling with bounded waits. */
struct tl_pipe {
	int rd, wr;
};
void tl_pipe_init(struct tl_pipe *p);
void tl_pipe_put(struct tl_pipe *p, const void *buf, size_t len);
/* FAIL if len bytes do not arrive within timeout_ms. */
void tl_pipe_get(struct tl_pipe *p, void *buf, size_t len, int timeout_ms);

/* A raw socket connected to the listener behind url (shm: the abstract
 * SOCK_SEQPACKET rendezvous socket; tcp, unix: a plain stream socket),
 * without any handshake. Returns the fd. */
int tl_raw_connect(const char *url);
/* sendmsg len bytes with nfds file descriptors attached (SCM_RIGHTS). */
void tl_send_fds(int sock, const void *buf, size_t len, const int *fds, int nfds);

/* A URL of scheme where nobody listens. */
void tl_dead_url(const char *scheme, char *buf, size_t cap);

/* Resource usage of this process. */
long tl_rss_kb(void);
int tl_fd_count(void);
/* A field of /proc/PID/status in kB ("VmRSS", "VmData", ...); pid 0: this
 * process. -1 if absent. */
long tl_status_kb(pid_t pid, const char *field);

/* Whether the peer of a raw socket closed it within timeout_ms (what it
 * sends meanwhile is read and dropped). */
bool tl_dropped(int sock, int timeout_ms);

/* Receive a message, FAIL unless it is exactly message id of length len
 * (pattern of tl_fill). buf must hold len bytes. */
void tl_recv_expect(zl_channel *ch, void *buf, size_t cap, size_t len, uint64_t id,
		    int64_t timeout_us);

/* Send the pattern of message id, FAIL unless zl_send returns 0. */
void tl_send_pattern(zl_channel *ch, size_t len, uint64_t id, int64_t timeout_us);

#endif
