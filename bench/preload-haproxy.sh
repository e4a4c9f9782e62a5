#!/bin/sh
# SPDX-License-Identifier: MIT
# HAProxy in TCP mode with splice forced, between a client and a server
# that stream MIB MiB (default 256) each way at once, RUNS times (default
# 10): each run is tests/preload/progs/haproxy.sh, which checks every
# byte in five placements (no preload; HAProxy preloaded with neither end,
# both ends, the client only, the server only). The table counts the runs
# in which each placement was byte-exact.
#
#   bench/preload-haproxy.sh [BUILD_DIR] [RUNS] [MIB] [--threads N] [--crossing]
#
# --threads: HAProxy's threads (default: its own choice). --crossing: the
# client shuts its sending side at once, crossing the server's shutdown in
# HAProxy, which HAProxy 2.6 with splice gets wrong now and then without
# any preload (the test waits for the server's end: progs/bulk.py). Writes
# preload-haproxy.csv (run,placement,result) in the current directory;
# exits 0.
here=$(cd "$(dirname "$0")" && pwd)
b=${1:-$here/../build}
runs=${2:-10}
mib=${3:-256}
threads="" crossing=0
if [ $# -ge 3 ]; then shift 3; else shift $#; fi
while [ $# -gt 0 ]; do
	case $1 in
	--threads) threads=$2; shift 2 ;;
	--crossing) crossing=1; shift ;;
	*) echo "usage: bench/preload-haproxy.sh [BUILD_DIR] [RUNS] [MIB] [--threads N] [--crossing]" >&2; exit 2 ;;
	esac
done
case "$runs$mib$threads" in "" | *[!0-9]*)
	echo "usage: bench/preload-haproxy.sh [BUILD_DIR] [RUNS] [MIB] [--threads N] [--crossing]" >&2; exit 2 ;;
esac
zlrun=$b/tools/zl-run
[ -x "$zlrun" ] || { echo "preload-haproxy: $zlrun missing (make build)" >&2; exit 2; }
command -v haproxy >/dev/null || { echo "preload-haproxy: haproxy is not installed (scripts/install-deps.sh)" >&2; exit 2; }
csv=preload-haproxy.csv
echo "run,placement,result" > "$csv"
i=1
while [ "$i" -le "$runs" ]; do
	out=$(ZL_BULK_CROSSING=$crossing ZL_HAPROXY_THREADS=$threads timeout 600 sh "$here/../tests/preload/progs/haproxy.sh" "$zlrun" "$mib" 2>&1)
	for p in kernel neither both client-only server-only; do
		if printf '%s\n' "$out" | grep -q "^$p: .*byte for byte"; then
			r=exact
		elif printf '%s\n' "$out" | grep -q "^FAIL: $p:"; then
			r=failed
		else
			r=not-run # (after the first failure the run stops)
		fi
		echo "$i,$p,$r" >> "$csv"
	done
	i=$((i + 1))
done
echo "$runs runs of $mib MiB each way, splice forced, HAProxy's threads: ${threads:-its choice}$([ $crossing = 1 ] && echo ', shutdowns crossing'):"
for p in kernel neither both client-only server-only; do
	echo "  $p: $(grep -c ",$p,exact" "$csv") exact, $(grep -c ",$p,failed" "$csv") failed, $(grep -c ",$p,not-run" "$csv") not run"
done
echo "(per run: $csv)"
