#!/bin/bash
# SPDX-License-Identifier: MIT
# The one-sided store (zl-kvd --onesided, store=onesided) against zl-kvd's
# two-sided store over shm, one driver (zl-ycsb), in one run:
#
#   bench/onesided.sh [BUILD_DIR] [--records N] [--ops N] [--rounds R] [--out DIR]
#
#  1. headline: workload C (GETs), values of 100 B, one client, R rounds
#     with the two stores interleaved; GET median ratio per round (the target
#     target: one-sided <= 0.5x two-sided)
#  2. YCSB-C with two client processes at once (one per CPU), ops/s summed
#     (target: one-sided >= 2x two-sided)
#  3. server CPU during the one-sided GET-only run, over the clients' CPU
#     (target <= 1%)
#  4. latency against value size (workload A: GET and SET medians), against
#     load factor (a 65536-slot table filled to 0.1 .. 0.9: GET median, reads
#     and probes per GET), and throughput against client processes (1, 2, 4):
#     the shapes of the Falafel thesis's figures 5.5 to 5.16
#
# Every zl-ycsb row goes to OUT/onesided-ycsb.csv; the summary rows to
# OUT/onesided.csv (section,store,x,ops_s,median_us,p99_us,reads_per_get,
# probes_per_get); the tables to OUT/onesided.md; PNGs through gnuplot.
# Servers pinned to cpu1, clients to cpu0 (2 CPUs). Exit 0, 1 if a run
# failed, 2 usage.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=$here/../build records=100000 ops=300000 rounds=3 out=''
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then B=$1; shift; fi
while [ $# -gt 0 ]; do
	case "$1" in
	--records) records=${2:?}; shift 2 ;;
	--ops) ops=${2:?}; shift 2 ;;
	--rounds) rounds=${2:?}; shift 2 ;;
	--out) out=${2:?}; shift 2 ;;
	-h|--help) awk 'NR > 2 && /^#/ { sub(/^# ?/, ""); print; next } NR > 2 { exit }' "$0"; exit 0 ;;
	*) echo "onesided.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
	esac
done
case "$records$ops$rounds" in *[!0-9]*) echo "onesided.sh: counts are numbers" >&2; exit 2 ;; esac
B=$(cd "$B" 2>/dev/null && pwd) || { echo "onesided.sh: no build directory" >&2; exit 2; }
zy=$B/tools/zl-ycsb kvd=$B/tools/zl-kvd
for f in "$zy" "$kvd"; do [ -x "$f" ] || { echo "onesided.sh: $f not built" >&2; exit 2; }; done
out=${out:-$B/onesided}
mkdir -p "$out/logs" || exit 2
ycsv=$out/onesided-ycsb.csv sum=$out/onesided.csv md=$out/onesided.md
rm -f "$ycsv" "$sum" "$md" "$out"/*.png "$out"/logs/*
echo "section,store,x,ops_s,median_us,p99_us,reads_per_get,probes_per_get,round_trips_per_get" >"$sum"
srv_pin=(taskset -c 1) cli_pin=(taskset -c 0) cli2_pin=(taskset -c 1)
command -v taskset >/dev/null 2>&1 && [ "$(nproc)" -ge 2 ] || srv_pin=() cli_pin=() cli2_pin=()

srv='' failed=0 n=0
cleanup() { [ -n "$srv" ] && kill "$srv" 2>/dev/null; wait 2>/dev/null; }
trap cleanup EXIT
trap 'exit 130' INT TERM
say() { echo "onesided: $*" >&2; }

# start STORE [zl-kvd options...] -> url; STORE is two or one
start() {
	local st=$1 name
	shift
	n=$((n + 1)) name=osb-$$-$n
	local extra=()
	[ "$st" = one ] && extra=(--onesided)
	"${srv_pin[@]}" "$kvd" -q "${extra[@]}" "$@" --listen "shm://$name" 2>"$out/logs/server-$n.log" &
	srv=$!
	sleep 0.3
	url=zl://shm://$name
	[ "$st" = one ] && url="$url?store=onesided"
	return 0
}
stop() { [ -n "$srv" ] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null; srv=''; }

# ycsb LABEL LOG ARGS... (appends to the zl-ycsb CSV)
ycsb() {
	local label=$1 log=$out/logs/$2.log
	shift 2
	"${cli_pin[@]}" "$zy" --label "$label" --csv "$ycsv" --timeout 30 "$@" "$url" >>"$log" 2>&1 ||
		{ failed=1; say "$label FAILED: $(tail -n 2 "$log" | tr '\n' ' ')"; return 1; }
}
# col LABEL WORKLOAD PHASE OP COLUMN (7 ops/s, 8 median, 9 p99): last match
col() {
	awk -F, -v b="$1" -v w="$2" -v p="$3" -v o="$4" -v c="$5" \
		'$1 == b && $2 == w && $3 == p && $5 == o { v = $c } END { print v }' "$ycsv"
}
# counts LOG -> "reads probes round-trips" per GET from zl-ycsb's last
# counts line
counts() {
	sed -n 's/.*GET ([0-9]* calls) \([0-9.]*\) reads, \([0-9.]*\) round trips, \([0-9.]*\) probes.*/\1 \3 \2/p' \
		"$out/logs/$1.log" | tail -n 1
}
row() { echo "$1,$2,$3,$4,$5,$6,${7:-},${8:-},${9:-}" >>"$sum"; }
hl=(--workload c --fieldcount 1 --fieldlength 100 --records "$records")

