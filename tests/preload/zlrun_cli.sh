#!/bin/sh
# SPDX-License-Identifier: MIT
# zlrun_cli.sh BUILD_DIR: zl-run's command line: --help on stdout with
# exit 0, --version, every bad option or value refused with one line on
# stderr naming it and exit 2, a missing program with exit 127, one line
# by default for the first connection that stays a kernel socket (none for
# one that switched), and an installed tree that still runs after it is
# moved elsewhere.
b=$1
run=$b/tools/zl-run
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

"$run" --help > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q "^usage: zl-run" "$tmp/out" && [ ! -s "$tmp/err" ] ||
	fail "--help: exit $rc, stdout $(head -1 "$tmp/out"), stderr $(head -1 "$tmp/err")"
v=$("$run" --version)
rc=$?
[ $rc -eq 0 ] && echo "$v" | grep -Eq '^zl-run \(zipline\) [0-9]+\.[0-9]+\.[0-9]+$' ||
	fail "--version: exit $rc, '$v'"

# refused: OPTION... and the word the one-line error must hold
refused() {
	want=$1
	shift
	"$run" "$@" -- true > "$tmp/out" 2> "$tmp/err"
	rc=$?
	[ $rc -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q -- "$want" "$tmp/err" &&
		[ ! -s "$tmp/out" ] || fail "zl-run $*: exit $rc, stderr '$(cat "$tmp/err")', want exit 2, one line with '$want'"
}
refused "not a power of two" --ring 5000
refused "not in 4096" --ring 1024
refused "not in 4096" --ring 134217728
refused "not a number" --ring 64k
refused "not a number" --spin-us abc
refused "not in 0" --spin-us 99999999
refused "not error, warn" --log loud
refused "--xhost needs a value" --xhost ""
refused "cannot read" --lib /nonexistent/lib.so
"$run" --ring > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q -- "--ring needs a value" "$tmp/err" && [ "$(wc -l < "$tmp/err")" -eq 1 ] ||
	fail "--ring without a value: exit $rc, '$(cat "$tmp/err")'"
"$run" --bogus -- true > /dev/null 2> "$tmp/err"
[ $? -eq 2 ] && grep -q -- "unknown option --bogus" "$tmp/err" || fail "--bogus: '$(head -1 "$tmp/err")'"
"$run" -- /nonexistent/program > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 127 ] && grep -q "/nonexistent/program: command not found" "$tmp/err" ||
	fail "a missing program: exit $rc, '$(cat "$tmp/err")'"
# accepted: the values at both ends of the ranges
out=$("$run" --ring 4096 --spin-us 0 --log error -- sh -c 'echo $ZL_PRELOAD_RING $ZL_PRELOAD_SPIN_US $ZL_LOG')
[ "$out" = "4096 0 error" ] || fail "accepted values: '$out'"
out=$("$run" --ring 67108864 --spin-us 1000000 -- sh -c 'echo $ZL_PRELOAD_RING $ZL_PRELOAD_SPIN_US')
[ "$out" = "67108864 1000000" ] || fail "accepted values: '$out'"

# by default: one line for the first connection that stays a kernel socket
# (three to a listener that is not preloaded), nothing for one that switched
if command -v python3 > /dev/null 2>&1; then
	python3 - "$tmp/port" > /dev/null 2>&1 <<'PY' &
import socket, sys
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(8)
open(sys.argv[1] + ".tmp", "w").write(str(l.getsockname()[1]))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
l.settimeout(10)
for _ in range(3):
    l.accept()[0].close()
PY
	srv=$!
	for i in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.05; done
	"$run" --lib "$b/src/preload/libzipline-preload.so" -- python3 -c '
import socket, sys
for _ in range(3):
    socket.create_connection(("127.0.0.1", int(sys.argv[1]))).close()' "$(cat "$tmp/port")" 2> "$tmp/err"
	wait $srv
	[ "$(grep -c 'stays a kernel socket: no preloaded listener there' "$tmp/err")" = 1 ] &&
		[ "$(wc -l < "$tmp/err")" = 1 ] || fail "three fallbacks said '$(cat "$tmp/err")', want one line"
	"$run" --lib "$b/src/preload/libzipline-preload.so" -- python3 -c '
import socket
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
c = socket.create_connection(l.getsockname()); a = l.accept()[0]
c.sendall(b"x"); assert a.recv(1) == b"x"' 2> "$tmp/err" || fail "a switched connection failed"
	[ ! -s "$tmp/err" ] || fail "a switched connection said '$(cat "$tmp/err")', want nothing"
else
	echo "(no python3: the fallback line is not tried)"
fi

# installed, then moved: the preload found next to the script
if cmake --install "$b" --prefix "$tmp/a" > "$tmp/install.log" 2>&1; then
	mv "$tmp/a" "$tmp/moved"
	out=$("$tmp/moved/bin/zl-run" -- sh -c 'echo "$LD_PRELOAD"')
	rc=$?
	case "$out" in
	"$tmp/moved/bin/"*libzipline-preload.so) [ $rc -eq 0 ] && [ -r "$out" ] || fail "moved: exit $rc, '$out'" ;;
	*) fail "moved: the preload is '$out', not the moved tree's (exit $rc)" ;;
	esac
else
	fail "cmake --install: $(tail -2 "$tmp/install.log")"
fi

[ $fails -eq 0 ] || exit 1
echo "PASS: zl-run's options validated, --help and --version, a missing program, one line for a fallback, a moved install"
