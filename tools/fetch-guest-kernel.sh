#!/usr/bin/env bash
# Downloads, without installing it, Debian 12's kernel package for the interop
# suite's guest (tests/interop, docs/interop.md) into /var/cache/uroce-interop.
# Idempotent; never fails setup: without the package the suite skips itself.
set -uo pipefail

cache=/var/cache/uroce-interop
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: the interop guest's kernel is fetched as root (sudo $0); the interop suite skips without it"
  exit 0
fi

kernel_package() {  # the linux-image-6.1.*-amd64 package linux-image-amd64 points at
  apt-cache depends linux-image-amd64 2>/dev/null \
    | sed -n 's/^ *Depends: \(linux-image-6\.1\.[0-9a-z.-]*-amd64\)$/\1/p' | head -1
}

pkg=$(kernel_package)
if [ -z "$pkg" ]; then
  apt-get update -q >/dev/null
  pkg=$(kernel_package)
fi
if [ -z "$pkg" ]; then
  echo "setup: apt knows no linux-image-6.1 package; the interop suite will skip"
  exit 0
fi
if ls "$cache/${pkg}"_*.deb >/dev/null 2>&1; then
  exit 0
fi
mkdir -p "$cache"
echo "setup: downloading $pkg for the interop guest into $cache"
if ! (cd "$cache" && apt-get download -q "$pkg" 2>&1 | grep -v "couldn't be accessed by user '_apt'"); then
  echo "setup: downloading $pkg failed; the interop suite will skip"
fi
exit 0
