/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "params.h"

static const char *const pnames[PR_COUNT] = { "send-send", "send-write", "write-send",
					      "write-write", "read" };
static const char *const tnames[PT_COUNT] = { "M:1", "1:M", "M:M" };
static const char *const mnames[MD_COUNT] = { "proto",	"qptype", "notify",	"indirect", "chain",
					      "signal", "inline", "recvpost", "writelike", "ack" };

const char *proto_name(enum proto p) { return (unsigned)p < PR_COUNT ? pnames[p] : "?"; }
const char *pattern_name(enum pattern p) { return (unsigned)p < PT_COUNT ? tnames[p] : "?"; }
const char *mode_name(enum mode m) { return (unsigned)m < MD_COUNT ? mnames[m] : "?"; }

int proto_req_write(enum proto p) { return p == PR_WRITE_SEND || p == PR_WRITE_WRITE; }
int proto_rsp_write(enum proto p) { return p == PR_SEND_WRITE || p == PR_WRITE_WRITE; }

/* "SEND/WRITE", "send-write" and "send_write" are one name. */
int proto_parse(const char *s, enum proto *p)
{
	char b[32];
	size_t i;
	for (i = 0; s[i] && i + 1 < sizeof(b); i++)
		b[i] = (s[i] == '/' || s[i] == '_') ? '-' : (char)tolower((unsigned char)s[i]);
	b[i] = 0;
	for (int k = 0; k < PR_COUNT; k++)
		if (!s[i] && !strcmp(b, pnames[k])) {
			*p = (enum proto)k;
			return 0;
		}
	return -EINVAL;
}

int pattern_parse(const char *s, enum pattern *p)
{
	static const char *const alt[PT_COUNT] = { "m1", "1m", "mm" };
	for (int k = 0; k < PT_COUNT; k++)
		if (!strcasecmp(s, tnames[k]) || !strcasecmp(s, alt[k])) {
			*p = (enum pattern)k;
			return 0;
		}
	return -EINVAL;
}

