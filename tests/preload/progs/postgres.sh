#!/bin/sh
# SPDX-License-Identifier: MIT
# postgres.sh ZL_RUN [ADDR]: PostgreSQL 15 from a temporary initdb, as a user
# that is not root (postgres refuses root; its clients run as the same user,
# as the preload switches only connections between processes of one user),
# plain and preloaded:
#  - pgbench -i, then pgbench -S and the default TPC-B, over the Unix socket
#    and over TCP, with 0 failed transactions;
#  - a fixed transaction script (psql) leaves every table with the same
#    checksum plain and preloaded;
#  - the connections really switched (postgres forks a backend per
#    connection: the postmaster accepts, the backend serves).
# With ADDR, across hosts (tests/vm/xhost-suite.sh postgres, in the
# Soft-RoCE VM): the server listens on ADDR, every client connects there
# over TCP, both ends preloaded with --xhost naming it, and the connections
# must switch to rdma.
ZL_RUN=$1 xhost=${2:-}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg.sh"
pg_need
pg_fixed_sql "$tmp/fixed.sql"

run() {
	mode=$1 port=$(free_port) d="$tmp/$mode"
	pg_pre=""
	[ "$mode" = pre ] && pg_pre="env ZL_LOG=debug $ZL_RUN ${xhost:+--xhost $xhost:$port} --"
	pg_initdb "$d"
	pg_start "$d" "$port" "${xhost:-127.0.0.1}" || fail "$mode: $pg_err"
	if [ -n "$xhost" ]; then
		pg_load "$mode" "$xhost" "$port"
		set -- "$xhost"
	else
		pg_load "$mode" "$d/sock" "$port"
		sums=$(pg_sums 127.0.0.1 "$port") # the same over TCP
		[ "$sums" = "$(cat "$tmp/$mode.sums")" ] || fail "$mode: other checksums over TCP"
		set -- "$d/sock" 127.0.0.1
	fi
	for h; do
		pg_bench "$mode" "$h" "$port" -S -T 2 -c 4
		pg_bench "$mode" "$h" "$port" -T 2 -c 4
	done
}
run plain
run pre
cmp -s "$tmp/plain.init.sums" "$tmp/pre.init.sums" || fail "pgbench -i left different tables"
cmp -s "$tmp/plain.sums" "$tmp/pre.sums" ||
	fail "the fixed script left different tables: $(diff "$tmp/plain.sums" "$tmp/pre.sums")"
grep -q "accounts|100000|" "$tmp/pre.sums" || fail "no accounts checksum: $(cat "$tmp/pre.sums")"
what="shared memory"
[ -n "$xhost" ] && what=rdma
n=$(grep -c "switched to $what" "$tmp/zl.log")
[ "$n" -ge 20 ] || fail "only $n connections switched to $what"
echo "PASS: postgres: the same tables plain and preloaded, 0 failed transactions; $n switched to $what"
