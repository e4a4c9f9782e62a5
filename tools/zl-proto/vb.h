/* SPDX-License-Identifier: MIT */
/* The libibverbs calls zl-proto shares between the protocol runs and the
 * verbs experiments: open a device, create and connect QPs. */
#ifndef ZL_PROTO_VB_H
#define ZL_PROTO_VB_H

#include <infiniband/verbs.h>
#include <stdint.h>

struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_device_attr attr;
	struct ibv_port_attr port;
	union ibv_gid gid;
	int gid_index, port_num;
	char name[64];
};

/* What a QP's peer needs to know (sent through the rendezvous). */
struct ep {
	uint16_t node, thread, peer, pthread;
	uint32_t requester, qpn, psn, rkey;
	uint64_t addr, len;
	uint16_t lid;
	uint8_t gid[16];
	uint8_t pad[6];
};

/* name "" or NULL: the first device. gid_index < 0: an IPv4-mapped RoCE
 * GID where the link is Ethernet, else 0. 0 or -errno (message printed). */
int dev_open(struct dev *d, const char *name, int port, int gid_index);
void dev_close(struct dev *d);
struct ibv_qp *qp_create(struct dev *d, enum ibv_qp_type type, struct ibv_cq *scq,
			 struct ibv_cq *rcq, uint32_t max_send, uint32_t max_recv,
			 uint32_t max_inline);
struct qp_opts {
	int timeout, retry, rd_atomic;
};
/* RESET -> INIT -> RTR -> RTS against the remote end r (UD: r is unused
 * but for the psn). 0 or -errno (message printed). */
int qp_connect(struct dev *d, struct ibv_qp *qp, const struct ep *local, const struct ep *r,
	       const struct qp_opts *o);
void ep_fill(struct ep *e, const struct dev *d, const struct ibv_qp *qp, uint32_t psn);
/* An address handle for UD sends to r. */
struct ibv_ah *ah_create(struct dev *d, const struct ep *r);
const char *qp_state_name(enum ibv_qp_state s);

#endif
