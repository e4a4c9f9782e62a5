/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "vb.h"

#define UD_QKEY 0x11111111u

static int ipv4_mapped(const union ibv_gid *g)
{
	static const uint8_t pre[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	return !memcmp(g->raw, pre, 12);
}

int dev_open(struct dev *d, const char *name, int port, int gid_index)
{
	int n = 0, i;
	memset(d, 0, sizeof(*d));
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || !n) {
		fprintf(stderr, "zl-proto: no RDMA device%s\n", list ? "" : " (libibverbs found none)");
		if (list)
			ibv_free_device_list(list);
		return -ENODEV;
	}
	for (i = 0; i < n && name && name[0] && strcmp(ibv_get_device_name(list[i]), name); i++)
		;
	if (i == n) {
		fprintf(stderr, "zl-proto: no RDMA device named %s (there are:", name);
		for (i = 0; i < n; i++)
			fprintf(stderr, " %s", ibv_get_device_name(list[i]));
		fprintf(stderr, ")\n");
		ibv_free_device_list(list);
		return -ENODEV;
	}
	snprintf(d->name, sizeof(d->name), "%s", ibv_get_device_name(list[i]));
	d->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!d->ctx || !(d->pd = ibv_alloc_pd(d->ctx))) {
		fprintf(stderr, "zl-proto: %s: cannot open: %s\n", d->name, strerror(errno));
		dev_close(d);
		return -ENODEV;
	}
	d->port_num = port;
	if (ibv_query_device(d->ctx, &d->attr) || ibv_query_port(d->ctx, (uint8_t)port, &d->port)) {
		fprintf(stderr, "zl-proto: %s: query: %s\n", d->name, strerror(errno));
		dev_close(d);
		return -ENODEV;
	}
	if (d->port.state != IBV_PORT_ACTIVE) {
		fprintf(stderr, "zl-proto: %s port %d is not active\n", d->name, port);
		dev_close(d);
		return -ENETDOWN;
	}
	if (gid_index < 0) {
		/* RoCE: the IPv4-mapped GID is the routable one (RoCE v2 on rxe);
		 * InfiniBand: index 0 with the LID */
		gid_index = 0;
		if (d->port.link_layer == IBV_LINK_LAYER_ETHERNET)
			for (i = 0; i < d->port.gid_tbl_len && i < 16; i++) {
				union ibv_gid g;
				if (!ibv_query_gid(d->ctx, (uint8_t)port, i, &g) && ipv4_mapped(&g)) {
					gid_index = i;
					break;
				}
			}
	}
	d->gid_index = gid_index;
	if (ibv_query_gid(d->ctx, (uint8_t)port, gid_index, &d->gid)) {
		fprintf(stderr, "zl-proto: %s: no GID at index %d\n", d->name, gid_index);
		dev_close(d);
		return -ENODEV;
	}
	return 0;
}

void dev_close(struct dev *d)
{
	if (d->pd)
		ibv_dealloc_pd(d->pd);
	if (d->ctx)
		ibv_close_device(d->ctx);
	d->pd = NULL;
	d->ctx = NULL;
}

struct ibv_qp *qp_create(struct dev *d, enum ibv_qp_type type, struct ibv_cq *scq,
			 struct ibv_cq *rcq, uint32_t max_send, uint32_t max_recv,
			 uint32_t max_inline)
{
	struct ibv_qp_init_attr a = {
		.send_cq = scq, .recv_cq = rcq, .qp_type = type, .sq_sig_all = 0,
		.cap = { .max_send_wr = max_send, .max_recv_wr = max_recv ? max_recv : 1,
			 .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = max_inline },
	};
	return ibv_create_qp(d->pd, &a);
}

void ep_fill(struct ep *e, const struct dev *d, const struct ibv_qp *qp, uint32_t psn)
{
	e->qpn = qp->qp_num;
	e->psn = psn & 0xffffff;
	e->lid = d->port.lid;
	memcpy(e->gid, d->gid.raw, 16);
}

static void ah_attr(struct dev *d, const struct ep *r, struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->dlid = r->lid;
	ah->port_num = (uint8_t)d->port_num;
	if (d->port.link_layer == IBV_LINK_LAYER_ETHERNET || d->gid_index) {
		ah->is_global = 1;
		memcpy(ah->grh.dgid.raw, r->gid, 16);
		ah->grh.sgid_index = (uint8_t)d->gid_index;
		ah->grh.hop_limit = 64;
	}
}

struct ibv_ah *ah_create(struct dev *d, const struct ep *r)
{
	struct ibv_ah_attr a;
	ah_attr(d, r, &a);
	return ibv_create_ah(d->pd, &a);
}

int qp_connect(struct dev *d, struct ibv_qp *qp, const struct ep *local, const struct ep *r,
	       const struct qp_opts *o)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = (uint8_t)d->port_num };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT, rc;
	const char *step = "INIT";
	if (qp->qp_type == IBV_QPT_UD) {
		a.qkey = UD_QKEY;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE |
				    (qp->qp_type == IBV_QPT_RC ? IBV_ACCESS_REMOTE_READ : 0);
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	if ((rc = ibv_modify_qp(qp, &a, mask)))
		goto fail;
	step = "RTR";
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (qp->qp_type != IBV_QPT_UD) {
		a.path_mtu = d->port.active_mtu;
		a.dest_qp_num = r->qpn;
		a.rq_psn = r->psn;
		ah_attr(d, r, &a.ah_attr);
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (qp->qp_type == IBV_QPT_RC) {
			a.max_dest_rd_atomic = (uint8_t)o->rd_atomic;
			a.min_rnr_timer = 12;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
	}
	if ((rc = ibv_modify_qp(qp, &a, mask)))
		goto fail;
	step = "RTS";
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = local->psn;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (qp->qp_type == IBV_QPT_RC) {
		a.timeout = (uint8_t)o->timeout;
		a.retry_cnt = (uint8_t)o->retry;
		a.rnr_retry = 7;
		a.max_rd_atomic = (uint8_t)o->rd_atomic;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	if ((rc = ibv_modify_qp(qp, &a, mask)))
		goto fail;
	return 0;
fail:
	fprintf(stderr, "zl-proto: %s: QP %u to %s: %s\n", d->name, qp->qp_num, step, strerror(rc));
	return -rc;
}

const char *qp_state_name(enum ibv_qp_state s)
{
	static const char *const n[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };
	return (unsigned)s < 7 ? n[s] : "?";
}
