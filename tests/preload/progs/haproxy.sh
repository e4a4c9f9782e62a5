#!/bin/sh
# SPDX-License-Identifier: MIT
# haproxy.sh ZL_RUN [MIB]: HAProxy in TCP mode with splice forced (option
# splice-request, splice-response), preloaded, between a client and a
# server (bulk.py) that send MIB MiB (default 256) each way at once: the
# bytes that come out are the bytes that went in, in all four placements
# (neither end preloaded, both, the client only, the server only), each
# direction's sha256 checked against the stream's. A run without any
# preload first. HAProxy's connections to a preloaded end switched.
# The client shuts its sending side only after the server's stream ended
# (bulk.py says why: Debian 12's HAProxy 2.6 with splice cuts a stream
# short or resets it when both ends' shutdowns cross it, now and then with
# no preload anywhere, which would hide what this test looks for;
# bench/preload-haproxy.sh --crossing counts it).
# make check sends 32 MiB each way; bench/preload-haproxy.sh repeats it.
# ZL_HAPROXY_THREADS: HAProxy's threads (default: its own choice).
# Run: sh tests/preload/progs/haproxy.sh build/tools/zl-run 64
ZL_RUN=$1 mib=${2:-256} threads=${ZL_HAPROXY_THREADS:-}
. "$(dirname "$0")/lib.sh"
need haproxy python3
bulk=$(dirname "$0")/bulk.py
n=$((mib << 20))
want_c=$(python3 "$bulk" expect "$n" 1) # what the server must get
want_s=$(python3 "$bulk" expect "$n" 2) # and the client
chmod 755 "$tmp"

run() { # run NAME HAPROXY_PRE CLIENT_PRE SERVER_PRE
	name=$1 hp=$2 cp=$3 sp=$4 d="$tmp/$1" port=$(free_port)
	mkdir -p "$d"
	with() { if [ "$1" = 1 ]; then shift; ZL_LOG=debug "$ZL_RUN" -- "$@"; else shift; "$@"; fi; }
	with "$sp" python3 "$bulk" server "$d/sport" "$n" > "$d/server.out" 2>"$d/server.err" &
	spid=$!
	wait_for 50 test -s "$d/sport" || fail "$name: the server did not start"
	cat > "$d/haproxy.cfg" <<CFG
global
	maxconn 16
${threads:+	nbthread $threads}
defaults
	mode tcp
	timeout connect 5s
	timeout client 30s
	timeout server 30s
	option splice-request
	option splice-response
listen fwd
	bind 127.0.0.1:$port
	server s1 127.0.0.1:$(cat "$d/sport")
CFG
	if [ "$hp" = 1 ]; then
		ZL_LOG=debug setsid "$ZL_RUN" -- haproxy -db -f "$d/haproxy.cfg" >"$d/haproxy.out" 2>>"$tmp/zl.log" &
	else
		setsid haproxy -db -f "$d/haproxy.cfg" >"$d/haproxy.out" 2>&1 &
	fi
	hpid=$!
	pids="$pids $hpid"
	# listening (a probe connection would reach the one-shot server)
	wait_for 50 sh -c "grep -qi ':$(printf %04X "$port") 00000000:0000 0A' /proc/net/tcp" ||
		fail "$name: haproxy did not start: $(tail -3 "$d/haproxy.out")"
	with "$cp" python3 "$bulk" client "$port" "$n" "$d/server.out" > "$d/client.out" 2>"$d/client.err" ||
		fail "$name: the client failed: $(grep -v debug: "$d/client.err" | tail -3)"
	wait $spid || fail "$name: the server failed: $(grep -v debug: "$d/server.err" | tail -3)"
	cat "$d/server.err" "$d/client.err" >> "$tmp/zl.log"
	kill -TERM "-$hpid" 2>/dev/null
	[ "$(cat "$d/server.out")" = "$want_c" ] ||
		fail "$name: the server got $(cat "$d/server.out"), want $want_c"
	[ "$(cat "$d/client.out")" = "$want_s" ] ||
		fail "$name: the client got $(cat "$d/client.out"), want $want_s"
	echo "$name: $mib MiB each way through HAProxy with splice, byte for byte"
}
run kernel 0 0 0
before=$(switched)
run neither 1 0 0
[ "$(switched)" = "$before" ] || fail "neither: a connection switched with a peer without the preload"
run both 1 1 1
run client-only 1 1 0
run server-only 1 0 1
n_sw=$(switched)
[ "$n_sw" -ge $((before + 4)) ] || fail "only $((n_sw - before)) of HAProxy's connections switched"
grep -q "our sends went back\|lied" "$tmp/zl.log" && fail "unexpected: $(grep 'went back\|lied' "$tmp/zl.log" | head -2)"
echo "PASS: haproxy: splice byte for byte in all four placements ($((n_sw - before)) connections switched)"
