/* SPDX-License-Identifier: MIT */
/* Option defaults, URL overrides and range checks. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

__attribute__((visibility("default")))
void zl_opts_init(struct zl_opts *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->ring_size = 1u << 20;
	o->max_msg = 64ull << 20;
	o->spin_us = 50;
	o->handshake_timeout_us = 5000000;
	o->max_peer_ring = 64u << 20;
	o->max_handshakes = 64;
}

/* The URL keys every transport takes (zl_opts_apply_url reads them). */
static const char *const core_keys[] = { "ring", "max_msg", "spin_us", "busy_poll",
					 "rpos_every", "max_peer_ring", "max_handshakes",
					 "handshake_timeout_us" };

bool zl_opts_core_key(const char *k)
{
	for (size_t i = 0; i < sizeof(core_keys) / sizeof(core_keys[0]); i++)
		if (!strcmp(k, core_keys[i]))
			return true;
	return false;
}

int zl_opts_check_keys(const struct zl_url *u)
{
	for (int i = 0; i < u->nparams; i++)
		if (!zl_opts_core_key(u->params[i].key)) {
			ZL_LOG(ZL_LOG_ERROR, "%s: unknown URL option '%s'", u->scheme,
			       u->params[i].key);
			return -EINVAL;
		}
	return 0;
}

static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 0);
	if (errno || end == s || *end || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

int zl_opts_apply_url(struct zl_opts *o, const struct zl_url *u)
{
	for (int i = 0; i < u->nparams; i++) {
		const char *k = u->params[i].key, *v = u->params[i].val;
		int64_t x;
		int rc;
		if (!strcmp(k, "ring")) {
			rc = parse_i64(v, 1, 1ll << 30, &x);
			o->ring_size = (uint32_t)x;
		} else if (!strcmp(k, "max_msg")) {
			rc = parse_i64(v, 1, 1ll << 40, &x);
			o->max_msg = (uint64_t)x;
		} else if (!strcmp(k, "spin_us")) {
			rc = parse_i64(v, -1, INT64_MAX, &x);
			o->spin_us = x;
		} else if (!strcmp(k, "busy_poll")) {
			rc = parse_i64(v, 0, 1, &x);
			o->busy_poll = (int)x;
		} else if (!strcmp(k, "rpos_every")) {
			rc = parse_i64(v, 0, 1ll << 30, &x);
			o->rpos_every = (uint32_t)x;
		} else if (!strcmp(k, "max_peer_ring")) {
			rc = parse_i64(v, 4096, 1ll << 30, &x);
			o->max_peer_ring = (uint32_t)x;
		} else if (!strcmp(k, "max_handshakes")) {
			rc = parse_i64(v, 1, 65536, &x);
			o->max_handshakes = (uint32_t)x;
		} else if (!strcmp(k, "handshake_timeout_us")) {
			rc = parse_i64(v, 1, INT64_MAX, &x);
			o->handshake_timeout_us = x;
		} else {
			/* transport-specific keys are checked by the transport */
			continue;
		}
		if (rc) {
			ZL_LOG(ZL_LOG_ERROR, "bad value '%s' for URL option '%s'", v, k);
			return rc;
		}
	}
	return zl_opts_check(o);
}

int zl_opts_check(const struct zl_opts *o)
{
	if (o->ring_size < 4096 || o->ring_size > (1u << 30) ||
	    (o->ring_size & (o->ring_size - 1))) {
		ZL_LOG(ZL_LOG_ERROR, "ring size %u must be a power of two in 4 KiB..1 GiB",
		       o->ring_size);
		return -EINVAL;
	}
	const char *bad = o->max_msg == 0 || o->max_msg > (1ull << 40) ? "max_msg must be 1..2^40"
		: o->spin_us < -1 ? "spin_us must be -1 or more"
		: o->handshake_timeout_us <= 0 ? "handshake_timeout_us must be positive"
		: o->rpos_every > o->ring_size / 2 ? "rpos_every must be at most half the ring"
		: o->max_peer_ring < 4096 || o->max_peer_ring > (1u << 30)
			? "max_peer_ring must be 4 KiB..1 GiB"
		: o->max_handshakes < 1 || o->max_handshakes > 65536
			? "max_handshakes must be 1..65536"
		: NULL;
	if (bad) {
		ZL_LOG(ZL_LOG_ERROR, "options: %s", bad);
		return -EINVAL;
	}
	return 0;
}
