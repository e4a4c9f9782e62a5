/* SPDX-License-Identifier: MIT */
/* rdma:// when the library was built without libibverbs. */
#include "internal.h"

#ifndef ZL_HAVE_VERBS
static int no_listen(const struct zl_url *u, const struct zl_opts *o, zl_listener **out)
{
	ZL_LOG(ZL_LOG_ERROR, "rdma:// is not built in (rebuild with libibverbs-dev installed)");
	return -EPROTONOSUPPORT;
}

static int no_connect(const struct zl_url *u, const struct zl_opts *o, int64_t timeout_us,
		      zl_channel **out)
{
	return no_listen(u, o, NULL);
}

const struct zl_transport zl_transport_rdma = {
	.scheme = "rdma",
	.listen = no_listen,
	.connect = no_connect,
};
#endif
