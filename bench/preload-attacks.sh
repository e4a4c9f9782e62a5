#!/bin/sh
# SPDX-License-Identifier: MIT
# The preload's attack suite at full length: ATTEMPTS (default 1000) of each
# attack (replayed and forged offers, a squatted rendezvous, a party's lies
# in the shared memory) per family and uid mode; make check runs 60.
#
#   bench/preload-attacks.sh [BUILD_DIR] [ATTEMPTS]
#
# Modes other and root need root (they skip otherwise). Prints each run's
# lines (ok/FAIL per attack, the server's fds, a summary) and exits 1 if
# any run failed.
here=$(cd "$(dirname "$0")" && pwd)
b=${1:-$here/../build}
n=${2:-1000}
case "$n" in "" | *[!0-9]*) echo "usage: bench/preload-attacks.sh [BUILD_DIR] [ATTEMPTS]" >&2; exit 2 ;; esac
t=$b/tests/preload/attack_test
[ -x "$t" ] || { echo "preload-attacks: $t missing (make build)" >&2; exit 2; }
rc=0
for c in "tcp4 same" "unix same" "tcp4 other" "tcp4 root"; do
	set -- $c
	echo "== $1, attacker $2, $n attempts per attack"
	sh "$here/../tests/preload/attack_run.sh" "$t" "$b/tools/zl-run" "$1" "$n" "$2"
	r=$?
	[ $r -eq 0 ] || [ $r -eq 77 ] || rc=1
done
exit $rc
