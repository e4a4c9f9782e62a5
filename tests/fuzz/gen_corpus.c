/* SPDX-License-Identifier: MIT */
/*
 * Writes the seed corpora of the fuzz targets:
 *   gen_corpus RING_DIR URL_DIR
 * Ring seeds are made with the real sender (zl_ring_tx) and then, for the
 * hostile ones, patched. Run it again after a record format change.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_ring_rx.h"
#include "ring.h"

struct seed {
	uint8_t flags;
	uint32_t start;
	uint64_t key, seq;
	uint8_t data[8192];
	uint32_t n;
};

static void put(const char *dir, const char *name, const void *p, size_t n)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n) {
		perror(path);
		exit(1);
	}
	fclose(f);
}

static void put_seed(const char *dir, const char *name, const struct seed *s)
{
	uint8_t buf[FRX_HDR + sizeof(s->data)];
	memset(buf, 0, FRX_HDR);
	buf[0] = s->flags;
	memcpy(buf + 4, &s->start, 4);
	memcpy(buf + 8, &s->key, 8);
	memcpy(buf + 16, &s->seq, 8);
	memcpy(buf + FRX_HDR, s->data, s->n);
	put(dir, name, buf, FRX_HDR + s->n);
}

/* Make a seed with the real sender: records of the given lengths/types. */
static void make(struct seed *s, uint8_t flags, uint32_t start, uint64_t seq, const uint32_t *lens,
		 const uint8_t *types, int n)
{
	memset(s, 0, sizeof(*s));
	uint32_t rsize = flags & FRX_F_BIG ? 8192 : 4096;
	s->flags = flags;
	s->start = start;
	s->key = zl_ring_key(0x8badf00d12345678ull);
	s->seq = seq;
	uint8_t *ring = calloc(1, rsize);
	_Atomic uint64_t rpos = start;
	struct zl_ring_tx tx;
	zl_ring_tx_init(&tx, ring, rsize, s->key, &rpos, NULL, NULL);
	if (flags & FRX_F_TAG_FIRST)
		zl_ring_tx_set_layout(&tx, ZL_LAYOUT_TAG_FIRST);
	zl_ring_tx_set_lines(&tx, flags & FRX_F_LINES);
	tx.wpos = start;
	tx.rpos_cache = start;
	tx.seq = seq;
	for (int i = 0; i < n; i++) {
		void *p;
		if (zl_ring_tx_reserve(&tx, lens[i], types ? types[i] : ZL_REC_MSG, &p)) {
			fprintf(stderr, "seed record %d does not fit\n", i);
			exit(1);
		}
		for (uint32_t j = 0; j < lens[i]; j++)
			((uint8_t *)p)[j] = (uint8_t)(i * 31 + j);
		zl_ring_tx_commit(&tx, lens[i]);
	}
	s->n = (uint32_t)(tx.wpos - start);
	if (s->n > rsize)
		s->n = rsize;
	for (uint32_t i = 0; i < s->n; i++)
		s->data[i] = ring[(start + i) & (rsize - 1)];
	free(ring);
}

static uint32_t len_off(const struct seed *s) { return s->flags & FRX_F_TAG_FIRST ? 8 : 0; }

