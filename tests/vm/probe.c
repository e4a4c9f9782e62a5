/* SPDX-License-Identifier: MIT */
/*
 * probe.c - checks that verbs work end to end inside the rdma-vm.sh guest.
 *
 * Opens device A (rxe0) and B (rxe1), queries their port 1 and GID, connects
 * an RC QP on each to the other, prints what ibv_query_qp_data_in_order()
 * reports (in INIT and in RTS), and does one RDMA WRITE from A to B, checking
 * the bytes. Exit 0 on success.
 *
 *   gcc -std=c11 -Wall -O2 -o build/vm-probe tests/vm/probe.c -libverbs
 *   tests/vm/rdma-vm.sh -- build/vm-probe [DEV_A DEV_B]
 *
 * Devices and GID index default to ZL_RDMA_DEV_A, ZL_RDMA_DEV_B and
 * ZL_RDMA_GID_INDEX (set by the harness), else rxe0, rxe1 and 1.
 */
#define _POSIX_C_SOURCE 200809L
#include <infiniband/verbs.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUF_SIZE 64

struct end {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	union ibv_gid gid;
	enum ibv_mtu mtu;
	char buf[BUF_SIZE];
};

static int fail(const char *what, const char *dev)
{
	fprintf(stderr, "probe: %s failed on %s\n", what, dev);
	return -1;
}

static const char *env_or(const char *name, const char *dflt)
{
	const char *v = getenv(name);
	return v && *v ? v : dflt;
}

static void print_gid(const char *dev, int index, const union ibv_gid *gid)
{
	printf("%s: gid[%d] = ", dev, index);
	for (int i = 0; i < 16; i += 2)
		printf("%02x%02x%s", gid->raw[i], gid->raw[i + 1], i < 14 ? ":" : "\n");
}

