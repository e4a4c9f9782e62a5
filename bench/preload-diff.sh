#!/bin/sh
# SPDX-License-Identifier: MIT
# The differential tester at length: SEEDS runs (default 20) of OPS calls
# (default 2000) per family, every call in the mix (make check leaves the
# known differences out and runs a few seeds). Each run stops at its first
# difference; the table counts the runs that passed and, for the others,
# the call that differed first. Edge-triggered epoll is held to epoll(7)'s
# promise (diff_test.c says how); --strict-et holds it to the kernel's
# every edge instead.
#
#   bench/preload-diff.sh [BUILD_DIR] [SEEDS] [OPS] [--without CALL,...] [--strict-et]
#
# Writes preload-diff.csv (family,seed,result,call) in the current
# directory. Exits 0 (differences are reported, not failures).
here=$(cd "$(dirname "$0")" && pwd)
b=${1:-$here/../build}
seeds=${2:-20}
ops=${3:-2000}
without="" strict=""
if [ $# -ge 3 ]; then shift 3; else shift $#; fi
while [ $# -gt 0 ]; do
	case $1 in
	--without) without=$2; shift 2 ;;
	--strict-et) strict=--strict-et; shift ;;
	*) echo "usage: bench/preload-diff.sh [BUILD_DIR] [SEEDS] [OPS] [--without CALL,...] [--strict-et]" >&2; exit 2 ;;
	esac
done
case "$seeds$ops" in "" | *[!0-9]*)
	echo "usage: bench/preload-diff.sh [BUILD_DIR] [SEEDS] [OPS] [--without CALL,...] [--strict-et]" >&2; exit 2 ;;
esac
t=$b/tests/preload/diff_test
lib=$b/src/preload/libzipline-preload.so
[ -x "$t" ] && [ -f "$lib" ] || { echo "preload-diff: $t or $lib missing (make build)" >&2; exit 2; }
csv=preload-diff.csv
echo "family,seed,result,call" > "$csv"
for fam in tcp4 unix; do
	s=1
	while [ "$s" -le "$seeds" ]; do
		if [ -n "$without" ]; then
			out=$(ZL_PRELOAD_LIB=$lib "$t" $strict --without "$without" "$fam" "$s" "$ops" 2>&1)
		else
			out=$(ZL_PRELOAD_LIB=$lib "$t" $strict "$fam" "$s" "$ops" 2>&1)
		fi
		rc=$?
		case $rc in
		0) echo "$fam,$s,same," >> "$csv" ;;
		1) call=$(printf '%s\n' "$out" | sed -n 's/^DIFF .*end [ab]: \(.*\) len .*/\1/p' | head -1)
		   [ -n "$call" ] || call="(failed: $(printf '%s\n' "$out" | grep '^FAIL' | head -1))"
		   echo "$fam,$s,differs,$call" >> "$csv" ;;
		*) echo "$fam,$s,error $rc,$(printf '%s\n' "$out" | tail -1)" >> "$csv" ;;
		esac
		s=$((s + 1))
	done
done
echo "$seeds runs of $ops calls per family${without:+, without $without}${strict:+, edges one for one}:"
for fam in tcp4 unix; do
	same=$(grep -c "^$fam,[0-9]*,same," "$csv")
	echo "  $fam: $same of $seeds the same as the kernel; first differences:"
	grep "^$fam,[0-9]*,differs," "$csv" | cut -d, -f4- | sort | uniq -c | sort -rn | sed 's/^/    /'
	grep "^$fam,[0-9]*,error" "$csv" | sed 's/^/    /'
done
echo "(per run: $csv)"