static int fail(char *err, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* A whole number in [lo, hi], or -EINVAL. */
static int num(const char *s, long lo, long hi, long *v)
{
	char *end;
	errno = 0;
	long x = strtol(s, &end, 10);
	if (errno || end == s || *end || x < lo || x > hi)
		return -EINVAL;
	*v = x;
	return 0;
}

/* --name a: a whole number from lo to hi into *dst, or the reason in err */
static int intopt(const char *name, const char *a, long lo, long hi, const char *more, int *dst,
		  char *err, size_t n)
{
	long v;
	if (num(a, lo, hi, &v))
		return fail(err, n, "--%s %s: want %ld to %ld%s", name, a, lo, hi, more);
	*dst = (int)v;
	return 0;
}

static int seconds(const char *s, double *v)
{
	char *end;
	double x = strtod(s, &end);
	if (end == s || *end || !(x >= 0) || x > 86400)
		return -EINVAL;
	*v = x;
	return 0;
}

void params_usage(FILE *f)
{
	fprintf(f,
		"usage: zl-proto [--mode proto] --proto NAME --pattern M:1|1:M|M:M [-P n] [-Q n] [-N n]\n"
		"                [-S n] [-R n] [-L bytes] [-V bytes] (--local | --node I --coord HOST:PORT)\n"
		"                [--dev DEV[,DEV...]] [--gid-index n] [--time s] [--warmup s] [--timeout s]\n"
		"                [--csv FILE] [--label TEXT] [--busy]\n"
		"       zl-proto --mode qptype|notify|indirect|chain|signal|inline|recvpost|writelike|ack\n"
		"                (--local | --node 0|1 --coord HOST:PORT) [--dev A,B] [--iters n] [-V bytes]\n"
		"                [--rounds n] [--ack-timeout t] [--retry n] [--csv FILE]\n"
		"protocols: send-send send-write write-send write-write read (the protocol\n"
		"           evaluation paper's, over RC)\n"
		"defaults: M:1 P=28 S=16, 1:M Q=28 S=16, M:M N=28 S=1; R=128 L=%d V=%d\n"
		"see zl-proto(1)\n",
		P_DEF_L, P_DEF_V);
}

static void defaults(struct params *p)
{
	memset(p, 0, sizeof(*p));
	p->mode = MD_PROTO;
	p->proto = PR_COUNT; /* required in proto mode */
	p->pattern = PT_COUNT;
	p->R = 128;
	p->L = P_DEF_L;
	p->V = P_DEF_V;
	p->node = -1;
	p->seconds = 2;
	p->warmup = 0.5;
	p->timeout = 30;
	p->gid_index = -1;
	p->ib_port = 1;
	p->iters = 1000;
	p->rounds = 1;
	/* 4.096 us x 2^18 = 1.07 s. With 14 (67 ms) the emulator's ACKs,
	 * late behind descheduled vCPUs, made rxe retransmit hundreds of times
	 * per run, and rxe (6.1) refused some retransmitted multi-packet
	 * WRITEs as invalid requests: QPs to ERR in 6 of 40 M:M runs, 0 of 40
	 * at 18 (measured in the Soft-RoCE VM). A real loss still gets retransmitted, later. */
	p->ack_timeout = 18;
	p->retry = 7;
	p->kill_node = -1;
	p->kill_after = -1;
}

int params_parse(struct params *p, int argc, char **argv, char *err, size_t errlen)
{
	enum { O_MODE = 256, O_NODE, O_LOCAL, O_COORD, O_DEV, O_GID, O_PORT, O_TIME, O_WARM,
	       O_TMO, O_BUSY, O_ITERS, O_ACK, O_RETRY, O_CSV, O_HDR, O_LABEL, O_KILL, O_ROUNDS, O_INJECT };
	static const struct option lo[] = {
		{ "mode", 1, 0, O_MODE },	{ "proto", 1, 0, 'p' },	   { "pattern", 1, 0, 'm' },
		{ "node", 1, 0, O_NODE },	{ "local", 0, 0, O_LOCAL }, { "coord", 1, 0, O_COORD },
		{ "dev", 1, 0, O_DEV },		{ "gid-index", 1, 0, O_GID }, { "ib-port", 1, 0, O_PORT },
		{ "time", 1, 0, O_TIME },	{ "warmup", 1, 0, O_WARM }, { "timeout", 1, 0, O_TMO },
		{ "busy", 0, 0, O_BUSY },	{ "iters", 1, 0, O_ITERS }, { "ack-timeout", 1, 0, O_ACK },
		{ "retry", 1, 0, O_RETRY },	{ "csv", 1, 0, O_CSV },	   { "csv-header", 0, 0, O_HDR },
		{ "label", 1, 0, O_LABEL },	{ "kill", 1, 0, O_KILL },	{ "rounds", 1, 0, O_ROUNDS },	{ "inject", 1, 0, O_INJECT },	{ "help", 0, 0, 'h' },	   { 0, 0, 0, 0 }
	};
	long v;
	int c, i;
	defaults(p);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":p:m:P:Q:N:S:R:L:V:h", lo, NULL)) != -1) {
		const char *a = optarg;
		switch (c) {
		case O_MODE:
			for (i = 0; i < MD_COUNT && strcasecmp(a, mnames[i]); i++)
				;
			if (i == MD_COUNT)
				return fail(err, errlen, "unknown mode '%s'", a);
			p->mode = (enum mode)i;
			break;
		case 'p':
			if (proto_parse(a, &p->proto))
				return fail(err, errlen,
					    "unknown protocol '%s' (send-send, send-write, write-send, write-write, read)", a);
			break;
		case 'm':
			if (pattern_parse(a, &p->pattern))
				return fail(err, errlen, "unknown pattern '%s' (M:1, 1:M, M:M)", a);
			break;
		case 'P': case 'Q': case 'N': case 'S': case 'R': {
			long hi = c == 'R' ? P_MAX_R : c == 'S' ? P_MAX_S : P_MAX_NODES;
			if (num(a, 1, hi, &v))
				return fail(err, errlen, "-%c %s: want a whole number from 1 to %ld", c, a, hi);
			int *dst = c == 'P' ? &p->P : c == 'Q' ? &p->Q : c == 'N' ? &p->N : c == 'S' ? &p->S : &p->R;
			*dst = (int)v;
			p->given |= c == 'P' ? G_P : c == 'Q' ? G_Q : c == 'N' ? G_N : c == 'S' ? G_S : G_R;
			break;
		}
		case 'L': case 'V':
			if (num(a, P_MIN_MSG, P_MAX_MSG, &v))
				return fail(err, errlen,
					    "-%c %s: a message holds its 16-byte id, so from %d to %u bytes", c, a,
					    P_MIN_MSG, P_MAX_MSG);
			*(c == 'L' ? &p->L : &p->V) = (uint32_t)v;
			break;
		case O_NODE:
			if (num(a, 0, P_MAX_NODES - 1, &v))
				return fail(err, errlen, "--node %s: want 0 to %d", a, P_MAX_NODES - 1);
			p->node = (int)v;
			break;
		case O_LOCAL: p->local = 1; break;
		case O_COORD:
			if (strlen(a) >= sizeof(p->coord) || !strrchr(a, ':'))
				return fail(err, errlen, "--coord %s: want HOST:PORT", a);
			strcpy(p->coord, a);
			break;
		case O_DEV:
			if (strlen(a) >= sizeof(p->devs) || !*a)
				return fail(err, errlen, "--dev: want DEV[,DEV...]");
			strcpy(p->devs, a);
			break;
		case O_GID:
			if (intopt("gid-index", a, 0, 255, "", &p->gid_index, err, errlen))
				return -EINVAL;
			break;
		case O_PORT:
			if (intopt("ib-port", a, 1, 255, "", &p->ib_port, err, errlen))
				return -EINVAL;
			break;
		case O_TIME: case O_WARM: case O_TMO: {
			double *d = c == O_TIME ? &p->seconds : c == O_WARM ? &p->warmup : &p->timeout;
			if (seconds(a, d))
				return fail(err, errlen, "%s: want seconds", a);
			break;
		}
		case O_BUSY: p->busy = 1; break;
		case O_ITERS:
			if (intopt("iters", a, 1, 100000000, "", &p->iters, err, errlen))
				return -EINVAL;
			break;
		case O_INJECT: {
			static const char *const ij[] = { "none", "corrupt", "drop", "dup" };
			for (i = 0; i < 4 && strcmp(a, ij[i]); i++)
				;
			if (i == 4)
				return fail(err, errlen, "--inject %s: want corrupt, drop or dup", a);
			p->inject = i;
			break;
		}
		case O_ROUNDS:
			if (intopt("rounds", a, 1, 100, "", &p->rounds, err, errlen))
				return -EINVAL;
			break;
		case O_ACK:
			if (intopt("ack-timeout", a, 0, 31, " (4.096 us x 2^t; 0: infinite)", &p->ack_timeout, err,
				   errlen))
				return -EINVAL;
			break;
		case O_RETRY:
			if (intopt("retry", a, 0, 7, "", &p->retry, err, errlen))
				return -EINVAL;
			break;
		case O_CSV: case O_LABEL: {
			char *d = c == O_CSV ? p->csv : p->label;
			size_t n = c == O_CSV ? sizeof(p->csv) : sizeof(p->label);
			if (strlen(a) >= n || strpbrk(a, c == O_LABEL ? ",\n\"" : "\n"))
				return fail(err, errlen, "%s: too long or with a character it cannot hold", a);
			strcpy(d, a);
			break;
		}
		case O_HDR: p->csv_header = 1; break;
		case O_KILL: {
			char *end;
			long n = strtol(a, &end, 10);
			if (end == a || *end != '@' || n < 0 || n >= P_MAX_NODES || seconds(end + 1, &p->kill_after))
				return fail(err, errlen, "--kill %s: want NODE@SECONDS", a);
			p->kill_node = (int)n;
			break;
		}
		case 'h': return 1;
		case ':': return fail(err, errlen, "%s needs a value", argv[optind - 1]);
		default: return fail(err, errlen, "unknown option %s", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return fail(err, errlen, "unexpected argument '%s'", argv[optind]);
	return params_check(p, err, errlen);
}

/* Bytes of one request / response slot: an 8-byte header, the message and
 * a trailing marker byte, rounded to 8 (see proto.c). */
static uint64_t slot_bytes(uint32_t n) { return ((uint64_t)n + 9 + 7) & ~7ull; }

int params_check(struct params *p, char *err, size_t errlen)
{
	if (p->mode != MD_PROTO) {
		/* two nodes ping-pong; the pattern and P/Q/S/R do not apply */
		if ((p->given & (G_P | G_Q | G_S | G_R)) || p->pattern != PT_COUNT || p->proto != PR_COUNT)
			return fail(err, errlen, "--mode %s runs two nodes: -P, -Q, -S, -R, --proto and "
				    "--pattern do not apply", mode_name(p->mode));
		if ((p->given & G_N) && p->N != 2)
			return fail(err, errlen, "--mode %s runs two nodes (-N 2)", mode_name(p->mode));
		p->N = 2;
		p->P = p->Q = p->S = p->R = 1;
	} else {
		if (p->proto == PR_COUNT)
			return fail(err, errlen, "give --proto (send-send, send-write, write-send, write-write, read)");
		if (p->pattern == PT_COUNT)
			return fail(err, errlen, "give --pattern (M:1, 1:M or M:M)");
		if (!(p->given & G_S))
			p->S = p->pattern == PT_MM ? 1 : 16;
		switch (p->pattern) {
		case PT_M1:
		case PT_1M: {
			/* M:1: P requesting nodes and one responder; 1:M mirrored */
			int m1 = p->pattern == PT_M1;
			int *many = m1 ? &p->P : &p->Q, *one = m1 ? &p->Q : &p->P;
			unsigned gmany = m1 ? G_P : G_Q, gone = m1 ? G_Q : G_P;
			char cm = m1 ? 'P' : 'Q', co = m1 ? 'Q' : 'P';
			const char *pn = pattern_name(p->pattern), *rone = m1 ? "responding" : "requesting",
				   *rmany = m1 ? "requesting" : "responding";
			if ((p->given & gone) && *one != 1)
				return fail(err, errlen, "%s has one %s node: -%c must be 1, not %d", pn, rone, co, *one);
			if ((p->given & gmany) && (p->given & G_N) && p->N != *many + 1)
				return fail(err, errlen, "%s with -%c %d has %d nodes, not -N %d", pn, cm, *many,
					    *many + 1, p->N);
			if (!(p->given & gmany))
				*many = (p->given & G_N) ? p->N - 1 : 28;
			if (*many < 1)
				return fail(err, errlen, "%s needs at least one %s node (-N 2 or more)", pn, rmany);
			*one = 1;
			p->N = *many + 1;
			break;
		}
		default:
			if (p->given & (G_P | G_Q))
				return fail(err, errlen, "M:M takes -N (every node requests and responds), not -P or -Q");
			if (!(p->given & G_N))
				p->N = 28;
			if (p->N < 2)
				return fail(err, errlen, "M:M needs at least two nodes (-N 2 or more)");
			p->P = p->Q = p->N;
			break;
		}
		if (p->N > P_MAX_NODES)
			return fail(err, errlen, "%d nodes: at most %d", p->N, P_MAX_NODES);
		/* the busiest node's registered slots */
		uint64_t qps = p->pattern == PT_M1 ? (uint64_t)p->P * p->S
			       : p->pattern == PT_1M ? (uint64_t)p->Q * p->S
						     : (uint64_t)(p->N - 1) * 2 * p->S;
		uint64_t mem = qps * p->R * (slot_bytes(p->L) + slot_bytes(p->V));
		if (mem > P_MAX_NODE_MEM)
			return fail(err, errlen,
				    "%llu QPs x R %d x (L %u + V %u) needs %llu MiB on one node: at most %llu MiB",
				    (unsigned long long)qps, p->R, p->L, p->V, (unsigned long long)(mem >> 20),
				    (unsigned long long)(P_MAX_NODE_MEM >> 20));
	}
	if (p->seconds <= 0)
		return fail(err, errlen, "--time must be more than 0 seconds");
	if (p->timeout <= 0)
		return fail(err, errlen, "--timeout must be more than 0 seconds");
	if (p->local && p->node >= 0)
		return fail(err, errlen, "--local starts every node itself: no --node");
	if (!p->local && p->node < 0)
		return fail(err, errlen, "give --local (all nodes here) or --node I with --coord HOST:PORT");
	if (!p->local && !p->coord[0])
		return fail(err, errlen, "--node %d needs --coord HOST:PORT (node 0 listens there)", p->node);
	if (p->node >= p->N)
		return fail(err, errlen, "--node %d: this run has nodes 0 to %d", p->node, p->N - 1);
	if (p->inject && (p->mode != MD_PROTO || p->proto == PR_READ))
		return fail(err, errlen, "--inject needs a protocol with a responder (not read, not --mode)");
	if (p->kill_node >= 0 && (!p->local || p->kill_node >= p->N))
		return fail(err, errlen, "--kill needs --local and one of nodes 0 to %d", p->N - 1);
	if (p->mode == MD_PROTO && p->local && p->N > 64)
		return fail(err, errlen, "--local starts at most 64 processes, not %d", p->N);
	return 0;
}

static int node_threads(const struct params *p, int n)
{
	if (p->pattern == PT_MM)
		return 2 * p->S;
	(void)n;
	return p->S;
}

int topo_node_requests(const struct params *p, int n)
{
	return p->pattern == PT_MM || (p->pattern == PT_M1 ? n != 0 : n == 0);
}

int topo_node_responds(const struct params *p, int n)
{
	return p->pattern == PT_MM || (p->pattern == PT_M1 ? n == 0 : n != 0);
}

int topo_links(const struct params *p, int n, struct link *links, int max, int *threads)
{
	int k = 0;
	if (n < 0 || n >= p->N)
		return -EINVAL;
	*threads = node_threads(p, n);
#define ADD(t, pn, pt, rq)                                                                   \
	do {                                                                                 \
		if (links && k >= max)                                                       \
			return -ENOSPC;                                                      \
		if (links)                                                                   \
			links[k] = (struct link){ .thread = (t), .peer = (pn), .pthread = (pt), \
						  .requester = (rq) };                       \
		k++;                                                                         \
	} while (0)
	for (int t = 0; t < p->S; t++) {
		switch (p->pattern) {
		case PT_M1: /* requesting thread k of node i talks to thread k of node 0 */
			if (n == 0)
				for (int i = 1; i < p->N; i++)
					ADD(t, i, t, 0);
			else
				ADD(t, 0, t, 1);
			break;
		case PT_1M: /* thread k of node 0 talks to thread k of every responder */
			if (n == 0)
				for (int j = 1; j < p->N; j++)
					ADD(t, j, t, 1);
			else
				ADD(t, 0, t, 0);
			break;
		default: /* requesting thread k -> responding thread S+k of every other node */
			for (int j = 0; j < p->N; j++)
				if (j != n)
					ADD(t, j, p->S + t, 1);
			for (int j = 0; j < p->N; j++)
				if (j != n)
					ADD(p->S + t, j, t, 0);
			break;
		}
	}
#undef ADD
	return k;
}
