#!/bin/sh
# SPDX-License-Identifier: MIT
# postgres.sh ZL_RUN: PostgreSQL 15 from a temporary initdb, as a user that
# is not root (postgres refuses root; its clients run as the same user, as
# the preload switches only connections between processes of one user),
# plain and preloaded:
#  - pgbench -i, then pgbench -S and the default TPC-B, over the Unix socket
#    and over TCP, with 0 failed transactions;
#  - a fixed transaction script (psql) leaves every table with the same
#    checksum plain and preloaded;
#  - the connections really switched (postgres forks a backend per
#    connection: the postmaster accepts, the backend serves).
ZL_RUN=$1
. "$(dirname "$0")/lib.sh"
pg=/usr/lib/postgresql/15/bin
[ -x "$pg/postgres" ] || skip "PostgreSQL 15 is not installed (scripts/install-deps.sh)"
need runuser psql python3
chmod 755 "$tmp"
as true 2>/dev/null || skip "cannot run as $user"

# The fixed script: deterministic updates, inserts and deletes.
python3 - "$tmp/fixed.sql" <<'PY'
import sys
out = open(sys.argv[1], "w")
for i in range(1, 801):
    aid = i * 7919 % 100000 + 1
    tid, bid, delta = i % 10 + 1, 1, (i * 37) % 1000 - 500
    out.write("BEGIN;\n")
    out.write(f"UPDATE pgbench_accounts SET abalance = abalance + {delta} WHERE aid = {aid};\n")
    out.write(f"UPDATE pgbench_tellers SET tbalance = tbalance + {delta} WHERE tid = {tid};\n")
    out.write(f"UPDATE pgbench_branches SET bbalance = bbalance + {delta} WHERE bid = {bid};\n")
    out.write(f"INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ({tid}, {bid}, {aid}, {delta}, '2026-01-01');\n")
    out.write("COMMIT;\n")
out.write("DELETE FROM pgbench_history WHERE delta < -400;\n")
PY
chmod 644 "$tmp/fixed.sql"

cl() { # mode command...: a client, as the user, preloaded or not
	m=$1
	shift
	if [ "$m" = pre ]; then
		as env ZL_LOG=debug "$ZL_RUN" -- "$@" 2>>"$tmp/zl.log"
	else
		as "$@"
	fi
}

sums() { # the tables' checksums, one line each
	for t in accounts branches tellers history; do
		cl "$1" env PGHOST="$2" PGPORT="$3" "$pg/psql" -X -q -A -t -d bench -c \
			"SELECT '$t', count(*), md5(string_agg(x::text, '|' ORDER BY x::text)) FROM pgbench_$t x"
	done
}

pgb() { # mode host port args...: pgbench with 0 failed transactions
	m=$1 h=$2 p=$3
	shift 3
	cl "$m" env PGHOST="$h" PGPORT="$p" "$pg/pgbench" "$@" bench > "$tmp/pgb.out" 2>&1 ||
		fail "$m: pgbench $*: $(tail -5 "$tmp/pgb.out")"
	grep -q "number of failed transactions: 0 " "$tmp/pgb.out" ||
		fail "$m: pgbench $*: $(grep -i "failed\|error" "$tmp/pgb.out" | head -3)"
	echo "$m: pgbench $* on $h: $(grep "^tps" "$tmp/pgb.out" | head -1)"
}

run() {
	mode=$1 port=$(free_port) d="$tmp/$mode"
	mkdir -p "$d/sock" && chown -R "$user" "$d" 2>/dev/null
	as "$pg/initdb" -D "$d/data" -A trust -U postgres --no-sync > "$d/initdb.log" 2>&1 ||
		fail "$mode: initdb: $(tail -3 "$d/initdb.log")"
	set -- "$pg/postgres" -D "$d/data" -k "$d/sock" -p "$port" -c listen_addresses=127.0.0.1 \
		-c fsync=off -c max_connections=50
	if [ "$mode" = pre ]; then
		as_bg env ZL_LOG=debug "$ZL_RUN" -- "$@" >>"$tmp/server.out" 2>>"$tmp/zl.log"
	else
		as_bg "$@" >>"$tmp/server.out" 2>&1
	fi
	wait_for 100 "$pg/pg_isready" -q -h "$d/sock" -p "$port" || fail "$mode: postgres did not start"
	export PGUSER=postgres
	cl "$mode" env PGHOST="$d/sock" PGPORT="$port" "$pg/createdb" bench || fail "$mode: createdb"
	cl "$mode" env PGHOST="$d/sock" PGPORT="$port" "$pg/pgbench" -i -q -s 1 bench > "$tmp/init.out" 2>&1 ||
		fail "$mode: pgbench -i: $(tail -3 "$tmp/init.out")"
	sums "$mode" "$d/sock" "$port" > "$tmp/$mode.init.sums"
	cl "$mode" env PGHOST="$d/sock" PGPORT="$port" "$pg/psql" -X -q -v ON_ERROR_STOP=1 -d bench \
		-f "$tmp/fixed.sql" || fail "$mode: the fixed script"
	sums "$mode" 127.0.0.1 "$port" > "$tmp/$mode.sums"
	pgb "$mode" "$d/sock" "$port" -S -T 2 -c 4
	pgb "$mode" "$d/sock" "$port" -T 2 -c 4
	pgb "$mode" 127.0.0.1 "$port" -S -T 2 -c 4
	pgb "$mode" 127.0.0.1 "$port" -T 2 -c 4
}
run plain
run pre
cmp -s "$tmp/plain.init.sums" "$tmp/pre.init.sums" || fail "pgbench -i left different tables"
cmp -s "$tmp/plain.sums" "$tmp/pre.sums" ||
	fail "the fixed script left different tables: $(diff "$tmp/plain.sums" "$tmp/pre.sums")"
grep -q "accounts|100000|" "$tmp/pre.sums" || fail "no accounts checksum: $(cat "$tmp/pre.sums")"
n=$(switched)
[ "$n" -ge 20 ] || fail "only $n connections switched to shared memory"
echo "PASS: postgres: the same tables plain and preloaded, 0 failed transactions; $n connections switched"
