#!/usr/bin/env python3
"""uroce against the kernel's rdma_rxe in one QEMU guest, on one veth pair:
issue 16's first two targets (bandwidth and 64 B message rate >= 1.5x rxe,
2 B latency <= 1.0x rxe's), measured as ratios from one run.

usage: sudo tools/bench/guest_vs_rxe.py [--build-dir build-test] [--runs 6] [--seconds 2] [--lat-iters 1000]
                                        [--one-daemon] [--daemon-arg=--realtime-priority=0 ...]
                                        [--cache /var/cache/uroce-guestbench] [--json FILE]

The guest is the interop suite's (tests/interop/guest: Debian 12's kernel,
TCG with 2 vCPUs, busybox, the stock perftest) plus uroced, uroce, the
provider, the preload library and the DPDK af_packet PMD with their shared
libraries, laid out as a build tree under /opt/uroce so `uroce exec` finds
the provider there. Inside it, one veth pair gbA/gbB in the initial network
namespace carries both sides (docs/interop.md, "uroce against rdma_rxe in
one guest", says why the initial namespace and how rxe's packets are made
to cross the veth):
  rxe    rxe_a on gbA (10.88.0.1), rxe_b on gbB (10.88.0.2);
  uroce  one uroced per end on net_af_packet (10.88.1.1 on gbA, 10.88.1.2 on
         gbB, addresses the guest kernel does not own), each with its default
         SCHED_FIFO loop, started for each uroce round and stopped after it
         (their af_packet sockets would otherwise copy every rxe frame).
         --one-daemon: one uroced serves both devices (uroce_b is its
         --device), so the guest's two vCPUs carry one daemon thread, not
         two; --daemon-arg passes an argument to every uroced (e.g.
         --realtime-priority=0 for a SCHED_OTHER loop).
The same perftest runs on both: ib_{write,read,send}_bw -s 65536 and
ib_write_bw -s 64 (-D SECONDS), ib_{write,send,read}_lat -s 2 (-n LAT_ITERS),
-m 1024 -F, server on the gbA side, client on the gbB side. Rounds alternate
which side goes first; the table has the medians of RUNS runs, the ratio
uroce/rxe and issue 16's target beside it.

Exit 77 with the reason when a piece is missing (not root, no QEMU, the
kernel .deb, perftest, or uroce not built with DPDK).
"""

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.join(ROOT, "tests", "interop", "guest"))
import build_guest  # noqa: E402
import guest as guest_mod  # noqa: E402
import uroce_harness as harness  # noqa: E402

SKIP = 77
MULTIARCH = "/usr/lib/x86_64-linux-gnu"
PMD_DIR = MULTIARCH + "/dpdk/pmds-23.0"
# The EAL dlopens every driver in its plugin directory; the guest's holds
# only what an af_packet port needs: the PMD, the vdev bus it sits on and
# the ring mempool handler the EAL's default mempool ops name.
PMDS = ["librte_net_af_packet", "librte_bus_vdev", "librte_mempool_ring"]
GUEST_TREE = "/opt/uroce"  # a build tree's layout, so `uroce exec` finds the provider
BUILT = {
    "tools/uroced/uroced": "the daemon",
    "tools/uroce/uroce": "the CLI",
    "verbs_provider/liburoce-rdmav34.so": "the provider",
    "verbs_provider/liburoce-preload.so": "the preload library",
}

WIRE = {"a": {"dev": "gbA", "rxe_ip": "10.88.0.1", "uroce_ip": "10.88.1.1"},
        "b": {"dev": "gbB", "rxe_ip": "10.88.0.2", "uroce_ip": "10.88.1.2"}}
# iproute2's: the guest's busybox sh runs its own applets before PATH, and
# busybox ip made no gbB of `link add gbA type veth peer name gbB`.
IP = "/usr/bin/ip"
PATH_MTU = 1024  # both devices' active MTU on a 1500-byte veth
JOB_SECONDS = 240  # one perftest pair under TCG on a loaded machine

