#!/bin/bash
# SPDX-License-Identifier: MIT
# YCSB workloads against zl-kvd (shm, unix, tcp), Redis and memcached, one
# driver (zl-ycsb) with the same keys, values and request sequence for all.
#
#   bench/ycsb-compare.sh [BUILD_DIR] [--records N] [--ops N] [--headline-ops N]
#                         [--workloads "a b c d e f"] [--threads N] [--out DIR]
#                         [--backends "redis memcached zl-shm zl-unix zl-tcp zl-os"] [--vm]
#
# Servers run on loopback on free ports without persistence (redis --save ''
# --appendonly no), pinned to cpu1 with taskset, the driver to cpu0. Every
# server is stopped on exit (trap), also on failure or Ctrl-C.
#
# Per backend: a fresh server, load + workloads a b c f d (YCSB's order),
# then a fresh server for e (YCSB reloads before E; memcached: n/a, it has
# no scan), then the headline: a fresh server, load and workload C with
# fieldcount=1 fieldlength=100 (values of 100 B), one client thread, one
# request in flight. The script prints the target ratios from the measured
# headline ops/s: zl-kvd shm / Redis tcp (target >= 30) and zl-kvd tcp /
# Redis tcp (target >= 0.85, i.e. within 15% or better), and for every
# backend workloads A, B and F over C and A's update over read median.
#
# zl-os is the one-sided store (zl-kvd --onesided, store=onesided: clients
# read and write the server's memory themselves; docs/onesided.md) over shm,
# and with --vm zl-os-rdma over Soft-RoCE; it has no scans (workload E: n/a).
#
# Writes OUT (default BUILD_DIR/ycsb-compare): ycsb-compare.csv (every
# zl-ycsb row), ycsb-compare.md (the tables), ycsb-compare.png (gnuplot, if
# installed; its script and data: ycsb-compare.gp, .dat) and logs/ (each
# run's full zl-ycsb output).
#
# --vm: run inside the RDMA VM (tests/vm/rdma-vm.sh, BUILD_DIR is its share)
# with the host's redis-server and memcached, and add zl-rdma (zl-kvd over
# Soft-RoCE, rxe0 <-> rxe1) and the zl-kvd rdma / Redis tcp ratio. OUT
# (default BUILD_DIR/ycsb-compare-vm) must be inside BUILD_DIR; the PNG is
# drawn on the host. The emulator is 10-100x slower than hardware: use small
# counts (--records 10000 --ops 5000 --headline-ops 5000: ~80 s when quiet) and
# compare only ratios within one run. Inside the VM zl-rdma is added when
# ZL_RDMA_IP_A is set.
#
# Exit status: 0, 1 if a run failed, 2 usage.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

B=$here/../build
records=100000 ops=100000 headline_ops=200000 threads=1
workloads="a b c d e f" backends="redis memcached zl-shm zl-unix zl-tcp zl-os"
out='' vm=0
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then B=$1; shift; fi
args=("$@")
while [ $# -gt 0 ]; do
	case "$1" in
	--records) records=${2:?}; shift 2 ;;
	--ops) ops=${2:?}; shift 2 ;;
	--headline-ops) headline_ops=${2:?}; shift 2 ;;
	--workloads) workloads=${2:?}; shift 2 ;;
	--threads) threads=${2:?}; shift 2 ;;
	--backends) backends=${2:?}; shift 2 ;;
	--out) out=${2:?}; shift 2 ;;
	--vm) vm=1; shift ;;
	-h|--help) awk 'NR > 2 && /^#/ { sub(/^# ?/, ""); print; next } NR > 2 { exit }' "$0"; exit 0 ;;
	*) echo "ycsb-compare.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
	esac
done
case "$records$ops$headline_ops$threads" in
*[!0-9]*) echo "ycsb-compare.sh: counts must be plain numbers" >&2; exit 2 ;;
esac
B=$(cd "$B" 2>/dev/null && pwd) || { echo "ycsb-compare.sh: no build directory '$B'" >&2; exit 2; }
zy=$B/tools/zl-ycsb kvd=$B/tools/zl-kvd
for f in "$zy" "$kvd"; do
	[ -x "$f" ] || { echo "ycsb-compare.sh: $f not built (cmake --build $B)" >&2; exit 2; }
