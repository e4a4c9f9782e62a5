#!/bin/bash
# SPDX-License-Identifier: MIT
# Several operations in flight per client (zl-ycsb --depth, zl_kv_batch(3))
# against one at a time, for both stores, in one run, interleaved:
#
#   bench/kv-depth.sh [--vm] [BUILD_DIR] [ROUNDS] [OPS]
#
#   host   shm:// (zl-kvd --onesided, and zl-kvd), server on cpu1, client
#          on cpu0
#   --vm   rdma:// in one boot of the Soft-RoCE VM (tests/vm/rdma-vm.sh):
#          server on rxe1 / cpu1, client on rxe0 / cpu0
#
# YCSB workloads C (GETs) and A (half updates) of 100 B values, at depths
# 1, 4, 8 and 16. Prints ops/s per store, workload and depth (the median
# over the rounds, each round running every case once in a rotated order),
# the gain over depth 1, and for the one-sided store the exact round trips
# per operation (zl_kv_info). CSV and PNG: BUILD_DIR/kv-depth.{csv,png}.
# With --vm also the device's own floor: 64 B READs one at a time against
# many in flight (perftest), the most that any depth can gain there.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
vm=0
[ "${1:-}" = --vm ] && { vm=1; shift; }
B=$(cd "${1:-$here/../build}" && pwd)
ROUNDS=${2:-3} OPS=${3:-}
RECORDS=20000
[ -n "$OPS" ] || { [ $vm = 1 ] && OPS=3000 || OPS=100000; }
[ $vm = 1 ] && RECORDS=5000

zy=$B/tools/zl-ycsb kvd=$B/tools/zl-kvd
csv=$B/kv-depth.csv tmp=$(mktemp -d)
DEPTHS=(1 4 8 16)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$tmp"' EXIT