static void patch64(struct seed *s, uint32_t off, uint64_t v) { memcpy(s->data + off, &v, 8); }

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s RING_DIR URL_DIR\n", argv[0]);
		return 2;
	}
	const char *rd = argv[1], *ud = argv[2];
	struct seed s;
	const uint32_t small[] = { 0, 1, 7, 8, 9, 100 };
	const uint32_t max1[] = { 2024 };
	const uint32_t wrap_pad[] = { 8, 200 };
	const uint32_t skip16[] = { 16 };
	const uint32_t exact[] = { 72, 8 };
	const uint32_t big[] = { 300, 4072 };
	const uint32_t three[] = { 5, 50, 500 };
	const uint32_t five[] = { 1, 2, 3, 4, 5 };
	const uint8_t types5[] = { ZL_REC_MSG, ZL_REC_FIRST, ZL_REC_MID, ZL_REC_LAST, ZL_REC_CLOSE };
	uint32_t many[60];
	for (int i = 0; i < 60; i++)
		many[i] = (uint32_t)(i * 7 % 40);

	memset(&s, 0, sizeof(s));
	put_seed(rd, "empty", &s);
	make(&s, 0, 0, 0, small, NULL, 6);
	put_seed(rd, "v_small", &s);
	make(&s, 0, 0, 0, max1, NULL, 1);
	put_seed(rd, "v_max", &s);
	make(&s, 0, 4000, 9, wrap_pad, NULL, 2);
	put_seed(rd, "v_wrap_pad", &s);
	make(&s, 0, 4080, 3, skip16, NULL, 1);
	put_seed(rd, "v_wrap_skip", &s);
	make(&s, 0, 4000, 0, exact, NULL, 2);
	put_seed(rd, "v_exact_end", &s);
	make(&s, FRX_F_BIG, 8000, 0, big, NULL, 2);
	put_seed(rd, "v_big_wrap", &s);
	make(&s, FRX_F_TAG_FIRST | FRX_F_TAG_LAST, 0, 0, three, NULL, 3);
	put_seed(rd, "v_tag_first", &s);
	make(&s, FRX_F_TAG_LAST, 100 * 4096 + 512, 12345, three, NULL, 3);
	put_seed(rd, "v_tag_last_lap100", &s);
	make(&s, 0, 64, 1ull << 62, five, types5, 5);
	put_seed(rd, "v_types_highseq", &s);
	make(&s, 8 << 4, 0, 0, many, NULL, 60);
	put_seed(rd, "v_many_publish", &s);
	make(&s, FRX_F_TAG_FIRST, 4000, 1, wrap_pad, NULL, 2);
	put_seed(rd, "v_tag_first_wrap", &s);
	make(&s, FRX_F_LINES | FRX_F_TAG_LAST, 0, 0, small, NULL, 6);
	put_seed(rd, "v_lines_small", &s);
	make(&s, FRX_F_LINES, 3968, 9, wrap_pad, NULL, 2);
	put_seed(rd, "v_lines_wrap_pad", &s);

	/* hostile: valid tags, bad len word */
	struct {
		const char *name;
		uint64_t lw;
	} bad[] = {
		{ "h_len_max1", 2025 | (uint64_t)ZL_REC_MSG << 32 },
		{ "h_len_huge", 0xffffffffu | (uint64_t)ZL_REC_MSG << 32 },
		{ "h_len_ring", 4096 | (uint64_t)ZL_REC_MSG << 32 },
		{ "h_type0", 100 },
		{ "h_type7", 100 | 7ull << 32 },
		{ "h_type255", 100 | 255ull << 32 },
		{ "h_reserved", 100 | (uint64_t)ZL_REC_MSG << 32 | 1ull << 50 },
		{ "h_pad_mid", 100 | (uint64_t)ZL_REC_PAD << 32 },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		make(&s, i & 1 ? FRX_F_TAG_LAST : 0, 0, 0, small + 5, NULL, 1); /* one 100-byte record */
		patch64(&s, len_off(&s), bad[i].lw);
		put_seed(rd, bad[i].name, &s);
	}
	/* crossing the end: a record at 4000 claiming 200 bytes */
	make(&s, 0, 4000, 0, exact, NULL, 1);
	patch64(&s, 0, 200 | (uint64_t)ZL_REC_MSG << 32);
	put_seed(rd, "h_cross_end", &s);
	/* PAD that stops short of the end */
	make(&s, 0, 4000, 9, wrap_pad, NULL, 2);
	patch64(&s, 32, 32 | (uint64_t)ZL_REC_PAD << 32);
	put_seed(rd, "h_pad_short", &s);
	/* bad footer, with and without tag_last */
	make(&s, FRX_F_TAG_LAST, 0, 0, three, NULL, 3);
	patch64(&s, 32 - 8, 0);
	put_seed(rd, "h_footer_taglast", &s);
	make(&s, 0, 0, 0, three, NULL, 3);
	patch64(&s, 32 - 8, 0);
	put_seed(rd, "h_footer", &s);
	/* stale: a record of the previous seq */
	make(&s, 0, 0, 5, three, NULL, 3);
	s.seq = 6;
	put_seed(rd, "h_stale_seq", &s);
	/* torn: header tag valid, payload half-written (footer old) */
	make(&s, 0, 0, 0, max1, NULL, 1);
	s.n = 1000;
	put_seed(rd, "h_torn", &s);

	/* URLs */
	const char *urls[] = {
		"shm://foo",
		"shm://foo?ring=65536&spin_us=0",
		"shm://a.b-c_d9?a=&b=c=d",
		"tcp://127.0.0.1:5555",
		"tcp://127.0.0.1:0?busy_poll=1",
		"tcp://[::1]:5555",
		"tcp://[fe80::1%eth0]:7",
		"tcp://[::1]",
		"tcp://h:1/p/q",
		"tcp://h?x=1:5",
		"unix:///tmp/x.sock",
		"unix:///tmp/x.sock?ring=4096&max_msg=10",
		"rdma://10.0.0.1:4791",
		"abcdefghijklmno://x",
		"",
		"shm",
		"://x",
		"SHM://x",
		"tcp://h:",
		"tcp://h:12a",
		"tcp://[::1",
		"tcp://[::1]x",
		"shm://x?a",
		"shm://x?=v",
		"shm://x?a=1&",
		"shm://x?a=1&&b=2",
		"shm://x?k0=0&k1=1&k2=2&k3=3&k4=4&k5=5&k6=6&k7=7&k8=8&k9=9&k10=10&k11=11&k12=12&k13=13&k14=14&k15=15&k16=16",
		"shm://x?kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk=1",
		"unix:///ppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp",
	};
	for (size_t i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
		char name[32];
		snprintf(name, sizeof(name), "u%02zu", i);
		put(ud, name, urls[i], strlen(urls[i]));
	}
	printf("corpus written to %s and %s\n", rd, ud);
	return 0;
}
