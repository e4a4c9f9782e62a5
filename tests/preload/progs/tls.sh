#!/bin/sh
# SPDX-License-Identifier: MIT
# tls.sh ZL_RUN: 50 TLS connections (tls.py) whose client sends close_notify
# and closes with the server's answer unread (its kernel resets the
# connection): the server reads the alert every time, plain, preloaded at
# both ends, and preloaded at one end each.
ZL_RUN=$1
. "$(dirname "$0")/lib.sh"
need python3 openssl
tls=$(dirname "$0")/tls.py
openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -days 2 \
	-keyout "$tmp/key" -out "$tmp/cert" > /dev/null 2>&1 || fail "openssl: no certificate"
run() { # run NAME SERVER_PRE CLIENT_PRE
	name=$1 d="$tmp/$1"
	mkdir -p "$d"
	with() { if [ "$1" = 1 ]; then shift; ZL_LOG=debug "$ZL_RUN" -- "$@"; else shift; "$@"; fi; }
	with "$2" python3 "$tls" server "$tmp/cert" "$tmp/key" "$d/port" 50 > "$d/server.out" 2>>"$tmp/zl.log" &
	sp=$!
	wait_for 50 test -s "$d/port" || fail "$name: the server did not start"
	with "$3" python3 "$tls" client "$(cat "$d/port")" 50 2>>"$tmp/zl.log" || fail "$name: the client failed"
	wait $sp || fail "$name: the server failed"
	got=$(sort "$d/server.out" | uniq -c | tr -s ' ' | tr '\n' ';')
	[ "$(grep -c '^alert$' "$d/server.out")" = 50 ] || fail "$name: the server read: $got"
	echo "$name: 50 of 50 alerts read before the reset"
}
run plain 0 0
run both 1 1
run server-only 1 0
run client-only 0 1
n=$(switched)
[ "$n" -ge 50 ] || fail "only $n connections switched"
echo "PASS: tls: every close_notify read before the reset, in all four placements ($n switched)"
