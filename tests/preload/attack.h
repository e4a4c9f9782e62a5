/* SPDX-License-Identifier: MIT */
/*
 * attack.h - shared by attack_test.c (the victims, preloaded) and
 * attack_peer.c (the attacker, without the preload): sizes, addresses and
 * the rendezvous names.
 */
#ifndef ZL_ATTACK_H
#define ZL_ATTACK_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#define RING (64u << 10) /* the attacker's rings */
#define REQ (8u << 10)   /* an exchange: a request of REQ bytes, */
#define RESP (32u << 10) /* its answer of RESP */

/* 127.0.0.1:port, or the Unix socket at path */
socklen_t addr_of(int fam, uint16_t port, const char *path, struct sockaddr_storage *ss);
/* the preload's rendezvous name for a listener (rendezvous.c) */
socklen_t rdv_name(int fam, uint16_t port, const char *path, struct sockaddr_un *u);
/* a socket's inode, 0 if none */
uint64_t ino_of(int fd);

#endif
