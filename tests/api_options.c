/* SPDX-License-Identifier: MIT */
/*
 * api_options: what a newcomer's first URLs and option structures get,
 * each case named after the behaviour: a URL key no transport knows is
 * refused on every transport (shm:// took it silently); max_handshakes=
 * is taken on every transport (tcp:// and unix:// refused it); tcp://
 * without a port is refused for listening too; a host name that does not
 * resolve is -EADDRNOTAVAIL, not "No route to host"; reserved fields that
 * are not zero, a struct zl_opts_init never filled, and rpos_every over
 * half the ring are refused; zl_strerror says what zipline means by the
 * codes whose libc text misleads. Exit 0 pass, 1 fail.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <zipline.h>

static int failed;

static void expect(const char *name, const char *what, int got, int want)
{
	if (got == want) {
		printf("ok %s: %s\n", name, what);
		return;
	}
	printf("FAIL %s: %s = %d (%s), want %d (%s)\n", name, what, got, zl_strerror(got), want,
	       zl_strerror(want));
	failed = 1;
}

static int try_listen(const char *url, const struct zl_opts *o)
{
	zl_listener *l = NULL;
	int r = zl_listen(url, o, &l);
	if (!r)
		zl_listener_close(l);
	return r;
}

static int try_connect(const char *url)
{
	zl_channel *c = NULL;
	int r = zl_connect(url, NULL, 1000000, &c);
	if (!r)
		zl_close(c);
	return r;
}

static void has(const char *name, int err, const char *word)
{
	const char *t = zl_strerror(err);
	if (strstr(t, word)) {
		printf("ok %s: zl_strerror(%d) = \"%s\"\n", name, err, t);
		return;
	}
	printf("FAIL %s: zl_strerror(%d) = \"%s\", want it to say \"%s\"\n", name, err, t, word);
	failed = 1;
}

int main(void)
{
	char shm[64], uds[64], url[128];
	snprintf(shm, sizeof shm, "shm://api-options-%d", (int)getpid());
	snprintf(uds, sizeof uds, "unix:///tmp/api-options-%d", (int)getpid());

	snprintf(url, sizeof url, "%s?bogus=1", shm);
	expect("url_unknown_key_refused", url, try_listen(url, NULL), -EINVAL);
	expect("url_unknown_key_refused", url, try_connect(url), -EINVAL);
	expect("url_unknown_key_refused", "tcp://127.0.0.1:0?bogus=1",
	       try_listen("tcp://127.0.0.1:0?bogus=1", NULL), -EINVAL);
	snprintf(url, sizeof url, "%s?bogus=1", uds);
	expect("url_unknown_key_refused", url, try_listen(url, NULL), -EINVAL);

	snprintf(url, sizeof url, "%s?max_handshakes=8", shm);
	expect("url_max_handshakes_taken", url, try_listen(url, NULL), 0);
	expect("url_max_handshakes_taken", "tcp://127.0.0.1:0?max_handshakes=8",
	       try_listen("tcp://127.0.0.1:0?max_handshakes=8", NULL), 0);
	snprintf(url, sizeof url, "%s?max_handshakes=8", uds);
	expect("url_max_handshakes_taken", url, try_listen(url, NULL), 0);
	unlink(uds + strlen("unix://"));

	expect("tcp_needs_port", "listen tcp://127.0.0.1",
	       try_listen("tcp://127.0.0.1", NULL), -EINVAL);
	expect("tcp_needs_port", "connect tcp://127.0.0.1", try_connect("tcp://127.0.0.1"),
	       -EINVAL);

	/* .invalid never resolves (RFC 6761) */
	expect("host_unresolved_is_eaddrnotavail", "connect tcp://no-such-host.invalid:80",
	       try_connect("tcp://no-such-host.invalid:80"), -EADDRNOTAVAIL);
	expect("host_unresolved_is_eaddrnotavail", "listen tcp://no-such-host.invalid:0",
	       try_listen("tcp://no-such-host.invalid:0", NULL), -EADDRNOTAVAIL);

	struct zl_opts o;
	zl_opts_init(&o);
	o.reserved[5] = 1;
	expect("opts_reserved_nonzero_refused", "shm, reserved[5] = 1", try_listen(shm, &o),
	       -EINVAL);
	expect("opts_reserved_nonzero_refused", "tcp, reserved[5] = 1",
	       try_listen("tcp://127.0.0.1:0", &o), -EINVAL);
	memset(&o, 0, sizeof o);
	expect("opts_unfilled_refused", "a zeroed struct zl_opts", try_listen(shm, &o), -EINVAL);
	zl_opts_init(&o);
	expect("opts_filled_taken", "zl_opts_init's defaults", try_listen(shm, &o), 0);
	snprintf(url, sizeof url, "%s?ring=65536&rpos_every=40000", shm);
	expect("rpos_every_bounded", url, try_listen(url, NULL), -EINVAL);

	has("strerror_call_slots", -EBUSY, "call slot");
	has("strerror_cas_mismatch", -ESTALE, "compare-and-swap");
	has("strerror_unresolved", -EADDRNOTAVAIL, "resolve");
	has("strerror_handshakes", -EUSERS, "peers");
	return failed;
}
