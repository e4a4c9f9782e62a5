#!/bin/bash
# SPDX-License-Identifier: MIT
# The one-sided store over rdma:// against what its GET is made of, in ONE
# boot of the Soft-RoCE VM (tests/vm/rdma-vm.sh), interleaved:
#
#   bench/onesided-rdma.sh [BUILD_DIR] [RECORDS] [OPS] [ROUNDS]
#
#   one-sided  zl-ycsb workload C (GETs of 100 B values) against zl-kvd
#              --onesided: a GET is one READ of the entries (with the cleanup
#              sequence word, same round trip) and one READ of the container
#   two-sided  the same against zl-kvd (an RPC per GET), for reference
#   perftest   ib_read_lat at 64 B (the 8 entries) and at the container's size
#              (32 + key + value + 4, rounded to 8): the target is a
#              one-sided GET median of at most 1.2 x the sum of the two
#
# Server (and perftest's server) on rxe1 / cpu1, clients on rxe0 / cpu0.
# Everything is emulated (qemu TCG + rxe): compare ratios within the run.
# Prints a table per round, the ratio per round and the median ratio;
# CSV in BUILD_DIR/onesided-rdma.csv.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:-$here/../build}" && pwd)
RECORDS=${2:-5000} OPS=${3:-3000} ROUNDS=${4:-3}

if [ -z "${ZL_RDMA_IP_A:-}" ]; then # on the host: boot the VM and rerun inside
	cp "$0" "$B/onesided-rdma.sh"
	exec "$here/../tests/vm/rdma-vm.sh" --timeout 1500 --share "$B" -- \
		"$B/onesided-rdma.sh" "$B" "$RECORDS" "$OPS" "$ROUNDS"
fi

zy=$B/tools/zl-ycsb kvd=$B/tools/zl-kvd
csv=$B/onesided-rdma.csv
echo "round,method,size,median_us,p99_us,reads_per_get,round_trips_per_get" >"$csv"
KEY=user1000000000000000000 # zl-ycsb's keys: "user" and up to 19 digits
CT=$(((32 + ${#KEY} + 100 + 4 + 7) / 8 * 8))

# ib_read_lat reports the whole round trip of one READ
perftest() { # size -> "median p99"
	local s=$1 out p=$((7000 + RANDOM % 2000))
	taskset -c 1 ib_read_lat -d "$ZL_RDMA_DEV_B" -x 1 -F -s "$s" -n "$OPS" -p "$p" \
		>/tmp/pt_srv.log 2>&1 &
	sleep 1
	out=$(taskset -c 0 ib_read_lat -d "$ZL_RDMA_DEV_A" -x 1 -F -s "$s" -n "$OPS" \
		-p "$p" "$ZL_RDMA_IP_B" 2>&1) || { echo "$out" >&2; return 1; }
	wait
	# columns: bytes iters t_min t_max t_typical t_avg t_stdev 99% 99.9%
	echo "$out" | awk -v s="$s" '$1 == s && NF >= 8 { printf "%.2f %.2f\n", $5, $8 }'
}

# store one|two -> "median p99 reads round_trips" of GET
store() {
	local st=$1 p=$((9000 + RANDOM % 2000)) extra=() q=''
	[ "$st" = one ] && extra=(--onesided) q='&store=onesided'
	taskset -c 1 "$kvd" -q "${extra[@]}" --listen "rdma://$ZL_RDMA_IP_B:$p?dev=$ZL_RDMA_DEV_B" \
		>/tmp/kvd.log 2>&1 &
	local srv=$!
	sleep 1
	local url="zl://rdma://$ZL_RDMA_IP_B:$p?dev=$ZL_RDMA_DEV_A$q" args
	args=(--workload c --fieldcount 1 --fieldlength 100 --records "$RECORDS" --timeout 60)
	taskset -c 0 "$zy" "${args[@]}" --phase load --ops 1 "$url" >/tmp/zy_load.log 2>&1
	sleep 1.2 # the server's load-factor scan
	taskset -c 0 "$zy" "${args[@]}" --phase run --ops "$OPS" --csv /tmp/zy.csv --label "$st" \
		"$url" >/tmp/zy.log 2>&1 || { cat /tmp/zy.log /tmp/kvd.log >&2; kill $srv; return 1; }
	kill $srv
	wait $srv 2>/dev/null
	local c
	c=$(sed -n 's/.*GET ([0-9]* calls) \([0-9.]*\) reads, \([0-9.]*\) round trips.*/\1 \2/p' \
		/tmp/zy.log | tail -n 1)
	awk -F, -v l="$st" '$1 == l && $5 == "READ" { m = $8; p = $9 } END { printf "%s %s", m, p }' \
		/tmp/zy.csv
	echo " ${c:-- -}"
}

store one >/dev/null || exit 1 # warm-up: TCG translates hot paths on first use
echo "GET round trips in us (median / p99), emulated (qemu TCG + Soft-RoCE rxe0 -> rxe1);"
echo "$RECORDS records of 100 B, $OPS GETs per run; ib_read_lat at 64 B and $CT B."
ratios=()
for r in $(seq "$ROUNDS"); do
	declare -A med=() p99=()
	order=(one pt64 ptct two)
	for k in 0 1 2 3; do
		m=${order[$(((k + r) % 4))]}
		case $m in
		one|two) read -r med[$m] p99[$m] rd rt <<<"$(store "$m")" ;;
		pt64) read -r med[$m] p99[$m] <<<"$(perftest 64)"; rd='' rt='' ;;
		ptct) read -r med[$m] p99[$m] <<<"$(perftest "$CT")"; rd='' rt='' ;;
		esac
		echo "$r,$m,$([ "$m" = ptct ] && echo "$CT" || echo 64),${med[$m]},${p99[$m]},$rd,$rt" >>"$csv"
		[ "$m" = one ] && onecnt="$rd reads, $rt round trips per GET"
	done
	ratio=$(awk -v a="${med[one]}" -v b="${med[pt64]}" -v c="${med[ptct]}" \
		'BEGIN { if (b + c > 0) printf "%.2f", a / (b + c) }')
	ratios+=("$ratio")
	echo "round $r: one-sided ${med[one]}/${p99[one]} ($onecnt), two-sided ${med[two]}/${p99[two]}," \
		"ib_read_lat 64 B ${med[pt64]}/${p99[pt64]}, $CT B ${med[ptct]}/${p99[ptct]};" \
		"one-sided / (64 B + $CT B READ) = $ratio (target <= 1.2)"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ a[NR] = $1 } END {
	printf "median over %d rounds: %.2f (range %.2f-%.2f)\n", NR, NR % 2 ? a[(NR + 1) / 2] :
		(a[NR / 2] + a[NR / 2 + 1]) / 2, a[1], a[NR] }'
echo "CSV: $csv"
