/* SPDX-License-Identifier: MIT */
/* URL parsing: scheme://host[:port][/path][?k=v&...]. Strict and bounded. */
#include <errno.h>
#include <string.h>

#include "url.h"

static int copy_span(char *dst, size_t cap, const char *s, size_t n)
{
	if (n >= cap)
		return -EINVAL;
	memcpy(dst, s, n);
	dst[n] = 0;
	return 0;
}

static int parse_params(const char *q, struct zl_url *u)
{
	while (*q) {
		const char *amp = strchr(q, '&');
		size_t n = amp ? (size_t)(amp - q) : strlen(q);
		const char *eq = memchr(q, '=', n);
		if (!eq || eq == q || u->nparams >= ZL_URL_MAX_PARAMS)
			return -EINVAL;
		int i = u->nparams++;
		if (copy_span(u->params[i].key, sizeof(u->params[i].key), q, (size_t)(eq - q)) ||
		    copy_span(u->params[i].val, sizeof(u->params[i].val), eq + 1,
			      n - (size_t)(eq - q) - 1))
			return -EINVAL;
		q += n + (amp ? 1 : 0);
		if (amp && !*q)
			return -EINVAL;
	}
	return 0;
}

int zl_url_parse(const char *s, struct zl_url *u)
{
	if (!s || !u || strlen(s) >= ZL_URL_MAX)
		return -EINVAL;
	memset(u, 0, sizeof(*u));
	const char *sep = strstr(s, "://");
	if (!sep || sep == s || copy_span(u->scheme, sizeof(u->scheme), s, (size_t)(sep - s)))
		return -EINVAL;
	for (const char *c = u->scheme; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9')))
			return -EINVAL;
	const char *p = sep + 3;
	const char *q = strchr(p, '?');
	size_t rest = q ? (size_t)(q - p) : strlen(p);
	if (q && parse_params(q + 1, u))
		return -EINVAL;

	/* authority ends at the first '/' (unix:///path has an empty one) */
	const char *slash = memchr(p, '/', rest);
	size_t alen = slash ? (size_t)(slash - p) : rest;
	if (slash && copy_span(u->path, sizeof(u->path), slash, rest - alen))
		return -EINVAL;
	const char *a = p, *hend = p + alen;
	if (alen && *a == '[') { /* [v6]:port */
		const char *rb = memchr(a, ']', alen);
		if (!rb || copy_span(u->host, sizeof(u->host), a + 1, (size_t)(rb - a - 1)))
			return -EINVAL;
		a = rb + 1;
		if (a < hend && *a != ':')
			return -EINVAL;
	} else {
		const char *colon = memchr(a, ':', alen);
		size_t hlen = colon ? (size_t)(colon - a) : alen;
		if (copy_span(u->host, sizeof(u->host), a, hlen))
			return -EINVAL;
		a += hlen;
	}
	if (a < hend) { /* ":port" */
		a++;
		if (a == hend || copy_span(u->port, sizeof(u->port), a, (size_t)(hend - a)))
			return -EINVAL;
		for (const char *c = u->port; *c; c++)
			if (*c < '0' || *c > '9')
				return -EINVAL;
	}
	return 0;
}

const char *zl_url_param(const struct zl_url *u, const char *key)
{
	for (int i = 0; i < u->nparams; i++)
		if (!strcmp(u->params[i].key, key))
			return u->params[i].val;
	return NULL;
}
