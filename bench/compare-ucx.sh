#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# UCX reference rows for `zl-bench compare --ucx` (also usable on its own).
#
#   bench/compare-ucx.sh [--sizes 8,64,512,4096] [--iters 200000] [--sock-iters 20000]
#                        [--pin CLIENT,SERVER | none]
#
# Runs ucx_perftest ping-pong tests at each size, by default with the server
# pinned to cpu1 and the client to cpu0 (as in the project's latency notes):
#   ucp_am_lat with UCX_TLS=posix   (UCP active messages over shared memory)
#   tag_lat    with UCX_TLS=tcp     (UCP tag matching over loopback TCP)
#
# ucx_perftest reports ONE-WAY latency (half a round trip) and counts one-way
# messages in its message rate. This script doubles the latency and halves the
# rate, so its rows are RTT and round trips/s like zl-bench's. Its percentile
# (-R) is computed over a rolling window of the last 2048 iterations; median
# and p99 come from two separate runs. p99.9 and max are not available.
#
# stdout: CSV rows in zl-bench's format (no header):
#   transport,url,size,iters,median_us,p99_us,p999_us,max_us,rt_per_s,timer
# stderr: progress. Exit status: 0, 1 if a run failed, 2 usage, 3 no ucx_perftest.
set -u

sizes=8,64,512,4096
iters=200000
sock_iters=20000
pin=0,1
while [ $# -gt 0 ]; do
	case "$1" in
	--sizes) sizes=${2:?}; shift 2 ;;
	--iters) iters=${2:?}; shift 2 ;;
	--sock-iters) sock_iters=${2:?}; shift 2 ;;
	--pin) pin=${2:?}; shift 2 ;;
	-h|--help) awk 'NR > 2 && /^#/ { sub(/^# ?/, ""); print; next } NR > 2 { exit }' "$0" >&2; exit 2 ;;
	*) echo "compare-ucx.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
done
case "$pin" in
none|[0-9]*,[0-9]*) ;;
*) echo "compare-ucx.sh: --pin wants CLIENT,SERVER or none" >&2; exit 2 ;;
esac
case "$sizes$iters$sock_iters" in
*[!0-9,]*) echo "compare-ucx.sh: sizes and iteration counts must be plain numbers" >&2; exit 2 ;;
esac

if ! command -v ucx_perftest >/dev/null 2>&1; then
	echo "compare-ucx.sh: ucx_perftest not found (apt-get install ucx-utils); no UCX rows" >&2
	exit 3
fi

# Pin like zl-bench. taskset, not our inherited affinity: zl-bench runs
# this script while pinned to the client CPU itself.
srv_pin=() cli_pin=()
if [ "$pin" != none ] && [ "$(nproc --all)" -ge 2 ] && command -v taskset >/dev/null 2>&1; then
	srv_pin=(taskset -c "${pin#*,}") cli_pin=(taskset -c "${pin%,*}")
fi

status=0
srv=
# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() { [ -n "$srv" ] && kill "$srv" 2>/dev/null; wait 2>/dev/null; }
trap cleanup EXIT
trap 'exit 130' INT TERM # runs the EXIT trap, then really stops

# one TLS TEST SIZE ITERS RANK -> prints the final CSV line of the client
one() {
	local tls=$1 test=$2 size=$3 n=$4 rank=$5 port out
	for _ in 1 2 3; do
		port=$((20000 + RANDOM % 30000))
		UCX_TLS=$tls timeout --foreground 60 "${srv_pin[@]}" ucx_perftest -p "$port" >/dev/null 2>&1 &
		srv=$!
		# The server needs a moment to listen; the client retries a few times.
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			sleep 0.1
			out=$(UCX_TLS=$tls timeout --foreground 60 "${cli_pin[@]}" ucx_perftest 127.0.0.1 -p "$port" \
				-t "$test" -s "$size" -n "$n" -w $((n / 10)) -R "$rank" -f -v 2>/dev/null |
				grep -E '^[0-9]' | tail -n 1)
			[ -n "$out" ] && break
			kill -0 "$srv" 2>/dev/null || break
		done
		kill "$srv" 2>/dev/null
		wait "$srv" 2>/dev/null
		srv=
		[ -n "$out" ] && { echo "$out"; return 0; }
	done
	return 1
}

run() {
	local tls=$1 test=$2 n=$3 label="$2 UCX_TLS=$1" size p50 p99
	for size in ${sizes//,/ }; do
		echo "compare-ucx.sh: $label, $size B, $n iterations" >&2
		# columns: iterations,<rank>_percentile_lat,avg_lat,overall_lat,...,overall_mr
		if ! p50=$(one "$tls" "$test" "$size" "$n" 50) || ! p99=$(one "$tls" "$test" "$size" "$n" 99); then
			echo "compare-ucx.sh: $label $size B failed" >&2
			status=1
			continue
		fi
		awk -F, -v p50="$p50" -v p99="$p99" -v label="$label" -v tls="$tls" -v size="$size" -v n="$n" 'BEGIN {
			split(p50, a, ","); split(p99, b, ",")
			# one-way -> RTT; one-way messages/s -> round trips/s
			printf "ucx-%s,%s,%s,%s,%.4f,%.4f,,,%.0f,ucx_perftest(one-way x2)\n",
				tls, label, size, n, 2 * a[2], 2 * b[2], a[8] / 2
		}'
	done
}

run posix ucp_am_lat "$iters"
run tcp tag_lat "$sock_iters"
exit $status
