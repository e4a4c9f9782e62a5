#!/bin/sh
# SPDX-License-Identifier: MIT
# Build zipline's Debian package (CPack), unpack it into an empty directory
# and use it from there: the tools run, zl-run preloads the unpacked
# library, a program builds with the unpacked zipline.pc and runs.
# usage: deb.sh BUILD_DIR CONSUMER_SRC_DIR CC
set -eu
build=$1 src=$2 cc=$3
skip() { echo "SKIP: $*"; exit 77; }
for t in cpack dpkg-deb pkg-config; do
	command -v $t >/dev/null 2>&1 || skip "$t not installed"
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zl-deb.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

echo "== cpack -G DEB"
(cd "$build" && cpack -G DEB -B "$tmp/out") >"$tmp/cpack.log" 2>&1 ||
	{ cat "$tmp/cpack.log"; exit 1; }
deb=$(ls "$tmp"/out/zipline_*.deb)
dpkg-deb -I "$deb" | sed -n '/Package:/,$p'
dpkg-deb -f "$deb" Package | grep -qx zipline || { echo "Package is not zipline"; exit 1; }
dpkg-deb -f "$deb" Depends | grep -q libc6 || { echo "no Depends on libc6 (shlibdeps)"; exit 1; }
dpkg-deb -c "$deb" >"$tmp/list"
for f in ./usr/include/zipline.h ./usr/bin/zl-run ./usr/bin/zl-bench \
	./usr/lib/libzipline-preload.so ./usr/lib/pkgconfig/zipline.pc \
	./usr/lib/cmake/zipline/ziplineConfig.cmake ./usr/share/man/man3/zl_send.3; do
	grep -q " $f\$" "$tmp/list" || { echo "the package lacks $f"; exit 1; }
done

echo "== unpacked into an empty directory"
root=$tmp/root
dpkg-deb -x "$deb" "$root"
env -u LD_LIBRARY_PATH "$root/usr/bin/zl-bench" --version
out=$(env -u LD_LIBRARY_PATH "$root/usr/bin/zl-run" -- sh -c 'echo "$LD_PRELOAD"')
case "$out" in "$root"/*) [ -f "$out" ] ;; *) false ;; esac ||
	{ echo "zl-run preloads $out, not the unpacked library"; exit 1; }
PKG_CONFIG_PATH=$root/usr/lib/pkgconfig PKG_CONFIG_LIBDIR=$root/usr/lib/pkgconfig
export PKG_CONFIG_PATH PKG_CONFIG_LIBDIR
# shellcheck disable=SC2046 # flags are words
"$cc" -o "$tmp/consumer" "$src/consumer.c" $(pkg-config --cflags --libs zipline)
LD_LIBRARY_PATH=$root/usr/lib "$tmp/consumer"
echo "== package_deb: OK ($(basename "$deb"), $(wc -l <"$tmp/list") entries)"
