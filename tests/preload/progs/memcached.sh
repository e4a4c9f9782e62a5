#!/bin/sh
# SPDX-License-Identifier: MIT
# memcached.sh ZL_RUN: memcached with libmemcached's clients (memccp,
# memccat, memcaslap), plain and preloaded:
#  - files of 1 B to 1 MB stored with memccp read back byte for byte with
#    memccat;
#  - memcaslap, 2 threads and 16 connections, verifying every GET
#    (verify_failed and verify_misses 0);
#  - the connections really switched.
ZL_RUN=$1
. "$(dirname "$0")/lib.sh"
need memcached memccp memccat memcaslap python3
me=$(id -un) # memcached refuses root unless told so; the client is the same user

for n in 1 100 1000 65536 1000000; do
	head -c "$n" /dev/urandom > "$tmp/v$n"
done
run() {
	mode=$1 port=$(free_port)
	${mode}_bg memcached -p "$port" -U 0 -l 127.0.0.1 -I 2m -m 256 -u "$me"
	wait_for 50 python3 -c "import socket; socket.create_connection(('127.0.0.1', $port))" ||
		fail "$mode: memcached did not start"
	(cd "$tmp" && $mode memccp --servers="127.0.0.1:$port" v1 v100 v1000 v65536 v1000000) ||
		fail "$mode: memccp"
	for n in 1 100 1000 65536 1000000; do
		# memccat ends each value with a newline of its own
		$mode memccat --servers="127.0.0.1:$port" "v$n" | head -c -1 > "$tmp/$mode.v$n" ||
			fail "$mode: memccat v$n"
		cmp -s "$tmp/v$n" "$tmp/$mode.v$n" || fail "$mode: v$n came back different"
	done
	$mode memcaslap -s "127.0.0.1:$port" -T 2 -c 16 -x 40000 -X 512 --verify=1.0 \
		> "$tmp/$mode.slap" 2>&1 || fail "$mode: memcaslap: $(tail -5 "$tmp/$mode.slap")"
	grep -q "^verify_failed: 0$" "$tmp/$mode.slap" && grep -q "^verify_misses: 0$" "$tmp/$mode.slap" ||
		fail "$mode: memcaslap found wrong values: $(grep verify "$tmp/$mode.slap")"
	echo "$mode: $(grep '^Run time' "$tmp/$mode.slap")"
}
run plain
run pre
n=$(switched)
[ "$n" -ge 16 ] || fail "only $n connections switched to shared memory"
echo "PASS: memcached: the same values plain and preloaded; $n connections switched"
