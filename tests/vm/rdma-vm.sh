#!/bin/bash
# rdma-vm.sh - run a command inside a qemu VM with a real kernel RDMA stack
# (Debian 12's stock kernel, Soft-RoCE rdma_rxe: rxe0 on veth0, rxe1 on veth1;
# ZL_VM_RXE=N: rxe0..rxeN-1, each on its own veth).
#
#   tests/vm/rdma-vm.sh [--mem MiB] [--timeout SEC] [--share DIR] -- CMD [ARGS...]
#
# Exit code: CMD's exit code; 124 on timeout; 125 if the VM itself failed;
# 77 (skipped) if the host cannot get what it needs (no root, no network).
# See README.md beside this file.
set -uo pipefail

readonly EXIT_SKIP=77 EXIT_TIMEOUT=124 EXIT_VMFAIL=125
SELF_DIR=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
readonly SELF_DIR GUEST_INIT="$SELF_DIR/guest-init.sh"

# Bump when the initramfs layout changes, so cached images are rebuilt.
readonly LAYOUT_VERSION=3

# Guest modules, loaded in this order (dependencies come along via modprobe).
# virtio/9p first, so that the guest can report later failures to the host.
# crc32 before rdma_rxe: rxe needs it for its ICRC, and modinfo does not show
# that dependency ("rdma link add" then fails with ENOENT).
# Names this kernel lacks entirely are dropped (several are built in).
readonly GUEST_MODULES=(
	virtio virtio_ring virtio_pci netfs fscache 9pnet 9pnet_virtio 9p
	crc32-pclmul crc32_generic udp_tunnel ip6_udp_tunnel
	ib_core ib_uverbs rdma_rxe configfs ib_cm iw_cm rdma_cm rdma_ucm ib_umad
	veth
	# ZL_VM_RXE > 2: the veths meet in a bridge
	bridge
	# packet loss on the veth (tc netem) for zl-proto's ACK timeout runs
	sch_netem
)

# Host packages providing everything that goes into the guest.
readonly HOST_PACKAGES=(
	qemu-system-x86 busybox-static bash iproute2 kmod cpio xz-utils
	rdma-core ibverbs-providers ibverbs-utils libibverbs-dev
	librdmacm1 rdmacm-utils perftest
)

# Binaries copied into the initramfs (with every library ldd lists).
readonly GUEST_BINARIES=(
	bash ip rdma tc kmod modprobe insmod lsmod modinfo
	ibv_devices ibv_devinfo ibv_rc_pingpong ibv_ud_pingpong ibv_srq_pingpong
	ib_write_lat ib_send_lat ib_read_lat ib_atomic_lat
	ib_write_bw ib_send_bw ib_read_bw ib_atomic_bw
	rping ucmatose udaddy rdma_server rdma_client
	setpriv
)

mem=1024
timeout_s=600
share=
cache=${ZL_VM_CACHE:-${HOME:-/root}/.cache/zipline-vm}
verbose=${ZL_VM_VERBOSE:-0}

say() { printf 'rdma-vm: %s\n' "$*" >&2; }
die() { say "error: $*"; exit "$EXIT_VMFAIL"; }
skip() { say "SKIP: $*"; exit "$EXIT_SKIP"; }

usage() {
	cat >&2 <<'EOF'
usage: rdma-vm.sh [--mem MiB] [--timeout SEC] [--share DIR] -- CMD [ARGS...]
  --mem MiB      guest memory (default 1024)
  --timeout SEC  kill the VM after SEC seconds, exit 124 (default 600)
  --share DIR    host directory shared at the same path (default: cwd)
env: ZL_VM_ENV="A=1 B=2" extra guest env, ZL_VM_CACHE, ZL_VM_VERBOSE=1,
     ZL_VM_EXTRA="host files or directories to add, !PATH leaves one out",
     ZL_VM_MTU (1500), ZL_VM_RXE (rxe devices, 2 to 16; default 2),
     ZL_VM_KERNEL_PKG (e.g. linux-image-6.1.0-28-amd64)
EOF
	exit 2
}

