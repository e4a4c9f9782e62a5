/* SPDX-License-Identifier: MIT */
/* zl-proto's parameters (the protocol evaluation paper's P, Q, N, S, R, L, V and the run's own)
 * and the topology they imply: which QPs a node's threads hold. Pure code,
 * no verbs: tests/proto_params.c checks it on any host. */
#ifndef ZL_PROTO_PARAMS_H
#define ZL_PROTO_PARAMS_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

enum proto { PR_SEND_SEND, PR_SEND_WRITE, PR_WRITE_SEND, PR_WRITE_WRITE, PR_READ, PR_COUNT };
enum pattern { PT_M1, PT_1M, PT_MM, PT_COUNT };
/* --inject: one responder spoils its 50th response, so that the tests can
 * see the requester's checks catch it */
enum inject { IJ_NONE, IJ_CORRUPT, IJ_DROP, IJ_DUP };
/* zl-proto's modes: the protocol run (the protocol evaluation paper) or one verbs experiment
 * (seeds 000 ch. 3, 003 ch. 5, 004's inline comparison). */
enum mode {
	MD_PROTO,
	MD_QPTYPE,   /* RC, UC, UD ping-pong with a 4-byte immediate */
	MD_NOTIFY,   /* WRITE + memory polling, WRITE_WITH_IMM + CQ, SEND/RECV */
	MD_INDIRECT, /* data then position, position then data, WRITE_WITH_IMM */
	MD_CHAIN,    /* k WRs in one ibv_post_send against k calls */
	MD_SIGNAL,   /* signaling interval sweep */
	MD_INLINE,   /* inline against DMA over a size sweep */
	MD_RECVPOST, /* aggregated against one-by-one receive posting */
	MD_WRITELIKE,/* UD SEND/RECV: CQ per message against memory polling */
	MD_ACK,      /* retransmission latency against the ACK timeout */
	MD_COUNT
};

/* The paper's value and request sizes (Facebook's mean key and value). */
#define P_DEF_L 36
#define P_DEF_V 365
/* What a request and a response must hold at least: the 16-byte id. */
#define P_MIN_MSG 16
#define P_MAX_MSG (1u << 20)
#define P_MAX_R 4096
#define P_MAX_S 64
#define P_MAX_NODES 256
/* Memory a node may register for its slots (every QP holds R slots). */
#define P_MAX_NODE_MEM (1ull << 30)

struct params {
	enum mode mode;
	enum proto proto;
	enum pattern pattern;
	int P, Q, N, S, R;
	uint32_t L, V;
	int node;           /* this process's node id, -1: --local spawns all */
	int local;          /* --local: spawn N nodes on this host */
	double seconds;     /* measured time */
	double warmup;      /* seconds before measuring */
	double timeout;     /* connect, rendezvous and drain deadline */
	char coord[256];    /* host:port of node 0's rendezvous */
	char devs[256];     /* comma list, node i uses entry i % count */
	int gid_index;      /* -1: pick one */
	int ib_port;
	int busy;           /* spin without sched_yield on an idle poll */
	int iters;          /* verbs experiments: round trips per point */
	int rounds;         /* verbs experiments: passes over the points */
	int ack_timeout;    /* QP attribute timeout (4.096 us x 2^t) */
	int retry;          /* QP retry_cnt */
	char csv[256];      /* append the result row here ("-" stdout) */
	int csv_header;     /* write the header line even if the file exists */
	char label[64];     /* free text in the CSV's last column */
	int kill_node;      /* --local test aid: SIGKILL this node ... */
	double kill_after;  /* ... this many seconds after the start (-1: never) */
	int inject;         /* test aid: one bad response (enum inject) */
	/* which of P, Q, N, S, R the user gave (for the consistency checks) */
	unsigned given;
};
#define G_P 1u
#define G_Q 2u
#define G_N 4u
#define G_S 8u
#define G_R 16u

const char *proto_name(enum proto p);
const char *pattern_name(enum pattern p);
const char *mode_name(enum mode m);
int proto_parse(const char *s, enum proto *p);
int pattern_parse(const char *s, enum pattern *p);

/* The request and the response travel by SEND (0) or WRITE (1); READ has
 * no request message and its "response" is read. */
int proto_req_write(enum proto p);
int proto_rsp_write(enum proto p);

/* Parse argv into *p (defaults first). 0, 1 for --help (usage printed), or
 * -EINVAL with a one-line reason in err. */
int params_parse(struct params *p, int argc, char **argv, char *err, size_t errlen);
/* Fill the pattern's derived values and reject impossible combinations:
 * 0 or -EINVAL with the reason in err. params_parse calls it. */
int params_check(struct params *p, char *err, size_t errlen);
void params_usage(FILE *f);

/* Topology. Node roles: M:1 node 0 responds, 1..P request; 1:M node 0
 * requests, 1..Q respond; M:M every node does both (threads 0..S-1 request,
 * S..2S-1 respond). A link is one QP's end. */
struct link {
	int thread;    /* local thread */
	int peer;      /* peer node */
	int pthread;   /* peer thread */
	int requester; /* 1: this end issues requests */
};
/* Threads on node n and their links; returns the link count or -errno.
 * links may be NULL to count; *threads gets the thread count. */
int topo_links(const struct params *p, int n, struct link *links, int max, int *threads);
int topo_node_requests(const struct params *p, int n);
int topo_node_responds(const struct params *p, int n);

#endif
