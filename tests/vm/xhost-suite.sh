#!/bin/bash
# The preload across hosts, run INSIDE the Soft-RoCE VM by
# rdma-suite.sh: xhost-suite.sh BUILD_DIR CASE. The two "hosts" are the
# VM's two addresses, 10.0.0.1 on rxe0/veth0 and 10.0.0.2 on rxe1/veth1:
# guest-init.sh's routing rules make their traffic cross the veth pair
# (rxe in this kernel serves only the initial network namespace, so the two
# ends share it). Servers listen on A, clients bind B (or, for programs
# that cannot, from-b.sh routes them). Exit 0 pass, 1 fail, 77 skip (the
# reason printed).
set -u
B=${1:?usage: xhost-suite.sh BUILD_DIR CASE}
case_=${2:?usage: xhost-suite.sh BUILD_DIR CASE}
A=${ZL_RDMA_IP_A:?run this inside tests/vm/rdma-vm.sh} C=${ZL_RDMA_IP_B:?}
T=$B/tests/preload/xhost_test RUN=$B/tools/zl-run
dir=$(mktemp -d) || exit 1
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$dir"; }
trap cleanup EXIT
port=$((20000 + RANDOM % 5000))

# start_server LOG ARGS...: a server in the background, once it listens
start_server() {
	local log=$1
	shift
	"$@" > "$log" 2> "$log.err" &
	srv=$!
	pids+=("$srv")
	for _ in $(seq 200); do grep -qs listening "$log" && return 0; sleep 0.05; done
	echo "server did not start:"; cat "$log" "$log.err"
	return 1
}

# switched LOG: how many directions of its process switched to rdma
switched() { grep -c "switched to rdma" "$1" 2>/dev/null; }

# For clients that cannot bind a source address (redis-cli, pgbench)
route_from_b() {
	"$(dirname "$0")/from-b.sh" add || { echo "cannot add the routing rule"; exit 1; }
	trap '"$(dirname "$0")/from-b.sh" del; cleanup' EXIT
}

# under the preload, logging to stderr (an array, not a function: a job in
# the background must be the program itself, for kill -9)
pre=("$RUN" --log info)

case $case_ in
sem)
	# the semantics suite, plain and with the preload on both ends (every
	# end lives in the suite's own processes), across the two addresses
	export SEM_TCP4_ADDR=$A SEM_TCP4_SRC=$C
	"$B/tests/preload/sem_test" tcp4 > "$dir/plain" 2> "$dir/plain.err"
	rc=$?
	[ $rc -eq 0 ] || { echo "plain run failed ($rc)"; cat "$dir/plain" "$dir/plain.err"; exit 1; }
	ZL_PRELOAD_XHOST=all "${pre[@]}" -- "$B/tests/preload/sem_test" tcp4 > "$dir/pre" 2> "$dir/pre.err"
	rc=$?
	n=$(switched "$dir/pre.err")
	echo "preloaded: $n directions of connections switched to rdma"
	[ $rc -eq 0 ] || { echo "preloaded run failed ($rc):"; grep -v "info:" "$dir/pre.err" | tail; cat "$dir/pre"; exit 1; }
	diff "$dir/plain" "$dir/pre" || { echo "transcripts differ (plain <, preloaded >)"; exit 1; }
	# a switch needs both ends' first use and a setup: short cases end on
	# TCP; the rest must really switch
	[ "$n" -ge 10 ] || { echo "only $n directions switched"; exit 1; }
	echo "PASS: the same $(grep -c '^ok' "$dir/pre") cases pass plain and preloaded across hosts"
	;;
echo | epecho)
	# both ends preloaded and named: both directions switch, every byte
	# checked (enough rounds, 5 MB, for the channel's setup to end well
	# before the last); epecho: the client's socket is in an epoll set
	# from before its connect, and it waits for each answer there
	start_server "$dir/s" "${pre[@]}" --xhost "$A:$port" -- "$T" server "$A" "$port" echo || exit 1
	"${pre[@]}" --xhost "$A:$port" -- "$T" client "$A" "$port" "$C" "$case_" 400 2> "$dir/c.err" || {
		echo "client failed:"; cat "$dir/c.err"; exit 1; }
	wait "$srv" || { echo "server failed:"; cat "$dir/s" "$dir/s.err"; exit 1; }
	cs=$(switched "$dir/c.err") ss=$(switched "$dir/s.err")
	echo "client directions switched: $cs, server: $ss"
	[ "$cs" -eq 1 ] && [ "$ss" -eq 1 ] || { cat "$dir/c.err" "$dir/s.err"; exit 1; }
	;;
