#!/bin/sh
# SPDX-License-Identifier: MIT
# Install zipline into a scratch DESTDIR, then build and run a consumer twice:
# with pkg-config and with CMake's find_package(zipline).
# usage: run.sh BUILD_DIR CONSUMER_SRC_DIR PREFIX FULL_LIBDIR CMAKE CC
set -eu

build=$1 src=$2 prefix=$3 libdir=$4 cmake=$5 cc=$6

skip() { echo "SKIP: $*"; exit 77; }
command -v pkg-config >/dev/null 2>&1 || skip "pkg-config not installed"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/zl-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
dest=$tmp/dest

echo "== install $build into DESTDIR=$dest (prefix $prefix)"
DESTDIR=$dest "$cmake" --install "$build" >"$tmp/install.log" 2>&1 || {
	cat "$tmp/install.log"
	exit 1
}
for f in "$prefix/include/zipline.h" "$libdir/pkgconfig/zipline.pc" \
	"$libdir/cmake/zipline/ziplineConfig.cmake" \
	"$libdir/cmake/zipline/ziplineConfigVersion.cmake" \
	"$libdir/cmake/zipline/ziplineTargets.cmake"; do
	[ -f "$dest$f" ] || { echo "missing after install: $f"; exit 1; }
done
ls "$dest$libdir"/libzipline.so* >/dev/null || { echo "missing: $libdir/libzipline.so"; exit 1; }

echo "== pkg-config"
# Only the scratch tree: a zipline installed on the host must not be found.
PKG_CONFIG_PATH=$dest$libdir/pkgconfig
PKG_CONFIG_LIBDIR=$dest$libdir/pkgconfig
export PKG_CONFIG_PATH PKG_CONFIG_LIBDIR
# (no PKG_CONFIG_SYSROOT_DIR: zipline.pc finds its prefix from where it is)
echo "pkg-config --modversion zipline: $(pkg-config --modversion zipline)"
flags=$(pkg-config --cflags --libs zipline)
echo "pkg-config --cflags --libs zipline: $flags"
echo "pkg-config --static --libs zipline: $(pkg-config --static --libs zipline)"
# shellcheck disable=SC2086 # flags are words
"$cc" -o "$tmp/consumer-pc" "$src/consumer.c" $flags
LD_LIBRARY_PATH=$dest$libdir "$tmp/consumer-pc"
unset PKG_CONFIG_PATH PKG_CONFIG_LIBDIR

echo "== cmake find_package(zipline)"
"$cmake" -S "$src" -B "$tmp/cmake-build" -DCMAKE_C_COMPILER="$cc" \
	-DCMAKE_PREFIX_PATH="$dest$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
	>"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; exit 1; }
grep -E 'zipline_(DIR|VERSION)' "$tmp/cmake.log"
grep -q "zipline_DIR: $dest" "$tmp/cmake.log" ||
	{ echo "find_package found a zipline outside $dest"; exit 1; }
"$cmake" --build "$tmp/cmake-build" >"$tmp/build.log" 2>&1 ||
	{ cat "$tmp/build.log"; exit 1; }
# The build tree's RPATH points at the scratch library; be explicit anyway.
LD_LIBRARY_PATH=$dest$libdir "$tmp/cmake-build/consumer"

echo "== the installed tree, moved elsewhere"
# Everything installed is relocatable: the programs' RPATH is relative to
# them, zl-run finds the preload beside itself, zipline.pc its prefix.
moved=$tmp/moved
mv "$dest$prefix" "$moved"
mlib=$moved${libdir#"$prefix"}
case "$libdir" in "$prefix"/*) ;; *) skip "libdir $libdir is outside the prefix $prefix" ;; esac
env -u LD_LIBRARY_PATH "$moved/bin/zl-bench" --version ||
	{ echo "the moved zl-bench does not run (RPATH?)"; exit 1; }
out=$(env -u LD_LIBRARY_PATH ZL_LOG=info "$moved/bin/zl-run" -- sh -c 'echo "$LD_PRELOAD"')
echo "zl-run from the moved tree preloads: $out"
[ -f "$out" ] && case "$out" in "$moved"/*) ;; *) false ;; esac ||
	{ echo "the moved zl-run does not preload the moved library"; exit 1; }
PKG_CONFIG_PATH=$mlib/pkgconfig PKG_CONFIG_LIBDIR=$mlib/pkgconfig
export PKG_CONFIG_PATH PKG_CONFIG_LIBDIR
flags=$(pkg-config --cflags --libs zipline)
echo "pkg-config from the moved tree: $flags"
# shellcheck disable=SC2086 # flags are words
"$cc" -o "$tmp/consumer-moved" "$src/consumer.c" $flags
LD_LIBRARY_PATH=$mlib "$tmp/consumer-moved"

echo "== install_consumer: OK"
