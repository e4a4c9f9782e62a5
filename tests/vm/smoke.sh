#!/bin/bash
# Smoke test, run INSIDE the rdma-vm.sh guest: the rxe devices exist, and a
# perftest RDMA WRITE latency run between rxe0 and rxe1 completes.
#   tests/vm/rdma-vm.sh -- tests/vm/smoke.sh
set -euo pipefail

dev_a=${ZL_RDMA_DEV_A:-rxe0}
dev_b=${ZL_RDMA_DEV_B:-rxe1}
ip_b=${ZL_RDMA_IP_B:-10.0.0.2}
gid=${ZL_RDMA_GID_INDEX:-1}
iters=${SMOKE_ITERS:-1000}

echo "== ibv_devices"
ibv_devices
for d in "$dev_a" "$dev_b"; do
	echo "== ibv_devinfo -d $d"
	ibv_devinfo -d "$d"
done

# -x: RoCE v2 IPv4-mapped GID; -F: TCG's CPU MHz differs from the TSC.
tx_packets() { cat "/sys/class/net/$1/statistics/tx_packets"; }
tx0=$(tx_packets veth0) tx1=$(tx_packets veth1)

echo "== ib_write_lat $dev_b (server) <- $dev_a (client), $iters iterations"
ib_write_lat -d "$dev_b" -x "$gid" -F -n "$iters" >/tmp/server.log 2>&1 &
server=$!
sleep 1 # the server must be listening before the client connects
crc=0 src=0
timeout 120 ib_write_lat -d "$dev_a" -x "$gid" -F -n "$iters" "$ip_b" || crc=$?
[ "$crc" = 0 ] || kill "$server" 2>/dev/null || true
wait "$server" || src=$?
if [ "$crc" != 0 ] || [ "$src" != 0 ]; then
	echo "== server output"
	cat /tmp/server.log
	echo "smoke: FAILED (ib_write_lat client exit $crc, server exit $src)"
	exit 1
fi
# RoCE traffic must really cross the veth pair (not short-circuit through lo).
d0=$(($(tx_packets veth0) - tx0)) d1=$(($(tx_packets veth1) - tx1))
echo "== veth0 sent $d0 packets, veth1 sent $d1"
if [ "$d0" -lt "$iters" ] || [ "$d1" -lt "$iters" ]; then
	echo "smoke: FAILED (RDMA traffic did not cross the veth pair)"
	exit 1
fi
echo "smoke: OK"
