/* SPDX-License-Identifier: MIT */
/* Table-driven tests of zl_url_parse (src/core/url.c). */
#include "testlib.h"
#include "url.h"

struct param {
	const char *k, *v;
};

struct ucase {
	const char *url;
	int rc;
	const char *scheme, *host, *port, *path;
	int nparams;
	struct param p[3];
};

static const struct ucase cases[] = {
	/* good */
	{ "shm://foo", 0, "shm", "foo", "", "", 0, { { 0 } } },
	{ "shm://a.b-c_d9", 0, "shm", "a.b-c_d9", "", "", 0, { { 0 } } },
	{ "shm://foo?ring=65536&spin_us=0", 0, "shm", "foo", "", "", 2,
	  { { "ring", "65536" }, { "spin_us", "0" } } },
	{ "shm://foo?a=", 0, "shm", "foo", "", "", 1, { { "a", "" } } },
	{ "shm://foo?a=/b:c", 0, "shm", "foo", "", "", 1, { { "a", "/b:c" } } },
	{ "shm://foo?a=b=c", 0, "shm", "foo", "", "", 1, { { "a", "b=c" } } },
	{ "tcp://127.0.0.1:5555", 0, "tcp", "127.0.0.1", "5555", "", 0, { { 0 } } },
	{ "tcp://127.0.0.1:0", 0, "tcp", "127.0.0.1", "0", "", 0, { { 0 } } },
	{ "tcp://localhost", 0, "tcp", "localhost", "", "", 0, { { 0 } } },
	{ "tcp://[::1]:5555", 0, "tcp", "::1", "5555", "", 0, { { 0 } } },
	{ "tcp://[::1]", 0, "tcp", "::1", "", "", 0, { { 0 } } },
	{ "tcp://[fe80::1%eth0]:7", 0, "tcp", "fe80::1%eth0", "7", "", 0, { { 0 } } },
	{ "tcp://[2001:db8::1]:65535?busy_poll=1", 0, "tcp", "2001:db8::1", "65535", "", 1,
	  { { "busy_poll", "1" } } },
	{ "tcp://h:1/p/q", 0, "tcp", "h", "1", "/p/q", 0, { { 0 } } },
	{ "tcp://h?x=1:5", 0, "tcp", "h", "", "", 1, { { "x", "1:5" } } },
	{ "unix:///tmp/x.sock", 0, "unix", "", "", "/tmp/x.sock", 0, { { 0 } } },
	{ "unix:///tmp/x.sock?ring=4096&max_msg=10", 0, "unix", "", "", "/tmp/x.sock", 2,
	  { { "ring", "4096" }, { "max_msg", "10" } } },
	{ "rdma://10.0.0.1:4791", 0, "rdma", "10.0.0.1", "4791", "", 0, { { 0 } } },
	{ "abcdefghijklmno://x", 0, "abcdefghijklmno", "x", "", "", 0, { { 0 } } }, /* 15 */
	{ "x9://h", 0, "x9", "h", "", "", 0, { { 0 } } },

	/* bad */
	{ "", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } },
	{ "shm", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } },
	{ "shm:/x", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } },
	{ "shm:x", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } },
	{ "://x", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } },
	{ "SHM://x", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } },
	{ "s-h://x", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } },
	{ "s h://x", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } },
	{ "abcdefghijklmnop://x", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } }, /* 16 */
	{ "tcp://h:", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } },
	{ "tcp://h:12a", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } },
	{ "tcp://h:-1", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } },
	{ "tcp://h:1:2", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } },
	{ "tcp://h:12345678", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } }, /* port > 7 chars */
	{ "tcp://[::1", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } },
	{ "tcp://[::1]x", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } },
	{ "tcp://[::1]:", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } },
	{ "tcp://[::1]:x", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } },
	{ "shm://x?a", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } },
	{ "shm://x?=v", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } },
	{ "shm://x?a=1&", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } },
	{ "shm://x?a=1&&b=2", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } },
	{ "shm://x?&a=1", -EINVAL, 0, 0, 0, 0, 0, { { 0 } } },
};

