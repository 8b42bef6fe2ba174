#!/usr/bin/env python3
"""What `meson install` and tools/make-deb.sh put where (docs/install.md).

usage: test_install.py --part {layout,deb} BUILD_ROOT SOURCE_ROOT

layout: `meson install --destdir` of this build into a scratch directory;
  every file docs/install.md lists is there (uroced, uroce, the provider in
  libibverbs' provider directory, its .driver file naming it, the preload
  library, the systemd unit template reading /etc/uroce/IFACE.conf). Then,
  as root, in a private mount namespace where the scratch copy is bound
  over the real provider directory and a tmpfs over /run (the host
  sees nothing): the installed uroced on the loopback port with no
  --state-dir, and the installed `uroce status`, `uroce env` and `uroce exec
  -- ibv_devices` finding it and the provider with no flag at all.
deb: tools/make-deb.sh packages this build (prefix /usr needed); the
  package's control fields and file list; `apt-get install --simulate`
  finds its dependencies; `dpkg --root` installs it into a scratch root
  (the host's package database untouched), the files are where the docs
  say, and `dpkg --purge` removes every one.
Exit 77 (skipped) with the reason when the part cannot run here.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SKIP = 77
BUILD = SOURCE = None


def build_option(name):
    opts = json.loads(subprocess.run(["meson", "introspect", "--buildoptions", BUILD], capture_output=True,
                                     text=True, check=True, timeout=60).stdout)
    return next(o["value"] for o in opts if o["name"] == name)


def layout():
    """{what: installed absolute path} as docs/install.md states it."""
    prefix = build_option("prefix")
    libdir = os.path.join(prefix, build_option("libdir"))
    sysconfdir = os.path.join(prefix, build_option("sysconfdir"))
    bindir = os.path.join(prefix, build_option("bindir"))
    return {
        "uroced": os.path.join(bindir, "uroced"),
        "uroce": os.path.join(bindir, "uroce"),
        "provider": os.path.join(libdir, "libibverbs", "liburoce-rdmav34.so"),
        "driver": os.path.join(sysconfdir, "libibverbs.d", "uroce.driver"),
        "preload": os.path.join(libdir, "liburoce-preload.so"),
        "unit": os.path.join(prefix, "lib", "systemd", "system", "uroced@.service"),
        "conf_example": os.path.join(prefix, "share", "doc", "uroce", "examples", "uroced.conf.example"),
        "header": os.path.join(prefix, "include", "infiniband", "uroce_dv.h"),
        "_bindir": bindir, "_sysconfdir": sysconfdir,
    }


def rooted(root, path):
    return os.path.join(root, path.lstrip("/"))


def check_files(test, root, where):
    for what, path in where.items():
        if what.startswith("_"):
            continue
        test.assertTrue(os.path.isfile(rooted(root, path)), f"{what}: {path} not installed")
    for what in ("uroced", "uroce"):
        test.assertTrue(os.access(rooted(root, where[what]), os.X_OK), f"{what} not executable")
    with open(rooted(root, where["driver"])) as f:
        driver = f.read().strip()
    # libibverbs appends -rdmav34.so to the path of a "driver" line
    test.assertEqual(driver, "driver " + where["provider"].removesuffix("-rdmav34.so"))
    with open(rooted(root, where["unit"])) as f:
        unit = f.read()
    test.assertIn(f"EnvironmentFile={where['_sysconfdir']}/uroce/%i.conf", unit)
    test.assertIn(f"ExecStart={where['_bindir']}/uroced --port net_af_packet0,iface=%i $UROCED_OPTIONS", unit)


FIND_WITHOUT_FLAGS = r"""
set -eu
root=$1 providerdir=$2 bindir=$3 prefix=$4
if [ "$prefix" = /usr ]; then
  mount --bind "$root$providerdir" "$providerdir"   # /usr itself holds the system's libraries
else
  mount --bind "$root$prefix" "$prefix"
