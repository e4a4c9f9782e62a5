#!/bin/bash
# SPDX-License-Identifier: MIT
# Real programs plain and preloaded (zl-run), in one run, interleaved:
#
#   bench/preload-compare.sh [BUILD_DIR] [--rounds N] [--secs S] [--out DIR]
#
# Each round runs every measurement once plain (client and server without
# the preload) and once preloaded (both with it), against servers started
# once per mode and kept for the whole run:
#   redis-benchmark GET and SET, -c 1 -P 1 and -c 50 (requests/s);
#   pgbench -S with -c 1 and -c 8, and TPC-B with synchronous_commit=off,
#     over the Unix socket (transactions/s);
#   memcached with memcaslap, 4 connections (operations/s);
# then the CPU a server spends idle with 50 idle connections (redis-server,
# 10 s, % of one CPU). Servers are pinned to cpu1, clients to cpu0. The
# script prints the median of each side and their ratio (preloaded / plain;
# for idle CPU the preloaded figure itself), and writes OUT (default
# BUILD_DIR/preload-compare): preload-compare.csv (every run), .md (the
# table) and .png (gnuplot, if installed).
# Exit status: 0, 1 if a run failed, 2 usage.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
[ $# -gt 0 ] && shift
rounds=5 secs=3 out=""
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) rounds=$2; shift 2 ;;
	--secs) secs=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	*) echo "usage: $0 [BUILD_DIR] [--rounds N] [--secs S] [--out DIR]" >&2; exit 2 ;;
	esac
done
build=$(cd "$build" && pwd)
out=${out:-$build/preload-compare}
ZL_RUN=$build/tools/zl-run
[ -x "$ZL_RUN" ] || { echo "no $ZL_RUN: build first" >&2; exit 2; }
mkdir -p "$out"
. "$here/../src/preload/progs/lib.sh"
pg=/usr/lib/postgresql/15/bin
need redis-server redis-benchmark memcached memcaslap python3 taskset
[ -x "$pg/postgres" ] || skip "PostgreSQL 15 is not installed"
chmod 755 "$tmp"
csv=$out/preload-compare.csv
echo "measure,round,mode,value" > "$csv"

pre_of() { # mode: the command prefix for that mode (the preload or none)
	if [ "$1" = pre ]; then echo "$ZL_RUN --"; fi
}
cli() { # mode command...: a client on cpu0
	m=$1
	shift
	taskset -c 0 $(pre_of "$m") "$@"
}
pgcli() { # mode command...: a PostgreSQL client on cpu0, as the server's user
	m=$1
	shift
	as env PGHOST="${pgsock[$m]}" PGUSER=postgres taskset -c 0 $(pre_of "$m") "$@"
}

# ---- servers, one of each per mode, on cpu1 ---------------------------------------
# (redis and memcached as us; postgres as $user, as it refuses root, and so
# its clients too: the preload switches connections of one user only)
declare -A rport mport pgsock
for m in plain pre; do
	rport[$m]=$(free_port)
	setsid taskset -c 1 $(pre_of $m) redis-server --port "${rport[$m]}" --bind 127.0.0.1 \
		--save "" --appendonly no --dir "$tmp" >> "$tmp/server.out" 2>&1 &
	pids="$pids $!"
	mport[$m]=$(free_port)
	setsid taskset -c 1 $(pre_of $m) memcached -p "${mport[$m]}" -U 0 -l 127.0.0.1 -m 256 \
		-u "$(id -un)" >> "$tmp/server.out" 2>&1 &
	pids="$pids $!"
	d=$tmp/pg-$m
	mkdir -p "$d/sock" && chown -R "$user" "$d" 2>/dev/null
	as "$pg/initdb" -D "$d/data" -A trust -U postgres --no-sync > "$d/initdb.log" 2>&1 ||
		fail "initdb: $(tail -3 "$d/initdb.log")"
	pgsock[$m]=$d/sock
	as_bg taskset -c 1 $(pre_of $m) "$pg/postgres" -D "$d/data" -k "$d/sock" -p 5432 \
		-c listen_addresses= -c fsync=off -c synchronous_commit=off -c max_connections=50 \
		>> "$tmp/server.out" 2>&1
