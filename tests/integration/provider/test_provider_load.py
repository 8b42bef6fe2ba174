#!/usr/bin/env python3
"""Stock libibverbs loads liburoce-rdmav34.so with no kernel RDMA at all.

Builds the sysfs-style tree uroced publishes (docs/daemon.md, "What it publishes")
in a temporary SYSFS_PATH, makes the device node /dev/infiniband/uverbs_uroce0
(a symlink to /dev/null), then runs the unmodified ibverbs-utils with
RDMAV_DRIVERS pointing at the plugin and checks what they report: the device
is listed, and with no uroced behind the tree opening it fails cleanly.

The device node is made one of two ways:
  direct   as root, in the real /dev (removed afterwards if this test made it)
  unshare  in a private user and mount namespace (`unshare -Urm`) with a
           tmpfs on /dev holding null, zero, random, urandom and the symlink:
           what an unprivileged user does
`--mode auto` (the default) takes direct when it can, else unshare.

Usage: test_provider_load.py [--mode auto|direct|unshare] [--preload LIBS] PLUGIN
PLUGIN is the path of liburoce-rdmav34.so. Exit 77 (skipped) with a reason
when the environment cannot run the test.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
PLUGIN_SUFFIX = "-rdmav34.so"
IBDEV = "uroce0"
UVERBS = "uverbs_" + IBDEV
NODE_DIR = "/dev/infiniband"
NODE = os.path.join(NODE_DIR, UVERBS)

# The device as uroced would publish it: the GUID and GID layout follow
# emulator/device/gid_table.h (link-local v1 and v2, then an IPv4-mapped v2
# address, then empty entries up to the table length of 16).
NODE_GUID = "0200:00ff:fe00:0001"
GID_TABLE_LENGTH = 16
GIDS = [
    ("fe80:0000:0000:0000:0000:00ff:fe00:0001", "IB/RoCE v1"),
    ("fe80:0000:0000:0000:0000:00ff:fe00:0001", "RoCE v2"),
    ("0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2"),
]
EMPTY_GID = "0000:0000:0000:0000:0000:0000:0000:0000"

# Run inside `unshare -Urm`: keep the host's /dev reachable under $1, cover
# /dev with a tmpfs, bind the few nodes programs need back in and add the
# device node. Then run the command ("$@" after the first argument).
UNSHARE_SETUP = r"""
hostdev="$1"; shift
mkdir -p "$hostdev"
mount --rbind /dev "$hostdev"  # recursive: a plain bind of /dev with submounts is refused here
mount -t tmpfs -o mode=755 tmpfs /dev
for n in null zero random urandom; do
    touch "/dev/$n"
    mount --bind "$hostdev/$n" "/dev/$n"
done
mkdir /dev/infiniband
ln -s /dev/null "/dev/infiniband/$UROCE_UVERBS"
exec "$@"
"""


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(SKIP)


def write(path, content):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="ascii") as f:
        f.write(content + "\n")


def build_tree(root):
    """The files libibverbs 44 reads, as in the shared doc's table."""
    verbs = os.path.join(root, "class/infiniband_verbs")
    write(os.path.join(verbs, "abi_version"), "6")
    write(os.path.join(verbs, UVERBS, "ibdev"), IBDEV)
    write(os.path.join(verbs, UVERBS, "dev"), "0:0")  # 0:0: no major:minor check
    write(os.path.join(verbs, UVERBS, "abi_version"), "1")  # the provider's kDeviceAbiVersion
    ib = os.path.join(root, "class/infiniband", IBDEV)
    write(os.path.join(ib, "node_type"), "1: CA")
    write(os.path.join(ib, "node_guid"), NODE_GUID)
    write(os.path.join(ib, "board_id"), "uroce provider test")
    # Where uroced's socket would be; nothing listens there.
    write(os.path.join(ib, "uroce_control_socket"), os.path.join(root, "no-daemon.sock"))
    port = os.path.join(ib, "ports/1")
    write(os.path.join(port, "pkeys/0"), "0xffff")
    for i in range(GID_TABLE_LENGTH):
        gid, gid_type = GIDS[i] if i < len(GIDS) else (EMPTY_GID, "")
        write(os.path.join(port, "gids", str(i)), gid)
        write(os.path.join(port, "gid_attrs/types", str(i)), gid_type)


class DeviceNode:
    """/dev/infiniband/uverbs_uroce0 in the real /dev; undone on exit."""

    def __init__(self):
        self.created_node = False
        self.created_dir = False

    def make(self):
        if os.path.lexists(NODE):
            if os.path.realpath(NODE) != "/dev/null":
                skip(f"{NODE} exists and is not /dev/null; leaving it alone")
            return  # someone else's (a running uroced): use it, keep it
        if not os.path.isdir(NODE_DIR):
            os.mkdir(NODE_DIR)
            self.created_dir = True
        os.symlink("/dev/null", NODE)
        self.created_node = True

    def remove(self):
        if self.created_node:
            os.unlink(NODE)
        if self.created_dir:
            try:
                os.rmdir(NODE_DIR)
            except OSError:
                pass  # something else was put there meanwhile


