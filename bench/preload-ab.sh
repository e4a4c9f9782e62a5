#!/bin/bash
# SPDX-License-Identifier: MIT
# Is this build's preload as fast as an earlier one's on a real program?
# Builds the preload of git revision REV in a temporary worktree, then, in
# ROUNDS alternating rounds (A B A B ...), runs redis-server and
# redis-benchmark -c 1 -P 1 GET (64-byte values), both under one
# revision's preload: REV's (A) and BUILD_DIR's (B). The server is pinned
# to cpu1, the client to cpu0, each round on a fresh server.
#
#   bench/preload-ab.sh REV [BUILD_DIR] [--rounds N] [--requests N] [--spin-us N]
#
# --spin-us: both ends' spin before they sleep (zl-run --spin-us; default
# its own). Where a wake-up costs far more than a request (a VM whose
# vCPUs halt), a spin longer than a request keeps both ends on the rings
# and the figures steady.
#
# Prints every round's requests/s, the median of each, and the median of
# the per-round ratios B/A (above 1: this build is faster); with perf
# (linux-perf), also each side's system calls per request
# (raw_syscalls:sys_enter over the whole process, start-up included),
# which do not depend on the host's speed. Writes BUILD_DIR/preload-ab.csv.
# Exit 1 if a run failed, 2 usage.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
usage() { echo "usage: bench/preload-ab.sh REV [BUILD_DIR] [--rounds N] [--requests N] [--spin-us N]" >&2; exit 2; }
[ $# -ge 1 ] || usage
REV=$1
shift
B=$root/build rounds=10 requests=100000 spin=
[ $# -gt 0 ] && [ "${1#--}" = "$1" ] && { B=$(cd "$1" && pwd) || usage; shift; }
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) rounds=$2; shift 2 ;;
	--requests) requests=$2; shift 2 ;;
	--spin-us) spin=$2; shift 2 ;;
	*) usage ;;
	esac
done
case "$rounds$requests$spin" in *[!0-9]*) usage ;; esac
for c in redis-server redis-benchmark taskset; do
	command -v $c > /dev/null || { echo "preload-ab: $c is missing (scripts/install-deps.sh)" >&2; exit 1; }
done
[ -x "$B/tools/zl-run" ] || { echo "preload-ab: $B/tools/zl-run missing (make build)" >&2; exit 1; }
tmp=$(mktemp -d)
pids=""
trap 'for p in $pids; do kill -9 "$p" 2>/dev/null; done; git -C "$root" worktree remove --force "$tmp/src" > /dev/null 2>&1; rm -rf "$tmp"' EXIT
git -C "$root" worktree add -q --detach "$tmp/src" "$REV" || exit 1
echo "preload-ab: A = $(git -C "$tmp/src" log --oneline -1 | cut -c1-70)"
echo "preload-ab: B = $B ($(git -C "$root" log --oneline -1 | cut -c1-60), with its changes)"
cmake -S "$tmp/src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null || exit 1
cmake --build "$tmp/build" -j"$(nproc)" --target zipline-preload > /dev/null || exit 1
libA=$(find "$tmp/build" -name libzipline-preload.so | head -1)
libB=$(find "$B" -name libzipline-preload.so -path '*src/preload*' | head -1)
[ -n "$libA" ] && [ -n "$libB" ] || { echo "preload-ab: a library is missing" >&2; exit 1; }

# perf stat around a command, when it can count system calls
counting=0
perf stat -e raw_syscalls:sys_enter true > /dev/null 2>&1 && counting=1
count() { # count FILE CMD...: CMD, its system calls into FILE
	f=$1
	shift
	if [ $counting = 1 ]; then
		perf stat -x, -e raw_syscalls:sys_enter -o "$f" -- "$@"
	else
		"$@"
	fi
}
calls() { [ $counting = 1 ] && awk -F, '/raw_syscalls/ { print $1 }' "$1" || echo 0; }

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# run LIB: one server, one benchmark; prints "requests/s server-calls
# client-calls" (system calls per request, 0 without perf)
run() {
	p=$(port)
	count "$tmp/srv.calls" taskset -c 1 "$B/tools/zl-run" --lib "$1" ${spin:+--spin-us $spin} -- redis-server --port "$p" \
		--bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" > /dev/null 2>&1 &
	srv=$!
	pids="$srv"
	for _ in $(seq 50); do redis-cli -p "$p" ping > /dev/null 2>&1 && break; sleep 0.1; done
	redis-cli -p "$p" set key:__rand_int__ "$(head -c 64 /dev/zero | tr '\0' x)" > /dev/null
	rps=$(count "$tmp/cli.calls" taskset -c 0 "$B/tools/zl-run" --lib "$1" ${spin:+--spin-us $spin} -- redis-benchmark \
		-p "$p" -c 1 -P 1 -d 64 -n "$requests" -t get --csv 2> /dev/null |
		awk -F'"' '/"GET"/ { print $4 }')
	redis-cli -p "$p" shutdown nosave > /dev/null 2>&1 # (perf then writes its count)
	wait "$srv" 2> /dev/null
	pids=""
	echo "$rps $(calls "$tmp/srv.calls") $(calls "$tmp/cli.calls")"
}
csv=$B/preload-ab.csv
echo "round,A_rps,B_rps,ratio_B_A,A_srv_calls_per_req,A_cli_calls_per_req,B_srv_calls_per_req,B_cli_calls_per_req" > "$csv"
fail=0
for r in $(seq "$rounds"); do
	set -- $(run "$libA") $(run "$libB")
	case "$1$4" in "" | *[!0-9.]*) echo "round $r: a run failed (A '$1', B '${4:-}')"; fail=1; continue ;; esac
	awk -v r="$r" -v a="$1" -v as="$2" -v ac="$3" -v b="$4" -v bs="$5" -v bc="$6" -v n="$requests" \
		'BEGIN { printf "%d,%s,%s,%.4f,%.3f,%.3f,%.3f,%.3f\n", r, a, b, b / a, as / n, ac / n, bs / n, bc / n }' >> "$csv"
	tail -1 "$csv" | awk -F, '{ printf "round %d: A %s, B %s requests/s; system calls per request: A server %s client %s, B server %s client %s\n", $1, $2, $3, $5, $6, $7, $8 }'
done
awk -F, 'NR > 1 { a[++n] = $2; b[n] = $3; q[n] = $4; as[n] = $5; ac[n] = $6; bs[n] = $7; bc[n] = $8 }
function med(x, n,   i, j, t) {
	for (i = 2; i <= n; i++) for (j = i; j > 1 && x[j - 1] > x[j]; j--) { t = x[j]; x[j] = x[j - 1]; x[j - 1] = t }
	return n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2
}
END { if (!n) exit 1
	printf "median requests/s: A %.0f, B %.0f; median of the per-round ratios B/A: %.3f (min %.3f, max %.3f, %d rounds)\n",
		med(a, n), med(b, n), med(q, n), q[1], q[n], n
	printf "median system calls per request: A server %.3f client %.3f; B server %.3f client %.3f\n",
		med(as, n), med(ac, n), med(bs, n), med(bc, n) }' "$csv" || fail=1
echo "preload-ab: every round in $csv"
exit $fail
