#!/bin/sh
# SPDX-License-Identifier: MIT
# python.sh ZL_RUN: Python's multiprocessing (mp.py: a forkserver, a Pool, a
# Manager, a socket passed over a Listener/Client connection, a subprocess
# beside a switched connection) plain and
# preloaded: the same output, fds passed over switched Unix sockets, and
# no process left behind.
ZL_RUN=$1
. "$(dirname "$0")/lib.sh"
need python3 setsid
mp=$(dirname "$0")/mp.py
run() {
	mode=$1
	if [ "$mode" = pre ]; then
		ZL_LOG=debug setsid "$ZL_RUN" -- python3 "$mp" > "$tmp/$mode.out" 2>>"$tmp/zl.log" &
	else
		setsid python3 "$mp" > "$tmp/$mode.out" 2>"$tmp/$mode.err" &
	fi
	p=$!
	pids="$pids $p"
	wait_for 600 sh -c "! kill -0 $p 2>/dev/null" || fail "$mode: mp.py still runs after 60 s"
	wait $p || fail "$mode: mp.py failed: $(tail -3 "$tmp/$mode.out" "$tmp/$mode.err" "$tmp/zl.log" 2>/dev/null)"
	# its forkserver and resource tracker leave with it (zombies until
	# init reaps them do not count), or not
	wait_for 50 sh -c "[ \$(ps -o stat= -g $p 2>/dev/null | grep -vc '^Z') = 0 ]" ||
		fail "$mode: processes of mp.py left behind: $(ps -o pid=,stat=,args= -g "$p")"
	echo "$mode: $(tr '\n' ';' < "$tmp/$mode.out")"
}
run plain
run pre
cmp -s "$tmp/plain.out" "$tmp/pre.out" || fail "the outputs differ: $(diff "$tmp/plain.out" "$tmp/pre.out")"
n=$(switched)
back=$(grep -c "our sends went back" "$tmp/zl.log")
[ "$n" -ge 3 ] || fail "only $n connections switched"
[ "$back" -ge 1 ] || fail "no connection went back to the kernel for its fds"
echo "PASS: python: multiprocessing plain and preloaded alike; $n connections switched, $back ways back for fds"