static void check_case(const struct ucase *c)
{
	struct zl_url u;
	memset(&u, 0xa5, sizeof(u)); /* the parser must not depend on a clean struct */
	int rc = zl_url_parse(c->url, &u);
	CHECKF(rc == c->rc, "zl_url_parse(\"%s\") = %d (%s), expected %d", c->url, rc,
	       zl_strerror(rc), c->rc);
	if (rc)
		return;
	CHECKF(!strcmp(u.scheme, c->scheme), "\"%s\": scheme \"%s\"", c->url, u.scheme);
	CHECKF(!strcmp(u.host, c->host), "\"%s\": host \"%s\" want \"%s\"", c->url, u.host, c->host);
	CHECKF(!strcmp(u.port, c->port), "\"%s\": port \"%s\" want \"%s\"", c->url, u.port, c->port);
	CHECKF(!strcmp(u.path, c->path), "\"%s\": path \"%s\" want \"%s\"", c->url, u.path, c->path);
	CHECKF(u.nparams == c->nparams, "\"%s\": nparams %d want %d", c->url, u.nparams, c->nparams);
	for (int i = 0; i < c->nparams; i++) {
		CHECKF(!strcmp(u.params[i].key, c->p[i].k), "\"%s\": key %d \"%s\"", c->url, i,
		       u.params[i].key);
		CHECKF(!strcmp(u.params[i].val, c->p[i].v), "\"%s\": val %d \"%s\"", c->url, i,
		       u.params[i].val);
		const char *v = zl_url_param(&u, c->p[i].k);
		CHECK(v && !strcmp(v, c->p[i].v));
	}
	CHECK(zl_url_param(&u, "no-such-key") == NULL);
}

static int parse_str(const char *s)
{
	struct zl_url u;
	return zl_url_parse(s, &u);
}

/* "prefix" + n copies of ch + "suffix" */
static char *mk(const char *prefix, size_t n, char ch, const char *suffix)
{
	size_t a = strlen(prefix), b = strlen(suffix);
	char *s = malloc(a + n + b + 1);
	CHECK(s);
	memcpy(s, prefix, a);
	memset(s + a, ch, n);
	memcpy(s + a + n, suffix, b + 1);
	return s;
}

static void limits(void)
{
	char *s;
	/* host: 255 chars fit, 256 do not */
	s = mk("shm://", 255, 'h', "");
	CHECK_OK(parse_str(s));
	free(s);
	s = mk("shm://", 256, 'h', "");
	CHECK_RC(parse_str(s), -EINVAL);
	free(s);
	/* path: 255 chars fit ('/' + 254), 256 do not */
	s = mk("unix:///", 254, 'p', "");
	CHECK_OK(parse_str(s));
	free(s);
	s = mk("unix:///", 255, 'p', "");
	CHECK_RC(parse_str(s), -EINVAL);
	free(s);
	/* port: 7 digits fit the field */
	CHECK_OK(parse_str("tcp://h:1234567"));
	/* key 31 / 32, value 63 / 64 */
	s = mk("shm://x?", 31, 'k', "=v");
	CHECK_OK(parse_str(s));
	free(s);
	s = mk("shm://x?", 32, 'k', "=v");
	CHECK_RC(parse_str(s), -EINVAL);
	free(s);
	s = mk("shm://x?k=", 63, 'v', "");
	CHECK_OK(parse_str(s));
	free(s);
	s = mk("shm://x?k=", 64, 'v', "");
	CHECK_RC(parse_str(s), -EINVAL);
	free(s);

	/* 16 params fit, 17 do not */
	char buf[ZL_URL_MAX];
	for (int n = 16; n <= 17; n++) {
		int off = snprintf(buf, sizeof(buf), "shm://x?");
		for (int i = 0; i < n; i++)
			off += snprintf(buf + off, sizeof(buf) - (size_t)off, "%sk%d=%d",
					i ? "&" : "", i, i);
		struct zl_url u;
		int rc = zl_url_parse(buf, &u);
		if (n == 16) {
			CHECK_OK(rc);
			CHECK(u.nparams == 16);
			CHECK(!strcmp(zl_url_param(&u, "k15"), "15"));
		} else {
			CHECK_RC(rc, -EINVAL);
		}
	}

	/* total length: ZL_URL_MAX - 1 characters parse, ZL_URL_MAX do not */
	for (size_t total = ZL_URL_MAX - 1; total <= ZL_URL_MAX; total++) {
		/* unix:///ppp...(200)?k0=vvv...&k1=vvv... up to `total` chars */
		char *u = mk("unix:///", 200, 'p', "");
		size_t len = strlen(u);
		u = realloc(u, total + 1);
		CHECK(u);
		int i = 0;
		while (len < total) {
			size_t room = total - len;
			int hdr = snprintf(u + len, room + 1, "%ck%d=", i ? '&' : '?', i);
			CHECK(hdr > 0 && (size_t)hdr < room); /* leave at least one value char */
			len += (size_t)hdr;
			size_t v = total - len < 63 ? total - len : 63;
			if (total - len - v > 0 && total - len - v < 5)
				v -= 5; /* leave room for one more "&kN=x" */
			memset(u + len, 'v', v);
			len += v;
			u[len] = 0;
			i++;
		}
		CHECK(strlen(u) == total);
		CHECKF(parse_str(u) == (total < ZL_URL_MAX ? 0 : -EINVAL), "length %zu", total);
		free(u);
	}

	/* far over-long input */
	s = mk("shm://", 100000, 'a', "?x=1");
	CHECK_RC(parse_str(s), -EINVAL);
	free(s);
	s = mk("shm://x?", 100000, '&', "");
	CHECK_RC(parse_str(s), -EINVAL);
	free(s);
}

