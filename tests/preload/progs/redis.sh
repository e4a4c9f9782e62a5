#!/bin/sh
# SPDX-License-Identifier: MIT
# redis.sh ZL_RUN: redis-server, redis-cli and redis-benchmark over the
# preload, checked against the same run without it.
#  - the same scripted data set (values of 1 B to 1 MiB) gives the same
#    DEBUG DIGEST plain and preloaded, and every GET returns what was SET;
#  - redis-benchmark SET and GET with 50 clients and pipelining (-P 16),
#    with a BGSAVE during the load (the forked child inherits the sockets);
#  - 50 idle preloaded connections cost the server less than 2% of a CPU;
#  - mixed peers: a plain client against the preloaded server and the
#    reverse work over kernel sockets;
#  - the connections really switched (the preload's debug log says so).
ZL_RUN=$1
. "$(dirname "$0")/lib.sh"
need redis-server redis-cli redis-benchmark python3

# The scripted data set, as redis protocol: 200 keys, values of 1 B..1 MiB.
python3 - "$tmp/data.resp" <<'PY'
import random, sys
r = random.Random(7)
out = open(sys.argv[1], "wb")
def cmd(*a):
    out.write(b"*%d\r\n" % len(a))
    for x in a:
        out.write(b"$%d\r\n%s\r\n" % (len(x), x))
for i in range(200):
    n = [1, 100, 1000, 65536, 1 << 20][i % 5]
    cmd(b"SET", b"k%d" % i, bytes(r.getrandbits(8) for _ in range(min(n, 4096))) * (n // min(n, 4096)))
    if i % 7 == 0:
        cmd(b"APPEND", b"k%d" % i, b"tail")
    if i % 11 == 0:
        cmd(b"INCRBY", b"n%d" % i, b"%d" % i)
out.close()
PY

# run MODE: start a server (MODE pre or plain), load and check; prints the digest
run() {
	mode=$1 port=$(free_port)
	mkdir -p "$tmp/$mode"
	${mode}_bg redis-server --port "$port" --bind 127.0.0.1 --dir "$tmp/$mode" --save "" \
		--appendonly no --protected-mode no --enable-debug-command yes
	wait_for 50 redis-cli -p "$port" ping || fail "$mode: redis-server did not start"
	$mode redis-cli -p "$port" --pipe < "$tmp/data.resp" > "$tmp/$mode.pipe" ||
		fail "$mode: redis-cli --pipe failed"
	grep -q "errors: 0" "$tmp/$mode.pipe" || fail "$mode: --pipe: $(cat "$tmp/$mode.pipe")"
	# every GET returns what was SET (one key per size, read back whole)
	for i in 0 1 2 3 4; do
		$mode redis-cli -p "$port" --no-raw strlen "k$i" > "$tmp/$mode.len" &&
		$mode redis-cli -p "$port" get "k$i" | head -c -1 > "$tmp/$mode.k$i" ||
			fail "$mode: get k$i"
		[ "$(stat -c %s "$tmp/$mode.k$i")" = "$(tr -dc 0-9 < "$tmp/$mode.len")" ] ||
			fail "$mode: k$i: read $(stat -c %s "$tmp/$mode.k$i") bytes, STRLEN $(cat "$tmp/$mode.len")"
	done
	# load: 50 clients, pipelined; a BGSAVE in the middle
	$mode redis-benchmark -p "$port" -t set,get -n 100000 -c 50 -P 16 -d 100 -r 1000 --csv \
		> "$tmp/$mode.bench" 2>&1 &
	bench=$!
	sleep 0.3
	$mode redis-cli -p "$port" bgsave > /dev/null || fail "$mode: BGSAVE"
	wait $bench || fail "$mode: redis-benchmark: $(cat "$tmp/$mode.bench")"
	wait_for 100 sh -c "redis-cli -p $port info persistence | grep -q 'rdb_bgsave_in_progress:0'" ||
		fail "$mode: BGSAVE did not finish"
	redis-cli -p "$port" info persistence | grep -q "rdb_last_bgsave_status:ok" ||
		fail "$mode: BGSAVE failed"
	grep -q '"GET"' "$tmp/$mode.bench" && grep -q '"SET"' "$tmp/$mode.bench" ||
		fail "$mode: no results: $(cat "$tmp/$mode.bench")"
	for k in $(seq 0 999); do echo "DEL key:$(printf %012d "$k")"; done |
		$mode redis-cli -p "$port" > /dev/null # the benchmark's keys: not compared
	$mode redis-cli -p "$port" del key:__rand_int__ > /dev/null
	$mode redis-cli -p "$port" debug digest > "$tmp/$mode.digest"
	grep -Eq '^[0-9a-f]{40}$' "$tmp/$mode.digest" || fail "$mode: DEBUG DIGEST: $(cat "$tmp/$mode.digest")"
	echo "$mode: $(grep -h '"GET"\|"SET"' "$tmp/$mode.bench" | cut -d, -f1-2 | tr '\n' ' ')"
	eval "port_$mode=$port"
}

run plain
run pre
cmp "$tmp/plain.digest" "$tmp/pre.digest" ||
	fail "data sets differ: plain $(cat "$tmp/plain.digest"), preloaded $(cat "$tmp/pre.digest")"
n=$(switched)
[ "$n" -ge 50 ] || fail "only $n connections switched to shared memory"
echo "digest $(cat "$tmp/pre.digest") plain and preloaded; $n connections switched"

# mixed peers: kernel sockets both ways
[ "$(redis-cli -p "$port_pre" get k1 | md5sum)" = "$(pre redis-cli -p "$port_plain" get k1 | md5sum)" ] ||
	fail "mixed peers: plain client and preloaded server, or the reverse, disagree"
[ "$(switched)" = "$n" ] || fail "a connection with a peer without the preload switched"
# idle: 50 idle preloaded connections cost the preloaded server < 2% CPU
pid=$(pgrep -f "redis-server 127.0.0.1:$port_pre" | head -1)
[ -n "$pid" ] || fail "no redis-server pid"
ZL_LOG=debug "$ZL_RUN" -- python3 -c "
import socket, time
s = [socket.create_connection(('127.0.0.1', $port_pre)) for _ in range(50)]
for c in s: c.sendall(b'PING\r\n'); c.recv(16)
time.sleep(5)" 2>>"$tmp/zl.log" &
idle=$!
sleep 1.5
pct=$(cpu_pct "$pid" 3)
wait $idle
wait_for 30 sh -c "[ \$(find $tmp -name '*.log' -exec cat {} + | grep -c 'switched to shared') -ge $((n + 50)) ]" ||
	fail "the 50 idle connections did not switch ($(switched) switched, $n before)"
echo "idle: redis-server with 50 idle preloaded connections used $pct% of a CPU over 3 s"
awk -v p="$pct" 'BEGIN { exit !(p < 2) }' || fail "idle preloaded redis-server used $pct% CPU"

echo "PASS: redis plain and preloaded give the same data; mixed peers stay on the kernel;
	idle costs $pct% CPU"