done

if [ "$vm" = 1 ] && [ -z "${ZL_RDMA_IP_A:-}" ]; then # on the host: boot the VM, rerun inside
	# Only the share (B) comes back from the guest: OUT must be in it.
	out=$(realpath -m "${out:-$B/ycsb-compare-vm}")
	case $out/ in
	"$B"/*) ;;
	*) echo "ycsb-compare.sh: with --vm, --out must be inside $B (the VM's share)" >&2; exit 2 ;;
	esac
	[ "$0" -ef "$B/ycsb-compare.sh" ] || cp "$0" "$B/ycsb-compare.sh" || exit 2
	# The VM image has neither server: rdma-vm.sh copies the host's in, with
	# their libraries. B is passed absolute, and is the guest's cwd too.
	(cd "$B" && ZL_VM_EXTRA="${ZL_VM_EXTRA:-} redis-server memcached" \
		"$here/../tests/vm/rdma-vm.sh" --timeout 1500 --share "$B" -- \
		"$B/ycsb-compare.sh" "$B" "${args[@]}" --out "$out")
	rc=$?
	# The guest has no gnuplot: it leaves the plot's script and data in OUT.
	if [ -s "$out/ycsb-compare.gp" ]; then
		if ! command -v gnuplot >/dev/null 2>&1; then
			echo "note: gnuplot not found; no PNG (apt-get install gnuplot-nox)"
		elif gnuplot "$out/ycsb-compare.gp"; then
			echo "plot: $out/ycsb-compare.png"
		else
			echo "note: gnuplot failed; no PNG"
		fi
	fi
	exit "$rc"
fi
if [ -n "${ZL_RDMA_IP_A:-}" ] && [[ " $backends " != *" zl-rdma "* ]]; then
	backends="$backends zl-rdma zl-os-rdma"
fi

out=${out:-$B/ycsb-compare}
mkdir -p "$out/logs" || exit 2
csv=$out/ycsb-compare.csv md=$out/ycsb-compare.md png=$out/ycsb-compare.png
gp=$out/ycsb-compare.gp dat=$out/ycsb-compare.dat
rm -f "$csv" "$out/headline.csv" "$out"/logs/*.log* "$gp" "$dat" "$png"
tmp=$(mktemp -d /tmp/ycsb-compare.XXXXXX) || exit 2

# Servers on cpu1, the driver on cpu0 (the machine this was written for has
# two cores); no pinning where there is one CPU or no taskset.
srv_pin=() cli_pin=() pin_note="not pinned"
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null 2>&1; then
	srv_pin=(taskset -c 1) cli_pin=(taskset -c 0) pin_note="servers on cpu1, driver on cpu0 (taskset)"
fi
where="$(uname -n), $(uname -sr)"
[ -n "${ZL_VM:-}" ] && where="the Soft-RoCE VM (tests/vm/rdma-vm.sh, qemu TCG: compare only ratios), $(uname -sr)"

# -m: room for every record; -u: memcached refuses to run as root without it
mc_user=()
[ "$(id -u)" = 0 ] && mc_user=(-u root)

pids=() # servers still running
# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM # runs the EXIT trap, then really stops

say() { echo "ycsb-compare: $*" >&2; }

port_busy() { # port -> 0 if something listens on 127.0.0.1:port
	if command -v ss >/dev/null 2>&1; then
		ss -Htln "sport = :$1" 2>/dev/null | grep -q .
	else
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
	fi
}

free_port() {
	local p
	for _ in $(seq 100); do
		p=$((20000 + RANDOM % 30000))
		port_busy "$p" || { echo "$p"; return 0; }
	done
	return 1
}

# wait until pid listens on port, or dies (1), or 10 s pass (1)
wait_port() {
	for _ in $(seq 200); do
		kill -0 "$1" 2>/dev/null || return 1
		port_busy "$2" && return 0
		sleep 0.05
	done
	return 1
}

have_backend() {
	case $1 in
	redis) command -v redis-server >/dev/null 2>&1 ;;
	memcached) command -v memcached >/dev/null 2>&1 ;;
	zl-rdma|zl-os-rdma) [ -n "${ZL_RDMA_IP_A:-}" ] ;;
	zl-*) return 0 ;;
	*) return 1 ;;
	esac
}

# start_server BACKEND LOG -> sets srv and url; 0 or 1
nserv=0
start_server() {
	local be=$1 log=$2 p l try
	nserv=$((nserv + 1))
	srv='' url=''
	case $be in
	redis|memcached)
		for try in 1 2 3; do
			p=$(free_port) || return 1
			if [ "$be" = redis ]; then
				"${srv_pin[@]}" redis-server --port "$p" --bind 127.0.0.1 --save '' \
					--appendonly no --daemonize no >"$log" 2>&1 &
			else
				"${srv_pin[@]}" memcached -l 127.0.0.1 -p "$p" -U 0 -m 4096 \
					"${mc_user[@]}" >"$log" 2>&1 &
			fi
			srv=$!
			pids+=("$srv")
			if wait_port "$srv" "$p"; then
				url=$be://127.0.0.1:$p
				return 0
			fi
			stop_server
			say "$be did not start on port $p (try $try): $(tail -n 2 "$log" | tr '\n' ' ')"
		done
		return 1 ;;
	zl-*)
		local os=()
		case ${be#zl-} in
		shm) l=shm://ycsb-$$-$nserv ;;
		unix) l=unix://$tmp/kv-$nserv.sock ;;
		tcp) l=tcp://127.0.0.1:0 ;;
		rdma) l="rdma://$ZL_RDMA_IP_A:0?dev=$ZL_RDMA_DEV_A" ;;
		os) l=shm://ycsb-$$-$nserv os=(--onesided) ;;
		os-rdma) l="rdma://$ZL_RDMA_IP_A:0?dev=$ZL_RDMA_DEV_A" os=(--onesided) ;;
		*) return 1 ;;
		esac
		# Emptied here: the child's own truncation may come after our first
		# read, which then finds the previous server's URL (seen in the VM).
		: >"$tmp/kvd.out"
		"${srv_pin[@]}" "$kvd" "${os[@]}" --listen "$l" >"$tmp/kvd.out" 2>"$log" &
		srv=$!
		pids+=("$srv")
		for _ in $(seq 200); do # it prints "listening URL" with the bound port
			url=$(sed -n 's/^listening //p' "$tmp/kvd.out" | head -n 1)
			[ -n "$url" ] && break
			kill -0 "$srv" 2>/dev/null || break
			sleep 0.05
		done
		if [ -z "$url" ]; then
			say "zl-kvd --listen $l did not start: $(tail -n 2 "$log" | tr '\n' ' ')"
			return 1
		fi
		# rdma: the client connects with the other device of the pair
		case $be in zl-rdma|zl-os-rdma) url=${url%%\?*}"?dev=$ZL_RDMA_DEV_B" ;; esac
		case $be in
		zl-os) url=$url?store=onesided ;;
		zl-os-rdma) url=$url"&store=onesided" ;;
		esac
		url=zl://$url
		return 0 ;;
	esac
	return 1
}

stop_server() {
	[ -n "$srv" ] || return 0
	kill "$srv" 2>/dev/null
	wait "$srv" 2>/dev/null
	local keep=() p
	for p in "${pids[@]}"; do [ "$p" = "$srv" ] || keep+=("$p"); done
	pids=("${keep[@]}")
	srv=
}

failed=0
declare -A cell # [backend,workload] -> "ok" | "n/a" | "fail"

# ycsb BACKEND KEY LOGNAME ARGS... : one zl-ycsb invocation against $url
ycsb() {
	local be=$1 key=$2 log=$out/logs/$3.log rc
	shift 3
	"${cli_pin[@]}" "$zy" --label "$be" --csv "$csv" --timeout 30 --threads "$threads" \
		"$@" "$url" >>"$log" 2>>"$log.err"
	rc=$?
	case $rc in
	0) cell[$be,$key]=ok ;;
	3) cell[$be,$key]=n/a ;;
	*) cell[$be,$key]=fail; failed=1
	   say "$be $key FAILED (exit $rc): $(tail -n 3 "$log.err" | tr '\n' ' ')" ;;
	esac
	[ -s "$log.err" ] || rm -f "$log.err"
	return $rc
}

std=(--records "$records" --ops "$ops")
for be in $backends; do
	if ! have_backend "$be"; then
		say "$be: not available here (not installed / not in the VM); skipped"
		continue
	fi
	# 1. load, then a b c f d as YCSB's recommended sequence
	if start_server "$be" "$out/logs/$be-server.log"; then
		say "$be: $url: load ($records records of 10 x 100 B)"
		if ycsb "$be" load "$be-load" --workload a --phase load "${std[@]}"; then
			for w in a b c f d; do
				[[ " $workloads " == *" $w "* ]] || continue
				say "$be: workload $w ($ops operations)"
				ycsb "$be" "$w" "$be-$w" --workload "$w" --phase run "${std[@]}"
			done
		fi
		stop_server
	else
		failed=1; cell[$be,load]=fail
	fi
	# 2. e on a fresh server, loaded with its scan index (redis)
	if [[ " $workloads " == *" e "* ]]; then
		if [ "$be" = memcached ] || [ "${be#zl-os}" != "$be" ]; then
			cell[$be,e]=n/a # no scans
		elif start_server "$be" "$out/logs/$be-e-server.log"; then
			say "$be: workload e: load, then $ops operations"
			ycsb "$be" e "$be-e" --workload e --phase both "${std[@]}"
			stop_server
		else
			failed=1; cell[$be,e]=fail
		fi
	fi
	# 3. the headline: workload C, values of 100 B, one thread
	if start_server "$be" "$out/logs/$be-headline-server.log"; then
		say "$be: headline: workload c, fieldcount=1 fieldlength=100, $headline_ops operations"
		threads_save=$threads threads=1
		ycsb "$be" headline "$be-headline" --workload c --phase both --fieldcount 1 \
			--fieldlength 100 --records "$records" --ops "$headline_ops" --csv "$out/headline.csv"
		threads=$threads_save
		stop_server
	else
		failed=1; cell[$be,headline]=fail
	fi
done

# The driver alone (null://: no store) on the headline run: its cost per
# operation is inside every figure above, and bounds the fastest backend.
url=null://
ycsb null headline null-headline --workload c --phase run --fieldcount 1 --fieldlength 100 \
	--records "$records" --ops "$headline_ops" --csv "$out/headline.csv" --threads 1

# ---- tables -------------------------------------------------------------
# field FILE BACKEND WORKLOAD PHASE OP COLUMN -> the value (CSV columns:
# backend,workload,phase,threads,op,count,ops_per_s,median_us,p99_us,p999_us,max_us)
field() {
	[ -f "$1" ] || return 0
	awk -F, -v b="$2" -v w="$3" -v p="$4" -v o="$5" -v c="$6" \
		'$1 == b && $2 == w && $3 == p && $5 == o { v = $c } END { if (v != "") print v }' "$1"
}
rate() { awk -v r="$1" 'BEGIN { if (r >= 1e6) printf "%.2f M", r / 1e6;
	else if (r >= 1e3) printf "%.1f k", r / 1e3; else printf "%.0f", r }'; }

# cell text: "ops/s (median / p99 us)", or n/a, fail, -
show() { # backend key workload phase file
	local st=${cell[$1,$2]:-} r m p
	case $st in
	ok) r=$(field "$5" "$1" "$3" "$4" OVERALL 7); m=$(field "$5" "$1" "$3" "$4" OVERALL 8)
	    p=$(field "$5" "$1" "$3" "$4" OVERALL 9)
	    printf '%s (%s / %s)' "$(rate "$r")" "$(printf '%.1f' "$m")" "$(printf '%.0f' "$p")" ;;
	"") printf -- '-' ;;
	*) printf '%s' "$st" ;;
	esac
}

present=()
for be in $backends; do have_backend "$be" && present+=("$be"); done

{
	echo "# YCSB: zl-kvd vs Redis vs memcached"
	echo
	echo "$(date '+%Y-%m-%d %H:%M'), $where, $(nproc) CPUs" \
		"($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null)); $pin_note."
	echo "Driver: zl-ycsb (tools/zl-ycsb), $threads client thread(s), one request in flight per thread;"
	echo "$records records, $ops operations per workload. Cells: throughput in ops/s"
	echo "(median / p99 latency per operation in us). Redis over TCP loopback (RESP),"
	echo "memcached over TCP loopback (text protocol), zl-kvd over each zipline transport."
	echo
	printf '| workload |'; for be in "${present[@]}"; do printf ' %s |' "$be"; done; echo
	printf '|---|'; for _ in "${present[@]}"; do printf -- '---|'; done; echo
	for w in load $workloads; do
		if [ "$w" = load ]; then printf '| load (10 x 100 B inserts) |'; ph=load; ww=a
		else printf '| %s |' "$w"; ph=run; ww=$w; fi
		for be in "${present[@]}"; do printf ' %s |' "$(show "$be" "$w" "$ww" "$ph" "$csv")"; done
		echo
	done
	echo
	echo "## A, B and F next to C (targets)"
	echo
	echo "Each workload's ops/s over C's, same backend and run (target >= 0.8 on zl-kvd shm),"
	echo "and A's update median over its read median (target <= 1.5)."
	echo
	echo "| backend | A / C | B / C | F / C | A update / read median |"
	echo "|---|---|---|---|---|"
	for be in "${present[@]}"; do
		c=$(field "$csv" "$be" c run OVERALL 7)
		printf '| %s |' "$be"
		for w in a b f; do
			v=$(field "$csv" "$be" "$w" run OVERALL 7)
			if [ -n "$c" ] && [ -n "$v" ]; then awk -v a="$v" -v b="$c" 'BEGIN { printf " %.2f |", a / b }'
			else printf ' - |'; fi
		done
		u=$(field "$csv" "$be" a run UPDATE 8) r=$(field "$csv" "$be" a run READ 8)
		if [ -n "$u" ] && [ -n "$r" ]; then awk -v a="$u" -v b="$r" 'BEGIN { printf " %.2f |\n", (b > 0 ? a / b : 0) }'
		else echo ' - |'; fi
	done
	echo
	echo "## Headline (targets)"
	echo
	echo "Workload C (100% reads, zipfian), fieldcount=1 fieldlength=100 (values of 100 B),"
	echo "$records records, $headline_ops operations, 1 client thread, sequential (one request in flight)."
	echo
	echo "| backend | ops/s | median us | p99 us | p99.9 us | max us |"
	echo "|---|---|---|---|---|---|"
	h=$out/headline.csv
	for be in "${present[@]}"; do
		if [ "${cell[$be,headline]:-}" = ok ]; then
			printf '| %s | %s | %.2f | %.2f | %.2f | %.1f |\n' "$be" \
				"$(rate "$(field "$h" "$be" c run OVERALL 7)")" \
				"$(field "$h" "$be" c run OVERALL 8)" "$(field "$h" "$be" c run OVERALL 9)" \
				"$(field "$h" "$be" c run OVERALL 10)" "$(field "$h" "$be" c run OVERALL 11)"
		else
			printf '| %s | %s | | | | |\n' "$be" "${cell[$be,headline]:--}"
		fi
	done
	echo
	redis=$(field "$h" redis c run OVERALL 7)
	ratio() { # name backend [min]
		local v
		v=$(field "$h" "$2" c run OVERALL 7)
		if [ -z "$redis" ] || [ -z "$v" ]; then
			echo "- $1: n/a (no measurement for $2 or redis)"
			return
		fi
		awk -v a="$v" -v b="$redis" -v n="$1" -v m="${3:-}" 'BEGIN {
			r = a / b
			printf "- %s = %.0f / %.0f = **%.2f**", n, a, b, r
			if (m == "") print ""
			else printf " (target >= %s): %s\n", m, (r >= m ? "met" : "NOT met") }'
	}
	v=$(field "$h" null c run OVERALL 7)
	[ -n "$v" ] && awk -v v="$v" 'BEGIN { printf "Driver alone (null://, no store) on the same run: %.2f M ops/s, i.e. %.0f ns\n" \
		"of driver work (key choice, timing) per operation inside each figure.\n\n", v / 1e6, 1e9 / v }'
	ratio "zl-kvd shm / Redis tcp ops/s" zl-shm 30
	ratio "zl-kvd tcp / Redis tcp ops/s" zl-tcp 0.85
	[[ " ${present[*]} " == *" zl-rdma "* ]] && ratio "zl-kvd rdma / Redis tcp ops/s" zl-rdma
	# the one-sided store against zl-kvd on the same transport (as its target asks)
	med_ratio() { # name backend reference [max]
		local a b
		a=$(field "$h" "$2" c run OVERALL 8) b=$(field "$h" "$3" c run OVERALL 8)
		[ -n "$a" ] && [ -n "$b" ] || return 0
		awk -v a="$a" -v b="$b" -v n="$1" -v m="${4:-}" 'BEGIN {
			r = a / b
			printf "- %s = %.3f / %.3f us = **%.2f**", n, a, b, r
			if (m == "") print ""
			else printf " (target <= %s): %s\n", m, (r <= m ? "met" : "NOT met") }'
	}
	med_ratio "one-sided shm / zl-kvd shm GET median" zl-os zl-shm 0.5
	med_ratio "one-sided rdma / zl-kvd rdma GET median" zl-os-rdma zl-rdma
	echo
	echo "Ratios are computed from the measured ops/s above. Logs: $out/logs/."
} >"$md"
cat "$md"

# ---- plot ---------------------------------------------------------------
if [ -z "${ZL_VM:-}" ] && ! command -v gnuplot >/dev/null 2>&1; then
	echo "note: gnuplot not found; no PNG (apt-get install gnuplot-nox)"
else # script and data in OUT: the guest has none, --vm draws on the host
	{
		printf 'workload'; for be in "${present[@]}"; do printf ' %s %s' "$be" "$be-p50"; done; echo
		for w in load $workloads headline; do
			case $w in
			load) printf '"load"'; f=$csv ww=a ph=load ;;
			headline) printf '"C, 100 B"'; f=$out/headline.csv ww=c ph=run ;;
			*) printf '"%s"' "$(echo "$w" | tr a-f A-F)"; f=$csv ww=$w ph=run ;;
			esac
			for be in "${present[@]}"; do
				if [ "${cell[$be,$w]:-}" = ok ]; then
					printf ' %s %s' "$(field "$f" "$be" "$ww" "$ph" OVERALL 7)" \
						"$(field "$f" "$be" "$ww" "$ph" OVERALL 8)"
				else
					printf ' - -'
				fi
			done
			echo
		done
	} >"$dat"
	n=${#present[@]}
	cat >"$gp" <<EOF
set terminal pngcairo noenhanced size 1500,650 font 'sans,11'
set output '$png'
set datafile missing '-'
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y
set grid ytics mytics
set format y '%g'
set key below horizontal
set multiplot layout 1,2 title "YCSB via zl-ycsb: $records records, $threads thread(s), one request in flight; $pin_note\n$where, $(date '+%Y-%m-%d %H:%M'); 'C, 100 B' = the headline (fieldcount=1 fieldlength=100)"
set title 'throughput (ops/s, log scale) -- higher is better'
set format y '%.0s%c'
plot for [i=0:$((n - 1))] '$dat' using 2*i+2:xtic(1) title columnheader(2*i+2)
set title 'median latency per operation (us, log scale) -- lower is better'
set format y '%g'
plot for [i=0:$((n - 1))] '$dat' using 2*i+3:xtic(1) title columnheader(2*i+2)
unset multiplot
EOF
	if [ -z "${ZL_VM:-}" ]; then
		gnuplot "$gp" || echo "note: gnuplot failed; no PNG"
		[ -s "$png" ] && echo "plot: $png"
	fi
fi
echo "CSV: $csv, $out/headline.csv; table: $md"
exit $failed
