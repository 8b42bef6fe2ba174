#!/usr/bin/env bash
# Installs every Debian 12 package uroce's build, tests and demo need.
# Idempotent: installs only what is missing, and does nothing when all is there.
set -euo pipefail

packages=(
  # build
  build-essential meson ninja-build pkg-config python3
  # core libraries
  libisal-dev        # ICRC: ISA-L's folding CRC-32
  libfmt-dev         # text formatting
  libpcap-dev        # uroce decode / capture
  libcli11-dev       # command-line options
  nlohmann-json3-dev # uroce --json output
  # DPDK port and rdma-core provider (detected by meson; used from issues 4-5)
  libdpdk-dev libibverbs-dev ibverbs-utils perftest iproute2
  # tests
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev  # libFuzzer and the sanitizer runtimes
  tshark                    # the decoder is checked field by field against it
  sockperf                  # the kernel UDP round trip, the floor of tools/bench/roce_bench.py
  # rdma_cm through the emulated ucma device (docs/rdmacm-device.md)
  rdmacm-utils librdmacm-dev linux-libc-dev  # rping, ucmatose, rstream...; rdma/rdma_user_cm.h
  ucx-utils libucx0 openmpi-bin libopenmpi-dev  # UCX and Open MPI over uroce (dataflow suite)
  iperf3                    # the host's TCP over the same veth, a floor of tools/bench/roce_bench.py
  valgrind                  # tools/bench/instructions.py counts the daemon's instructions per message
  libfabric-bin librpma-dev qperf fio  # more programs that connect through librdmacm (dataflow suite)
  tcpdump                   # what uroce sends is visible on the interface (dataflow_veth_capture)
  # the interop suite: the kernel's rdma_rxe in a QEMU guest (docs/interop.md)
  qemu-system-x86 busybox-static
  dpkg-dev           # tools/make-deb.sh: dpkg-shlibdeps (dpkg-deb is in dpkg)
)

missing=()
for p in "${packages[@]}"; do
  if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages are installed"
  "$(dirname "$0")/fetch-guest-kernel.sh"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing packages: ${missing[*]}" >&2
  echo "setup: installing needs root; run: sudo $0" >&2
  echo "setup: or install them yourself: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive  # tshark asks about non-root capture otherwise
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
"$(dirname "$0")/fetch-guest-kernel.sh"