def can_make_node():
    if os.geteuid() != 0:
        return False
    if os.path.lexists(NODE):
        return True
    parent = NODE_DIR if os.path.isdir(NODE_DIR) else "/dev"
    return os.access(parent, os.W_OK)


def unshare_works():
    try:
        r = subprocess.run(["unshare", "-Urm", "true"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


class Runner:
    def __init__(self, mode, env, workdir):
        self.mode = mode
        self.env = env
        self.workdir = workdir

    def run(self, argv, extra_env=None):
        env = dict(self.env)
        env.update(extra_env or {})
        if self.mode == "unshare":
            hostdev = os.path.join(self.workdir, "hostdev")
            argv = ["unshare", "-Urm", "sh", "-ec", UNSHARE_SETUP, "sh", hostdev] + argv
            env["UROCE_UVERBS"] = UVERBS
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
        print(f"$ {' '.join(argv[-3:])}  (exit {r.returncode})")
        print(r.stdout, end="")
        print(r.stderr, end="", file=sys.stderr)
        return r


class Checks:
    def __init__(self):
        self.failures = []

    def expect(self, ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            self.failures.append(what)

    def field(self, text, name, value):
        """`name: value` as ibv_devinfo prints it (tabs between)."""
        m = re.search(r"^\s*" + re.escape(name) + r":\s*(.*?)\s*$", text, re.M)
        got = m.group(1) if m else None
        self.expect(got == value, f"{name}: {value!r} (got {got!r})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["auto", "direct", "unshare"], default="auto")
    ap.add_argument("--preload", default="", help="sanitizer runtimes the plugin needs, ':'-separated")
    ap.add_argument("plugin")
    args = ap.parse_args()

    plugin = os.path.abspath(args.plugin)
    if not plugin.endswith(PLUGIN_SUFFIX) or not os.path.isfile(plugin):
        print(f"FAIL: {plugin} is not a built *{PLUGIN_SUFFIX}")
        return 1
    tools = {t: shutil.which(t) for t in ("ibv_devices", "ibv_devinfo")}
    if not all(tools.values()):
        skip("ibverbs-utils (ibv_devices, ibv_devinfo) not installed")

    mode = args.mode
    if mode == "auto":
        mode = "direct" if can_make_node() else "unshare"
    if mode == "direct" and not can_make_node():
        skip(f"not root, or {NODE_DIR} cannot be created")
    if mode == "unshare" and not unshare_works():
        skip("`unshare -Urm` is not permitted here (user namespaces disabled?)")
    print(f"mode: {mode}")

    workdir = tempfile.mkdtemp(prefix="uroce_provider_")
    sysfs = os.path.join(workdir, "sys")
    node = DeviceNode()
    checks = Checks()
    try:
        build_tree(sysfs)
        if mode == "direct":
            node.make()

        env = dict(os.environ)
        env["SYSFS_PATH"] = sysfs
        env["IBV_SHOW_WARNINGS"] = "1"
        if args.preload:
            env["LD_PRELOAD"] = args.preload
            env["ASAN_OPTIONS"] = "detect_leaks=0"  # the tools' own allocations
        runner = Runner(mode, env, workdir)
        drivers = {"RDMAV_DRIVERS": plugin[: -len(PLUGIN_SUFFIX)]}  # libibverbs appends the suffix

        # Without our plugin no provider claims the device: what follows is ours.
        r = runner.run([tools["ibv_devices"]])
        checks.expect(r.returncode == 0 and IBDEV not in r.stdout, f"without RDMAV_DRIVERS {IBDEV} is not listed")

        r = runner.run([tools["ibv_devices"]], drivers)
        checks.expect(r.returncode == 0, "ibv_devices exits 0")
        checks.expect(re.search(r"^\s*" + IBDEV + r"\s+020000fffe000001\s*$", r.stdout, re.M) is not None,
                      f"ibv_devices lists {IBDEV} with node GUID 020000fffe000001")
        checks.expect("couldn't load driver" not in r.stderr, "the plugin loads")

        # No uroced behind this tree: the control socket it names does not
        # exist, so opening the device must fail cleanly (no crash, a clear
        # error), the attributes being the daemon's to give (the values are
        # checked against a real daemon in test_provider_daemon.py).
        r = runner.run([tools["ibv_devinfo"], "-v", "-d", IBDEV], drivers)
        checks.expect(r.returncode > 0, f"ibv_devinfo without a daemon fails cleanly (exit {r.returncode})")
        checks.expect("Failed to open device" in r.stderr, "... reporting that the device cannot be opened")
    finally:
        node.remove()
        shutil.rmtree(workdir, ignore_errors=True)

    if node.created_node:
        checks.expect(not os.path.lexists(NODE), f"{NODE} removed again")
    if checks.failures:
        print(f"{len(checks.failures)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
