#!/bin/bash
# shellcheck disable=SC2046,SC2086 # pre_of's words and $args split on purpose
# SPDX-License-Identifier: MIT
# Real programs plain and preloaded, in one run, interleaved:
#
#   bench/preload-compare.sh [BUILD_DIR] [--rounds N] [--secs S] [--out DIR] [--vm]
#
# On this host (default): each round runs every measurement once plain
# (client and server without the preload) and once preloaded (both with
# zl-run), against servers started once per mode and kept for the whole run:
#   redis-benchmark GET and SET, -c 1 -P 1 and -c 50 (requests/s);
#   pgbench -S with -c 1 and -c 8, and TPC-B with synchronous_commit=off,
#     over the Unix socket (transactions/s);
#   memcached with memcaslap, 4 connections (operations/s);
# then the CPU a server spends idle with 50 idle connections (redis-server,
# 10 s, % of one CPU). Servers are pinned to cpu1, clients to cpu0.
#
# --vm: across hosts, in one boot of the Soft-RoCE VM (tests/vm/rdma-vm.sh;
# servers on 10.0.0.1/rxe0, clients from 10.0.0.2/rxe1) in three modes:
# plain TCP over the veth (tcp), zl-run --xhost on both ends (zl), and
# rsockets' librspreload.so on both ends (rs); redis-benchmark GET and SET
# (-c 1 -P 1, -c 50; each run's request count set from a warm-up to last
# about S seconds), pgbench -S -c 1, and 64-byte round trips between two
# processes that only read and write (tests/preload/xhost_test ping: what
# rsockets can serve, the servers above need epoll). Every run's rxe
# packets are counted: an rdma run that moved fewer packets than it made
# requests, or a TCP run that moved as many, counts as failed.
#
# It prints the median of each mode and their ratios, and writes OUT
# (default BUILD_DIR/preload-compare, or preload-compare-vm):
# preload-compare.csv (every run), .errors (why runs failed), .md (the
# table) and .png (gnuplot, if installed). Exit status: 0; 1 if a run of
# the plain or zipline mode failed (a failed rsockets run is reported in
# the table); 2 usage.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=$root/build
case ${1:-} in --* | "") ;; *) build=$1; shift ;; esac
rounds="" secs="" out="" vm=0 guest=0
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) rounds=$2; shift 2 ;;
	--secs) secs=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--vm) vm=1; shift ;;
	--guest) guest=1; shift ;; # (inside the VM: what --vm runs there)
	*) echo "usage: $0 [BUILD_DIR] [--rounds N] [--secs S] [--out DIR] [--vm]" >&2; exit 2 ;;
	esac
done
build=$(cd "$build" && pwd) || exit 2
ZL_RUN=$build/tools/zl-run
[ -x "$ZL_RUN" ] || { echo "no $ZL_RUN: build first" >&2; exit 2; }
rs=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
if [ $vm = 1 ] || [ $guest = 1 ]; then
	rounds=${rounds:-3} secs=${secs:-3} out=${out:-$build/preload-compare-vm}
	modes="tcp zl rs" labels="tcp:TCP zl:zipline rs:rspreload" ratios="zl/rs zl/tcp rs/tcp"
	names="redis-get-c1 redis-set-c1 redis-get-c50 redis-set-c50 pgbench-S-c1 ping-64B"
else
	rounds=${rounds:-5} secs=${secs:-3} out=${out:-$build/preload-compare}
	modes="plain pre" labels="plain:plain pre:preloaded" ratios="pre/plain"
	names="redis-get-c1 redis-set-c1 redis-get-c50 redis-set-c50 pgbench-S-c1 pgbench-S-c8"
	names="$names pgbench-tpcb-c1 memcached"
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
csv=$out/preload-compare.csv errs=$out/preload-compare.errors

# The table, ratios and plot from the CSV (on the host: the guest has no python).
summary() {
	python3 "$here/preload-summary.py" "$csv" "$errs" "$out" "$labels" "$ratios" "$rounds" || return 1
	command -v gnuplot >/dev/null || return 0
	local n cols=() i=2 r
	for r in $ratios; do
		cols+=("\"$out/preload-compare.dat\" using $i:xtic(1) title \"$r\"")
		i=$((i + 1))
	done
	n=$(IFS=,; echo "${cols[*]}")
	gnuplot <<GP
set terminal png size 900,500
set output "$out/preload-compare.png"
set style data histograms
set style fill solid
set ylabel "ratio of medians ($rounds rounds)"
set xtics rotate by -30
set yrange [0:*]
plot $n, 1 with lines notitle
GP
}

