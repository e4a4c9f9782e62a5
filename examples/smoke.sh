#!/bin/sh
# SPDX-License-Identifier: MIT
# Run the examples against each other (echo over shm, tcp and unix; zero
# copy; a poll loop; rpc over shm and tcp). usage: smoke.sh DIR_WITH_EXAMPLES
set -eu

bin=${1:?usage: smoke.sh DIR}
sock=/tmp/zl-ex-$$.sock
url=unix://$sock
server=

cleanup() {
	if [ -n "$server" ]; then
		kill "$server" 2>/dev/null || true
		wait "$server" 2>/dev/null || true
	fi
	rm -f "$sock" "/tmp/zl-ex-poll-$$.sock" "/tmp/zl-ex-echo-$$.out"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# A new user's first program: echo over each transport of this host.
for u in "shm://zl-ex-echo-$$" "tcp://127.0.0.1:0" "$url"; do
	echo "== echo_server $u 1 (background), then echo_client 1000 64"
	out=/tmp/zl-ex-echo-$$.out
	timeout 60 "$bin/echo_server" "$u" 1 > "$out" &
	server=$!
	for i in $(seq 100); do grep -q "^listening on" "$out" && break; sleep 0.05; done
	real=$(sed -n 's/^listening on //p' "$out")
	[ -n "$real" ] || { echo "echo_server $u did not start"; cat "$out"; exit 1; }
	timeout 30 "$bin/echo_client" "$real" 1000 64
	# The server exits after its one client; its status is the test's.
	rc=0
	wait "$server" || rc=$?
	server=
	cat "$out"
	rm -f "$out"
	if [ "$rc" -ne 0 ]; then
		echo "echo_server $u failed (exit $rc)"
		exit 1
	fi
done

echo "== zerocopy shm://zl-ex-zc-$$ 100000"
timeout 30 "$bin/zerocopy" "shm://zl-ex-zc-$$" 100000

echo "== poll_loop unix:///tmp/zl-ex-poll-$$.sock 3 1000"
timeout 30 "$bin/poll_loop" "unix:///tmp/zl-ex-poll-$$.sock" 3 1000

for u in "shm://zl-ex-rpc-$$" "tcp://127.0.0.1:0"; do
	echo "== rpc serve $u 200 (background), then two callers of 100"
	out=/tmp/zl-ex-rpc-$$.out
	timeout 60 "$bin/rpc" serve "$u" 200 > "$out" &
	server=$!
	for i in $(seq 100); do grep -q "^listening on" "$out" && break; sleep 0.05; done
	url=$(sed -n 's/^listening on //p' "$out")
	[ -n "$url" ] || { echo "rpc serve did not start"; exit 1; }
	timeout 30 "$bin/rpc" call "$url" 100 &
	c1=$!
	timeout 30 "$bin/rpc" call "$url" 100
	wait "$c1"
	rc=0
	wait "$server" || rc=$?
	server=
	cat "$out"
	ok=0
	grep -q "^served 200 calls from 2 clients" "$out" && ok=1
	rm -f "$out"
	if [ "$rc" -ne 0 ] || [ "$ok" -ne 1 ]; then
		echo "rpc serve failed (exit $rc)"
		exit 1
	fi
done

echo "== examples_smoke: OK"
