#!/bin/sh
# SPDX-License-Identifier: MIT
# Every function declared in the public headers (zipline.h, zipline_kv.h)
# must have docs/man/<name>.3, and groff must accept every page (sections
# 1, 3 and 7) without a warning.
# usage: check-man.sh [HEADER...] [MANDIR]
#   (default: include/zipline.h include/zipline_kv.h docs/man; an argument
#   that is a directory is the man page directory)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
mandir=$here/man
# keep the headers in "$@" (paths may hold spaces)
for a in "$@"; do
	shift
	if [ -d "$a" ]; then
		mandir=$a
	else
		set -- "$@" "$a"
	fi
done
if [ $# -eq 0 ]; then
	set -- "$here/../include/zipline.h" "$here/../include/zipline_kv.h"
fi

if ! command -v groff >/dev/null 2>&1; then
	echo "SKIP: groff not installed (apt-get install groff-base)"
	exit 77
fi

fail=0
n=0
names=
for header in "$@"; do
	# Declarations start in column 0: "int zl_send(", "const char *zl_strerror(".
	funcs=$(sed -n 's/^[a-z][a-z0-9_ ]*[ *]\(zl_[a-z_]*\)(.*/\1/p' "$header" | sort -u)
	if [ -z "$funcs" ]; then
		echo "no functions found in $header"
		exit 1
	fi
	names="$names $(basename "$header")"
	for f in $funcs; do
		n=$((n + 1))
		if [ ! -f "$mandir/$f.3" ]; then
			echo "missing man page: $mandir/$f.3"
			fail=1
		elif ! grep -qw "$f" "$mandir/$f.3"; then
			echo "$f.3 does not mention $f"
			fail=1
		fi
	done
done

for page in "$mandir"/*.[137]; do
	[ -f "$page" ] || continue
	# -ww: all warnings; -z: no output. Any message counts as a failure.
	out=$(cd "$mandir" && LC_ALL=C.UTF-8 groff -ww -z -man -t "$(basename "$page")" 2>&1) || true
	if [ -n "$out" ]; then
		echo "groff: $page:"
		echo "$out"
		fail=1
	fi
	# man(1) formats tables and line breaks for a terminal: more warnings.
	if command -v man >/dev/null 2>&1; then
		out=$(MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings -l "$page" 2>&1 >/dev/null) || true
		if [ -n "$out" ]; then
			echo "man: $page:"
			echo "$out"
			fail=1
		fi
	fi
	head -n 5 "$page" | grep -q '^\.TH ' || { echo "$page: no .TH header"; fail=1; }
done

if [ "$fail" -ne 0 ]; then
	exit 1
fi
echo "man pages OK: $n functions in$names, all pages accepted by groff"