if [ $vm = 1 ] && [ $guest = 0 ]; then
	[ -e "$rs" ] || { echo "no $rs (package librdmacm1)" >&2; exit 2; }
	[[ $build == "$root"/* && $out == "$root"/* ]] ||
		{ echo "--vm: BUILD_DIR and --out must be inside $root (the VM shares it)" >&2; exit 2; }
	echo "VMs running now: $(( $(pgrep -fc qemu-system) / 2 ))" >&2
	: > "$errs"
	ZL_VM_EXTRA="$(sh "$root/tests/vm/guest-programs.sh" | tr '\n' ' ') $rs" \
		"$root/tests/vm/rdma-vm.sh" --share "$root" --timeout $((600 + 15 * (rounds + 1) * (secs + 20))) \
		-- bash "$here/preload-compare.sh" "$build" --guest --rounds "$rounds" --secs "$secs" --out "$out"
	rc=$?
	[ $rc -eq 0 ] || [ $rc -eq 1 ] || exit $rc
	summary || exit 1
	echo "CSV: $csv"
	exit $rc
fi

. "$root/tests/preload/progs/lib.sh"
. "$root/tests/preload/progs/pg.sh"
need redis-server redis-cli redis-benchmark taskset
[ $guest = 1 ] || need memcached memcaslap python3
pg_need
tmo=$((secs * 20 + 30)) # a client that hangs (rsockets may) fails its run
echo "measure,round,mode,value,requests,rdma_pkts" > "$csv"
: > "$errs"

# ---- modes: the address servers listen on, the clients' command prefix ----------
declare -A rport mport pgport pghost tport
if [ $guest = 1 ]; then
	A=$ZL_RDMA_IP_A listen=$ZL_RDMA_IP_A
	"$root/tests/vm/from-b.sh" add || fail "cannot add the routing rule"
else
	A=127.0.0.1 listen=""
fi
for m in $modes; do
	rport[$m]=$(free_port) mport[$m]=$(free_port) pgport[$m]=$(free_port) tport[$m]=$(free_port)
done
pre_of() { # mode: the command prefix for that mode
	case $1 in
	pre) echo "$ZL_RUN --" ;;
	zl) echo "$ZL_RUN --xhost $A:${rport[zl]},$A:${pgport[zl]},$A:${tport[zl]} --" ;;
	rs) echo "env LD_PRELOAD=$rs RDMAV_FORK_SAFE=1" ;;
	esac
}
cli() { # mode command...: a client on cpu0
	m=$1
	shift
	timeout "$tmo" taskset -c 0 $(pre_of "$m") "$@"
}

# ---- servers, one of each per mode, on cpu1 ---------------------------------------
# postgres from one template cluster (initdb and pgbench -i once: slow in the
# emulator), a copy per mode
pg_initdb "$tmp/pg-tpl"
pg_start "$tmp/pg-tpl" "${pgport[${modes%% *}]}" "" || fail "$pg_err"
pg_cl env PGHOST="$tmp/pg-tpl/sock" PGPORT="${pgport[${modes%% *}]}" PGUSER=postgres "$pg/createdb" bench ||
	fail "createdb"
pg_cl env PGHOST="$tmp/pg-tpl/sock" PGPORT="${pgport[${modes%% *}]}" PGUSER=postgres "$pg/pgbench" -i -q \
	-s "$([ $guest = 1 ] && echo 1 || echo 4)" bench > "$tmp/init.out" 2>&1 ||
	fail "pgbench -i: $(tail -3 "$tmp/init.out")"
as "$pg/pg_ctl" -D "$tmp/pg-tpl/data" -m fast -w stop > /dev/null || fail "pg_ctl stop"
# (a server that does not start in a mode fails that mode's runs: down[])
declare -A down
for m in $modes; do
	setsid taskset -c 1 $(pre_of "$m") redis-server --port "${rport[$m]}" --bind "$A" \
		--save "" --appendonly no --dir "$tmp" --protected-mode no > "$tmp/redis-$m.out" 2>&1 &
	pids="$pids $!"
	if [ $guest = 0 ]; then
		setsid taskset -c 1 $(pre_of "$m") memcached -p "${mport[$m]}" -U 0 -l 127.0.0.1 -m 256 \
			-u "$(id -un)" >> "$tmp/server.out" 2>&1 &
		pids="$pids $!"
	fi
	cp -a "$tmp/pg-tpl" "$tmp/pg-$m"
	pg_pre="taskset -c 1 $(pre_of "$m")" pg_log=$tmp/pg-$m.log
	pg_start "$tmp/pg-$m" "${pgport[$m]}" "$listen" -c synchronous_commit=off || down[$m,pg]=$pg_err
	pghost[$m]=${listen:-$tmp/pg-$m/sock}
done
pg_pre=""
for m in $modes; do
	wait_for 100 sh -c "timeout 10 $(pre_of "$m") redis-cli -h $A -p ${rport[$m]} ping | grep -q PONG" ||
		down[$m,redis]="redis-server did not start: $(grep -a "Guru\|rror" "$tmp/redis-$m.out" | head -1)"
	[ $guest = 1 ] ||
		wait_for 100 python3 -c "import socket; socket.create_connection(('127.0.0.1', ${mport[$m]}))" ||
		fail "$m: memcached did not start: $(tail -3 "$tmp/server.out")"
done

# ---- one measurement: mode name [requests] -> number on stdout, or its errors -------
measure() {
	m=$1 name=$2 n=${3:-}
	case $name in
	redis-*)
		t=${name#redis-}; t=${t%-*}; c=${name##*-c}
		[ -n "$n" ] || n=$((c == 1 ? 40000 : 200000))
		cli "$m" redis-benchmark -h "$A" -p "${rport[$m]}" -t "$t" -c "$c" -P 1 -n "$n" \
			-d 100 -r 10000 --csv > "$tmp/m.out" 2>&1
		echo "(exit $?)" >> "$tmp/m.out"
		grep '^"' "$tmp/m.out" | tail -1 | cut -d'"' -f4 ;;
	pgbench-*)
		args="-c 1"
		case $name in *S-c8) args="-S -c 8 -j 2" ;; *S-c1) args="-S -c 1" ;; esac
		as timeout "$tmo" env PGHOST="${pghost[$m]}" PGPORT="${pgport[$m]}" PGUSER=postgres \
			taskset -c 0 $(pre_of "$m") "$pg/pgbench" $args -T "$secs" bench > "$tmp/m.out" 2>&1
		echo "(exit $?)" >> "$tmp/m.out"
		sed -n 's/^tps = \([0-9.]*\) (without.*/\1/p' "$tmp/m.out" ;;
	ping-64B) # a server per run (it serves one connection)
		: > "$tmp/ping.out" # (here: the server may open it after wait_for looks)
		setsid taskset -c 1 $(pre_of "$m") "$build/tests/preload/xhost_test" server "$A" \
			"${tport[$m]}" echo >> "$tmp/ping.out" 2>&1 &
		s=$!
		wait_for 100 grep -q listening "$tmp/ping.out"
		cli "$m" "$build/tests/preload/xhost_test" client "$A" "${tport[$m]}" "$ZL_RDMA_IP_B" ping \
			"${n:-2000}" > "$tmp/m.out" 2>&1
		echo "(exit $?)" >> "$tmp/m.out"
		kill "$s" 2>/dev/null
		wait "$s"
		sed -n 's|^round trips/s: \([0-9]*\) .*|\1|p' "$tmp/m.out" ;;
	memcached)
		cli "$m" memcaslap -s "127.0.0.1:${mport[$m]}" -T 1 -c 4 -t "${secs}s" -X 100 > "$tmp/m.out" 2>&1
		echo "(exit $?)" >> "$tmp/m.out"
		sed -n 's/.*TPS: \([0-9]*\).*/\1/p' "$tmp/m.out" | tail -1 ;;
	esac
}

