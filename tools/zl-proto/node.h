/* SPDX-License-Identifier: MIT */
/* What main.c calls: one node of a protocol run, one end of an experiment. */
#ifndef ZL_PROTO_NODE_H
#define ZL_PROTO_NODE_H

#include <stdint.h>

#include "params.h"
#include "stats.h"

/* Run node me of the protocol run p on device dev; node 0 takes the
 * rendezvous listener lfd (or listens on p->coord when lfd < 0). 0, or
 * -errno after a message on stderr. Node 0 prints the result. */
int proto_run(const struct params *p, int me, const char *dev, int lfd);
/* The same for the verbs experiments (--mode other than proto). */
int lat_run(const struct params *p, int me, const char *dev, int lfd);
/* Every node must be started with the same parameters: their hash. */
uint64_t params_tag(const struct params *p);
/* Append r to p->csv (a header first when the file is new or empty). */
int result_write_csv(const struct params *p, const struct result *r);

#endif
