#!/bin/sh
# SPDX-License-Identifier: MIT
# nginx.sh ZL_RUN: nginx (a master and one worker, epoll, sendfile) serving
# a 10 MiB file to curl over TCP, plain and preloaded: the same sha256,
# three times on one keep-alive connection, and the connections switched.
# Both run as a user that is not root (nginx's workers would otherwise
# change user, and the preload switches only connections of one user).
ZL_RUN=$1
. "$(dirname "$0")/lib.sh"
need curl sha256sum setpriv
ngx=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$ngx" ] || skip "nginx is not installed (scripts/install-deps.sh)"
chmod 755 "$tmp"
head -c $((10 << 20)) /dev/urandom > "$tmp/file"
chmod 644 "$tmp/file"
want=$(sha256sum < "$tmp/file" | cut -d' ' -f1)

run() {
	mode=$1 port=$(free_port) d="$tmp/$mode"
	mkdir -p "$d/logs" && chmod -R 777 "$d"
	cat > "$d/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $d/nginx.pid;
error_log $d/logs/error.log;
events { worker_connections 64; }
http {
	access_log off;
	sendfile on;
	client_body_temp_path $d/body;
	proxy_temp_path $d/proxy;
	fastcgi_temp_path $d/fastcgi;
	uwsgi_temp_path $d/uwsgi;
	scgi_temp_path $d/scgi;
	server {
		listen 127.0.0.1:$port;
		root $tmp;
	}
}
CONF
	if [ "$mode" = pre ]; then
		as_bg env ZL_LOG=debug "$ZL_RUN" -- "$ngx" -p "$d" -c "$d/nginx.conf" \
			>>"$tmp/server.out" 2>>"$tmp/zl.log"
	else
		as_bg "$ngx" -p "$d" -c "$d/nginx.conf" >>"$tmp/server.out" 2>&1
	fi
	wait_for 50 curl -sf -o /dev/null "http://127.0.0.1:$port/file" ||
		fail "$mode: nginx did not start: $(cat "$d/logs/error.log" "$tmp/server.out" 2>/dev/null | tail -3)"
	u="http://127.0.0.1:$port/file"
	if [ "$mode" = pre ]; then
		as env ZL_LOG=debug "$ZL_RUN" -- curl -sf "$u" "$u" "$u" 2>>"$tmp/zl.log" > "$d/got"
	else
		as curl -sf "$u" "$u" "$u" > "$d/got"
	fi || fail "$mode: curl failed"
	[ "$(stat -c %s "$d/got")" = $((30 << 20)) ] || fail "$mode: got $(stat -c %s "$d/got") bytes"
	for i in 0 1 2; do
		got=$(tail -c +$((i * (10 << 20) + 1)) "$d/got" | head -c $((10 << 20)) | sha256sum | cut -d' ' -f1)
		[ "$got" = "$want" ] || fail "$mode: copy $i has sha256 $got, want $want"
	done
	echo "$mode: 3 x 10 MiB over one connection, sha256 $want"
}
run plain
run pre
n=$(switched)
[ "$n" -ge 1 ] || fail "no connection switched to shared memory"
echo "PASS: nginx: the same file plain and preloaded; $n connections switched"