measure() {
	# A server for each store; url[STORE] is where zl-ycsb goes.
	declare -A url
	serve() { # store
		local p=$((9000 + RANDOM % 2000)) flag=() q='' listen cli
		[ "$1" = one ] && flag=(--onesided) q='store=onesided'
		if [ $vm = 1 ]; then
			listen="rdma://$ZL_RDMA_IP_B:$p?dev=$ZL_RDMA_DEV_B"
			cli="rdma://$ZL_RDMA_IP_B:$p?dev=$ZL_RDMA_DEV_A${q:+&$q}"
		else
			listen="shm://zl-depth-$$-$1"
			cli="$listen${q:+?$q}"
		fi
		taskset -c 1 "$kvd" -q "${flag[@]}" --listen "$listen" >"$tmp/kvd-$1.log" 2>&1 &
		pids+=($!)
		url[$1]="zl://$cli"
		sleep 1
		taskset -c 0 "$zy" --workload a --fieldcount 1 --fieldlength 100 --records "$RECORDS" \
			--phase load --depth 16 --quiet --timeout 60 "${url[$1]}" >"$tmp/load-$1.log" 2>&1 ||
			{ cat "$tmp/load-$1.log" "$tmp/kvd-$1.log" >&2; exit 1; }
	}
	serve one
	serve two
	sleep 1.2 # the one-sided server's load-factor scan

	# One run -> "ops_per_s round_trips_per_op" (- for zl-kvd)
	run() { # round store workload depth
		local label="$2-$3-$4"
		taskset -c 0 "$zy" --workload "$3" --fieldcount 1 --fieldlength 100 --records "$RECORDS" \
			--phase run --ops "$OPS" --depth "$4" --quiet --timeout 60 --csv "$tmp/all.csv" \
			--label "$label" "${url[$2]}" >"$tmp/run.log" 2>&1 ||
			{ cat "$tmp/run.log" >&2; return 1; }
		awk -F, -v l="$label" '$1 == l && $5 == "OVERALL" { o = $7 } END { printf "%s", o }' \
			"$tmp/all.csv"
		# one-sided: (GET calls x rt + SET calls x rt) / ops + the batches' rt per op
		sed -n 's/.*GET (\([0-9]*\) calls) [0-9.]* reads, \([0-9.]*\) round trips.*SET (\([0-9]*\) calls).* \([0-9.]*\) round trips, [0-9.]* retries$/\1 \2 \3 \4/p;
			s/.*shared per operation: [0-9.]* reads, \([0-9.]*\) round trips/B \1/p' \
			"$tmp/run.log" | awk '$1 == "B" { b = $2; next } { g = $1; gr = $2; s = $3; sr = $4 }
			END { if (g + s) printf " %.3f\n", (g * gr + s * sr) / (g + s) + b; else print " -" }'
	}

	echo "round,store,workload,depth,ops_per_s,round_trips_per_op" >"$csv"
	cases=()
	for st in one two; do
		for w in c a; do
			for d in "${DEPTHS[@]}"; do cases+=("$st $w $d"); done
		done
	done
	n=${#cases[@]}
	for r in $(seq "$ROUNDS"); do
		for k in $(seq 0 $((n - 1))); do
			read -r st w d <<<"${cases[$(((k + r * 5) % n))]}"
			out=$(run "$r" "$st" "$w" "$d") && [ -n "${out%% *}" ] || exit 1
			read -r ops rt <<<"$out"
			echo "$r,$st,$w,$d,$ops,$rt" >>"$csv"
		done
		echo "round $r of $ROUNDS done" >&2
		sleep 0.1
	done

}

# In the VM, the floor: READs of 64 B one at a time (ib_read_lat) against
# many in flight (ib_read_bw), into BUILD_DIR/kv-depth-floor.csv. Their
# ratio bounds what any depth can gain on this device.
floor() {
	# ib_read_lat columns: bytes iters t_min t_max t_typical ...;
	# ib_read_bw: bytes iters BW_peak BW_average MsgRate(Mpps)
	local lat bw
	lat=$(perftest ib_read_lat 3000) && bw=$(perftest ib_read_bw 20000) || return 1
	echo "read_lat_us,read_bw_mpps" >"$B/kv-depth-floor.csv"
	echo "$lat,$bw" >>"$B/kv-depth-floor.csv"
}

# perftest TOOL ITERS -> column 5 of its 64 B row (server on rxe1 / cpu1)
perftest() {
	local p=$((7000 + RANDOM % 2000)) srv out
	taskset -c 1 timeout 120 "$1" -d "$ZL_RDMA_DEV_B" -x 1 -F -s 64 -n "$2" -p "$p" \
		>/dev/null 2>&1 &
	srv=$!
	sleep 1
	out=$(taskset -c 0 timeout 120 "$1" -d "$ZL_RDMA_DEV_A" -x 1 -F -s 64 -n "$2" -p "$p" \
		"$ZL_RDMA_IP_B" 2>&1)
	wait "$srv"
	awk '$1 == 64 && NF >= 5 { print $5; found = 1 } END { exit !found }' <<<"$out" ||
		{ echo "$out" >&2; return 1; }
}

summary() {
	where=$([ $vm = 1 ] && echo "rdma:// (qemu TCG + Soft-RoCE, emulated)" || echo "shm://")
	echo "zl-ycsb --depth over $where: $RECORDS records of 100 B, $OPS operations per run,"
	echo "median of $ROUNDS interleaved rounds; gain = ops/s against depth 1 of the same store"
	echo
	printf '%-10s %-3s %5s %12s %6s %16s\n' store wl depth ops/s gain "round trips/op"
	awk -F, 'NR > 1 { k = $2 "," $3 "," $4; v[k] = v[k] " " $5; rt[k] = $6 }
		function med(s,   a, n, i, j, t) { n = split(s, a, " ")
			for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
			return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
		END { split("one two", S, " "); split("c a", W, " "); split("1 4 8 16", D, " ")
			for (i = 1; i <= 2; i++) for (j = 1; j <= 2; j++) {
				base = med(v[S[i] "," W[j] ",1"])
				for (d = 1; d <= 4; d++) { k = S[i] "," W[j] "," D[d]; m = med(v[k])
					name = (S[i] == "one") ? "one-sided" : "zl-kvd"
					gain = (base > 0) ? m / base : 0
					printf "%-10s %-3s %5s %12.0f %5.2fx %16s\n", name, W[j], D[d], m, gain, rt[k]
					printf "%s-%s %s %s\n", S[i], W[j], D[d], m > plot } } }' plot="$tmp/plot.dat" "$csv"
	echo "CSV: $csv"
	[ $vm = 1 ] && awk -F, 'NR == 2 && $1 > 0 && $2 > 0 {
		one = 1e6 / $1; many = $2 * 1e6
		printf "floor (same boot): 64 B READs one at a time (ib_read_lat median %.1f us) %.0f/s;\n", $1, one
		printf "many in flight (ib_read_bw) %.0f/s: %.2fx, the most any depth can gain here\n", many, many / one }' \
		"$B/kv-depth-floor.csv"
	if command -v gnuplot >/dev/null; then
		gnuplot <<-EOF && echo "PNG: $B/kv-depth.png"
	set terminal pngcairo size 900,500
	set output "$B/kv-depth.png"
	set title "zl-ycsb --depth over $where, 100 B values ($ROUNDS rounds, median)"
	set xlabel "operations in flight per client (depth)"
	set ylabel "operations/s"
	set logscale x 2
	set key left top
	plot for [s in "one-c one-a two-c two-a"] "< grep '^".s." ' $tmp/plot.dat" using 2:3 with linespoints title s
	EOF
	else
		echo "(no gnuplot: no PNG)"
	fi
}

if [ $vm = 1 ] && [ -z "${ZL_RDMA_IP_A:-}" ]; then # boot the VM, measure inside
	cp "$0" "$B/kv-depth.sh"
	"$here/../tests/vm/rdma-vm.sh" --timeout 2400 --share "$B" -- \
		"$B/kv-depth.sh" --vm "$B" "$ROUNDS" "$OPS" || exit 1
	summary
elif [ -n "${ZL_RDMA_IP_A:-}" ]; then # in the VM: the CSVs only
	measure && floor
else
	measure && summary
fi
