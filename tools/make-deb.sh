#!/usr/bin/env bash
# Builds uroce_<version>-1_<arch>.deb with Debian's own tools (dpkg-deb, and
# dpkg-shlibdeps for the library dependencies), installable with
#   apt install ./uroce_<version>-1_<arch>.deb
# on Debian 12. See docs/install.md for what goes where.
#
# usage: tools/make-deb.sh [--build-dir DIR] [--out DIR]
#   --build-dir DIR  package an existing build directory (configured with
#                    --prefix=/usr); default: build-deb/, configured here as a
#                    release build without tests
#   --out DIR        where the .deb goes (default: the current directory)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=""
out_dir=$PWD
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build_dir=$(realpath "$2"); shift 2 ;;
    --out) out_dir=$(realpath "$2"); shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "make-deb: unknown argument $1" >&2; exit 2 ;;
  esac
done

for tool in dpkg-deb dpkg-shlibdeps meson ninja; do
  if ! command -v "$tool" >/dev/null; then
    echo "make-deb: $tool is missing (tools/setup.sh installs dpkg-dev, meson and ninja-build)" >&2
    exit 1
  fi
done

if [ -z "$build_dir" ]; then
  build_dir="$root/build-deb"
  if [ ! -f "$build_dir/build.ninja" ]; then
    meson setup "$build_dir" "$root" --prefix=/usr --buildtype=release -Dtests=false \
      -Dbenchmarks=disabled -Dfuzz=disabled >/dev/null
  fi
  ninja -C "$build_dir"
fi

# The layout of the package is the one Debian's own packages use: /usr and /etc.
prefix=$(meson introspect --buildoptions "$build_dir" |
  python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
if [ "$prefix" != /usr ]; then
  echo "make-deb: $build_dir has prefix $prefix; a package needs --prefix=/usr" >&2
  exit 1
fi
version=$(meson introspect --projectinfo "$build_dir" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
arch=$(dpkg --print-architecture)
deb_version="$version-1"

work=$(mktemp -d "${TMPDIR:-/tmp}/uroce-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
staging="$work/root"
meson install -C "$build_dir" --destdir "$staging" --strip --no-rebuild --quiet

# Library dependencies: dpkg-shlibdeps reads the ELF files and the
# installed packages' shlibs/symbols files; it wants a debian/control.
mkdir -p "$work/src/debian"
printf 'Source: uroce\n\nPackage: uroce\nArchitecture: any\n' >"$work/src/debian/control"
mapfile -t elves < <(find "$staging" -type f \( -perm -u+x -o -name '*.so' \) -exec sh -c \
  'head -c4 "$1" | grep -q "ELF" && echo "$1"' _ {} \;)
shlibs=$(cd "$work/src" && dpkg-shlibdeps -O -e "${elves[@]}" 2>"$work/shlibdeps.log" |
  sed -n 's/^shlibs:Depends=//p') || { cat "$work/shlibdeps.log" >&2; exit 1; }

# The af_packet port (the testbed's, and uroced@IFACE's) is a DPDK driver
# the EAL loads at run time from its plugin directory: dpkg-shlibdeps cannot
# see it, so its package is named here.
extra=iproute2
if grep -q librte-eal <<<"$shlibs"; then
  pmd=$(dpkg -S '*/dpdk/pmds-*/librte_net_af_packet.so.*' 2>/dev/null | head -1 | cut -d: -f1)
  extra+=${pmd:+, $pmd}
fi

mkdir -p "$staging/DEBIAN"
installed_size=$(du -sk --exclude=DEBIAN "$staging" | cut -f1)
cat >"$staging/DEBIAN/control" <<CONTROL
Package: uroce
Version: $deb_version
Architecture: $arch
Maintainer: uroce developers <uroce@localhost>
Installed-Size: $installed_size
Depends: $shlibs, $extra
Recommends: ibverbs-utils
Section: net
Priority: optional
Description: userspace software RoCEv2 device
 uroce is an RDMA over Converged Ethernet (RoCE v2) device in user space:
 the uroced daemon runs the transport over a DPDK port (any NIC, af_packet
 on a kernel interface, or an embedded loopback port), and an rdma-core
 provider lets unmodified verbs programs use it. Includes the uroce tool
 (status, stats, decode, env/exec, and testbed: nodes in network
 namespaces for testing RDMA software) and a systemd unit template
 uroced@IFACE.service.
CONTROL
# Everything under /etc is configuration the administrator may change.
(cd "$staging" && find etc -type f 2>/dev/null | sed 's|^|/|' | sort) >"$staging/DEBIAN/conffiles"
[ -s "$staging/DEBIAN/conffiles" ] || rm "$staging/DEBIAN/conffiles"
# The preload library lands in the linker's directory: let ldconfig run.
echo "activate-noawait ldconfig" >"$staging/DEBIAN/triggers"
(cd "$staging" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) \
  >"$staging/DEBIAN/md5sums"

deb="$out_dir/uroce_${deb_version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$staging" "$deb" >/dev/null
echo "$deb"