# The requests a run made: redis's -n, pgbench's transactions.
ops_of() {
	case $2 in
	redis-* | ping-*) echo "$1" ;;
	pgbench-*) sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$tmp/m.out" ;;
	esac
}

rxe_pkts() { # rxe0's packets sent and received so far (0 on the host)
	local d=/sys/class/infiniband/rxe0/ports/1/hw_counters
	[ -r "$d/sent_pkts" ] || { echo 0; return; }
	echo $(( $(cat "$d/sent_pkts") + $(cat "$d/rcvd_pkts") ))
}

# run_one ROUND MODE NAME: one measurement into the CSV, or its failure
# into the CSV and the errors file
declare -A nreq
failed_runs=0
run_one() {
	local r=$1 m=$2 name=$3 v p0 p1 pk ops why=""
	why=$(down_why "$m" "$name")
	[ -z "$why" ] || { fail_run "$r" "$m" "$name" "$why" 0; return; }
	p0=$(rxe_pkts)
	v=$(measure "$m" "$name" "${nreq[$m,$name]:-}")
	p1=$(rxe_pkts)
	pk=$((p1 - p0))
	ops=$(ops_of "${nreq[$m,$name]:-}" "$name")
	# (an rdma request and its reply are at least 2 packets on rxe0; a few
	# come from channels still closing after the run before)
	if [ -z "$v" ]; then
		why=$(no_result "$name" "$m")
	elif [ $guest = 1 ] && [ "$m" != tcp ] && [ "$pk" -lt "${ops:-0}" ]; then
		why="only $pk rxe packets for $ops requests: not over rdma"
	elif [ $guest = 1 ] && [ "$m" = tcp ] && [ "$pk" -ge "${ops:-0}" ]; then
		why="$pk rxe packets for $ops requests over TCP"
	fi
	if [ -n "$why" ]; then
		fail_run "$r" "$m" "$name" "$why" "$pk"
	else
		echo "$name,$r,$m,$v,$ops,$pk" >> "$csv"
		fit_n "$m" "$name" "$v"
	fi
}
# fit_n mode name rate: a request count that lasts about $secs seconds at
# that rate, if more than the one set (a warm-up is slower: the emulator
# translates code on first use), at most 4 times it (the rates swing)
fit_n() {
	[ -n "${nreq[$1,$2]:-}" ] || return 0
	nreq[$1,$2]=$(awk -v v="$3" -v s="$secs" -v n="${nreq[$1,$2]}" \
		'BEGIN { x = int(v * s); x = x > 4 * n ? 4 * n : x; print x < n ? n : x }')
}
down_why() { # mode name: why its server is down or its warm-up failed, or nothing
	case $2 in
	redis-*) echo "${down[$1,redis]:-${down[$1,$2]:-}}" ;;
	pgbench-*) echo "${down[$1,pg]:-${down[$1,$2]:-}}" ;;
	*) echo "${down[$1,$2]:-}" ;;
	esac
}
no_result() { # name mode: why a run gave no number (exit 124: it hung, killed)
	local w
	w="no result: $(grep -v '^ *$' "$tmp/m.out" | tail -3 | tr '\n' ' ')"
	[[ $1 == pgbench-* ]] && w="$w; server: $(grep -a "terminated by\|FATAL\|PANIC" "$tmp/pg-$2.log" | tail -1)"
	echo "$w"
}
fail_run() { # round mode name why pkts
	echo "$3,$1,$2,fail,,$5" >> "$csv"
	echo "$3,$2,$1: $4" >> "$errs"
	echo "$3 $2 round $1: $4" >&2
	[ "$2" = rs ] || failed_runs=$((failed_runs + 1))
}

