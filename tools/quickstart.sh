#!/usr/bin/env bash
# First command of the README: installs what is missing, builds uroce, and
# runs the main job on the embedded default: a uroced on the loopback port,
# and unmodified rdma-core programs moving data through it (ibv_devices,
# ibv_rc_pingpong, ib_write_bw, each server and client on the one device,
# meeting over 127.0.0.1 as they would between two hosts); then it stops the
# daemon and runs the wire layer's own demo on the bundled rdma_rxe captures.
# Exits non-zero when any step failed (after running the others).
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

uroce=build/tools/uroce/uroce
state=$(mktemp -d /tmp/uroce-quickstart.XXXXXX)
build/tools/uroced/uroced --port loopback --ip 192.0.2.1 --state-dir "$state" 2>"$state/uroced.log" &
daemon=$!
stop_daemon() {
  if kill "$daemon" 2>/dev/null; then
    wait "$daemon" 2>/dev/null || true
  fi
}
cleanup() {
  stop_daemon
  rm -rf "$state"
}
trap cleanup EXIT

status=0
# The GID table of uroce0 (docs/daemon.md): 0 and 1 are the link-local GID
# as RoCE v1 and v2, 2 is the first --ip (192.0.2.1) as RoCE v2.
gid_index=2
tcp_port=18515  # where ibv_rc_pingpong and perftest exchange their addresses

# run_pair NAME PROGRAM ARGS...: the program as server, then as client of
# 127.0.0.1, both through `uroce exec` on the loopback device and bounded by
# 120 s, line-buffered so each output keeps its order; prints the client's
# output (and all of the server's when something failed).
run_pair() {
  local name=$1 server rc_server=0 rc_client=0
  shift
  timeout 120 stdbuf -oL -eL "$uroce" exec --state-dir "$state" -- "$@" -p "$tcp_port" >"$state/$name.server" 2>&1 &
  server=$!
  for _ in $(seq 200); do  # up to 20 s for the server to listen
    if ss -Hltn "sport = :$tcp_port" | grep -q .; then break; fi
    sleep 0.1
  done
  timeout 120 stdbuf -oL -eL "$uroce" exec --state-dir "$state" -- "$@" -p "$tcp_port" 127.0.0.1 \
    >"$state/$name.client" 2>&1 || rc_client=$?
  if [ "$rc_client" -ne 0 ]; then
    kill "$server" 2>/dev/null || true  # it would wait for the client forever
  fi
  wait "$server" || rc_server=$?
  sed 's/^/  client | /' "$state/$name.client"
  if [ "$rc_client" -ne 0 ] || [ "$rc_server" -ne 0 ]; then
    sed 's/^/  server | /' "$state/$name.server"
    echo "!! $name failed (client exit $rc_client, server exit $rc_server); the daemon's last lines:"
    tail -n 5 "$state/uroced.log" | sed 's/^/  uroced | /'
    status=1
  fi
}

echo
echo "== uroced on the loopback port (192.0.2.1)"
"$uroce" status --state-dir "$state" --wait 20
echo
echo "== ibv_devices, unmodified, through uroce exec"
"$uroce" exec --state-dir "$state" -- ibv_devices
echo
echo "== ibv_rc_pingpong: 1000 round trips of 4 KiB over RC, the receiver checking the data (-c)"
run_pair ibv_rc_pingpong ibv_rc_pingpong -d uroce0 -g "$gid_index" -s 4096 -n 1000 -c
echo
echo "== ib_write_bw: RDMA WRITE bandwidth, 64 KiB messages"
run_pair ib_write_bw ib_write_bw -d uroce0 -x "$gid_index" -s 65536 -n 5000 -F
echo
echo "== stopping uroced"
stop_daemon
tail -n 2 "$state/uroced.log"

echo
echo "== uroce decode: RoCEv2 packets captured from the Linux kernel's rdma_rxe"
for capture in tests/data/rxe/*.pcap; do
  echo
  echo "-- $capture (first 3 frames and the totals)"
  out=$(build/tools/uroce/uroce decode "$capture") || status=1
  echo "$out" | head -n 3
  echo "   ..."
  echo "$out" | tail -n 1
done
exit $status
