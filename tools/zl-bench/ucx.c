/* SPDX-License-Identifier: MIT */
/*
 * UCX active messages as a method of zl-bench blocks, so that zipline and
 * UCX are compared in one run: UCP over its shared-memory transport
 * (UCX_TLS=posix unless set), one ucp_am_send_nbx each way per round trip,
 * as ucx_perftest -t ucp_am_lat does: the receiver's callback notes the
 * message (and its first 8 bytes, which the client checks) without copying
 * it, and the server answers from its own buffer.
 * Built only where the UCX headers are (libucx-dev); elsewhere the method
 * is reported as unavailable.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "ucx.h"

#ifdef ZLB_HAVE_UCX
#include <ucp/api/ucp.h>

#define AM_ID 7
#define GIVE_UP_NS 1000000000ull /* 1 s without progress is a hang */

struct zlb_ucx {
	ucp_context_h ctx;
	ucp_worker_h w;
	ucp_ep_h ep;
	uint64_t got, first8; /* set by the callback */
	size_t got_len;
	uint8_t *buf;
};

static ucs_status_t am_cb(void *arg, const void *hdr, size_t hdr_len, void *data, size_t len,
			  const ucp_am_recv_param_t *param)
{
	struct zlb_ucx *u = arg;
	(void)hdr, (void)hdr_len;
	u->got_len = len;
	u->first8 = 0;
	if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) && len >= 8)
		memcpy(&u->first8, data, 8);
	u->got++;
	return UCS_OK; /* the data is not kept */
}

/* Progress until *flag reaches want; 0, or -1 after GIVE_UP_NS. */
static int progress_until(struct zlb_ucx *u, uint64_t *flag, uint64_t want)
{
	uint64_t start = 0, spins = 0;
	while (*(volatile uint64_t *)flag != want) {
		ucp_worker_progress(u->w);
		if (++spins % 1024)
			continue;
		uint64_t now = mono_ns();
		if (!start)
			start = now;
		else if (now - start > GIVE_UP_NS)
			return -1;
	}
	return 0;
}

static int send_wait(struct zlb_ucx *u, const void *buf, size_t len)
{
	ucp_request_param_t prm = { .op_attr_mask = 0 };
	void *req = ucp_am_send_nbx(u->ep, AM_ID, NULL, 0, buf, len, &prm);
	if (UCS_PTR_IS_ERR(req))
		return -1;
	uint64_t start = mono_ns(), spins = 0;
	while (req && ucp_request_check_status(req) == UCS_INPROGRESS) {
		ucp_worker_progress(u->w);
		if (!(++spins % 1024) && mono_ns() - start > GIVE_UP_NS)
			break;
	}
	int r = req && ucp_request_check_status(req) != UCS_OK ? -1 : 0;
	if (req)
		ucp_request_free(req);
	return r;
}

static void say_no(struct ucx_xchg *x, int side, const char *why)
{
	fprintf(stderr, "zl-bench blocks: no UCX method: %s\n", why);
	atomic_store(&x->len[side], UCX_XCHG_FAILED);
}

