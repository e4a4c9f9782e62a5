/* SPDX-License-Identifier: MIT */
/* zl-proto's parameter parser and topology (tools/zl-proto/params.c): the
 * paper's defaults, every impossible combination rejected with a reason,
 * and every QP end matched by exactly one end on its peer. With the path
 * of a built zl-proto as argv[1], also its exit codes (2 for bad input,
 * 1 for a missing device) and that it says why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "params.h"
#include "testlib.h"

static int fails; /* the table-driven checks count their failures */

static int parse(const char *line, struct params *p, char *err)
{
	char buf[512], *argv[64];
	int argc = 0;
	snprintf(buf, sizeof(buf), "zl-proto %s", line);
	for (char *t = strtok(buf, " "); t && argc < 63; t = strtok(NULL, " "))
		argv[argc++] = t;
	argv[argc] = NULL;
	err[0] = 0;
	return params_parse(p, argc, argv, err, 256);
}

struct bad {
	const char *args, *says;
};

static const struct bad bads[] = {
	{ "--pattern m1 --local", "give --proto" },
	{ "--proto read --local", "give --pattern" },
	{ "--proto nope --pattern m1 --local", "unknown protocol" },
	{ "--proto read --pattern 2:2 --local", "unknown pattern" },
	{ "--proto read --pattern m1 -Q 3 --local", "-Q must be 1" },
	{ "--proto read --pattern m1 -P 3 -N 5 --local", "has 4 nodes" },
	{ "--proto read --pattern 1:M -P 2 --local", "-P must be 1" },
	{ "--proto read --pattern 1:M -Q 2 -N 4 --local", "has 3 nodes" },
	{ "--proto read --pattern M:M -P 4 --local", "M:M takes -N" },
	{ "--proto read --pattern M:M -N 1 --local", "at least two nodes" },
	{ "--proto read --pattern M:1 -N 1 --local", "at least one requesting" },
	{ "--proto read --pattern m1 -L 8 --local", "16-byte id" },
	{ "--proto read --pattern m1 -V 15 --local", "16-byte id" },
	{ "--proto read --pattern m1 -V 2000000 --local", "16-byte id" },
	{ "--proto read --pattern m1 -R 0 --local", "-R 0" },
	{ "--proto read --pattern m1 -R 5000 --local", "-R 5000" },
	{ "--proto read --pattern m1 -S 65 --local", "-S 65" },
	{ "--proto read --pattern m1 -S x --local", "-S x" },
	{ "--proto read --pattern m1 -N 300 --local", "-N 300" },
	{ "--proto read --pattern mm -N 200 -S 64 -R 4096 --local", "MiB on one node" },
	{ "--proto read --pattern m1 --time 0 --local", "--time" },
	{ "--proto read --pattern m1 --timeout 0 --local", "--timeout" },
	{ "--proto read --pattern m1 --time -1 --local", "want seconds" },
	{ "--proto read --pattern m1", "give --local" },
	{ "--proto read --pattern m1 --node 1", "needs --coord" },
	{ "--proto read --pattern m1 --node 1 --local", "no --node" },
	{ "--proto read --pattern m1 -P 2 --node 3 --coord h:1", "nodes 0 to 2" },
	{ "--proto read --pattern m1 --coord nohost --node 0", "HOST:PORT" },
	{ "--proto read --pattern m1 --local --kill 9@1 -P 2", "--kill needs" },
	{ "--proto read --pattern m1 --local --kill 1", "NODE@SECONDS" },
	{ "--proto read --pattern m1 --local extra", "unexpected argument" },
	{ "--proto read --pattern m1 --local --bogus", "unknown option" },
	{ "--proto read --pattern m1 --local -R", "needs a value" },
	{ "--mode nope --local", "unknown mode" },
	{ "--mode qptype --proto read --local", "runs two nodes" },
	{ "--mode notify -N 3 --local", "-N 2" },
	{ "--mode writelike -S 2 --local", "runs two nodes" },
	{ "--mode ack --ack-timeout 32 --local", "0 to 31" },
	{ "--mode chain --local --label a,b", "cannot hold" },
	{ "--proto read --pattern m1 --local --inject dup", "--inject needs" },
	{ "--proto send-send --pattern m1 --local --inject twice", "corrupt, drop or dup" },
};

/* Every link's other end exists on its peer, once; counts as the paper's. */
static void topo(const char *args, int want_qps_busiest)
{
	struct params p;
	char err[256];
	CHECK(!parse(args, &p, err));
	int busiest = 0;
	for (int n = 0; n < p.N; n++) {
		int th, nl = topo_links(&p, n, NULL, 0, &th);
		struct link *l = calloc((size_t)nl, sizeof(*l));
		CHECK(topo_links(&p, n, l, nl, &th) == nl);
		if (nl > busiest)
			busiest = nl;
		for (int i = 0; i < nl; i++) {
			CHECK(l[i].thread >= 0 && l[i].thread < th && l[i].peer != n);
			CHECK(l[i].requester ? topo_node_requests(&p, n) : topo_node_responds(&p, n));
			int pth, pn = topo_links(&p, l[i].peer, NULL, 0, &pth), match = 0;
			struct link *r = calloc((size_t)pn, sizeof(*r));
			topo_links(&p, l[i].peer, r, pn, &pth);
			for (int j = 0; j < pn; j++)
				match += r[j].peer == n && r[j].thread == l[i].pthread &&
					 r[j].pthread == l[i].thread && r[j].requester == !l[i].requester;
			CHECK(match == 1);
			free(r);
		}
		/* a thread is all requester or all responder */
		for (int i = 1; i < nl; i++)
			if (l[i].thread == l[i - 1].thread)
				CHECK(l[i].requester == l[i - 1].requester);
		free(l);
	}
	CHECK(busiest == want_qps_busiest);
	CHECK(topo_links(&p, p.N, NULL, 0, &busiest) < 0);
	struct link one;
	if (p.N > 2)
		CHECK(topo_links(&p, 0, &one, 1, &busiest) < 0); /* no room: -ENOSPC */
}

