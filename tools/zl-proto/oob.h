/* SPDX-License-Identifier: MIT */
/* Out-of-band rendezvous over TCP: node 0 listens, the others connect; every
 * exchange is an all-gather through node 0 with a deadline, so a node that
 * dies or never answers ends the run with a message instead of a hang. */
#ifndef ZL_PROTO_OOB_H
#define ZL_PROTO_OOB_H

#include <stddef.h>
#include <stdint.h>

struct oob {
	int me, n;
	int fd[256]; /* node 0: one per other node; others: fd[0] to node 0 */
	uint64_t tag; /* every node's parameters must agree */
	uint8_t quiet[256]; /* oob_watch: sent its next part early, not watched */
};

/* Listen on HOST:PORT (port 0: any); *port gets the port. fd or -errno. */
int oob_listen(const char *hostport, int *port);
/* Join: node 0 accepts n-1 nodes on lfd (or listens on coord itself when
 * lfd < 0); others connect to coord, retrying until the deadline. 0 or
 * -errno (message printed). */
int oob_join(struct oob *o, int me, int n, const char *coord, int lfd, uint64_t tag,
	     double timeout);
/* Every node gives len bytes (the same len on every node or not: each
 * part carries its own); every node gets all parts concatenated in node
 * order into a malloc'd *all (lens[i] each, lens may be NULL). 0 or -errno
 * (message printed, naming the node that failed). what names the step. */
int oob_gather(struct oob *o, const void *mine, uint32_t len, void **all, uint32_t *lens,
	       double timeout, const char *what);
int oob_barrier(struct oob *o, double timeout, const char *what);
/* Between exchanges: wait up to ms for a node to close its connection
 * (it died or failed). 0, or -EPIPE with the node named on stderr. */
int oob_watch(struct oob *o, int ms, const char *what);
void oob_close(struct oob *o);

#endif
