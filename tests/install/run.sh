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
PKG_CONFIG_SYSROOT_DIR=$dest
export PKG_CONFIG_PATH PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR
echo "pkg-config --modversion zipline: $(pkg-config --modversion zipline)"
flags=$(pkg-config --cflags --libs zipline)
echo "pkg-config --cflags --libs zipline: $flags"
echo "pkg-config --static --libs zipline: $(pkg-config --static --libs zipline)"
# shellcheck disable=SC2086 # flags are words
"$cc" -o "$tmp/consumer-pc" "$src/consumer.c" $flags
LD_LIBRARY_PATH=$dest$libdir "$tmp/consumer-pc"
unset PKG_CONFIG_PATH PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR

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

echo "== install_consumer: OK"
