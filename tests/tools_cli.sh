#!/bin/sh
# SPDX-License-Identifier: MIT
# tools_cli.sh BUILD_DIR: the command-line conventions of every tool
# (zl-run has its own, tests/preload/zlrun_cli.sh): --help on stdout with
# exit 0 and nothing on stderr, --version, a bad option refused with one
# line on stderr naming it and exit 2, a refused connection reported
# within a second or two (zl-ycsb waited its whole 10 s timeout), and
# every option listed in docs/cli.md (one name, one meaning).
b=$1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
for t in zl-bench zl-kvd zl-ycsb zl-proto zl-ss; do
	x=$b/tools/$t
	if [ ! -x "$x" ]; then
		echo "skip $t: not built"
		continue
	fi
	"$x" --help > "$tmp/out" 2> "$tmp/err"
	rc=$?
	[ $rc -eq 0 ] && grep -qi "usage" "$tmp/out" && [ ! -s "$tmp/err" ] ||
		fail "$t --help: exit $rc, stdout '$(head -1 "$tmp/out")', stderr '$(head -1 "$tmp/err")'"
	! grep -q '%%' "$tmp/out" || fail "$t --help shows a literal %%"
	v=$("$x" --version 2> "$tmp/err")
	rc=$?
	echo "$v" | grep -Eq "^$t \(zipline\) [0-9]+\.[0-9]+\.[0-9]+" && [ $rc -eq 0 ] ||
		fail "$t --version: exit $rc, '$v'"
	case $t in zl-bench) bad="pingpong --no-such-option" ;; *) bad="--no-such-option" ;; esac
	"$x" $bad > "$tmp/out" 2> "$tmp/err"
	rc=$?
	[ $rc -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q -- "--no-such-option" "$tmp/err" &&
		[ ! -s "$tmp/out" ] ||
		fail "$t $bad: exit $rc, stderr '$(cat "$tmp/err")', want exit 2 and one line naming it"
	echo "ok $t"
done
# a refused connection: a port nobody listens on (bound, never listening)
if [ -x "$b/tools/zl-ycsb" ]; then
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 1)
	for u in "redis://127.0.0.1:$port" "zl://tcp://127.0.0.1:$port"; do
		t0=$(date +%s%N)
		"$b/tools/zl-ycsb" --url "$u" --records 10 --ops 10 > "$tmp/out" 2> "$tmp/err"
		rc=$?
		ms=$((($(date +%s%N) - t0) / 1000000))
		[ $rc -ne 0 ] && grep -qi "refused" "$tmp/err" && [ $ms -lt 2500 ] ||
			fail "zl-ycsb --url $u: exit $rc after $ms ms, stderr '$(tail -1 "$tmp/err")'"
		echo "ok zl-ycsb refused in $ms ms ($u)"
	done
fi
# one name, one meaning: every long option a tool's --help names is in
# docs/cli.md's table, beside its namesakes in the other tools
cli=$(dirname "$0")/../docs/cli.md
for t in zl-bench zl-kvd zl-ycsb zl-proto zl-ss zl-run; do
	[ -x "$b/tools/$t" ] || continue
	for o in $("$b/tools/$t" --help 2>/dev/null | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u); do
		grep -qF -- "\`$o" "$cli" || fail "$t's $o is not in docs/cli.md"
	done
done
echo "ok every option of every tool is in docs/cli.md"
[ $fails -eq 0 ] || exit 1