mixed_plain_server | mixed_plain_client | mixed_unnamed | bad_config | no_device)
	sx=(--xhost "$A:$port") cx=(--xhost "$A:$port") sp=("${pre[@]}") cp=("${pre[@]}") want=""
	case $case_ in
	mixed_plain_server) sp=() want="no preloaded listener" ;;
	mixed_plain_client) cp=() ;;
	mixed_unnamed) cx=(--xhost "$A:$((port + 1))") ;; # names another port
	bad_config) cx=(--xhost "$A:$port,10.0.0.0/99") want="is malformed" ;;
	no_device) export ZL_PRELOAD_XHOST_DEV=nodev0 want="stays on TCP" ;;
	esac
	[ ${#sp[@]} -eq 0 ] && sx=()
	[ ${#cp[@]} -eq 0 ] && cx=()
	start_server "$dir/s" "${sp[@]}" "${sx[@]}" ${sp:+--} "$T" server "$A" "$port" echo || exit 1
	"${cp[@]}" "${cx[@]}" ${cp:+--} "$T" client "$A" "$port" "$C" echo 300 2> "$dir/c.err" || {
		echo "client failed:"; cat "$dir/c.err"; exit 1; }
	wait "$srv" || { echo "server failed:"; cat "$dir/s" "$dir/s.err"; exit 1; }
	n=$(( $(switched "$dir/c.err") + $(switched "$dir/s.err") ))
	[ "$n" -eq 0 ] || { echo "$n directions switched, want 0 (TCP)"; cat "$dir/c.err" "$dir/s.err"; exit 1; }
	if [ -n "$want" ]; then
		grep -q "$want" "$dir/c.err" "$dir/s.err" || {
			echo "no log line saying '$want':"; cat "$dir/c.err" "$dir/s.err"; exit 1; }
		grep -h "$want" "$dir/c.err" "$dir/s.err" | head -2
	fi
	echo "stayed on TCP, every byte checked"
	;;
kill_server | kill_client)
	# kill -9 one end mid-transfer: the other sees EOF or ECONNRESET in time
	start_server "$dir/s" "${pre[@]}" --xhost "$A:$port" -- "$T" server "$A" "$port" stream || exit 1
	"${pre[@]}" --xhost "$A:$port" -- "$T" client "$A" "$port" "$C" stream 8000000 \
		> "$dir/c" 2> "$dir/c.err" &
	cli=$!
	pids+=("$cli")
	for _ in $(seq 600); do grep -qs streaming "$dir/c" && break; sleep 0.05; done
	grep -qs streaming "$dir/c" || { echo "no stream:"; cat "$dir/c" "$dir/c.err" "$dir/s.err"; exit 1; }
	[ "$(switched "$dir/s.err")" -ge 1 ] || { echo "the server's sends did not switch:"; cat "$dir/s.err"; exit 1; }
	t0=${EPOCHREALTIME/./}
	if [ "$case_" = kill_server ]; then
		kill -9 "$srv"; survivor=$cli log=$dir/c
	else
		kill -9 "$cli"; survivor=$srv log=$dir/s
	fi
	wait "$survivor"
	rc=$?
	ms=$(( (${EPOCHREALTIME/./} - t0) / 1000 ))
	cat "$log"
	echo "the survivor ended $ms ms after the kill (exit $rc)"
	[ $rc -eq 0 ] || { cat "$dir/c.err" "$dir/s.err" | grep -v "rdma: rxe" | tail; exit 1; }
	[ $ms -lt 20000 ] || { echo "too slow"; exit 1; }
	;;
redis)
	# redis-server on A, redis-cli and redis-benchmark from B
	for p in redis-server redis-cli redis-benchmark; do
		command -v $p >/dev/null || { echo "skip: $p not in the guest (ZL_VM_EXTRA)"; exit 77; }
	done
	route_from_b
	x=(--xhost "$A:$port" --)
	"${pre[@]}" "${x[@]}" redis-server --bind "$A" --port "$port" --save "" --appendonly no \
		--protected-mode no > "$dir/s" 2> "$dir/s.err" &
	srv=$!
	pids+=("$srv")
	for _ in $(seq 100); do redis-cli -h "$A" -p "$port" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
	# every GET returns what was SET, values of 1 B to 1 MiB, each over its
	# own preloaded connection
	for size in 1 100 65536 1048576; do
		head -c $((size * 2)) /dev/urandom | od -An -tx1 | tr -d ' \n' | head -c "$size" > "$dir/v$size"
		"${pre[@]}" "${x[@]}" redis-cli -h "$A" -p "$port" -x SET "k$size" < "$dir/v$size" \
			2>> "$dir/c.err" | grep -q OK || { echo "SET of $size bytes failed"; cat "$dir/c.err"; exit 1; }
		"${pre[@]}" "${x[@]}" redis-cli -h "$A" -p "$port" --raw GET "k$size" 2>> "$dir/c.err" |
			head -c "$size" | cmp - "$dir/v$size" || { echo "GET of $size bytes differs"; exit 1; }
	done
	echo "SET/GET of 1 B..1 MiB values: every GET returned what was SET"
	# redis-benchmark, 50 clients, SET and GET
	"${pre[@]}" "${x[@]}" redis-benchmark -h "$A" -p "$port" -c 50 -n "${N:-2000}" -t set,get \
		-d 4096 -q > "$dir/b" 2>> "$dir/c.err" || { echo "redis-benchmark failed"; tail "$dir/c.err"; exit 1; }
	tr '\r' '\n' < "$dir/b" | grep "per second" | tail -2
	n=$(switched "$dir/s.err") m=$(switched "$dir/c.err")
	echo "directions switched: server $n, clients $m"
	[ "$n" -ge 50 ] && [ "$m" -ge 50 ] || { echo "want >= 50 each"; grep -v "rdma: rxe" "$dir/s.err" | tail; exit 1; }
	;;
postgres)
	# PostgreSQL 15 on A as nobody, psql and pgbench from B, plain and both
	# ends preloaded: tests/preload/progs/postgres.sh across hosts (pgbench
	# -i, -S and TPC-B with 0 failed transactions, equal table checksums,
	# the connections switched to rdma)
	# (its whole tree: the word "postgres" among rdma-vm.sh's arguments
	# brings the binary alone where the host has it in PATH)
	[ -x /usr/lib/postgresql/15/bin/initdb ] && [ -d /usr/share/postgresql/15 ] ||
		{ echo "skip: PostgreSQL 15 not in the guest (ZL_VM_EXTRA: tests/vm/guest-programs.sh)"; exit 77; }
	route_from_b
	sh "$B/tests/preload/progs/postgres.sh" "$RUN" "$A"
	;;
ping)
	# not in rdma-suite.sh's list (a figure, not a check): 64-byte round
	# trips between the two addresses, plain TCP and both ends preloaded
	# (switched to rdma), interleaved, in this one boot
	for round in 1 2; do
		for mode in tcp rdma; do
			port=$((port + 1))
			p=() x=()
			[ $mode = rdma ] && p=("${pre[@]}") x=(--xhost "$A:$port" --)
			start_server "$dir/s" "${p[@]}" "${x[@]}" "$T" server "$A" "$port" echo || exit 1
			r=$("${p[@]}" "${x[@]}" "$T" client "$A" "$port" "$C" ping "${ROUNDS:-20000}" \
				2> "$dir/c.err") || { cat "$dir/c.err"; exit 1; }
			wait "$srv"
			[ $mode = tcp ] || [ "$(switched "$dir/c.err")" -eq 1 ] ||
				{ echo "rdma run did not switch"; exit 1; }
			echo "run $round $mode: $r"
		done
	done
	;;
*) echo "unknown case $case_"; exit 2 ;;
esac
