/* SPDX-License-Identifier: MIT */
/*
 * The one-sided store's access method over rdma://: RDMA READ, WRITE and
 * CMP_AND_SWP on the server's chunk through the window the server bound to
 * this client's connection (zl_onesided_ops of the verbs transport), into
 * and out of the table's buffers, registered here. Requests are posted as
 * table.c asks and waited for at its sync: the reads of one step go out
 * together (one round trip), and RC completes them in order; a batch's
 * compare-and-swaps too, each into its own result word.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "os_rdma.h"

static struct zl_rmem *mem_of(struct os_rdma *r, const void *p)
{
	for (int i = 0; i < r->n; i++)
		if ((const uint8_t *)p >= r->lo[i] && (const uint8_t *)p < r->hi[i])
			return r->m[i];
	return NULL;
}

static int rd_read(void *ctx, uint64_t off, void *dst, uint32_t len)
{
	struct os_rdma *r = ctx;
	struct zl_rmem *m = mem_of(r, dst);
	return m ? r->ops->read(r->ch, m, dst, len, &r->win, off) : -EINVAL;
}

static int rd_write(void *ctx, uint64_t off, const void *src, uint32_t len)
{
	struct os_rdma *r = ctx;
	struct zl_rmem *m = mem_of(r, src);
	if (!m || off > UINT32_MAX)
		return -EINVAL;
	return r->ops->write(r->ch, m, src, len, &r->win, (uint32_t)off);
}

static int rd_cas(void *ctx, uint64_t off, uint64_t expect, uint64_t desired, uint64_t *old)
{
	struct os_rdma *r = ctx;
	if (r->ncas == OS_CAS_MAX) /* table.c syncs before */
		return -EINVAL;
	int rc = r->ops->cas(r->ch, r->m[OS_RM_CAS], r->cas_buf + r->ncas, &r->win, off, expect,
			     desired);
	if (!rc)
		r->cas_out[r->ncas++] = old;
	return rc;
}

/* Wait for everything posted; then the compare-and-swaps' results are
 * where their callers asked (0 after an error: no CAS matched). */
static int rd_sync(void *ctx)
{
	struct os_rdma *r = ctx;
	int rc = r->ops->sync(r->ch);
	for (int i = 0; i < r->ncas; i++)
		*r->cas_out[i] = rc ? 0 : r->cas_buf[i];
	r->ncas = 0;
	return rc;
}

static int add(struct os_rdma *r, void *p, size_t len)
{
	int i = r->n;
	int rc = r->ops->reg(r->ch, p, len, &r->m[i]);
	if (rc)
		return rc;
	r->lo[i] = p;
	r->hi[i] = (uint8_t *)p + len;
	r->n++;
	return 0;
}

int os_rdma_open(struct os_rdma *r, zl_channel *ch, struct os_table *t, uint64_t raddr,
		 uint32_t rkey)
{
	memset(r, 0, sizeof(*r));
	r->ch = ch;
	r->ops = ch->os;
	r->win = (struct zl_rwin){ .addr = raddr, .rkey = rkey, .len = (uint32_t)t->g.chunk_len };
	if (!r->ops || !r->ops->read || t->g.chunk_len > UINT32_MAX)
		return -EPROTONOSUPPORT;
	size_t stage = os_ct_size(ZL_KV_MAX_KEY, ZL_KV_MAX_VAL);
	size_t cas_len = (OS_CAS_MAX * 8 + 63) & ~(size_t)63;
	r->cas_buf = aligned_alloc(64, cas_len);
	r->stage = malloc(stage);
	r->lstage = malloc((size_t)OS_LANES * OS_LSTAGE);
	if (!r->cas_buf || !r->stage || !r->lstage)
		return -ENOMEM;
	/* OS_RM_CAS first: rd_cas names it */
	int rc = add(r, r->cas_buf, cas_len);
	if (!rc)
		rc = add(r, r->stage, stage);
	if (!rc)
		rc = add(r, r->lstage, (size_t)OS_LANES * OS_LSTAGE);
	if (!rc)
		rc = add(r, t->buf, t->buf_cap);
	if (!rc)
		rc = add(r, t->ents_all, OS_ENTS_BYTES(t));
	if (!rc)
		rc = add(r, t->pre_all, OS_PRE_BYTES);
	if (rc)
		return rc;
	t->io = (struct os_io){ rd_read, rd_write, rd_cas, rd_sync, r };
	return 0;
}

void os_rdma_close(struct os_rdma *r)
{
	for (int i = 0; i < r->n; i++)
		r->ops->dereg(r->m[i]);
	r->n = 0;
	free(r->cas_buf);
	free(r->stage);
	free(r->lstage);
	r->cas_buf = NULL;
	r->stage = NULL;
	r->lstage = NULL;
}