# ---- 1. headline, interleaved rounds; 3. server CPU in the one-sided rounds
say "1. headline: workload C, 100 B values, $rounds rounds interleaved"
cpu_srv=0 cpu_cli=0
ticks=$(getconf CLK_TCK)
for r in $(seq "$rounds"); do
	for st in two one; do
		start "$st"
		ycsb "$st-load" "hl-$st-$r" "${hl[@]}" --phase load --ops "$ops" || { stop; continue; }
		sleep 1.1 # the one-sided server's load-factor scan (1 s) before the run
		s0=$(awk '{ print $14 + $15 }' "/proc/$srv/stat")
		TIMEFORMAT='%U %S'
		t=$({ time ycsb "hl-$st" "hl-$st-$r" "${hl[@]}" --phase run --ops "$ops" >/dev/null; } 2>&1)
		s1=$(awk '{ print $14 + $15 }' "/proc/$srv/stat")
		if [ "$st" = one ]; then
			cpu_srv=$(awk -v a="$cpu_srv" -v d="$((s1 - s0))" -v k="$ticks" 'BEGIN { print a + d / k }')
			cpu_cli=$(awk -v a="$cpu_cli" -v t="$t" 'BEGIN { split(t, x, " "); print a + x[1] + x[2] }')
		fi
		read -r rd pr rt <<<"$(counts "hl-$st-$r")"
		row headline "$st" "$r" "$(col "hl-$st" c run READ 7)" "$(col "hl-$st" c run READ 8)" \
			"$(col "hl-$st" c run READ 9)" "${rd:-}" "${pr:-}" "${rt:-}"
		stop
	done
	url=null:// # the driver alone: its cost is inside both medians
	ycsb hl-null "hl-null-$r" "${hl[@]}" --phase run --ops "$ops"
	row headline null "$r" "$(col hl-null c run READ 7)" "$(col hl-null c run READ 8)" \
		"$(col hl-null c run READ 9)"
done

# ---- 2. two client processes at once
say "2. YCSB-C with two client processes"
for st in two one; do
	start "$st"
	ycsb "$st-load" "c2-$st" "${hl[@]}" --phase load --ops "$ops"
	sleep 1.1
	"${cli_pin[@]}" "$zy" --label "c2-$st-a" --csv "$ycsv" --timeout 30 "${hl[@]}" --phase run \
		--ops "$ops" "$url" >>"$out/logs/c2-$st.log" 2>&1 &
	a=$!
	"${cli2_pin[@]}" "$zy" --label "c2-$st-b" --csv "$ycsv" --timeout 30 "${hl[@]}" --phase run \
		--ops "$ops" "$url" >>"$out/logs/c2-$st.log" 2>&1 &
	b=$!
	wait "$a" || failed=1
	wait "$b" || failed=1
	tot=$(awk -v x="$(col "c2-$st-a" c run OVERALL 7)" -v y="$(col "c2-$st-b" c run OVERALL 7)" \
		'BEGIN { print x + y }')
	row clients2 "$st" 2 "$tot" "$(col "c2-$st-a" c run OVERALL 8)" "$(col "c2-$st-a" c run OVERALL 9)"
	stop
done

