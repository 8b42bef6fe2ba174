#!/usr/bin/env python3
"""Builds the interop suite's guest: Debian 12's own kernel (with the
rdma_rxe module) and an initramfs holding busybox, the host's stock RDMA
programs and what they load, and an init that runs jobs from a 9p share.

usage: build_guest.py CACHE_DIR [--deb KERNEL_DEB]

The kernel comes from a linux-image-6.1 .deb unpacked with `dpkg -x` (never
installed on the host): KERNEL_DEB, else the newest one tools/setup.sh left in
/var/cache/uroce-interop. The result (CACHE_DIR/vmlinuz, CACHE_DIR/initramfs.cpio)
is rebuilt only when the .deb, this script or the init changes.

Exit 0 with the two paths on stdout; exit 77 with the reason when a piece is
missing (no .deb, no busybox-static, a program not installed).
"""

import argparse
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
DEB_CACHE = "/var/cache/uroce-interop"
BUSYBOX = "/bin/busybox"
MULTIARCH = "/usr/lib/x86_64-linux-gnu"

# Modules the guest loads (their dependencies from modules.dep come first):
# the NIC and the job share, rxe with user verbs and rdma_cm, and what tc
# needs to drop packets on both directions of the guest's wire.
MODULES = [
    "virtio_pci", "virtio_net", "9pnet_virtio", "9p",
    # rxe computes its ICRC with the kernel's "crc32" hash, a module of its
    # own that nothing declares a dependency on.
    "crc32_generic", "rdma_rxe", "ib_uverbs", "rdma_ucm",
    "sch_netem", "sch_prio", "sch_ingress", "act_mirred", "ifb", "cls_u32", "cls_matchall", "act_gact",
]

# The stock programs the suite runs on the rxe side (Debian packages
# ibverbs-utils, perftest, rdmacm-utils, iproute2).
PROGRAMS = [
    "ibv_devinfo", "ibv_rc_pingpong", "ibv_uc_pingpong", "ibv_ud_pingpong", "ibv_srq_pingpong",
    "ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_atomic_bw", "ib_write_lat", "ib_read_lat", "ib_send_lat",
    "rping", "ucmatose", "udaddy", "ip", "tc", "rdma",
]

# Loaded with dlopen, so ldd does not list them: the rxe provider and its
# driver file, and libgcc_s (glibc's pthread_exit loads it; rping aborts
# without it).
EXTRA_FILES = [
    MULTIARCH + "/libibverbs/librxe-rdmav34.so",
    "/etc/libibverbs.d/rxe.driver",
    MULTIARCH + "/libgcc_s.so.1",
]


class Missing(Exception):
    """Something the guest needs is not on this machine."""


def newest_kernel_deb():
    debs = sorted(glob.glob(os.path.join(DEB_CACHE, "linux-image-6.1.*-amd64_*.deb")))
    if not debs:
        raise Missing(f"no linux-image-6.1 .deb in {DEB_CACHE} (tools/setup.sh downloads it)")
    return debs[-1]