while [ $# -gt 0 ]; do
	case $1 in
	--mem) mem=${2:?}; shift 2 ;;
	--timeout) timeout_s=${2:?}; shift 2 ;;
	--share) share=${2:?}; shift 2 ;;
	--) shift; break ;;
	-h | --help) usage ;;
	-*) say "unknown option: $1"; usage ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || usage
[[ $mem =~ ^[0-9]+$ && $timeout_s =~ ^[0-9]+$ ]] || usage
rxe=${ZL_VM_RXE:-2}
if ! [[ $rxe =~ ^[0-9]+$ ]] || [ "$rxe" -lt 2 ] || [ "$rxe" -gt 16 ]; then
	say "ZL_VM_RXE=$rxe: want 2 to 16 devices"
	usage
fi

cwd=$(pwd -P)
share=$(readlink -f "${share:-$cwd}") || die "bad --share directory"
[ -d "$share" ] || die "--share $share is not a directory"
# The share is mounted over the guest's own tree: system directories would hide it.
case $share in
/ | /usr | /usr/* | /bin | /bin/* | /sbin | /sbin/* | /lib | /lib/* | /lib64 | /lib64/* | \
	/etc | /etc/* | /proc | /proc/* | /sys | /sys/* | /dev | /dev/* | /run | /run/*)
	die "cannot share $share: it would hide the guest's own files" ;;
esac
case $cwd/ in
"$share"/*) ;;
*) say "warning: cwd $cwd is outside the share $share; the guest gets an empty dir there" ;;
esac

# --- host packages ------------------------------------------------------------

apt_get() {
	# Another apt may be running on a shared machine: wait for its lock.
	DEBIAN_FRONTEND=noninteractive apt-get -q -y -o DPkg::Lock::Timeout=600 \
		-o APT::Sandbox::User=root "$@" >&2
}

apt_updated=0
apt_update() {
	[ "$apt_updated" = 1 ] && return 0
	apt_updated=1
	say "apt-get update"
	apt_get update
}

ensure_host_packages() {
	local p missing=() installed
	installed=" $(dpkg-query -W -f='${db:Status-Abbrev}${Package} ' "${HOST_PACKAGES[@]}" 2>/dev/null) "
	for p in "${HOST_PACKAGES[@]}"; do
		[[ $installed == *" ii $p "* ]] || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	command -v apt-get >/dev/null || skip "missing ${missing[*]} and no apt-get"
	[ "$(id -u)" = 0 ] || skip "missing host packages (${missing[*]}); run as root to install them"
	say "installing host packages: ${missing[*]}"
	# Lists may be absent (fresh machine) or stale (404s): update and retry.
	if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
		apt_update || skip "apt-get update failed (no network?)"
	fi
	if ! apt_get install --no-install-recommends "${missing[@]}"; then
		apt_update || skip "apt-get update failed (no network?)"
		apt_get install --no-install-recommends "${missing[@]}" ||
			skip "cannot install ${missing[*]} (no network?)"
	fi
}

# --- guest kernel -----------------------------------------------------------

kernel_pkg_from_apt() {
	apt-cache depends linux-image-amd64 2>/dev/null |
		awk '/Depends: linux-image-[0-9]/ { print $2; exit }'
}

# Sets kroot (unpacked package), kver and vmlinuz. A kernel already in the
# cache is used as it is (no apt look-up: fast, offline, and the same kernel
# from run to run); remove the cache dir to move to Debian's current one.
fetch_kernel() {
	local pkg=${ZL_VM_KERNEL_PKG:-} deb
	if [ -z "$pkg" ]; then
		pkg=$(find "$cache/kernel" -mindepth 2 -maxdepth 2 -name .complete \
			-printf '%h\n' 2>/dev/null | sort -V | tail -n1)
		pkg=${pkg##*/}
	fi
	if [ -z "$pkg" ]; then
		pkg=$(kernel_pkg_from_apt)
		if [ -z "$pkg" ] && [ "$(id -u)" = 0 ]; then
			apt_update || skip "apt-get update failed (no network?)"
			pkg=$(kernel_pkg_from_apt)
		fi
		[ -n "$pkg" ] || skip "cannot resolve linux-image-amd64 to a kernel package"
	fi
	kroot=$cache/kernel/$pkg
	if [ ! -e "$kroot/.complete" ]; then
		say "fetching $pkg (once; cached in $cache)"
		rm -rf "$kroot" "$kroot.tmp" "$cache/dl"
		mkdir -p "$cache/dl" "$cache/kernel" || die "cannot create $cache"
		if ! (cd "$cache/dl" && apt_get download "$pkg"); then
			apt_update || skip "apt-get update failed (no network?)"
			(cd "$cache/dl" && apt_get download "$pkg") || skip "cannot download $pkg"
		fi
		deb=$(compgen -G "$cache/dl/${pkg}_*.deb" | head -n1)
		[ -n "$deb" ] || die "apt-get download produced no .deb"
		dpkg -x "$deb" "$kroot.tmp" || die "dpkg -x $deb failed"
		mv "$kroot.tmp" "$kroot" && rm -rf "$cache/dl"
		kver=$(basename "$(compgen -G "$kroot/lib/modules/*" | head -n1)")
		# The .deb ships no modules.dep (postinst makes it): make one here.
		depmod -b "$kroot" "$kver" || die "depmod failed"
		touch "$kroot/.complete"
	fi
	kver=$(basename "$(compgen -G "$kroot/lib/modules/*" | head -n1)")
	vmlinuz=$kroot/boot/vmlinuz-$kver
	[ -r "$vmlinuz" ] || die "no kernel image at $vmlinuz"
	extract_vmlinux
}

# Debian's bzImage is xz-compressed, and its decompressor takes ~4 s under
# TCG. qemu boots the uncompressed ELF directly (PVH entry, CONFIG_PVH=y), so
# unpack it once on the host; keep the bzImage as the fallback.
extract_vmlinux() {
	local elf=$kroot/vmlinux off
	if [ ! -s "$elf" ]; then
		off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$vmlinuz" | head -n1 | cut -d: -f1)
		# (not a pipe: xz stops at the stream's end, and pipefail would see SIGPIPE)
		[ -n "$off" ] && xz -dc --single-stream >"$elf.tmp" 2>/dev/null \
			< <(tail -c "+$((off + 1))" "$vmlinuz") &&
			is_elf "$elf.tmp" && mv "$elf.tmp" "$elf"
		rm -f "$elf.tmp"
	fi
	[ -s "$elf" ] && vmlinuz=$elf
}

# --- initramfs --------------------------------------------------------------

is_elf() { [ -f "$1" ] && [ "$(head -c4 "$1" 2>/dev/null | tr -d '\0')" = $'\x7fELF' ]; }

# Host files for the initramfs: collected in files[] (deduplicated later).
files=()
add_with_deps() {
	files+=("$1")
	add_deps "$1"
}
add_deps() {
	local f=$1 lib
	is_elf "$f" || return 0
	# ldd prints "name => /path (addr)" or "/path (addr)"; keep the paths.
	while read -r lib; do
		files+=("$lib")
	done < <(ldd "$f" 2>/dev/null | grep -o '/[^ ]*' | grep -v '^/.*:$')
}

collect_base_files() {
	local b p lib
	for b in "${GUEST_BINARIES[@]}"; do
		p=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin command -v "$b") || die "host lacks $b"
		add_with_deps "$p"
	done
	# Providers and runtimes that programs dlopen (ldd cannot see them), and
	# what host-built tests link: libc, libibverbs, libm, sanitizer runtimes.
	for lib in /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so \
		/usr/lib/x86_64-linux-gnu/libgcc_s.so.1 \
		/usr/lib/x86_64-linux-gnu/libibverbs.so.1 \
		/usr/lib/x86_64-linux-gnu/librdmacm.so.1 \
		/usr/lib/x86_64-linux-gnu/libm.so.6 \
		/usr/lib/x86_64-linux-gnu/libpthread.so.0 \
		/usr/lib/x86_64-linux-gnu/lib{a,ub}san.so.[0-9]; do
		[ -e "$lib" ] && add_with_deps "$lib"
	done
	files+=(/etc/libibverbs.d/rxe.driver)
}

# The command and any ELF arguments (e.g. `valgrind ./t`) and ZL_VM_EXTRA:
# their libraries; files outside the share are copied themselves too.
# ZL_VM_EXTRA may also name directories (their whole trees, in trees[]) and
# !PATH entries, left out of those trees (in skips[]).
trees=() skips=()
collect_cmd_files() {
	local arg
	for arg in "$@"; do collect_cmd_file "$arg"; done
	for arg in ${ZL_VM_EXTRA:-}; do
		case $arg in
		!*) skips+=("${arg#!}") ;;
		*)
			if [ -d "$arg" ]; then
				trees+=("$(readlink -f "$arg")")
			else
				collect_cmd_file "$arg"
			fi ;;
		esac
	done
}
collect_cmd_file() {
	local p f
	case $1 in
	*/*) p=$1 ;;
	*) p=$(type -P -- "$1" 2>/dev/null) || return 0 ;;
	esac
	f=$(readlink -f "$p" 2>/dev/null) || return 0
	[ -f "$f" ] || return 0
	# Those in the share are visible in the guest already. Others go in by
	# the name given: stage_file adds a symlink's target too, and a link's
	# name can matter (redis-server -> redis-check-rdb picks by argv[0]).
	[[ $f == "$share"/* ]] || files+=("$p")
	add_deps "$f"
}

# The libraries of the ELF files in a tree (the magic read by bash: a tree
# can hold thousands of files, and two forks each cost seconds).
collect_tree_deps() {
	local f magic s prune=() LC_ALL=C
	for s in "${skips[@]}"; do prune+=(-path "$s" -prune -o); done
	while IFS= read -r -d '' f; do
		read -r -N 4 magic <"$f" 2>/dev/null || continue
		[ "$magic" = $'\x7fELF' ] && add_deps "$f"
	done < <(find "$1" "${prune[@]}" -type f -print0)
}

# Copy the trees (less the skipped paths) into the staging tree, in one tar.
stage_trees() {
	local s ex=()
	[ ${#trees[@]} -gt 0 ] || return 0
	for s in "${skips[@]}"; do ex+=("--exclude=${s#/}"); done
	tar -C / -cf - "${ex[@]}" "${trees[@]#/}" | tar -C "$stage" -xf - ||
		die "cannot copy ${trees[*]}"
}

# Copy one host path into the staging tree, following symlink chains so that
# both the link names and their targets exist in the guest. Paths listed in
# in_base[] (the cached image's contents) are skipped.
declare -A in_base=()
stage_file() {
	local src=$1 dir base tgt
	dir=$(readlink -f "$(dirname "$src")") || return 0
	base=$(basename "$src")
	src=$dir/$base
	[ -n "${in_base[$src]:-}" ] && return 0
	{ [ -e "$stage$src" ] || [ -L "$stage$src" ]; } && return 0
	mkdir -p "$stage$dir"
	if [ -L "$src" ]; then
		cp -P "$src" "$stage$src"
		tgt=$(readlink "$src")
		[[ $tgt = /* ]] || tgt=$dir/$tgt
		stage_file "$tgt"
	elif [ -f "$src" ]; then
		cp -p "$src" "$stage$src"
	fi
}

# Module files (kernel-tree paths) for GUEST_MODULES, dependencies included.
# Sets mods[] and mod_names[] (the names this kernel has, built in or not).
resolve_guest_modules() {
	local m deps
	mods=() mod_names=()
	for m in "${GUEST_MODULES[@]}"; do
		deps=$(modprobe -d "$kroot" -S "$kver" --show-depends "$m" 2>/dev/null) || continue
		mod_names+=("$m")
		mapfile -t -O "${#mods[@]}" mods < <(awk '$1 == "insmod" { print $2 }' <<<"$deps")
	done
	mapfile -t mods < <(printf '%s\n' "${mods[@]}" | sort -u)
}

make_cpio() { # DIR OUT
	(cd "$1" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) >"$2"
}

# The base image (cached; rebuilt when any input changes) holds everything
# but what this particular command needs: sets base_img.
build_base_initramfs() {
	local key_file=$cache/initramfs-$kver.key img=$cache/initramfs-$kver.cpio key
	local -a mods mod_names
	local f m a mdir=/usr/lib/modules/$kver
	files=()
	collect_base_files
	mapfile -t files < <(printf '%s\n' "${files[@]}" | sort -u)
	resolve_guest_modules
	# Cache key: versions, scripts, and every input file's size and mtime.
	key=$({
		echo "layout $LAYOUT_VERSION kver $kver"
		printf '%s\n' "${mod_names[@]}"
		cat "$GUEST_INIT"
		stat -L -c '%n %s %Y' "${files[@]}" "${mods[@]}" /usr/bin/busybox
	} | sha256sum | cut -d' ' -f1)
	base_img=$img
	if [ -f "$img" ] && [ -f "$img.files" ] && [ "$(cat "$key_file" 2>/dev/null)" = "$key" ]; then
		return 0
	fi
	say "building initramfs"
	stage=$(mktemp -d "$cache/stage.XXXXXX") || die "mktemp failed"
	# Same merged-/usr layout as the host, so ldd's paths resolve unchanged.
	mkdir -p "$stage"/{usr/bin,usr/sbin,usr/lib,usr/lib64,proc,sys,dev,tmp,run,root,etc,mnt}
	ln -s usr/bin "$stage/bin"; ln -s usr/sbin "$stage/sbin"
	ln -s usr/lib "$stage/lib"; ln -s usr/lib64 "$stage/lib64"
	for f in "${files[@]}"; do stage_file "$f"; done
	# busybox fills in every command the real binaries above do not provide.
	cp /usr/bin/busybox "$stage/usr/bin/busybox"
	for a in $(/usr/bin/busybox --list); do
		[ -e "$stage/usr/bin/$a" ] || [ -e "$stage/usr/sbin/$a" ] || [ -L "$stage/usr/bin/$a" ] ||
			[ -L "$stage/usr/sbin/$a" ] || ln -s busybox "$stage/usr/bin/$a"
	done
	# Guest kernel modules, with a matching modules.dep for modprobe.
	mkdir -p "$stage$mdir"
	cp "$kroot/lib/modules/$kver"/modules.{order,builtin,builtin.modinfo} "$stage$mdir/"
	for m in "${mods[@]}"; do
		mkdir -p "$stage$mdir/$(dirname "${m#"$kroot/lib/modules/$kver/"}")"
		cp "$m" "$stage$mdir/${m#"$kroot/lib/modules/$kver/"}"
	done
	depmod -b "$stage" "$kver" || die "depmod for the initramfs failed"
	printf '%s\n' "${mod_names[@]}" >"$stage/etc/zl-vm-modules"
	# nobody: for servers that refuse to run as root (postgres), via setpriv
	printf 'root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' \
		>"$stage/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$stage/etc/group"
	printf '127.0.0.1 localhost\n10.0.0.1 rxe-a\n10.0.0.2 rxe-b\n' >"$stage/etc/hosts"
	install -m 0755 "$GUEST_INIT" "$stage/init"
	make_cpio "$stage" "$img.tmp" || die "cpio failed"
	# (busybox applets are left out: a real binary may replace them per run)
	(cd "$stage" && find . ! -type d ! -lname busybox | cut -c2-) >"$img.files"
	mv "$img.tmp" "$img"
	echo "$key" >"$key_file"
	rm -rf "$stage"
	stage=
}

# The trees (ZL_VM_EXTRA directories) with their libraries, as an archive
# cached apart from the base image (ldd on their ELF files takes ~10 s):
# sets trees_img. Keyed by the trees' files and the base image (what is
# in it stays out); kept while their libraries (listed in $trees_img.deps)
# are unchanged too.
trees_img=
build_trees_archive() {
	local f key saved=("${files[@]}")
	[ ${#trees[@]} -gt 0 ] || return 0
	key=$({
		cat "$cache/initramfs-$kver.key"
		printf '%s\n' "${skips[@]}"
		find "${trees[@]}" -printf '%p %s %T@\n'
	} | sha256sum | cut -c1-16)
	trees_img=$cache/trees-$key.cpio
	if [ -f "$trees_img" ] && [ -f "$trees_img.deps" ] &&
		[ "$(xargs -r stat -L -c '%n %s %Y' <"$trees_img.deps" 2>&1)" = "$(cat "$trees_img.stat")" ]; then
		return 0
	fi
	say "building the archive of ${trees[*]}"
	files=()
	for f in "${trees[@]}"; do collect_tree_deps "$f"; done
	mapfile -t files < <(printf '%s\n' "${files[@]}" | sort -u)
	stage=$(mktemp -d "$cache/stage.XXXXXX") || die "mktemp failed"
	stage_trees
	for f in "${files[@]}"; do stage_file "$f"; done
	rm -f "$cache"/trees-*.cpio*
	make_cpio "$stage" "$trees_img.tmp" || die "cpio failed"
	printf '%s\n' "${files[@]}" >"$trees_img.deps"
	xargs -r stat -L -c '%n %s %Y' <"$trees_img.deps" >"$trees_img.stat" 2>&1
	mv "$trees_img.tmp" "$trees_img"
	rm -rf "$stage"
	stage=
	files=("${saved[@]}")
}

# Sets initrd: the base image, plus (concatenated: the kernel unpacks each
# archive in turn) the trees' archive and one with what the command needs
# beyond them.
build_initramfs() {
	local f p parts
	build_base_initramfs
	files=()
	collect_cmd_files "$@"
	while read -r p; do in_base[$p]=1; done <"$base_img.files"
	build_trees_archive
	parts=("$base_img")
	[ -n "$trees_img" ] && parts+=("$trees_img")
	if [ ${#files[@]} -gt 0 ]; then
		stage=$tmp/extra
		mkdir -p "$stage"
		for f in "${files[@]}"; do stage_file "$f"; done
		stage=
		if [ -n "$(find "$tmp/extra" ! -type d -print -quit)" ]; then
			make_cpio "$tmp/extra" "$tmp/extra.cpio" || die "cpio failed"
			parts+=("$tmp/extra.cpio")
		fi
	fi
	initrd=$base_img
	[ ${#parts[@]} -gt 1 ] || return 0
	cat "${parts[@]}" >"$tmp/initrd.cpio" || die "cannot write $tmp"
	initrd=$tmp/initrd.cpio
}

# --- run --------------------------------------------------------------------

tmp='' qpid='' tpid='' lpid='' stage=''
# shellcheck disable=SC2317 # called through trap
cleanup() {
	local p
	for p in $qpid $tpid $lpid; do kill "$p" 2>/dev/null; done
	for p in $qpid $tpid $lpid; do wait "$p" 2>/dev/null; done
	[ -n "$stage" ] && rm -rf "$stage"
	[ -n "$tmp" ] && rm -rf "$tmp"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 129' HUP
trap 'say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM

t0=$EPOCHREALTIME
ensure_host_packages
mkdir -p "$cache" || die "cannot create cache dir $cache"
# One builder at a time per cache; the VM itself runs unlocked.
exec 9>"$cache/lock"
flock 9
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rdma-vm.XXXXXX") || die "mktemp failed"
mkdir "$tmp/ctl"
fetch_kernel
build_initramfs "$@"
flock -u 9
exec 9>&-

out=$tmp/out log=$tmp/console.log
: >"$out"; : >"$log" # tail -f needs them to exist before qemu opens them

# ZL_VM_ENV="A=1 B=2": whitespace-separated, no quoting.
read -r -a user_env <<<"${ZL_VM_ENV:-}"
for a in "${user_env[@]}"; do
	[[ $a == [A-Za-z_]*=* ]] || die "ZL_VM_ENV: '$a' is not NAME=VALUE"
done
# The guest sources this (bash); %q keeps arbitrary arguments intact.
{
	printf 'ZL_VM_CWD=%q\n' "$cwd"
	printf 'ZL_VM_SHARE=%q\n' "$share"
	printf 'ZL_VM_MTU=%q\n' "${ZL_VM_MTU:-1500}"
	printf 'ZL_VM_RXE=%q\n' "$rxe"
	printf 'ZL_VM_CMD=('; for a in "$@"; do printf ' %q' "$a"; done; printf ' )\n'
	printf 'ZL_VM_USER_ENV=('; for a in "${user_env[@]}"; do printf ' %q' "$a"; done; printf ' )\n'
} >"$tmp/ctl/cmd"

t1=$EPOCHREALTIME
timeout --foreground -k 5 "$timeout_s" qemu-system-x86_64 \
	-accel tcg,thread=multi -cpu max -smp 2 -m "$mem" \
	-nodefaults -no-user-config -nographic -no-reboot -monitor none \
	-kernel "$vmlinuz" -initrd "$initrd" \
	-append "console=ttyS0 panic=-1 mitigations=off rdinit=/init" \
	-serial "file:$log" -serial "file:$out" \
	-fsdev "local,id=ctl,path=$tmp/ctl,security_model=none" \
	-device virtio-9p-pci,fsdev=ctl,mount_tag=zlctl \
	-fsdev "local,id=share,path=$share,security_model=none,multidevs=remap" \
	-device virtio-9p-pci,fsdev=share,mount_tag=zlshare \
	</dev/null >"$tmp/qemu.err" 2>&1 &
qpid=$!
# Stream the guest's ttyS1 (CMD's output) to our stdout as it comes.
tail -n +1 -s 0.2 -f --pid="$qpid" "$out" &
tpid=$!
if [ "$verbose" = 1 ]; then
	tail -n +1 -s 0.2 -f --pid="$qpid" "$log" >&2 2>/dev/null &
	lpid=$!
fi
wait "$qpid"
qrc=$?
qpid=
wait "$tpid"
tpid=
[ -n "$lpid" ] && wait "$lpid"
lpid=

# Keep the last console log where the user can find it after tmp is gone.
cp "$log" "$cache/console.log" 2>/dev/null
log=$cache/console.log
t2=$EPOCHREALTIME
timing=$(awk -v a="$t0" -v b="$t1" -v c="$t2" \
	'BEGIN { printf "host prep %.1fs, VM %.1fs", b - a, c - b }')

if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
	say "TIMEOUT: VM killed after ${timeout_s}s; kernel log: $log"
	exit "$EXIT_TIMEOUT"
fi
if [ -s "$tmp/ctl/setup-failed" ]; then
	say "guest setup failed: $(cat "$tmp/ctl/setup-failed")"
	say "kernel log: $log"
	tail -n 30 "$log" >&2
	exit "$EXIT_VMFAIL"
fi
if [ ! -s "$tmp/ctl/rc" ]; then
	say "VM ended without reporting CMD's exit status (qemu exit $qrc); kernel log: $log"
	cat "$tmp/qemu.err" >&2
	tail -n 30 "$log" >&2
	exit "$EXIT_VMFAIL"
fi
rc=$(cat "$tmp/ctl/rc")
[ "$verbose" = 1 ] && say "CMD exit $rc; $timing"
exit "$rc"