/* Run the binary; its exit status, and whether stderr says `says`. */
static int run(const char *bin, const char *args, const char *says, int *said)
{
	char cmd[1024], out[4096] = "";
	snprintf(cmd, sizeof(cmd), "timeout 20 %s %s 2>&1", bin, args);
	FILE *f = popen(cmd, "r");
	if (!f)
		return -1;
	size_t n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = 0;
	int st = pclose(f);
	*said = strstr(out, says) != NULL;
	if (!*said)
		fprintf(stderr, "zl-proto %s said: %s\n", args, out);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(int argc, char **argv)
{
	struct params p;
	char err[256];

	/* the paper's defaults */
	CHECK(!parse("--proto read --pattern M:1 --local", &p, err));
	CHECK(p.P == 28 && p.Q == 1 && p.N == 29 && p.S == 16 && p.R == 128 && p.L == 36 && p.V == 365);
	CHECK(!parse("--proto SEND/WRITE --pattern 1:M --local", &p, err));
	CHECK(p.proto == PR_SEND_WRITE && p.P == 1 && p.Q == 28 && p.N == 29 && p.S == 16);
	CHECK(!parse("--proto write_write --pattern mm --local", &p, err));
	CHECK(p.proto == PR_WRITE_WRITE && p.N == 28 && p.S == 1);
	/* N alone derives P or Q; consistent triples pass */
	CHECK(!parse("--proto read --pattern m1 -N 5 --local", &p, err) && p.P == 4);
	CHECK(!parse("--proto read --pattern 1m -N 5 --local", &p, err) && p.Q == 4);
	CHECK(!parse("--proto read --pattern m1 -P 4 -N 5 -Q 1 --local", &p, err) && p.N == 5);
	CHECK(!parse("--proto send-send --pattern m1 -P 2 --node 2 --coord 10.0.0.1:7000", &p, err));
	CHECK(p.node == 2 && !strcmp(p.coord, "10.0.0.1:7000"));
	CHECK(!parse("--mode ack --local --ack-timeout 5", &p, err) && p.N == 2 && p.ack_timeout == 5);
	CHECK(parse("--help", &p, err) == 1);
	/* every mode by its name, writelike among them, and back */
	for (int m = 0; m < MD_COUNT; m++) {
		char line[64];
		snprintf(line, sizeof(line), "--mode %s --local%s", mode_name((enum mode)m),
			 m == MD_PROTO ? " --proto read --pattern m1" : "");
		CHECK(!parse(line, &p, err) && p.mode == (enum mode)m);
	}
	CHECK(!parse("--mode writelike --local --iters 60", &p, err) && p.mode == MD_WRITELIKE && p.N == 2);
	/* the verbs each protocol uses (table III) */
	CHECK(!proto_req_write(PR_SEND_SEND) && !proto_rsp_write(PR_SEND_SEND));
	CHECK(!proto_req_write(PR_SEND_WRITE) && proto_rsp_write(PR_SEND_WRITE));
	CHECK(proto_req_write(PR_WRITE_SEND) && !proto_rsp_write(PR_WRITE_SEND));
	CHECK(proto_req_write(PR_WRITE_WRITE) && proto_rsp_write(PR_WRITE_WRITE));

	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		int r = parse(bads[i].args, &p, err);
		if (r != -22 || !strstr(err, bads[i].says)) {
			fprintf(stderr, "'%s': rc %d, said '%s', wanted '%s'\n", bads[i].args, r, err,
				bads[i].says);
			fails++;
		}
	}

	/* M:1: the responder holds P x S QPs; 1:M the requester Q x S;
	 * M:M every node (N - 1) x 2 x S (section IV) */
	topo("--proto read --pattern m1 -P 4 -S 3 --local", 12);
	topo("--proto read --pattern 1m -Q 5 -S 2 --local", 10);
	topo("--proto read --pattern mm -N 4 -S 2 --local", 12);
	topo("--proto read --pattern mm -N 2 -S 1 --local", 2);

	if (argc > 1) {
		int said;
		for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
			int rc = run(argv[1], bads[i].args, bads[i].says, &said);
			CHECK(rc == 2 && said);
		}
		/* no such device: a clear message and exit 1, at once */
		int rc = run(argv[1], "--proto read --pattern m1 -P 1 -S 1 -R 2 --local --dev nosuchdev --timeout 5",
			     "RDMA device", &said);
		CHECK(rc == 1 && said);
		rc = run(argv[1], "--help", "usage", &said);
		CHECK(rc == 0 && said);
	}
	if (fails) {
		fprintf(stderr, "proto_params: %d checks failed\n", fails);
		return 1;
	}
	printf("proto_params: OK\n");
	return 0;
}