static void misc(void)
{
	struct zl_url u;
	CHECK_RC(zl_url_parse(NULL, &u), -EINVAL);
	CHECK_RC(zl_url_parse("shm://x", NULL), -EINVAL);

	/* re-use of a struct: no leftovers from the previous parse */
	CHECK_OK(zl_url_parse("tcp://a:1/p?x=1&y=2", &u));
	CHECK_OK(zl_url_parse("shm://b", &u));
	CHECK(!strcmp(u.host, "b") && !u.port[0] && !u.path[0] && u.nparams == 0);

	/* duplicate keys: the first wins */
	CHECK_OK(zl_url_parse("shm://x?a=1&a=2", &u));
	CHECK(u.nparams == 2);
	CHECK(!strcmp(zl_url_param(&u, "a"), "1"));

	/* every truncation of a good URL parses or fails cleanly */
	const char *good = "tcp://[2001:db8::1]:4242/path?ring=65536&spin_us=10";
	char buf[128];
	for (size_t n = 0; n <= strlen(good); n++) {
		memcpy(buf, good, n);
		buf[n] = 0;
		int rc = zl_url_parse(buf, &u);
		CHECKF(rc == 0 || rc == -EINVAL, "truncated \"%s\" -> %d", buf, rc);
	}
}

/* The public API maps URL problems to the documented errors. */
static void public_api(void)
{
	zl_listener *l = NULL;
	zl_channel *ch = NULL;
	CHECK_RC(zl_listen("bogus://x", NULL, &l), -EPROTONOSUPPORT);
	CHECK_RC(zl_connect("bogus://x", NULL, 0, &ch), -EPROTONOSUPPORT);
	CHECK_RC(zl_listen("not a url", NULL, &l), -EINVAL);
	CHECK_RC(zl_listen(NULL, NULL, &l), -EINVAL);
	CHECK_RC(zl_listen("shm://x", NULL, NULL), -EINVAL);
	CHECK_RC(zl_listen("shm://x?ring=1000", NULL, &l), -EINVAL);   /* not a power of 2 */
	CHECK_RC(zl_listen("shm://x?ring=2048", NULL, &l), -EINVAL);   /* too small */
	CHECK_RC(zl_listen("shm://x?ring=abc", NULL, &l), -EINVAL);
	CHECK_RC(zl_listen("shm://x?spin_us=-2", NULL, &l), -EINVAL);
	CHECK_RC(zl_listen("shm://x?max_msg=0", NULL, &l), -EINVAL);
	CHECK_RC(zl_listen("shm://x?busy_poll=2", NULL, &l), -EINVAL);
	CHECK_RC(zl_connect("tcp://127.0.0.1:1?ring=3", NULL, 0, &ch), -EINVAL);
	struct zl_opts o;
	zl_opts_init(&o);
	o.ring_size = 12345;
	CHECK_RC(zl_listen("shm://x", &o, &l), -EINVAL);
	zl_opts_init(&o);
	o.size = 4; /* caller's struct too small to be real */
	CHECK_RC(zl_listen("shm://x", &o, &l), -EINVAL);
}

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_case(&cases[i]);
	limits();
	misc();
	public_api();
	printf("url_parse: %zu table cases ok\n", sizeof(cases) / sizeof(cases[0]));
	return T_EXIT_PASS;
}