done
for m in plain pre; do
	wait_for 100 redis-cli -p "${rport[$m]}" ping || fail "$m: redis-server did not start"
	wait_for 100 python3 -c "import socket; socket.create_connection(('127.0.0.1', ${mport[$m]}))" ||
		fail "$m: memcached did not start: $(tail -3 "$tmp/server.out")"
	wait_for 100 "$pg/pg_isready" -q -h "${pgsock[$m]}" -p 5432 || fail "$m: postgres did not start"
	pgcli "$m" "$pg/createdb" bench || fail "$m: createdb"
	pgcli "$m" "$pg/pgbench" -i -q -s 4 bench > "$tmp/init.out" 2>&1 ||
		fail "$m: pgbench -i: $(tail -3 "$tmp/init.out")"
done

# ---- one measurement: mode name -> number on stdout ------------------------------
measure() {
	m=$1 name=$2
	case $name in
	redis-get-c1|redis-set-c1|redis-get-c50|redis-set-c50)
		t=${name#redis-}; t=${t%-*}; c=${name##*-c}
		cli "$m" redis-benchmark -p "${rport[$m]}" -t "$t" -c "$c" -P 1 -n $((c == 1 ? 40000 : 200000)) \
			-d 100 -r 10000 --csv 2>/dev/null | tail -1 | cut -d'"' -f4 ;;
	pgbench-S-c1|pgbench-S-c8|pgbench-tpcb-c1)
		args="-c 1"
		case $name in *S-c8) args="-S -c 8 -j 2" ;; *S-c1) args="-S -c 1" ;; esac
		pgcli "$m" "$pg/pgbench" $args -T "$secs" bench 2>/dev/null |
			sed -n 's/^tps = \([0-9.]*\) (without.*/\1/p' ;;
	memcached)
		cli "$m" memcaslap -s "127.0.0.1:${mport[$m]}" -T 1 -c 4 -t "${secs}s" -X 100 2>/dev/null |
			sed -n 's/.*TPS: \([0-9]*\).*/\1/p' | tail -1 ;;
	esac
}

names="redis-get-c1 redis-set-c1 redis-get-c50 redis-set-c50 pgbench-S-c1 pgbench-S-c8 pgbench-tpcb-c1 memcached"
for r in $(seq 1 "$rounds"); do
	for name in $names; do
		for m in plain pre; do
			v=$(measure "$m" "$name")
			[ -n "$v" ] || fail "$name $m: no result"
			echo "$name,$r,$m,$v" >> "$csv"
		done
	done
	echo "round $r of $rounds done" >&2
done

# ---- idle: 50 idle connections, the server's CPU over 10 s ---------------------
for m in plain pre; do
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
	echo "idle-cpu-pct,1,$m,$pct" >> "$csv"
done

# ---- summary -----------------------------------------------------------------------
python3 - "$csv" "$out" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
names = []
for r in rows:
    if r["measure"] not in names:
        names.append(r["measure"])
md = ["| measure | plain (median) | preloaded (median) | preloaded / plain |",
      "|---|---|---|---|"]
dat = []
for n in names:
    v = {m: [float(r["value"]) for r in rows if r["measure"] == n and r["mode"] == m]
         for m in ("plain", "pre")}
    a, b = statistics.median(v["plain"]), statistics.median(v["pre"])
    ratio = b / a if a else float("nan")
    md.append(f"| {n} | {a:.1f} | {b:.1f} | {ratio:.2f} |")
    if not n.startswith("idle"):
        dat.append(f"{n} {ratio:.3f}")
open(sys.argv[2] + "/preload-compare.md", "w").write("\n".join(md) + "\n")
open(sys.argv[2] + "/preload-compare.dat", "w").write("\n".join(dat) + "\n")
print("\n".join(md))
PY
if command -v gnuplot >/dev/null; then
	gnuplot <<GP
set terminal png size 900,500
set output "$out/preload-compare.png"
set style data histograms
set style fill solid
set ylabel "preloaded / plain (median of $rounds rounds)"
set xtics rotate by -30
set yrange [0:*]
plot "$out/preload-compare.dat" using 2:xtic(1) title "zl-run / kernel sockets", 1 with lines notitle
GP
fi
echo "CSV: $csv"
