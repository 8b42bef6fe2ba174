#!/usr/bin/env bash
# First command of the README: installs what is missing, builds uroce, and
# runs the main job on the embedded default. Until the daemon exists that is
# the wire layer's own demo: decode the bundled rdma_rxe captures and verify
# every ICRC.
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

echo
echo "== uroce decode: RoCEv2 packets captured from the Linux kernel's rdma_rxe"
status=0
for capture in tests/data/rxe/*.pcap; do
  echo
  echo "-- $capture (first 4 frames and the totals)"
  out=$(build/tools/uroce/uroce decode "$capture") || status=1
  echo "$out" | head -n 4
  echo "   ..."
  echo "$out" | tail -n 1
done
exit $status