def fingerprint(deb):
    h = hashlib.sha256()
    h.update(os.path.basename(deb).encode())
    h.update(str(os.path.getsize(deb)).encode())
    for name in ("build_guest.py", "init.sh"):
        with open(os.path.join(HERE, name), "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def module_load_order(modroot, release, names=tuple(MODULES)):
    """The .ko paths (relative to lib/modules/RELEASE) of `names` and their
    dependency closure, each after everything it depends on."""
    moddir = os.path.join(modroot, "lib/modules", release)
    # The package ships no modules.dep (depmod runs at install); busybox's
    # depmod writes one without installing kmod on the host.
    subprocess.run([BUSYBOX, "depmod", "-b", modroot, release], check=True, capture_output=True)
    deps = {}
    with open(os.path.join(moddir, "modules.dep")) as f:
        for line in f:
            path, _, rest = line.partition(":")
            deps[path] = rest.split()
    by_name = {re.sub(r"\.ko$", "", os.path.basename(p)).replace("-", "_"): p for p in deps}
    order, seen = [], set()

    def visit(path):
        if path in seen:
            return
        seen.add(path)
        for d in deps[path]:
            visit(d)
        order.append(path)

    for name in names:
        if name not in by_name:
            raise Missing(f"module {name} not in the kernel package")
        visit(by_name[name])
    return moddir, order


def shared_library_closure(binaries):
    """Every shared object the binaries need, as ldd resolves them here."""
    libs = set()
    for b in binaries:
        r = subprocess.run(["ldd", b], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            m = re.search(r"(/\S+) \(0x", line)
            if m:
                libs.add(m.group(1))
            if "not found" in line:
                raise Missing(f"{b}: {line.strip()}")
    return libs


def copy_into(root, path):
    """Copies `path` to the same place under `root`, following symlinks; /lib
    paths land under /usr/lib (the guest has Debian's merged /usr)."""
    dest_rel = re.sub(r"^/lib(64)?/", r"/usr/lib\1/", path)
    dest = os.path.join(root, dest_rel.lstrip("/"))
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    shutil.copy2(os.path.realpath(path), dest)


def build(cache, deb, extra_modules=(), customize=None):
    """Builds the guest into `cache`; a variant of it (tools/bench/guest_vs_rxe.py)
    loads `extra_modules` too and calls customize(root) to add its own files
    before the archive is made."""
    for tool in (BUSYBOX, "/usr/bin/dpkg"):
        if not os.path.exists(tool):
            raise Missing(f"{tool} not installed (tools/setup.sh installs busybox-static)")
    binaries = []
    for p in PROGRAMS:
        path = shutil.which(p, path="/usr/sbin:/usr/bin:/sbin:/bin")
        if path is None:
            raise Missing(f"{p} not installed (tools/setup.sh installs it)")
        binaries.append(path)
    for f in EXTRA_FILES:
        if not os.path.exists(f):
            raise Missing(f"{f} not installed")

    with tempfile.TemporaryDirectory(prefix="interop-guest-", dir=cache) as work:
        kroot = os.path.join(work, "kernel")
        subprocess.run(["dpkg", "-x", deb, kroot], check=True)
        vmlinuz = glob.glob(os.path.join(kroot, "boot/vmlinuz-*"))[0]
        release = os.path.basename(vmlinuz)[len("vmlinuz-"):]
        moddir, order = module_load_order(kroot, release, tuple(MODULES) + tuple(extra_modules))

        root = os.path.join(work, "root")
        for d in ("bin", "sbin", "usr/bin", "usr/lib64", "proc", "sys", "dev", "jobs", "tmp", "etc", "run",
                  "lib/modules"):
            os.makedirs(os.path.join(root, d), exist_ok=True)
        os.rmdir(os.path.join(root, "lib/modules"))
        os.rmdir(os.path.join(root, "lib"))
        os.symlink("usr/lib", os.path.join(root, "lib"))
        os.symlink("usr/lib64", os.path.join(root, "lib64"))
        shutil.copy2(BUSYBOX, os.path.join(root, "bin/busybox"))
        for b in binaries:
            shutil.copy2(b, os.path.join(root, "usr/bin", os.path.basename(b)))
        for lib in shared_library_closure(binaries + [EXTRA_FILES[0]]) | set(EXTRA_FILES):
            copy_into(root, lib)
        guest_mods = os.path.join(root, "usr/lib/modules")
        for rel in order:
            dest = os.path.join(guest_mods, rel)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copy2(os.path.join(moddir, rel), dest)
        with open(os.path.join(root, "modules.order"), "w") as f:
            f.write("".join(f"/lib/modules/{rel}\n" for rel in order))
        shutil.copy2(os.path.join(HERE, "init.sh"), os.path.join(root, "init"))
        os.chmod(os.path.join(root, "init"), 0o755)
        if customize is not None:
            customize(root)

        # An uncompressed newc archive: under TCG the guest would spend
        # seconds inflating a compressed one.
        files = subprocess.run(["find", "."], cwd=root, capture_output=True, text=True, check=True).stdout
        cpio_tmp = os.path.join(cache, "initramfs.cpio.tmp")
        with open(cpio_tmp, "wb") as out:
            subprocess.run([BUSYBOX, "cpio", "-o", "-H", "newc"], cwd=root, input=files.encode(), stdout=out,
                           stderr=subprocess.DEVNULL, check=True)
        os.replace(cpio_tmp, os.path.join(cache, "initramfs.cpio"))
        shutil.copy2(vmlinuz, os.path.join(cache, "vmlinuz"))
    return release


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cache")
    ap.add_argument("--deb")
    args = ap.parse_args()
    os.makedirs(args.cache, exist_ok=True)
    try:
        deb = args.deb or newest_kernel_deb()
        stamp = os.path.join(args.cache, "stamp")
        want = fingerprint(deb)
        have = open(stamp).read() if os.path.exists(stamp) else ""
        if have != want:
            release = build(args.cache, deb)
            with open(stamp, "w") as f:
                f.write(want)
            print(f"guest: built from {os.path.basename(deb)} (kernel {release})", file=sys.stderr)
    except Missing as e:
        print(f"SKIP: {e}")
        return SKIP
    print(os.path.join(args.cache, "vmlinuz"))
    print(os.path.join(args.cache, "initramfs.cpio"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
