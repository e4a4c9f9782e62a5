/* SPDX-License-Identifier: MIT */
/* zl-kvd --onesided: the one-sided store (zl_kvos) and its --stats. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../../src/onesided/os_proto.h"
#include "zl-kvd.h"

/* url with store=onesided taken off (zl_client_connect refuses it). */
static void plain_url(const char *url, char *out, size_t cap)
{
	snprintf(out, cap, "%s", url);
	char *p = strstr(out, "store=onesided");
	if (!p)
		return;
	char *rest = p + strlen("store=onesided");
	if (*rest == '&')
		memmove(p, rest + 1, strlen(rest + 1) + 1);
	else
		p[-1] = 0; /* it was last: drop it and its '?' or '&' */
}

int kvd_os_stats(const char *url)
{
	char plain[600];
	plain_url(url, plain, sizeof(plain));
	zl_client *cli;
	int rc = zl_client_connect(plain, NULL, 5000000, &cli);
	if (rc) {
		fprintf(stderr, "zl-kvd: connect %s: %s\n", plain, zl_strerror(rc));
		return 1;
	}
	const void *p;
	size_t n;
	struct os_stats_rep s;
	rc = zl_call(cli, OS_STATS, "", 0, &p, &n, 5000000);
	if (!rc && n != sizeof(s))
		rc = -EPROTO;
	if (rc) {
		fprintf(stderr, "zl-kvd: stats from %s: %s\n", plain, zl_strerror(rc));
		zl_client_close(cli);
		return 1;
	}
	memcpy(&s, p, sizeof(s));
	printf("clients=%" PRIu64 " regions_free=%" PRIu64 " regions_server=%" PRIu64
	       " gc_runs=%" PRIu64 " gc_copied=%" PRIu64 " gc_holes=%" PRIu64
	       " cleanups=%" PRIu64 " cleanup_moved=%" PRIu64 " expired=%" PRIu64
	       " dropped=%" PRIu64 " quarantined=%" PRIu64 " live=%" PRIu64 " deleted=%" PRIu64 " holes=%" PRIu64
	       " scans=%" PRIu64 "\n",
	       s.clients, s.regions_free, s.regions_server, s.gc_runs, s.gc_copied, s.gc_holes,
	       s.cleanups, s.cleanup_moved, s.expired, s.dropped, s.quarantined, s.live, s.deleted, s.holes, s.scans);
	zl_client_close(cli);
	return 0;
}
