#!/usr/bin/env bash
# First command of the README: installs what is missing, builds uroce, and
# runs the main job on the embedded default: a uroced on the loopback port
# with unmodified rdma-core programs using it (device listing and attributes
# today; the data path, and with it ibv_rc_pingpong and ib_write_bw, comes
# next), then the wire layer's own demo on the bundled rdma_rxe captures.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

"$root/tools/setup.sh"
if [ -f build/build.ninja ]; then
  meson setup --reconfigure build >/dev/null
else
  meson setup build >/dev/null
fi
ninja -C build

state=$(mktemp -d /tmp/uroce-quickstart.XXXXXX)
build/tools/uroced/uroced --port loopback --ip 192.0.2.1 --state-dir "$state" 2>"$state/uroced.log" &
daemon=$!
cleanup() {
  kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  rm -rf "$state"
}
trap cleanup EXIT

echo
echo "== uroced on the loopback port (192.0.2.1)"
build/tools/uroce/uroce status --state-dir "$state" --wait 20
echo
echo "== ibv_devices and ibv_devinfo -v, unmodified, through uroce exec"
build/tools/uroce/uroce exec --state-dir "$state" -- ibv_devices
build/tools/uroce/uroce exec --state-dir "$state" -- ibv_devinfo -v | \
  grep -E "hca_id|transport|node_guid|fw_ver|max_mr|state:|active_mtu|link_layer|GID\["

echo
echo "== uroce decode: RoCEv2 packets captured from the Linux kernel's rdma_rxe"
status=0
for capture in tests/data/rxe/*.pcap; do
  echo
  echo "-- $capture (first 3 frames and the totals)"
  out=$(build/tools/uroce/uroce decode "$capture") || status=1
  echo "$out" | head -n 3
  echo "   ..."
  echo "$out" | tail -n 1
done
exit $status
