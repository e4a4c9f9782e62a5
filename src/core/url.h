/* SPDX-License-Identifier: MIT */
#ifndef ZL_URL_H
#define ZL_URL_H

#include <stddef.h>

#define ZL_URL_MAX 512
#define ZL_URL_MAX_PARAMS 16

/*
 * A parsed endpoint URL: scheme://host[:port][/path][?k=v&k=v]
 *   shm://NAME          host = NAME (1..100 chars of [A-Za-z0-9._-])
 *   tcp://HOST:PORT     host may be [v6addr]; port required for connect
 *   unix:///abs/path    path = "/abs/path"
 */
struct zl_url {
	char scheme[16];
	char host[256];
	char port[8];
	char path[256];
	int nparams;
	struct {
		char key[32];
		char val[64];
	} params[ZL_URL_MAX_PARAMS];
};

/* 0, or -EINVAL for a malformed or over-long URL. */
int zl_url_parse(const char *s, struct zl_url *u);

/* The value of parameter key, or NULL. */
const char *zl_url_param(const struct zl_url *u, const char *key);

#endif
