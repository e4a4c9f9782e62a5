/* SPDX-License-Identifier: MIT */
/*
 * Small blocking TCP client for the redis and memcached protocol clients:
 * TCP_NODELAY, a timeout on the connect and on every read and write
 * (SO_RCVTIMEO/SO_SNDTIMEO), one read buffer, one write buffer, both
 * allocated at connect time (nothing is allocated per operation).
 */
#ifndef ZLY_NET_H
#define ZLY_NET_H

#include <stddef.h>
#include <stdint.h>

struct conn {
	int fd;
	char *rbuf, *wbuf;
	size_t rcap, rpos, rlen; /* unread bytes: rbuf[rpos, rlen) */
	size_t wcap, wlen;       /* the request being built */
	char err[160];           /* the last error, for be_error */
};

/* "HOST:PORT" ([v6]:PORT too). 0 or -errno, with c->err set. Retries
 * refused connections until the timeout: servers may still be starting. */
int conn_open(struct conn *c, const char *hostport, size_t rcap, size_t wcap,
	      int64_t timeout_us);
void conn_close(struct conn *c);

/* Build the request in wbuf; conn_send sends it (and empties wbuf). */
int conn_put(struct conn *c, const void *p, size_t n); /* -EMSGSIZE if full */
int conn_putf(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int conn_put_u64(struct conn *c, uint64_t v);
int conn_send(struct conn *c);

/* The next line without its CRLF, valid until the next read call.
 * -EPROTO if a line does not fit the buffer. */
int conn_line(struct conn *c, const char **line, size_t *len);
/* Consume n bytes followed by CRLF (a value we only count). */
int conn_skip_data(struct conn *c, size_t n);

/* n bytes followed by CRLF, in place (valid until the next read call);
 * n + 2 must fit the read buffer. */
int conn_data(struct conn *c, size_t n, const char **data);

/* Set c->err and return rc. */
int conn_fail(struct conn *c, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