# In the VM, a warm-up run per mode and measurement sets its request count
# (fit_n; every later run raises it if it went faster).
if [ $guest = 1 ]; then
	for name in $names; do
		for m in $modes; do
			case $name in redis-*-c1 | ping-*) n=300 ;; redis-*) n=2000 ;; *) n="" ;; esac
			nreq[$m,$name]=$n
			[ -z "$(down_why "$m" "$name")" ] || continue
			v=$(measure "$m" "$name" "$n")
			# (a run that fails here is not tried again in this mode)
			[ -n "$v" ] || down[$m,$name]="in the warm-up: $(no_result "$name" "$m")"
			fit_n "$m" "$name" "${v:-0}"
		done
	done
	echo "warm-up done" >&2
fi
for r in $(seq 1 "$rounds"); do
	for name in $names; do
		for m in $modes; do run_one "$r" "$m" "$name"; done
	done
	echo "round $r of $rounds done" >&2
done

# ---- idle: 50 idle connections, the server's CPU over 10 s (on the host) ---------
if [ $guest = 0 ]; then
	for m in $modes; do
		pid=$(pgrep -f "redis-server 127.0.0.1:${rport[$m]}" | head -1)
		cli "$m" python3 -c "
import socket, time
s = [socket.create_connection(('127.0.0.1', ${rport[$m]})) for _ in range(50)]
for c in s: c.sendall(b'PING\r\n'); c.recv(16)
time.sleep(13)" &
		idle=$!
		sleep 2
		pct=$(cpu_pct "$pid" 10)
		wait $idle
		echo "idle-cpu-pct,1,$m,$pct,," >> "$csv"
	done
	summary
	echo "CSV: $csv"
else
	"$root/tests/vm/from-b.sh" del
fi
[ $failed_runs -eq 0 ]