# ---- 4a. latency against value size (workload A: reads and updates)
say "4. latency against value size, load factor; throughput against clients"
for len in 16 128 1024 8192 65536; do
	for st in two one; do
		start "$st"
		recs=$(( (64 << 20) / len < 20000 ? (64 << 20) / len : 20000 ))
		ycsb "vs-$st-$len" "vs-$st-$len" --workload a --fieldcount 1 --fieldlength "$len" \
			--records "$recs" --ops 50000 --phase both
		read -r rd pr _ <<<"$(counts "vs-$st-$len")"
		row size_get "$st" "$len" "" "$(col "vs-$st-$len" a run READ 8)" \
			"$(col "vs-$st-$len" a run READ 9)" "${rd:-}" "${pr:-}"
		row size_set "$st" "$len" "" "$(col "vs-$st-$len" a run UPDATE 8)" \
			"$(col "vs-$st-$len" a run UPDATE 9)"
		stop
	done
done

# ---- 4b. against load factor (one-sided only: 65536 slots)
for lf in 1 2 3 4 5 6 7 8 9; do
	start one --os-slots 65536
	recs=$((65536 * lf / 10))
	ycsb "lf-load-$lf" "lf-$lf" --workload c --fieldcount 1 --fieldlength 100 --records "$recs" \
		--phase load --ops 1
	sleep 1.1
	ycsb "lf-$lf" "lf-$lf" --workload c --fieldcount 1 --fieldlength 100 --records "$recs" \
		--phase run --ops 100000
	read -r rd pr rt <<<"$(counts "lf-$lf")"
	row load one "0.$lf" "$(col "lf-$lf" c run READ 7)" "$(col "lf-$lf" c run READ 8)" \
		"$(col "lf-$lf" c run READ 9)" "${rd:-}" "${pr:-}" "${rt:-}"
	stop
done

# ---- 4c. throughput against client processes
for st in two one; do
	for c in 1 2 4; do
		start "$st"
		ycsb "tc-$st-$c-load" "tc-$st-$c" "${hl[@]}" --phase load --ops 1
		sleep 1.1
		pids=()
		for i in $(seq "$c"); do
			pin=("${cli_pin[@]}")
			[ $((i % 2)) = 0 ] && pin=("${cli2_pin[@]}")
			"${pin[@]}" "$zy" --label "tc-$st-$c-$i" --csv "$ycsv" --timeout 30 "${hl[@]}" \
				--phase run --ops $((ops / c)) "$url" >>"$out/logs/tc-$st-$c.log" 2>&1 &
			pids+=($!)
		done
		for p in "${pids[@]}"; do wait "$p" || failed=1; done
		tot=0
		for i in $(seq "$c"); do
			tot=$(awk -v a="$tot" -v x="$(col "tc-$st-$c-$i" c run OVERALL 7)" 'BEGIN { print a + x }')
		done
		row clients "$st" "$c" "$tot" "$(col "tc-$st-$c-1" c run OVERALL 8)" \
			"$(col "tc-$st-$c-1" c run OVERALL 9)"
		stop
	done
done