# (label, program, size, kind, issue 16's target for uroce/rxe)
TESTS = [
    ("WRITE 64 KiB bandwidth (MB/s)", "ib_write_bw", 65536, "bw", ">= 1.5"),
    ("READ 64 KiB bandwidth (MB/s)", "ib_read_bw", 65536, "bw", ">= 1.5"),
    ("SEND 64 KiB bandwidth (MB/s)", "ib_send_bw", 65536, "bw", ">= 1.5"),
    ("WRITE 64 B message rate (Mpps)", "ib_write_bw", 64, "rate", ">= 1.5"),
    ("WRITE 2 B latency (us)", "ib_write_lat", 2, "lat", "<= 1.0"),
    ("SEND 2 B latency (us)", "ib_send_lat", 2, "lat", "<= 1.0"),
    ("READ 2 B latency (us)", "ib_read_lat", 2, "lat", "<= 1.0"),
]
SIDES = ["rxe", "uroce"]


class Missing(Exception):
    pass


def ip_hex(ip):
    o = [int(x) for x in ip.split(".")]
    return "%02x%02x:%02x%02x" % tuple(o)


# ---------------------------------------------------------------- the guest


def built_files(build_dir):
    paths = {}
    for rel, what in BUILT.items():
        p = os.path.join(build_dir, rel)
        if not os.path.exists(p):
            raise Missing(f"{what} {p} is not built (ninja -C {build_dir})")
        paths[rel] = p
    if "librte_eal" not in subprocess.run(["ldd", paths["tools/uroced/uroced"]], capture_output=True,
                                          text=True).stdout:
        raise Missing("uroced is built without DPDK (no net_af_packet port)")
    for pmd in PMDS:
        if not os.path.exists(os.path.join(PMD_DIR, pmd + ".so")):
            raise Missing(f"{PMD_DIR}/{pmd}.so not installed")
    return paths


def copy_keeping_links(root, path):
    """Copies `path` into `root` as the same chain of symlinks ending in the
    same file, so a library the loader reaches by two names (the EAL's plugin
    directory and the library directory) stays one object in the guest."""
    seen = 0
    while seen < 16:
        seen += 1
        dest = os.path.join(root, path.lstrip("/"))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if os.path.lexists(dest):
            return
        if os.path.islink(path):
            target = os.readlink(path)
            os.symlink(target, dest)
            path = os.path.normpath(os.path.join(os.path.dirname(path), target))
        else:
            shutil.copy2(path, dest)
            return


def guest_files(paths):
    """What customize() adds: (host path, guest path) of our binaries, and
    every library they and the PMDs load."""
    pmd_files = [os.path.join(PMD_DIR, pmd + ".so") for pmd in PMDS]
    libs = build_guest.shared_library_closure(list(paths.values()) + pmd_files)
    return pmd_files, libs


def customize(paths):
    def add(root):
        for rel, p in paths.items():
            dest = os.path.join(root, GUEST_TREE.lstrip("/"), rel)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copy2(p, dest)
        os.makedirs(os.path.join(root, GUEST_TREE.lstrip("/"), "meson-info"), exist_ok=True)
        pmd_files, libs = guest_files(paths)
        for lib in sorted(libs):
            # ldd names /lib/x86_64-linux-gnu/...; the guest's /lib is /usr/lib.
            real = re.sub(r"^/lib(64)?/", r"/usr/lib\1/", lib)
            copy_keeping_links(root, real if os.path.lexists(real) else lib)
        for f in pmd_files:
            copy_keeping_links(root, f)
    return add


