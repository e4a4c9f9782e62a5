#!/bin/bash
# SPDX-License-Identifier: MIT
# ycsb_depth BUILD_DIR: zl-ycsb --depth end to end against every backend:
# zl-kvd and zl-kvd --onesided on shm (zl_kv_batch), and Redis and
# memcached (pipelined) where installed (scripts/install-deps.sh installs
# both; a missing one is said, not hidden). Each run loads with depth 16
# and runs workload A then C with depth 8: exit 0, every read found and of
# the record's size (a pipelined reply taken for another's shows up as a
# miss or a wrong length), and the batch counters where the store has
# them. Bad --depth values are refused with exit 2.
set -u
B=$1
zy=$B/tools/zl-ycsb kvd=$B/tools/zl-kvd
tmp=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for d in 0 65 x; do
	"$zy" --depth "$d" null:// >/dev/null 2>&1
	[ $? -eq 2 ] || fail "--depth $d was not refused with exit 2"
done
echo "ok: --depth 0, 65, x refused"

# check LABEL URL [WANT]: load, then A and C at depth 8
check() {
	local args=(--fieldcount 4 --fieldlength 50 --records 3000 --timeout 20 --quiet)
	timeout 120 "$zy" "${args[@]}" --workload a --phase load --depth 16 "$2" >"$tmp/l.log" 2>&1 ||
		{ cat "$tmp/l.log"; fail "$1: load exited $?"; }
	for w in a c; do
		timeout 120 "$zy" "${args[@]}" --workload $w --phase run --ops 20000 --depth 8 "$2" \
			>"$tmp/r.log" 2>&1 || { cat "$tmp/r.log"; fail "$1 $w: exited $?"; }
		awk '$1 == "READ" && $NF != 0 { bad = 1 } /WARNING/ { bad = 1 }
			END { exit bad }' "$tmp/r.log" || { cat "$tmp/r.log"; fail "$1 $w: misses or bad lengths"; }
		[ -z "${3:-}" ] || grep -q "$3" "$tmp/r.log" ||
			{ cat "$tmp/r.log"; fail "$1 $w: no '$3'"; }
	done
	echo "ok: $1"
}

"$kvd" -q --listen "shm://ycsbd-$$-1" >"$tmp/k1.log" 2>&1 &
pids+=($!)
"$kvd" -q --onesided --listen "shm://ycsbd-$$-2" >"$tmp/k2.log" 2>&1 &
pids+=($!)
sleep 0.5
check zl-kvd "zl://shm://ycsbd-$$-1"
check one-sided "zl://shm://ycsbd-$$-2?store=onesided" "batches ([0-9]*, 8.00 operations each)"

port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
if command -v redis-server >/dev/null; then
	p=$(port)
	redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" \
		>"$tmp/redis.log" 2>&1 &
	pids+=($!)
	check redis "redis://127.0.0.1:$p"
else
	echo "not run: redis (redis-server not installed; scripts/install-deps.sh installs it)"
fi
if command -v memcached >/dev/null; then
	p=$(port)
	memcached -l 127.0.0.1 -p "$p" -U 0 -m 64 $([ "$(id -u)" = 0 ] && echo -u nobody) \
		>"$tmp/mc.log" 2>&1 &
	pids+=($!)
	check memcached "memcached://127.0.0.1:$p"
else
	echo "not run: memcached (not installed; scripts/install-deps.sh installs it)"
fi
echo "ycsb_depth: all passed"
