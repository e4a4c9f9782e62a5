/* SPDX-License-Identifier: MIT */
/*
 * A raw shm:// peer for the hostile tests, written from the wire formats
 * (src/transport/shm/shm_wire.h, src/server/wire.h, src/core/ring.h), not
 * with the library's client code: it connects to the rendezvous socket,
 * sends its hello with a sealed memfd of its own, maps the peer's receive
 * ring from the memfd in the answer and writes records into it by hand
 * (ring.h's writer; word grain, as its hello does not ask for lines). It
 * does whatever the test wants with the fds and the shared pages.
 */
#ifndef ZL_RAWSHM_H
#define ZL_RAWSHM_H

#include "chanlib.h"
#include "ring.h"
#include "shm_wire.h"
#include "wire.h"

struct raw_shm {
	int sock;                 /* the connected SEQPACKET socket */
	int fd;                   /* our memfd: control page and the ring we receive on */
	uint8_t *map;             /* its mapping (never populated) */
	size_t map_len;
	struct shm_hello peer;    /* the answer */
	int peer_fd;              /* the peer's memfd (kept open), -1 if refused */
	uint8_t *peer_map;        /* its control page and ring */
	size_t peer_len;
	struct zl_ring_tx tx;     /* writes into the peer's ring */
};

static inline struct shm_ctl *raw_ctl(uint8_t *map) { return (struct shm_ctl *)map; }

/* Connect to shm url and send a hello offering a ring of ring bytes (a real
 * sealed memfd of CTL_SIZE + ring bytes; it costs nothing until touched). */
void raw_shm_hello(struct raw_shm *r, const char *url, uint32_t ring);
/* Receive the answer within timeout_us: 0 and the peer's ring mapped, or
 * the refusal's status (-EPERM, -EMSGSIZE, ...). FAIL if none comes. */
int raw_shm_answer(struct raw_shm *r, int64_t timeout_us);
/* Both (when the other side answers on its own, e.g. a zl_server). */
int raw_shm_connect(struct raw_shm *r, const char *url, uint32_t ring, int64_t timeout_us);
/* Write one record (type, len bytes of p) into the peer's ring and send a
 * wake-up record. FAIL if there is no room. */
void raw_shm_put(struct raw_shm *r, const void *p, uint32_t len, uint8_t type);
/* Send wake-up records without blocking until the socket takes no more,
 * for up to ms milliseconds (waiting for room in between): how many went. */
long raw_shm_flood(int sock, int ms);
/* Clear O_NONBLOCK (F_SETFL 0) on fd: the peer shares its status flags. */
void raw_clear_flags(int fd);
void raw_shm_close(struct raw_shm *r);

/* A raw zl_server client on top (src/server/wire.h): its srv_hello as the
 * first channel message, then the welcome with its two fds (the flag array
 * and the client's page) over the socket. */
struct raw_srv {
	struct raw_shm s;
	struct srv_welcome w;
	int fds[2];               /* -1 if absent */
	uint8_t *page;            /* the client page, mapped */
};
/* 0, or the status of a refusal (transport hello or welcome). */
int raw_srv_join(struct raw_srv *c, const char *url, uint32_t ring, int64_t timeout_us);
void raw_srv_close(struct raw_srv *c);

#endif