static int open_end(struct end *e, int gid_index)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	if (!list)
		return fail("ibv_get_device_list", e->name);
	for (int i = 0; list[i]; i++)
		if (strcmp(ibv_get_device_name(list[i]), e->name) == 0)
			e->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!e->ctx)
		return fail("finding/opening the device", e->name);

	struct ibv_device_attr dattr;
	if (ibv_query_device(e->ctx, &dattr))
		return fail("ibv_query_device", e->name);
	struct ibv_port_attr pattr;
	if (ibv_query_port(e->ctx, 1, &pattr))
		return fail("ibv_query_port", e->name);
	printf("%s: max_qp %d max_mr_size %llu atomic_cap %d | port 1 %s, active_mtu %d, "
	       "link_layer %s, gid_tbl_len %d\n",
	       e->name, dattr.max_qp, (unsigned long long)dattr.max_mr_size, dattr.atomic_cap,
	       ibv_port_state_str(pattr.state), 128 << pattr.active_mtu,
	       pattr.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand",
	       pattr.gid_tbl_len);
	if (pattr.state != IBV_PORT_ACTIVE)
		return fail("port not ACTIVE", e->name);
	e->mtu = pattr.active_mtu;
	if (ibv_query_gid(e->ctx, 1, gid_index, &e->gid))
		return fail("ibv_query_gid", e->name);
	print_gid(e->name, gid_index, &e->gid);

	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = e->pd ? ibv_create_cq(e->ctx, 4, NULL, NULL, 0) : NULL;
	e->mr = e->cq ? ibv_reg_mr(e->pd, e->buf, sizeof(e->buf),
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
		      : NULL;
	if (!e->mr)
		return fail("PD/CQ/MR setup", e->name);
	struct ibv_qp_init_attr qia = {
		.send_cq = e->cq,
		.recv_cq = e->cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	e->qp = ibv_create_qp(e->pd, &qia);
	if (!e->qp)
		return fail("ibv_create_qp", e->name);
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	if (ibv_modify_qp(e->qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return fail("modify QP to INIT", e->name);
	return 0;
}

static int connect_end(struct end *e, const struct end *peer, int gid_index)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = e->mtu < peer->mtu ? e->mtu : peer->mtu,
		.dest_qp_num = peer->qp->qp_num,
		.rq_psn = 0,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = {
			.is_global = 1,
			.port_num = 1,
			.grh = { .dgid = peer->gid, .sgid_index = (uint8_t)gid_index, .hop_limit = 1 },
		},
	};
	if (ibv_modify_qp(e->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return fail("modify QP to RTR", e->name);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(e->qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return fail("modify QP to RTS", e->name);
	return 0;
}

static void print_in_order(const struct end *e, const char *state)
{
	printf("%s: ibv_query_qp_data_in_order(RC QP in %s): RDMA_WRITE %d, SEND %d, "
	       "RDMA_READ %d\n",
	       e->name, state, ibv_query_qp_data_in_order(e->qp, IBV_WR_RDMA_WRITE, 0),
	       ibv_query_qp_data_in_order(e->qp, IBV_WR_SEND, 0),
	       ibv_query_qp_data_in_order(e->qp, IBV_WR_RDMA_READ, 0));
}

static int write_a_to_b(struct end *a, struct end *b)
{
	for (int i = 0; i < BUF_SIZE; i++)
		a->buf[i] = (char)('A' + i % 26);
	memset(b->buf, 0, sizeof(b->buf));
	struct ibv_sge sge = {
		.addr = (uintptr_t)a->buf, .length = BUF_SIZE, .lkey = a->mr->lkey
	};
	struct ibv_send_wr wr = {
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = (uintptr_t)b->buf, .rkey = b->mr->rkey },
	}, *bad;
	if (ibv_post_send(a->qp, &wr, &bad))
		return fail("ibv_post_send", a->name);

	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct ibv_wc wc;
	int n;
	while ((n = ibv_poll_cq(a->cq, 1, &wc)) == 0) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec > 10)
			return fail("waiting 10 s for the completion", a->name);
	}
	if (n < 0 || wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "probe: completion error: %s\n",
			n < 0 ? "poll failed" : ibv_wc_status_str(wc.status));
		return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (memcmp(a->buf, b->buf, BUF_SIZE) != 0) {
		fprintf(stderr, "probe: data mismatch after RDMA WRITE\n");
		return -1;
	}
	printf("RDMA WRITE %s -> %s: %d bytes verified, completion after %.0f us\n", a->name,
	       b->name, BUF_SIZE,
	       (double)(now.tv_sec - t0.tv_sec) * 1e6 + (double)(now.tv_nsec - t0.tv_nsec) / 1e3);
	return 0;
}

static void close_end(struct end *e)
{
	if (e->qp)
		ibv_destroy_qp(e->qp);
	if (e->mr)
		ibv_dereg_mr(e->mr);
	if (e->cq)
		ibv_destroy_cq(e->cq);
	if (e->pd)
		ibv_dealloc_pd(e->pd);
	if (e->ctx)
		ibv_close_device(e->ctx);
}

int main(int argc, char **argv)
{
	static struct end a, b;
	a.name = argc > 1 ? argv[1] : env_or("ZL_RDMA_DEV_A", "rxe0");
	b.name = argc > 2 ? argv[2] : env_or("ZL_RDMA_DEV_B", "rxe1");
	int gid_index = atoi(env_or("ZL_RDMA_GID_INDEX", "1"));

	int rc = open_end(&a, gid_index) || open_end(&b, gid_index);
	if (!rc) {
		print_in_order(&a, "INIT");
		rc = connect_end(&a, &b, gid_index) || connect_end(&b, &a, gid_index);
	}
	if (!rc) {
		print_in_order(&a, "RTS");
		rc = write_a_to_b(&a, &b);
	}
	close_end(&a);
	close_end(&b);
	printf("probe: %s\n", rc ? "FAILED" : "OK");
	return rc ? 1 : 0;
}
