# SPDX-License-Identifier: MIT
# PostgreSQL 15 helpers, sourced after lib.sh by postgres.sh and
# bench/preload-compare.sh (on one host, and in the RDMA VM's guest, which
# has no python). Servers and clients run as $user (postgres refuses root;
# the preload switches connections of one user only). pg_pre: the command
# prefix of the current mode (the preload and its options), empty for none;
# a preloaded command's standard error goes to $pg_log ($tmp/zl.log).
# shellcheck shell=sh disable=SC2154 # tmp and user come from lib.sh
pg=/usr/lib/postgresql/15/bin
pg_pre=""
pg_log=$tmp/zl.log

pg_need() {
	[ -x "$pg/postgres" ] || skip "PostgreSQL 15 is not installed (scripts/install-deps.sh)"
	need /usr/bin/setpriv
	chmod 755 "$tmp"
	as true 2>/dev/null || skip "cannot run as $user"
}

# pg_fixed_sql FILE: a fixed transaction script of deterministic updates,
# inserts and deletes
pg_fixed_sql() {
	awk 'BEGIN {
		for (i = 1; i <= 800; i++) {
			aid = i * 7919 % 100000 + 1; tid = i % 10 + 1; d = i * 37 % 1000 - 500
			print "BEGIN;"
			print "UPDATE pgbench_accounts SET abalance = abalance + " d " WHERE aid = " aid ";"
			print "UPDATE pgbench_tellers SET tbalance = tbalance + " d " WHERE tid = " tid ";"
			print "UPDATE pgbench_branches SET bbalance = bbalance + " d " WHERE bid = 1;"
			print "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (" \
				tid ", 1, " aid ", " d ", '\''2026-01-01'\'');"
			print "COMMIT;"
		}
		print "DELETE FROM pgbench_history WHERE delta < -400;"
	}' > "$1"
	chmod 644 "$1"
}

pg_cl() { # command...: a client, as the user, in the current mode
	if [ -n "$pg_pre" ]; then
		# shellcheck disable=SC2086 # pg_pre is a list of words
		as $pg_pre "$@" 2>>"$pg_log"
	else
		as "$@"
	fi
}

# pg_initdb DIR: a cluster in DIR/data that trusts every local and TCP client
pg_initdb() {
	mkdir -p "$1" && chown -R "$user" "$1" 2>/dev/null
	as "$pg/initdb" -D "$1/data" -A trust -U postgres --no-sync > "$1/initdb.log" 2>&1 ||
		fail "initdb: $(tail -3 "$1/initdb.log")"
	echo "host all all all trust" >> "$1/data/pg_hba.conf"
}

# pg_start DIR PORT LISTEN [OPTION...]: a server on DIR/data, its socket in
# DIR/sock, in the current mode, once it answers; else 1, and pg_err says why
pg_start() {
	_d=$1 _port=$2 _listen=$3
	shift 3
	mkdir -p "$_d/sock" && chown "$user" "$_d/sock" 2>/dev/null
	set -- "$pg/postgres" -D "$_d/data" -k "$_d/sock" -p "$_port" \
		-c listen_addresses="$_listen" -c fsync=off -c max_connections=60 -c jit=off "$@"
	if [ -n "$pg_pre" ]; then
		# shellcheck disable=SC2086
		as_bg $pg_pre "$@" >>"$tmp/server.out" 2>>"$pg_log"
	else
		as_bg "$@" >>"$tmp/server.out" 2>&1
	fi
	wait_for 300 "$pg/pg_isready" -q -h "$_d/sock" -p "$_port" && return 0
	pg_err="postgres did not start: $(grep -ah "FATAL\|ERROR\|PANIC" "$tmp/server.out" "$pg_log" 2>/dev/null | tail -2)"
	return 1
}

pg_sums() { # host port: the tables' checksums, one line each
	for _t in accounts branches tellers history; do
		pg_cl env PGHOST="$1" PGPORT="$2" PGUSER=postgres "$pg/psql" -X -q -A -t -d bench -c \
			"SELECT '$_t', count(*), md5(string_agg(x::text, '|' ORDER BY x::text)) FROM pgbench_$_t x"
	done
}

pg_bench() { # name host port args...: pgbench with 0 failed transactions
	_n=$1 _h=$2 _p=$3
	shift 3
	pg_cl env PGHOST="$_h" PGPORT="$_p" PGUSER=postgres "$pg/pgbench" "$@" bench \
		> "$tmp/pgb.out" 2>&1 || fail "$_n: pgbench $*: $(tail -5 "$tmp/pgb.out")"
	grep -q "number of failed transactions: 0 " "$tmp/pgb.out" ||
		fail "$_n: pgbench $*: $(grep -i "failed\|error" "$tmp/pgb.out" | head -3)"
	echo "$_n: pgbench $* on $_h: $(grep "^tps" "$tmp/pgb.out" | head -1)"
}

# pg_load NAME HOST PORT: createdb, pgbench -i and the fixed script
# ($tmp/fixed.sql); the checksums after each in $tmp/NAME.init.sums and
# $tmp/NAME.sums
pg_load() {
	pg_cl env PGHOST="$2" PGPORT="$3" PGUSER=postgres "$pg/createdb" bench || fail "$1: createdb"
	pg_cl env PGHOST="$2" PGPORT="$3" PGUSER=postgres "$pg/pgbench" -i -q -s 1 bench \
		> "$tmp/init.out" 2>&1 || fail "$1: pgbench -i: $(tail -3 "$tmp/init.out")"
	pg_sums "$2" "$3" > "$tmp/$1.init.sums"
	pg_cl env PGHOST="$2" PGPORT="$3" PGUSER=postgres "$pg/psql" -X -q -v ON_ERROR_STOP=1 \
		-d bench -f "$tmp/fixed.sql" || fail "$1: the fixed script"
	pg_sums "$2" "$3" > "$tmp/$1.sums"
}