def fingerprint(deb, paths):
    h = hashlib.sha256()
    for p in [deb, os.path.abspath(__file__), build_guest.__file__,
              os.path.join(os.path.dirname(build_guest.__file__), "init.sh"), *paths.values()]:
        st = os.stat(p)
        h.update(f"{p} {st.st_size} {st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def build_image(cache, paths):
    os.makedirs(cache, exist_ok=True)
    try:
        deb = build_guest.newest_kernel_deb()
    except build_guest.Missing as e:
        raise Missing(str(e))
    stamp = os.path.join(cache, "stamp")
    want = fingerprint(deb, paths)
    if not (os.path.exists(stamp) and open(stamp).read() == want):
        print(f"guest: building from {os.path.basename(deb)} into {cache}", file=sys.stderr)
        try:
            build_guest.build(cache, deb, extra_modules=["veth"], customize=customize(paths))
        except build_guest.Missing as e:
            raise Missing(str(e))
        with open(stamp, "w") as f:
            f.write(want)
    return os.path.join(cache, "vmlinuz"), os.path.join(cache, "initramfs.cpio")


class BenchGuest(guest_mod.Guest):
    netns_prefix = "ns-guestbench-"
    # A guest starved of host CPU (TCG at nice 15 beside builds) can fail
    # the kernel's check that the IO-APIC timer ticks, and panic at boot
    # ("IO-APIC + timer doesn't work"); the check proves nothing here.
    extra_append = "no_timer_check"
    # Debian's DPDK is built for RTE_MACHINE corei7 (SSE4.2, rte_build_config.h);
    # on TCG's default qemu64 CPU (no SSSE3/SSE4) librte_eal's constructors
    # die with an invalid opcode before uroced's main(). Nehalem is the
    # model with exactly those extensions; rxe runs on the same CPU.
    cpu_model = "Nehalem"


# A TCG boot at nice 15 on a busy 2-core machine has taken more than the
# interop suite's 180 s.
guest_mod.BOOT_SECONDS = 600


# ------------------------------------------------------------- guest scripts


def wire_script():
    """The veth pair and rxe's devices (docs/interop.md says why this shape).
    Prints the GID index of each rxe device's IPv4 RoCE v2 GID."""
    a, b = WIRE["a"], WIRE["b"]
    lines = [
        "set -e",
        "mkdir -p /var/run /dev/shm",
        "grep -q ' /dev/shm ' /proc/mounts || mount -t tmpfs shm /dev/shm",
        f"{IP} link add {a['dev']} type veth peer name {b['dev']}",
    ]
    for side, peer, table in (("a", "b", 101), ("b", "a", 102)):
        s, p = WIRE[side], WIRE[peer]
        lines += [
            f"echo 1 > /proc/sys/net/ipv6/conf/{s['dev']}/disable_ipv6 2>/dev/null || true",
            f"echo 1 > /proc/sys/net/ipv4/conf/{s['dev']}/accept_local",
            f"echo 0 > /proc/sys/net/ipv4/conf/{s['dev']}/rp_filter",
            f"{IP} addr add {s['rxe_ip']}/24 dev {s['dev']}",
            f"{IP} link set {s['dev']} up",
            # Locally sent packets to the peer's address leave by this end.
            f"{IP} route add {p['rxe_ip']}/32 dev {s['dev']} src {s['rxe_ip']} table {table}",
            f"{IP} rule add pref {table - 90} iif lo to {p['rxe_ip']}/32 lookup {table}",
        ]
    lines += [
        "echo 0 > /proc/sys/net/ipv4/conf/all/rp_filter",
        # The local table after those rules, so they win for locally sent
        # packets; arriving ones match no iif-lo rule and are delivered.
        f"{IP} rule add pref 100 lookup local",
        f"{IP} rule del pref 0 lookup local",
        f"{IP} neigh replace {b['rxe_ip']} lladdr $(cat /sys/class/net/{b['dev']}/address) dev {a['dev']} nud permanent",
        f"{IP} neigh replace {a['rxe_ip']} lladdr $(cat /sys/class/net/{a['dev']}/address) dev {b['dev']} nud permanent",
        f"rdma link add rxe_a type rxe netdev {a['dev']}",
        f"rdma link add rxe_b type rxe netdev {b['dev']}",
        "set +e",
        GID_INDEX_SH,
        f"echo GID rxe_a $(gid_index /sys rxe_a {ip_hex(a['rxe_ip'])})",
        f"echo GID rxe_b $(gid_index /sys rxe_b {ip_hex(b['rxe_ip'])})",
        f"{IP} route get {b['rxe_ip']} from {a['rxe_ip']}",
        f"{IP} rule",
    ]
    return "\n".join(lines)


GID_INDEX_SH = r"""
gid_index() {  # SYSFS DEVICE IPV4-HEX: the index of that RoCE v2 GID
  d=$1/class/infiniband/$2/ports/1
  n=0
  while [ -e "$d/gids/$n" ]; do
    if [ "$(cat $d/gids/$n)" = "0000:0000:0000:0000:0000:ffff:$3" ] && \
       [ "$(cat $d/gid_attrs/types/$n 2>/dev/null)" = "RoCE v2" ]; then echo $n; return; fi
    n=$((n + 1))
  done
  echo none
}"""


def state_dir(side):
    return f"/run/uroce-{side}"


def daemon_args(side, one_daemon, extra):
    """uroced's arguments for `side`'s device: with one_daemon, side a's
    daemon serves side b's device too (--device) and b has no daemon."""
    w = WIRE[side]
    argv = [f"--port net_af_packet0,iface={w['dev']}", f"--ip {w['uroce_ip']}", f"--name uroce_{side}",
            f"--state-dir {state_dir(side)}"]
    if one_daemon:
        b = WIRE["b"]
        argv.append(f"--device name=uroce_b,port=net_af_packet1,iface={b['dev']},ip={b['uroce_ip']},"
                    f"state-dir={state_dir('b')}")
    return " ".join(argv + list(extra))


def daemons_up_script(one_daemon=False, extra=()):
    lines = ["set -e"]
    started = ("a",) if one_daemon else ("a", "b")
    for side in ("a", "b"):
        lines.append(f"rm -rf {state_dir(side)}; mkdir -p {state_dir(side)}")
    for side in started:
        lines.append(f"start_{side}() {{ {GUEST_TREE}/tools/uroced/uroced {daemon_args(side, one_daemon, extra)}"
                     f" > {state_dir(side)}.log 2>&1 & pid_{side}=$!; echo PID {side} $!; }}")
        lines.append(f"start_{side}; tries_{side}=1")
    if one_daemon:
        lines.append("pid_b=$pid_a; tries_b=4; start_b() { :; }")  # b's device lives in a's daemon
    for side in ("a", "b"):
        # Polls rather than `uroce status --wait`: a daemon that died (a
        # signal before main() logs nothing) is reported at once, with its
        # exit status and the kernel's word on it.
        log = f"{state_dir(side)}.log"
        lines += [
            "n=0",
            f"until {GUEST_TREE}/tools/uroce/uroce status --state-dir {state_dir(side)} --device uroce_{side}"
            " > /dev/null 2>&1; do",
            f"  if ! kill -0 $pid_{side} 2>/dev/null; then",
            f"    rc=0; wait $pid_{side} || rc=$?",
            # DPDK 22.11's af_packet PMD names its PACKET_FANOUT group
            # (getpid() ^ ifindex) & 0xffff in the namespace: two daemons
            # on two interfaces collide when their PIDs differ as their
            # ifindexes do, and the second gets EINVAL. Another PID
            # (a restart) gets another group.
            f"    if grep -q 'could not set PACKET_FANOUT' {log} && [ $tries_{side} -lt 4 ]; then",
            f"      echo \"uroced uroce_{side}: af_packet fanout group taken (PID $pid_{side}), restarting\";"
            f" tries_{side}=$((tries_{side} + 1)); start_{side}; continue",
            "    fi",
            f"    echo \"uroced uroce_{side} exited with status $rc (above 128: killed by signal rc-128)\";"
            f" cat {log}; dmesg | tail -3; exit 1",
            "  fi",
            f"  n=$((n + 1)); [ $n -lt 600 ] || {{ echo 'uroced uroce_{side}: no control socket after 300 s';"
            f" cat {log}; grep -h '^State\\|^Threads' /proc/$pid_{side}/status; cat /proc/$pid_{side}/wchan; echo;"
            " exit 1; }",
            "  usleep 500000",
            "done",
        ]
    lines.append("set +e")
    lines.append(GID_INDEX_SH)
    for side in ("a", "b"):
        lines.append(f"echo GID uroce_{side} $(gid_index {state_dir(side)}/sys uroce_{side}"
                     f" {ip_hex(WIRE[side]['uroce_ip'])})")
    return "\n".join(lines)


def perftest_script(side, gids, program, size, kind, port, seconds, lat_iters):
    devs = {"rxe": ("rxe_a", "rxe_b"), "uroce": ("uroce_a", "uroce_b")}[side]
    common = f"-m {PATH_MTU} -F -p {port} -s {size} " + (f"-D {seconds}" if kind != "lat" else f"-n {lat_iters}")

    def cmd(dev, end):
        prefix = (f"{GUEST_TREE}/tools/uroce/uroce exec --state-dir {state_dir(end)} -- "
                  if side == "uroce" else "")
        return f"{prefix}{program} -d {dev} -x {gids[dev]} {common}"

    listen = ":%04X 00000000:0000 0A" % port
    return "\n".join([
        f"{cmd(devs[0], 'a')} > /tmp/server.{port} 2>&1 &",
        "srv=$!",
        "n=0",
        f"until grep -q '{listen}' /proc/net/tcp; do",
        f"  kill -0 $srv 2>/dev/null || {{ echo server exited; cat /tmp/server.{port}; exit 1; }}",
        "  n=$((n + 1)); [ $n -lt 1200 ] || { echo server not listening; kill $srv; exit 1; }",
        "  usleep 50000",
        "done",
        f"{cmd(devs[1], 'b')} 127.0.0.1",
        "rc=$?",
        "wait $srv; src=$?",
        f"echo '--- server'; cat /tmp/server.{port}",
        "[ $rc -eq 0 ] && [ $src -eq 0 ]",
    ])


# -------------------------------------------------------------- measurement


def run_job(g, script, label, seconds=JOB_SECONDS):
    rc, out = g.run(script, seconds=seconds, label=label)
    if rc != 0:
        raise RuntimeError(f"guest job {label} {'timed out' if rc is None else f'exited {rc}'}:\n{out[-3000:]}")
    return out


def gids_from(out):
    gids = dict(re.findall(r"^GID (\S+) (\d+)$", out, re.M))
    return gids


def figure(out, kind):
    row = harness.perftest_row(out)
    if row is None:
        return None
    if kind == "bw":
        return next(v for k, v in row.items() if k.startswith("BW average"))
    if kind == "rate":
        return row.get("MsgRate[Mpps]")
    return row.get("t_typical[usec]")


class Daemons:
    def __init__(self, g, one_daemon, extra):
        self.g = g
        out = run_job(g, daemons_up_script(one_daemon, extra), "uroced-up", seconds=700)
        # The last PID of each side: a daemon restarted after a fanout
        # clash printed one line per start.
        self.pids = list(dict(re.findall(r"^PID (\S+) (\d+)$", out, re.M)).values())
        self.gids = gids_from(out)
        if set(self.gids) != {"uroce_a", "uroce_b"} or "none" in self.gids.values():
            self.close()
            raise RuntimeError(f"no uroce GIDs:\n{out}")

    def close(self):
        if self.pids:
            run_job(self.g, "\n".join([f"kill {p}" for p in self.pids] + [
                f"while kill -0 {p} 2>/dev/null; do usleep 50000; done" for p in self.pids]), "uroced-down", 120)
            self.pids = []


def measure(g, rxe_gids, args):
    results = {side: {t[0]: [] for t in TESTS} for side in SIDES}
    errors = []
    port = 18500
    for rnd in range(args.runs):
        order = SIDES if rnd % 2 == 0 else SIDES[::-1]
        for side in order:
            daemons = Daemons(g, args.one_daemon, args.daemon_arg) if side == "uroce" else None
            gids = daemons.gids if daemons else rxe_gids
            try:
                for label, program, size, kind, _ in TESTS:
                    port += 1
                    script = perftest_script(side, gids, program, size, kind, port, args.seconds, args.lat_iters)
                    rc, out = g.run(script, seconds=JOB_SECONDS, label=f"{side}-{program}-{size}")
                    value = figure(out, kind) if rc == 0 else None
                    if value is None:
                        errors.append(f"round {rnd + 1} {side} {label}: rc {rc}\n{out[-1500:]}")
                    else:
                        results[side][label].append(value)
                    print(f"round {rnd + 1}/{args.runs} {side:5} {label:32} {value}", file=sys.stderr, flush=True)
            finally:
                if daemons:
                    daemons.close()
    return results, errors


def median(values):
    return statistics.median(values) if values else None


def table(results, runs, load, shape):
    out = ["| figure | rxe | uroce | uroce / rxe | target |", "|---|---|---|---|---|"]
    for label, _, _, kind, target in TESTS:
        r, u = median(results["rxe"][label]), median(results["uroce"][label])
        fmt = (lambda v: f"{v:.3f}") if kind == "rate" else (lambda v: f"{v:.1f}")
        # perftest prints inf for a latency its clock could not measure.
        ratio = f"{u / r:.2f}x" if r and u and math.isfinite(r) and math.isfinite(u) else "-"
        out.append(f"| {label} | {fmt(r) if r else '-'} | {fmt(u) if u else '-'} | {ratio} | {target} |")
    out.append("")
    out.append(f"medians of {runs} runs each (rounds alternate which side goes first); host load average at the "
               f"start {load[0]:.1f}, at the end {load[1]:.1f}; uroce: {shape}")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build-test"))
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--seconds", type=int, default=2, help="ib_*_bw -D")
    ap.add_argument("--lat-iters", type=int, default=1000, help="ib_*_lat -n")
    ap.add_argument("--cache", default="/var/cache/uroce-guestbench")
    ap.add_argument("--one-daemon", action="store_true", help="one uroced serving both devices")
    ap.add_argument("--daemon-arg", action="append", default=[], metavar="ARG",
                    help="an argument for every uroced, e.g. --daemon-arg=--realtime-priority=0")
    ap.add_argument("--json")
    args = ap.parse_args()
    try:
        if os.geteuid() != 0:
            raise Missing("needs root (a network namespace and a tap for the guest)")
        if guest_mod.qemu_binary() is None:
            raise Missing("qemu-system-x86_64 not installed (tools/setup.sh installs qemu-system-x86)")
        paths = built_files(os.path.abspath(args.build_dir))
        vmlinuz, initramfs = build_image(args.cache, paths)
    except Missing as e:
        print(f"SKIP: {e}")
        return SKIP

    load_start = os.getloadavg()[0]
    g = BenchGuest(vmlinuz, initramfs, memory_mb=2048)
    try:
        print(f"guest: booted in {g.boot_seconds:.0f} s: {g.banner}", file=sys.stderr)
        out = run_job(g, wire_script(), "wire", seconds=120)
        rxe_gids = gids_from(out)
        if set(rxe_gids) != {"rxe_a", "rxe_b"} or "none" in rxe_gids.values():
            raise RuntimeError(f"no rxe GIDs:\n{out}")
        print(out, file=sys.stderr)
        results, errors = measure(g, rxe_gids, args)
    finally:
        g.close()
    load = (load_start, os.getloadavg()[0])
    shape = ("one uroced for both devices" if args.one_daemon else "one uroced per device") + \
        (f", uroced {' '.join(args.daemon_arg)}" if args.daemon_arg else "")
    print(table(results, args.runs, load, shape))
    for e in errors:
        print(f"\nfailed: {e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "errors": errors, "load": load}, f, indent=1)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