fi
mount -t tmpfs none /run   # the default state directory /run/uroce, private to this namespace
"$root$bindir/uroced" --port loopback --ip 192.0.2.1 >/run/uroced.log 2>&1 &
daemon=$!
trap 'kill $daemon; wait $daemon || true; cat /run/uroced.log >&2' EXIT
"$root$bindir/uroce" status --wait 30 >/dev/null
echo "--- env"
"$root$bindir/uroce" env
echo "--- exec"
"$root$bindir/uroce" exec -- ibv_devices
"""


class LayoutTests(unittest.TestCase):
    def test_meson_install_layout_and_found_without_flags(self):
        where = layout()
        with tempfile.TemporaryDirectory(prefix="uroce-install-") as root:
            r = subprocess.run(["meson", "install", "-C", BUILD, "--destdir", root, "--no-rebuild", "--quiet"],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            check_files(self, root, where)
            provider_dir = os.path.dirname(where["provider"])
            if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ibv_devices") is None:
                self.skipTest("finding the installed daemon without flags needs root, unshare and ibv_devices")
            if build_option("b_sanitize") != "none":
                self.skipTest("sanitizer build: ibv_devices would need the sanitizer runtime preloaded")
            prefix = build_option("prefix")
            over = provider_dir if prefix == "/usr" else prefix
            if not os.path.isdir(over):
                self.skipTest(f"{over} does not exist on this host to bind the scratch copy over")
            r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", FIND_WITHOUT_FLAGS,
                                "sh", root, provider_dir, where["_bindir"], prefix],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            env = r.stdout.split("--- exec")[0]
            self.assertIn(f"export RDMAV_DRIVERS='{provider_dir}/liburoce'", env)
            self.assertIn("export SYSFS_PATH='/run/uroce/sys'", env)
            self.assertRegex(r.stdout.split("--- exec")[1], r"(?m)^\s*uroce0\s+[0-9a-f]{16}\s*$")


class DebTests(unittest.TestCase):
    def test_package(self):
        where = layout()
        with tempfile.TemporaryDirectory(prefix="uroce-deb-") as tmp:
            r = subprocess.run([os.path.join(SOURCE, "tools", "make-deb.sh"), "--build-dir", BUILD, "--out", tmp],
                               capture_output=True, text=True, timeout=600)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            deb = r.stdout.strip().splitlines()[-1]
            self.assertRegex(os.path.basename(deb), r"^uroce_[\d.]+-1_[a-z0-9]+\.deb$")
            fields = {f: subprocess.run(["dpkg-deb", "--field", deb, f], capture_output=True, text=True,
                                        check=True).stdout.strip() for f in ("Package", "Depends")}
            self.assertEqual(fields["Package"], "uroce")
            for dep in ("libibverbs1", "libc6", "iproute2"):
                self.assertIn(dep, fields["Depends"])
            if "librte-eal" in fields["Depends"]:  # the af_packet driver, loaded at run time
                self.assertIn("librte-net-af-packet", fields["Depends"])
            conffiles = subprocess.run(["dpkg-deb", "--ctrl-tarfile", deb], capture_output=True, check=True).stdout
            self.assertIn(b"conffiles", conffiles)

            sim = subprocess.run(["apt-get", "install", "--simulate", "-q", deb], capture_output=True, text=True,
                                 timeout=120)
            self.assertEqual(sim.returncode, 0, sim.stdout + sim.stderr)
            self.assertRegex(sim.stdout, r"(?m)^Inst uroce ")

            scratch = os.path.join(tmp, "root")
            for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers"):
                os.makedirs(os.path.join(scratch, d))
            for f in ("status", "available"):
                open(os.path.join(scratch, "var/lib/dpkg", f), "w").close()
            dpkg = ["dpkg", f"--root={scratch}", "--force-depends", "--force-not-root"]
            r = subprocess.run(dpkg + ["--install", deb], capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            check_files(self, scratch, where)
            r = subprocess.run(dpkg + ["--purge", "uroce"], capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            for what, path in where.items():
                if not what.startswith("_"):
                    self.assertFalse(os.path.exists(rooted(scratch, path)), f"{path} left after purge")


def main():
    global BUILD, SOURCE
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["layout", "deb"], required=True)
    ap.add_argument("build_root")
    ap.add_argument("source_root")
    args = ap.parse_args()
    BUILD, SOURCE = os.path.abspath(args.build_root), os.path.abspath(args.source_root)
    if args.part == "deb":
        missing = [t for t in ("dpkg-deb", "dpkg-shlibdeps", "apt-get") if shutil.which(t) is None]
        if missing:
            print(f"SKIP: not installed: {', '.join(missing)} (tools/setup.sh installs dpkg-dev)")
            return SKIP
        if build_option("prefix") != "/usr":
            print(f"SKIP: this build's prefix is {build_option('prefix')}; a package is built from "
                  "--prefix=/usr (tools/make-deb.sh configures its own build-deb/ so)")
            return SKIP
    case = LayoutTests if args.part == "layout" else DebTests
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stderr).run(
        unittest.TestLoader().loadTestsFromTestCase(case))
    for test, reason in result.skipped:
        print(f"skipped: {test.id()}: {reason}")
    if result.wasSuccessful() and len(result.skipped) == result.testsRun:
        return SKIP
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