# ---- report
get() { awk -F, -v s="$1" -v t="$2" -v x="$3" -v c="$4" '$1 == s && $2 == t && $3 == x { print $c }' "$sum"; }
{
	echo "# One-sided store vs zl-kvd (shm)"
	echo
	echo "$(date '+%Y-%m-%d %H:%M'), $(uname -n), $(nproc) CPUs ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)),"
	echo "servers on cpu1, clients on cpu0. $records records; latencies are per operation (a"
	echo "GET's round trip to the store), in us. Command: bench/onesided.sh $B --records $records --ops $ops --rounds $rounds"
	echo
	echo "## 1. Headline: workload C, 100 B values, one client"
	echo
	echo "The driver alone (null://, no store) is measured in the same round: its cost is"
	echo "in both medians; the last ratio takes it out of both."
	echo
	echo "| round | two-sided GET median | one-sided GET median | ratio (target <= 0.5) | driver alone | ratio without the driver | one-sided reads/GET | round trips/GET |"
	echo "|---|---|---|---|---|---|---|---|"
	for r in $(seq "$rounds"); do
		a=$(get headline two "$r" 5) b=$(get headline one "$r" 5) z=$(get headline null "$r" 5)
		awk -v r="$r" -v a="$a" -v b="$b" -v z="${z:-0}" -v rd="$(get headline one "$r" 7)" -v rt="$(get headline one "$r" 9)" \
			'BEGIN { printf "| %s | %.3f | %.3f | %.2f | %.3f | %.2f | %s | %s |\n", r, a, b, (a > 0 ? b / a : 0), z, (a > z ? (b - z) / (a - z) : 0), rd, rt }'
	done
	echo
	echo "## 2. YCSB-C, two client processes (ops/s summed)"
	echo
	a=$(get clients2 two 2 4) b=$(get clients2 one 2 4)
	awk -v a="$a" -v b="$b" 'BEGIN { printf "two-sided %.0f, one-sided %.0f: ratio %.2f (target >= 2)\n", a, b, (a > 0 ? b / a : 0) }'
	echo
	echo "## 3. Server CPU during the one-sided GET runs"
	echo
	awk -v s="$cpu_srv" -v c="$cpu_cli" 'BEGIN { printf "server %.3f s, clients %.3f s: %.2f%% (target <= 1%%)\n", s, c, (c > 0 ? 100 * s / c : 0) }'
	echo
	echo "## 4. Latency against value size (workload A), GET / SET median us"
	echo
	echo "| value bytes | two GET | one GET | two SET | one SET | one reads/GET |"
	echo "|---|---|---|---|---|---|"
	for len in 16 128 1024 8192 65536; do
		echo "| $len | $(get size_get two $len 5) | $(get size_get one $len 5) | $(get size_set two $len 5) | $(get size_set one $len 5) | $(get size_get one $len 7) |"
	done
	echo
	echo "## Latency against load factor (one-sided, 65536 slots, workload C)"
	echo
	echo "Reads: one-sided reads (RDMA READs on rdma) per GET; round trips: waits for"
	echo "them (the containers of the first entries are pre-loaded with one wait);"
	echo "target <= 2.1 operations per GET at load <= 0.5 (the Falafel thesis: 2.06 at 0.1)."
	echo
	echo "| load | GET median us | reads/GET | round trips/GET | probes/GET | Knuth C |"
	echo "|---|---|---|---|---|---|"
	for lf in 1 2 3 4 5 6 7 8 9; do
		awk -v a="0.$lf" -v m="$(get load one "0.$lf" 5)" -v rd="$(get load one "0.$lf" 7)" \
			-v pr="$(get load one "0.$lf" 8)" -v rt="$(get load one "0.$lf" 9)" \
			'BEGIN { printf "| %s | %s | %s | %s | %s | %.2f |\n", a, m, rd, rt, pr, 0.5 * (1 + 1 / (1 - a)) }'
	done
	echo
	echo "## Throughput against client processes (workload C, ops/s)"
	echo
	echo "| clients | two-sided | one-sided |"
	echo "|---|---|---|"
	for c in 1 2 4; do echo "| $c | $(get clients two $c 4) | $(get clients one $c 4) |"; done
} >"$md"
cat "$md"

if command -v gnuplot >/dev/null 2>&1; then
	awk -F, '$1 == "size_get" { print $3, $5 > "'"$out"'/size-" $2 "-get.dat" }
		$1 == "size_set" { print $3, $5 > "'"$out"'/size-" $2 "-set.dat" }
		$1 == "load" { print $3, $5, $7, $8 > "'"$out"'/load.dat" }
		$1 == "clients" { print $3, $4 > "'"$out"'/clients-" $2 ".dat" }' "$sum"
	gnuplot <<EOF || say "gnuplot failed"
set terminal pngcairo size 900,600
set output "$out/onesided-size.png"
set title "Latency against value size (workload A, shm)"
set xlabel "value bytes"; set ylabel "median us"; set logscale x 2; set key left top
plot "$out/size-two-get.dat" w lp t "zl-kvd GET", "$out/size-one-get.dat" w lp t "one-sided GET", \
     "$out/size-two-set.dat" w lp t "zl-kvd SET", "$out/size-one-set.dat" w lp t "one-sided SET"
set output "$out/onesided-load.png"
unset logscale x
set title "One-sided GET against load factor (65536 slots)"
set xlabel "load factor"; set ylabel "median us"; set y2label "per GET"; set y2tics
plot "$out/load.dat" u 1:2 w lp t "GET median", "$out/load.dat" u 1:3 axes x1y2 w lp t "reads/GET", \
     "$out/load.dat" u 1:4 axes x1y2 w lp t "probes/GET", 0.5*(1+1/(1-x)) axes x1y2 t "Knuth"
set output "$out/onesided-clients.png"
unset y2tics; unset y2label
set title "Throughput against client processes (workload C, 2 CPUs)"
set xlabel "client processes"; set ylabel "ops/s"
plot "$out/clients-two.dat" w lp t "zl-kvd", "$out/clients-one.dat" w lp t "one-sided"
EOF
	say "plots: $out/onesided-{size,load,clients}.png"
else
	say "gnuplot not found: no PNG"
fi
exit "$failed"