int ucx_open(struct zlb_ucx **out, struct ucx_xchg *x, int side, size_t size)
{
	struct zlb_ucx *u = calloc(1, sizeof(*u));
	ucp_config_t *cfg = NULL;
	ucp_address_t *addr = NULL;
	size_t alen = 0;
	*out = NULL;
	if (!u || !(u->buf = calloc(1, size ? size : 1)))
		return say_no(x, side, "out of memory"), free(u), -1;
	if (ucp_config_read(NULL, NULL, &cfg) != UCS_OK)
		return say_no(x, side, "ucp_config_read failed"), free(u->buf), free(u), -1;
	if (!getenv("UCX_TLS"))
		ucp_config_modify(cfg, "TLS", "posix");
	ucp_params_t p = { .field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM };
	ucs_status_t st = ucp_init(&p, cfg, &u->ctx);
	ucp_config_release(cfg);
	ucp_worker_params_t wp = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
				   .thread_mode = UCS_THREAD_MODE_SINGLE };
	if (st != UCS_OK || ucp_worker_create(u->ctx, &wp, &u->w) != UCS_OK ||
	    ucp_worker_get_address(u->w, &addr, &alen) != UCS_OK || alen > UCX_XCHG_MAX) {
		say_no(x, side, "ucp_init, ucp_worker_create or ucp_worker_get_address failed");
		goto fail;
	}
	memcpy(x->addr[side], addr, alen);
	atomic_store(&x->len[side], (uint32_t)alen);
	ucp_worker_release_address(u->w, addr);
	uint32_t plen;
	uint64_t start = mono_ns();
	while (!(plen = atomic_load(&x->len[!side])))
		if (mono_ns() - start > 10 * GIVE_UP_NS) {
			fprintf(stderr, "zl-bench blocks: the peer's UCX address did not come\n");
			goto fail;
		}
	if (plen == UCX_XCHG_FAILED)
		goto fail;
	ucp_am_handler_param_t hp = {
		.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
			      UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
		/* whole messages only, as ucx_perftest's handler asks */
		.id = AM_ID, .cb = am_cb, .arg = u, .flags = UCP_AM_FLAG_WHOLE_MSG,
	};
	ucp_ep_params_t ep = { .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
			       .address = (const ucp_address_t *)x->addr[!side] };
	if (ucp_worker_set_am_recv_handler(u->w, &hp) != UCS_OK ||
	    ucp_ep_create(u->w, &ep, &u->ep) != UCS_OK) {
		fprintf(stderr, "zl-bench blocks: UCX endpoint setup failed\n");
		goto fail;
	}
	*out = u;
	return 0;
fail:
	ucx_close(u);
	return -1;
}

int ucx_ping(struct zlb_ucx *u, const void *msg, size_t size, uint64_t q)
{
	uint64_t want = u->got + 1;
	if (send_wait(u, msg, size) || progress_until(u, &u->got, want))
		return -1;
	return u->got_len != size || (size >= 8 && u->first8 != q);
}

int ucx_pong(struct zlb_ucx *u)
{
	if (progress_until(u, &u->got, u->got + 1))
		return -1;
	memcpy(u->buf, &u->first8, u->got_len >= 8 ? 8 : 0);
	return send_wait(u, u->buf, u->got_len);
}

void ucx_close(struct zlb_ucx *u)
{
	if (!u)
		return;
	if (u->ep) {
		ucp_request_param_t prm = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
					    .flags = UCP_EP_CLOSE_FLAG_FORCE };
		void *req = ucp_ep_close_nbx(u->ep, &prm);
		uint64_t start = mono_ns();
		while (req && !UCS_PTR_IS_ERR(req) && ucp_request_check_status(req) == UCS_INPROGRESS &&
		       mono_ns() - start < GIVE_UP_NS)
			ucp_worker_progress(u->w);
		if (req && !UCS_PTR_IS_ERR(req))
			ucp_request_free(req);
	}
	if (u->w)
		ucp_worker_destroy(u->w);
	if (u->ctx)
		ucp_cleanup(u->ctx);
	free(u->buf);
	free(u);
}

#else /* no UCX headers at build time */

int ucx_open(struct zlb_ucx **out, struct ucx_xchg *x, int side, size_t size)
{
	(void)size;
	*out = NULL;
	if (side == 0)
		fprintf(stderr, "zl-bench blocks: no UCX method: built without the UCX headers "
				"(apt-get install libucx-dev, then rebuild)\n");
	atomic_store(&x->len[side], UCX_XCHG_FAILED);
	return -1;
}

int ucx_ping(struct zlb_ucx *u, const void *msg, size_t size, uint64_t q)
{
	(void)u, (void)msg, (void)size, (void)q;
	return -1;
}

int ucx_pong(struct zlb_ucx *u)
{
	(void)u;
	return -1;
}

void ucx_close(struct zlb_ucx *u) { (void)u; }

#endif
